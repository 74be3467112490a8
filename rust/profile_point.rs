// SPDX-License-Identifier: GPL-2.0

//! Profile points: named, timed code sections (after LegoOS's `DEFINE_PROFILE_POINT`,
//! `profile_point_start`/`profile_point_leave`, `print_profile_points`).
//!
//! [`define_profile_point!`] makes a `static` [`ProfilePoint`] in the linker section
//! `.profile_points`; `rust/profile_points.lds` (passed to the partial link of `oprofile.o`)
//! brackets that section with `__oprofile_profile_points_start`/`_end`, so [`points`] sees every
//! point without a hand-kept list. A section is timed with [`profile_point_time!`] (a guard
//! that records at scope end) or [`ProfilePoint::start`]/[`ProfilePoint::leave`].
//!
//! A disabled point costs one relaxed load per section (no clock read); points start
//! disabled. An enabled point reads the monotonic clock twice per section (through
//! `ktime_get_mono_fast_ns`, the NMI-safe reader: `ktime_get` could spin forever in an NMI that
//! interrupted a timekeeping update; `bridge::clock::clock_ns`) and adds to two 64-bit atomics.
//! Sections may nest and run on any CPU and in any context, interrupts and NMIs included. A point enabled or disabled while a section runs counts that section
//! only if it was enabled at its start.
//!
//! The file `profile_points` (see [`ProfilePoints`]) shows the table of `common::profile_point` and takes
//! its commands.

use crate::common::profile_point::{self as table, Command, Row, Target};
use crate::oprofilefs::{read_bytes, OpFile, Open};
use kernel::fs::file::Offset;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::uaccess::UserSliceWriter;

/// A profile point: its name and figures. Lives in `.profile_points`, one per cache line (a
/// 64-byte stride the walk in [`points`] relies on; it also keeps points written from
/// different CPUs off each other's lines).
///
/// # Invariants
///
/// `name` is at most [`table::NAME_WIDTH`] bytes without blanks (checked by
/// [`define_profile_point!`] at build time).
#[repr(C, align(64))]
pub(crate) struct ProfilePoint {
    name: &'static str,
    enabled: Atomic<bool>,
    /// Timed sections.
    nr: Atomic<u64>,
    /// Sum of their durations, ns.
    total_ns: Atomic<u64>,
}

// The walk in `points` steps 64 bytes.
const _: () = assert!(core::mem::size_of::<ProfilePoint>() == 64);

/// A running section of an enabled point: its start time. Returned by
/// [`ProfilePoint::start`], consumed by [`ProfilePoint::leave`].
/// (ns of `bridge::clock::clock_ns`).
pub(crate) struct Started(Option<u64>);

impl ProfilePoint {
    /// A disabled point called `name`. Use [`define_profile_point!`], which places it in the
    /// registry section and checks the name.
    pub(crate) const fn new(name: &'static str) -> Self {
        ProfilePoint {
            name,
            enabled: Atomic::new(false),
            nr: Atomic::new(0),
            total_ns: Atomic::new(0),
        }
    }

    /// Whether `name` can name a point: 1..=`NAME_WIDTH` bytes, no blanks, not `all`.
    // Only called in the build-time assertion of `define_profile_point!`, which the dead-code
    // lint does not see.
    #[allow(dead_code)]
    pub(crate) const fn valid_name(name: &str) -> bool {
        let b = name.as_bytes();
        if b.is_empty() || b.len() > table::NAME_WIDTH {
            return false;
        }
        if b.len() == 3 && b[0] == b'a' && b[1] == b'l' && b[2] == b'l' {
            return false;
        }
        let mut i = 0;
        while i < b.len() {
            if b[i] <= b' ' || b[i] >= 0x7f {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Starts timing a section (legacy `profile_point_start`): reads the clock only if the
    /// point is enabled.
    #[inline]
    pub(crate) fn start(&self) -> Started {
        Started(
            self.enabled
                .load(Relaxed)
                .then(crate::bridge::clock::clock_ns),
        )
    }

    /// Ends the section begun by `started` (legacy `profile_point_leave`): adds one run and its
    /// duration if the point was enabled at the start.
    #[inline]
    pub(crate) fn leave(&self, started: Started) {
        if let Some(t) = started.0 {
            let ns = crate::bridge::clock::clock_ns().saturating_sub(t);
            self.nr.add(1u64, Relaxed);
            self.total_ns.add(ns, Relaxed);
        }
    }

    /// Times the rest of the caller's scope: the returned guard calls [`Self::leave`] on drop.
    #[inline]
    pub(crate) fn time(&self) -> Guard<'_> {
        Guard {
            point: self,
            started: Some(self.start()),
        }
    }

    fn row(&self) -> Row<'static> {
        Row {
            enabled: self.enabled.load(Relaxed),
            name: self.name,
            total_ns: self.total_ns.load(Relaxed),
            nr: self.nr.load(Relaxed),
        }
    }

    fn reset(&self) {
        self.nr.store(0, Relaxed);
        self.total_ns.store(0, Relaxed);
    }
}

/// Times a section until dropped (see [`ProfilePoint::time`]).
pub(crate) struct Guard<'a> {
    point: &'a ProfilePoint,
    started: Option<Started>,
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(s) = self.started.take() {
            self.point.leave(s);
        }
    }
}

/// Defines a profile point: `define_profile_point!(STATIC_NAME, "table_name");` makes
/// `static STATIC_NAME: ProfilePoint` in `.profile_points`. The table name must be at most 20
/// bytes without blanks and not `all` (a build error otherwise), and unique (checked when the
/// module loads, see [`check_registry`]).
macro_rules! define_profile_point {
    ($vis:vis $ident:ident, $name:literal) => {
        const _: () = assert!(
            $crate::profile_point::ProfilePoint::valid_name($name),
            "profile point names: 1..=20 bytes, no blanks, not `all`"
        );
        // `link_section` is an unsafe attribute (the crate denies `unsafe_code`): the section
        // holds only `ProfilePoint`s, which `bridge::profile_points` reads as one array
        // between the symbols `rust/profile_points.lds` defines.
        #[allow(unsafe_code)]
        #[link_section = ".profile_points"]
        #[used]
        $vis static $ident: $crate::profile_point::ProfilePoint =
            $crate::profile_point::ProfilePoint::new($name);
    };
}
pub(crate) use define_profile_point;

/// Times the rest of the enclosing block with profile point `$point` (legacy
/// `PROFILE_POINT_TIME` + `profile_point_start`, with `profile_point_leave` at scope end).
macro_rules! profile_point_time {
    ($point:expr) => {
        let _profile_point_guard = $point.time();
    };
}
pub(crate) use profile_point_time;

/// Every point of the module, in section order (see [`crate::bridge::profile_points`]).
pub(crate) fn points() -> &'static [ProfilePoint] {
    crate::bridge::profile_points()
}

/// Checks the registry at module init: the section is whole and names are unique (commands
/// address points by name). Errors: `EINVAL`, logged.
pub(crate) fn check_registry() -> Result {
    let all = points();
    for (i, p) in all.iter().enumerate() {
        if all.iter().skip(i + 1).any(|q| q.name == p.name) {
            pr_err!("profile point name '{}' defined twice\n", p.name);
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// Applies a `profile_points` write. Errors: `EINVAL` for input that is no command, or a name
/// no point has.
pub(crate) fn command(input: &[u8]) -> Result {
    let cmd = Command::parse(input).ok_or(EINVAL)?;
    let (target, apply): (Target<'_>, fn(&ProfilePoint)) = match cmd {
        Command::Print => {
            print();
            return Ok(());
        }
        Command::Enable(t) => (t, |p| p.enabled.store(true, Relaxed)),
        Command::Disable(t) => (t, |p| p.enabled.store(false, Relaxed)),
        Command::Reset(t) => (t, ProfilePoint::reset),
    };
    let mut found = false;
    for p in points().iter().filter(|p| target.matches(p.name)) {
        apply(p);
        found = true;
    }
    if found || target == Target::All {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Calls `f` with each line of the table (no newline at the end of a line; rows fit
/// [`table::MAX_ROW`]).
fn for_each_line(mut f: impl FnMut(&[u8]) -> Result) -> Result {
    f(table::TITLE.as_bytes())?;
    f(table::HEADER.as_bytes())?;
    f(table::RULE.as_bytes())?;
    let mut buf = [0u8; table::MAX_ROW];
    for p in points() {
        let n = table::write_row(&p.row(), &mut buf).ok_or(EINVAL)?;
        f(buf.get(..n.saturating_sub(1)).ok_or(EINVAL)?)?;
    }
    f(table::RULE.as_bytes())
}

/// Logs the table with `pr_info` (legacy `print_profile_points`).
pub(crate) fn print() {
    let _ = for_each_line(|line| {
        pr_info!("{}\n", core::str::from_utf8(line).unwrap_or("?"));
        Ok(())
    });
}

/// The table as text, one `\n` per line.
fn text() -> Result<KVVec<u8>> {
    let mut out = KVVec::new();
    for_each_line(|line| {
        out.extend_from_slice(line, GFP_KERNEL)?;
        out.push(b'\n', GFP_KERNEL)?;
        Ok(())
    })?;
    Ok(out)
}

/// `profile_points` (mode 0644): read the table; write `enable|disable|reset NAME|all` or
/// `print` (one [`Command`]; errors as [`command`], and the command-file rules of
/// `oprofilefs`). Needs nothing of the filesystem's context.
pub(crate) struct ProfilePoints;

#[vtable]
impl<C: Sync + 'static> OpFile<C> for ProfilePoints {
    const MODE: u16 = 0o644;
    type Id = ();

    fn read(
        _ctx: &C,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(&text()?, out, pos)
    }

    fn write(_ctx: &C, (): (), input: &[u8]) -> Result {
        command(input)
    }
}
