//! `oprof events`: the hardware events of a `cpu_type`, like legacy `ophelp`.

use anyhow::{bail, Context, Result};
use oprofile_common::counter::{validate, CounterConfig};
use oprofile_common::events::{write_counter_list, CpuModel, Event, MODELS};
use std::fmt::Write;

/// Where the running system's `cpu_type` is.
pub const CPU_TYPE_FILE: &str = "/dev/oprofile/cpu_type";

/// The model for `cpu_type`, or for the mounted oprofilefs when `None`. `Ok(None)`: timer mode.
pub fn model(cpu_type: Option<&str>) -> Result<Option<&'static CpuModel>> {
    let known = || {
        MODELS
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let t = match cpu_type {
        Some(t) => t.to_string(),
        None => std::fs::read_to_string(CPU_TYPE_FILE).with_context(|| {
            format!(
                "no --cpu-type given and {CPU_TYPE_FILE} is not readable; known types: timer, {}",
                known()
            )
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
        out.push_str(
            "Samples come from a per-CPU timer (module parameter timer_hz) as counter 0.\n",
        );
        return out;
    };
    let _ = writeln!(
        out,
        "oprofile: available events for CPU type \"{}\" (cpu_type {})\n",
        m.label,
        m.name()
    );
    let _ = writeln!(
        out,
        "Counters 0..{}; counter 0 is the cycle counter {}. Unit masks: none (0).",
        m.num_counters - 1,
        m.cycle_counter
    );
    let _ = writeln!(
        out,
        "Write N/event (number), N/count (sampling period, or 0 to count only: N/total).\n"
    );
    for e in m.events() {
        let mut ctrs = String::new();
        let _ = write_counter_list(&mut ctrs, m.counter_mask(e, m.num_counters));
        let _ = writeln!(
            out,
            "{}: (counter: {}) [event {:#04x}]",
            e.name, ctrs, e.number
        );
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
    /// `N/unit_mask` (0 on ARMv7).
    pub unit_mask: u64,
    /// Count in kernel mode (`N/kernel`).
    pub kernel: bool,
    /// Count in user mode (`N/user`).
    pub user: bool,
}

impl Placement {
    /// The counter directory's values for this placement (enabled).
    pub fn config(&self) -> CounterConfig {
        CounterConfig {
            enabled: 1,
            event: u64::from(self.event.number),
            count: self.count,
            unit_mask: self.unit_mask,
            kernel: u64::from(self.kernel),
            user: u64::from(self.user),
        }
    }
}

/// Up to three event names of `model` close to `name` (typos, missing prefix or suffix), closest
/// first.
pub fn close_matches(model: &CpuModel, name: &str) -> Vec<&'static str> {
    let want = name.to_ascii_uppercase();
    let mut scored: Vec<(f64, &'static str)> = model
        .events()
        .filter_map(|e| {
            let sim = strsim::normalized_damerau_levenshtein(&want, e.name);
            let part = want.len() >= 3 && (e.name.contains(want.as_str()) || want.contains(e.name));
            let score = if part { sim.max(0.75) } else { sim };
            (score >= 0.7).then_some((score, e.name))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Parses a `0`/`1` flag of an event item.
fn flag(item: &str, what: &str, v: &str) -> Result<bool> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => bail!("event {item:?}: {what} must be 0 or 1, not {v:?}"),
    }
}

/// Places `NAME[:COUNT[:UNITMASK[:KERNEL[:USER]]]],...` (the `opcontrol --event` / `operf
/// --events` syntax) on counters like `opcontrol`: each event on the lowest free counter allowed
/// for it. COUNT defaults to 100000 for `CPU_CYCLES` (legacy default event) and to ten times the
/// minimum otherwise; UNITMASK to 0; KERNEL and USER to 1. Each placement is checked with the
/// module's own validation (`common::counter::validate`). Errors name the offending item: unknown
/// event (with close matches), bad or too small count, bad unit mask, KERNEL and USER both 0, no
/// free counter.
pub fn place(model: &CpuModel, spec: &str) -> Result<Vec<Placement>> {
    let mut used = 0u32;
    let mut out = vec![];
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut f = item.split(':');
        let name = f.next().unwrap_or_default();
        let count = f
            .next()
            .map(|c| {
                c.parse::<u64>()
                    .with_context(|| format!("event {item:?}: bad count {c:?}"))
            })
            .transpose()?;
        let unit_mask = f
            .next()
            .map(|u| {
                oprofile_common::parse::parse_ulong_in(u.as_bytes(), 0, u64::MAX)
                    .map_err(|_| anyhow::anyhow!("event {item:?}: bad unit mask {u:?}"))
            })
            .transpose()?
            .unwrap_or(0);
        let kernel = f
            .next()
            .map(|v| flag(item, "KERNEL", v))
            .transpose()?
            .unwrap_or(true);
        let user = f
            .next()
            .map(|v| flag(item, "USER", v))
            .transpose()?
            .unwrap_or(true);
        if f.next().is_some() {
            bail!("event {item:?}: too many fields (NAME[:COUNT[:UNITMASK[:KERNEL[:USER]]]])");
        }
        let Some(event) = model.event_by_name(name) else {
            let close = close_matches(model, name);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!("; did you mean {}?", close.join(", "))
            };
            bail!(
                "event {item:?}: no event {name:?} for {}{hint} (see `oprof events --cpu-type {}`)",
                model.name(),
                model.name()
            );
        };
        let count = count.unwrap_or(if name == oprofile_common::events::DEFAULT_EVENT.0 {
            u64::from(oprofile_common::events::DEFAULT_EVENT.1)
        } else {
            u64::from(event.minimum) * 10
        });
        let free = model.counter_mask(event, model.num_counters) & !used;
        if free == 0 {
            bail!(
                "event {item:?}: no free counter for {name} (allowed: {})",
                {
                    let mut s = String::new();
                    let _ =
                        write_counter_list(&mut s, model.counter_mask(event, model.num_counters));
                    s
                }
            );
        }
        let counter = free.trailing_zeros();
        let p = Placement {
            counter,
            event,
            count,
            unit_mask,
            kernel,
            user,
        };
        // The module's own check, on this counter alone.
        let mut configs = vec![CounterConfig::DEFAULT; model.num_counters as usize];
        if let Some(c) = configs.get_mut(counter as usize) {
            *c = p.config();
        }
        validate(model, &configs).map_err(|e| anyhow::anyhow!("event {item:?}: {e}"))?;
        used |= 1 << counter;
        out.push(p);
    }
    if out.is_empty() {
        bail!("no event given (e.g. CPU_CYCLES:100000)");
    }
    Ok(out)
}

/// The oprofilefs writes for `placements` (what `opcontrol --setup` does), in order, as
/// (file relative to the mount point, value): every counter disabled, then each placement's
/// `event count unit_mask kernel user enabled`.
pub fn counter_writes(model: &CpuModel, placements: &[Placement]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = (0..model.num_counters)
        .map(|c| (format!("{c}/enabled"), 0))
        .collect();
    for p in placements {
        let cfg = p.config();
        for (file, v) in [
            ("event", cfg.event),
            ("count", cfg.count),
            ("unit_mask", cfg.unit_mask),
            ("kernel", cfg.kernel),
            ("user", cfg.user),
            ("enabled", cfg.enabled),
        ] {
            out.push((format!("{}/{file}", p.counter), v));
        }
    }
    out
}

/// The oprofilefs writes for `placements` ([`counter_writes`]) as shell lines, with a comment per
/// counter.
pub fn setup_script(model: &CpuModel, placements: &[Placement], dir: &str) -> String {
    let mut out = String::new();
    for (file, v) in counter_writes(model, placements) {
        if let Some(p) = placements
            .iter()
            .find(|p| file == format!("{}/event", p.counter))
        {
            let _ = writeln!(
                out,
                "# counter {}: {} every {} events{}",
                p.counter,
                p.event.name,
                p.count,
                if p.count == 0 { " (counting only)" } else { "" }
            );
        }
        let _ = writeln!(out, "echo {v} > {dir}/{file}");
    }
    out
}

/// All known cpu types, one per line.
pub fn list_types() -> String {
    let mut out = String::from("timer\ttimer interrupt (no hardware events)\n");
    for m in MODELS {
        let _ = writeln!(
            out,
            "{}\t{} ({} counters, perf PMU {})",
            m.name(),
            m.label,
            m.num_counters,
            m.pmu_name
        );
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
        assert!(
            text.contains("L1D_CACHE_REFILL: (counter: 1, 2, 3, 4) [event 0x03]"),
            "{text}"
        );
        assert!(text.contains("\"ARM Cortex-A8\""));
        assert_eq!(
            text.matches("(min count:").count(),
            a8.unwrap().events().count()
        );
        assert!(model(Some("timer")).unwrap().is_none());
        assert!(render(None).contains("no hardware events"));
        let err = model(Some("i386/p4")).unwrap_err().to_string();
        assert!(
            err.contains("unknown cpu_type \"i386/p4\"") && err.contains("arm/armv7-ca15"),
            "{err}"
        );
        assert!(list_types()
            .contains("arm/armv7-ca7\tARM Cortex-A7 (5 counters, perf PMU armv7_cortex_a7)"));
    }

    #[test]
    fn places_events_like_opcontrol() {
        let a8 = CpuModel::by_cpu_type("arm/armv7").unwrap();
        let p = place(a8, "L1D_CACHE_REFILL:5000, CPU_CYCLES ,INST_RETIRED:0").unwrap();
        let got: Vec<_> = p
            .iter()
            .map(|p| (p.counter, p.event.name, p.count))
            .collect();
        assert!(p.iter().all(|p| p.unit_mask == 0 && p.kernel && p.user));
        assert_eq!(
            got,
            [
                (1, "L1D_CACHE_REFILL", 5000),
                (0, "CPU_CYCLES", 100_000),
                (2, "INST_RETIRED", 0)
            ]
        );
        let sh = setup_script(a8, &p, "/dev/oprofile");
        assert!(sh.contains("echo 0 > /dev/oprofile/4/enabled\n"), "{sh}");
        assert!(
            sh.contains("echo 255 > /dev/oprofile/0/event\necho 100000 > /dev/oprofile/0/count\n"),
            "{sh}"
        );
        let e = |s: &str| format!("{:#}", place(a8, s).unwrap_err());
        assert!(e("CPU_CYCLES:50").contains("count 50 is below the minimum 100000"));
        assert!(e("CPU_CYCLES,CPU_CYCLES").contains("no free counter for CPU_CYCLES (allowed: 0)"));
        assert!(e("NOPE:1000").contains("no event \"NOPE\" for arm/armv7"));
        assert!(e("CPU_CYCLES:x").contains("bad count \"x\""));
        assert!(e("").contains("no event given"));
        assert!(e("SW_INCR,SW_INCR,SW_INCR,SW_INCR,SW_INCR")
            .contains("no free counter for SW_INCR (allowed: 1, 2, 3, 4)"));
        // The opcontrol/operf fields: unit mask, kernel, user.
        let p = place(a8, "CPU_CYCLES:200000:0:1:0,L1D_CACHE_REFILL:500:0x0:0:1").unwrap();
        assert_eq!((p[0].unit_mask, p[0].kernel, p[0].user), (0, true, false));
        assert_eq!((p[1].count, p[1].kernel, p[1].user), (500, false, true));
        let w = counter_writes(a8, &p);
        assert_eq!(
            w[5..11]
                .iter()
                .map(|(f, v)| format!("{f}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            "0/event=255 0/count=200000 0/unit_mask=0 0/kernel=1 0/user=0 0/enabled=1"
        );
        assert!(
            e("CPU_CYCLES:100000:5").contains("unit_mask 0x5 is invalid"),
            "{}",
            e("CPU_CYCLES:100000:5")
        );
        assert!(e("CPU_CYCLES:100000:0:0:0").contains("kernel and user are both 0"));
        assert!(e("CPU_CYCLES:100000:0:2").contains("KERNEL must be 0 or 1, not \"2\""));
        assert!(e("CPU_CYCLES:100000:x").contains("bad unit mask \"x\""));
        assert!(e("CPU_CYCLES:100000:0:1:1:9").contains("too many fields"));
        // Close matches for a misspelt event.
        let m = e("CPU_CYCLE");
        assert!(
            m.contains("no event \"CPU_CYCLE\" for arm/armv7; did you mean CPU_CYCLES"),
            "{m}"
        );
        assert_eq!(
            close_matches(a8, "l1d_cache_refil").first(),
            Some(&"L1D_CACHE_REFILL")
        );
        assert_eq!(
            close_matches(a8, "INST_RETIRE").first(),
            Some(&"INST_RETIRED")
        );
        assert!(close_matches(a8, "QWERTYUIOP").is_empty());
    }

    #[test]
    fn armv8_cycles_go_to_pmccntr_first() {
        let a53 = model(Some("arm/armv8-ca53")).unwrap().unwrap();
        let text = render(Some(a53));
        assert!(
            text.contains("counter 0 is the cycle counter PMCCNTR_EL0"),
            "{text}"
        );
        assert!(
            text.contains("CPU_CYCLES: (counter: 0, 1, 2, 3, 4, 5, 6) [event 0x11]"),
            "{text}"
        );
        assert!(text.contains("L1D_CACHE_REFILL: (counter: 1, 2, 3, 4, 5, 6) [event 0x03]\n\tLevel 1 data cache refill (min count: 5000)"), "{text}");
        let p = place(a53, "L1D_CACHE_REFILL,CPU_CYCLES,CPU_CYCLES:200000").unwrap();
        let got: Vec<_> = p
            .iter()
            .map(|p| (p.counter, p.event.number, p.count))
            .collect();
        assert_eq!(
            got,
            [(1, 0x03, 50_000), (0, 0x11, 100_000), (2, 0x11, 200_000)]
        );
        assert!(
            list_types()
                .contains("arm/armv8-pmuv3-common\tARMv8 PMUv3 (7 counters, perf PMU armv8_pmuv3)"),
            "{}",
            list_types()
        );
        let e = format!("{:#}", place(a53, "INST_RETIRED:99999").unwrap_err());
        assert!(e.contains("count 99999 is below the minimum 100000"), "{e}");
    }
}
