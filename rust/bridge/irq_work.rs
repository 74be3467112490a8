// SPDX-License-Identifier: GPL-2.0

//! NMI context and `irq_work`, through `sample_shim.c` (the kernel crate (7.3) has neither
//! `in_nmi()` nor an irq_work abstraction): what lets the sample path move the work an NMI must
//! not do (VMA lookups, reference taking and dropping) to hard interrupt context on the same
//! CPU, as perf does with its pending work.

use core::ffi::c_void;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::shim_bindings::{
    oprofile_irq_work as RawIrqWork, oprofile_shim_in_nmi, oprofile_shim_irq_work_free,
    oprofile_shim_irq_work_new, oprofile_shim_irq_work_queue, oprofile_shim_irq_work_sync,
};

/// Whether this runs in NMI context (`in_nmi()`): on arm64 with pseudo-NMIs
/// (`irqchip.gicv3_pseudo_nmi=1`), perf's PMU overflow handler does. Never on ARMv7.
pub(crate) fn in_nmi() -> bool {
    // SAFETY: FFI call without preconditions.
    unsafe { oprofile_shim_in_nmi() }
}

/// What an [`IrqWork`] runs.
pub(crate) trait IrqWorkHandler: Send + Sync {
    /// Runs in hard interrupt context on the CPU that queued the work (interrupts off).
    fn run(&self);
}

/// An `irq_work` that runs `T::run` on the CPU that queues it, at its next interrupt-enabled
/// point (on arm64 a self-IPI); it holds a reference to its handler.
///
/// # Invariants
///
/// `raw` is a live `struct oprofile_irq_work` from `oprofile_shim_irq_work_new`, owned here,
/// whose context is `Arc::as_ptr(&_handler)`; dropping waits for a running callback before the
/// handler's reference goes.
pub(crate) struct IrqWork<T: IrqWorkHandler> {
    raw: NonNull<RawIrqWork>,
    /// The callback's context (read by the C side through `raw`), kept alive until `raw` is
    /// freed.
    _handler: Arc<T>,
}

// SAFETY: Queueing and freeing an irq_work are thread-safe; the handler is `Send + Sync`.
unsafe impl<T: IrqWorkHandler> Send for IrqWork<T> {}
// SAFETY: `queue` through `&IrqWork` is `irq_work_queue`, safe from any context.
unsafe impl<T: IrqWorkHandler> Sync for IrqWork<T> {}

/// The shim's callback for an [`IrqWork<T>`].
///
/// # Safety
///
/// `ctx` must be `Arc::as_ptr` of a `T` an [`IrqWork<T>`] keeps alive for the call.
unsafe extern "C" fn run<T: IrqWorkHandler>(ctx: *const c_void) {
    // SAFETY: Our contract: the work's `Arc<T>` outlives every run (its drop waits for them).
    unsafe { &*ctx.cast::<T>() }.run();
}

impl<T: IrqWorkHandler> IrqWork<T> {
    /// A new, idle irq_work running `handler` (process context). Errors: `ENOMEM`.
    pub(crate) fn new(handler: Arc<T>) -> Result<Self> {
        let ctx: *const T = &*handler;
        // SAFETY: `run::<T>` matches `ctx`, which stays valid while `handler` is kept (below).
        let raw = unsafe { oprofile_shim_irq_work_new(Some(run::<T>), ctx.cast()) };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: a new work with `handler` as its context.
        Ok(IrqWork {
            raw,
            _handler: handler,
        })
    }

    /// Queues the work on this CPU; false when it was queued already (it runs once for both).
    /// Any context, NMI included.
    pub(crate) fn queue(&self) -> bool {
        // SAFETY: `raw` is live (type invariants).
        unsafe { oprofile_shim_irq_work_queue(self.raw.as_ptr()) }
    }

    /// Waits until the work is idle: a run that was queued has finished (`irq_work_sync`). A
    /// queued work runs on the CPU that queued it at that CPU's next interrupt-enabled point, so
    /// that CPU must stay online meanwhile: it does when this is called from its own hotplug
    /// teardown (the kernel also runs a dying CPU's pending works, `smpcfd_dying_cpu`). Process
    /// context, interrupts on.
    pub(crate) fn sync(&self) {
        // SAFETY: `raw` is live (type invariants).
        unsafe { oprofile_shim_irq_work_sync(self.raw.as_ptr()) };
    }
}

impl<T: IrqWorkHandler> Drop for IrqWork<T> {
    fn drop(&mut self) {
        // SAFETY: `raw` is live and owned (type invariants) and freed once, here, after
        // `irq_work_sync`; `_handler` drops after this, so every run had its context.
        unsafe { oprofile_shim_irq_work_free(self.raw.as_ptr()) };
    }
}
