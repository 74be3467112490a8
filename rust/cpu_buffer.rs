// SPDX-License-Identifier: GPL-2.0

//! Per-CPU sample rings and the interrupt-side sample path (legacy
//! `drivers/oprofile/cpu_buffer.c`: `oprofile_add_sample`, `log_sample`, `oprofile_add_trace`).
//!
//! Each CPU owns one ring of [`CpuSample`] entries, `cpu_buffer_size` entries long. The producer
//! is that CPU's sampling interrupt ([`CpuBuffer::add_sample`]); the consumer is `buffer_sync` in
//! process context, serialised by the event buffer's mutex. No lock is taken on the producer
//! side, so a sample can never deadlock or wait.
//!
//! In NMI context (arm64 with pseudo-NMIs: perf's PMU overflow handler) nothing may take a lock,
//! allocate, or take or drop a reference that could be the last one of a file or mm. There a
//! sample is only *staged*: its PC, mode, task and kernel call chain go to this CPU's staging
//! ring ([`Staged`], plain words) and the CPU's irq_work runs the rest (below) in hard interrupt
//! context right after the NMI, as perf defers its pending work. Until the task returns to user
//! space its mappings and user registers are those of the sample; the one race is another task
//! running on the CPU first (the NMI hit a context switch with interrupts masked): such a sample
//! is never resolved against the other task (see the counters below).
//!
//! Unlike legacy, a user sample is resolved here, while the task cannot have changed its
//! mappings: [`bridge::user::lookup_irq`] finds the VMA locklessly and the entry keeps a reference to the
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
//!   dropped; global `bt_lost_no_mapping`: a user return address in no mapping (likewise);
//!   global `bt_user_thumb`, `bt_user_bad_frame`, `bt_user_not_call`: the user frame walk
//!   ended at Thumb code, at a frame that is not a frame record, at a return address that
//!   follows no call ([`sync::UserWalkEnd`]);
//! - `sample_lost_nmi_overflow`, `sample_lost_nmi_task`: NMI samples dropped at staging (ring
//!   full) or at their deferred step (another task ran first: user-mode samples); a kernel-mode
//!   one is kept with its kernel chain, without its task's executable (app cookie 0) and user
//!   chain, and counted in `nmi_task_switched`.

use crate::bridge::irq_work::{self, IrqWork, IrqWorkHandler};
use crate::bridge::rcu_arc::RcuArc;
use crate::bridge::{
    self,
    regs::{Regs, UserRegs},
    ring::Ring,
    user::Lookup,
};
use crate::buffer_sync::Flush;
use crate::common::event::ESCAPE_CODE;
use crate::common::sync::{
    self, CpuSample, KernelCode, SampleLoc, UserFrameRegs, UserWalkEnd, IS_FRAME, IS_KERNEL,
    TRACE_BEGIN,
};
use crate::profile_point::{define_profile_point, profile_point_time};
use crate::stats::{self, CpuStats, Stats};
use crate::user_stack::{StackPool, UserStack};
use kernel::fs::File;
use kernel::mm::MmWithUserAsync;
use kernel::prelude::*;
use kernel::sync::aref::ARef;
use kernel::sync::Arc;

// Profile point: samples taken (`CpuBuffers::add_sample`, interrupt context).
define_profile_point!(SAMPLE_HANDLER, "sample_handler");
// Profile points of the handler's parts (`make bench` P3 times them in runs of their own: a
// point inside another adds its two clock reads to the outer one's figure):
// the sample's PC resolution (user: lockless VMA lookup and file reference; both modes: the
// task's executable),
define_profile_point!(SAMPLE_RESOLVE, "sample_resolve");
// the sample's push onto the ring,
define_profile_point!(RING_PUSH, "ring_push");
// the copy of a user-stack snapshot,
define_profile_point!(USER_STACK_COPY, "user_stack_copy");
// the kernel part of a backtrace (the unwinder and its entries' pushes),
define_profile_point!(BT_KERNEL, "bt_kernel");
// the user part of a backtrace (frame-pointer walk and its entries),
define_profile_point!(BT_USER, "bt_user");
// and each user entry's resolution within it (VMA lookup and file reference).
define_profile_point!(BT_USER_FRAME, "bt_user_frame");

/// A queued sample: it owns a reference to its mapped file or mm and to its executable,
/// dropped with it (`fput`, `mmput_async`: both defer the final release, so any context may drop
/// one).
pub(crate) type Sample = CpuSample<ARef<File>, ARef<MmWithUserAsync>, KBox<UserStack>>;

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
    KernelCode {
        text,
        modules: bridge::module_area(),
    }
}

/// Why a user PC could not be queued.
enum Unresolved {
    NoMapping,
    NoMm,
}

/// Where a user PC was found, holding a reference to its file or address space.
type UserLoc = SampleLoc<ARef<File>, ARef<MmWithUserAsync>>;

/// Resolves user `pc` of the current task (interrupt context); the result owns a reference.
/// The flag says whether the mapping is executable (`VM_EXEC`); `Deferred` (looked up at sync
/// time) says true.
fn resolve_user(pc: usize) -> core::result::Result<(UserLoc, bool), Unresolved> {
    match bridge::user::lookup_irq(pc) {
        Lookup::File { file, offset, exec } => Ok((SampleLoc::File { file, offset }, exec)),
        Lookup::Anon { exec } => Ok((SampleLoc::Anon, exec)),
        Lookup::NoMapping => Err(Unresolved::NoMapping),
        Lookup::NoMm => Err(Unresolved::NoMm),
        // The mm is being changed right now: keep it and look up at sync time.
        Lookup::Retry => {
            let mm = bridge::user::mm_get_irq().ok_or(Unresolved::NoMm)?;
            Ok((SampleLoc::Deferred { mm }, true))
        }
    }
}

/// Kernel frames a [`Staged`] sample keeps: the backtrace depth bound.
const STAGED_FRAMES: usize = sync::BACKTRACE_DEPTH_MAX as usize;
/// Staged samples per CPU: NMIs taken while that CPU's interrupts stay masked.
const STAGED_CAPACITY: u32 = 16;

/// A sample taken in NMI context, waiting in its CPU's staging ring for the irq_work that
/// resolves and queues it ([`CpuBuffer::replay`]): plain words, no references.
pub(crate) struct Staged {
    pc: usize,
    kernel: bool,
    event: u32,
    pid: i32,
    tgid: i32,
    /// The sampled task's `task_struct` address: compared with the current task's at the
    /// deferred step, never dereferenced.
    task: usize,
    /// The kernel part of the call chain (kernel-mode samples with backtraces on), unchecked:
    /// the deferred step checks each entry as [`Walk::frame`] does.
    frames: [usize; STAGED_FRAMES],
    n_frames: usize,
}

/// Where a sample's registers come from.
enum Source<'a> {
    /// The interrupted registers, in the sampling interrupt.
    Regs(&'a Regs),
    /// A staged NMI sample at its deferred step, with the registers its task entered the
    /// kernel with (`None` for a kernel thread, or when its task is not the current one), and
    /// whether its task is the current one.
    Staged(&'a Staged, Option<&'a Regs>, bool),
}

impl Source<'_> {
    /// The sampled PC and whether it is kernel code.
    fn pc(&self) -> (usize, bool) {
        match self {
            Source::Regs(regs) => regs.pc(),
            Source::Staged(s, ..) => (s.pc, s.kernel),
        }
    }

    /// The sampled task's pid and tgid, and its executable (referenced) when it is the current
    /// task: another task's cannot be taken in interrupt context.
    fn task(&self) -> (i32, i32, Option<ARef<File>>) {
        match self {
            Source::Regs(_) => {
                let task = kernel::current!();
                (task.pid(), task.tgid(), bridge::user::exe_file_irq())
            }
            Source::Staged(s, _, current) => (
                s.pid,
                s.tgid,
                current.then(bridge::user::exe_file_irq).flatten(),
            ),
        }
    }

    /// Registers whose user context a user-stack snapshot copies.
    fn stack_regs(&self) -> Option<&Regs> {
        match self {
            Source::Regs(regs) => Some(regs),
            Source::Staged(_, user, _) => *user,
        }
    }

    /// The kernel call chain, each entry to `frame`, up to `depth` entries, and where the
    /// user part starts ([`Regs::backtrace`]); `kernel` is the sample's mode ([`Self::pc`]).
    fn backtrace(
        &self,
        kernel: bool,
        depth: u32,
        frame: &mut dyn FnMut(usize) -> bool,
    ) -> (u32, UserRegs) {
        match self {
            Source::Regs(regs) => regs.backtrace(kernel, depth, frame),
            Source::Staged(s, user, _) => staged_backtrace(s, *user, depth, frame),
        }
    }
}

/// [`Source::backtrace`] of a staged sample: its kernel frames, then (unless the walk ended)
/// the user part from `user` ([`Regs::user_start`]).
fn staged_backtrace(
    s: &Staged,
    user: Option<&Regs>,
    depth: u32,
    frame: &mut dyn FnMut(usize) -> bool,
) -> (u32, UserRegs) {
    let mut n = 0u32;
    for &pc in s.frames.iter().take(s.n_frames) {
        if n >= depth {
            break;
        }
        if !frame(pc) {
            return (n, UserRegs::default());
        }
        n += 1;
    }
    let Some(user) = user.filter(|_| n < depth && depth > 0) else {
        return (n, UserRegs::default());
    };
    // User-mode registers: no kernel frames, the user walk's start.
    let mut start = user.user_start(false);
    if s.kernel {
        start.entry = true;
        start.pc = user.pc().0;
    }
    (n, start)
}

/// The user frame walk of this architecture: ARM's frame-pointer walk, or AArch64's frame
/// records (`common::sync`).
#[cfg(not(CONFIG_ARM64))]
use sync::walk_user_frames;
#[cfg(CONFIG_ARM64)]
use sync::walk_user_frames_a64 as walk_user_frames;

/// One CPU's ring of samples: written by that CPU's sampling interrupt, drained by
/// `buffer_sync` under the event buffer mutex ([`Ring`]: a second producer or consumer would be
/// turned away, and its sample counted as lost).
pub(crate) struct CpuBuffer {
    ring: Ring<Sample>,
    /// NMI samples waiting for this CPU's irq_work (producer: the NMI; consumer: the work).
    staged: Ring<Staged>,
    /// Free user-stack snapshot buffers (`user_stack_size` > 0 and backtraces on).
    stacks: Option<StackPool>,
}

/// State of one backtrace walk.
struct Walk<'a> {
    buf: &'a CpuBuffer,
    cpu: &'a CpuStats,
    stats: &'a Stats,
    code: &'a KernelCode,
    pid: i32,
    tgid: i32,
}

impl Walk<'_> {
    /// Logs one backtrace entry, a kernel or `user` return address. Returns false to end the
    /// walk.
    fn frame(&self, pc: usize, user: bool) -> bool {
        // A broken frame can give a PC equal to ESCAPE_CODE, which the event buffer cannot carry
        // as a value: the trace ends there (legacy `oprofile_add_trace`). So does a kernel entry
        // that is no kernel code (a walk that strayed into data or the stack).
        if !self.buf.ring.has_room() || pc == ESCAPE_CODE || (!user && !self.code.contains(pc)) {
            stats::inc(&self.cpu.backtrace_aborted);
            return false;
        }
        let loc = if user {
            let resolved = {
                profile_point_time!(BT_USER_FRAME);
                resolve_user(pc)
            };
            match resolved {
                Ok((loc, true)) => loc,
                Ok((loc, false)) => {
                    // Not a return address: data or stack of the task (its reference drops
                    // here).
                    drop(loc);
                    stats::inc(&self.cpu.backtrace_aborted);
                    return false;
                }
                Err(_) => {
                    stats::inc(&self.stats.bt_lost_no_mapping);
                    return false;
                }
            }
        } else {
            SampleLoc::Kernel
        };
        let flags = IS_FRAME | if user { 0 } else { IS_KERNEL };
        let entry = CpuSample {
            pc,
            loc,
            event: 0,
            flags,
            pid: self.pid,
            tgid: self.tgid,
            app: None,
            stack: None,
        };
        // Published with its sample (`add_sample`).
        if self.buf.ring.push_pending(entry).is_err() {
            stats::inc(&self.cpu.backtrace_aborted);
            return false;
        }
        true
    }

    /// Logs the user part of a backtrace from `user`, at most `left` entries (legacy depth
    /// counts kernel and user frames together): the user PC the kernel was entered from, then,
    /// if `walk`, the frame-pointer walk ([`sync::walk_user_frames`]), whose end is counted by
    /// reason.
    fn user_frames(&self, user: &UserRegs, mut left: u32, walk: bool) {
        let mut emit = |pc: usize| {
            if left == 0 || !self.frame(pc, true) {
                return false;
            }
            left -= 1;
            left != 0
        };
        if (user.entry && !emit(user.pc)) || !walk {
            return;
        }
        let sp = user.sp;
        let regs = UserFrameRegs {
            fp: user.fp,
            lr: user.lr,
            sp,
            cpsr: user.cpsr,
            // A stack that must not be read (device memory, not readable) bounds the walk like
            // none: its first frame is outside (`bt_user_bad_frame`).
            stack_end: match bridge::user::stack_end_irq(sp) {
                bridge::user::StackEnd::End(end) => end,
                _ => 0,
            },
        };
        let counter = match walk_user_frames(&regs, bridge::regs::read_user_word, &mut emit) {
            UserWalkEnd::Done => return,
            UserWalkEnd::Thumb => &self.stats.bt_user_thumb,
            UserWalkEnd::BadFrame => &self.stats.bt_user_bad_frame,
            UserWalkEnd::NotCall => &self.stats.bt_user_not_call,
        };
        stats::inc(counter);
    }
}

impl CpuBuffer {
    /// A ring of `capacity` samples (`cpu_buffer_size`), with user-stack snapshots of
    /// `stack_words` words when that is not 0.
    ///
    /// Errors: `EINVAL` if `capacity` is 0 or above `common::ring::MAX_CAPACITY`; `ENOMEM`.
    pub(crate) fn new(capacity: u32, stack_words: usize) -> Result<Self> {
        let stacks = if stack_words > 0 {
            Some(StackPool::new(stack_words, capacity)?)
        } else {
            None
        };
        Ok(CpuBuffer {
            ring: Ring::new(capacity)?,
            staged: Ring::new(STAGED_CAPACITY)?,
            stacks,
        })
    }

    /// Takes a sample of the interrupted registers `regs` (`None`: no valid PC) for counter
    /// `event`, with a backtrace of up to `depth` frames (legacy `oprofile_add_sample` +
    /// `log_sample` + `ops->backtrace`). Counts it in `cpu` / `stats` as the module docs say.
    ///
    /// Called on this buffer's CPU from its sampling interrupt. Returns whether the CPU's
    /// snapshot pool is low (a sync pass should be queued: [`StackPool::take`]).
    pub(crate) fn add_sample(
        &self,
        cpu: &CpuStats,
        stats: &Stats,
        code: &KernelCode,
        regs: Option<&Regs>,
        event: u32,
        depth: u32,
    ) -> bool {
        stats::inc(&cpu.sample_received);
        let Some(regs) = regs else {
            stats::inc(&cpu.sample_invalid_eip);
            return false;
        };
        self.log_sample(cpu, stats, code, &Source::Regs(regs), event, depth)
    }

    /// Stages a sample of `regs` for counter `event` in NMI context: no lookup, no reference,
    /// no lock; the kernel call chain (up to `depth`) is read now, while the stack holds it.
    /// Counts it received, or lost (`sample_invalid_eip`, `sample_lost_nmi_overflow`). Returns
    /// whether it was staged.
    fn stage(&self, cpu: &CpuStats, regs: Option<&Regs>, event: u32, depth: u32) -> bool {
        stats::inc(&cpu.sample_received);
        let Some(regs) = regs else {
            stats::inc(&cpu.sample_invalid_eip);
            return false;
        };
        let (pc, kernel) = regs.pc();
        let task = kernel::current!();
        let mut s = Staged {
            pc,
            kernel,
            event,
            pid: task.pid(),
            tgid: task.tgid(),
            task: task.as_ptr() as usize,
            frames: [0; STAGED_FRAMES],
            n_frames: 0,
        };
        if kernel && depth > 0 {
            let (frames, mut n) = (&mut s.frames, 0);
            regs.backtrace(kernel, depth, &mut |pc| match frames.get_mut(n) {
                Some(slot) => {
                    *slot = pc;
                    n += 1;
                    true
                }
                None => false,
            });
            s.n_frames = n;
        }
        if self.staged.push(s).is_err() {
            stats::inc(&cpu.sample_lost_nmi_overflow);
            return false;
        }
        true
    }

    /// The deferred step of this CPU's staged samples (its irq_work, hard interrupt context):
    /// each is logged as the sampling interrupt would have, if its task still runs here.
    /// Returns whether the snapshot pool is low, as [`CpuBuffer::add_sample`].
    fn replay(&self, cpu: &CpuStats, stats: &Stats, code: &KernelCode, depth: u32) -> bool {
        let me = kernel::current!().as_ptr() as usize;
        let mut low = false;
        self.staged.drain(|s| {
            let current = s.task == me;
            if !current {
                // A user PC of another task cannot be placed; a kernel one can, without its
                // task's executable and user chain.
                if !s.kernel {
                    return stats::inc(&cpu.sample_lost_nmi_task);
                }
                stats::inc(&cpu.nmi_task_switched);
            }
            low |= bridge::regs::with_task_user_regs(|user| {
                let user = user.filter(|_| current);
                self.log_sample(
                    cpu,
                    stats,
                    code,
                    &Source::Staged(&s, user, current),
                    s.event,
                    depth,
                )
            });
        });
        low
    }

    /// Logs a sample of `src` (received, with registers): resolution, snapshot, ring, chain.
    /// Returns whether the snapshot pool is low ([`StackPool::take`]).
    fn log_sample(
        &self,
        cpu: &CpuStats,
        stats: &Stats,
        code: &KernelCode,
        src: &Source<'_>,
        event: u32,
        depth: u32,
    ) -> bool {
        let (pc, kernel) = src.pc();
        if !self.ring.has_room() {
            stats::inc(&cpu.sample_lost_overflow);
            return false;
        }
        let resolve = SAMPLE_RESOLVE.start();
        let loc = if kernel {
            SampleLoc::Kernel
        } else {
            match resolve_user(pc) {
                Ok((loc, _)) => loc,
                Err(Unresolved::NoMapping) => {
                    stats::inc(&stats.sample_lost_no_mapping);
                    return false;
                }
                Err(Unresolved::NoMm) => {
                    stats::inc(&stats.sample_lost_no_mm);
                    return false;
                }
            }
        };
        let (pid, tgid, app) = src.task();
        SAMPLE_RESOLVE.leave(resolve);
        let mut flags = if kernel { IS_KERNEL } else { 0 };
        if depth > 0 {
            flags |= TRACE_BEGIN;
        }
        let (stack, low) = self.snapshot(stats, src, tgid, depth);
        // With a snapshot `oprof` unwinds the user callers; the frame-pointer walk is not
        // needed (the user PC a kernel-mode sample entered the kernel from still is).
        let walk_user = stack.is_none();
        // The sample and its backtrace entries are published together (below), so a sync pass
        // never takes a sample without the entries that follow it.
        let pushed = {
            profile_point_time!(RING_PUSH);
            self.ring.push_pending(CpuSample {
                pc,
                loc,
                event,
                flags,
                pid,
                tgid,
                app,
                stack,
            })
        };
        if pushed.is_err() {
            // Another producer was active (cannot happen from the sampling interrupt).
            stats::inc(&cpu.sample_lost_overflow);
            return low;
        }
        if depth > 0 {
            let w = Walk {
                buf: self,
                cpu,
                stats,
                code,
                pid,
                tgid,
            };
            let (n, user) = {
                profile_point_time!(BT_KERNEL);
                src.backtrace(kernel, depth, &mut |pc| w.frame(pc, false))
            };
            if user.walk {
                profile_point_time!(BT_USER);
                w.user_frames(&user, depth.saturating_sub(n), walk_user);
            }
        }
        // Only another producer (which cannot run here) could refuse; it publishes these too.
        self.ring.publish();
        low
    }

    /// The user-stack snapshot of a sample of `src` (task `tgid`) with a backtrace of `depth`,
    /// if snapshots are on, and whether the pool is now low ([`StackPool::take`]).
    fn snapshot(
        &self,
        stats: &Stats,
        src: &Source<'_>,
        tgid: i32,
        depth: u32,
    ) -> (Option<KBox<UserStack>>, bool) {
        let Some(pool) = self.stacks.as_ref().filter(|_| depth > 0) else {
            return (None, false);
        };
        profile_point_time!(USER_STACK_COPY);
        match src
            .stack_regs()
            .and_then(|regs| pool.take(stats, regs, tgid))
        {
            Some(t) => (t.stack, t.low),
            None => (None, false),
        }
    }

    /// Hands every queued sample, oldest first, to `f`, then drops it (its references) and
    /// frees its slot; returns how many. A snapshot `f` takes out of the sample must be handed
    /// back with [`CpuBuffer::give_back`]. Process context, under the event buffer mutex.
    pub(crate) fn drain(&self, mut f: impl FnMut(&mut Sample)) -> usize {
        self.ring.drain(|mut s| f(&mut s))
    }

    /// Returns a snapshot buffer taken out of a sample to this CPU's pool.
    pub(crate) fn give_back(&self, stack: KBox<UserStack>) {
        if let Some(pool) = &self.stacks {
            pool.give_back(stack);
        }
    }
}

/// The rings of a session, one per CPU id (`0..nr_cpu_ids`), and what a sample needs besides
/// its ring; shared with the CPUs' irq_works ([`CpuBuffers`]).
pub(crate) struct Rings {
    buffers: KVec<CpuBuffer>,
    stats: Arc<Stats>,
    /// Where kernel backtrace entries may point.
    kernel_code: KernelCode,
    /// Frames recorded per sample (0: no backtraces).
    backtrace_depth: u32,
    /// The session's on-demand sync passes while sampling runs, queued when a CPU's snapshot
    /// pool runs low ([`CpuBuffers::set_sync_wake`]); borrowed, not owned, by the interrupt.
    sync_wake: RcuArc<Flush>,
}

/// The rings of a session and, per CPU id, the irq_work that runs the deferred step of its NMI
/// samples. Each work holds a reference to the rings, and dropping one waits for its run, so the
/// rings outlive every run.
pub(crate) struct CpuBuffers {
    rings: Arc<Rings>,
    deferred: KVec<IrqWork<Rings>>,
}

/// Words of a user-stack snapshot of `bytes` (`user_stack_size`, rounded down to words).
pub(crate) fn stack_words(bytes: u64) -> usize {
    (bytes / core::mem::size_of::<usize>() as u64) as usize
}

impl Rings {
    /// This CPU's ring and stats; `None` for a CPU id beyond `nr_cpu_ids` at creation.
    fn this_cpu(&self) -> Option<(usize, &CpuBuffer, &CpuStats)> {
        let cpu = kernel::cpu::CpuId::current().as_u32() as usize;
        Some((cpu, self.buffers.get(cpu)?, self.stats.cpu.get(cpu)?))
    }

    /// A CPU's snapshot pool is low: queues a sync pass unless one is queued, counting it in
    /// `user_stack_sync_wake` (hard interrupt context, as the sample was taken).
    fn wake_sync(&self) {
        if self.sync_wake.with(|f| Flush::kick(&f.into())) == Some(true) {
            stats::inc(&self.stats.user_stack_sync_wake);
        }
    }
}

impl IrqWorkHandler for Rings {
    /// The deferred step of this CPU's staged NMI samples ([`CpuBuffer::replay`]).
    fn run(&self) {
        if let Some((_, buf, cpu)) = self.this_cpu() {
            if buf.replay(cpu, &self.stats, &self.kernel_code, self.backtrace_depth) {
                self.wake_sync();
            }
        }
    }
}

impl CpuBuffers {
    /// One ring of `capacity` samples per CPU of `stats`, with user-stack snapshots of
    /// `stack_words` words when backtraces are on and that is not 0, and one irq_work per CPU.
    /// Errors: `ENOMEM`, `EINVAL` (see [`CpuBuffer::new`]).
    pub(crate) fn new(
        stats: Arc<Stats>,
        capacity: u32,
        backtrace_depth: u32,
        stack_words: usize,
        kernel_code: KernelCode,
    ) -> Result<Self> {
        let stack_words = if backtrace_depth > 0 { stack_words } else { 0 };
        let cpus = stats.cpu.len();
        let mut buffers = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            buffers.push(CpuBuffer::new(capacity, stack_words)?, GFP_KERNEL)?;
        }
        let rings = Arc::new(
            Rings {
                buffers,
                stats,
                kernel_code,
                backtrace_depth,
                sync_wake: RcuArc::new(),
            },
            GFP_KERNEL,
        )?;
        let mut deferred = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            deferred.push(IrqWork::new(rings.clone())?, GFP_KERNEL)?;
        }
        Ok(CpuBuffers { rings, deferred })
    }

    /// Takes a sample of the interrupted context on the current CPU (legacy
    /// `oprofile_add_sample(get_irq_regs(), event)`). Interrupt context only.
    pub(crate) fn add_irq_sample(&self, event: u32) {
        bridge::regs::with_irq_regs(|regs| self.add_sample(regs, event));
    }

    /// Takes a sample of the interrupted registers `regs` (`None`: no valid PC) on the current
    /// CPU for counter `event`, with its backtrace if `backtrace_depth` > 0
    /// (legacy `oprofile_add_sample`). Interrupt context, or any context where this CPU cannot be
    /// re-entered by another sample; in NMI context the sample is staged and this CPU's
    /// irq_work queued ([`CpuBuffer::stage`]).
    pub(crate) fn add_sample(&self, regs: Option<&Regs>, event: u32) {
        profile_point_time!(SAMPLE_HANDLER);
        let r = &*self.rings;
        let Some((cpu, buf, stats)) = r.this_cpu() else {
            return;
        };
        if !irq_work::in_nmi() {
            if buf.add_sample(
                stats,
                &r.stats,
                &r.kernel_code,
                regs,
                event,
                r.backtrace_depth,
            ) {
                r.wake_sync();
            }
            return;
        }
        if buf.stage(stats, regs, event, r.backtrace_depth) {
            if let Some(work) = self.deferred.get(cpu) {
                work.queue();
            }
        }
    }

    /// Sets the sync passes a sample queues when its CPU's snapshot pool runs low
    /// (`user_stack_sync_wake`), or none. Set while sampling runs and cleared once it stopped
    /// (and before the session is dropped: the passes hold the session, which holds these
    /// rings). Sleeps (waits for an RCU grace period when one was set): process context.
    pub(crate) fn set_sync_wake(&self, flush: Option<Arc<Flush>>) {
        self.rings.sync_wake.set(flush);
    }

    /// CPU `cpu` goes offline, its sample sources stopped: runs the deferred step of the NMI
    /// samples still staged there and waits for it (its irq_work; on the CPU itself, from its
    /// hotplug teardown, interrupts on). A staged sample then is in the CPU's ring like any
    /// other, which every sync pass drains whether the CPU is online or not, so no sample of
    /// an offline CPU waits for it to come back. Process context.
    pub(crate) fn cpu_offline(&self, cpu: u32) {
        if let Some(work) = self.deferred.get(cpu as usize) {
            work.sync();
        }
    }

    /// The rings, by CPU id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &CpuBuffer> {
        self.rings.buffers.iter()
    }
}
