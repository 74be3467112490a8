//! `oprof report`: attribute samples to images and symbols, like `opreport -l`.

use crate::stream::{self, Stream};
use crate::symbols::SymbolTable;
use anyhow::Result;
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
    pub samples: u64,
    pub percent: f64,
    pub image: String,
    pub symbol: String,
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
    pub rows: Vec<Row>,
}

pub const NO_SYMBOL: &str = "(no symbols)";

/// Builds the report; `vmlinux` resolves kernel PCs (without it they show as raw addresses' image).
pub fn build(stream: &Stream, vmlinux: Option<&SymbolTable>) -> Result<Report> {
    let samples = stream::samples(stream)?;
    let mut counts: HashMap<Key, u64> = HashMap::new();
    let mut r = Report {
        total: 0,
        kernel: 0,
        user: 0,
        no_context: 0,
        per_cpu: BTreeMap::new(),
        per_event: BTreeMap::new(),
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
        *counts.entry(key).or_default() += 1;
    }
    let mut rows: Vec<(Key, u64)> = counts.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    r.rows = rows
        .into_iter()
        .map(|(k, n)| Row {
            samples: n,
            percent: if r.total == 0 { 0.0 } else { n as f64 * 100.0 / r.total as f64 },
            image: k.image,
            symbol: k.symbol,
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
    let _ = writeln!(out, "{:<9} {:>7}  {:<28} {}", "samples", "%", "image name", "symbol name");
    let n = if limit == 0 { r.rows.len() } else { limit.min(r.rows.len()) };
    for row in &r.rows[..n] {
        let _ = writeln!(
            out,
            "{:<9} {:>7.4}  {:<28} {}",
            row.samples, row.percent, row.image, row.symbol
        );
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
        let r = build(&st, Some(&syms)).unwrap();
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
    fn bad_streams_name_the_offset() {
        let err = Stream::from_bytes(&[1, 2, 3, 4, 5], 4).err().unwrap();
        assert!(format!("{err:#}").contains("byte offset 4"), "{err:#}");
        let bytes: Vec<u8> = [!0u32, 2, 0, !0, 12].iter().flat_map(|w| w.to_le_bytes()).collect();
        let st = Stream::from_bytes(&bytes, 4).unwrap();
        let err = build(&st, None).err().unwrap();
        assert!(format!("{err:#}").contains("unknown escape code 12 at byte offset 12"), "{err:#}");
    }
}
