// SPDX-License-Identifier: GPL-2.0

//! oprofilefs: the filesystem mounted on `/dev/oprofile` (legacy
//! `drivers/oprofile/oprofilefs.c`, `oprofile_files.c`, `oprofile_stats.c`).
//!
//! `oprofilefs_shim.c` registers the type (magic `0x6f70726f`, one superblock) and makes
//! inodes; this file decides the tree and implements every file. A file's inode carries a
//! [`Node`] (encoded as an integer in `i_private`), so no per-file allocation exists.
//!
//! | file | mode | read | write |
//! |---|---|---|---|
//! | `enable` | 0644 | `"0\n"`/`"1\n"` | non-zero: start (`EINVAL` if `buffer` not open); 0: stop |
//! | `dump` | 0200 | – | anything, any length or offset: flush and wake the reader |
//! | `buffer` | 0644 | event words, see `event_buffer` | – (opened read-only only) |
//! | `buffer_size`, `buffer_watershed`, `cpu_buffer_size`, `backtrace_depth` | 0644 | `"%lu\n"` | number, `EBUSY` while running |
//! | `cpu_type` | 0644 | model name, no newline | – |
//! | `pointer_size` | 0644 | `"4\n"` on 32-bit | – |
//! | `images` | 0400 | `ID PATH` lines: the images COOKIE_SWITCH/CTX_SWITCH ids name (`common::image`) | – |
//! | `stats/cpuN/*`, `stats/*` | 0444 | `"%lu\n"` | – |
//! | `stats/period_ns` | 0444 | length of the current or last profiling period, ns | – |
//! | `stats/N/*` | 0444 | `"%lu\n"`: losses of counter N (`sample_lost_no_irq`, `sample_lost_overrun`, `event_throttled`) | – |
//! | `N/enabled`, `N/event`, `N/count`, `N/unit_mask`, `N/kernel`, `N/user` | 0644 | `"%lu\n"` | number, `EBUSY` while running |
//! | `N/total` | 0444 | events counted by counter N in the current or last period | – |
//! | `profile_points` | 0644 | the profile point table (`profile_point`) | `enable`/`disable`/`reset` `NAME`\|`all`, `print` |
//! | `kprof/kpctl` | 0644 | kprof state, clock, text bounds (zero unless the opener may see kernel addresses) (`kprof`) | `start`, `stop`, `startclr` |
//! | `kprof/kpdata` | 0400 | kprof counts, 4-byte big-endian words (`common::kprof`) | – |
//!
//! Counter directories `0/ .. N-1/` exist only with a hardware model (see `model::perf`); their
//! values are checked against the model's event table at `buffer` open.
//!
//! Privilege: every file is owned by root; opening any file for writing needs CAP_SYS_ADMIN
//! (`EPERM`, checked at open as Unix files are, see [`check_open`]), so unprivileged users get
//! `EACCES` from the modes and root without CAP_SYS_ADMIN `EPERM`.
//!
//! Writes (except `dump`): offset must be 0 and at most 49 bytes (legacy `TMPBUFSIZE - 1`), else
//! `EINVAL`; `EFAULT` on a bad user pointer; a zero-length write at offset 0 does nothing and
//! returns 0 (legacy `oprofilefs_ulong_from_user`). Writing a file without a write operation is
//! `EINVAL` (VFS).

use crate::common::counter::Field;
use crate::common::parse;
use crate::event_buffer::{self, WORD};
use crate::oprof::{self, Setting};
use crate::{kprof, profile_point};
use crate::stats::{COUNTER_STATS, CPU_STATS, GLOBAL_STATS};
use core::ffi::{c_int, c_ulong};
use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;
use kernel::uaccess::{UserPtr, UserSlice};

// Only pointers to these bindgen structs cross (some have zero-sized members, which the lint
// flags); the C side defines them.
#[allow(improper_ctypes)]
extern "C" {
    fn oprofilefs_shim_register() -> c_int;
    fn oprofilefs_shim_unregister();
    fn oprofilefs_shim_create(
        parent: *mut bindings::dentry,
        name: *const c_char,
        mode: bindings::umode_t,
        fops: *const bindings::file_operations,
        node: c_ulong,
    ) -> *mut bindings::dentry;
}

/// Largest accepted write, in bytes (legacy `TMPBUFSIZE - 1`).
const MAX_WRITE: usize = 49;

/// `struct file::f_mode` bits (`include/linux/fs.h`; bindgen skips their `__force` casts).
pub(crate) const FMODE_READ: bindings::fmode_t = 1 << 0;
pub(crate) const FMODE_WRITE: bindings::fmode_t = 1 << 1;

/// The open-time check of every oprofilefs file: opening for writing needs CAP_SYS_ADMIN in the
/// opener (legacy checked only `buffer`; its control files relied on 0644 root ownership, which
/// root without CAP_SYS_ADMIN passes). Checked at open, not at write, so that a privileged
/// program cannot be made to write a file an unprivileged user opened (the kernel's rule for
/// files, as `kallsyms` and `/dev/mem`). Errors: `EPERM`.
///
/// # Safety
///
/// `file` must be a valid file being opened.
pub(crate) unsafe fn check_open(file: *mut bindings::file) -> Result {
    // SAFETY: `file` is valid (our contract).
    let mode = unsafe { (*file).f_mode };
    // SAFETY: FFI call without preconditions; checks the current task (the opener).
    if mode & FMODE_WRITE != 0 && !unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) } {
        return Err(EPERM);
    }
    Ok(())
}

/// `open` of attribute files: [`check_open`], then `simple_open` (`i_private` to
/// `private_data`).
///
/// # Safety
///
/// Called by the VFS with valid `inode` and `file`.
unsafe extern "C" fn attr_open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
    // SAFETY: `file` is being opened (our contract).
    if let Err(e) = unsafe { check_open(file) } {
        return e.to_errno();
    }
    // SAFETY: Forwarding the VFS's arguments.
    unsafe { bindings::simple_open(inode, file) }
}

/// What an oprofilefs file shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Enable,
    Dump,
    CpuType,
    PointerSize,
    Setting(Setting),
    /// `stats/<name>`: index into [`GLOBAL_STATS`].
    GlobalStat(u8),
    /// `stats/cpu<cpu>/<name>`: index into [`CPU_STATS`].
    CpuStat { cpu: u32, stat: u8 },
    /// `<counter>/<field>`.
    Counter { counter: u32, field: Field },
    /// `<counter>/total`.
    CounterTotal(u32),
    /// `stats/period_ns`.
    PeriodNs,
    /// `images`.
    Images,
    /// `stats/<counter>/<name>`: index into [`COUNTER_STATS`].
    CounterStat { counter: u32, stat: u8 },
}

impl Node {
    /// Encodes the node for `i_private`: kind in bits 0..8, stat or field index 8..16, CPU id
    /// or counter number above.
    fn to_raw(self) -> c_ulong {
        let (kind, stat, cpu): (c_ulong, c_ulong, c_ulong) = match self {
            Node::Enable => (1, 0, 0),
            Node::Dump => (2, 0, 0),
            Node::CpuType => (3, 0, 0),
            Node::PointerSize => (4, 0, 0),
            Node::Setting(Setting::BufferSize) => (5, 0, 0),
            Node::Setting(Setting::BufferWatershed) => (6, 0, 0),
            Node::Setting(Setting::CpuBufferSize) => (7, 0, 0),
            Node::Setting(Setting::BacktraceDepth) => (8, 0, 0),
            Node::GlobalStat(i) => (9, i.into(), 0),
            Node::CpuStat { cpu, stat } => (10, stat.into(), cpu.into()),
            Node::Counter { counter, field } => {
                let i = Field::ALL.iter().position(|&f| f == field).unwrap_or(0);
                (11, i as c_ulong, counter.into())
            }
            Node::CounterTotal(counter) => (12, 0, counter.into()),
            Node::PeriodNs => (13, 0, 0),
            Node::Images => (14, 0, 0),
            Node::CounterStat { counter, stat } => (15, stat.into(), counter.into()),
        };
        kind | stat << 8 | cpu << 16
    }

    fn from_raw(raw: c_ulong) -> Option<Node> {
        let stat = ((raw >> 8) & 0xff) as u8;
        Some(match raw & 0xff {
            1 => Node::Enable,
            2 => Node::Dump,
            3 => Node::CpuType,
            4 => Node::PointerSize,
            5 => Node::Setting(Setting::BufferSize),
            6 => Node::Setting(Setting::BufferWatershed),
            7 => Node::Setting(Setting::CpuBufferSize),
            8 => Node::Setting(Setting::BacktraceDepth),
            9 => Node::GlobalStat(stat),
            10 => Node::CpuStat { cpu: (raw >> 16) as u32, stat },
            11 => Node::Counter { counter: (raw >> 16) as u32, field: *Field::ALL.get(usize::from(stat))? },
            12 => Node::CounterTotal((raw >> 16) as u32),
            13 => Node::PeriodNs,
            14 => Node::Images,
            15 => Node::CounterStat { counter: (raw >> 16) as u32, stat },
            _ => return None,
        })
    }

    /// The node of an open file (`simple_open` copied `i_private` to `private_data`).
    ///
    /// # Safety
    ///
    /// `file` must be a valid file opened through one of this module's attribute fops.
    unsafe fn of_file(file: *mut bindings::file) -> Option<Node> {
        // SAFETY: `file` is valid (our contract).
        Node::from_raw(unsafe { (*file).private_data } as c_ulong)
    }
}

/// A directory of a mounted oprofilefs, during `fill_super`.
///
/// # Invariants
///
/// `dentry` is a live directory dentry of the superblock being filled.
pub(crate) struct Dir {
    dentry: *mut bindings::dentry,
}

impl Dir {
    fn create(&self, name: &CStr, mode: u16, fops: Option<&'static bindings::file_operations>, node: Option<Node>) -> Result<*mut bindings::dentry> {
        // SAFETY: `self.dentry` is live (type invariants), `name` is NUL-terminated, `fops` is
        // `'static`; the shim copies the name.
        let d = unsafe {
            oprofilefs_shim_create(
                self.dentry,
                name.as_char_ptr(),
                mode,
                fops.map_or(core::ptr::null(), |f| f as *const _),
                node.map_or(0, Node::to_raw),
            )
        };
        kernel::error::from_err_ptr(d)
    }

    /// Creates the subdirectory `name` (mode 0755).
    pub(crate) fn mkdir(&self, name: &CStr) -> Result<Dir> {
        // INVARIANT: the shim returned a live directory dentry of the same superblock.
        Ok(Dir { dentry: self.create(name, 0o755, None, None)? })
    }

    /// Creates an attribute file `name` showing `node`.
    pub(crate) fn file(&self, name: &CStr, mode: u16, node: Node) -> Result {
        let fops = match node {
            Node::Dump => DUMP_FOPS,
            Node::Enable | Node::Setting(_) | Node::Counter { .. } => RW_FOPS,
            _ => RO_FOPS,
        };
        self.create(name, mode, Some(fops), Some(node)).map(|_| ())
    }
}

/// Builds the whole tree (legacy order: generic files, stats, then the model's files).
fn fill_root(root: &Dir) -> Result {
    let o = oprof::get()?;
    o.reset_settings();
    root.file(c"enable", 0o644, Node::Enable)?;
    root.file(c"dump", 0o200, Node::Dump)?;
    root.create(c"buffer", 0o644, Some(event_buffer::BUFFER_FOPS), None)?;
    root.file(c"buffer_size", 0o644, Node::Setting(Setting::BufferSize))?;
    root.file(c"buffer_watershed", 0o644, Node::Setting(Setting::BufferWatershed))?;
    root.file(c"cpu_buffer_size", 0o644, Node::Setting(Setting::CpuBufferSize))?;
    root.file(c"cpu_type", 0o644, Node::CpuType)?;
    root.file(c"backtrace_depth", 0o644, Node::Setting(Setting::BacktraceDepth))?;
    root.file(c"pointer_size", 0o644, Node::PointerSize)?;
    root.file(c"images", 0o400, Node::Images)?;
    root.create(c"profile_points", 0o644, Some(profile_point::FOPS), None)?;
    let kp = root.mkdir(c"kprof")?;
    kp.create(c"kpctl", 0o644, Some(kprof::CTL_FOPS), None)?;
    kp.create(c"kpdata", 0o400, Some(kprof::DATA_FOPS), None)?;

    let stats = root.mkdir(c"stats")?;
    for cpu in 0..o.stats().cpu.len() {
        let mut name = [0u8; 16];
        let dir = stats.mkdir(numbered_name(b"cpu", cpu as u32, &mut name)?)?;
        for (i, (stat, _)) in CPU_STATS.iter().enumerate() {
            dir.file(stat, 0o444, Node::CpuStat { cpu: cpu as u32, stat: i as u8 })?;
        }
    }
    for (i, (stat, _)) in GLOBAL_STATS.iter().enumerate() {
        stats.file(stat, 0o444, Node::GlobalStat(i as u8))?;
    }
    stats.file(c"period_ns", 0o444, Node::PeriodNs)?;

    // Counter directories (legacy `oprofile_perf_create_files`).
    for counter in 0..o.num_counters() as u32 {
        let mut name = [0u8; 16];
        let dir = root.mkdir(numbered_name(b"", counter, &mut name)?)?;
        for field in Field::ALL {
            dir.file(field.name(), 0o644, Node::Counter { counter, field })?;
        }
        dir.file(c"total", 0o444, Node::CounterTotal(counter))?;
        let dir = stats.mkdir(numbered_name(b"", counter, &mut name)?)?;
        for (i, (stat, _)) in COUNTER_STATS.iter().enumerate() {
            dir.file(stat, 0o444, Node::CounterStat { counter, stat: i as u8 })?;
        }
    }
    Ok(())
}

/// Formats `<prefix><n>` as a C string into `buf`. Errors: `EINVAL` if it does not fit.
fn numbered_name<'a>(prefix: &[u8], n: u32, buf: &'a mut [u8; 16]) -> Result<&'a CStr> {
    let mut digits = [0u8; 21];
    let d = parse::format_ulong(n.into(), &mut digits);
    let d = &d[..d.len() - 1]; // without the newline
    let p = prefix.len();
    let end = p + d.len();
    buf.get_mut(..p).ok_or(EINVAL)?.copy_from_slice(prefix);
    buf.get_mut(p..end).ok_or(EINVAL)?.copy_from_slice(d);
    *buf.get_mut(end).ok_or(EINVAL)? = 0;
    CStr::from_bytes_with_nul(&buf[..=end]).map_err(|_| EINVAL)
}

/// Called by the shim's `fill_super` with the new root directory.
///
/// # Safety
///
/// `root` must be the live root dentry of a superblock being filled.
#[no_mangle]
unsafe extern "C" fn oprofilefs_rust_fill_root(root: *mut bindings::dentry) -> c_int {
    // INVARIANT: `root` is a live directory dentry of the superblock being filled.
    match fill_root(&Dir { dentry: root }) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Reads `bytes` at `*ppos` into the user buffer (legacy `simple_read_from_buffer`).
///
/// # Safety
///
/// `buf` must be a user pointer of `count` bytes and `ppos` valid, as the VFS passes them.
pub(crate) unsafe fn read_bytes(bytes: &[u8], buf: *mut c_char, count: usize, ppos: *mut bindings::loff_t) -> isize {
    let mut w = UserSlice::new(UserPtr::from_ptr(buf.cast()), count).writer();
    // SAFETY: `ppos` is valid for the duration of the call (our contract).
    match w.write_slice_file(bytes, unsafe { &mut *ppos }) {
        Ok(n) => n as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// `read` of attribute files.
///
/// # Safety
///
/// Called by the VFS for a file opened with these fops.
unsafe extern "C" fn attr_read(file: *mut bindings::file, buf: *mut c_char, count: usize, ppos: *mut bindings::loff_t) -> isize {
    let (Some(node), Ok(o)) = (unsafe { Node::of_file(file) }, oprof::get()) else {
        return EINVAL.to_errno() as isize;
    };
    let mut num = [0u8; 21];
    let bytes: &[u8] = match node {
        Node::CpuType => o.model().cpu_type().to_bytes(),
        Node::Dump => return EINVAL.to_errno() as isize,
        Node::Enable => parse::format_ulong(o.is_started().into(), &mut num),
        Node::PointerSize => parse::format_ulong(WORD as u64, &mut num),
        Node::Setting(s) => parse::format_ulong(o.setting(s), &mut num),
        Node::GlobalStat(i) => match GLOBAL_STATS.get(usize::from(i)) {
            Some((_, get)) => parse::format_ulong(get(o.stats()).load(Relaxed) as u64, &mut num),
            None => return EINVAL.to_errno() as isize,
        },
        Node::CpuStat { cpu, stat } => {
            match (o.stats().cpu.get(cpu as usize), CPU_STATS.get(usize::from(stat))) {
                (Some(c), Some((_, get))) => parse::format_ulong(get(c).load(Relaxed) as u64, &mut num),
                _ => return EINVAL.to_errno() as isize,
            }
        }
        Node::Counter { counter, field } => match o.counter(counter as usize, field) {
            Ok(v) => parse::format_ulong(v, &mut num),
            Err(e) => return e.to_errno() as isize,
        },
        Node::CounterTotal(counter) => parse::format_ulong(o.counter_total(counter as usize), &mut num),
        Node::CounterStat { counter, stat } => {
            match (o.stats().counter.get(counter as usize), COUNTER_STATS.get(usize::from(stat))) {
                (Some(c), Some((_, get))) => parse::format_ulong(get(c).load(Relaxed) as u64, &mut num),
                _ => return EINVAL.to_errno() as isize,
            }
        }
        Node::PeriodNs => parse::format_ulong(o.period_ns(), &mut num),
        Node::Images => match o.images_text() {
            // SAFETY: Forwarding the VFS's arguments.
            Ok(text) => return unsafe { read_bytes(&text, buf, count, ppos) },
            Err(e) => return e.to_errno() as isize,
        },
    };
    // SAFETY: Forwarding the VFS's arguments.
    unsafe { read_bytes(bytes, buf, count, ppos) }
}

/// Handles a `write` of a command file (legacy `oprofilefs_ulong_from_user` limits): copies the
/// data in and hands it to `apply`. Returns `count` when `apply` succeeds, else the errno:
/// `EINVAL` if `*ppos` is not 0 or `count` exceeds 49 bytes, `EFAULT` for a bad user pointer,
/// or `apply`'s error. A zero-length write returns 0 without calling `apply` (legacy).
///
/// # Safety
///
/// `buf` must be a user pointer of `count` bytes and `ppos` valid, as the VFS passes them.
pub(crate) unsafe fn write_with(
    buf: *const c_char,
    count: usize,
    ppos: *mut bindings::loff_t,
    apply: impl FnOnce(&[u8]) -> Result,
) -> isize {
    // SAFETY: `ppos` is valid (our contract).
    if unsafe { *ppos } != 0 || count > MAX_WRITE {
        return EINVAL.to_errno() as isize;
    }
    if count == 0 {
        return 0;
    }
    let mut data = [0u8; MAX_WRITE];
    let mut r = UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count).reader();
    let res = match data.get_mut(..count) {
        Some(input) => r.read_slice(input).and_then(|()| apply(input)),
        None => Err(EINVAL),
    };
    match res {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// `write` of `enable`, the settings and the counter files. Errors: see the module docs.
///
/// # Safety
///
/// Called by the VFS for a file opened with these fops.
unsafe extern "C" fn attr_write(file: *mut bindings::file, buf: *const c_char, count: usize, ppos: *mut bindings::loff_t) -> isize {
    let (Some(node), Ok(o)) = (unsafe { Node::of_file(file) }, oprof::get()) else {
        return EINVAL.to_errno() as isize;
    };
    let apply = |input: &[u8]| match node {
        Node::Enable => match parse::parse_ulong(input) {
            Ok(0) => {
                o.stop();
                Ok(())
            }
            Ok(_) => o.start(),
            Err(_) => Err(EINVAL),
        },
        Node::Setting(s) => o.set_setting(s, input),
        Node::Counter { counter, field } => o.set_counter(counter as usize, field, input),
        _ => Err(EINVAL),
    };
    // SAFETY: Forwarding the VFS's arguments.
    unsafe { write_with(buf, count, ppos, apply) }
}

/// `write` of `dump` (legacy `dump_write`): any bytes, any length, any offset (the data is not
/// read) flush the CPU buffers and wake the reader; returns `count`. A zero-length write does
/// nothing, as for every file.
///
/// # Safety
///
/// Called by the VFS for a file opened with [`DUMP_FOPS`].
unsafe extern "C" fn dump_write(_file: *mut bindings::file, _buf: *const c_char, count: usize, _ppos: *mut bindings::loff_t) -> isize {
    if count == 0 {
        return 0;
    }
    match oprof::get() {
        Ok(o) => {
            o.dump();
            // The VFS caps `count` at `MAX_RW_COUNT` (< isize::MAX).
            isize::try_from(count).unwrap_or(isize::MAX)
        }
        Err(e) => e.to_errno() as isize,
    }
}

/// `open`/`release` hook of a `file_operations`.
pub(crate) type OpenFn = unsafe extern "C" fn(*mut bindings::inode, *mut bindings::file) -> c_int;
/// `read` hook of a `file_operations`.
pub(crate) type ReadFn = unsafe extern "C" fn(*mut bindings::file, *mut c_char, usize, *mut bindings::loff_t) -> isize;
/// `write` hook of a `file_operations`.
pub(crate) type WriteFn =
    unsafe extern "C" fn(*mut bindings::file, *const c_char, usize, *mut bindings::loff_t) -> isize;

/// The `file_operations` of an oprofilefs file, owned by this module: `open` (when `None`,
/// `attr_open`: [`check_open`], then `simple_open`, which hands `i_private` to `private_data`;
/// an `open` given must call [`check_open`] itself), `release`, `read` and `write` as given,
/// `default_llseek` (files opened with `stream_open` stay unseekable), nothing else.
pub(crate) const fn file_ops(
    open: Option<OpenFn>,
    release: Option<OpenFn>,
    read: Option<ReadFn>,
    write: Option<WriteFn>,
) -> bindings::file_operations {
    bindings::file_operations {
        open: match open {
            Some(f) => Some(f),
            None => Some(attr_open),
        },
        release,
        read,
        write,
        llseek: Some(bindings::default_llseek),
        owner: kernel::module::this_module::<crate::OprofileModule>().as_ptr(),
        // SAFETY: All-zero is a valid `file_operations` (every other hook absent).
        ..unsafe { core::mem::zeroed() }
    }
}

/// Read-only attribute files (`cpu_type`, `pointer_size`, stats).
const RO_FOPS: &bindings::file_operations = &file_ops(None, None, Some(attr_read), None);

/// Read-write attribute files (`enable`, settings).
const RW_FOPS: &bindings::file_operations = &file_ops(None, None, Some(attr_read), Some(attr_write));

/// `dump`: write only.
const DUMP_FOPS: &bindings::file_operations = &file_ops(None, None, None, Some(dump_write));

/// The registered filesystem type; unregistered on drop.
pub(crate) struct Registration(());

impl Registration {
    /// Registers `oprofilefs`. Errors: `EBUSY` if the name is taken.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: FFI call; the shim's file_system_type is static.
        kernel::error::to_result(unsafe { oprofilefs_shim_register() })?;
        Ok(Registration(()))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: Registered in `new`.
        unsafe { oprofilefs_shim_unregister() };
    }
}
