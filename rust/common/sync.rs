// SPDX-License-Identifier: GPL-2.0

//! The `buffer_sync` state machine: per-CPU samples in, legacy event words out.
//!
//! Legacy `drivers/oprofile/buffer_sync.c` semantics, with one deliberate change: a sample and the
//! context records it needs (CPU_SWITCH, KERNEL_ENTER/EXIT, CTX_SWITCH, COOKIE_SWITCH) are written
//! as one group, all or nothing. Legacy dropped single words when the event buffer was full, which
//! could leave half a CTX_SWITCH in the stream; here a group that does not fit is dropped whole,
//! counted as one lost sample, and its context is re-emitted before the next sample.
//!
//! Order inside a group (legacy `sync_buffer`): CPU_SWITCH (first sample of a pass), TRACE_BEGIN,
//! KERNEL_ENTER/EXIT, CTX_SWITCH + TGID, COOKIE_SWITCH (user samples), then `pc, event`.
//!
//! Backtraces (legacy `oprofile_add_trace`): a sample with [`TRACE_BEGIN`] is followed in the CPU
//! buffer by its return addresses ([`IS_FRAME`] entries, innermost first, kernel frames before
//! user frames). Each is emitted as `pc_or_offset, 0`, preceded by KERNEL_ENTER/EXIT or
//! COOKIE_SWITCH when those change; it is its own group, and once one is lost the rest of that
//! backtrace is dropped. A backtrace ends at the next TRACE_BEGIN, CPU_SWITCH or CTX_SWITCH.

use super::aarch64;
use super::arm;
use super::event::Record;

/// `CpuSample::flags`: the sample was taken in kernel mode.
pub const IS_KERNEL: u32 = 1 << 0;
/// `CpuSample::flags`: the sample is followed by its backtrace entries (legacy `TRACE_BEGIN`).
pub const TRACE_BEGIN: u32 = 1 << 1;
/// `CpuSample::flags`: a backtrace entry (a return address) of the last sample with
/// [`TRACE_BEGIN`]; `event` is 0 and `pid`/`tgid` are the sample's.
pub const IS_FRAME: u32 = 1 << 2;

/// The largest `backtrace_depth` the module accepts (frames, kernel and user together); models
/// without backtrace support accept only 0. Also the host's bound for a chain unwound from a
/// snapshot whose recorded depth is unknown.
pub const BACKTRACE_DEPTH_MAX: u64 = 128;

/// Entries of the arch unwinder taken in the sampling handler before the sampled frame: arm64's
/// `stack_trace_save()` starts in the handler itself (perf core, the PMU driver, the GIC,
/// `call_on_irq_stack`, the exception entry: about 20); ARM's walk starts at the sampled PC.
pub const KERNEL_TRACE_ENTRY_FRAMES: usize = 48;

/// Lock-function frames `profile_pc()` may skip above the sampled PC (nested spinlock text is
/// at most a few frames deep).
pub const KERNEL_TRACE_LOCK_FRAMES: usize = 8;

/// The callers of a kernel-mode sample among an unwinder's `entries` (innermost first): the
/// entries after the sampled PC `pc` and, as `profile_pc()` reports a lock function's caller as
/// the sample (legacy oprofile's and the kernel profiler's PC), after that caller. `in_lock`
/// tells whether an address is in the spinlock text (`in_lock_functions()`). Empty when `pc`
/// is not among the entries (the unwinder lost the interrupted frame): no chain is guessed.
pub fn sampled_kernel_chain(
    entries: &[usize],
    pc: usize,
    in_lock: impl Fn(usize) -> bool,
) -> &[usize] {
    let Some(at) = entries.iter().position(|&e| e == pc) else {
        return &[];
    };
    let rest = &entries[at..];
    // profile_pc(): the first frame from the sampled PC on outside the lock functions.
    let reported = rest.iter().position(|&e| !in_lock(e)).unwrap_or(rest.len());
    rest.get(reported.saturating_add(1)..).unwrap_or(&[])
}

/// What a sampled PC was found in when the sample was taken. The handles `F` (a mapped file)
/// and `M` (an address space) are opaque to this crate: the module stores owned references to
/// kernel objects in them (dropped with the sample), host tests plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SampleLoc<F = usize, M = usize> {
    /// Kernel text: the raw PC is emitted.
    #[default]
    Kernel,
    /// A file-backed user mapping: `file`, `offset` in bytes from the start of the file.
    File { file: F, offset: usize },
    /// An anonymous user mapping: the raw PC is emitted with `NO_COOKIE`.
    Anon,
    /// Not resolved when sampled (the mm was being changed): `mm` is looked up at sync time.
    Deferred { mm: M },
}

/// One entry of a per-CPU sample buffer, written in interrupt context; `F` and `M` as in
/// [`SampleLoc`], `S` a user-stack snapshot (the module's `user_stack::UserStack`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSample<F = usize, M = usize, S = ()> {
    /// Program counter at the interrupt (for a frame: the return address).
    pub pc: usize,
    /// Where `pc` points.
    pub loc: SampleLoc<F, M>,
    /// Counter index (0 in timer mode and for frames).
    pub event: u32,
    /// [`IS_KERNEL`], [`TRACE_BEGIN`], [`IS_FRAME`].
    pub flags: u32,
    /// Thread id (`task->pid`) of the interrupted task.
    pub pid: i32,
    /// Process id (`task->tgid`) of the interrupted task.
    pub tgid: i32,
    /// The task's executable, if known.
    pub app: Option<F>,
    /// The user registers and stack of the sampled task, when snapshots are on
    /// (`user_stack_size`); written after the sample as USER_STACK.
    pub stack: Option<S>,
}

impl<F, M, S> CpuSample<F, M, S> {
    /// Whether the sample was taken in kernel mode.
    pub fn is_kernel(&self) -> bool {
        self.flags & IS_KERNEL != 0
    }

    /// Whether this entry is a backtrace entry of the preceding sample.
    pub fn is_frame(&self) -> bool {
        self.flags & IS_FRAME != 0
    }
}

/// Where a sample's PC points, as resolved by the caller in process context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Kernel text: the raw PC is emitted (legacy; userspace classifies vmlinux vs modules).
    Kernel,
    /// User code: `offset` into the image `cookie` (0 = anonymous, then `offset` is the PC).
    User { cookie: u64, offset: u64 },
    /// The task had no mm (`sample_lost_no_mm`).
    NoMm,
    /// No mapping contains the PC (`sample_lost_no_mapping`).
    NoMapping,
    /// A backtrace entry in a mapping that is not executable: not a return address (the chain
    /// ends there, `backtrace_aborted`). Never given for a sample's own PC.
    NotCode,
}

/// Where kernel code can be, for checking kernel backtrace entries (a frame walk that strays
/// into data must not put data or stack addresses into the stream as kernel PCs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelCode {
    /// The kernel image's text `_stext.._etext` (end exclusive), if known.
    pub text: Option<(usize, usize)>,
    /// The area modules are loaded into (`MODULES_VADDR..MODULES_END`, end exclusive).
    pub modules: (usize, usize),
}

impl KernelCode {
    /// Whether `pc` can be a kernel return address: inside the kernel text or the module area.
    /// Every address is accepted when the text bounds are unknown.
    pub fn contains(&self, pc: usize) -> bool {
        let within = |(start, end): (usize, usize)| start <= pc && pc < end;
        match self.text {
            Some(text) => within(text) || within(self.modules),
            None => true,
        }
    }
}

/// What became of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written to the event buffer.
    Delivered,
    /// Dropped: the task had no mm.
    LostNoMm,
    /// Dropped: no mapping for the PC.
    LostNoMapping,
    /// Dropped whole: the event buffer had no room (`event_lost_overflow`).
    LostOverflow,
}

/// What became of one backtrace entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameOutcome {
    /// Written to the event buffer.
    Delivered,
    /// Dropped with the rest of its backtrace: no mapping for it (`bt_lost_no_mapping`).
    LostNoMapping,
    /// Dropped with the rest of its backtrace: no room in the event buffer
    /// (`backtrace_aborted`).
    LostOverflow,
    /// Dropped with the rest of its backtrace: not a code address ([`Location::NotCode`],
    /// `backtrace_aborted`).
    NotCode,
    /// Dropped silently: its sample was dropped, or an earlier entry of the backtrace was.
    Orphan,
}

/// Destination of event words (the event buffer).
pub trait EventSink {
    /// Appends all of `words`, or nothing and returns `false` if they do not all fit.
    fn write_group(&mut self, words: &[usize]) -> bool;
}

/// Words of the largest group: CPU_SWITCH 3 + TRACE_BEGIN 2 + KERNEL_* 2 + CTX 7 + COOKIE 3 + 2.
pub const MAX_GROUP_WORDS: usize = 19;

/// A group of records under construction, written to the sink all or nothing.
struct Group {
    words: [usize; MAX_GROUP_WORDS],
    n: usize,
}

impl Group {
    fn new() -> Self {
        Group {
            words: [0; MAX_GROUP_WORDS],
            n: 0,
        }
    }

    fn push(&mut self, r: Record) {
        // MAX_GROUP_WORDS covers every combination built here; `encode` returns None otherwise.
        if let Some(k) = self.words.get_mut(self.n..).and_then(|w| r.encode(w)) {
            self.n += k;
        }
    }

    fn words(&self) -> &[usize] {
        &self.words[..self.n]
    }
}

/// State of one sync pass over one CPU's buffer (legacy resets it at every pass).
#[derive(Debug, Clone)]
pub struct SyncPass {
    cpu: u32,
    cpu_switch_done: bool,
    in_kernel: Option<bool>,
    ctx: Option<(i32, i32, u64)>,
    cookie: Option<u64>,
    /// The last sample had TRACE_BEGIN and it and all its entries so far were delivered.
    trace_live: bool,
}

impl SyncPass {
    /// Starts a pass for `cpu`: the first delivered sample is preceded by CPU_SWITCH and full
    /// context, as legacy `add_cpu_switch` + `op_cpu_buffer_reset` force.
    pub fn new(cpu: u32) -> Self {
        SyncPass {
            cpu,
            cpu_switch_done: false,
            in_kernel: None,
            ctx: None,
            cookie: None,
            trace_live: false,
        }
    }

    /// Emits `s` (resolved to `loc`, in a task whose executable has cookie `app_cookie`),
    /// preceded by TRACE_BEGIN if `s` has [`TRACE_BEGIN`].
    pub fn add_sample(
        &mut self,
        s: &CpuSample<impl Sized, impl Sized, impl Sized>,
        loc: Location,
        app_cookie: u64,
        sink: &mut impl EventSink,
    ) -> Outcome {
        self.trace_live = false;
        let (pc, cookie) = match loc {
            Location::NoMm => return Outcome::LostNoMm,
            // `NotCode` is only given for frames; a sample's PC was executing.
            Location::NoMapping | Location::NotCode => return Outcome::LostNoMapping,
            Location::Kernel => (s.pc as u64, None),
            Location::User { cookie, offset } => (offset, Some(cookie)),
        };
        let mut g = Group::new();
        if !self.cpu_switch_done {
            g.push(Record::CpuSwitch {
                cpu: u64::from(self.cpu),
            });
        }
        let traced = s.flags & TRACE_BEGIN != 0;
        if traced {
            g.push(Record::TraceBegin);
        }
        let kernel = s.is_kernel();
        self.push_mode(&mut g, kernel);
        let ctx = (s.pid, s.tgid, app_cookie);
        let ctx_switch = self.ctx != Some(ctx);
        if ctx_switch {
            g.push(Record::CtxSwitch {
                pid: s.pid as u64,
                tgid: s.tgid as u64,
                app_cookie,
            });
        }
        // Readers forget the image at CTX_SWITCH (legacy resets last_cookie): so do we, so a new
        // task's first user sample or frame always gets COOKIE_SWITCH.
        let last_cookie = if ctx_switch { None } else { self.cookie };
        Self::push_cookie(&mut g, cookie, last_cookie);
        g.push(Record::Sample {
            pc,
            event: u64::from(s.event),
        });
        if !sink.write_group(g.words()) {
            return Outcome::LostOverflow;
        }
        self.cpu_switch_done = true;
        self.in_kernel = Some(kernel);
        self.ctx = Some(ctx);
        self.cookie = cookie.or(last_cookie);
        self.trace_live = traced;
        Outcome::Delivered
    }

    /// Appends KERNEL_ENTER/EXIT if `kernel` is not the current mode.
    fn push_mode(&self, g: &mut Group, kernel: bool) {
        if self.in_kernel != Some(kernel) {
            g.push(if kernel {
                Record::KernelEnter
            } else {
                Record::KernelExit
            });
        }
    }

    /// Appends COOKIE_SWITCH if `cookie` (user words) is not the image in force, `last`.
    fn push_cookie(g: &mut Group, cookie: Option<u64>, last: Option<u64>) {
        if let Some(c) = cookie.filter(|&c| last != Some(c)) {
            g.push(Record::CookieSwitch { cookie: c });
        }
    }

    /// Emits backtrace entry `f` (resolved to `loc`) of the last sample: a mode switch and
    /// COOKIE_SWITCH as needed, then `pc_or_offset, 0` (legacy `oprofile_add_trace` entries).
    /// After a lost entry the rest of the backtrace is dropped, so callers are never shifted.
    pub fn add_frame(
        &mut self,
        f: &CpuSample<impl Sized, impl Sized, impl Sized>,
        loc: Location,
        sink: &mut impl EventSink,
    ) -> FrameOutcome {
        if !self.trace_live {
            return FrameOutcome::Orphan;
        }
        let (pc, cookie) = match loc {
            Location::NoMm | Location::NoMapping => {
                self.trace_live = false;
                return FrameOutcome::LostNoMapping;
            }
            Location::NotCode => {
                self.trace_live = false;
                return FrameOutcome::NotCode;
            }
            Location::Kernel => (f.pc as u64, None),
            Location::User { cookie, offset } => (offset, Some(cookie)),
        };
        let mut g = Group::new();
        let kernel = f.is_kernel();
        self.push_mode(&mut g, kernel);
        Self::push_cookie(&mut g, cookie, self.cookie);
        g.push(Record::Sample { pc, event: 0 });
        if !sink.write_group(g.words()) {
            self.trace_live = false;
            return FrameOutcome::LostOverflow;
        }
        self.in_kernel = Some(kernel);
        self.cookie = cookie.or(self.cookie);
        FrameOutcome::Delivered
    }
}

/// The file offset of user `pc` in a file mapping that starts at address `vm_start` and maps
/// the file from page `vm_pgoff` (pages of `1 << page_shift` bytes): `(vm_pgoff << page_shift) +
/// pc - vm_start`, in the kernel's unsigned long arithmetic (wrapping). `page_shift` must be
/// below the bits of `usize`.
pub fn file_offset(pc: usize, vm_start: usize, vm_pgoff: usize, page_shift: u32) -> usize {
    vm_pgoff
        .wrapping_shl(page_shift)
        .wrapping_add(pc.wrapping_sub(vm_start))
}

/// A leaf's saved fp lies at most this far above its own fp. Bytes.
pub const LEAF_LINK_SPAN: usize = 1 << 20;

/// Where a user frame-pointer walk starts: the user registers of the sample (for a kernel-mode
/// sample, those the task entered the kernel with) and the end of its stack mapping.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserFrameRegs {
    /// r11 (`fp`), r14 (`lr`), r13 (`sp`) and the CPSR.
    pub fp: usize,
    pub lr: usize,
    pub sp: usize,
    pub cpsr: usize,
    /// End (exclusive) of the mapping that contains `sp`; 0 when none does.
    pub stack_end: usize,
}

/// Why a user frame-pointer walk ended. Each reason but `Done` has a `stats/` counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserWalkEnd {
    /// The outermost frame (saved fp 0), or `emit` ended the walk (depth reached, or an entry it
    /// refused and counted itself).
    Done,
    /// Thumb code: the sampled code, or a caller returned to (return address with bit 0 set).
    /// Thumb code keeps no ARM frame records (r7 or nothing is its frame pointer, r11 a
    /// general register): `stats/bt_user_thumb`.
    Thumb,
    /// A frame pointer outside the stack mapping (`sp ..< stack_end`), misaligned, not above
    /// the previous frame, or unreadable: `stats/bt_user_bad_frame`.
    BadFrame,
    /// A saved return address whose preceding instruction is no call, or whose code cannot be
    /// read: `stats/bt_user_not_call`.
    NotCall,
}

/// Walks the user frames of a GCC ARM-mode frame-pointer build (`-marm
/// -fno-omit-frame-pointer`) from `regs`, passing each return address to `emit` until it
/// returns false. `read(addr)` reads the word at user address `addr` (`None` on a fault; the
/// kernel reads without faulting in, so this never sleeps). Returns why the walk ended.
///
/// A function that calls others starts `push {fp, lr}; add fp, sp, #4`, so fp points at the
/// saved lr with the caller's fp just below; a leaf starts `push {fp}; add fp, sp, #0`, so fp
/// points at the caller's fp and the return address is still in lr. Only the innermost frame
/// (`lr` valid) can be a leaf; it is recognised by `[fp]` holding a stack address just above fp
/// ([`LEAF_LINK_SPAN`]) rather than a code address.
///
/// Nothing is followed that the code does not prove to be a frame record: the walk starts only
/// in ARM state; every frame (fp and fp - 4) lies in the stack mapping, word-aligned and above
/// the previous one; every return address follows a call instruction ([`arm::returns_after_call`]);
/// a return into Thumb code is reported and ends the walk (that caller's r11 is no frame
/// pointer). `emit` adds its own checks (an executable mapping).
pub fn walk_user_frames(
    regs: &UserFrameRegs,
    mut read: impl FnMut(usize) -> Option<usize>,
    mut emit: impl FnMut(usize) -> bool,
) -> UserWalkEnd {
    if regs.cpsr & arm::PSR_T_BIT != 0 {
        return UserWalkEnd::Thumb;
    }
    let in_stack =
        |a: usize| a & 3 == 0 && a >= regs.sp && a < regs.stack_end && regs.stack_end - a >= 4;
    let mut fp = regs.fp;
    if fp == 0 {
        return UserWalkEnd::Done;
    }
    if !in_stack(fp) {
        return UserWalkEnd::BadFrame;
    }
    let Some(word) = read(fp) else {
        return UserWalkEnd::BadFrame;
    };
    if word > fp && word - fp < LEAF_LINK_SPAN && in_stack(word) {
        if let Some(end) = return_to(regs.lr, &mut read, &mut emit) {
            return end;
        }
        fp = word;
    }
    loop {
        let tail = fp.wrapping_sub(4);
        if !in_stack(tail) {
            return UserWalkEnd::BadFrame;
        }
        let (Some(next_fp), Some(ret)) = (read(tail), read(fp)) else {
            return UserWalkEnd::BadFrame;
        };
        if let Some(end) = return_to(ret, &mut read, &mut emit) {
            return end;
        }
        if next_fp == 0 {
            return UserWalkEnd::Done;
        }
        if next_fp <= fp || !in_stack(next_fp) {
            return UserWalkEnd::BadFrame;
        }
        fp = next_fp;
    }
}

/// One return address `ret` of [`walk_user_frames`]: checked to follow a call, then emitted.
/// `None` to go on; else why the walk ends (`Done` when `emit` refused, `Thumb` after a return
/// into Thumb code was emitted).
fn return_to(
    ret: usize,
    read: &mut impl FnMut(usize) -> Option<usize>,
    emit: &mut impl FnMut(usize) -> bool,
) -> Option<UserWalkEnd> {
    if arm::returns_after_call(ret, |a| read(a).map(|w| w as u32)) != Some(true) {
        return Some(UserWalkEnd::NotCall);
    }
    if !emit(ret) {
        return Some(UserWalkEnd::Done);
    }
    (ret & 1 != 0).then_some(UserWalkEnd::Thumb)
}

/// Walks the user frame records of AArch64 code (AAPCS64 §6.4.6; [`aarch64`]) from `regs`
/// (`fp` = x29, `sp`, `cpsr` = PSTATE; `lr` unused), passing each return address to `emit` until
/// it returns false. `read(addr)` reads the 8-byte word at user address `addr` (`None` on a
/// fault; never sleeps). Returns why the walk ended.
///
/// A function with a frame keeps `{caller's x29, x30}` at x29. A leaf function (GCC's default
/// `-momit-leaf-frame-pointer`) keeps none, so its caller, still in x30, cannot be told from a
/// stale value: it is left out (as perf's arm64 user unwinder does), never guessed. Only what is
/// proven is followed: every record lies in the stack mapping, 8-byte aligned and above the
/// previous one; every return address follows a call instruction ([`aarch64::returns_after_call`]);
/// a zero link or a `{0, 0}` record ends the walk. An AArch32 (compat) task is no frame-record
/// walk: `BadFrame`.
pub fn walk_user_frames_a64(
    regs: &UserFrameRegs,
    mut read: impl FnMut(usize) -> Option<usize>,
    mut emit: impl FnMut(usize) -> bool,
) -> UserWalkEnd {
    if regs.cpsr & aarch64::PSR_MODE32_BIT != 0 {
        return UserWalkEnd::BadFrame;
    }
    let in_stack =
        |a: usize| a & 7 == 0 && a >= regs.sp && a < regs.stack_end && regs.stack_end - a >= 16;
    let mut fp = regs.fp;
    loop {
        if fp == 0 {
            return UserWalkEnd::Done;
        }
        if !in_stack(fp) {
            return UserWalkEnd::BadFrame;
        }
        let (Some(next_fp), Some(ret)) = (read(fp), read(fp.wrapping_add(8))) else {
            return UserWalkEnd::BadFrame;
        };
        if ret == 0 {
            return UserWalkEnd::Done;
        }
        if aarch64::returns_after_call(ret, |a| read(a).map(|w| w as u32)) != Some(true) {
            return UserWalkEnd::NotCall;
        }
        if !emit(ret) {
            return UserWalkEnd::Done;
        }
        if next_fp != 0 && next_fp <= fp {
            return UserWalkEnd::BadFrame;
        }
        fp = next_fp;
    }
}

#[cfg(test)]
mod tests {
    /// Samples with plain-number handles.
    type S = super::CpuSample<usize, usize>;

    /// A user address space of `(address, word)` pairs: stack words and, at 0x10fc, 0x11fc,
    /// 0x104c, the ARM `bl` before return addresses 0x1100, 0x1200, 0x1050 (0x1300 follows a
    /// `bx lr`; 0x2105 a Thumb `bl` at 0x2100).
    fn reader<'a>(words: &'a [(usize, usize)]) -> impl FnMut(usize) -> Option<usize> + 'a {
        const CODE: [(usize, usize); 5] = [
            (0x10fc, 0xEB00_0010),
            (0x11fc, 0xEB00_0020),
            (0x104c, 0xEB00_0030),
            (0x12fc, 0xE12F_FF1E),
            (0x2100, 0xF800_F000),
        ];
        move |a| {
            words
                .iter()
                .chain(&CODE)
                .find(|&&(at, _)| at == a)
                .map(|&(_, w)| w)
        }
    }

    /// The stack mapping of the tests: 0x7000 ..< 0x8000.
    fn regs(fp: usize, lr: usize, sp: usize) -> UserFrameRegs {
        UserFrameRegs {
            fp,
            lr,
            sp,
            cpsr: 0x10,
            stack_end: 0x8000,
        }
    }

    fn walk_regs(
        r: UserFrameRegs,
        words: &[(usize, usize)],
        max: usize,
    ) -> (Vec<usize>, UserWalkEnd) {
        let mut out = Vec::new();
        let end = super::walk_user_frames(&r, reader(words), |pc| {
            out.push(pc);
            out.len() < max
        });
        (out, end)
    }

    fn walk(
        fp: usize,
        lr: usize,
        sp: usize,
        words: &[(usize, usize)],
        max: usize,
    ) -> (Vec<usize>, UserWalkEnd) {
        walk_regs(regs(fp, lr, sp), words, max)
    }

    /// An AArch64 walk over `words` (stack 0x7000 ..< 0x8000) with `bl` before 0x1100 and 0x1200
    /// and a `ret` before 0x1300 (instruction words read as the low half of 8-byte words).
    fn walk_a64(
        fp: usize,
        pstate: usize,
        words: &[(usize, usize)],
        max: usize,
    ) -> (Vec<usize>, UserWalkEnd) {
        const CODE: [(usize, usize); 3] = [
            (0x10fc, 0x9400_0010),
            (0x11fc, 0xD63F_0100),
            (0x12fc, 0xD65F_03C0),
        ];
        let read = |a: usize| {
            words
                .iter()
                .chain(&CODE)
                .find(|&&(at, _)| at == a)
                .map(|&(_, w)| w)
        };
        let mut out = Vec::new();
        let r = UserFrameRegs {
            fp,
            lr: 0x1300,
            sp: 0x7000,
            cpsr: pstate,
            stack_end: 0x8000,
        };
        let end = super::walk_user_frames_a64(&r, read, |pc| {
            out.push(pc);
            out.len() < max
        });
        (out, end)
    }

    #[test]
    fn user_frames_a64() {
        // Two records, the outer one with a zero link; lr (0x1300) is never used.
        let two = [
            (0x7100, 0x7200),
            (0x7108, 0x1100),
            (0x7200, 0),
            (0x7208, 0x1200),
        ];
        assert_eq!(
            walk_a64(0x7100, 0, &two, 8),
            (vec![0x1100, 0x1200], UserWalkEnd::Done)
        );
        assert_eq!(
            walk_a64(0x7100, 0, &two, 1),
            (vec![0x1100], UserWalkEnd::Done),
            "depth"
        );
        // The {0, 0} record ends it; so does fp 0 (no frame at all).
        assert_eq!(
            walk_a64(0x7100, 0, &[(0x7100, 0), (0x7108, 0)], 8),
            (vec![], UserWalkEnd::Done)
        );
        assert_eq!(walk_a64(0, 0, &two, 8), (vec![], UserWalkEnd::Done));
        // A return address after no call, a link going down, a record outside the stack or
        // misaligned, an unreadable one, a compat (AArch32) task.
        assert_eq!(
            walk_a64(0x7100, 0, &[(0x7100, 0), (0x7108, 0x1300)], 8),
            (vec![], UserWalkEnd::NotCall)
        );
        let down = [
            (0x7200, 0x7100),
            (0x7208, 0x1100),
            (0x7100, 0),
            (0x7108, 0x1200),
        ];
        assert_eq!(
            walk_a64(0x7200, 0, &down, 8),
            (vec![0x1100], UserWalkEnd::BadFrame)
        );
        assert_eq!(
            walk_a64(0x9000, 0, &two, 8),
            (vec![], UserWalkEnd::BadFrame)
        );
        assert_eq!(
            walk_a64(0x7104, 0, &two, 8),
            (vec![], UserWalkEnd::BadFrame)
        );
        assert_eq!(
            walk_a64(0x7300, 0, &two, 8),
            (vec![], UserWalkEnd::BadFrame)
        );
        assert_eq!(
            walk_a64(0x7100, 0x10, &two, 8),
            (vec![], UserWalkEnd::BadFrame)
        );
    }

    #[test]
    fn user_frames_non_leaf_chain() {
        // main (fp 0x7f10) calls f (fp 0x7f00, saved lr 0x1100 at fp, saved fp 0x7f10 at fp-4);
        // main's frame: saved lr 0x1200, saved fp 0 (the end).
        let stack = [
            (0x7efc, 0x7f10),
            (0x7f00, 0x1100),
            (0x7f0c, 0),
            (0x7f10, 0x1200),
        ];
        assert_eq!(
            walk(0x7f00, 0x1050, 0x7ef0, &stack, 16),
            (vec![0x1100, 0x1200], UserWalkEnd::Done)
        );
        // `emit` ends the walk.
        assert_eq!(
            walk(0x7f00, 0x1050, 0x7ef0, &stack, 1),
            (vec![0x1100], UserWalkEnd::Done)
        );
    }

    #[test]
    fn user_frames_leaf_first() {
        // A leaf: [fp] is the caller's fp (just above), the return address is lr.
        let stack = [(0x7e00, 0x7f00), (0x7efc, 0), (0x7f00, 0x1100)];
        assert_eq!(
            walk(0x7e00, 0x1050, 0x7df0, &stack, 16),
            (vec![0x1050, 0x1100], UserWalkEnd::Done)
        );
        // A leaf whose lr is no return address (not after a call) ends at once.
        assert_eq!(
            walk(0x7e00, 0x1300, 0x7df0, &stack, 16),
            (vec![], UserWalkEnd::NotCall)
        );
    }

    #[test]
    fn user_frames_never_follow_thumb_code() {
        let stack = [
            (0x7efc, 0x7f10),
            (0x7f00, 0x1100),
            (0x7f0c, 0),
            (0x7f10, 0x1200),
        ];
        // Sampled in Thumb state: r11 is no frame pointer, nothing is read.
        let thumb = UserFrameRegs {
            cpsr: 0x30,
            ..regs(0x7f00, 0x1050, 0x7ef0)
        };
        assert_eq!(walk_regs(thumb, &stack, 16), (vec![], UserWalkEnd::Thumb));
        // A return into Thumb code (bit 0) is a proved frame, but that caller's r11 is not.
        let into_thumb = [
            (0x7efc, 0x7f10),
            (0x7f00, 0x2105),
            (0x7f0c, 0),
            (0x7f10, 0x1200),
        ];
        assert_eq!(
            walk(0x7f00, 0x1050, 0x7ef0, &into_thumb, 16),
            (vec![0x2105], UserWalkEnd::Thumb)
        );
    }

    #[test]
    fn user_frames_stop_on_bad_input() {
        let bad = |fp, words: &[(usize, usize)]| walk(fp, 0x1050, 0x7ef0, words, 16);
        // Misaligned fp, fp outside the stack mapping, a fault.
        assert_eq!(bad(0x7f02, &[]), (vec![], UserWalkEnd::BadFrame));
        assert_eq!(
            bad(0x9000, &[(0x8ffc, 0x9010), (0x9000, 0x1100)]),
            (vec![], UserWalkEnd::BadFrame)
        );
        assert_eq!(
            bad(0x7e00, &[(0x7e00, 0x1100)]),
            (vec![], UserWalkEnd::BadFrame),
            "below sp"
        );
        assert_eq!(
            bad(0x7f00, &[(0x7f00, 0x1100)]),
            (vec![], UserWalkEnd::BadFrame),
            "fp - 4 unreadable"
        );
        // fp 0: no frames at all.
        assert_eq!(bad(0, &[]), (vec![], UserWalkEnd::Done));
        // A "return address" that follows no call: a stack address, a data word.
        assert_eq!(
            bad(0x7f00, &[(0x7efc, 0x7f10), (0x7f00, 0x7ef8)]),
            (vec![], UserWalkEnd::NotCall)
        );
        assert_eq!(
            bad(0x7f00, &[(0x7efc, 0x7f10), (0x7f00, 0x1300)]),
            (vec![], UserWalkEnd::NotCall)
        );
        // The next frame below this one, beyond the stack mapping, misaligned.
        for next in [0x7e00, 0x8100, 0x7f12] {
            assert_eq!(
                bad(0x7f00, &[(0x7efc, next), (0x7f00, 0x1100)]),
                (vec![0x1100], UserWalkEnd::BadFrame),
                "{next:#x}"
            );
        }
        // A frame at the very end of the mapping (its word is the last one) is fine.
        let top = [(0x7ff8, 0), (0x7ffc, 0x1100)];
        assert_eq!(bad(0x7ffc, &top), (vec![0x1100], UserWalkEnd::Done));
    }

    #[test]
    fn file_offset_of_a_mapping() {
        // The text mapping of a shared object: file page 0 at 0x7600_0000.
        assert_eq!(super::file_offset(0x7600_1234, 0x7600_0000, 0, 12), 0x1234);
        // A mapping of the file from page 3 (offset 0x3000).
        assert_eq!(super::file_offset(0x0040_0010, 0x0040_0000, 3, 12), 0x3010);
    }

    use super::*;
    use crate::event::Decoder;

    struct VecSink {
        words: Vec<usize>,
        cap: usize,
    }
    impl EventSink for VecSink {
        fn write_group(&mut self, w: &[usize]) -> bool {
            if self.words.len() + w.len() > self.cap {
                return false;
            }
            self.words.extend_from_slice(w);
            true
        }
    }

    fn decode(words: &[usize]) -> Vec<Record> {
        let w: Vec<u64> = words.iter().map(|&x| x as u64).collect();
        Decoder::new(&w, core::mem::size_of::<usize>())
            .map(|r| r.unwrap().1)
            .collect()
    }

    fn ks(pc: usize, pid: i32) -> S {
        S {
            pc,
            flags: IS_KERNEL,
            pid,
            tgid: pid,
            ..Default::default()
        }
    }

    #[test]
    fn legacy_order_and_elision() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(1);
        assert_eq!(
            p.add_sample(&ks(0xc000_1000, 7), Location::Kernel, 0, &mut sink),
            Outcome::Delivered
        );
        p.add_sample(&ks(0xc000_1004, 7), Location::Kernel, 0, &mut sink);
        let u = S {
            pc: 0x1_0040,
            pid: 7,
            tgid: 7,
            ..Default::default()
        };
        p.add_sample(
            &u,
            Location::User {
                cookie: 0,
                offset: 0x1_0040,
            },
            0,
            &mut sink,
        );
        p.add_sample(
            &u,
            Location::User {
                cookie: 0,
                offset: 0x1_0044,
            },
            0,
            &mut sink,
        );
        p.add_sample(&ks(0xc000_2000, 8), Location::Kernel, 0, &mut sink);
        assert_eq!(
            decode(&sink.words),
            vec![
                Record::CpuSwitch { cpu: 1 },
                Record::KernelEnter,
                Record::CtxSwitch {
                    pid: 7,
                    tgid: 7,
                    app_cookie: 0
                },
                Record::Sample {
                    pc: 0xc000_1000,
                    event: 0
                },
                Record::Sample {
                    pc: 0xc000_1004,
                    event: 0
                },
                Record::KernelExit,
                Record::CookieSwitch { cookie: 0 },
                Record::Sample {
                    pc: 0x1_0040,
                    event: 0
                },
                Record::Sample {
                    pc: 0x1_0044,
                    event: 0
                },
                Record::KernelEnter,
                Record::CtxSwitch {
                    pid: 8,
                    tgid: 8,
                    app_cookie: 0
                },
                Record::Sample {
                    pc: 0xc000_2000,
                    event: 0
                },
            ]
        );
    }

    #[test]
    fn overflow_drops_whole_group_and_reemits_context() {
        // Room for the first group only (3 + 2 + 7 + 2 = 14 words) plus 3 spare words.
        let mut sink = VecSink {
            words: vec![],
            cap: 17,
        };
        let mut p = SyncPass::new(0);
        assert_eq!(
            p.add_sample(&ks(1, 1), Location::Kernel, 0, &mut sink),
            Outcome::Delivered
        );
        // A new task needs CTX_SWITCH (7) + sample (2) = 9 > 3: dropped whole.
        assert_eq!(
            p.add_sample(&ks(2, 2), Location::Kernel, 0, &mut sink),
            Outcome::LostOverflow
        );
        assert_eq!(sink.words.len(), 14);
        sink.cap = 100;
        assert_eq!(
            p.add_sample(&ks(3, 2), Location::Kernel, 0, &mut sink),
            Outcome::Delivered
        );
        let recs = decode(&sink.words);
        assert_eq!(
            recs[4],
            Record::CtxSwitch {
                pid: 2,
                tgid: 2,
                app_cookie: 0
            }
        );
        assert_eq!(recs[5], Record::Sample { pc: 3, event: 0 });
    }

    #[test]
    fn lost_samples_emit_nothing() {
        let mut sink = VecSink {
            words: vec![],
            cap: 100,
        };
        let mut p = SyncPass::new(0);
        let u = S {
            pc: 5,
            pid: 3,
            tgid: 3,
            ..Default::default()
        };
        assert_eq!(
            p.add_sample(&u, Location::NoMm, 0, &mut sink),
            Outcome::LostNoMm
        );
        assert_eq!(
            p.add_sample(&u, Location::NoMapping, 0, &mut sink),
            Outcome::LostNoMapping
        );
        assert!(sink.words.is_empty());
    }

    #[test]
    fn max_group_fits() {
        let mut sink = VecSink {
            words: vec![],
            cap: MAX_GROUP_WORDS,
        };
        let mut p = SyncPass::new(0);
        let u = S {
            pc: 5,
            pid: 3,
            tgid: 3,
            ..Default::default()
        };
        assert_eq!(
            p.add_sample(
                &u,
                Location::User {
                    cookie: 9,
                    offset: 5
                },
                0,
                &mut sink
            ),
            Outcome::Delivered
        );
    }

    #[test]
    fn traces_follow_their_sample() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(0);
        let mut s = ks(0xc000_1000, 4);
        s.flags |= TRACE_BEGIN;
        let kf = S {
            pc: 0xc000_2000,
            flags: IS_KERNEL | IS_FRAME,
            pid: 4,
            tgid: 4,
            ..Default::default()
        };
        let uf = S {
            pc: 0x1_0100,
            flags: IS_FRAME,
            pid: 4,
            tgid: 4,
            ..Default::default()
        };
        assert_eq!(
            p.add_sample(&s, Location::Kernel, 9, &mut sink),
            Outcome::Delivered
        );
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Delivered
        );
        assert_eq!(
            p.add_frame(
                &uf,
                Location::User {
                    cookie: 9,
                    offset: 0x100
                },
                &mut sink
            ),
            FrameOutcome::Delivered
        );
        assert_eq!(
            p.add_frame(
                &uf,
                Location::User {
                    cookie: 9,
                    offset: 0x200
                },
                &mut sink
            ),
            FrameOutcome::Delivered
        );
        // The next sample of the same task, in kernel again: TRACE_BEGIN, KERNEL_ENTER.
        assert_eq!(
            p.add_sample(&s, Location::Kernel, 9, &mut sink),
            Outcome::Delivered
        );
        assert_eq!(
            decode(&sink.words),
            vec![
                Record::CpuSwitch { cpu: 0 },
                Record::TraceBegin,
                Record::KernelEnter,
                Record::CtxSwitch {
                    pid: 4,
                    tgid: 4,
                    app_cookie: 9
                },
                Record::Sample {
                    pc: 0xc000_1000,
                    event: 0
                },
                Record::Sample {
                    pc: 0xc000_2000,
                    event: 0
                },
                Record::KernelExit,
                Record::CookieSwitch { cookie: 9 },
                Record::Sample {
                    pc: 0x100,
                    event: 0
                },
                Record::Sample {
                    pc: 0x200,
                    event: 0
                },
                Record::TraceBegin,
                Record::KernelEnter,
                Record::Sample {
                    pc: 0xc000_1000,
                    event: 0
                },
            ]
        );
    }

    #[test]
    fn lost_frames_cut_the_rest_of_the_backtrace() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(0);
        let mut s = ks(0xc000_1000, 4);
        s.flags |= TRACE_BEGIN;
        let kf = S {
            pc: 0xc000_2000,
            flags: IS_KERNEL | IS_FRAME,
            pid: 4,
            tgid: 4,
            ..Default::default()
        };
        p.add_sample(&s, Location::Kernel, 0, &mut sink);
        assert_eq!(
            p.add_frame(&kf, Location::NoMapping, &mut sink),
            FrameOutcome::LostNoMapping
        );
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Orphan
        );
        // Frames of a lost sample are orphans too.
        assert_eq!(
            p.add_sample(&s, Location::NoMm, 0, &mut sink),
            Outcome::LostNoMm
        );
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Orphan
        );
        // A frame that does not fit ends the backtrace.
        p.add_sample(&s, Location::Kernel, 0, &mut sink);
        sink.cap = sink.words.len() + 1;
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::LostOverflow
        );
        sink.cap = 1000;
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Orphan
        );
        let frames = decode(&sink.words)
            .iter()
            .filter(|r| {
                **r == Record::Sample {
                    pc: 0xc000_2000,
                    event: 0,
                }
            })
            .count();
        assert_eq!(frames, 0);
    }

    #[test]
    fn frames_that_are_not_code_end_the_backtrace() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(0);
        let mut s = ks(0xc000_1000, 4);
        s.flags |= TRACE_BEGIN;
        let kf = S {
            pc: 0xc000_2000,
            flags: IS_KERNEL | IS_FRAME,
            pid: 4,
            tgid: 4,
            ..Default::default()
        };
        p.add_sample(&s, Location::Kernel, 0, &mut sink);
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Delivered
        );
        assert_eq!(
            p.add_frame(&kf, Location::NotCode, &mut sink),
            FrameOutcome::NotCode
        );
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Orphan
        );
    }

    #[test]
    fn kernel_code_ranges() {
        let code = KernelCode {
            text: Some((0xc010_0000, 0xc080_0000)),
            modules: (0xbf00_0000, 0xc000_0000),
        };
        for pc in [0xc010_0000, 0xc07f_fffc, 0xbf00_0000, 0xbfff_fffc] {
            assert!(code.contains(pc), "{pc:#x}");
        }
        // What stray frame walks produced: user, small, ~1, direct-mapped data, vmalloc stack.
        for pc in [
            0x72cc_818f,
            0xcc0,
            0xffff_fffe,
            0xc19a_2088,
            0xd096_5f38,
            0xc080_0000,
        ] {
            assert!(!code.contains(pc), "{pc:#x}");
        }
        assert!(KernelCode { text: None, ..code }.contains(0xcc0));
    }

    #[test]
    fn untraced_samples_have_no_trace_begin() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(0);
        let kf = S {
            pc: 0xc000_2000,
            flags: IS_KERNEL | IS_FRAME,
            ..Default::default()
        };
        p.add_sample(&ks(1, 1), Location::Kernel, 0, &mut sink);
        assert_eq!(
            p.add_frame(&kf, Location::Kernel, &mut sink),
            FrameOutcome::Orphan
        );
        assert!(!decode(&sink.words).contains(&Record::TraceBegin));
    }

    #[test]
    fn ctx_switch_forgets_the_image_for_frames_too() {
        let mut sink = VecSink {
            words: vec![],
            cap: 1000,
        };
        let mut p = SyncPass::new(0);
        for pid in [4, 5] {
            let mut s = ks(0xc000_1000, pid);
            s.flags |= TRACE_BEGIN;
            let uf = S {
                pc: 0x1_0100,
                flags: IS_FRAME,
                pid,
                tgid: pid,
                ..Default::default()
            };
            p.add_sample(&s, Location::Kernel, 9, &mut sink);
            assert_eq!(
                p.add_frame(
                    &uf,
                    Location::User {
                        cookie: 9,
                        offset: 0x100
                    },
                    &mut sink
                ),
                FrameOutcome::Delivered
            );
        }
        let switches = decode(&sink.words)
            .iter()
            .filter(|r| **r == Record::CookieSwitch { cookie: 9 })
            .count();
        assert_eq!(
            switches, 2,
            "each task's user frame is preceded by its COOKIE_SWITCH"
        );
    }

    #[test]
    fn kernel_chain_starts_after_the_sampled_pc() {
        let none = |_| false;
        // ARM: the walk starts at the sampled PC.
        assert_eq!(
            super::sampled_kernel_chain(&[0x100, 0x200, 0x300], 0x100, none),
            &[0x200, 0x300]
        );
        // arm64: the handler's frames come first.
        assert_eq!(
            super::sampled_kernel_chain(&[0x900, 0x910, 0x100, 0x200], 0x100, none),
            &[0x200]
        );
        // The interrupted frame is missing: nothing is guessed.
        assert!(super::sampled_kernel_chain(&[0x900, 0x200], 0x100, none).is_empty());
        assert!(super::sampled_kernel_chain(&[], 0x100, none).is_empty());
        assert!(super::sampled_kernel_chain(&[0x100], 0x100, none).is_empty());
    }

    #[test]
    fn kernel_chain_of_a_lock_function_starts_after_its_caller() {
        // 0x5xx is spinlock text: profile_pc() reports 0x200 (the sample), the chain is 0x300.
        let lock = |a: usize| (0x500..0x600).contains(&a);
        assert_eq!(
            super::sampled_kernel_chain(&[0x510, 0x200, 0x300], 0x510, lock),
            &[0x300]
        );
        assert_eq!(
            super::sampled_kernel_chain(&[0x900, 0x510, 0x520, 0x200, 0x300], 0x510, lock),
            &[0x300]
        );
        // Only lock functions up to the end: profile_pc() finds no caller, no chain.
        assert!(super::sampled_kernel_chain(&[0x510, 0x520], 0x510, lock).is_empty());
    }
}
