// SPDX-License-Identifier: GPL-2.0

//! The oprofilefs tree (legacy `oprofile_files.c`, `oprofile_stats.c`,
//! `oprofile_perf_create_files`): every file, one line each (the settings from [`SETTINGS`]), in
//! [`Oprofile`]'s [`Tree::fill`], and the kinds of the files the profiler itself answers. Each
//! kind gives its mode and the type of its id (which setting, CPU or counter a file shows,
//! [`OpFile::Id`]). The layer is [`crate::oprofilefs`]; `Documentation/oprofilefs.rst` and
//! `Documentation/ABI/` describe each file.
//!
//! | file | mode | read | write |
//! |---|---|---|---|
//! | `enable` | 0644 | `"0\n"`/`"1\n"` | non-zero: start (`EINVAL` if `buffer` not open); 0: stop |
//! | `dump` | 0200 | – | anything, any length or offset: flush and wake the reader |
//! | `buffer` | 0644 | event words, see `event_buffer` | – (opened read-only only) |
//! | `buffer_size`, `buffer_watershed`, `cpu_buffer_size`, `backtrace_depth` | 0644 | `"%lu\n"` | number, `EBUSY` while running |
//! | `user_stack_size` (ours) | 0644 | `"%lu\n"`: bytes of user stack per traced sample (`user_stack`) | number, `EBUSY` while running |
//! | `image_ids_max` (ours) | 0644 | `"%lu\n"`: image ids a session may give (`image_ids`) | number, `EBUSY` while running |
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
    capable_sys_admin, read_bytes, Access, Dir, FileId, OpFile, Open, Ro, Rw, Tree, Ulong,
    UlongSetting,
};
use crate::profile_point::ProfilePoints;
use crate::stats::{self, CounterStats, CpuStats, GlobalStats};
use kernel::fs::file::Offset;
use kernel::prelude::*;
use kernel::uaccess::UserSliceWriter;

/// The settings of the root directory, by file name, in legacy order.
const SETTINGS: [(&CStr, Setting); 6] = [
    (c"buffer_size", Setting::BufferSize),
    (c"buffer_watershed", Setting::BufferWatershed),
    (c"cpu_buffer_size", Setting::CpuBufferSize),
    (c"backtrace_depth", Setting::BacktraceDepth),
    (c"user_stack_size", Setting::UserStackSize),
    (c"image_ids_max", Setting::ImageIdsMax),
];

impl Tree for Oprofile {
    type Owner = crate::OprofileModule;

    /// Builds the whole tree (legacy order: generic files, stats, then the model's files) and
    /// restores the default settings. Errors: `ENOMEM`; `EINVAL` for 2^16 or more CPUs or
    /// counters (their ids are `u16`).
    fn fill(&self, root: &Dir<Self>) -> Result {
        self.reset_settings();
        root.file::<Enable>(c"enable", ())?;
        root.file::<Dump>(c"dump", ())?;
        root.file::<Buffer>(c"buffer", ())?;
        for (name, setting) in SETTINGS {
            root.file::<Rw<SettingFile>>(name, setting)?;
            if setting == Setting::CpuBufferSize {
                // Legacy creation order, which an unsorted `readdir` shows.
                root.file::<CpuType>(c"cpu_type", ())?;
            }
        }
        root.file::<Ro<PointerSize, 0o644>>(c"pointer_size", ())?;
        root.file::<Images>(c"images", ())?;
        root.file::<ProfilePoints>(c"profile_points", ())?;
        let kprof = root.mkdir(c"kprof")?;
        kprof.file::<KpCtl>(c"kpctl", ())?;
        kprof.file::<KpData>(c"kpdata", ())?;

        let stats = root.mkdir(c"stats")?;
        for cpu in ids(self.stats().cpu.len())? {
            stat_files::<CpuStat, _>(&stats.mkdir_numbered(b"cpu", cpu)?, cpu, CpuStats::COUNTERS)?;
        }
        for (item, (name, _)) in positions(GlobalStats::COUNTERS)? {
            stats.file::<Ro<GlobalStat>>(name, item)?;
        }
        stats.file::<Ro<PeriodNs>>(c"period_ns", ())?;

        // Counter directories (legacy `oprofile_perf_create_files`).
        for counter in ids(self.num_counters())? {
            let dir = root.mkdir_numbered(b"", counter)?;
            for field in Field::ALL {
                dir.file::<Rw<CounterField>>(field.name(), CounterFieldId { counter, field })?;
            }
            dir.file::<Ro<CounterTotal>>(c"total", counter)?;
            dir.file::<Ro<CounterRunning>>(c"time_running", counter)?;
            let dir = stats.mkdir_numbered(b"", counter)?;
            stat_files::<CounterStat, _>(&dir, counter, CounterStats::COUNTERS)?;
        }
        Ok(())
    }
}

/// The ids `0..n` of `n` CPUs or counters. Errors: `EINVAL` if `n` is 2^16 or more.
fn ids(n: usize) -> Result<core::ops::Range<u16>> {
    Ok(0..u16::try_from(n).map_err(|_| EINVAL)?)
}

/// The entries of `table` with their positions. Errors: `EINVAL` for a table of more than 256
/// entries.
fn positions<T>(table: &[T]) -> Result<impl Iterator<Item = (u8, &T)>> {
    u8::try_from(table.len().saturating_sub(1)).map_err(|_| EINVAL)?;
    Ok((0..=u8::MAX).zip(table))
}

/// Creates the files of a `stats/` group directory `dir` (group `group` of `table`: a CPU or a
/// counter), one per counter of `table`, of kind `Ro<K>`.
fn stat_files<K: Ulong<Oprofile, Id = (u16, u8)>, S>(
    dir: &Dir<Oprofile>,
    group: u16,
    table: &[stats::Counter<S>],
) -> Result {
    for (item, (name, _)) in positions(table)? {
        dir.file::<Ro<K>>(name, (group, item))?;
    }
    Ok(())
}

/// `enable`: `"0\n"`/`"1\n"`; writing non-zero starts profiling ([`Oprofile::start`]), 0 stops.
/// Errors: `EINVAL` for junk; those of [`Oprofile::start`].
struct Enable;

#[vtable]
impl OpFile<Oprofile> for Enable {
    const MODE: u16 = 0o644;
    type Id = ();

    fn read(
        o: &Oprofile,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(if o.is_started() { b"1\n" } else { b"0\n" }, out, pos)
    }

    fn write(o: &Oprofile, (): (), input: &[u8]) -> Result {
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

/// `dump` (mode 0200; legacy `dump_write`): any write flushes the CPU buffers and wakes the
/// reader ([`Oprofile::dump`]); not readable.
struct Dump;

#[vtable]
impl OpFile<Oprofile> for Dump {
    const MODE: u16 = 0o200;
    type Id = ();

    fn write_any(o: &Oprofile, (): ()) -> Result {
        o.dump();
        Ok(())
    }
}

/// `buffer` (mode 0644), the event stream (see [`crate::event_buffer`]).
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
    const MODE: u16 = 0o644;
    type Id = ();
    const STREAM: bool = true;

    fn open(o: &Oprofile, (): (), access: Access) -> Result<Open> {
        if !capable_sys_admin() {
            return Err(EPERM);
        }
        if !access.read || access.write {
            return Err(EINVAL);
        }
        o.setup()?;
        Ok(Open::default())
    }

    fn release(o: &Oprofile, (): ()) {
        o.shutdown();
    }

    fn read(
        o: &Oprofile,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        _pos: &mut Offset,
    ) -> Result<usize> {
        let count = out.len();
        o.read_buffer(out, count)
    }
}

/// `cpu_type` (mode 0644, not writable): the model's name, no newline.
struct CpuType;

#[vtable]
impl OpFile<Oprofile> for CpuType {
    const MODE: u16 = 0o644;
    type Id = ();

    fn read(
        o: &Oprofile,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(o.model().cpu_type().to_bytes(), out, pos)
    }
}

/// `images` (mode 0400): the image ids of the open or last session ([`Oprofile::images_text`]).
struct Images;

#[vtable]
impl OpFile<Oprofile> for Images {
    const MODE: u16 = 0o400;
    type Id = ();

    fn read(
        o: &Oprofile,
        (): (),
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_bytes(&o.images_text()?, out, pos)
    }
}

/// `pointer_size` (mode 0644 as legacy, not writable): bytes of an event word.
struct PointerSize;

impl Ulong<Oprofile> for PointerSize {
    type Id = ();

    fn get(_o: &Oprofile, (): ()) -> Result<u64> {
        Ok(WORD as u64)
    }
}

/// A setting's file ids: the [`Setting`] itself.
impl FileId for Setting {
    fn to_word(self) -> usize {
        match self {
            Setting::BufferSize => 0,
            Setting::BufferWatershed => 1,
            Setting::CpuBufferSize => 2,
            Setting::BacktraceDepth => 3,
            Setting::UserStackSize => 4,
            Setting::ImageIdsMax => 5,
        }
    }

    fn from_word(word: usize) -> Result<Setting> {
        match word {
            0 => Ok(Setting::BufferSize),
            1 => Ok(Setting::BufferWatershed),
            2 => Ok(Setting::CpuBufferSize),
            3 => Ok(Setting::BacktraceDepth),
            4 => Ok(Setting::UserStackSize),
            5 => Ok(Setting::ImageIdsMax),
            _ => Err(EIO),
        }
    }
}

/// The settings of the root directory ([`SETTINGS`]); the id is the [`Setting`].
struct SettingFile;

impl Ulong<Oprofile> for SettingFile {
    type Id = Setting;

    fn get(o: &Oprofile, setting: Setting) -> Result<u64> {
        Ok(o.setting(setting))
    }
}

impl UlongSetting<Oprofile> for SettingFile {
    fn range(o: &Oprofile, setting: Setting) -> (u64, u64) {
        o.setting_range(setting)
    }

    fn set(o: &Oprofile, setting: Setting, value: u64) -> Result {
        o.set_setting(setting, value)
    }
}

/// The id of a file `N/<field>`: counter `N`'s [`Field`].
#[derive(Clone, Copy, Debug)]
struct CounterFieldId {
    counter: u16,
    field: Field,
}

impl FileId for CounterFieldId {
    fn to_word(self) -> usize {
        let field: u8 = match self.field {
            Field::Enabled => 0,
            Field::Event => 1,
            Field::Count => 2,
            Field::UnitMask => 3,
            Field::Kernel => 4,
            Field::User => 5,
        };
        (self.counter, field).to_word()
    }

    fn from_word(word: usize) -> Result<CounterFieldId> {
        let (counter, field) = <(u16, u8)>::from_word(word)?;
        let field = match field {
            0 => Field::Enabled,
            1 => Field::Event,
            2 => Field::Count,
            3 => Field::UnitMask,
            4 => Field::Kernel,
            5 => Field::User,
            _ => return Err(EIO),
        };
        Ok(CounterFieldId { counter, field })
    }
}

/// `N/<field>`. Errors: `EINVAL` for a counter the profiler does not have ([`Oprofile::counter`]).
struct CounterField;

impl Ulong<Oprofile> for CounterField {
    type Id = CounterFieldId;

    fn get(o: &Oprofile, id: CounterFieldId) -> Result<u64> {
        o.counter(id.counter.into(), id.field)
    }
}

impl UlongSetting<Oprofile> for CounterField {
    fn range(_o: &Oprofile, id: CounterFieldId) -> (u64, u64) {
        id.field.range()
    }

    fn set(o: &Oprofile, id: CounterFieldId, value: u64) -> Result {
        o.set_counter(id.counter.into(), id.field, value)
    }
}

/// `N/total`; the id is the counter number.
struct CounterTotal;

impl Ulong<Oprofile> for CounterTotal {
    type Id = u16;

    fn get(o: &Oprofile, counter: u16) -> Result<u64> {
        Ok(o.counter_total(counter.into()).events)
    }
}

/// `N/time_running`; the id is the counter number.
struct CounterRunning;

impl Ulong<Oprofile> for CounterRunning {
    type Id = u16;

    fn get(o: &Oprofile, counter: u16) -> Result<u64> {
        Ok(o.counter_total(counter.into()).running_ns)
    }
}

/// `stats/period_ns`.
struct PeriodNs;

impl Ulong<Oprofile> for PeriodNs {
    type Id = ();

    fn get(o: &Oprofile, (): ()) -> Result<u64> {
        Ok(o.period_ns())
    }
}

/// `stats/cpuN/<name>`: the id is the CPU and the position in [`CpuStats::COUNTERS`] (errors
/// as [`stats::read`]).
struct CpuStat;

impl Ulong<Oprofile> for CpuStat {
    type Id = (u16, u8);

    fn get(o: &Oprofile, (cpu, item): (u16, u8)) -> Result<u64> {
        stats::read(
            o.stats().cpu.get(usize::from(cpu)),
            CpuStats::COUNTERS,
            item,
        )
    }
}

/// `stats/<name>`: the id is the position in [`GlobalStats::COUNTERS`] (errors as
/// [`stats::read`]).
struct GlobalStat;

impl Ulong<Oprofile> for GlobalStat {
    type Id = u8;

    fn get(o: &Oprofile, item: u8) -> Result<u64> {
        stats::read(Some(&o.stats().global), GlobalStats::COUNTERS, item)
    }
}

/// `stats/N/<name>`: the id is the counter and the position in [`CounterStats::COUNTERS`]
/// (errors as [`stats::read`]).
struct CounterStat;

impl Ulong<Oprofile> for CounterStat {
    type Id = (u16, u8);

    fn get(o: &Oprofile, (counter, item): (u16, u8)) -> Result<u64> {
        stats::read(
            o.stats().counter.get(usize::from(counter)),
            CounterStats::COUNTERS,
            item,
        )
    }
}
