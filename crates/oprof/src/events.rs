//! `oprof events`: the hardware events of a `cpu_type`, like legacy `ophelp`.

use anyhow::{bail, Context, Result};
use oprofile_common::events::{write_counter_list, CpuModel, Event, MODELS};
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

/// One event of an `--event` list placed on a counter.
#[derive(Debug, PartialEq)]
pub struct Placement {
    pub counter: u32,
    pub event: &'static Event,
    /// Sampling period; 0 = counting only.
    pub count: u64,
}

/// Places `NAME[:COUNT],...` on counters like `opcontrol`: each event on the lowest free
/// counter allowed for it. COUNT defaults to 100000 for `CPU_CYCLES` (legacy default event) and
/// to ten times the minimum otherwise. Errors name the offending item: unknown event, count below the minimum (0 = counting
/// only is fine), no free counter.
pub fn place(model: &CpuModel, spec: &str) -> Result<Vec<Placement>> {
    let mut used = 0u32;
    let mut out = vec![];
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, count) = match item.split_once(':') {
            Some((n, c)) => (n, Some(c.parse::<u64>().with_context(|| format!("event {item:?}: bad count {c:?}"))?)),
            None => (item, None),
        };
        let event = model
            .event_by_name(name)
            .with_context(|| format!("event {item:?}: no event {name:?} for {} (see `oprof events --cpu-type {}`)", model.name(), model.name()))?;
        let count = count.unwrap_or(if name == oprofile_common::events::DEFAULT_EVENT.0 {
            u64::from(oprofile_common::events::DEFAULT_EVENT.1)
        } else {
            u64::from(event.minimum) * 10
        });
        if count != 0 && count < u64::from(event.minimum) {
            bail!("event {item:?}: count {count} is below the minimum {} of {name} (0 = counting only)", event.minimum);
        }
        let free = model.counter_mask(event, model.num_counters) & !used;
        if free == 0 {
            bail!("event {item:?}: no free counter for {name} (allowed: {})", {
                let mut s = String::new();
                let _ = write_counter_list(&mut s, model.counter_mask(event, model.num_counters));
                s
            });
        }
        let counter = free.trailing_zeros();
        used |= 1 << counter;
        out.push(Placement { counter, event, count });
    }
    if out.is_empty() {
        bail!("no event given (e.g. CPU_CYCLES:100000)");
    }
    Ok(out)
}

/// The oprofilefs writes for `placements` (what `opcontrol --setup` does), as shell lines.
pub fn setup_script(model: &CpuModel, placements: &[Placement], dir: &str) -> String {
    let mut out = String::new();
    for c in 0..model.num_counters {
        let _ = writeln!(out, "echo 0 > {dir}/{c}/enabled");
    }
    for p in placements {
        let c = p.counter;
        let _ = writeln!(out, "# counter {c}: {} every {} events{}", p.event.name, p.count, if p.count == 0 { " (counting only)" } else { "" });
        for (file, v) in [("event", u64::from(p.event.number)), ("count", p.count), ("unit_mask", 0), ("kernel", 1), ("user", 1), ("enabled", 1)] {
            let _ = writeln!(out, "echo {v} > {dir}/{c}/{file}");
        }
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

    #[test]
    fn places_events_like_opcontrol() {
        let a8 = CpuModel::by_cpu_type("arm/armv7").unwrap();
        let p = place(a8, "L1D_CACHE_REFILL:5000, CPU_CYCLES ,INST_RETIRED:0").unwrap();
        let got: Vec<_> = p.iter().map(|p| (p.counter, p.event.name, p.count)).collect();
        assert_eq!(got, [(1, "L1D_CACHE_REFILL", 5000), (0, "CPU_CYCLES", 100_000), (2, "INST_RETIRED", 0)]);
        let sh = setup_script(a8, &p, "/dev/oprofile");
        assert!(sh.contains("echo 0 > /dev/oprofile/4/enabled\n"), "{sh}");
        assert!(sh.contains("echo 255 > /dev/oprofile/0/event\necho 100000 > /dev/oprofile/0/count\n"), "{sh}");
        let e = |s: &str| format!("{:#}", place(a8, s).unwrap_err());
        assert!(e("CPU_CYCLES:50").contains("count 50 is below the minimum 100000"));
        assert!(e("CPU_CYCLES,CPU_CYCLES").contains("no free counter for CPU_CYCLES (allowed: 0)"));
        assert!(e("NOPE:1000").contains("no event \"NOPE\" for arm/armv7"));
        assert!(e("CPU_CYCLES:x").contains("bad count \"x\""));
        assert!(e("").contains("no event given"));
        assert!(e("SW_INCR,SW_INCR,SW_INCR,SW_INCR,SW_INCR").contains("no free counter for SW_INCR (allowed: 1, 2, 3, 4)"));
    }
}
