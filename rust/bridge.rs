// SPDX-License-Identifier: GPL-2.0

//! Safe Rust faces of the kernel calls the `kernel` crate does not offer (their C halves, where
//! one is needed, in `sample_shim.c` and `kprof_shim.c`): an owned workqueue, the kernel text
//! bounds, the `%pK` address-visibility rule and a zeroed atomic array. The code above them
//! (`oprof.rs`, `kprof.rs`, `cpu_buffer.rs`) needs no `unsafe` for these.

use crate::common::kprof;
use core::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::alloc::flags::__GFP_ZERO;
use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::atomic::Atomic;
use kernel::workqueue::Queue;

extern "C" {
    fn oprofile_shim_alloc_wq() -> *mut bindings::workqueue_struct;
    fn oprofile_shim_kprof_map(map: *mut c_ulong) -> c_int;
    // Exported; only its address is taken (the text anchor of `common::kprof::relocate`).
    fn _printk(fmt: *const c_char, ...) -> c_int;
    fn oprofile_shim_module_area(start: *mut c_ulong, end: *mut c_ulong);
}

/// A workqueue of this module (`oprofile_sync`, unbound), destroyed on drop. The kernel crate
/// (7.3) has only the system queues; ours exists so that unloading can wait for a running work
/// item (`destroy_workqueue`), which the crate's API (no cancel/flush) cannot express.
///
/// # Invariants
///
/// `raw` is a live workqueue from `alloc_workqueue`, owned by this value.
pub(crate) struct OwnedQueue {
    raw: *mut bindings::workqueue_struct,
}

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: Every workqueue function called through `&OwnedQueue` (enqueueing) is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates the queue. Errors: `ENOMEM`.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: FFI call without preconditions.
        let raw = unsafe { oprofile_shim_alloc_wq() };
        if raw.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: `raw` is a new live workqueue, owned here.
        Ok(OwnedQueue { raw })
    }

    /// The queue, for work items that must end before it is dropped (the owner stops every
    /// item it queued before dropping the queue; `destroy_workqueue` then only waits for one
    /// still returning).
    pub(crate) fn get(&self) -> &'static Queue {
        // SAFETY: `raw` is live until `self` is dropped (type invariants); the `'static` borrow
        // is held only by work items of the owner, which all end before the drop (see above).
        unsafe { Queue::from_raw(self.raw) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `alloc_workqueue` and is destroyed once (type invariants);
        // nothing enqueues any more, and `destroy_workqueue` waits for a still-returning item.
        unsafe { bindings::destroy_workqueue(self.raw) };
    }
}

/// The kernel image's text, `[_stext, _etext)`, from the build's `System.map` (see
/// `kprof_shim.c`), relocated to the running kernel by [`kprof::relocate`]. Errors: `ENODEV`
/// (logged) when the module was built without it or against another build.
pub(crate) fn kernel_text() -> Result<(usize, usize)> {
    let mut map: [c_ulong; 4] = [0; 4];
    // SAFETY: `map` is writable for the 4 values the shim writes.
    if unsafe { oprofile_shim_kprof_map(map.as_mut_ptr()) } != 0 {
        pr_err!("kprof: module built without the kernel's System.map: no kernel text bounds\n");
        return Err(ENODEV);
    }
    let [stext, etext, printk, init_task] = map.map(|v| v as usize);
    let map = kprof::SystemMap { stext, etext, printk, init_task };
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
    let (mut start, mut end): (c_ulong, c_ulong) = (0, 0);
    // SAFETY: Valid out-pointers.
    unsafe { oprofile_shim_module_area(&mut start, &mut end) };
    (start as usize, end as usize)
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
    if !unsafe { bindings::ns_capable_noaudit(&raw mut bindings::init_user_ns, bindings::CAP_SYSLOG as c_int) } {
        return false;
    }
    // Any non-null kernel address will do.
    static PROBE: u8 = 0;
    let probe: *const c_void = (&raw const PROBE).cast();
    let mut out = [0u8; 32];
    // SAFETY: `out` is writable for its length; the format takes exactly one pointer argument.
    let n = unsafe { bindings::snprintf(out.as_mut_ptr().cast(), out.len(), c"%pK".as_ptr(), probe) };
    let shown = usize::try_from(n).ok().and_then(|n| out.get(..n.min(out.len() - 1)));
    shown.is_some_and(|s| !s.is_empty() && s.iter().any(|&b| b != b'0'))
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
