// SPDX-License-Identifier: GPL-2.0

//! Per-CPU sample rings and the interrupt-side sample path (legacy
//! `drivers/oprofile/cpu_buffer.c`: `oprofile_add_sample`, `log_sample`, `oprofile_add_trace`).
//!
//! Each CPU owns one ring of [`CpuSample`] entries, `cpu_buffer_size` entries long. The producer
//! is that CPU's sampling interrupt ([`CpuBuffer::add_sample`]); the consumer is `buffer_sync` in
//! process context, serialised by the event buffer's mutex. No lock is taken on the producer
//! side, so a sample can never deadlock or wait.
//!
//! Unlike legacy, a user sample is resolved here, while the task cannot have changed its
//! mappings: `sample_shim.c` finds the VMA locklessly and the entry keeps a reference to the
//! mapped file and to the task's executable until `buffer_sync` has turned them into image ids
//! (the entry owns them: [`Sample`]). So exit, exec and munmap after the sample cannot lose or
//! misattribute it. What is counted here (per CPU unless noted):
//!
//! - `sample_received`: every call;
//! - `sample_invalid_eip`: no interrupt registers;
//! - `sample_lost_overflow`: the ring was full;
//! - global `sample_lost_no_mapping` / `sample_lost_no_mm`: a user PC in no mapping / no mm;
//! - `backtrace_aborted`: the ring filled up during the backtrace, or an entry was not a code
//!   address of its mode (a kernel entry outside the kernel text and the module area, a user
//!   entry in a mapping without `VM_EXEC`, or ESCAPE_CODE): the rest of that backtrace is
//!   dropped; global `bt_lost_no_mapping`: a user return address in no mapping (likewise).

use crate::bridge;
use crate::common::event::ESCAPE_CODE;
use crate::common::ring;
use crate::common::sync::{self, CpuSample, KernelCode, SampleLoc, IS_FRAME, IS_KERNEL, TRACE_BEGIN};
use crate::profile_point::{define_profile_point, profile_point_time};
use crate::stats::{self, CpuStats, Stats};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::fs::File;
use kernel::mm::MmWithUserAsync;
use kernel::sync::aref::ARef;
use core::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;

// Profile point: samples taken (`CpuBuffers::add_sample`, interrupt context).
define_profile_point!(SAMPLE_HANDLER, "sample_handler");

/// Results of `oprofile_shim_user_lookup_*` (`sample_shim.h`).
pub(crate) mod lookup {
    use core::ffi::c_int;
    pub(crate) const FILE: c_int = 0;
    pub(crate) const ANON: c_int = 1;
    pub(crate) const NONE: c_int = 2;
    pub(crate) const NO_MM: c_int = 3;
    pub(crate) const RETRY: c_int = 4;

    /// `struct oprofile_vma` of `sample_shim.h`: the mapping a user PC was found in.
    #[repr(C)]
    #[derive(Default)]
    pub(crate) struct Vma {
        /// `vm_start` (FILE).
        pub(crate) start: core::ffi::c_ulong,
        /// `vm_pgoff`: the file page mapped at `start` (FILE).
        pub(crate) pgoff: core::ffi::c_ulong,
        /// `VM_EXEC` (FILE, ANON).
        pub(crate) exec: bool,
    }

    /// `struct oprofile_user_regs` of `sample_shim.h`: where the user part of a call chain
    /// starts.
    #[repr(C)]
    #[derive(Default)]
    pub(crate) struct UserRegs {
        /// The user PC the kernel was entered from (when `entry`).
        pub(crate) pc: core::ffi::c_ulong,
        pub(crate) fp: core::ffi::c_ulong,
        pub(crate) lr: core::ffi::c_ulong,
        pub(crate) sp: core::ffi::c_ulong,
        /// `pc` is the first user frame.
        pub(crate) entry: bool,
        /// Walk the user frames from `fp`, `lr`, `sp`.
        pub(crate) walk: bool,
    }

    impl Vma {
        /// The file offset of `pc` in this file mapping.
        pub(crate) fn file_offset(&self, pc: usize) -> usize {
            crate::common::sync::file_offset(pc, self.start as usize, self.pgoff as usize, kernel::page::PAGE_SHIFT as u32)
        }
    }
}

extern "C" {
    fn oprofile_shim_irq_regs() -> *mut c_void;
    fn oprofile_shim_regs_pc(regs: *mut c_void, pc: *mut c_ulong) -> c_int;
    fn oprofile_shim_user_lookup_irq(pc: c_ulong, file: *mut *mut c_void, vma: *mut lookup::Vma) -> c_int;
    fn oprofile_shim_exe_file_irq() -> *mut c_void;
    fn oprofile_shim_mm_get_irq() -> *mut c_void;
    fn oprofile_shim_backtrace(
        regs: *mut c_void,
        depth: u32,
        f: unsafe extern "C" fn(*mut c_void, c_ulong, bool) -> bool,
        ctx: *mut c_void,
        user: *mut lookup::UserRegs,
    ) -> u32;
}

/// Interrupted registers (`struct pt_regs *`) of the current interrupt, null outside one.
pub(crate) fn irq_regs() -> *mut c_void {
    // SAFETY: FFI call without preconditions.
    unsafe { oprofile_shim_irq_regs() }
}

/// The PC of interrupted registers `regs` (as `profile_pc`: a lock function's caller) and
/// whether it was kernel code; `None` for null `regs`.
///
/// # Safety
///
/// `regs` must be null or point to live `struct pt_regs`.
unsafe fn regs_pc(regs: *mut c_void) -> Option<(usize, bool)> {
    let mut pc: c_ulong = 0;
    // SAFETY: `regs` is null or valid (our contract); `pc` is a valid out-pointer.
    match unsafe { oprofile_shim_regs_pc(regs, &mut pc) } {
        0 => Some((pc as usize, false)),
        1 => Some((pc as usize, true)),
        _ => None,
    }
}

/// The PC the current interrupt interrupted and whether it was kernel code (see [`regs_pc`]);
/// `None` outside an interrupt.
pub(crate) fn irq_pc() -> Option<(usize, bool)> {
    // SAFETY: `irq_regs()` is null or the interrupted registers of this interrupt.
    unsafe { regs_pc(irq_regs()) }
}

/// A queued sample: it owns a reference to its mapped file or mm and to its executable,
/// dropped with it (`fput`, `mmput_async`: both defer the final release, so any context may drop
/// one).
pub(crate) type Sample = CpuSample<ARef<File>, ARef<MmWithUserAsync>>;

/// Takes ownership of the file reference the shim handed over (`None` for null).
///
/// # Safety
///
/// `file` must be null or a `struct file *` on which the caller owns a reference, which moves
/// into the result.
pub(crate) unsafe fn owned_file(file: *mut c_void) -> Option<ARef<File>> {
    // SAFETY: A referenced, live file whose reference moves into the `ARef` (our contract);
    // `File` is `repr(transparent)` over `struct file`.
    NonNull::new(file.cast::<File>()).map(|f| unsafe { ARef::from_raw(f) })
}

/// Where kernel code is on this kernel: the image's text from the build's `System.map` (see
/// `kprof_shim.c`; unknown if the module was built without it or against another build, which
/// is logged) and the module area. Process context.
pub(crate) fn kernel_code() -> KernelCode {
    let text = match bridge::kernel_text() {
        Ok(text) => Some(text),
        Err(_) => {
            pr_warn!("kernel text bounds unknown: kernel backtrace entries are not checked\n");
            None
        }
    };
    KernelCode { text, modules: bridge::module_area() }
}

/// Why a user PC could not be queued.
enum Unresolved {
    NoMapping,
    NoMm,
}

/// Resolves user `pc` of the current task (interrupt context); the result owns a reference.
/// The flag says whether the mapping is executable (`VM_EXEC`); `Deferred` (looked up at sync
/// time) says true.
fn resolve_user(pc: usize) -> core::result::Result<(SampleLoc<ARef<File>, ARef<MmWithUserAsync>>, bool), Unresolved> {
    let mut file = core::ptr::null_mut();
    let mut vma = lookup::Vma::default();
    // SAFETY: Valid out-pointers; the shim takes no lock and does not sleep.
    match unsafe { oprofile_shim_user_lookup_irq(pc as c_ulong, &mut file, &mut vma) } {
        lookup::FILE => {
            // SAFETY: FILE: the shim handed over a reference to `file`.
            let file = unsafe { owned_file(file) }.ok_or(Unresolved::NoMapping)?;
            Ok((SampleLoc::File { file, offset: vma.file_offset(pc) }, vma.exec))
        }
        lookup::ANON => Ok((SampleLoc::Anon, vma.exec)),
        lookup::NONE => Err(Unresolved::NoMapping),
        lookup::NO_MM => Err(Unresolved::NoMm),
        lookup::RETRY => {
            // The mm is being changed right now: keep it and look up at sync time.
            // SAFETY: FFI call without preconditions.
            let mm = NonNull::new(unsafe { oprofile_shim_mm_get_irq() }.cast::<MmWithUserAsync>()).ok_or(Unresolved::NoMm)?;
            // SAFETY: The shim took an mm_users reference (`mmget_not_zero`), which moves into
            // the `ARef` (released with `mmput_async`); `MmWithUserAsync` is
            // `repr(transparent)` over `struct mm_struct`.
            Ok((SampleLoc::Deferred { mm: unsafe { ARef::from_raw(mm) } }, true))
        }
        _ => Err(Unresolved::NoMapping),
    }
}

/// One CPU's ring.
///
/// # Invariants
///
/// - `capacity == entries.len()`, in `1..=ring::MAX_CAPACITY`.
/// - Only code running on this buffer's CPU with interrupts disabled (the sampling interrupt)
///   writes entries and `head`: sampling interrupts do not nest on one CPU.
/// - Only the holder of the event buffer mutex reads entries and writes `tail` (and `drop`).
/// - Entries in `tail..head` (ring positions) are initialised by the producer before `head`
///   is published with release ordering, and own their references ([`Sample`]); entries outside
///   are uninitialised (moved out by the consumer, or never written).
pub(crate) struct CpuBuffer {
    entries: KVVec<UnsafeCell<MaybeUninit<Sample>>>,
    capacity: u32,
    head: Atomic<u32>,
    tail: Atomic<u32>,
}

// SAFETY: Entries are accessed by one producer and one consumer at a time, handing over through
// `head`/`tail` with acquire/release ordering (see the type invariants). The references they
// own (`ARef<File>`, `ARef<MmWithUserAsync>`) may be dropped on any thread.
unsafe impl Sync for CpuBuffer {}
// SAFETY: As above.
unsafe impl Send for CpuBuffer {}

/// State of one backtrace walk, passed through the shim to [`frame`].
struct Walk<'a> {
    buf: &'a CpuBuffer,
    cpu: &'a CpuStats,
    stats: &'a Stats,
    code: &'a KernelCode,
    pid: i32,
    tgid: i32,
}

/// Logs one backtrace entry (called by `oprofile_shim_backtrace`, interrupt context).
/// Returns false to end the walk.
///
/// # Safety
///
/// `ctx` must point to a live [`Walk`] on this CPU's sampling path.
unsafe extern "C" fn frame(ctx: *mut c_void, pc: c_ulong, user: bool) -> bool {
    // SAFETY: Our contract.
    unsafe { &*ctx.cast::<Walk<'_>>() }.frame(pc as usize, user)
}

impl Walk<'_> {
    /// Logs one backtrace entry, a kernel or `user` return address. Returns false to end the
    /// walk.
    fn frame(&self, pc: usize, user: bool) -> bool {
        let w = self;
        // A broken frame can give a PC equal to ESCAPE_CODE, which the event buffer cannot carry
        // as a value: the trace ends there (legacy `oprofile_add_trace`). So does a kernel entry
        // that is no kernel code (a walk that strayed into data or the stack).
        if !w.buf.has_room() || pc == ESCAPE_CODE || (!user && !w.code.contains(pc)) {
            stats::inc(&w.cpu.backtrace_aborted);
            return false;
        }
        let loc = if user {
            match resolve_user(pc) {
                Ok((loc, true)) => loc,
                Ok((loc, false)) => {
                    // Not a return address: data or stack of the task (its reference drops
                    // here).
                    drop(loc);
                    stats::inc(&w.cpu.backtrace_aborted);
                    return false;
                }
                Err(_) => {
                    stats::inc(&w.stats.bt_lost_no_mapping);
                    return false;
                }
            }
        } else {
            SampleLoc::Kernel
        };
        let flags = IS_FRAME | if user { 0 } else { IS_KERNEL };
        w.buf.push(CpuSample { pc, loc, event: 0, flags, pid: w.pid, tgid: w.tgid, app: None });
        true
    }
}

impl CpuBuffer {
    /// Allocates a ring of `capacity` entries (`cpu_buffer_size`).
    ///
    /// Errors: `EINVAL` if `capacity` is 0 or above [`ring::MAX_CAPACITY`]; `ENOMEM`.
    pub(crate) fn new(capacity: u32) -> Result<Self> {
        if capacity == 0 || capacity > ring::MAX_CAPACITY {
            return Err(EINVAL);
        }
        let mut entries = KVVec::with_capacity(capacity as usize, GFP_KERNEL)?;
        for _ in 0..capacity {
            entries.push(UnsafeCell::new(MaybeUninit::uninit()), GFP_KERNEL)?;
        }
        Ok(CpuBuffer { entries, capacity, head: Atomic::new(0), tail: Atomic::new(0) })
    }

    /// Whether one more entry fits. Producer side (type invariants).
    fn has_room(&self) -> bool {
        ring::has_room(self.head.load(Relaxed), self.tail.load(Acquire), self.capacity)
    }

    /// Appends `s`, which must fit ([`CpuBuffer::has_room`]: only the consumer changes the
    /// room meanwhile, and only to more). Producer side.
    fn push(&self, s: Sample) {
        let head = self.head.load(Relaxed);
        let slot = ring::slot(head, self.capacity);
        if let Some(cell) = self.entries.get(slot) {
            // SAFETY: `slot` is outside `tail..head` (there was room), so the consumer does not
            // read it and it holds nothing (type invariants), and only this CPU's interrupt
            // writes entries.
            unsafe { (*cell.get()).write(s) };
            // INVARIANT: the entry is written and owns its references before it is published.
            self.head.store(ring::advance(head, self.capacity), Release);
        }
    }

    /// Takes a sample of the interrupted context `regs` (`struct pt_regs *`, null: none) for
    /// counter `event`, with a backtrace of up to `depth` frames (legacy `oprofile_add_sample`
    /// + `log_sample` + `ops->backtrace`). Counts it in `cpu` / `stats` as the module docs say.
    ///
    /// Must be called on this buffer's CPU from its sampling interrupt (type invariants).
    pub(crate) fn add_sample(
        &self,
        cpu: &CpuStats,
        stats: &Stats,
        code: &KernelCode,
        regs: *mut c_void,
        event: u32,
        depth: u32,
    ) {
        stats::inc(&cpu.sample_received);
        // SAFETY: `regs` is null or the interrupted registers.
        let Some((pc, kernel)) = (unsafe { regs_pc(regs) }) else {
            stats::inc(&cpu.sample_invalid_eip);
            return;
        };
        if !self.has_room() {
            stats::inc(&cpu.sample_lost_overflow);
            return;
        }
        let loc = if kernel {
            SampleLoc::Kernel
        } else {
            match resolve_user(pc) {
                Ok((loc, _)) => loc,
                Err(Unresolved::NoMapping) => return stats::inc(&stats.sample_lost_no_mapping),
                Err(Unresolved::NoMm) => return stats::inc(&stats.sample_lost_no_mm),
            }
        };
        // SAFETY: FFI call without preconditions; it hands over a reference (or null), which the
        // sample owns.
        let app = unsafe { owned_file(oprofile_shim_exe_file_irq()) };
        let task = kernel::current!();
        let (pid, tgid) = (task.pid(), task.tgid());
        let mut flags = if kernel { IS_KERNEL } else { 0 };
        if depth > 0 {
            flags |= TRACE_BEGIN;
        }
        self.push(CpuSample { pc, loc, event, flags, pid, tgid, app });
        if depth > 0 {
            let mut w = Walk { buf: self, cpu, stats, code, pid, tgid };
            let mut user = lookup::UserRegs::default();
            // SAFETY: `regs` as above; `w` lives across the call and `frame` matches the shim's
            // callback type; `user` is writable.
            let n = unsafe {
                oprofile_shim_backtrace(regs, depth, frame, (&mut w as *mut Walk<'_>).cast(), &mut user)
            };
            if user.walk {
                // The user part, as many frames as the kernel part left (legacy depth counts
                // both).
                let mut left = depth.saturating_sub(n);
                let mut emit = |pc: usize| {
                    if left == 0 || !w.frame(pc, true) {
                        return false;
                    }
                    left -= 1;
                    left != 0
                };
                if !user.entry || emit(user.pc as usize) {
                    sync::walk_user_frames(user.fp as usize, user.lr as usize, user.sp as usize, bridge::read_user_word, &mut emit);
                }
            }
        }
    }

    /// Hands every queued entry, oldest first, to `f`, then drops it (its references) and frees
    /// its slot.
    ///
    /// The caller must hold the event buffer mutex (the single-consumer invariant).
    pub(crate) fn drain(&self, mut f: impl FnMut(&Sample)) -> usize {
        let head = self.head.load(Acquire);
        let mut tail = self.tail.load(Relaxed);
        let mut n = 0;
        while tail != head {
            if let Some(cell) = self.entries.get(ring::slot(tail, self.capacity)) {
                // SAFETY: `tail` is in `tail..head`: initialised and not written by the producer
                // until `tail` moves past it (type invariants). It is moved out once: `tail`
                // passes it below.
                let s = unsafe { (*cell.get()).assume_init_read() };
                f(&s);
                drop(s);
            }
            tail = ring::advance(tail, self.capacity);
            n += 1;
        }
        self.tail.store(tail, Release);
        n
    }
}

/// The rings of a session, one per CPU id (`0..nr_cpu_ids`), and what a sample needs besides
/// its ring.
pub(crate) struct CpuBuffers {
    buffers: KVec<CpuBuffer>,
    stats: Arc<Stats>,
    /// Where kernel backtrace entries may point.
    kernel_code: KernelCode,
    /// Frames recorded per sample (0: no backtraces).
    backtrace_depth: u32,
}

impl CpuBuffers {
    /// One ring of `capacity` samples per CPU of `stats`. Errors: `ENOMEM`, `EINVAL` (see
    /// [`CpuBuffer::new`]).
    pub(crate) fn new(stats: Arc<Stats>, capacity: u32, backtrace_depth: u32, kernel_code: KernelCode) -> Result<Self> {
        let mut buffers = KVec::with_capacity(stats.cpu.len(), GFP_KERNEL)?;
        for _ in 0..stats.cpu.len() {
            buffers.push(CpuBuffer::new(capacity)?, GFP_KERNEL)?;
        }
        Ok(CpuBuffers { buffers, stats, kernel_code, backtrace_depth })
    }

    /// Takes a sample of the interrupted context on the current CPU (legacy
    /// `oprofile_add_sample(get_irq_regs(), event)`). Interrupt context only.
    pub(crate) fn add_irq_sample(&self, event: u32) {
        self.add_sample(irq_regs(), event);
    }

    /// Takes a sample of the interrupted registers `regs` (`struct pt_regs *`; null: no valid
    /// PC) on the current CPU for counter `event`, with its backtrace if `backtrace_depth` > 0
    /// (legacy `oprofile_add_sample`). Interrupt context, or any context where this CPU cannot be
    /// re-entered by another sample.
    pub(crate) fn add_sample(&self, regs: *mut c_void, event: u32) {
        profile_point_time!(SAMPLE_HANDLER);
        let cpu = kernel::cpu::CpuId::current().as_u32() as usize;
        let (Some(buf), Some(stats)) = (self.buffers.get(cpu), self.stats.cpu.get(cpu)) else {
            return;
        };
        buf.add_sample(stats, &self.stats, &self.kernel_code, regs, event, self.backtrace_depth);
    }

    /// The rings, by CPU id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &CpuBuffer> {
        self.buffers.iter()
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        // Normally empty (the final sync drained it); never leak a file or mm reference.
        self.drain(|_| {});
    }
}
