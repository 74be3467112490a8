// SPDX-License-Identifier: GPL-2.0

//! Timer mode (legacy `drivers/oprofile/timer_int.c`): `cpu_type` `timer`.
//!
//! One pinned high-resolution timer per online CPU fires every `1 / timer_hz` seconds (module
//! parameter `timer_hz`, 1..=100000 Hz, default 1000) and samples the interrupted context with
//! event 0. Timers are started on their own CPU through [`bridge::call_on_cpu`] so that
//! `HRTIMER_MODE_REL_PINNED_HARD` keeps them there, expiring in hard-interrupt context even on
//! PREEMPT_RT (where a plain mode would tick in a softirq, without interrupted registers, and
//! every sample would count as `sample_invalid_eip`). CPUs that come online while profiling are
//! not sampled until the next start (legacy handled hotplug; noted for later).
//!
//! [`CpuTimers`] is the per-CPU clock itself, generic over what a tick does ([`Tick`]); kprof
//! (`crate::kprof`) runs its own set at `kprof_hz`.
//!
//! A tick that comes more than a period late (this CPU's interrupts held off that long) is one
//! sample; `hrtimer_forward` returns every period that elapsed, and the ones beyond the first
//! are counted ([`Tick::missed`]): timer mode's `stats/cpuN/sample_lost_overrun`.

use crate::model::Model;
use crate::session::Session;
use crate::bridge;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::time::hrtimer::{
    ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
    HrTimerRestart, RelativePinnedHardMode,
};
use kernel::sync::atomic::Relaxed;
use kernel::time::{Delta, Monotonic};
use kernel::impl_has_hr_timer;

/// Accepted `timer_hz` values.
pub(crate) const TIMER_HZ_RANGE: (u32, u32) = (1, 100_000);

/// Checks a clock rate parameter named `what` (`timer_hz`, `kprof_hz`) against
/// [`TIMER_HZ_RANGE`], logging why it is refused. Errors: `EINVAL` outside the range.
pub(crate) fn check_hz(hz: u32, what: &str) -> Result {
    if hz < TIMER_HZ_RANGE.0 || hz > TIMER_HZ_RANGE.1 {
        pr_err!("{}={} out of range {}..={}\n", what, hz, TIMER_HZ_RANGE.0, TIMER_HZ_RANGE.1);
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
        if let Some(cpu) = stats.cpu.get(kernel::cpu::CpuId::current().as_u32() as usize) {
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
/// period: the clock of timer mode and of kprof.
pub(crate) struct CpuTimers<T: Tick> {
    period: Delta,
    /// Handles of running timers; dropping one cancels its timer and waits for its callback.
    running: KVec<ArcHrTimerHandle<CpuTimer<T>>>,
}

impl<T: Tick> CpuTimers<T> {
    /// Stopped timers ticking at `hz` per CPU. Errors: `EINVAL` outside [`TIMER_HZ_RANGE`]
    /// (logged with `what`, the parameter's name).
    pub(crate) fn new(hz: u32, what: &str) -> Result<Self> {
        check_hz(hz, what)?;
        Ok(CpuTimers { period: Delta::from_nanos(i64::from(1_000_000_000u32 / hz)), running: KVec::new() })
    }

    /// Whether the timers run.
    pub(crate) fn is_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Starts a timer on every online CPU, each ticking `target`. Errors: `ENOMEM` (then none
    /// runs). Process context; the caller stops the timers before starting them again.
    pub(crate) fn start(&mut self, target: &Arc<T>) -> Result {
        let period = self.period;
        for cpu in 0..kernel::cpu::nr_cpu_ids() {
            let timer = Arc::pin_init(
                pin_init!(CpuTimer { timer <- HrTimer::new(), period, target: target.clone() }),
                GFP_KERNEL,
            )?;
            // Started on its own CPU, so that the pinned mode keeps it there. An offline CPU
            // (an error) gets no timer.
            if let Ok(h) = bridge::call_on_cpu(cpu, move || timer.start(period)) {
                if let Err(e) = self.running.push(h, GFP_KERNEL) {
                    self.stop();
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// Stops every timer and waits for running callbacks. Process context.
    pub(crate) fn stop(&mut self) {
        self.running.clear();
    }
}

/// The timer model.
pub(crate) struct TimerModel {
    timers: CpuTimers<Session>,
}

impl TimerModel {
    /// A model sampling at `hz` per CPU. Errors: `EINVAL` outside [`TIMER_HZ_RANGE`].
    pub(crate) fn new(hz: u32) -> Result<Self> {
        Ok(TimerModel { timers: CpuTimers::new(hz, "timer_hz")? })
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
