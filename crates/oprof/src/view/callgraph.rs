//! Call graph from traced samples, like `opreport -c` / gprof: per symbol its self samples, its
//! total (samples with the symbol anywhere in their chain), its callers and its callees.

use crate::view::percent::percent;
use crate::view::printable::Printable;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// A caller or callee of an [`Entry`], with the number of samples whose call chain has that
/// call (each sample counted once per call even under recursion).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Arc {
    pub image: String,
    pub symbol: String,
    pub samples: u64,
}

/// One symbol of the call graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub image: String,
    pub symbol: String,
    /// Samples in the symbol itself (traced or not).
    #[serde(rename = "self")]
    pub self_samples: u64,
    /// Samples with the symbol anywhere in their chain (self + descendants, counted once each).
    pub total: u64,
    /// Who called it, most samples first.
    pub callers: Vec<Arc>,
    /// What it called, most samples first.
    pub callees: Vec<Arc>,
}

/// Accumulates chains of symbol ids (`K`: any interned symbol key).
#[derive(Debug, Default)]
pub struct Builder<K> {
    self_samples: HashMap<K, u64>,
    total: HashMap<K, u64>,
    /// (caller, callee) → samples.
    arcs: HashMap<(K, K), u64>,
}

impl<K: Copy + Eq + std::hash::Hash> Builder<K> {
    pub fn new() -> Self {
        Builder {
            self_samples: HashMap::new(),
            total: HashMap::new(),
            arcs: HashMap::new(),
        }
    }

    /// Adds one sample: `chain[0]` is the sampled symbol, then its callers, innermost first
    /// (an untraced sample is a chain of one).
    #[cfg(test)]
    pub fn add(&mut self, chain: &[K]) {
        self.add_n(chain, 1);
    }

    /// Adds `n` samples with the same chain.
    pub fn add_n(&mut self, chain: &[K], n: u64) {
        let Some(&leaf) = chain.first() else { return };
        *self.self_samples.entry(leaf).or_default() += n;
        let mut seen = HashSet::new();
        for &k in chain {
            if seen.insert(k) {
                *self.total.entry(k).or_default() += n;
            }
        }
        let mut arcs = HashSet::new();
        for w in chain.windows(2) {
            if arcs.insert((w[1], w[0])) {
                *self.arcs.entry((w[1], w[0])).or_default() += n;
            }
        }
    }

    /// The entries, hottest (self samples, then total) first; `name` gives (image, symbol).
    pub fn entries(&self, name: impl Fn(K) -> (String, String)) -> Vec<Entry> {
        let mut callers: HashMap<K, Vec<(K, u64)>> = HashMap::new();
        let mut callees: HashMap<K, Vec<(K, u64)>> = HashMap::new();
        for (&(caller, callee), &n) in &self.arcs {
            callers.entry(callee).or_default().push((caller, n));
            callees.entry(caller).or_default().push((callee, n));
        }
        let arcs = |v: Option<&Vec<(K, u64)>>| -> Vec<Arc> {
            let mut v: Vec<Arc> = v
                .map(|v| {
                    v.iter()
                        .map(|&(k, samples)| {
                            let (image, symbol) = name(k);
                            Arc {
                                image,
                                symbol,
                                samples,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort_by(|a, b| {
                b.samples
                    .cmp(&a.samples)
                    .then_with(|| (&a.symbol, &a.image).cmp(&(&b.symbol, &b.image)))
            });
            v
        };
        let mut keys: Vec<(K, (String, String))> =
            self.total.keys().map(|&k| (k, name(k))).collect();
        keys.sort_by(|(a, na), (b, nb)| {
            let s = |k| self.self_samples.get(k).copied().unwrap_or(0);
            s(b).cmp(&s(a))
                .then(self.total[b].cmp(&self.total[a]))
                .then_with(|| (&na.1, &na.0).cmp(&(&nb.1, &nb.0)))
        });
        keys.into_iter()
            .map(|(k, (image, symbol))| Entry {
                image,
                symbol,
                self_samples: self.self_samples.get(&k).copied().unwrap_or(0),
                total: self.total[&k],
                callers: arcs(callers.get(&k)),
                callees: arcs(callees.get(&k)),
            })
            .collect()
    }
}

/// Renders entries like `opreport -c`: callers indented above each symbol, callees indented
/// below; at most `limit` entries (0: all); `all` is the report's sample count.
pub fn render(entries: &[Entry], limit: usize, all: u64) -> String {
    let mut out = String::new();
    let rule = "-".repeat(79);
    let _ = writeln!(
        out,
        "Call graph: each symbol with its callers above and its callees below (indented)."
    );
    let _ = writeln!(
        out,
        "Symbol lines: self samples, % of all samples, and the total with callees."
    );
    let _ = writeln!(
        out,
        "Caller/callee lines: samples whose call chain has that call, % of the symbol's total."
    );
    let _ = writeln!(
        out,
        "{:<9} {:>8}  {:<28} symbol name",
        "samples", "%", "image name"
    );
    let n = super::shown(entries.len(), limit);
    for e in &entries[..n] {
        let _ = writeln!(out, "{rule}");
        for a in &e.callers {
            let _ = writeln!(
                out,
                "  {:<7} {:>8.4}  {:<28} {}",
                a.samples,
                percent(a.samples, e.total),
                Printable(&a.image),
                Printable(&a.symbol)
            );
        }
        let _ = writeln!(
            out,
            "{:<9} {:>8.4}  {:<28} {}  [self; total {}]",
            e.self_samples,
            percent(e.self_samples, all),
            Printable(&e.image),
            Printable(&e.symbol),
            e.total
        );
        for a in &e.callees {
            let _ = writeln!(
                out,
                "  {:<7} {:>8.4}  {:<28} {}",
                a.samples,
                percent(a.samples, e.total),
                Printable(&a.image),
                Printable(&a.symbol)
            );
        }
    }
    let _ = writeln!(out, "{rule}");
    if n < entries.len() {
        let _ = writeln!(
            out,
            "({} more symbols in the call graph)",
            entries.len() - n
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_callees_and_totals() {
        // Symbols: 0 leaf, 1 work, 2 main, 3 other, 4 rec.
        let mut b = Builder::new();
        b.add(&[0, 1, 2]); // leaf <- work <- main
        b.add(&[0, 1, 2]);
        b.add(&[0, 3, 2]); // leaf <- other <- main
        b.add(&[1, 2]); // work <- main
        b.add(&[0]); // untraced leaf
        b.add(&[4, 4, 4, 2]); // recursion counted once per sample
        b.add(&[]);
        let names = ["leaf", "work", "main", "other", "rec"];
        let e = b.entries(|k: usize| ("app".to_string(), names[k].to_string()));
        let by = |s: &str| e.iter().find(|x| x.symbol == s).unwrap().clone();
        let leaf = by("leaf");
        assert_eq!((leaf.self_samples, leaf.total), (4, 4));
        assert_eq!(
            leaf.callers
                .iter()
                .map(|a| (a.symbol.as_str(), a.samples))
                .collect::<Vec<_>>(),
            [("work", 2), ("other", 1)]
        );
        assert!(leaf.callees.is_empty());
        let work = by("work");
        assert_eq!((work.self_samples, work.total), (1, 3));
        assert_eq!(
            work.callees,
            [Arc {
                image: "app".into(),
                symbol: "leaf".into(),
                samples: 2
            }]
        );
        assert_eq!(work.callers[0].samples, 3);
        let main = by("main");
        assert_eq!((main.self_samples, main.total), (0, 5));
        assert_eq!(
            main.callees
                .iter()
                .map(|a| (a.symbol.as_str(), a.samples))
                .collect::<Vec<_>>(),
            [("work", 3), ("other", 1), ("rec", 1)]
        );
        let rec = by("rec");
        assert_eq!((rec.self_samples, rec.total), (1, 1));
        assert_eq!(
            rec.callers
                .iter()
                .map(|a| (a.symbol.as_str(), a.samples))
                .collect::<Vec<_>>(),
            [("main", 1), ("rec", 1)]
        );
        // Hottest first.
        assert_eq!(e[0].symbol, "leaf");
        let text = render(&e, 2, 7);
        assert!(text.contains("leaf  [self; total 4]"), "{text}");
        assert!(
            text.contains("(3 more symbols in the call graph)"),
            "{text}"
        );
    }

    #[test]
    fn names_are_printed_escaped() {
        let arc = |s: &str| Arc {
            image: "/bin/b".to_string(),
            symbol: s.to_string(),
            samples: 1,
        };
        let e = Entry {
            image: "/bin/a\x1b[2J".to_string(),
            symbol: "f\nfake line".to_string(),
            self_samples: 1,
            total: 2,
            callers: vec![arc("caller\u{9d}0;t\x07")],
            callees: vec![arc("callee\x7f")],
        };
        let text = render(&[e], 0, 2);
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
        for want in [
            "/bin/a\\x1b[2J",
            "f\\x0afake line",
            "caller\\u{9d}0;t\\x07",
            "callee\\x7f",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
    }
}
