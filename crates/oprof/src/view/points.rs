//! `oprof points FILE`: prints the profile-point table ([`crate::input::points`]) sorted by
//! total time: the table with a `%` column (share of the sum of all totals), points with the
//! longest total first (ties by name).

use crate::input::points::Point;
use crate::view::printable::Printable;
use oprofile_common::profile_point::{HEADER, RULE, TITLE};

/// The table of `points` (in their order) with a `%` column: share of the sum of totals.
pub fn render(points: &[Point]) -> String {
    use std::fmt::Write;
    let sum: u128 = points.iter().map(|p| u128::from(p.total_ns)).sum();
    let mut out = String::new();
    let _ = writeln!(out, "{TITLE}");
    let _ = writeln!(out, "{HEADER}  {:>6}", "%");
    let rule = format!("{RULE}  ------");
    let _ = writeln!(out, "{rule}");
    for p in points {
        let pct = if sum == 0 {
            0.0
        } else {
            p.total_ns as f64 * 100.0 / sum as f64
        };
        let _ = writeln!(
            out,
            "{:>7}  {:>20}  {:>6}.{:09}  {:>16}  {:>16}  {:>6.1}",
            if p.enabled { "on" } else { "off" },
            Printable(&p.name),
            p.total_ns / 1_000_000_000,
            p.total_ns % 1_000_000_000,
            p.nr,
            p.avg_ns,
            pct
        );
    }
    let _ = writeln!(out, "{rule}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_printed_escaped() {
        let p = Point {
            name: "pp\x1b]0;x\x07".to_string(),
            enabled: true,
            total_ns: 1,
            nr: 1,
            avg_ns: 1,
        };
        let text = render(&[p]);
        assert!(text.contains("pp\\x1b]0;x\\x07"), "{text}");
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
    }
}
