// SPDX-License-Identifier: GPL-2.0

//! Timer mode (legacy `drivers/oprofile/timer_int.c`): `cpu_type` `timer`.
//!
//! One pinned high-resolution timer per online CPU fires every `1 / timer_hz` seconds (module
//! parameter `timer_hz`, 1..=100000 Hz, default 1000) and samples the interrupted context with
//! event 0. `HRTIMER_MODE_REL_PINNED_HARD` keeps each timer on the CPU that started it and
//! expires it in hard-interrupt context even on PREEMPT_RT (where a plain mode would tick in a
//! softirq, without interrupted registers, and every sample would count as
//! `sample_invalid_eip`).
//!
//! The timers follow CPU hotplug, as legacy did: [`CpuTimers`] registers a hotplug state
//! ([`cpuhp`]) while running, whose callbacks run on the CPU concerned, in its hotplug
//! thread. Coming online (and at start, for every online CPU) a CPU starts its own timer there,
//! so the pinned mode keeps it on that CPU; going offline it cancels it (waiting for a running
//! callback) before the kernel would migrate its timers to another CPU, which would then be
//! sampled twice as often under its own CPU number. Samples already in the CPU's ring stay
//! there: every sync pass drains every CPU's ring, online or not, so they reach `buffer`. A run
//! that starts while a CPU is offline samples it from when it comes online.
//!
//! [`CpuTimers`] is the per-CPU clock itself, generic over what a tick does ([`Tick`]); kprof
//! (`crate::kprof`) runs its own set at `kprof_hz`, which follows hotplug the same way.
//!
//! A tick that comes more than a period late (this CPU's interrupts held off that long) is one
//! sample; `hrtimer_forward` returns every period that elapsed, and the ones beyond the first
//! are counted ([`Tick::missed`]): timer mode's `stats/cpuN/sample_lost_overrun`.

use crate::bridge::cpuhp::{self, CpuHotplug};
use crate::model::Model;
use crate::session::Session;
use kernel::impl_has_hr_timer;
use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;
use kernel::sync::{new_mutex, Arc, ArcBorrow, Mutex};
use kernel::time::hrtimer::{
    ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
    HrTimerRestart, RelativePinnedHardMode,
};
use kernel::time::{Delta, Monotonic};

/// Accepted `timer_hz` values.
pub(crate) const TIMER_HZ_RANGE: (u32, u32) = (1, 100_000);

/// Checks a clock rate parameter named `what` (`timer_hz`, `kprof_hz`) against
/// [`TIMER_HZ_RANGE`], logging why it is refused. Errors: `EINVAL` outside the range.
pub(crate) fn check_hz(hz: u32, what: &str) -> Result {
    if hz < TIMER_HZ_RANGE.0 || hz > TIMER_HZ_RANGE.1 {
        pr_err!(
            "{}={} out of range {}..={}\n",
            what,
            hz,
            TIMER_HZ_RANGE.0,
            TIMER_HZ_RANGE.1
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// What a per-CPU timer does at each expiry, in hard-interrupt context on its CPU (with that
/// CPU's interrupted registers in `get_irq_regs()`).
pub(crate) trait Tick: Send + Sync + 'static {
    /// Handles one tick.
    fn tick(&self);
    /// The tick just handled came `periods` (> 0) whole periods late: that many expiries of
    /// this CPU's timer passed without a tick (interrupts held off longer than a period).
    /// Default: nothing.
    fn missed(&self, _periods: u64) {}
}

impl Tick for Session {
    fn tick(&self) {
        self.cpu.add_irq_sample(0);
    }

    /// Counts the periods in this CPU's `stats/cpuN/sample_lost_overrun` and the global
    /// `stats/sample_lost_overrun`: periods not sampled, not samples (see `stats::CpuStats`).
    fn missed(&self, periods: u64) {
        let n = usize::try_from(periods).unwrap_or(usize::MAX);
        let stats = &self.stats;
        if let Some(cpu) = stats
            .cpu
            .get(kernel::cpu::CpuId::current().as_u32() as usize)
        {
            cpu.sample_lost_overrun.add(n, Relaxed);
        }
        stats.sample_lost_overrun.add(n, Relaxed);
    }
}

/// The timer of one CPU, ticking `target`.
#[pin_data]
pub(crate) struct CpuTimer<T: Tick> {
    #[pin]
    timer: HrTimer<CpuTimer<T>>,
    period: Delta,
    target: Arc<T>,
}

impl_has_hr_timer! {
    impl{T: Tick} HasHrTimer<CpuTimer<T>> for CpuTimer<T> { mode: RelativePinnedHardMode<Monotonic>, field: self.timer }
}

impl<T: Tick> HrTimerCallback for CpuTimer<T> {
    type Pointer<'a> = Arc<CpuTimer<T>>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        this.target.tick();
        // The expiries up to now, this one included (`hrtimer_forward`: at least 1 in the
        // callback); any beyond it passed unsampled while interrupts were held off.
        let expiries = ctx.forward_now(this.period);
        if expiries > 1 {
            this.target.missed(expiries - 1);
        }
        HrTimerRestart::Restart
    }
}

/// One pinned hrtimer per online CPU, each calling [`Tick::tick`] of a shared target every
/// period: the clock of timer mode and of kprof. It follows CPU hotplug while running (module
/// docs).
pub(crate) struct CpuTimers<T: Tick> {
    period: Delta,
    /// The hotplug state's name (`/sys/devices/system/cpu/hotplug/states`).
    state_name: &'static CStr,
    /// The running timers and their hotplug state; dropping it stops every timer.
    running: Option<cpuhp::Registration<TimerSet<T>>>,
}

/// What a [`TimerSet`] keeps under its lock.
struct TimerSlots<T: Tick> {
    /// Per CPU id: the handle of its running timer (dropping one cancels the timer and waits for
    /// its callback).
    timers: KVec<Option<ArcHrTimerHandle<CpuTimer<T>>>>,
    /// The first error of a CPU's start (`ENOMEM`).
    error: Option<Error>,
}

/// The timers of one run (start to stop), started and stopped per CPU by the hotplug callbacks.
#[pin_data]
pub(crate) struct TimerSet<T: Tick> {
    period: Delta,
    target: Arc<T>,
    #[pin]
    slots: Mutex<TimerSlots<T>>,
}

impl<T: Tick> CpuHotplug for TimerSet<T> {
    /// Starts `cpu`'s timer, on `cpu` (the callback runs there). A timer that cannot be
    /// allocated is logged and recorded (the start fails with it; later the CPU just runs
    /// unsampled).
    fn online(&self, cpu: u32) {
        // Bound to `cpu` (bridge::cpuhp): a pinned timer started here stays there. Checked all
        // the same, as a timer on another CPU would sample that one twice as often.
        if kernel::cpu::CpuId::current().as_u32() != cpu {
            kernel::pr_warn_once!(
                "CPU {} online callback not on its CPU: no timer there\n",
                cpu
            );
            return;
        }
        let timer = Arc::pin_init(
            pin_init!(CpuTimer { timer <- HrTimer::new(), period: self.period, target: self.target.clone() }),
            GFP_KERNEL,
        );
        let mut slots = self.slots.lock();
        let timer = match timer {
            Ok(timer) => timer,
            Err(e) => {
                pr_err!("CPU {}: no memory for its timer; it is not sampled\n", cpu);
                slots.error.get_or_insert(e);
                return;
            }
        };
        if let Some(slot @ None) = slots.timers.get_mut(cpu as usize) {
            *slot = Some(timer.start(self.period));
        }
    }

    /// Stops `cpu`'s timer and waits for a running callback.
    fn offline(&self, cpu: u32) {
        let handle = self
            .slots
            .lock()
            .timers
            .get_mut(cpu as usize)
            .and_then(Option::take);
        // Cancelled here, without the lock.
        drop(handle);
    }
}

impl<T: Tick> CpuTimers<T> {
    /// Stopped timers ticking at `hz` per CPU, whose hotplug state will be named `state_name`.
    /// Errors: `EINVAL` outside [`TIMER_HZ_RANGE`] (logged with `what`, the parameter's name).
    pub(crate) fn new(hz: u32, what: &str, state_name: &'static CStr) -> Result<Self> {
        check_hz(hz, what)?;
        Ok(CpuTimers {
            period: Delta::from_nanos(i64::from(1_000_000_000u32 / hz)),
            state_name,
            running: None,
        })
    }

    /// Whether the timers run.
    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts a timer on every online CPU, and on every CPU that comes online until [`Self::stop`],
    /// each ticking `target` (stops a previous run first). Errors: `ENOMEM`; `ENOSPC` when the
    /// kernel has no dynamic hotplug state left; then none runs. Process context, without
    /// `cpus_read_lock` held.
    pub(crate) fn start(&mut self, target: &Arc<T>) -> Result {
        self.stop();
        let period = self.period;
        let cpus = kernel::cpu::nr_cpu_ids() as usize;
        let mut timers = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            timers.push(None, GFP_KERNEL)?;
        }
        let set = Arc::pin_init(
            pin_init!(TimerSet {
                period,
                target: target.clone(),
                slots <- new_mutex!(TimerSlots { timers, error: None }, "oprofile::timer_set"),
            }),
            GFP_KERNEL,
        )?;
        let running = cpuhp::Registration::new(self.state_name, set)?;
        let error = running.ctx().slots.lock().error.take();
        if let Some(e) = error {
            // Stops the timers that did start.
            drop(running);
            return Err(e);
        }
        self.running = Some(running);
        Ok(())
    }

    /// Stops every timer and waits for running callbacks; CPUs coming online start none
    /// afterwards. Process context, without `cpus_read_lock` held.
    pub(crate) fn stop(&mut self) {
        self.running = None;
    }
}

/// The timer model.
pub(crate) struct TimerModel {
    timers: CpuTimers<Session>,
}

impl TimerModel {
    /// A model sampling at `hz` per CPU. Errors: `EINVAL` outside [`TIMER_HZ_RANGE`].
    pub(crate) fn new(hz: u32) -> Result<Self> {
        Ok(TimerModel {
            timers: CpuTimers::new(hz, "timer_hz", c"oprofile/timer:online")?,
        })
    }
}

impl Model for TimerModel {
    fn cpu_type(&self) -> &'static CStr {
        c"timer"
    }

    fn describe(&self) -> &'static str {
        "timer"
    }

    fn start(&mut self, session: &Arc<Session>) -> Result {
        self.timers.start(session)
    }

    fn stop(&mut self) {
        self.timers.stop();
    }
}
