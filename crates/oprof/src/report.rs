//! `oprof report`: attribute samples to images and symbols, like `opreport -l`.

use crate::stream::{self, Stream};
use crate::symbols::SymbolTable;
use anyhow::{bail, Context, Result};
use oprofile_common::events::CpuModel;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Where a sample was attributed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Key {
    pub image: String,
    pub symbol: String,
}

#[derive(Debug, Serialize)]
pub struct Row {
    /// Samples of every counter.
    pub samples: u64,
    pub percent: f64,
    pub image: String,
    pub symbol: String,
    /// Samples per counter (the sample's event word), when several counters sampled.
    pub per_event: BTreeMap<u64, u64>,
}

/// What one counter counted, from `--counter` (or just its number).
#[derive(Debug, Clone, Serialize)]
pub struct Counter {
    pub counter: u64,
    /// Event name, e.g. `CPU_CYCLES`; `event N` when not given.
    pub event: String,
    /// Sampling period in events, when given.
    pub count: Option<u64>,
}

impl Counter {
    /// Parses `N:EVENT[:COUNT]` (the event by name or number; a name is checked against
    /// `model` when given, a number is named from it).
    pub fn parse(spec: &str, model: Option<&CpuModel>) -> Result<Counter> {
        let mut it = spec.split(':');
        let (Some(n), Some(ev)) = (it.next(), it.next()) else {
            bail!("--counter {spec:?}: expected COUNTER:EVENT[:COUNT], e.g. 0:CPU_CYCLES:100000");
        };
        let counter = n.parse().with_context(|| format!("--counter {spec:?}: bad counter number {n:?}"))?;
        let count = it
            .next()
            .map(|c| c.parse::<u64>().with_context(|| format!("--counter {spec:?}: bad count {c:?}")))
            .transpose()?;
        if it.next().is_some() {
            bail!("--counter {spec:?}: too many fields (COUNTER:EVENT[:COUNT])");
        }
        let number = ev.strip_prefix("0x").map(|h| u64::from_str_radix(h, 16)).unwrap_or_else(|| ev.parse());
        let event = match (model, number) {
            (Some(m), Ok(num)) => m
                .event(num)
                .with_context(|| format!("--counter {spec:?}: event {num:#x} is not a {} event", m.name()))?
                .name
                .to_string(),
            (Some(m), Err(_)) => m
                .event_by_name(ev)
                .with_context(|| format!("--counter {spec:?}: no event {ev:?} for {} (see `oprof events`)", m.name()))?
                .name
                .to_string(),
            (None, Ok(num)) => format!("event {num:#x}"),
            (None, Err(_)) => ev.to_string(),
        };
        Ok(Counter { counter, event, count })
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub total: u64,
    pub kernel: u64,
    pub user: u64,
    /// Samples before any KERNEL_ENTER/EXIT record (mode unknown; legacy daemon drops them).
    pub no_context: u64,
    pub per_cpu: BTreeMap<u64, u64>,
    pub per_event: BTreeMap<u64, u64>,
    /// The counters that delivered samples (event words), described by `--counter` if given.
    pub counters: Vec<Counter>,
    pub rows: Vec<Row>,
}

pub const NO_SYMBOL: &str = "(no symbols)";

/// Builds the report; `vmlinux` resolves kernel PCs (without it they show as raw addresses' image);
/// `counters` names the counters (sample event words).
pub fn build(stream: &Stream, vmlinux: Option<&SymbolTable>, counters: &[Counter]) -> Result<Report> {
    let samples = stream::samples(stream)?;
    let mut counts: HashMap<Key, BTreeMap<u64, u64>> = HashMap::new();
    let mut r = Report {
        total: 0,
        kernel: 0,
        user: 0,
        no_context: 0,
        per_cpu: BTreeMap::new(),
        per_event: BTreeMap::new(),
        counters: vec![],
        rows: vec![],
    };
    for s in &samples {
        r.total += 1;
        *r.per_event.entry(s.event).or_default() += 1;
        if let Some(cpu) = s.ctx.cpu {
            *r.per_cpu.entry(cpu).or_default() += 1;
        }
        let key = match s.ctx.in_kernel {
            None => {
                r.no_context += 1;
                Key { image: "(no context)".into(), symbol: NO_SYMBOL.into() }
            }
            Some(true) => {
                r.kernel += 1;
                match vmlinux.and_then(|t| t.lookup(s.pc)) {
                    Some(sym) => Key { image: "vmlinux".into(), symbol: sym.name.clone() },
                    None if vmlinux.is_some() => {
                        Key { image: "(kernel, outside vmlinux)".into(), symbol: NO_SYMBOL.into() }
                    }
                    None => Key { image: "(kernel)".into(), symbol: NO_SYMBOL.into() },
                }
            }
            Some(false) => {
                r.user += 1;
                let tgid = s.ctx.tgid.map_or_else(|| "?".to_string(), |t| t.to_string());
                let image = match s.ctx.cookie {
                    Some(0) | None => format!("(user, anon/unresolved) tgid {tgid}"),
                    Some(c) => format!("(user image {c:#x}) tgid {tgid}"),
                };
                Key { image, symbol: NO_SYMBOL.into() }
            }
        };
        *counts.entry(key).or_default().entry(s.event).or_default() += 1;
    }
    r.counters = r
        .per_event
        .keys()
        .map(|&e| {
            counters.iter().find(|c| c.counter == e).cloned().unwrap_or(Counter {
                counter: e,
                event: format!("counter {e}"),
                count: None,
            })
        })
        .collect();
    let first = r.per_event.keys().next().copied().unwrap_or(0);
    let mut rows: Vec<(Key, BTreeMap<u64, u64>, u64)> =
        counts.into_iter().map(|(k, m)| { let n = m.values().sum(); (k, m, n) }).collect();
    // Like opreport: by the first counter's samples, then by all samples.
    let first_of = |m: &BTreeMap<u64, u64>| m.get(&first).copied().unwrap_or(0);
    rows.sort_by(|a, b| {
        first_of(&b.1).cmp(&first_of(&a.1)).then(b.2.cmp(&a.2)).then_with(|| a.0.cmp(&b.0))
    });
    r.rows = rows
        .into_iter()
        .map(|(k, m, n)| Row {
            samples: n,
            percent: if r.total == 0 { 0.0 } else { n as f64 * 100.0 / r.total as f64 },
            image: k.image,
            symbol: k.symbol,
            per_event: m,
        })
        .collect();
    Ok(r)
}

/// Renders the table as `opreport -l` does, `limit` rows at most (0: all).
pub fn render(r: &Report, limit: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Samples: {} total, {} kernel, {} user{}",
        r.total,
        r.kernel,
        r.user,
        if r.no_context > 0 { format!(", {} without context", r.no_context) } else { String::new() }
    );
    let cpus: Vec<String> = r.per_cpu.iter().map(|(c, n)| format!("cpu{c}: {n}")).collect();
    let _ = writeln!(out, "Per CPU: {}", cpus.join(", "));
    for c in &r.counters {
        let n = r.per_event.get(&c.counter).copied().unwrap_or(0);
        let _ = match c.count {
            Some(k) => writeln!(out, "Counter {}: {} samples of {} events, one every {} events", c.counter, n, c.event, k),
            None => writeln!(out, "Counter {}: {} samples of {}", c.counter, n, c.event),
        };
    }
    let n = if limit == 0 { r.rows.len() } else { limit.min(r.rows.len()) };
    if r.counters.len() > 1 {
        // One `samples %` pair per counter, as opreport with several events.
        let mut head = String::new();
        for c in &r.counters {
            let _ = write!(head, "{:<20}", format!("{:.19}", c.event));
        }
        let _ = writeln!(out, "{head}{:<28} {}", "", "");
        let mut head = String::new();
        for _ in &r.counters {
            let _ = write!(head, "{:<9} {:>7}    ", "samples", "%");
        }
        let _ = writeln!(out, "{head}{:<28} {}", "image name", "symbol name");
        for row in &r.rows[..n] {
            let mut line = String::new();
            for c in &r.counters {
                let k = row.per_event.get(&c.counter).copied().unwrap_or(0);
                let all = r.per_event.get(&c.counter).copied().unwrap_or(0);
                let pct = if all == 0 { 0.0 } else { k as f64 * 100.0 / all as f64 };
                let _ = write!(line, "{k:<9} {pct:>7.4}    ");
            }
            let _ = writeln!(out, "{line}{:<28} {}", row.image, row.symbol);
        }
    } else {
        let _ = writeln!(out, "{:<9} {:>7}  {:<28} {}", "samples", "%", "image name", "symbol name");
        for row in &r.rows[..n] {
            let _ = writeln!(
                out,
                "{:<9} {:>7.4}  {:<28} {}",
                row.samples, row.percent, row.image, row.symbol
            );
        }
    }
    if n < r.rows.len() {
        let rest: u64 = r.rows[n..].iter().map(|x| x.samples).sum();
        let _ = writeln!(out, "({} more rows, {} samples)", r.rows.len() - n, rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Symbol;
    use oprofile_common::event::Record;

    fn stream(records: &[Record]) -> Stream {
        let mut words = vec![0usize; records.iter().map(|r| r.words()).sum()];
        let mut n = 0;
        for r in records {
            n += r.encode(&mut words[n..]).unwrap();
        }
        let bytes: Vec<u8> = words.iter().flat_map(|&w| (w as u32).to_le_bytes()).collect();
        Stream::from_bytes(&bytes, 4).unwrap()
    }

    #[test]
    fn report_on_crafted_stream() {
        let syms = SymbolTable::from_symbols(
            vec![
                Symbol { addr: 0xc000_1000, size: 0x100, name: "memcpy".into() },
                Symbol { addr: 0xc000_2000, size: 0x100, name: "__memzero".into() },
            ],
            0xc001_0000,
        );
        let s = |pc| Record::Sample { pc, event: 0 };
        let st = stream(&[
            s(0xc000_1000), // before any mode switch: no context
            Record::CpuSwitch { cpu: 0 },
            Record::KernelEnter,
            Record::CtxSwitch { pid: 5, tgid: 5, app_cookie: 0 },
            s(0xc000_1004),
            s(0xc000_1008),
            s(0xc000_1010),
            s(0xc000_2000),
            s(0xbf00_0000), // a module address: outside vmlinux
            Record::CpuSwitch { cpu: 1 },
            Record::KernelExit,
            Record::CtxSwitch { pid: 6, tgid: 6, app_cookie: 0 },
            Record::CookieSwitch { cookie: 0 },
            s(0x1_0000),
        ]);
        let r = build(&st, Some(&syms), &[]).unwrap();
        assert_eq!((r.total, r.kernel, r.user, r.no_context), (7, 5, 1, 1));
        assert_eq!(r.per_cpu.get(&0), Some(&5));
        assert_eq!(r.per_cpu.get(&1), Some(&1));
        assert_eq!(r.rows[0].symbol, "memcpy");
        assert_eq!(r.rows[0].samples, 3);
        assert!((r.rows[0].percent - 300.0 / 7.0).abs() < 1e-9);
        assert!(r.rows.iter().any(|x| x.symbol == "__memzero" && x.samples == 1));
        assert!(r.rows.iter().any(|x| x.image == "(kernel, outside vmlinux)"));
        assert!(r.rows.iter().any(|x| x.image == "(user, anon/unresolved) tgid 6"));
        let text = render(&r, 0);
        assert!(text.contains("memcpy"), "{text}");
    }

    #[test]
    fn per_counter_columns() {
        let s = |pc, event| Record::Sample { pc, event };
        let st = stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::KernelEnter,
            Record::CtxSwitch { pid: 5, tgid: 5, app_cookie: 0 },
            s(0xc000_1000, 0),
            s(0xc000_1004, 1),
            s(0xc000_1008, 1),
            s(0xc000_2000, 1),
            s(0xc000_2004, 1),
            s(0xc000_2008, 1),
        ]);
        let syms = SymbolTable::from_symbols(
            vec![
                Symbol { addr: 0xc000_1000, size: 0x100, name: "memcpy".into() },
                Symbol { addr: 0xc000_2000, size: 0x100, name: "__memzero".into() },
            ],
            0xc001_0000,
        );
        let a15 = CpuModel::by_cpu_type("arm/armv7-ca15");
        let ctrs = [Counter::parse("0:CPU_CYCLES:2000000", a15).unwrap(), Counter::parse("1:0x11:1000000", a15).unwrap()];
        let r = build(&st, Some(&syms), &ctrs).unwrap();
        assert_eq!(r.per_event.get(&0), Some(&1));
        assert_eq!(r.per_event.get(&1), Some(&5));
        assert_eq!(r.counters[1].event, "CLOCK_CYCLES");
        // Sorted by the first counter: memcpy (1 CPU_CYCLES sample) before __memzero (0).
        assert_eq!(r.rows[0].symbol, "memcpy");
        assert_eq!(r.rows[1].per_event.get(&1), Some(&3));
        let text = render(&r, 0);
        assert!(text.contains("Counter 1: 5 samples of CLOCK_CYCLES events, one every 1000000 events"), "{text}");
        assert!(text.contains("CPU_CYCLES") && text.contains("60.0000"), "{text}");
        let e = Counter::parse("1:NOPE", a15).unwrap_err();
        assert!(format!("{e:#}").contains("no event \"NOPE\" for arm/armv7-ca15"), "{e:#}");
        assert!(Counter::parse("x:CPU_CYCLES", None).is_err());
        assert!(Counter::parse("0", None).is_err());
    }

    #[test]
    fn bad_streams_name_the_offset() {
        let err = Stream::from_bytes(&[1, 2, 3, 4, 5], 4).err().unwrap();
        assert!(format!("{err:#}").contains("byte offset 4"), "{err:#}");
        let bytes: Vec<u8> = [!0u32, 2, 0, !0, 12].iter().flat_map(|w| w.to_le_bytes()).collect();
        let st = Stream::from_bytes(&bytes, 4).unwrap();
        let err = build(&st, None, &[]).err().unwrap();
        assert!(format!("{err:#}").contains("unknown escape code 12 at byte offset 12"), "{err:#}");
    }
}
