//! `oprof events`: the hardware events of a `cpu_type`, like legacy `ophelp`.

use anyhow::{bail, Context, Result};
use oprofile_common::events::{write_counter_list, CpuModel, MODELS};
use std::fmt::Write;

/// Where the running system's `cpu_type` is.
pub const CPU_TYPE_FILE: &str = "/dev/oprofile/cpu_type";

/// The model for `cpu_type`, or for the mounted oprofilefs when `None`. `Ok(None)`: timer mode.
pub fn model(cpu_type: Option<&str>) -> Result<Option<&'static CpuModel>> {
    let known = || MODELS.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
    let t = match cpu_type {
        Some(t) => t.to_string(),
        None => std::fs::read_to_string(CPU_TYPE_FILE).with_context(|| {
            format!("no --cpu-type given and {CPU_TYPE_FILE} is not readable; known types: timer, {}", known())
        })?,
    };
    let t = t.trim();
    if t == "timer" {
        return Ok(None);
    }
    match CpuModel::by_cpu_type(t) {
        Some(m) => Ok(Some(m)),
        None => bail!("unknown cpu_type {t:?}; known types: timer, {}", known()),
    }
}

/// The `ophelp`-style listing of `model` (`None`: timer mode).
pub fn render(model: Option<&CpuModel>) -> String {
    let mut out = String::new();
    let Some(m) = model else {
        out.push_str("oprofile: cpu_type \"timer\": no hardware events.\n");
        out.push_str("Samples come from a per-CPU timer (module parameter timer_hz) as counter 0.\n");
        return out;
    };
    let _ = writeln!(out, "oprofile: available events for CPU type \"{}\" (cpu_type {})\n", m.label, m.name());
    let _ = writeln!(out, "Counters 0..{}; counter 0 is the cycle counter CCNT. Unit masks: none (0).", m.num_counters - 1);
    let _ = writeln!(out, "Write N/event (number), N/count (sampling period, or 0 to count only: N/total).\n");
    for e in m.events() {
        let mut ctrs = String::new();
        let _ = write_counter_list(&mut ctrs, m.counter_mask(e, m.num_counters));
        let _ = writeln!(out, "{}: (counter: {}) [event {:#04x}]", e.name, ctrs, e.number);
        let _ = writeln!(out, "\t{} (min count: {})", e.description, e.minimum);
    }
    out
}

/// All known cpu types, one per line.
pub fn list_types() -> String {
    let mut out = String::from("timer\ttimer interrupt (no hardware events)\n");
    for m in MODELS {
        let _ = writeln!(out, "{}\t{} ({} counters, perf PMU {})", m.name(), m.label, m.num_counters, m.pmu_name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_like_ophelp() {
        let a8 = model(Some("arm/armv7")).unwrap();
        let text = render(a8);
        assert!(text.contains("CPU_CYCLES: (counter: 0) [event 0xff]\n\tCPU cycle (cycle counter CCNT) (min count: 100000)"), "{text}");
        assert!(text.contains("L1D_CACHE_REFILL: (counter: 1, 2, 3, 4) [event 0x03]"), "{text}");
        assert!(text.contains("\"ARM Cortex-A8\""));
        assert_eq!(text.matches("(min count:").count(), a8.unwrap().events().count());
        assert!(model(Some("timer")).unwrap().is_none());
        assert!(render(None).contains("no hardware events"));
        let err = model(Some("i386/p4")).unwrap_err().to_string();
        assert!(err.contains("unknown cpu_type \"i386/p4\"") && err.contains("arm/armv7-ca15"), "{err}");
        assert!(list_types().contains("arm/armv7-ca7\tARM Cortex-A7 (5 counters, perf PMU armv7_cortex_a7)"));
    }
}
