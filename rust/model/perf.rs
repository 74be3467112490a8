// SPDX-License-Identifier: GPL-2.0

//! Hardware events through perf in-kernel counters (legacy `drivers/oprofile/oprofile_perf.c`
//! with `arch/arm/oprofile/common.c`): `cpu_type` `arm/armv7`, `arm/armv7-ca9`,
//! `arm/armv7-ca15` or `arm/armv7-ca7`, chosen from the perf PMU the kernel registered.
//!
//! Each enabled counter becomes, on every online CPU, a pinned `PERF_TYPE_RAW` perf event with
//! `config` = `N/event` and `sample_period` = `N/count` (0: counting only). Going through perf
//! lets the kernel's ARM PMU driver own PMNC/CNTENS/EVTSEL and the PMU interrupt the platform
//! describes, so oprofile coexists with `perf`. On overflow perf calls our handler in interrupt
//! context, which logs a sample with event = counter index (legacy `oprofile_add_sample(regs,
//! id)`).
//!
//! Differences from legacy, all deliberate:
//! - The configuration is validated at `buffer` open against the model's event table
//!   ([`crate::common::counter::validate`]); legacy let perf fail later or count nothing.
//! - `kernel`/`user` are honoured: as `exclude_kernel`/`exclude_user` where the PMU can filter
//!   by mode (PMUv2: A7, A15), otherwise (A8, A9) by dropping samples of the excluded mode in the
//!   handler; `N/total` then counts both modes.
//! - Every counter also counts: `N/total` is the events counted on all CPUs in the last (or
//!   current) profiling period, refreshed every sync interval so 32-bit counters never wrap
//!   unseen, even on a PMU without an overflow interrupt.
//! - Lost samples are estimated from the counts (see [`counter::losses`]): overflows without
//!   any interrupt (no PMU IRQ wired, as QEMU's realview-pb-a8) in `stats/sample_lost_no_irq`,
//!   periods skipped because an interrupt came more than a period late in
//!   `stats/sample_lost_overrun`; perf throttling is counted in `stats/event_throttled`. Each
//!   is logged once per profiling period.
//!
//! CPUs that come online while profiling are not counted until the next start.

use crate::common::counter::{self, CounterConfig};
use crate::common::events::CpuModel;
use crate::model::{Model, Poll};
use crate::session::Session;
use crate::stats;
use core::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{new_mutex, Arc, Mutex};

/// `struct oprofile_pmu_info` of `perf_shim.h`.
#[repr(C)]
struct PmuInfo {
    name: [u8; 32],
    num_counters: c_int,
    no_exclude: bool,
    no_interrupt: bool,
}

extern "C" {
    fn oprofile_shim_pmu_probe(info: *mut PmuInfo, is_arm_pmu: unsafe extern "C" fn(*const c_char) -> bool) -> c_int;
    fn oprofile_shim_perf_create(
        cpu: c_int,
        event: u32,
        period: u64,
        exclude_kernel: bool,
        exclude_user: bool,
        context: *mut c_void,
    ) -> *mut c_void;
    fn oprofile_shim_cpu_online(cpu: c_int) -> bool;
    fn oprofile_shim_perf_read(event: *mut c_void, enabled: *mut u64, running: *mut u64) -> u64;
    fn oprofile_shim_perf_disable(event: *mut c_void);
    fn oprofile_shim_perf_release(event: *mut c_void);
}

/// Why [`PerfModel::probe`] found no hardware model.
pub(crate) enum ProbeError {
    /// Creating a CPU-cycles counter failed with this errno (no PMU driver, or none for this CPU).
    NoPmu(c_int),
    /// The PMU (name, NUL-padded) has no model here.
    Unsupported([u8; 32]),
}

impl kernel::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProbeError::NoPmu(e) => write!(f, "perf has no CPU-cycles counter: error {e}"),
            ProbeError::Unsupported(name) => write!(f, "perf PMU '{}' has no oprofile-rs model", c_name(name)),
        }
    }
}

/// The text of a NUL-padded C name.
/// Whether the PMU named `name` is an `arm_pmu` whose counter mask `perf_shim.c` may read:
/// exactly the PMUs a model exists for (all `armv7_*` PMUs of the ARM perf drivers).
///
/// # Safety
///
/// `name` must be a NUL-terminated string, valid for the call.
unsafe extern "C" fn is_arm_pmu(name: *const c_char) -> bool {
    // SAFETY: NUL-terminated and valid for the call (our contract).
    let name = unsafe { CStr::from_char_ptr(name) };
    name.to_str().is_ok_and(|n| CpuModel::by_pmu_name(n).is_some())
}

fn c_name(name: &[u8; 32]) -> &str {
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    core::str::from_utf8(&name[..len]).unwrap_or("?")
}

/// One perf event: one enabled counter on one CPU. The overflow handler's context.
///
/// # Invariants
///
/// While `perf` is non-null, perf may call the overflow handler with this slot as context, so
/// the slot stays at its address (it lives in [`PerfRun::slots`], never resized) until the event
/// is released.
struct Slot {
    /// The `struct perf_event`, null once released.
    perf: Atomic<*mut c_void>,
    /// Event number (`N/event`).
    number: u32,
    cpu: u32,
    counter: u32,
    /// Sampling period in events; 0 = counting only.
    period: u64,
    /// Sample kernel / user mode (software filter where the PMU cannot exclude modes).
    kernel: bool,
    user: bool,
    /// Overflow handler calls.
    handled: Atomic<usize>,
    /// Samples lost by this event as of the last refresh ([`counter::losses`]).
    lost_no_irq: Atomic<usize>,
    lost_overrun: Atomic<usize>,
    session: Arc<Session>,
}

/// What the periodic refresh keeps.
struct RunState {
    /// Per counter: events counted on all CPUs so far in this period.
    totals: KVec<u64>,
    warned_irq: bool,
    warned_overrun: bool,
    warned_throttle: bool,
    warned_sched: bool,
    /// Set once the events are released.
    released: bool,
}

/// The perf events of one profiling period (`enable=1` to `enable=0`).
///
/// # Invariants
///
/// Every non-null `Slot::perf` of `slots` is a live perf event created with that slot as its
/// overflow context. Events are read, disabled and released only with `state` locked, and all
/// are released (`state.released`) before `slots` is dropped.
#[pin_data(PinnedDrop)]
pub(crate) struct PerfRun {
    spec: &'static CpuModel,
    slots: KVec<Slot>,
    session: Arc<Session>,
    #[pin]
    state: Mutex<RunState>,
}

impl PerfRun {
    /// Reads every event, updates the totals and the loss stats (`sample_lost_no_irq`,
    /// `sample_lost_overrun`, per counter under `stats/N/` and their sums), logs each kind of
    /// loss once per run. Process context (reading a counter of another CPU takes an IPI).
    fn refresh(&self) {
        let mut st = self.state.lock();
        if st.released {
            return;
        }
        for t in st.totals.iter_mut() {
            *t = 0;
        }

        for slot in self.slots.iter() {
            let ev = slot.perf.load(Relaxed);
            if ev.is_null() {
                continue;
            }
            let (mut enabled, mut running) = (0u64, 0u64);
            // SAFETY: `ev` is a live event (released only under `state`, which we hold).
            let value = unsafe { oprofile_shim_perf_read(ev, &mut enabled, &mut running) };
            let counter = slot.counter as usize;
            if let Some(t) = st.totals.get_mut(counter) {
                *t = t.saturating_add(value);
            }
            let l = counter::losses(value, slot.period, slot.handled.load(Relaxed) as u64);
            if l.no_irq > 0 && !st.warned_irq {
                st.warned_irq = true;
                pr_warn!(
                    "counter {} ({}) on CPU {}: {} sampling periods elapsed but the PMU raised no overflow interrupt; those samples are lost (stats/sample_lost_no_irq). Counting still works ({}/total).\n",
                    counter, self.event_name(counter), slot.cpu, l.no_irq, counter
                );
            }
            if l.overrun > 0 && !st.warned_overrun {
                st.warned_overrun = true;
                pr_info!(
                    "counter {} ({}) on CPU {}: overflow interrupts came more than a period late; the missed periods are counted in stats/sample_lost_overrun (raise {}/count)\n",
                    counter, self.event_name(counter), slot.cpu, counter
                );
            }
            slot.lost_no_irq.store(usize::try_from(l.no_irq).unwrap_or(usize::MAX), Relaxed);
            slot.lost_overrun.store(usize::try_from(l.overrun).unwrap_or(usize::MAX), Relaxed);
            if enabled > 0 && running < enabled && !st.warned_sched {
                st.warned_sched = true;
                pr_warn!(
                    "counter {} ({}) on CPU {} was not on the PMU for part of the period (another user of the counters?); its total and samples are short\n",
                    counter, self.event_name(counter), slot.cpu
                );
            }
        }
        // Per counter (`stats/N/`), then the global sums; each file is stored once per refresh.
        let stats = &self.session.stats;
        let sum = |counter: Option<usize>, lost: fn(&Slot) -> &Atomic<usize>| {
            self.slots
                .iter()
                .filter(|s| counter.is_none_or(|c| s.counter as usize == c))
                .fold(0usize, |acc, s| acc.saturating_add(lost(s).load(Relaxed)))
        };
        for (n, c) in stats.counter.iter().enumerate() {
            c.sample_lost_no_irq.store(sum(Some(n), |s| &s.lost_no_irq), Relaxed);
            c.sample_lost_overrun.store(sum(Some(n), |s| &s.lost_overrun), Relaxed);
        }
        stats.sample_lost_no_irq.store(sum(None, |s| &s.lost_no_irq), Relaxed);
        stats.sample_lost_overrun.store(sum(None, |s| &s.lost_overrun), Relaxed);
        let throttled = stats.event_throttled.load(Relaxed);
        if throttled > 0 && !st.warned_throttle {
            st.warned_throttle = true;
            pr_warn!(
                "perf throttled a counter (too many samples per tick); samples were not taken until the next tick (stats/event_throttled). Raise N/count or set kernel.perf_cpu_time_max_percent=0.\n"
            );
        }
    }

    /// Stops every event from counting, so a final [`Self::refresh`] sees frozen values.
    fn disable(&self) {
        let st = self.state.lock();
        if st.released {
            return;
        }
        for slot in self.slots.iter() {
            let ev = slot.perf.load(Relaxed);
            if !ev.is_null() {
                // SAFETY: `ev` is live (released only under `state`, which we hold).
                unsafe { oprofile_shim_perf_disable(ev) };
            }
        }
    }

    /// Releases every event; afterwards no overflow handler runs with a slot of this run.
    fn release(&self) {
        let mut st = self.state.lock();
        st.released = true;
        for slot in self.slots.iter() {
            let ev = slot.perf.xchg(core::ptr::null_mut(), Relaxed);
            if !ev.is_null() {
                // SAFETY: `ev` came from `perf_event_create_kernel_counter` and is released once
                // (we swapped it out). Releasing waits for a running handler to finish.
                unsafe { oprofile_shim_perf_release(ev) };
            }
        }
    }

    fn totals(&self) -> Result<KVec<u64>> {
        let st = self.state.lock();
        let mut v = KVec::with_capacity(st.totals.len(), GFP_KERNEL)?;
        for t in st.totals.iter() {
            v.push(*t, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn event_name(&self, counter: usize) -> &'static str {
        self.slots
            .iter()
            .find(|s| s.counter as usize == counter)
            .and_then(|s| self.spec.event(u64::from(s.number)))
            .map_or("?", |e| e.name)
    }
}

#[pinned_drop]
impl PinnedDrop for PerfRun {
    fn drop(self: Pin<&mut Self>) {
        // Normally done by `PerfModel::stop`; never leave an event pointing at a freed slot.
        self.release();
    }
}

impl Poll for PerfRun {
    fn poll(&self) {
        self.refresh();
    }
}

/// Called by the shim's perf overflow handler, in interrupt (or NMI-like) context on the
/// event's CPU.
///
/// # Safety
///
/// `context` must be the [`Slot`] the event was created with, and the event not yet released.
#[no_mangle]
unsafe extern "C" fn oprofile_rust_perf_overflow(context: *mut c_void, regs: *mut c_void, kernel: bool, throttled: bool) {
    // SAFETY: Our contract; slots outlive their events (type invariants of `Slot`).
    let slot = unsafe { &*context.cast::<Slot>() };
    slot.handled.add(1, Relaxed);
    if throttled {
        let stats = &slot.session.stats;
        stats::inc(&stats.event_throttled);
        if let Some(c) = stats.counter.get(slot.counter as usize) {
            stats::inc(&c.event_throttled);
        }
    }
    if (kernel && !slot.kernel) || (!kernel && !slot.user) {
        return;
    }
    slot.session.cpu.add_sample(regs, slot.counter);
}

/// The perf-counter model.
pub(crate) struct PerfModel {
    spec: &'static CpuModel,
    pmu_name: [u8; 32],
    num_counters: usize,
    /// The PMU cannot exclude modes: filter samples in the handler instead.
    soft_filter: bool,
    /// Configuration taken at `setup`.
    config: KVec<CounterConfig>,
    run: Option<Arc<PerfRun>>,
    /// Totals of the last finished period, per counter.
    last_totals: KVec<u64>,
}

impl PerfModel {
    /// Asks perf which PMU counts CPU cycles and picks its model. Errors: see [`ProbeError`].
    pub(crate) fn probe() -> core::result::Result<Self, ProbeError> {
        let mut info = PmuInfo { name: [0; 32], num_counters: -1, no_exclude: false, no_interrupt: false };
        // SAFETY: `info` is a valid, writable `struct oprofile_pmu_info`.
        let r = unsafe { oprofile_shim_pmu_probe(&mut info, is_arm_pmu) };
        if r != 0 {
            return Err(ProbeError::NoPmu(r));
        }
        let Some(spec) = CpuModel::by_pmu_name(c_name(&info.name)) else {
            return Err(ProbeError::Unsupported(info.name));
        };
        let mut n = spec.num_counters as usize;
        if let Ok(hw) = usize::try_from(info.num_counters) {
            if hw > 0 && hw < n {
                pr_info!("{} reports {} counters ({} expected); offering {}\n", c_name(&info.name), hw, n, hw);
                n = hw;
            }
        }
        if info.no_interrupt {
            pr_warn!("{} has no overflow interrupt: counting works, samples are lost (stats/sample_lost_no_irq)\n", c_name(&info.name));
        }
        if info.no_exclude {
            pr_info!("{} cannot filter by mode: N/kernel and N/user filter samples in software; N/total counts both modes\n", c_name(&info.name));
        }
        Ok(PerfModel {
            spec,
            pmu_name: info.name,
            num_counters: n,
            soft_filter: info.no_exclude,
            config: KVec::new(),
            run: None,
            last_totals: KVec::new(),
        })
    }

    /// The perf PMU's name, e.g. `armv7_cortex_a8`.
    pub(crate) fn pmu_name(&self) -> &str {
        c_name(&self.pmu_name)
    }

    /// Creates the events of every enabled counter on every online CPU.
    fn create_run(&self, session: &Arc<Session>) -> Result<Arc<PerfRun>> {
        let nr_cpus = kernel::cpu::nr_cpu_ids() as usize;
        let mut slots = KVec::with_capacity(nr_cpus * self.config.len(), GFP_KERNEL)?;
        for cpu in 0..nr_cpus {
            // SAFETY: FFI call without preconditions.
            if !unsafe { oprofile_shim_cpu_online(cpu as c_int) } {
                continue;
            }
            for (counter, c) in self.config.iter().enumerate() {
                if c.enabled == 0 {
                    continue;
                }
                slots.push(
                    Slot {
                        perf: Atomic::new(core::ptr::null_mut()),
                        number: c.event as u32,
                        cpu: cpu as u32,
                        counter: counter as u32,
                        period: c.count,
                        kernel: c.kernel != 0,
                        user: c.user != 0,
                        handled: Atomic::new(0),
                        lost_no_irq: Atomic::new(0),
                        lost_overrun: Atomic::new(0),
                        session: session.clone(),
                    },
                    GFP_KERNEL,
                )?;
            }
        }
        let mut totals = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
        for _ in 0..self.config.len() {
            totals.push(0u64, GFP_KERNEL)?;
        }
        let run = Arc::pin_init(
            pin_init!(PerfRun {
                spec: self.spec,
                slots,
                session: session.clone(),
                state <- new_mutex!(RunState { totals, warned_irq: false, warned_overrun: false, warned_throttle: false, warned_sched: false, released: false }, "oprofile::perf_run"),
            }),
            GFP_KERNEL,
        )?;
        for slot in run.slots.iter() {
            let (exclude_kernel, exclude_user) = if self.soft_filter { (false, false) } else { (!slot.kernel, !slot.user) };
            // SAFETY: The context is a slot of `run`, which stays allocated (and the slot in
            // place) until `release` has released the event (type invariants of `Slot`).
            let ev = unsafe {
                oprofile_shim_perf_create(
                    slot.cpu as c_int,
                    slot.number,
                    slot.period,
                    exclude_kernel,
                    exclude_user,
                    (slot as *const Slot).cast_mut().cast(),
                )
            };
            if let Err(e) = kernel::error::from_err_ptr(ev) {
                pr_err!(
                    "counter {} (event {:#x}) on CPU {}: perf refused the event (error {})\n",
                    slot.counter, slot.number, slot.cpu, e.to_errno()
                );
                run.release();
                return Err(e);
            }
            slot.perf.store(ev, Relaxed);
        }
        Ok(run)
    }
}

impl Model for PerfModel {
    fn cpu_type(&self) -> &'static CStr {
        // The table's C string is a `core::ffi::CStr`; the kernel's `CStr` is the same type.
        self.spec.cpu_type
    }

    fn describe(&self) -> &'static str {
        self.spec.name()
    }

    fn num_counters(&self) -> usize {
        self.num_counters
    }

    fn setup(&mut self, counters: &[CounterConfig]) -> Result {
        if let Err(e) = counter::validate(self.spec, counters) {
            pr_err!("{}: {}\n", self.spec.name(), format_args!("{e}"));
            return Err(EINVAL);
        }
        let mut config = KVec::with_capacity(counters.len(), GFP_KERNEL)?;
        for c in counters {
            config.push(*c, GFP_KERNEL)?;
        }
        self.config = config;
        Ok(())
    }

    fn shutdown(&mut self) {
        self.config.clear();
    }

    fn start(&mut self, session: &Arc<Session>) -> Result {
        self.stop();
        self.run = Some(self.create_run(session)?);
        Ok(())
    }

    fn stop(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        run.disable();
        run.refresh();
        if let Ok(t) = run.totals() {
            self.last_totals = t;
        }
        run.release();
    }

    fn poller(&self) -> Option<Arc<dyn Poll>> {
        self.run.clone().map(|r| r as Arc<dyn Poll>)
    }

    fn counter_total(&self, counter: usize) -> Option<u64> {
        match &self.run {
            Some(run) => {
                run.refresh();
                run.state.lock().totals.get(counter).copied()
            }
            None => self.last_totals.get(counter).copied(),
        }
    }
}
