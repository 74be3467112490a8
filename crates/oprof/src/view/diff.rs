//! `oprof diff A B`: a differential profile of two sessions (opreport's `{ session:A } {
//! session:B }`, `perf diff`): per image, or per symbol with `-l`, the samples and the share of
//! its session's samples in each, and the delta of the shares (`%B - %A`, percentage points),
//! sorted by the size of the delta.
//!
//! Shares, not sample counts, are compared: two runs of different length or rate compare as
//! they should. Both sessions must have counted the same thing: the same `cpu_type` and the same
//! events (timer mode compares with timer mode).
//!
//! The same comparison per call stack, drawn as a differential flame graph (`--flame`,
//! `--folded`), is [`crate::view::flame::Differential`].

use crate::input::session::Counter;
use crate::view::percent::percent;
use crate::view::printable::{escape, Printable};
use crate::view::report::Report;
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;

/// One side of the comparison.
#[derive(Debug, Serialize)]
pub struct Side {
    /// Session directory or stream, as given.
    pub path: String,
    /// All its samples.
    pub total: u64,
    pub cpu_type: Option<String>,
    /// What its counters counted.
    pub events: Vec<String>,
}

/// An image or symbol of either session.
#[derive(Debug, Serialize)]
pub struct DiffRow {
    pub image: String,
    /// With `-l`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    pub a_samples: u64,
    /// Of A's samples.
    pub a_percent: f64,
    pub b_samples: u64,
    /// Of B's samples.
    pub b_percent: f64,
    /// `b_percent - a_percent` (percentage points).
    pub delta: f64,
}

/// `oprof diff --json`.
#[derive(Debug, Serialize)]
pub struct Diff {
    pub a: Side,
    pub b: Side,
    pub rows: Vec<DiffRow>,
}

/// The events a report's counters counted, in counter order (`timer` in timer mode).
fn events(counters: &[Counter]) -> Vec<String> {
    counters.iter().map(|c| c.event.clone()).collect()
}

/// Compares report `a` with report `b` (both built without source lines). `a_side`/`b_side`:
/// path and cpu_type of each. Errors: different `cpu_type`s or events.
pub fn build(
    a: &Report,
    b: &Report,
    a_side: (String, Option<String>),
    b_side: (String, Option<String>),
    symbols: bool,
) -> Result<Diff> {
    let side = |r: &Report, (path, cpu_type): (String, Option<String>)| Side {
        path,
        total: r.total,
        cpu_type,
        events: events(&r.counters),
    };
    let (a_s, b_s) = (side(a, a_side), side(b, b_side));
    if a_s.cpu_type != b_s.cpu_type {
        let t = |s: &Side| s.cpu_type.clone().unwrap_or_else(|| "timer".into());
        bail!(
            "{} has cpu_type {} but {} has {}: profiles of different CPU types cannot be compared",
            a_s.path,
            t(&a_s),
            b_s.path,
            t(&b_s)
        );
    }
    if a_s.events != b_s.events && a_s.total > 0 && b_s.total > 0 {
        bail!(
            "{} counted {} but {} counted {}: compare sessions of the same events",
            a_s.path,
            a_s.events.join(","),
            b_s.path,
            b_s.events.join(",")
        );
    }
    let mut m: BTreeMap<(String, Option<String>), (u64, u64)> = BTreeMap::new();
    if symbols {
        for r in &a.rows {
            m.entry((r.image.clone(), Some(r.symbol.clone())))
                .or_default()
                .0 += r.samples;
        }
        for r in &b.rows {
            m.entry((r.image.clone(), Some(r.symbol.clone())))
                .or_default()
                .1 += r.samples;
        }
    } else {
        for r in &a.images {
            m.entry((r.image.clone(), None)).or_default().0 += r.samples;
        }
        for r in &b.images {
            m.entry((r.image.clone(), None)).or_default().1 += r.samples;
        }
    }
    let mut rows: Vec<DiffRow> = m
        .into_iter()
        .map(|((image, symbol), (na, nb))| {
            let (pa, pb) = (percent(na, a_s.total), percent(nb, b_s.total));
            DiffRow {
                image,
                symbol,
                a_samples: na,
                a_percent: pa,
                b_samples: nb,
                b_percent: pb,
                delta: pb - pa,
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta
            .abs()
            .total_cmp(&x.delta.abs())
            .then((y.a_samples + y.b_samples).cmp(&(x.a_samples + x.b_samples)))
            .then_with(|| (&x.image, &x.symbol).cmp(&(&y.image, &y.symbol)))
    });
    Ok(Diff {
        a: a_s,
        b: b_s,
        rows,
    })
}

/// The text view: at most `limit` rows (0: all).
pub fn render(d: &Diff, limit: usize) -> String {
    let mut out = format!(
        "A: {} ({} samples)\nB: {} ({} samples)\nevents: {}; % of each session's samples, delta = %B - %A (points)\n",
        Printable(&d.a.path),
        d.a.total,
        Printable(&d.b.path),
        d.b.total,
        if d.a.events.is_empty() { "-".to_string() } else { escape(&d.a.events.join(", ")).into_owned() }
    );
    let with_sym = d.rows.first().is_some_and(|r| r.symbol.is_some());
    out.push_str(&format!(
        "{:>10} {:>7} {:>10} {:>7} {:>8}  {}\n",
        "samples A",
        "%A",
        "samples B",
        "%B",
        "delta",
        if with_sym { "symbol  image" } else { "image" }
    ));
    let n = super::shown(d.rows.len(), limit);
    for r in &d.rows[..n] {
        let name = match &r.symbol {
            Some(s) => format!("{}  {}", Printable(s), Printable(&r.image)),
            None => escape(&r.image).into_owned(),
        };
        out.push_str(&format!(
            "{:>10} {:>6.2}% {:>10} {:>6.2}% {:>+8.2}  {name}\n",
            r.a_samples, r.a_percent, r.b_samples, r.b_percent, r.delta
        ));
    }
    out
}
