// SPDX-License-Identifier: GPL-2.0

//! Interrupted registers (`struct pt_regs`) and the call chain they start, through
//! `sample_shim.c` (`profile_pc`, `user_mode`, the ARM unwinder and `task_pt_regs` are inline
//! or arch code the kernel crate does not reach), and reading user stack words without
//! faulting.

use crate::common::event::USER_REGS;
use crate::common::sync::{
    sampled_kernel_chain, BACKTRACE_DEPTH_MAX, KERNEL_TRACE_ENTRY_FRAMES, KERNEL_TRACE_LOCK_FRAMES,
};
use kernel::bindings;
use kernel::ffi::c_void;
use kernel::types::Opaque;

use super::shim_bindings::{
    oprofile_shim_frame_regs, oprofile_shim_irq_regs, oprofile_shim_kernel_trace,
    oprofile_shim_regs_pc, oprofile_shim_task_user_regs, oprofile_shim_user_regs,
};

/// The registers of an interrupted context (`struct pt_regs`), as the sampling interrupt or
/// perf's overflow handler sees them.
///
/// # Invariants
///
/// A `&Regs` points to live `struct pt_regs` for as long as the reference lives.
#[repr(transparent)]
pub(crate) struct Regs(Opaque<bindings::pt_regs>);

/// `struct oprofile_user_regs` of `sample_shim.h`: where the user part of a call chain starts
/// (walked in Rust by `common::sync::walk_user_frames`): `pc`, the user PC the kernel was
/// entered from (when `entry`: it is the first user frame); `fp`, `lr`, `sp` and `cpsr` (the
/// user CPSR, its Thumb state `common::arm::PSR_T_BIT`; arm64: PSTATE) to walk from when
/// `walk`.
pub(crate) use super::shim_bindings::oprofile_user_regs as UserRegs;

impl Regs {
    /// The registers at `ptr`; `None` for null.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or point to `struct pt_regs` that stays live for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::pt_regs) -> Option<&'a Regs> {
        if ptr.is_null() {
            return None;
        }
        // SAFETY: Live for `'a` (our contract); `Regs` is `repr(transparent)` over it.
        // INVARIANT: as required.
        Some(unsafe { &*ptr.cast::<Regs>() })
    }

    fn as_raw(&self) -> *mut bindings::pt_regs {
        self.0.get()
    }

    /// The interrupted PC (as `profile_pc`: a lock function's caller) and whether it was kernel
    /// code.
    pub(crate) fn pc(&self) -> (usize, bool) {
        let mut pc: usize = 0;
        // SAFETY: `self` is live (type invariants); `pc` is a valid out-pointer.
        let mode = unsafe { oprofile_shim_regs_pc(self.as_raw(), &mut pc) };
        (pc, mode == 1)
    }

    /// The kernel part of the call chain of these registers, up to `depth` return addresses,
    /// each handed to `frame` (outermost last; the sampled PC itself, and for a sample in a
    /// lock function the caller `profile_pc()` reports, are not: `common::sync::
    /// sampled_kernel_chain`) until it returns false; then where the user part starts
    /// ([`Self::user_start`]). `kernel` is the sample's mode, as [`Self::pc`] gave it (the
    /// caller has it: not asked again per traced sample). Returns the number of kernel frames
    /// and the user registers (`walk` false where there is no user part, the walk ended, or no
    /// unwinder: non-ARM). Interrupt or NMI context: it reads the current task's registers.
    pub(crate) fn backtrace(
        &self,
        kernel: bool,
        depth: u32,
        frame: &mut dyn FnMut(usize) -> bool,
    ) -> (u32, UserRegs) {
        let mut entries = [0usize; KERNEL_TRACE_MAX];
        let chain = if kernel {
            self.kernel_chain(depth, &mut entries)
        } else {
            &[]
        };
        let mut n = 0u32;
        for &pc in chain {
            if n >= depth || !frame(pc) {
                return (n, UserRegs::default());
            }
            n += 1;
        }
        if n >= depth {
            return (n, UserRegs::default());
        }
        (n, self.user_start(kernel))
    }

    /// Where the user part of the call chain of a sample with these registers starts: for a
    /// user-mode sample (`kernel` false) these registers; for a kernel-mode one the registers
    /// its task entered the kernel with, whose PC is the first user frame (`entry`); nothing
    /// (`walk` false) for a kernel thread, without user registers, or on an architecture
    /// without a user frame walk. Interrupt or NMI context.
    pub(crate) fn user_start(&self, kernel: bool) -> UserRegs {
        if kernel {
            with_task_user_regs(|user| user.map_or_else(UserRegs::default, |u| u.frame_regs(true)))
        } else {
            self.frame_regs(false)
        }
    }

    /// The registers a user frame walk starts from, these being user-mode registers; `entry`:
    /// their PC is the first user frame (else `pc` is 0).
    fn frame_regs(&self, entry: bool) -> UserRegs {
        let mut user = UserRegs::default();
        // SAFETY: `self` is live (type invariants); `user` is writable.
        user.walk = unsafe { oprofile_shim_frame_regs(self.as_raw(), &mut user) };
        user.entry = user.walk && entry;
        if !user.entry {
            user.pc = 0;
        }
        user
    }

    /// The kernel callers of these (kernel-mode) registers, at most `depth` plus the entries
    /// before and at the sampled frame: the arch unwinder's entries, written to `entries`, cut
    /// by `common::sync::sampled_kernel_chain`.
    fn kernel_chain<'a>(
        &self,
        depth: u32,
        entries: &'a mut [usize; KERNEL_TRACE_MAX],
    ) -> &'a [usize] {
        let max = (depth as usize)
            .saturating_add(KERNEL_TRACE_ENTRY_FRAMES + KERNEL_TRACE_LOCK_FRAMES)
            .min(KERNEL_TRACE_MAX);
        let mut pc: usize = 0;
        // SAFETY: `self` is live (type invariants); `entries` is writable for `max` <=
        // KERNEL_TRACE_MAX words (`unsigned long` is `usize` in the kernel's `ffi`); `pc` is a
        // valid out-pointer.
        let got = unsafe {
            oprofile_shim_kernel_trace(self.as_raw(), entries.as_mut_ptr(), max as u32, &mut pc)
        };
        let entries = entries.get(..got as usize).unwrap_or(&[]);
        sampled_kernel_chain(entries, pc, |a| {
            // SAFETY: FFI call without preconditions (reads the lock text's bounds).
            unsafe { bindings::in_lock_functions(a) != 0 }
        })
    }
}

/// Room for one kernel trace: the handler's entries, lock functions, the deepest chain.
const KERNEL_TRACE_MAX: usize =
    KERNEL_TRACE_ENTRY_FRAMES + KERNEL_TRACE_LOCK_FRAMES + BACKTRACE_DEPTH_MAX as usize;

impl Regs {
    /// The user registers of this sample, r0..r15 and cpsr (`common::event::USER_REGS`
    /// words, the USER_STACK record's order): these registers for a user-mode sample, else
    /// those the current task entered the kernel with; `None` for a kernel thread (or on an
    /// architecture without the shim's support). Interrupt context.
    pub(crate) fn user_regs(&self) -> Option<[usize; USER_REGS]> {
        let mut out = [0usize; USER_REGS];
        // SAFETY: `self` is live (type invariants); `out` is writable for USER_REGS words, as
        // many as the shim writes (its OPROFILE_USER_REGS, checked against them at build time).
        let ok = unsafe { oprofile_shim_user_regs(self.as_raw(), out.as_mut_ptr()) };
        ok.then_some(out)
    }
}

/// Runs `f` with the interrupted registers of the current interrupt (`get_irq_regs`); `None`
/// outside an interrupt. The borrow cannot outlive `f`.
pub(crate) fn with_irq_regs<R>(f: impl FnOnce(Option<&Regs>) -> R) -> R {
    // SAFETY: FFI call without preconditions. The result is null or the registers of the
    // interrupt this runs in, live until it returns, which outlasts `f`.
    f(unsafe { Regs::from_raw(oprofile_shim_irq_regs()) })
}

/// Runs `f` with the registers the current user task entered the kernel with
/// (`task_pt_regs(current)`); `None` for a kernel thread or when they are not user-mode
/// registers. They stay valid until the task returns to user space, which it cannot while this
/// runs in interrupt context; the borrow cannot outlive `f`.
pub(crate) fn with_task_user_regs<R>(f: impl FnOnce(Option<&Regs>) -> R) -> R {
    // SAFETY: FFI call without preconditions. The result is null or the current task's saved
    // user registers, live while it is in the kernel, which outlasts `f`.
    f(unsafe { Regs::from_raw(oprofile_shim_task_user_regs()) })
}

/// Fills `out` with the words at user address `addr` of the current task, read without
/// faulting pages in (`copy_from_user_nofault`: any context, never sleeps); false when any of
/// them cannot be read (then `out` holds no meaningful data).
pub(crate) fn read_user_words(addr: usize, out: &mut [usize]) -> bool {
    let Some(bytes) = out.len().checked_mul(core::mem::size_of::<usize>()) else {
        return false;
    };
    // SAFETY: `out` is writable for `bytes`; the source is a user address range, which
    // `copy_from_user_nofault` checks (`access_ok`) and reads with faults disabled.
    let r = unsafe {
        bindings::copy_from_user_nofault(
            out.as_mut_ptr().cast(),
            core::ptr::with_exposed_provenance::<c_void>(addr),
            bytes,
        )
    };
    r == 0
}

/// The word at user address `addr` of the current task, read without faulting pages in
/// (`copy_from_user_nofault`: any context, never sleeps); `None` when it cannot be read.
pub(crate) fn read_user_word(addr: usize) -> Option<usize> {
    let mut word: usize = 0;
    // SAFETY: `word` is writable for its size; the source is a user address, which
    // `copy_from_user_nofault` checks (`access_ok`) and reads with faults disabled.
    let r = unsafe {
        bindings::copy_from_user_nofault(
            (&raw mut word).cast(),
            core::ptr::with_exposed_provenance::<c_void>(addr),
            core::mem::size_of::<usize>(),
        )
    };
    (r == 0).then_some(word)
}
