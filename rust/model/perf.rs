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
//!   counter that stepped back, which perf reads as a wrap: QEMU's PMU race, "Counts under QEMU"
//!   in `Documentation/events.rst`), is rejected and its interval left out of `N/total`,
//!   `N/time_running` and the loss estimates, counted in `stats/N/event_read_rejected` and
//!   logged once per profiling period.
//!
//! The events follow CPU hotplug, as legacy did: a [`PerfRun`] registers a hotplug state
//! ([`cpuhp`]) for its lifetime, whose callbacks run on the CPU concerned in its hotplug thread,
//! after perf has brought the CPU's context up and before perf takes it down. Coming online (and
//! at start, for every online CPU) a CPU gets a new event per enabled counter, with the run's
//! settings; going offline, its events are disabled, refreshed one last time, and what they
//! counted and lost is moved into the run's *retired* figures (so `N/total`, `N/time_running`,
//! the loss and rejection stats keep what the CPU counted); then they are released (perf waits
//! for a running overflow handler) and the CPU's NMI samples still staged are replayed
//! ([`CpuBuffers::cpu_offline`]). The samples in the CPU's ring reach `buffer` with the next
//! sync pass, which drains every CPU's ring, online or not.
//!
//! [`CpuBuffers::cpu_offline`]: crate::cpu_buffer::CpuBuffers::cpu_offline

use crate::bridge::cpuhp::{self, CpuHotplug};
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
            ProbeError::NoPmu(e) => {
                write!(f, "perf has no CPU-cycles counter: error {}", e.to_errno())
            }
            ProbeError::Unsupported(pmu) => {
                write!(f, "perf PMU '{}' has no oprofile-rs model", pmu.name())
            }
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
            last: Reading {
                value: self.last_value.load(Relaxed),
                running_ns: self.last_running_ns.load(Relaxed),
            },
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

/// One event's (or a sum of events') figures for the per-counter stats files.
#[derive(Clone, Copy, Default)]
struct Lost {
    /// `sample_lost_no_irq`.
    no_irq: usize,
    /// `sample_lost_overrun`.
    overrun: usize,
    /// `event_read_rejected`: rejected readings.
    rejected: usize,
    /// `event_read_rejected_overflows`: overflow handler calls in their intervals.
    rejected_overflows: usize,
}

impl Lost {
    /// `slot`'s figures as its last refresh left them.
    fn of(slot: &Slot) -> Self {
        let wide = |a: &Atomic<u64>| usize::try_from(a.load(Relaxed)).unwrap_or(usize::MAX);
        Lost {
            no_irq: slot.lost_no_irq.load(Relaxed),
            overrun: slot.lost_overrun.load(Relaxed),
            rejected: wide(&slot.count.rejected),
            rejected_overflows: wide(&slot.count.handled_rejected),
        }
    }

    /// The sum of `self` and `o`.
    fn plus(self, o: Self) -> Self {
        Lost {
            no_irq: self.no_irq.saturating_add(o.no_irq),
            overrun: self.overrun.saturating_add(o.overrun),
            rejected: self.rejected.saturating_add(o.rejected),
            rejected_overflows: self.rejected_overflows.saturating_add(o.rejected_overflows),
        }
    }

    /// Stores the figures in the stats files of their names (one counter's or the global).
    fn store(
        &self,
        no_irq: &Atomic<usize>,
        overrun: &Atomic<usize>,
        rejected: &Atomic<usize>,
        overflows: &Atomic<usize>,
    ) {
        no_irq.store(self.no_irq, Relaxed);
        overrun.store(self.overrun, Relaxed);
        rejected.store(self.rejected, Relaxed);
        overflows.store(self.rejected_overflows, Relaxed);
    }
}

/// What the events of CPUs gone offline counted, per counter ([`PerfRun::retire`]).
#[derive(Clone, Copy, Default)]
struct Retired {
    total: CounterTotal,
    lost: Lost,
}

/// What the periodic refresh keeps.
struct RunState {
    /// The events of the online CPUs with their slots: a CPU's leave when it goes offline, all
    /// when the run's hotplug state is removed.
    events: KVec<(Arc<Slot>, Event)>,
    /// Per counter: events counted and time running on all CPUs so far in this period.
    totals: KVec<CounterTotal>,
    /// Per counter: what the released events counted, lost and rejected.
    retired: KVec<Retired>,
    /// Per CPU id: the periods the released events of that CPU lost to late interrupts.
    retired_cpu_overrun: KVec<usize>,
    /// The first error of a CPU's event creation, until the start takes it.
    error: Option<Error>,
    /// Whether the start is over: a CPU whose events cannot be created then runs without them.
    started: bool,
    warned_online: bool,
    warned_irq: bool,
    warned_overrun: bool,
    warned_throttle: bool,
    warned_sched: bool,
    warned_rejected: bool,
}

/// The perf events of one profiling period (`enable=1` to `enable=0`), created and released
/// per CPU by its hotplug callbacks (module docs).
#[pin_data]
pub(crate) struct PerfRun {
    spec: &'static CpuModel,
    session: Arc<Session>,
    /// The counter configuration (`setup`'s), indexed by counter.
    config: KVec<CounterConfig>,
    /// The PMU cannot exclude modes: filter samples in the handler instead.
    soft_filter: bool,
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
        self.refresh_locked(&mut guard);
    }

    /// [`Self::refresh`] under the run's mutex.
    fn refresh_locked(&self, st: &mut RunState) {
        // What the CPUs gone offline counted, then the live events.
        for (t, r) in st.totals.iter_mut().zip(st.retired.iter()) {
            *t = r.total;
        }

        for (slot, ev) in st.events.iter() {
            let (value, enabled, running) = ev.read();
            let counter = slot.counter as usize;
            let mut count = slot.count.get();
            let handled = slot.handled.load(Relaxed) as u64;
            let reading = Reading {
                value,
                running_ns: running,
            };
            let rejection = count.update(
                reading,
                handled,
                counter::counts_cycles(u64::from(slot.number)),
            );
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
            slot.lost_no_irq
                .store(usize::try_from(l.no_irq).unwrap_or(usize::MAX), Relaxed);
            slot.lost_overrun
                .store(usize::try_from(l.overrun).unwrap_or(usize::MAX), Relaxed);
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
        // Live events' figures plus the released ones', for one counter or all.
        let lost = |counter: Option<usize>| {
            let live = st
                .events
                .iter()
                .map(|(s, _)| s)
                .filter(|s| counter.is_none_or(|c| s.counter as usize == c))
                .fold(Lost::default(), |acc, s| acc.plus(Lost::of(s)));
            st.retired
                .iter()
                .enumerate()
                .filter(|(n, _)| counter.is_none_or(|c| *n == c))
                .fold(live, |acc, (_, r)| acc.plus(r.lost))
        };
        for (n, c) in stats.counter.iter().enumerate() {
            lost(Some(n)).store(
                &c.sample_lost_no_irq,
                &c.sample_lost_overrun,
                &c.event_read_rejected,
                &c.event_read_rejected_overflows,
            );
        }
        for (cpu, c) in stats.cpu.iter().enumerate() {
            let overrun = st
                .events
                .iter()
                .map(|(s, _)| s)
                .filter(|s| s.cpu as usize == cpu)
                .fold(0usize, |acc, s| {
                    acc.saturating_add(s.lost_overrun.load(Relaxed))
                });
            let gone = st.retired_cpu_overrun.get(cpu).copied().unwrap_or(0);
            c.sample_lost_overrun
                .store(overrun.saturating_add(gone), Relaxed);
        }
        lost(None).store(
            &stats.sample_lost_no_irq,
            &stats.sample_lost_overrun,
            &stats.event_read_rejected,
            &stats.event_read_rejected_overflows,
        );
        let throttled = stats.event_throttled.load(Relaxed);
        if throttled > 0 && !st.warned_throttle {
            st.warned_throttle = true;
            pr_warn!(
                "perf throttled a counter (too many samples per tick); samples were not taken until the next tick (stats/event_throttled). Raise N/count or set kernel.perf_cpu_time_max_percent=0.\n"
            );
        }
    }

    /// Creates the events of every enabled counter on `cpu`, with the run's settings.
    /// Errors: perf's (logged if `log`), `ENOMEM`; then none is left on `cpu`.
    fn create_events(&self, cpu: u32, log: bool) -> Result<KVec<(Arc<Slot>, Event)>> {
        let mut events = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
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
                    session: self.session.clone(),
                },
                GFP_KERNEL,
            )?;
            let (exclude_kernel, exclude_user) = if self.soft_filter {
                (false, false)
            } else {
                (!slot.kernel, !slot.user)
            };
            let attr = Attr {
                event: slot.number,
                period: slot.period,
                exclude_kernel,
                exclude_user,
            };
            // On error the events made so far are released as `events` drops.
            let ev =
                Event::create(cpu, &attr, slot.clone()).inspect_err(|e| {
                    if log {
                        pr_err!(
                        "counter {} (event {:#x}) on CPU {}: perf refused the event (error {})\n",
                        counter, slot.number, cpu, e.to_errno()
                    );
                    }
                })?;
            events.push((slot, ev), GFP_KERNEL)?;
        }
        Ok(events)
    }

    /// Moves what `slot`'s event counted, lost and rejected, as the last refresh left it, into
    /// `st`'s retired figures (its event is about to be released).
    fn retire(st: &mut RunState, slot: &Slot) {
        let count = slot.count.get();
        if let Some(r) = st.retired.get_mut(slot.counter as usize) {
            let lost = Lost::of(slot);
            r.total.events = r.total.events.saturating_add(count.total);
            r.total.running_ns = r.total.running_ns.saturating_add(count.running_ns);
            r.lost = r.lost.plus(lost);
            if let Some(c) = st.retired_cpu_overrun.get_mut(slot.cpu as usize) {
                *c = c.saturating_add(lost.overrun);
            }
        }
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
fn event_name(
    spec: &'static CpuModel,
    events: &[(Arc<Slot>, Event)],
    counter: usize,
) -> &'static str {
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

impl CpuHotplug for PerfRun {
    /// Creates `cpu`'s events (on `cpu`, after perf brought its context up). An error is logged
    /// and recorded: the start fails with it; later the CPU runs without events (logged once per
    /// run).
    fn online(&self, cpu: u32) {
        let log = {
            let st = self.state.lock();
            !st.started || !st.warned_online
        };
        let made = self.create_events(cpu, log);
        let mut st = self.state.lock();
        match made {
            Ok(events) => {
                for e in events {
                    // Room for every CPU's events was reserved at creation: no allocation.
                    if st.events.push(e, GFP_KERNEL).is_err() {
                        pr_err!("CPU {}: no memory for its events\n", cpu);
                    }
                }
            }
            Err(e) => {
                if st.started && !st.warned_online {
                    st.warned_online = true;
                    pr_warn!("CPU {} came online but its events could not be created: not counted until the next start\n", cpu);
                }
                if !st.started {
                    st.error.get_or_insert(e);
                }
            }
        }
    }

    /// Disables `cpu`'s events, refreshes (their final readings), retires and releases them
    /// (before perf takes the CPU's context down), then runs the deferred step of its NMI
    /// samples still staged.
    fn offline(&self, cpu: u32) {
        {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            for (slot, ev) in st.events.iter() {
                if slot.cpu == cpu {
                    ev.disable();
                }
            }
            self.refresh_locked(st);
            let mut gone = core::mem::take(&mut st.events);
            gone.retain(|(slot, _)| {
                if slot.cpu == cpu {
                    Self::retire(st, slot);
                    return false;
                }
                // Back into the (emptied, same capacity) vector: no allocation.
                true
            });
            st.events = gone;
            // `retain` dropped (released) them: no overflow handler runs for `cpu` any more.
        }
        self.session.cpu.cpu_offline(cpu);
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
    /// The running period's events and their hotplug state; dropping it releases them all.
    run: Option<cpuhp::Registration<PerfRun>>,
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
                pr_info!(
                    "{} reports {} counters ({} expected); offering {}\n",
                    pmu.name(),
                    hw,
                    n,
                    hw
                );
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

    /// A run of the configured counters into `session`, without events yet.
    fn new_run(&self, session: &Arc<Session>) -> Result<Arc<PerfRun>> {
        let nr_cpus = kernel::cpu::nr_cpu_ids() as usize;
        // Room for the events of every CPU id, so that a CPU coming online need not allocate.
        let events = KVec::with_capacity(nr_cpus.saturating_mul(self.config.len()), GFP_KERNEL)?;
        let mut config = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
        let mut totals = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
        let mut retired = KVec::with_capacity(self.config.len(), GFP_KERNEL)?;
        for c in self.config.iter() {
            config.push(*c, GFP_KERNEL)?;
            totals.push(CounterTotal::default(), GFP_KERNEL)?;
            retired.push(Retired::default(), GFP_KERNEL)?;
        }
        let mut retired_cpu_overrun = KVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            retired_cpu_overrun.push(0, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(PerfRun {
                spec: self.spec,
                session: session.clone(),
                config,
                soft_filter: self.soft_filter,
                state <- new_mutex!(RunState {
                    events,
                    totals,
                    retired,
                    retired_cpu_overrun,
                    error: None,
                    started: false,
                    warned_online: false,
                    warned_irq: false,
                    warned_overrun: false,
                    warned_throttle: false,
                    warned_sched: false,
                    warned_rejected: false,
                }, "oprofile::perf_run"),
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

    /// Creates the events on every online CPU (through the run's hotplug state, which creates
    /// them on CPUs coming online later too). Errors: `ENOMEM`; `ENOSPC` (no dynamic hotplug
    /// state left); the first event creation error (logged); then no event is left.
    fn start(&mut self, session: &Arc<Session>) -> Result {
        self.stop();
        let run = cpuhp::Registration::new(c"oprofile/perf:online", self.new_run(session)?)?;
        let error = {
            let mut st = run.ctx().state.lock();
            st.started = true;
            st.error.take()
        };
        if let Some(e) = error {
            // Releases the events that were created.
            drop(run);
            return Err(e);
        }
        self.run = Some(run);
        Ok(())
    }

    /// Releases every event (each CPU's are retired first), then keeps the period's totals.
    fn stop(&mut self) {
        let Some(reg) = self.run.take() else {
            return;
        };
        let run = reg.ctx().clone();
        // Removing the hotplug state runs `offline` for every online CPU.
        drop(reg);
        run.refresh();
        if let Ok(t) = run.totals() {
            self.last_totals = t;
        }
    }

    fn poller(&self) -> Option<Arc<dyn Poll>> {
        self.run.as_ref().map(|r| r.ctx().clone() as Arc<dyn Poll>)
    }

    fn counter_total(&self, counter: usize) -> Option<CounterTotal> {
        match self.run.as_ref().map(cpuhp::Registration::ctx) {
            Some(run) => {
                run.refresh();
                run.state.lock().totals.get(counter).copied()
            }
            None => self.last_totals.get(counter).copied(),
        }
    }
}
