// SPDX-License-Identifier: GPL-2.0

//! Profile points (after LegoOS's `DEFINE_PROFILE_POINT` / `print_profile_points()`): the table
//! of `/dev/oprofile/profile_points`, the commands it accepts, and the parser the host tool
//! reads the table with. The points themselves live in the module (`profile_point.rs`).
//!
//! Table (the seed's columns and widths; one line per point, in section order):
//!
//! ```text
//! Kernel Profile Points
//!  status                  name             total                nr            avg.ns
//! -------  --------------------  ----------------  ----------------  ----------------
//!      on        sample_handler       0.000153470                55              2791
//! -------  --------------------  ----------------  ----------------  ----------------
//! ```
//!
//! `status` is `on`/`off`; `total` is seconds with ns precision (`%6u.%09u`); `nr` counts timed
//! runs; `avg.ns` is `total / nr` in ns, rounded up as in the seed (0 when `nr` is 0).

use super::counter::div_u64;
use super::parse::format_ulong;

/// First line of the table.
pub const TITLE: &str = "Kernel Profile Points";
/// Column header line.
pub const HEADER: &str =
    " status                  name             total                nr            avg.ns";
/// Rule line above and below the rows.
pub const RULE: &str =
    "-------  --------------------  ----------------  ----------------  ----------------";
/// Width of the name column; longer names are rejected at build time.
pub const NAME_WIDTH: usize = 20;
/// Longest row line, newline included (`u64` numbers at full width).
pub const MAX_ROW: usize = 7 + 2 + NAME_WIDTH + 2 + 21 + 2 + 20 + 2 + 20 + 1;

/// One point's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row<'a> {
    /// Whether the point is timing.
    pub enabled: bool,
    /// Point name (at most [`NAME_WIDTH`] bytes, no whitespace).
    pub name: &'a str,
    /// Sum of the timed sections, ns.
    pub total_ns: u64,
    /// Number of timed sections.
    pub nr: u64,
}

impl Row<'_> {
    /// Mean section time in ns, rounded up as LegoOS does (`DIV_ROUND_UP`); 0 without runs.
    pub fn avg_ns(&self) -> u64 {
        let q = div_u64(self.total_ns, self.nr);
        q + u64::from(self.nr != 0 && q.wrapping_mul(self.nr) != self.total_ns)
    }
}

/// Appends to a byte slice; every method fails (returns `None`) when the slice is full.
///
/// Numbers go through [`format_ulong`]: `core::fmt` of a `u64` divides 64-bit numbers, which
/// 32-bit ARM kernels cannot link (no `__aeabi_uldivmod`).
struct Cursor<'a> {
    out: &'a mut [u8],
    len: usize,
}

impl Cursor<'_> {
    fn put(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len.checked_add(b.len())?;
        self.out.get_mut(self.len..end)?.copy_from_slice(b);
        self.len = end;
        Some(())
    }

    /// `b` right-aligned in `width` bytes, padded with `pad`.
    fn put_right(&mut self, b: &[u8], width: usize, pad: u8) -> Option<()> {
        for _ in b.len()..width {
            self.put(&[pad])?;
        }
        self.put(b)
    }

    /// `v` in decimal, right-aligned in `width` bytes, padded with `pad`.
    fn put_num(&mut self, v: u64, width: usize, pad: u8) -> Option<()> {
        let mut digits = [0u8; 21];
        let d = format_ulong(v, &mut digits);
        self.put_right(d.strip_suffix(b"\n").unwrap_or(d), width, pad)
    }
}

/// Writes the row line of `row` (newline included) into `out` (`"%7s  %20s  %6u.%09u  %16u
/// %16u\n"`); returns its length, or `None` if `out` is shorter than the line ([`MAX_ROW`]
/// always suffices for names of up to [`NAME_WIDTH`] bytes).
pub fn write_row(row: &Row<'_>, out: &mut [u8]) -> Option<usize> {
    let secs = div_u64(row.total_ns, 1_000_000_000);
    let nsec = row.total_ns.wrapping_sub(secs.wrapping_mul(1_000_000_000));
    let status: &[u8] = if row.enabled { b"on" } else { b"off" };
    let mut c = Cursor { out, len: 0 };
    c.put_right(status, 7, b' ')?;
    c.put(b"  ")?;
    c.put_right(row.name.as_bytes(), NAME_WIDTH, b' ')?;
    c.put(b"  ")?;
    c.put_num(secs, 6, b' ')?;
    c.put(b".")?;
    c.put_num(nsec, 9, b'0')?;
    c.put(b"  ")?;
    c.put_num(row.nr, 16, b' ')?;
    c.put(b"  ")?;
    c.put_num(row.avg_ns(), 16, b' ')?;
    c.put(b"\n")?;
    Some(c.len)
}

/// Which points a command applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// `all`: every point.
    All,
    /// The point of this name.
    Name(&'a str),
}

impl<'a> Target<'a> {
    /// Whether the point called `name` is addressed.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Target::All => true,
            Target::Name(n) => *n == name,
        }
    }
}

/// A write to `profile_points`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `enable NAME|all`: start timing.
    Enable(Target<'a>),
    /// `disable NAME|all`: stop timing (figures kept).
    Disable(Target<'a>),
    /// `reset NAME|all`: zero `total` and `nr`.
    Reset(Target<'a>),
    /// `print`: log the table with `pr_info`.
    Print,
}

impl<'a> Command<'a> {
    /// Parses a write: a verb and, except for `print`, one name, separated by blanks; one
    /// trailing newline allowed. Errors: `None` for anything else (the module answers `EINVAL`;
    /// it also does for names no point has).
    pub fn parse(input: &'a [u8]) -> Option<Command<'a>> {
        let text = core::str::from_utf8(input.strip_suffix(b"\n").unwrap_or(input)).ok()?;
        let mut words = text.split([' ', '\t']).filter(|w| !w.is_empty());
        let verb = words.next()?;
        let target = words.next().map(|w| {
            if w == "all" {
                Target::All
            } else {
                Target::Name(w)
            }
        });
        if words.next().is_some() || text.contains('\n') {
            return None;
        }
        Some(match (verb, target) {
            ("print", None) => Command::Print,
            ("enable", Some(t)) => Command::Enable(t),
            ("disable", Some(t)) => Command::Disable(t),
            ("reset", Some(t)) => Command::Reset(t),
            _ => return None,
        })
    }
}

/// Why a table line does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowError {
    /// Not five blank-separated columns.
    Columns,
    /// `status` neither `on` nor `off`.
    Status,
    /// `total` not `SECONDS.NNNNNNNNN`.
    Total,
    /// `nr` or `avg.ns` not a decimal number.
    Number,
    /// `avg.ns` disagrees with `total / nr`.
    Average,
}

/// Parses one row line (without newline) back into a [`Row`]; checks `avg.ns` against
/// `total / nr`.
pub fn parse_row(line: &str) -> Result<Row<'_>, RowError> {
    let mut cols = line.split_ascii_whitespace();
    let (Some(status), Some(name), Some(total), Some(nr), Some(avg), None) = (
        cols.next(),
        cols.next(),
        cols.next(),
        cols.next(),
        cols.next(),
        cols.next(),
    ) else {
        return Err(RowError::Columns);
    };
    let enabled = match status {
        "on" => true,
        "off" => false,
        _ => return Err(RowError::Status),
    };
    let (secs, nsec) = total.split_once('.').ok_or(RowError::Total)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || nsec.len() != 9 || !digits(nsec) {
        return Err(RowError::Total);
    }
    let secs: u64 = secs.parse().map_err(|_| RowError::Total)?;
    let nsec: u64 = nsec.parse().map_err(|_| RowError::Total)?;
    let total_ns = secs
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(nsec))
        .ok_or(RowError::Total)?;
    let number = |s: &str| {
        if digits(s) {
            s.parse::<u64>().map_err(|_| RowError::Number)
        } else {
            Err(RowError::Number)
        }
    };
    let row = Row {
        enabled,
        name,
        total_ns,
        nr: number(nr)?,
    };
    if number(avg)? != row.avg_ns() {
        return Err(RowError::Average);
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(row: &Row<'_>) -> String {
        let mut buf = [0u8; MAX_ROW];
        let n = write_row(row, &mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn rows_match_the_seed_layout() {
        let r = Row {
            enabled: false,
            name: "flush_tlb_others",
            total_ns: 153_470,
            nr: 55,
        };
        assert_eq!(
            line(&r),
            "    off      flush_tlb_others       0.000153470                55              2791\n"
        );
        let r = Row {
            enabled: true,
            name: "pcache_cache_miss",
            total_ns: 16_147_020_152,
            nr: 274_698,
        };
        assert_eq!(
            line(&r),
            "     on     pcache_cache_miss      16.147020152            274698             58781\n"
        );
        assert_eq!(HEADER.len(), RULE.len());
        assert_eq!(line(&r).len(), RULE.len() + 1);
    }

    #[test]
    fn extreme_values_fit_max_row() {
        let r = Row {
            enabled: true,
            name: "abcdefghijklmnopqrst",
            total_ns: u64::MAX,
            nr: u64::MAX,
        };
        let l = line(&r);
        assert!(l.len() <= MAX_ROW);
        assert_eq!(parse_row(l.trim_end()).unwrap(), r);
        let r = Row {
            enabled: false,
            name: "x",
            total_ns: u64::MAX,
            nr: 0,
        };
        assert_eq!(parse_row(line(&r).trim_end()).unwrap(), r);
        let mut small = [0u8; 10];
        assert_eq!(write_row(&r, &mut small), None);
    }

    #[test]
    fn rows_round_trip() {
        for r in [
            Row {
                enabled: true,
                name: "sample_handler",
                total_ns: 0,
                nr: 0,
            },
            Row {
                enabled: true,
                name: "sync_pass",
                total_ns: 999_999_999,
                nr: 3,
            },
            Row {
                enabled: false,
                name: "buffer_read",
                total_ns: 1_000_000_000,
                nr: 1,
            },
        ] {
            assert_eq!(parse_row(line(&r).trim_end()), Ok(r));
        }
    }

    #[test]
    fn bad_rows() {
        assert_eq!(parse_row(RULE), Err(RowError::Status));
        assert_eq!(parse_row("on a"), Err(RowError::Columns));
        assert_eq!(parse_row(HEADER), Err(RowError::Status));
        assert_eq!(parse_row("on a 1.5 1 1"), Err(RowError::Total));
        assert_eq!(parse_row("on a 1.000000000 x 1"), Err(RowError::Number));
        assert_eq!(parse_row("on a 1.000000000 2 7"), Err(RowError::Average));
        assert_eq!(
            parse_row("on a 1.000000000 2 500000000 9"),
            Err(RowError::Columns)
        );
        assert_eq!(
            parse_row("on a 1.000000001 2 500000001"),
            Ok(Row {
                enabled: true,
                name: "a",
                total_ns: 1_000_000_001,
                nr: 2
            })
        );
        assert_eq!(parse_row("maybe a 0.000000000 0 0"), Err(RowError::Status));
        assert_eq!(parse_row("on a -1.000000000 0 0"), Err(RowError::Total));
    }

    #[test]
    fn commands() {
        assert_eq!(Command::parse(b"print\n"), Some(Command::Print));
        assert_eq!(
            Command::parse(b"enable sync_pass\n"),
            Some(Command::Enable(Target::Name("sync_pass")))
        );
        assert_eq!(
            Command::parse(b"disable  all"),
            Some(Command::Disable(Target::All))
        );
        assert_eq!(
            Command::parse(b"reset\tbuffer_read"),
            Some(Command::Reset(Target::Name("buffer_read")))
        );
        for bad in [
            &b""[..],
            b"\n",
            b"print x",
            b"enable",
            b"enable a b",
            b"on a",
            b"enable a\n\n",
            b"reset \xff",
        ] {
            assert_eq!(Command::parse(bad), None, "{bad:?}");
        }
        assert!(Target::All.matches("x"));
        assert!(Target::Name("x").matches("x"));
        assert!(!Target::Name("x").matches("y"));
    }
}
