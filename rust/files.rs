// SPDX-License-Identifier: GPL-2.0

//! The oprofilefs tree (legacy `oprofile_files.c`, `oprofile_stats.c`,
//! `oprofile_perf_create_files`): every file, one line each, in [`Oprofile`]'s
//! [`Tree::fill`], and the kinds of the files the profiler itself answers. The layer is
//! [`crate::oprofilefs`]; `Documentation/oprofilefs.rst` and `Documentation/ABI/` describe each
//! file.
//!
//! | file | mode | read | write |
//! |---|---|---|---|
//! | `enable` | 0644 | `"0\n"`/`"1\n"` | non-zero: start (`EINVAL` if `buffer` not open); 0: stop |
//! | `dump` | 0200 | – | anything, any length or offset: flush and wake the reader |
//! | `buffer` | 0644 | event words, see `event_buffer` | – (opened read-only only) |
//! | `buffer_size`, `buffer_watershed`, `cpu_buffer_size`, `backtrace_depth` | 0644 | `"%lu\n"` | number, `EBUSY` while running |
//! | `user_stack_size` (ours) | 0644 | `"%lu\n"`: bytes of user stack per traced sample (`user_stack`) | number, `EBUSY` while running |
//! | `cpu_type` | 0644 | model name, no newline | – |
//! | `pointer_size` | 0644 | `"4\n"` on 32-bit, `"8\n"` on 64-bit | – |
//! | `images` | 0400 | `ID PATH` lines: the images COOKIE_SWITCH/CTX_SWITCH ids name (`common::image`) | – |
//! | `stats/cpuN/*`, `stats/*` | 0444 | `"%lu\n"` | – |
//! | `stats/period_ns` | 0444 | length of the current or last profiling period, ns | – |
//! | `stats/N/*` | 0444 | `"%lu\n"`: losses of counter N (`sample_lost_no_irq`, `sample_lost_overrun`, `event_throttled`) and its rejected readings (`event_read_rejected`, `event_read_rejected_overflows`) | – |
//! | `N/enabled`, `N/event`, `N/count`, `N/unit_mask`, `N/kernel`, `N/user` | 0644 | `"%lu\n"` | number, `EBUSY` while running |
//! | `N/total` | 0444 | events counted by counter N in the current or last period (less rejected readings' intervals) | – |
//! | `N/time_running` | 0444 | ns counter N's perf events counted in that period, summed over CPUs | – |
//! | `profile_points` | 0644 | the profile point table (`profile_point`) | `enable`/`disable`/`reset` `NAME`\|`all`, `print` |
//! | `kprof/kpctl` | 0644 | kprof state, clock, text bounds (zero unless the opener may see kernel addresses) (`kprof`) | `start`, `stop`, `startclr` |
//! | `kprof/kpdata` | 0400 | kprof counts, 4-byte big-endian words (`common::kprof`) | – |
//!
//! Counter directories `0/ .. N-1/` exist only with a hardware model (see `model::perf`); their
//! values are checked against the model's event table at `buffer` open.
//!
//! Adding a read-only file is one line in [`Tree::fill`] with a [`Ro`] kind. Adding a `stats/`
//! counter is one line, its name, in its group's `stat_counters!` in `rust/stats.rs` (plus its
//! `///` doc): the macro makes the field and its entry in the group's `COUNTERS`, and this tree
//! makes a file for every entry of [`GlobalStats::COUNTERS`], of [`CpuStats::COUNTERS`] per CPU
//! and of [`CounterStats::COUNTERS`] per hardware counter, named by the field, in declaration
//! order. A hypothetical `stats/sample_lost_foo`:
//!
//! ```text
//!   stat_counters! {
//!       pub(crate) struct GlobalStats {
//!           ...
//!           event_throttled,
//! +         /// Samples dropped because of foo.
//! +         sample_lost_foo,
//!       }
//!   }
//! ```
//!
//! counted with `stats::inc(&stats.sample_lost_foo)`.

use crate::common::counter::Field;
use crate::event_buffer::WORD;
use crate::kprof::{KpCtl, KpData};
use crate::oprof::{Oprofile, Setting};
use crate::oprofilefs::{
    capable_sys_admin, read_bytes, Access, Dir, Key, OpFile, Open, Ro, Rw, Tree, Ulong,
    UlongSetting,
};
use crate::profile_point::ProfilePoints;
use crate::stats::{self, CounterStats, CpuStats, GlobalStats};
use kernel::fs::file::Offset;
use kernel::prelude::*;
use kernel::uaccess::UserSliceWriter;

impl Tree for Oprofile {
    type Owner = crate::OprofileModule;

    /// Builds the whole tree (legacy order: generic files, stats, then the model's files) and
    /// restores the default settings.
    fn fill(&self, root: &Dir<Self>) -> Result {
        self.reset_settings();
        root.file::<Enable>(c"enable", 0o644, Key::NONE)?;
        root.file::<Dump>(c"dump", 0o200, Key::NONE)?;
        root.file::<Buffer>(c"buffer", 0o644, Key::NONE)?;
        root.file::<Rw<SettingFile>>(c"buffer_size", 0o644, SettingFile::key(Setting::BufferSize))?;
        root.file::<Rw<SettingFile>>(
            c"buffer_watershed",
            0o644,
            SettingFile::key(Setting::BufferWatershed),
        )?;
        root.file::<Rw<SettingFile>>(
            c"cpu_buffer_size",
            0o644,
            SettingFile::key(Setting::CpuBufferSize),
        )?;
        root.file::<CpuType>(c"cpu_type", 0o644, Key::NONE)?;
        root.file::<Rw<SettingFile>>(
            c"backtrace_depth",
            0o644,
            SettingFile::key(Setting::BacktraceDepth),
        )?;
        root.file::<Rw<SettingFile>>(
            c"user_stack_size",
            0o644,
            SettingFile::key(Setting::UserStackSize),
        )?;
        root.file::<Ro<PointerSize>>(c"pointer_size", 0o644, Key::NONE)?;
        root.file::<Images>(c"images", 0o400, Key::NONE)?;
        root.file::<ProfilePoints>(c"profile_points", 0o644, Key::NONE)?;
        let kprof = root.mkdir(c"kprof")?;
        kprof.file::<KpCtl>(c"kpctl", 0o644, Key::NONE)?;
        kprof.file::<KpData>(c"kpdata", 0o400, Key::NONE)?;

        let stats = root.mkdir(c"stats")?;
        for cpu in 0..self.stats().cpu.len() as u32 {
            let dir = stats.mkdir_numbered(b"cpu", cpu)?;
            for (i, (name, _)) in CpuStats::COUNTERS.iter().enumerate() {
                dir.file::<Ro<CpuStat>>(name, 0o444, Key::new(cpu, i as u8))?;
            }
        }
        for (i, (name, _)) in GlobalStats::COUNTERS.iter().enumerate() {
            stats.file::<Ro<GlobalStat>>(name, 0o444, Key::new(0, i as u8))?;
        }
        stats.file::<Ro<PeriodNs>>(c"period_ns", 0o444, Key::NONE)?;

        // Counter directories (legacy `oprofile_perf_create_files`).
        for counter in 0..self.num_counters() as u32 {
            let dir = root.mkdir_numbered(b"", counter)?;
            for (i, field) in Field::ALL.iter().enumerate() {
                dir.file::<Rw<CounterField>>(field.name(), 0o644, Key::new(counter, i as u8))?;
            }
            dir.file::<Ro<CounterTotal>>(c"total", 0o444, Key::new(counter, 0))?;
            dir.file::<Ro<CounterRunning>>(c"time_running", 0o444, Key::new(counter, 0))?;
            let dir = stats.mkdir_numbered(b"", counter)?;
            for (i, (name, _)) in CounterStats::COUNTERS.iter().enumerate() {
                dir.file::<Ro<CounterStat>>(name, 0o444, Key::new(counter, i as u8))?;
            }
        }
        Ok(())
    }
}

/// `enable`: `"0\n"`/`"1\n"`; writing non-zero starts profiling ([`Oprofile::start`]), 0 stops.
/// Errors: `EINVAL` for junk; those of [`Oprofile::start`].
struct Enable;

#[vtable]
impl OpFile<Oprofile> for Enable {
    fn read(
        o: &Oprofile,
        _key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(if o.is_started() { b"1\n" } else { b"0\n" }, out, pos)
    }

    fn write(o: &Oprofile, _key: Key, input: &[u8]) -> Result {
        match crate::common::parse::parse_ulong(input) {
            Ok(0) => {
                o.stop();
                Ok(())
            }
            Ok(_) => o.start(),
            Err(_) => Err(EINVAL),
        }
    }
}

/// `dump` (legacy `dump_write`): any write flushes the CPU buffers and wakes the reader
/// ([`Oprofile::dump`]); not readable.
struct Dump;

#[vtable]
impl OpFile<Oprofile> for Dump {
    fn write_any(o: &Oprofile, _key: Key) -> Result {
        o.dump();
        Ok(())
    }
}

/// `buffer`, the event stream (see [`crate::event_buffer`]).
///
/// Open: `EPERM` without CAP_SYS_ADMIN (legacy), `EINVAL` unless opened read-only (`O_RDONLY`;
/// legacy set up a whole session for a write-only open too, which could only be a mistake),
/// then [`Oprofile::setup`] (`EBUSY` if already open, `EINVAL` for bad sizes, `ENOMEM`, model
/// errors). A refused open sets nothing up. Release stops profiling if running and frees the
/// buffers (legacy order). Read: see [`Oprofile::read_buffer`]. A stream: `lseek`, `pread` and
/// `pwrite` fail with `ESPIPE`, `write` with `EBADF` (the file is opened read-only).
struct Buffer;

#[vtable]
impl OpFile<Oprofile> for Buffer {
    const STREAM: bool = true;

    fn open(o: &Oprofile, _key: Key, access: Access) -> Result<Open> {
        if !capable_sys_admin() {
            return Err(EPERM);
        }
        if !access.read || access.write {
            return Err(EINVAL);
        }
        o.setup()?;
        Ok(Open::default())
    }

    fn release(o: &Oprofile, _key: Key) {
        o.shutdown();
    }

    fn read(
        o: &Oprofile,
        _key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        _pos: &mut Offset,
    ) -> Result<usize> {
        let count = out.len();
        o.read_buffer(out, count)
    }
}

/// `cpu_type`: the model's name, no newline.
struct CpuType;

#[vtable]
impl OpFile<Oprofile> for CpuType {
    fn read(
        o: &Oprofile,
        _key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(o.model().cpu_type().to_bytes(), out, pos)
    }
}

/// `images`: the image ids of the open or last session ([`Oprofile::images_text`]).
struct Images;

#[vtable]
impl OpFile<Oprofile> for Images {
    fn read(
        o: &Oprofile,
        _key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(&o.images_text()?, out, pos)
    }
}

/// `pointer_size`: bytes of an event word.
struct PointerSize;

impl Ulong<Oprofile> for PointerSize {
    fn get(_o: &Oprofile, _key: Key) -> Result<u64> {
        Ok(WORD as u64)
    }
}

/// The settings of the root directory; the key's item is the [`Setting`].
struct SettingFile;

impl SettingFile {
    const ALL: [Setting; 5] = [
        Setting::BufferSize,
        Setting::BufferWatershed,
        Setting::CpuBufferSize,
        Setting::BacktraceDepth,
        Setting::UserStackSize,
    ];

    fn key(s: Setting) -> Key {
        Key::new(0, Self::ALL.iter().position(|&x| x == s).unwrap_or(0) as u8)
    }

    fn of(key: Key) -> Result<Setting> {
        Self::ALL.get(usize::from(key.item)).copied().ok_or(EINVAL)
    }
}

impl Ulong<Oprofile> for SettingFile {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        Ok(o.setting(Self::of(key)?))
    }
}

impl UlongSetting<Oprofile> for SettingFile {
    fn range(o: &Oprofile, key: Key) -> (u64, u64) {
        Self::of(key).map_or((1, 0), |s| o.setting_range(s))
    }

    fn set(o: &Oprofile, key: Key, value: u64) -> Result {
        o.set_setting(Self::of(key)?, value)
    }
}

/// `N/<field>`: index the counter, item the position in [`Field::ALL`].
struct CounterField;

impl CounterField {
    fn of(key: Key) -> Result<Field> {
        Field::ALL.get(usize::from(key.item)).copied().ok_or(EINVAL)
    }
}

impl Ulong<Oprofile> for CounterField {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        o.counter(key.index as usize, Self::of(key)?)
    }
}

impl UlongSetting<Oprofile> for CounterField {
    fn range(_o: &Oprofile, key: Key) -> (u64, u64) {
        Self::of(key).map_or((1, 0), Field::range)
    }

    fn set(o: &Oprofile, key: Key, value: u64) -> Result {
        o.set_counter(key.index as usize, Self::of(key)?, value)
    }
}

/// `N/total`.
struct CounterTotal;

impl Ulong<Oprofile> for CounterTotal {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        Ok(o.counter_total(key.index as usize).events)
    }
}

/// `N/time_running`.
struct CounterRunning;

impl Ulong<Oprofile> for CounterRunning {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        Ok(o.counter_total(key.index as usize).running_ns)
    }
}

/// `stats/period_ns`.
struct PeriodNs;

impl Ulong<Oprofile> for PeriodNs {
    fn get(o: &Oprofile, _key: Key) -> Result<u64> {
        Ok(o.period_ns())
    }
}

/// `stats/cpuN/<name>`: index the CPU, item the position in [`CpuStats::COUNTERS`].
struct CpuStat;

impl Ulong<Oprofile> for CpuStat {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        stats::read(
            o.stats().cpu.get(key.index as usize),
            CpuStats::COUNTERS,
            key.item,
        )
    }
}

/// `stats/<name>`: item the position in [`GlobalStats::COUNTERS`].
struct GlobalStat;

impl Ulong<Oprofile> for GlobalStat {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        stats::read(Some(&o.stats().global), GlobalStats::COUNTERS, key.item)
    }
}

/// `stats/N/<name>`: index the counter, item the position in [`CounterStats::COUNTERS`].
struct CounterStat;

impl Ulong<Oprofile> for CounterStat {
    fn get(o: &Oprofile, key: Key) -> Result<u64> {
        stats::read(
            o.stats().counter.get(key.index as usize),
            CounterStats::COUNTERS,
            key.item,
        )
    }
}
