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
//!   `stats/sample_lost_overrun` (also per CPU, `stats/cpuN/`); perf throttling is counted in
//!   `stats/event_throttled`. Each is logged once per profiling period.
//! - Each reading is checked against the event's previous one ([`counter::check_reading`]): a
//!   count that went down, or a cycle count that rose faster than any CPU clock (a 32-bit
//!   counter that stepped back, which perf reads as a wrap: seen once under QEMU), is rejected
//!   and its interval left out of `N/total`, `N/time_running` and the loss estimates, counted
//!   in `stats/N/event_read_rejected` and logged once per profiling period.
//!
//! CPUs that come online while profiling are not counted until the next start.

use crate::bridge::perf::{self as perf_event, Attr, Event, Overflow, PmuInfo, PmuModels};
use crate::bridge::regs::Regs;
use crate::common::counter::{self, Count, CounterConfig, Reading};
use crate::common::events::CpuModel;
use crate::model::{CounterTotal, Model, Poll};
use crate::session::Session;
use crate::stats;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{new_mutex, Arc, Mutex};

/// Why [`PerfModel::probe`] found no hardware model.
pub(crate) enum ProbeError {
    /// Creating a CPU-cycles counter failed with this error (no PMU driver, or none for this
    /// CPU).
    NoPmu(Error),
    /// The PMU of this name has no model here.
    Unsupported(PmuInfo),
}

impl kernel::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProbeError::NoPmu(e) => write!(f, "perf has no CPU-cycles counter: error {}", e.to_errno()),
            ProbeError::Unsupported(pmu) => write!(f, "perf PMU '{}' has no oprofile-rs model", pmu.name()),
        }
    }
}

/// The PMUs with a model: all `armv7_*` PMUs of the ARM perf drivers that the event tables
/// name ([`CpuModel::by_pmu_name`]).
struct Models;

impl PmuModels for Models {
    fn has_model(name: &str) -> bool {
        CpuModel::by_pmu_name(name).is_some()
    }
}

/// One enabled counter on one CPU: what its perf event's overflow handler needs.
struct Slot {
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
    /// Its count as the refreshes accepted it ([`counter::EventCount`]).
    count: CountCell,
    session: Arc<Session>,
}

/// A [`counter::EventCount`] in atomics, so that the shared [`Slot`] can keep it: only
/// [`PerfRun::refresh`] uses it, under the run's mutex, hence `Relaxed`.
struct CountCell {
    last_value: Atomic<u64>,
    last_running_ns: Atomic<u64>,
    last_handled: Atomic<u64>,
    total: Atomic<u64>,
    running_ns: Atomic<u64>,
    handled_rejected: Atomic<u64>,
    rejected: Atomic<u64>,
}

impl CountCell {
    /// Nothing read yet.
    fn new() -> Self {
        CountCell {
            last_value: Atomic::new(0),
            last_running_ns: Atomic::new(0),
            last_handled: Atomic::new(0),
            total: Atomic::new(0),
            running_ns: Atomic::new(0),
            handled_rejected: Atomic::new(0),
            rejected: Atomic::new(0),
        }
    }

    /// The count as the last refresh left it.
    fn get(&self) -> counter::EventCount {
        counter::EventCount {
            last: Reading { value: self.last_value.load(Relaxed), running_ns: self.last_running_ns.load(Relaxed) },
            last_handled: self.last_handled.load(Relaxed),
            total: self.total.load(Relaxed),
            running_ns: self.running_ns.load(Relaxed),
            handled_rejected: self.handled_rejected.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
        }
    }

    /// Keeps `c` for the next refresh.
    fn set(&self, c: &counter::EventCount) {
        self.last_value.store(c.last.value, Relaxed);
        self.last_running_ns.store(c.last.running_ns, Relaxed);
        self.last_handled.store(c.last_handled, Relaxed);
        self.total.store(c.total, Relaxed);
        self.running_ns.store(c.running_ns, Relaxed);
        self.handled_rejected.store(c.handled_rejected, Relaxed);
        self.rejected.store(c.rejected, Relaxed);
    }
}

impl Overflow for Slot {
    /// Logs a sample with event = counter index (legacy `oprofile_add_sample(regs, id)`), unless
    /// its mode is filtered out; counts throttling. An overflow without registers has no mode
    /// to filter by: it is taken as a sample without a valid PC (this CPU's `sample_received`
    /// and `sample_invalid_eip`), never dropped uncounted.
    fn overflow(&self, regs: Option<&Regs>, kernel: bool, throttled: bool) {
        self.handled.add(1, Relaxed);
        if throttled {
            let stats = &self.session.stats;
            stats::inc(&stats.event_throttled);
            if let Some(c) = stats.counter.get(self.counter as usize) {
                stats::inc(&c.event_throttled);
            }
        }
        if regs.is_some() && ((kernel && !self.kernel) || (!kernel && !self.user)) {
            return;
        }
        self.session.cpu.add_sample(regs, self.counter);
    }
}

/// What the periodic refresh keeps.
struct RunState {
    /// The events with their slots; emptied (released) by [`PerfRun::release`].
    events: KVec<(Arc<Slot>, Event)>,
    /// Per counter: events counted and time running on all CPUs so far in this period.
    totals: KVec<CounterTotal>,
    warned_irq: bool,
    warned_overrun: bool,
    warned_throttle: bool,
    warned_sched: bool,
    warned_rejected: bool,
}

/// The perf events of one profiling period (`enable=1` to `enable=0`); they are released
/// when it is dropped, if not before.
#[pin_data]
pub(crate) struct PerfRun {
    spec: &'static CpuModel,
    session: Arc<Session>,
    #[pin]
    state: Mutex<RunState>,
}

impl PerfRun {
    /// Reads every event, checks each reading against the event's previous one
    /// ([`counter::EventCount`]: a rejected reading's interval is left out), updates the totals
    /// and the stats (`sample_lost_no_irq`, `sample_lost_overrun`, `event_read_rejected`, per
    /// counter under `stats/N/`, `sample_lost_overrun` per CPU under `stats/cpuN/`, and their
    /// sums), logs each kind of loss or rejection once per run. Process context (reading a
    /// counter of another CPU takes an IPI).
    fn refresh(&self) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if st.events.is_empty() {
            return;
        }
        for t in st.totals.iter_mut() {
            *t = CounterTotal::default();
        }

        for (slot, ev) in st.events.iter() {
            let (value, enabled, running) = ev.read();
            let counter = slot.counter as usize;
            let mut count = slot.count.get();
            let handled = slot.handled.load(Relaxed) as u64;
            let reading = Reading { value, running_ns: running };
            let rejection = count.update(reading, handled, counter::counts_cycles(u64::from(slot.number)));
            slot.count.set(&count);
            if let Some(why) = rejection {
                if !st.warned_rejected {
                    st.warned_rejected = true;
                    pr_warn!(
                        "counter {} ({}) on CPU {}: a reading {}; its interval is left out of {}/total and the loss estimates (stats/{}/event_read_rejected)\n",
                        counter, event_name(self.spec, &st.events, counter), slot.cpu, format_args!("{why}"), counter, counter
                    );
                }
            }
            if let Some(t) = st.totals.get_mut(counter) {
                t.events = t.events.saturating_add(count.total);
                t.running_ns = t.running_ns.saturating_add(count.running_ns);
            }
            let l = count.losses(slot.period);
            if l.no_irq > 0 && !st.warned_irq {
                st.warned_irq = true;
                pr_warn!(
                    "counter {} ({}) on CPU {}: {} sampling periods elapsed but the PMU raised no overflow interrupt; those samples are lost (stats/sample_lost_no_irq). Counting still works ({}/total).\n",
                    counter, event_name(self.spec, &st.events, counter), slot.cpu, format_args!("{}", Count(l.no_irq)), counter
                );
            }
            if l.overrun > 0 && !st.warned_overrun {
                st.warned_overrun = true;
                pr_info!(
                    "counter {} ({}) on CPU {}: overflow interrupts came more than a period late; the missed periods are counted in stats/sample_lost_overrun (raise {}/count)\n",
                    counter, event_name(self.spec, &st.events, counter), slot.cpu, counter
                );
            }
            slot.lost_no_irq.store(usize::try_from(l.no_irq).unwrap_or(usize::MAX), Relaxed);
            slot.lost_overrun.store(usize::try_from(l.overrun).unwrap_or(usize::MAX), Relaxed);
            if enabled > 0 && running < enabled && !st.warned_sched {
                st.warned_sched = true;
                pr_warn!(
                    "counter {} ({}) on CPU {} was not on the PMU for part of the period (another user of the counters?); its total and samples are short\n",
                    counter, event_name(self.spec, &st.events, counter), slot.cpu
                );
            }
        }
        // Per counter (`stats/N/`), then the global sums; each file is stored once per refresh.
        let stats = &self.session.stats;
        let sum = |counter: Option<usize>, lost: fn(&Slot) -> &Atomic<usize>| {
            st.events
                .iter()
                .map(|(s, _)| s)
                .filter(|s| counter.is_none_or(|c| s.counter as usize == c))
                .fold(0usize, |acc, s| acc.saturating_add(lost(s).load(Relaxed)))
        };
        let rejected = |counter: Option<usize>| {
            st.events
                .iter()
                .map(|(s, _)| s)
                .filter(|s| counter.is_none_or(|c| s.counter as usize == c))
                .fold(0usize, |acc, s| acc.saturating_add(usize::try_from(s.count.rejected.load(Relaxed)).unwrap_or(usize::MAX)))
        };
        for (n, c) in stats.counter.iter().enumerate() {
            c.sample_lost_no_irq.store(sum(Some(n), |s| &s.lost_no_irq), Relaxed);
            c.sample_lost_overrun.store(sum(Some(n), |s| &s.lost_overrun), Relaxed);
            c.event_read_rejected.store(rejected(Some(n)), Relaxed);
        }
        for (cpu, c) in stats.cpu.iter().enumerate() {
            let overrun = st
                .events
                .iter()
                .map(|(s, _)| s)
                .filter(|s| s.cpu as usize == cpu)
                .fold(0usize, |acc, s| acc.saturating_add(s.lost_overrun.load(Relaxed)));
            c.sample_lost_overrun.store(overrun, Relaxed);
        }
        stats.sample_lost_no_irq.store(sum(None, |s| &s.lost_no_irq), Relaxed);
        stats.sample_lost_overrun.store(sum(None, |s| &s.lost_overrun), Relaxed);
        stats.event_read_rejected.store(rejected(None), Relaxed);
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
        for (_, ev) in self.state.lock().events.iter() {
            ev.disable();
        }
    }

    /// Releases every event; afterwards no overflow handler runs with a slot of this run.
    fn release(&self) {
        // Taken out first: releasing waits for running handlers, which take no lock of ours.
        let events = core::mem::take(&mut self.state.lock().events);
        drop(events);
    }

    fn totals(&self) -> Result<KVec<CounterTotal>> {
        let st = self.state.lock();
        let mut v = KVec::with_capacity(st.totals.len(), GFP_KERNEL)?;
        for t in st.totals.iter() {
            v.push(*t, GFP_KERNEL)?;
        }
        Ok(v)
    }
}

/// The name of the event counter `counter` counts (`?` if unknown).
fn event_name(spec: &'static CpuModel, events: &[(Arc<Slot>, Event)], counter: usize) -> &'static str {
    events
        .iter()
        .find(|(s, _)| s.counter as usize == counter)
        .and_then(|(s, _)| spec.event(u64::from(s.number)))
        .map_or("?", |e| e.name)
}

impl Poll for PerfRun {
    fn poll(&self) {
        self.refresh();
    }
}

/// The perf-counter model.
pub(crate) struct PerfModel {
    spec: &'static CpuModel,
    pmu: PmuInfo,
    num_counters: usize,
    /// The PMU cannot exclude modes: filter samples in the handler instead.
    soft_filter: bool,
    /// Configuration taken at `setup`.
    config: KVec<CounterConfig>,
    run: Option<Arc<PerfRun>>,
    /// Totals of the last finished period, per counter.
    last_totals: KVec<CounterTotal>,
}

impl PerfModel {
    /// Asks perf which PMU counts CPU cycles and picks its model. Errors: see [`ProbeError`].
    pub(crate) fn probe() -> core::result::Result<Self, ProbeError> {
        let pmu = perf_event::probe::<Models>().map_err(ProbeError::NoPmu)?;
        let Some(spec) = CpuModel::by_pmu_name(pmu.name()) else {
            return Err(ProbeError::Unsupported(pmu));
        };
        let mut n = spec.num_counters as usize;
        if let Some(hw) = pmu.num_counters {
            if hw > 0 && hw < n {
                pr_info!("{} reports {} counters ({} expected); offering {}\n", pmu.name(), hw, n, hw);
                n = hw;
            }
        }
        if pmu.no_interrupt {
            pr_warn!("{} has no overflow interrupt: counting works, samples are lost (stats/sample_lost_no_irq)\n", pmu.name());
        }
        if pmu.no_exclude {
            pr_info!("{} cannot filter by mode: N/kernel and N/user filter samples in software; N/total counts both modes\n", pmu.name());
        }
        Ok(PerfModel {
            spec,
            soft_filter: pmu.no_exclude,
            pmu,
            num_counters: n,
            config: KVec::new(),
            run: None,
            last_totals: KVec::new(),
        })
    }

    /// The perf PMU's name, e.g. `armv7_cortex_a8`.
    pub(crate) fn pmu_name(&self) -> &str {
        self.pmu.name()
    }

    /// Creates the events of every enabled counter on every online CPU.
    fn create_run(&self, session: &Arc<Session>) -> Result<Arc<PerfRun>> {
        let nr_cpus = kernel::cpu::nr_cpu_ids() as usize;
        let mut events = KVec::with_capacity(nr_cpus.saturating_mul(self.config.len()), GFP_KERNEL)?;
        for cpu in 0..kernel::cpu::nr_cpu_ids() {
            if !perf_event::cpu_online(cpu) {
                continue;
            }
            for (counter, c) in self.config.iter().enumerate() {
                if c.enabled == 0 {
                    continue;
                }
                let slot = Arc::new(
                    Slot {
                        number: c.event as u32,
                        cpu,
                        counter: counter as u32,
                        period: c.count,
                        kernel: c.kernel != 0,
                        user: c.user != 0,
                        handled: Atomic::new(0),
                        lost_no_irq: Atomic::new(0),
                        lost_overrun: Atomic::new(0),
                        count: CountCell::new(),
                        session: session.clone(),
                    },
                    GFP_KERNEL,
                )?;
                let (exclude_kernel, exclude_user) =
                    if self.soft_filter { (false, false) } else { (!slot.kernel, !slot.user) };
                let attr = Attr { event: slot.number, period: slot.period, exclude_kernel, exclude_user };
                // On error the events made so far are released as `events` drops.
                let ev = Event::create(cpu, &attr, slot.clone()).inspect_err(|e| {
                    pr_err!(
                        "counter {} (event {:#x}) on CPU {}: perf refused the event (error {})\n",
                        counter, slot.number, cpu, e.to_errno()
                    );
                })?;
                events.push((slot, ev), GFP_KERNEL)?;
            }
        }
        let mut totals = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
        for _ in 0..self.config.len() {
            totals.push(CounterTotal::default(), GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(PerfRun {
                spec: self.spec,
                session: session.clone(),
                state <- new_mutex!(RunState { events, totals, warned_irq: false, warned_overrun: false, warned_throttle: false, warned_sched: false, warned_rejected: false }, "oprofile::perf_run"),
            }),
            GFP_KERNEL,
        )
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

    fn counter_total(&self, counter: usize) -> Option<CounterTotal> {
        match &self.run {
            Some(run) => {
                run.refresh();
                run.state.lock().totals.get(counter).copied()
            }
            None => self.last_totals.get(counter).copied(),
        }
    }
}
