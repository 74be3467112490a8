// SPDX-License-Identifier: GPL-2.0

//! Perf in-kernel counters, through `perf_shim.c` (the kernel crate's bindings lack
//! `<linux/perf_event.h>` and `struct arm_pmu`): probing the PMU that counts CPU cycles, and
//! [`Event`], an owned pinned `PERF_TYPE_RAW` counter on one CPU whose overflows call an
//! [`Overflow`] handler (legacy `drivers/oprofile/oprofile_perf.c`'s
//! `perf_event_create_kernel_counter` use).

use super::regs::Regs;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::shim_bindings::{
    oprofile_pmu_info as RawPmuInfo, oprofile_shim_perf_create, oprofile_shim_perf_disable,
    oprofile_shim_perf_read, oprofile_shim_perf_release, oprofile_shim_pmu_probe,
};

/// Which PMUs have a model (the probe reads the counter count of those).
pub(crate) trait PmuModels {
    /// Whether the perf PMU named `name` has a model.
    fn has_model(name: &str) -> bool;
}

/// Name prefixes of the PMUs the ARM perf drivers (`drivers/perf/arm_pmu.c` users:
/// `arch/arm/kernel/perf_event_v{6,7}.c`, `perf_event_xscale.c`, `drivers/perf/arm_pmuv3.c`)
/// register. Only such a PMU is embedded in a `struct arm_pmu`, whose counter mask
/// `perf_shim.c` reads through `to_arm_pmu()`: this bridge asks the shim to for no other name,
/// whatever [`PmuModels`] says.
const ARM_PMU_PREFIXES: [&str; 4] = ["armv6_", "armv7_", "armv8_", "xscale"];

/// `PERF_TYPE_HARDWARE` of `enum perf_type_id` (uapi `<linux/perf_event.h>`, a stable ABI
/// value; the kernel crate's bindings lack the header).
const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_COUNT_HW_CPU_CYCLES` of `enum perf_hw_id` (uapi, as above).
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;

/// What perf's CPU-cycles PMU is.
pub(crate) struct PmuInfo {
    /// Its perf name, NUL-padded (e.g. `armv7_cortex_a8`).
    name: [u8; 32],
    /// Counters including CCNT, when known (an ARM PMU with a model).
    pub(crate) num_counters: Option<usize>,
    /// `PERF_PMU_CAP_NO_EXCLUDE`: it cannot filter kernel/user mode.
    pub(crate) no_exclude: bool,
    /// `PERF_PMU_CAP_NO_INTERRUPT`: no overflow interrupt is described.
    pub(crate) no_interrupt: bool,
}

impl PmuInfo {
    /// The PMU's name (`?` if not UTF-8).
    pub(crate) fn name(&self) -> &str {
        let len = self
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.name.len());
        self.name
            .get(..len)
            .and_then(|n| core::str::from_utf8(n).ok())
            .unwrap_or("?")
    }
}

/// The shim's `is_arm_pmu` callback for `M`: a PMU of an ARM perf driver
/// ([`ARM_PMU_PREFIXES`]) with a model.
///
/// # Safety
///
/// `name` must be a NUL-terminated string, valid for the call.
unsafe extern "C" fn is_arm_pmu<M: PmuModels>(name: *const c_char) -> bool {
    // SAFETY: NUL-terminated and valid for the call (our contract).
    let name = unsafe { CStr::from_char_ptr(name) };
    name.to_str()
        .is_ok_and(|n| ARM_PMU_PREFIXES.iter().any(|p| n.starts_with(p)) && M::has_model(n))
}

/// Describes the PMU perf counts CPU cycles with (creates and releases a probe counter;
/// process context). Errors: perf's (`ENOENT`, `ENODEV`, `EOPNOTSUPP`: no PMU driver for
/// this CPU).
pub(crate) fn probe<M: PmuModels>() -> Result<PmuInfo> {
    let mut raw = RawPmuInfo {
        name: [0; 32],
        num_counters: -1,
        no_exclude: false,
        no_interrupt: false,
    };
    // The probe event: the generic CPU-cycles event, which every ARM PMU driver maps (to CCNT
    // or its cycle counter), so perf hands it to the CPU's PMU.
    // SAFETY: `raw` is a valid, writable `struct oprofile_pmu_info`; the callback matches.
    kernel::error::to_result(unsafe {
        oprofile_shim_pmu_probe(
            &mut raw,
            PERF_TYPE_HARDWARE,
            PERF_COUNT_HW_CPU_CYCLES,
            Some(is_arm_pmu::<M>),
        )
    })?;
    Ok(PmuInfo {
        name: raw.name,
        num_counters: usize::try_from(raw.num_counters).ok(),
        no_exclude: raw.no_exclude,
        no_interrupt: raw.no_interrupt,
    })
}

/// What an [`Event`] does on each counter overflow.
pub(crate) trait Overflow: Send + Sync {
    /// One overflow, in interrupt (or NMI-like) context on the event's CPU: `regs` are the
    /// interrupted registers (`None` when perf passed none: the PMU drivers pass
    /// `get_irq_regs()`, which only an overflow handled outside an interrupt entry lacks),
    /// `kernel` whether they are kernel mode (false without registers), `throttled` whether
    /// perf has just throttled the event (too many overflows per tick).
    fn overflow(&self, regs: Option<&Regs>, kernel: bool, throttled: bool);
}

/// How an [`Event`] counts.
pub(crate) struct Attr {
    /// `PERF_TYPE_RAW` `config`: the PMU's event number.
    pub(crate) event: u32,
    /// `sample_period` in events; 0: counting only (no overflow handler).
    pub(crate) period: u64,
    pub(crate) exclude_kernel: bool,
    pub(crate) exclude_user: bool,
}

/// A kernel counter of `perf_event_create_kernel_counter` (`struct perf_event`), as the shim
/// creates, reads, disables and releases it. Not `Copy`: one value per counter, owned by the
/// [`Event`] that created it, which releases it.
///
/// # Invariants
///
/// The pointer is a live kernel counter from `oprofile_shim_perf_create` until
/// [`KernelCounter::release`] is called on this value (after which it is never used).
struct KernelCounter(NonNull<bindings::perf_event>);

impl KernelCounter {
    /// `perf_event_read_value`: the count and the enabled and running times (ns).
    fn read(&self) -> (u64, u64, u64) {
        let (mut enabled, mut running) = (0u64, 0u64);
        // SAFETY: Live (type invariants: not released, `release` consumes the last use);
        // valid out-pointers.
        let value = unsafe { oprofile_shim_perf_read(self.0.as_ptr(), &mut enabled, &mut running) };
        (value, enabled, running)
    }

    /// `perf_event_disable`.
    fn disable(&self) {
        // SAFETY: Live (type invariants).
        unsafe { oprofile_shim_perf_disable(self.0.as_ptr()) };
    }

    /// `perf_event_release_kernel`: waits for a running overflow handler, after which none
    /// runs with the counter's context.
    ///
    /// # Safety
    ///
    /// Called once, as the last use of this value.
    unsafe fn release(&mut self) {
        // SAFETY: Live (type invariants) and released once (our contract).
        unsafe { oprofile_shim_perf_release(self.0.as_ptr()) };
    }
}

/// A pinned per-CPU perf counter, released on drop (which waits for a running handler).
///
/// # Invariants
///
/// `counter` is owned here and released only by `drop`; its overflow context is the address of
/// `*_handler` (stable: boxed), which lives until the counter is released.
pub(crate) struct Event {
    counter: KernelCounter,
    /// The overflow context: read only by `oprofile_rust_perf_overflow`, through `raw`.
    _handler: KBox<Arc<dyn Overflow>>,
}

// SAFETY: Perf's kernel-counter functions may be called from any thread; the handler is
// `Send + Sync`.
unsafe impl Send for Event {}
// SAFETY: Reading and disabling through `&Event` are thread-safe perf calls.
unsafe impl Sync for Event {}

impl Event {
    /// Creates the counter on `cpu`, counting from now; its overflows call `handler`.
    /// Errors: `ENODEV` for an offline CPU; perf's (`EINVAL`, `ENOENT`, `EOPNOTSUPP`, `EBUSY`,
    /// `ENOMEM`).
    pub(crate) fn create(cpu: u32, attr: &Attr, handler: Arc<dyn Overflow>) -> Result<Self> {
        let cpu = c_int::try_from(cpu).map_err(|_| ENODEV)?;
        let handler = KBox::new(handler, GFP_KERNEL)?;
        let context: *const Arc<dyn Overflow> = &*handler;
        // SAFETY: `context` points into the box, which the event keeps until it is released
        // (`drop`), as `oprofile_rust_perf_overflow` expects.
        let raw = unsafe {
            oprofile_shim_perf_create(
                cpu,
                attr.event,
                attr.period,
                attr.exclude_kernel,
                attr.exclude_user,
                context.cast_mut().cast(),
            )
        };
        let raw = NonNull::new(kernel::error::from_err_ptr(raw)?).ok_or(ENOMEM)?;
        // INVARIANT: a new live counter with `handler` as context, released only by `drop`.
        Ok(Event {
            counter: KernelCounter(raw),
            _handler: handler,
        })
    }

    /// Events counted since creation, and the times (ns) the event was enabled and running on
    /// the PMU (`perf_event_read_value`; running < enabled: it was multiplexed). Process
    /// context (reading another CPU's counter takes an IPI).
    pub(crate) fn read(&self) -> (u64, u64, u64) {
        self.counter.read()
    }

    /// Stops counting (values stay readable). Process context.
    pub(crate) fn disable(&self) {
        self.counter.disable();
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: Released once, here, the counter's last use (type invariants). Releasing
        // waits for a running overflow handler, after which `_handler` may go.
        unsafe { self.counter.release() };
    }
}

/// `hw.interrupts` of a throttled event: perf core's `MAX_INTERRUPTS` (`~0ULL`), private to
/// `kernel/events/core.c` (`perf_event_throttle` sets it, `perf_event_unthrottle` clears it).
/// Perf tells an overflow handler in no other way that it has just throttled its event (the
/// return value of `perf_event_overflow` goes to the PMU driver, after the handler ran; the
/// driver's `PERF_HES_STOPPED` may have other causes), so the value is compared here, the one
/// place that knows it, from the `interrupts` the shim passes.
const PERF_MAX_INTERRUPTS: u64 = u64::MAX;

/// Called by the shim's perf overflow handler, in interrupt (or NMI-like) context on the
/// event's CPU; `interrupts` is the event's `hw.interrupts` ([`PERF_MAX_INTERRUPTS`]:
/// throttled).
///
/// Every overflow reaches the handler, one without registers (`regs` null) too: it is counted
/// there, never dropped here.
///
/// # Safety
///
/// `context` must be the handler of a live [`Event`]; `regs` null or live registers for the
/// call.
#[no_mangle]
unsafe extern "C" fn oprofile_rust_perf_overflow(
    context: *mut c_void,
    regs: *mut bindings::pt_regs,
    kernel: bool,
    interrupts: u64,
) {
    // SAFETY: Our contract: the handler lives until its event is released, which waits for us.
    let handler = unsafe { &*context.cast_const().cast::<Arc<dyn Overflow>>() };
    // SAFETY: Null or live for the call (our contract).
    let regs = unsafe { Regs::from_raw(regs) };
    handler.overflow(regs, kernel, interrupts == PERF_MAX_INTERRUPTS);
}
