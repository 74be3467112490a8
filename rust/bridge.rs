// SPDX-License-Identifier: GPL-2.0

//! The module's kernel abstractions besides oprofilefs: safe Rust faces of the C shims
//! (`sample_shim.c`, `perf_shim.c`, `kprof_shim.c`) and of kernel facilities the `kernel` crate
//! (7.3) does not offer. Every `unsafe` of the module outside `oprofilefs.rs` is in this
//! directory, each with its `// SAFETY:` reason; the code above it (the sample path, the
//! models, the sync pass, kprof, profile points) has none. What each part bridges, and why the
//! crate cannot:
//!
//! - [`regs`]: interrupted registers (`struct pt_regs`), their PC and call chain (`profile_pc`,
//!   the ARM unwinder), user stack words (`copy_from_user_nofault`);
//! - [`user`]: user PCs to mapped files and offsets, a task's executable, a file's path;
//! - [`irq_work`]: NMI context and irq_work (deferring an NMI sample's lookups);
//! - [`cpuhp`]: CPU hotplug states (sample sources following CPUs offline and online);
//! - [`perf`]: perf in-kernel counters with an overflow handler (no `perf_event.h` binding);
//! - [`ring`]: the lock-free per-CPU sample ring (no such container in the crate);
//! - [`clock`]: the NMI-safe monotonic clock (a leaf the profile points time with);
//! - [`rcu_arc`]: an `Arc` an interrupt handler borrows while process context replaces it (the
//!   sampling interrupt's request for an early sync pass);
//! - here: an owned workqueue, the module notifier, the kernel text bounds and module area, the `%pK` visibility rule, zeroed atomic arrays, and
//!   the profile-point section.

pub(crate) mod clock;
pub(crate) mod cpuhp;
pub(crate) mod irq_work;
pub(crate) mod perf;
pub(crate) mod rcu_arc;
pub(crate) mod regs;
pub(crate) mod ring;
pub(crate) mod user;

use crate::common::kprof;
use crate::profile_point::ProfilePoint;
use core::ffi::{c_char, c_int, c_void};
use core::marker::PhantomPinned;
use core::ops::Deref;
use core::ptr::NonNull;
use kernel::alloc::flags::__GFP_ZERO;
use kernel::bindings;
use kernel::prelude::*;
use kernel::revocable::Revocable;
use kernel::sync::atomic::Atomic;
use kernel::sync::Arc;
use kernel::workqueue::Queue;

/// The C shims' declarations, generated from their headers (`scripts/shim-bindings.sh`; `make
/// module LINT=1` checks they are current). Only the bridge modules use them.
// The lints the kernel's bindings crate allows in its generated code (`rust/bindings/lib.rs`).
#[allow(
    clippy::all,
    dead_code,
    improper_ctypes,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub
)]
mod shim_bindings;

use shim_bindings::{
    oprofile_shim_alloc_wq, oprofile_shim_kprof_map, oprofile_shim_module_area,
    oprofile_shim_module_notifier_register, oprofile_shim_module_notifier_unregister,
};

extern "C" {
    // Defined by `rust/profile_points.lds` around `.profile_points`.
    static __oprofile_profile_points_start: [u8; 0];
    static __oprofile_profile_points_end: [u8; 0];
    // Exported; only its address is taken (the text anchor of `common::kprof::relocate`).
    fn _printk(fmt: *const c_char, ...) -> c_int;
}

/// The workqueue itself (`oprofile_sync`, unbound), destroyed on drop; held only inside the
/// [`Revocable`] that [`OwnedQueue`] and its [`QueueRef`]s share.
///
/// # Invariants
///
/// `raw` is a live workqueue from `alloc_workqueue`, owned by this value.
struct RawQueue {
    raw: NonNull<bindings::workqueue_struct>,
}

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for RawQueue {}
// SAFETY: Every workqueue function called through `&RawQueue` (enqueueing) is thread-safe.
unsafe impl Sync for RawQueue {}

impl RawQueue {
    fn queue(&self) -> &Queue {
        // SAFETY: `raw` is live until `self` is dropped (type invariants), which the returned
        // borrow of `self` cannot outlive.
        unsafe { Queue::from_raw(self.raw.as_ptr()) }
    }
}

impl Drop for RawQueue {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `alloc_workqueue` and is destroyed once (type invariants).
        // `destroy_workqueue` drains queued items and waits for a running one.
        unsafe { bindings::destroy_workqueue(self.raw.as_ptr()) };
    }
}

/// A workqueue of this module (`oprofile_sync`, unbound), destroyed when this owner is dropped.
/// The kernel crate (7.3) has only the system queues; ours exists so that unloading can wait for
/// a running work item (`destroy_workqueue`), which the crate's API (no cancel/flush) cannot
/// express. Work items hold a [`QueueRef`] to queue themselves.
///
/// Dropping the owner revokes every [`QueueRef`] (`Revocable::revoke`: waits for an enqueue
/// in progress) and then destroys the queue, waiting for a work item still returning; it must
/// not be dropped from a work item of this queue (the module's owner drops it at unload).
///
/// # Invariants
///
/// `shared` is revoked only by this value's drop: until then every [`QueueRef`] reaches the
/// live queue.
pub(crate) struct OwnedQueue {
    shared: Arc<Revocable<RawQueue>>,
}

impl OwnedQueue {
    /// Allocates the queue. Errors: `ENOMEM`.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: FFI call without preconditions.
        let raw = NonNull::new(unsafe { oprofile_shim_alloc_wq() }).ok_or(ENOMEM)?;
        // INVARIANT: `raw` is a new live workqueue, owned by the `RawQueue`.
        let shared = Arc::pin_init(Revocable::new(RawQueue { raw }), GFP_KERNEL)?;
        Ok(OwnedQueue { shared })
    }

    /// A reference for a work item to queue itself with.
    pub(crate) fn reference(&self) -> QueueRef {
        QueueRef(self.shared.clone())
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // Waits for an enqueue in progress, then drops the `RawQueue`: `destroy_workqueue`.
        self.shared.revoke();
    }
}

/// A work item's reference to the module's [`OwnedQueue`]: it can queue work until the owner is
/// dropped, after which it reaches nothing (a late enqueue is refused, never a use after free).
#[derive(Clone)]
pub(crate) struct QueueRef(Arc<Revocable<RawQueue>>);

impl QueueRef {
    /// Runs `f` with the queue (under the RCU read lock: `f` must not sleep; enqueueing does
    /// not); `None`, without calling `f`, once the owner was dropped.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Queue) -> R) -> Option<R> {
        self.0.try_access_with(|q| f(q.queue()))
    }
}

/// The kernel image's text, `[_stext, _etext)`, from the build's `System.map` (see
/// `kprof_shim.c`), relocated to the running kernel by [`kprof::relocate`]. Errors: `ENODEV`
/// (logged) when the module was built without it or against another build.
pub(crate) fn kernel_text() -> Result<(usize, usize)> {
    let mut map: [usize; 4] = [0; 4];
    // SAFETY: `map` is writable for the 4 values the shim writes.
    if unsafe { oprofile_shim_kprof_map(map.as_mut_ptr()) } != 0 {
        pr_err!("kprof: module built without the kernel's System.map: no kernel text bounds\n");
        return Err(ENODEV);
    }
    let [stext, etext, printk, init_task] = map;
    let map = kprof::SystemMap {
        stext,
        etext,
        printk,
        init_task,
    };
    // Thumb-2 kernels: a function's address carries the Thumb bit.
    let thumb_bit = usize::from(cfg!(CONFIG_THUMB2_KERNEL));
    let printk_addr = (_printk as usize) & !thumb_bit;
    let init_task_addr = (&raw const bindings::init_task) as usize;
    kprof::relocate(&map, printk_addr, init_task_addr).map_err(|(text_off, data_off)| {
        pr_err!(
            "kprof: System.map of the build does not match this kernel (_printk offset {:#x}, init_task offset {:#x})\n",
            text_off,
            data_off
        );
        ENODEV
    })
}

/// The module area, `[MODULES_VADDR, MODULES_END)` (`(0, 0)` where the architecture has none).
pub(crate) fn module_area() -> (usize, usize) {
    let (mut start, mut end) = (0usize, 0usize);
    // SAFETY: Valid out-pointers (`unsigned long` is `usize` in the kernel's `ffi`).
    unsafe { oprofile_shim_module_area(&mut start, &mut end) };
    (start, end)
}

/// Whether the current task may see kernel addresses, by the rules of `%pK` and
/// `/proc/kallsyms` (`kallsyms_show_value`): it needs CAP_SYSLOG, and `kernel.kptr_restrict`
/// must be below 2 (at 1, `%pK` also wants equal real and effective ids). Neither
/// `kallsyms_show_value` nor `kptr_restrict` is exported to modules, so `%pK` itself is asked:
/// it prints a non-null pointer as zeros exactly when `kptr_restrict` hides addresses from this
/// task. Stricter than kallsyms in one case: `perf_event_paranoid` <= 1 (not exported either)
/// does not open the addresses to unprivileged users. Call it in the opener's context (at
/// open), as kallsyms judges the opener's credentials.
pub(crate) fn may_see_kernel_addresses() -> bool {
    // SAFETY: FFI call; `init_user_ns` is a static that lives forever.
    if !unsafe {
        bindings::ns_capable_noaudit(
            &raw mut bindings::init_user_ns,
            bindings::CAP_SYSLOG as c_int,
        )
    } {
        return false;
    }
    // Any non-null kernel address will do.
    static PROBE: u8 = 0;
    let probe: *const c_void = (&raw const PROBE).cast();
    let mut out = [0u8; 32];
    // SAFETY: `out` is writable for its length; the format takes exactly one pointer argument.
    let n = unsafe {
        bindings::snprintf(
            out.as_mut_ptr().cast(),
            out.len(),
            c"%pK".as_char_ptr(),
            probe,
        )
    };
    let shown = usize::try_from(n)
        .ok()
        .and_then(|n| out.get(..n.min(out.len() - 1)));
    shown.is_some_and(|s| !s.is_empty() && s.iter().any(|&b| b != b'0'))
}

/// `n` atomics, all 0, zeroed by the allocator (pushing a million `Atomic::new(0)` one by one
/// took 0.7 s on QEMU's virt-a15). Errors: `ENOMEM`.
pub(crate) fn zeroed_atomics(n: usize) -> Result<VVec<Atomic<u32>>> {
    let mut v: VVec<Atomic<u32>> = VVec::with_capacity(n, GFP_KERNEL | __GFP_ZERO)?;
    // SAFETY: `with_capacity(n)` left `len` 0 and `capacity >= n`; `__GFP_ZERO` zeroed the
    // memory, and `Atomic<u32>` is `repr(transparent)` over its 32-bit representation, so
    // all-zero bytes are `Atomic::new(0)`: the first `n` elements are initialised.
    unsafe { v.inc_len(n) };
    Ok(v)
}

/// What the module notifier tells its context.
pub(crate) trait ModuleEvents: Sync + 'static {
    /// A kernel module reached `MODULE_STATE_COMING` (process context, no locks of ours held).
    fn module_coming(&self);
}

/// Called by the shim's module notifier on `MODULE_STATE_COMING`.
///
/// # Safety
///
/// `ctx` must be the context a live `ModuleNotifier<C>` registered.
unsafe extern "C" fn module_coming<C: ModuleEvents>(ctx: *const c_void) {
    // SAFETY: The registration keeps `ctx` alive until it unregisters (our contract).
    unsafe { &*ctx.cast::<C>() }.module_coming();
}

/// Registration of the module notifier (`register_module_notifier`; the crate has no notifier
/// chains), owning the context it calls. Pinned in place; on drop the notifier is unregistered
/// before the context goes. One may exist at a time (the shim's `notifier_block` is static; a
/// second initialisation fails with `EBUSY`, leaving the first intact). Derefs to the context.
///
/// # Invariants
///
/// This value is the one owner of the shim's static slot (`oprofile_module_ctx`,
/// `oprofile_module_coming`, `oprofile_module_nb` of `sample_shim.c`): it claimed the slot at
/// initialisation (the shim's `cmpxchg`, `EBUSY` for a second claimant) and its drop alone
/// releases it. From initialisation until drop the notifier is registered with `ctx`'s
/// address; `ctx` is pinned, so that address stays valid.
#[pin_data(PinnedDrop)]
pub(crate) struct ModuleNotifier<C: ModuleEvents> {
    #[pin]
    ctx: C,
    #[pin]
    _pin: PhantomPinned,
}

impl<C: ModuleEvents> ModuleNotifier<C> {
    /// Initialises `ctx`, then registers the notifier for it. Errors: `ctx`'s; `EBUSY` while
    /// another is registered; those of `register_module_notifier` (then `ctx` is dropped).
    pub(crate) fn new(ctx: impl PinInit<C, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            ctx <- ctx,
            _pin: {
                // SAFETY: `this` points to the slot being initialised; only the address of its
                // (initialised, pinned) `ctx` is taken.
                let ctx = unsafe { &raw const (*this.as_ptr()).ctx };
                // SAFETY: FFI call; the shim's notifier_block is static. `ctx` stays valid while
                // registered: it is pinned here until `drop` unregisters.
                kernel::error::to_result(unsafe {
                    oprofile_shim_module_notifier_register(ctx.cast(), Some(module_coming::<C>))
                })?;
                // INVARIANT: registered above with `ctx`.
                PhantomPinned
            },
        }? Error)
    }
}

impl<C: ModuleEvents> Deref for ModuleNotifier<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.ctx
    }
}

#[pinned_drop]
impl<C: ModuleEvents> PinnedDrop for ModuleNotifier<C> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Registered at initialisation (type invariants); after this no callback runs,
        // so `ctx` may go.
        unsafe { oprofile_shim_module_notifier_unregister() };
    }
}

/// Every profile point of the module, in section order: the `.profile_points` section that
/// `rust/profile_points.lds` brackets; empty (logged) if the section is malformed.
pub(crate) fn profile_points() -> &'static [ProfilePoint] {
    let start = (&raw const __oprofile_profile_points_start).cast::<ProfilePoint>();
    let end = (&raw const __oprofile_profile_points_end).cast::<ProfilePoint>();
    let bytes = (end as usize).wrapping_sub(start as usize);
    if end < start || bytes % core::mem::size_of::<ProfilePoint>() != 0 {
        kernel::pr_warn_once!(
            "profile points: bad .profile_points section ({} bytes)\n",
            bytes
        );
        return &[];
    }
    // SAFETY: The linker script places the start and end symbols around `.profile_points`, which
    // holds only `ProfilePoint` statics (`define_profile_point!`), each 64-byte aligned and 64
    // bytes long, hence a contiguous array of `bytes / size_of` initialized, immutable-by-API
    // (interior-mutable) statics living as long as the module.
    unsafe { core::slice::from_raw_parts(start, bytes / core::mem::size_of::<ProfilePoint>()) }
}
