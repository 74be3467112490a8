//! The module's profile-point table (after LegoOS's `print_profile_points()`), read back
//! for `oprof points FILE` (printed by `view::points`) and `oprof record --points`.
//!
//! `FILE` is either a copy of `/dev/oprofile/profile_points` or a kernel log holding the table
//! the `print` command logs with `pr_info` (`dmesg` output). The table is that of
//! [`oprofile_common::profile_point`]: the [`TITLE`] line, the [`HEADER`], a [`RULE`], one row
//! per point (`status name total nr avg.ns`, read back with [`parse_row`], which also checks
//! `avg.ns` against `total / nr`), and a closing [`RULE`].
//!
//! Log lines: a leading `[...]` timestamp is dropped, and everything up to and including the
//! first `oprofile: ` (the module's log prefix, after any syslog level or timestamp). When the
//! title carries that prefix, lines without it are other log messages and are skipped, lines
//! before the table and after its closing rule too; with several tables in the log the last one
//! is read. A plain copy must be the table alone (blank lines around it allowed).
//!
//! Errors name the file and, for a line that breaks the table, its number: no title, missing
//! header or rule, a row that does not parse, a point listed twice, a table without its
//! closing rule (truncated copy).
//!
//! [`read`] sorts the points longest total first (ties by name); `--json` prints them as an
//! array of [`Point`] `{name, enabled, total_ns, nr, avg_ns}` (times in ns).

use anyhow::{bail, Context, Result};
use oprofile_common::profile_point::{parse_row, RowError, HEADER, RULE, TITLE};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The module's log prefix (`KBUILD_MODNAME: `).
const LOG_PREFIX: &str = "oprofile: ";

/// One point's figures (the `--json` element).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Point {
    pub name: String,
    /// Whether the point was timing (`on`).
    pub enabled: bool,
    /// Sum of the timed sections, ns.
    pub total_ns: u64,
    /// Number of timed sections.
    pub nr: u64,
    /// Mean section time in ns as the module prints it (rounded up; 0 without runs).
    pub avg_ns: u64,
}

/// A line without its log prefix: `(text, whether it had the "oprofile: " prefix)`.
fn strip_log(line: &str) -> (&str, bool) {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix('[') {
        if let Some(i) = r.find(']') {
            rest = &r[i + 1..];
        }
    }
    match rest.find(LOG_PREFIX) {
        Some(i) => (&rest[i + LOG_PREFIX.len()..], true),
        None => (rest, false),
    }
}

fn row_error(e: RowError) -> &'static str {
    match e {
        RowError::Columns => "expected 5 columns: status name total nr avg.ns",
        RowError::Status => "status is neither `on` nor `off`",
        RowError::Total => "total is not SECONDS.NNNNNNNNN",
        RowError::Number => "nr or avg.ns is not a decimal number",
        RowError::Average => "avg.ns disagrees with total / nr",
    }
}

/// Parses `text`, read from `name` (for errors), into its points in table order.
pub fn parse(name: &str, text: &str) -> Result<Vec<Point>> {
    let lines: Vec<(usize, &str, bool)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let (t, logged) = strip_log(l.trim_end());
            (i + 1, t, logged)
        })
        .collect();
    let Some(start) = lines.iter().rposition(|(_, t, _)| t.trim() == TITLE) else {
        bail!("{name}: no `{TITLE}` title line (not a copy of /dev/oprofile/profile_points or of its logged table)");
    };
    let logged = lines[start].2;
    if !logged {
        if let Some((n, t, _)) = lines[..start].iter().find(|(_, t, _)| !t.trim().is_empty()) {
            bail!("{name}:{n}: unexpected line before the `{TITLE}` title: {t:?}");
        }
    }
    enum State {
        Header,
        Rule,
        Rows,
        Done,
    }
    let mut state = State::Header;
    let mut points = vec![];
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut last = lines[start].0;
    for &(n, t, has_prefix) in &lines[start + 1..] {
        if logged && (!has_prefix || matches!(state, State::Done)) {
            continue;
        }
        last = n;
        match state {
            State::Header if t.trim() == HEADER.trim() => state = State::Rule,
            State::Header => {
                bail!("{name}:{n}: expected the column header after the title, found {t:?}")
            }
            State::Rule if t.trim() == RULE => state = State::Rows,
            State::Rule => {
                bail!("{name}:{n}: expected the rule line after the column header, found {t:?}")
            }
            State::Rows if t.trim() == RULE => state = State::Done,
            State::Rows => {
                let row = parse_row(t).map_err(|e| {
                    anyhow::anyhow!("{name}:{n}: bad row ({}): {t:?}", row_error(e))
                })?;
                if let Some(first) = seen.insert(row.name.to_string(), n) {
                    bail!(
                        "{name}:{n}: point {} listed twice (first on line {first})",
                        row.name
                    );
                }
                points.push(Point {
                    name: row.name.to_string(),
                    enabled: row.enabled,
                    total_ns: row.total_ns,
                    nr: row.nr,
                    avg_ns: row.avg_ns(),
                });
            }
            State::Done if t.trim().is_empty() => {}
            State::Done => bail!("{name}:{n}: unexpected line after the table: {t:?}"),
        }
    }
    let missing = match state {
        State::Header => "the column header",
        State::Rule => "the rule line under the column header",
        State::Rows => "the closing rule line",
        State::Done => return Ok(points),
    };
    bail!("{name}:{last}: the table ends here without {missing} (truncated copy?)")
}

/// Reads and parses `path`, points sorted by total, longest first (ties by name).
pub fn read(path: &Path) -> Result<Vec<Point>> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
    let mut points = parse(&name, &String::from_utf8_lossy(&bytes))?;
    points.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::points::render;
    use oprofile_common::profile_point::{write_row, Row, MAX_ROW};

    const ROWS: [Row<'static>; 3] = [
        Row {
            enabled: true,
            name: "sample_handler",
            total_ns: 153_470,
            nr: 55,
        },
        Row {
            enabled: false,
            name: "sync_pass",
            total_ns: 2_000_000_001,
            nr: 3,
        },
        Row {
            enabled: true,
            name: "buffer_read",
            total_ns: 0,
            nr: 0,
        },
    ];

    /// The table as the module writes it.
    fn table(rows: &[Row<'_>]) -> String {
        let mut s = format!("{TITLE}\n{HEADER}\n{RULE}\n");
        for r in rows {
            let mut buf = [0u8; MAX_ROW];
            let n = write_row(r, &mut buf).unwrap();
            s.push_str(std::str::from_utf8(&buf[..n]).unwrap());
        }
        s + RULE + "\n"
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse("pp", text).unwrap_err())
    }

    #[test]
    fn module_table_reads_back() {
        let pts = parse("pp", &table(&ROWS)).unwrap();
        let want: Vec<Point> = ROWS
            .iter()
            .map(|r| Point {
                name: r.name.into(),
                enabled: r.enabled,
                total_ns: r.total_ns,
                nr: r.nr,
                avg_ns: r.avg_ns(),
            })
            .collect();
        assert_eq!(pts, want);
        assert_eq!(pts[0].avg_ns, 2791);
        assert_eq!(pts[1].avg_ns, 666_666_667);
        // An empty table is valid.
        assert!(parse("pp", &table(&[])).unwrap().is_empty());

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pp");
        std::fs::write(&p, table(&ROWS)).unwrap();
        let sorted = read(&p).unwrap();
        let names: Vec<_> = sorted.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["sync_pass", "sample_handler", "buffer_read"]);
        let j = serde_json::to_value(&sorted).unwrap();
        assert_eq!(
            j[0],
            serde_json::json!({"name": "sync_pass", "enabled": false, "total_ns": 2_000_000_001u64, "nr": 3, "avg_ns": 666_666_667})
        );
        let text = render(&sorted);
        let sync = text.lines().find(|l| l.contains("sync_pass")).unwrap();
        assert!(
            sync.contains("2.000000001") && sync.ends_with("  100.0"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("buffer_read") && l.ends_with("    0.0")),
            "{text}"
        );
        let e = format!("{:#}", read(&dir.path().join("none")).unwrap_err());
        assert!(e.contains("reading") && e.contains("none"), "{e}");
    }

    #[test]
    fn dmesg_copy_reads_back() {
        let mut log = String::from("[    0.000000] Booting Linux on physical CPU 0x0\n");
        log.push_str("[   12.000001] oprofile: using timer mode, cpu_type 'timer'\n");
        for (i, l) in table(&ROWS).lines().enumerate() {
            log.push_str(&format!("[   12.34567{i}] oprofile: {l}\n"));
            if i == 3 {
                log.push_str("[   12.400000] random: crng init done\n");
            }
        }
        log.push_str("[   13.000000] oprofile: unloaded (timer mode)\n");
        assert_eq!(
            parse("dmesg", &log).unwrap(),
            parse("pp", &table(&ROWS)).unwrap()
        );
        // Without timestamps, with a syslog level, and an earlier table: the last one counts.
        let mut log = format!("<6>oprofile: {TITLE}\n<6>oprofile: {HEADER}\n");
        for l in table(&ROWS[..1]).lines() {
            log.push_str(&format!("<6>oprofile: {l}\n"));
        }
        assert_eq!(parse("dmesg", &log).unwrap().len(), 1);
        // A truncated logged table is still an error.
        let cut: String = log.lines().take(6).map(|l| format!("{l}\n")).collect();
        assert!(
            err(&cut).contains("without the closing rule"),
            "{}",
            err(&cut)
        );
    }

    #[test]
    fn broken_tables_are_rejected_by_line() {
        assert!(err("").contains("pp: no `Kernel Profile Points` title"));
        let t = table(&ROWS);
        let e = err(&t.replacen(&format!("{HEADER}\n"), "", 1));
        assert!(e.starts_with("pp:2: expected the column header"), "{e}");
        let e = err(&t.replacen(&format!("{RULE}\n"), "", 1));
        assert!(e.starts_with("pp:3: expected the rule line"), "{e}");
        let e = err(&t.replace("2791", "2792"));
        assert!(
            e.starts_with("pp:4: bad row (avg.ns disagrees with total / nr)"),
            "{e}"
        );
        let e = err(&t.replace("sync_pass", "sample_handler"));
        assert!(
            e.starts_with("pp:5: point sample_handler listed twice (first on line 4)"),
            "{e}"
        );
        let e = err(&t.replace("   off", " maybe"));
        assert!(e.starts_with("pp:5: bad row (status"), "{e}");
        let e = err(&t[..t.len() - RULE.len() - 1]);
        assert!(
            e.starts_with("pp:6: the table ends here without the closing rule"),
            "{e}"
        );
        let e = err(&format!("junk\n{t}"));
        assert!(e.starts_with("pp:1: unexpected line before"), "{e}");
        let e = err(&format!("{t}junk\n"));
        assert!(
            e.starts_with("pp:8: unexpected line after the table"),
            "{e}"
        );
        assert!(parse("pp", &format!("\n{t}\n")).is_ok());
    }
}
