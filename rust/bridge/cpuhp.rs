// SPDX-License-Identifier: GPL-2.0

//! CPU hotplug (`<linux/cpuhotplug.h>`): per-CPU sample sources that follow CPUs going offline
//! and coming online (legacy `timer_int.c` and `oprofile_perf.c` did the same with
//! `cpuhp_setup_state`). The kernel crate (7.3) has no hotplug abstraction, but its bindings
//! reach the exported functions behind the C inlines (`__cpuhp_setup_state`,
//! `__cpuhp_state_add_instance`, `__cpuhp_state_remove_instance`, `__cpuhp_remove_state`), so
//! there is no C shim.
//!
//! A [`Registration`] sets up a dynamic multi-instance state in the `CPUHP_AP_ONLINE_DYN` range
//! (the only kind whose callbacks get a context, the instance's `hlist_node`) with one
//! instance, its [`CpuHotplug`] context, and removes both when dropped. Where `ONLINE_DYN` sits
//! decides what the callbacks may do:
//!
//! - they run on the CPU concerned, in its hotplug thread (`cpuhp/N`, a kthread bound to that
//!   CPU): process context, preemptible but never migrated, interrupts on, sleeping allowed
//!   (`GFP_KERNEL`, mutexes, `hrtimer_cancel`); a pinned hrtimer started there stays on that CPU;
//! - on the way up they run after perf's own state (`CPUHP_AP_PERF_ONLINE`), so
//!   `perf_event_create_kernel_counter` accepts the CPU, and after the hrtimer base is online;
//!   on the way down they run before perf detaches the CPU's events and before
//!   `hrtimers_cpu_dying` migrates the CPU's timers (pinned ones too) to another CPU: a source
//!   stopped here is neither detached under us nor moved to sample on another CPU;
//! - hotplug operations are serialised with each other and with the registration and its
//!   removal (both take `cpus_read_lock`, a hotplug holds it for write): a CPU's callbacks
//!   alternate `online`, `offline`, `online`, ... (each CPU's first call is `online`) and the
//!   registration's callbacks run one at a time.
//!
//! The callbacks never fail: a failing `online` would abort the CPU's bring-up (it would stay
//! offline because of the profiler) and a failing teardown is a kernel `BUG`. A context records
//! its own errors (see the models).

use core::ffi::{c_int, c_uint};
use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What a [`Registration`] calls as CPUs come and go.
pub(crate) trait CpuHotplug: Send + Sync + 'static {
    /// CPU `cpu` is online: called for every online CPU while the registration is made, and for
    /// every CPU that comes online while it lasts. Runs on `cpu` in its hotplug thread (see the
    /// module docs: process context, may sleep, cannot migrate).
    fn online(&self, cpu: u32);
    /// CPU `cpu` goes offline (it is still online and running this), or the registration ends
    /// (then for every online CPU). Same context as [`CpuHotplug::online`]; when it returns the
    /// CPU's sources must be stopped.
    fn offline(&self, cpu: u32);
}

/// The instance of a [`Registration`]: its `hlist_node` and its context. `link` comes first
/// (`repr(C)`), so the node's address is the instance's.
#[repr(C)]
#[pin_data]
struct Instance<T: CpuHotplug> {
    #[pin]
    link: Opaque<bindings::hlist_node>,
    ctx: Arc<T>,
}

/// Multi-instance callback type (`struct cpuhp_step`'s `startup.multi`/`teardown.multi`).
type MultiCallback = unsafe extern "C" fn(c_uint, *mut bindings::hlist_node) -> c_int;
/// Single-instance callback type, the one the bindings declare for both.
type SingleCallback = unsafe extern "C" fn(c_uint) -> c_int;

/// Called by the hotplug core as CPU `cpu` comes online, or for every online CPU when the
/// instance is added.
///
/// # Safety
///
/// `node` must be the `link` of a live `Instance<T>` added to a state set up with these
/// callbacks.
unsafe extern "C" fn online<T: CpuHotplug>(cpu: c_uint, node: *mut bindings::hlist_node) -> c_int {
    // SAFETY: Our contract: `link` is the first field of a `repr(C)` `Instance<T>` (the
    // `Opaque` is `repr(transparent)`), live while it is added, and removing it waits for the
    // callbacks (`Registration::drop`).
    let instance = unsafe { &*node.cast::<Instance<T>>() };
    instance.ctx.online(cpu);
    0
}

/// Called by the hotplug core as CPU `cpu` goes offline, or for every online CPU when the
/// instance is removed.
///
/// # Safety
///
/// As for [`online`].
unsafe extern "C" fn offline<T: CpuHotplug>(cpu: c_uint, node: *mut bindings::hlist_node) -> c_int {
    // SAFETY: As in `online`.
    let instance = unsafe { &*node.cast::<Instance<T>>() };
    instance.ctx.offline(cpu);
    0
}

/// A dynamic hotplug state with one instance calling `ctx` ([`CpuHotplug`]), from
/// [`Registration::new`] until drop. Visible in `/sys/devices/system/cpu/hotplug/states` under
/// its name meanwhile.
///
/// # Invariants
///
/// `state` is a dynamic `CPUHP_AP_ONLINE_DYN` state set up multi-instance with `online::<T>` and
/// `offline::<T>`, and `instance.link` is added to it; `instance` is pinned, so the node's
/// address stays valid until drop removes it.
pub(crate) struct Registration<T: CpuHotplug> {
    instance: Pin<KBox<Instance<T>>>,
    state: c_int,
}

// SAFETY: The instance's node is written only by the hotplug core (under its locks) and read
// through `&self` by nobody; the context is `Send + Sync`; dropping (removal) may happen in any
// task that may sleep.
unsafe impl<T: CpuHotplug> Send for Registration<T> {}
// SAFETY: `&Registration` gives only `&Arc<T>` of a `Sync` context.
unsafe impl<T: CpuHotplug> Sync for Registration<T> {}

impl<T: CpuHotplug> Registration<T> {
    /// Sets up a state named `name` (shown in sysfs; e.g. `oprofile/timer:online`) and adds
    /// `ctx` as its instance, which calls [`CpuHotplug::online`] on every online CPU before this
    /// returns; from then on CPUs going offline and coming online call `ctx`. Process context,
    /// without `cpus_read_lock` held and without any lock the callbacks take.
    ///
    /// Errors: `ENOMEM`; `ENOSPC` when every dynamic state (`CPUHP_AP_ONLINE_DYN` ..
    /// `CPUHP_AP_ONLINE_DYN_END`, 40) is taken; then `ctx` was not called.
    pub(crate) fn new(name: &'static CStr, ctx: Arc<T>) -> Result<Self> {
        let instance = KBox::pin_init(
            pin_init!(Instance {
                link: Opaque::uninit(),
                ctx
            }),
            GFP_KERNEL,
        )?;
        let (startup, teardown): (MultiCallback, MultiCallback) = (online::<T>, offline::<T>);
        // SAFETY: `struct cpuhp_step` keeps each callback in a union of the single- and
        // multi-instance pointer types, and the hotplug core calls a multi-instance state's
        // callbacks as the multi-instance type only (`cpuhp_invoke_callback`):
        // `cpuhp_setup_state_multi()` casts them the same way in C. Both are function pointers.
        let (startup, teardown) = unsafe {
            (
                core::mem::transmute::<MultiCallback, SingleCallback>(startup),
                core::mem::transmute::<MultiCallback, SingleCallback>(teardown),
            )
        };
        // SAFETY: FFI call (`cpuhp_setup_state_multi`); `name` is static; the callbacks match a
        // multi-instance state (above) and are not called before an instance is added.
        let state = unsafe {
            bindings::__cpuhp_setup_state(
                bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
                name.as_char_ptr(),
                false,
                Some(startup),
                Some(teardown),
                true,
            )
        };
        kernel::error::to_result(state)?;
        // SAFETY: `state` was set up above with `online::<T>`/`offline::<T>`; `link` is the
        // first field of the pinned `Instance<T>`, which stays in place until drop removes it.
        let r = unsafe { bindings::__cpuhp_state_add_instance(state, instance.link.get(), true) };
        if let Err(e) = kernel::error::to_result(r) {
            // SAFETY: Set up above, without instances; `online` may have run and been rolled
            // back by the core (an `offline` for each CPU done).
            unsafe { bindings::__cpuhp_remove_state(state, false) };
            return Err(e);
        }
        // INVARIANT: `state` set up and `link` added above.
        Ok(Registration { instance, state })
    }

    /// The context the callbacks call.
    pub(crate) fn ctx(&self) -> &Arc<T> {
        &self.instance.ctx
    }
}

impl<T: CpuHotplug> Drop for Registration<T> {
    /// Calls [`CpuHotplug::offline`] for every online CPU, then removes the instance and the
    /// state: waits for a hotplug operation in progress, and no callback runs afterwards.
    /// Process context, without a lock the callbacks take.
    fn drop(&mut self) {
        // SAFETY: `link` was added to `state` (type invariants) and is removed once, here;
        // removal takes `cpus_read_lock`, so a running callback finishes first.
        unsafe {
            bindings::__cpuhp_state_remove_instance(self.state, self.instance.link.get(), true)
        };
        // SAFETY: Set up by `new` (type invariants), now without instances; removed once.
        unsafe { bindings::__cpuhp_remove_state(self.state, false) };
    }
}
