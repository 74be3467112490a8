// SPDX-License-Identifier: GPL-2.0

//! Timer mode (legacy `drivers/oprofile/timer_int.c`): `cpu_type` `timer`.
//!
//! One pinned high-resolution timer per online CPU fires every `1 / timer_hz` seconds (module
//! parameter `timer_hz`, 1..=100000 Hz, default 1000) and samples the interrupted context with
//! event 0. Timers are started on their own CPU through `smp_call_function_single` so that
//! `HRTIMER_MODE_REL_PINNED` keeps them there. CPUs that come online while profiling are not
//! sampled until the next start (legacy handled hotplug; noted for later).

use crate::model::Model;
use crate::oprof::Session;
use core::ffi::c_void;
use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::time::hrtimer::{
    ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
    HrTimerRestart, RelativePinnedMode,
};
use kernel::time::{Delta, Monotonic};
use kernel::impl_has_hr_timer;

/// Accepted `timer_hz` values.
pub(crate) const TIMER_HZ_RANGE: (u32, u32) = (1, 100_000);

/// The timer of one CPU.
#[pin_data]
pub(crate) struct CpuTimer {
    #[pin]
    timer: HrTimer<CpuTimer>,
    period: Delta,
    session: Arc<Session>,
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for CpuTimer { mode: RelativePinnedMode<Monotonic>, field: self.timer }
}

impl HrTimerCallback for CpuTimer {
    type Pointer<'a> = Arc<CpuTimer>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        this.session.add_irq_sample(0);
        ctx.forward_now(this.period);
        HrTimerRestart::Restart
    }
}

/// Argument of [`start_on_cpu`], on the starter's stack.
struct StartArg {
    timer: Option<Arc<CpuTimer>>,
    handle: Option<ArcHrTimerHandle<CpuTimer>>,
}

/// Starts the timer on the CPU this runs on (IPI or local call, interrupts off).
///
/// # Safety
///
/// `info` must point to a live, exclusively borrowed [`StartArg`].
unsafe extern "C" fn start_on_cpu(info: *mut c_void) {
    // SAFETY: Our contract; `smp_call_function_single(.., wait = true)` keeps it alive and borrowed.
    let arg = unsafe { &mut *info.cast::<StartArg>() };
    if let Some(t) = arg.timer.take() {
        let period = t.period;
        arg.handle = Some(t.start(period));
    }
}

/// The timer model.
pub(crate) struct TimerModel {
    period: Delta,
    /// Handles of running timers; dropping one cancels its timer and waits for its callback.
    running: KVec<ArcHrTimerHandle<CpuTimer>>,
}

impl TimerModel {
    /// A model sampling at `hz` per CPU. Errors: `EINVAL` outside [`TIMER_HZ_RANGE`].
    pub(crate) fn new(hz: u32) -> Result<Self> {
        if hz < TIMER_HZ_RANGE.0 || hz > TIMER_HZ_RANGE.1 {
            pr_err!("timer_hz={} out of range {}..={}\n", hz, TIMER_HZ_RANGE.0, TIMER_HZ_RANGE.1);
            return Err(EINVAL);
        }
        Ok(TimerModel { period: Delta::from_nanos(i64::from(1_000_000_000u32 / hz)), running: KVec::new() })
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
        let period = self.period;
        for cpu in 0..kernel::cpu::nr_cpu_ids() {
            let timer = Arc::pin_init(
                pin_init!(CpuTimer { timer <- HrTimer::new(), period, session: session.clone() }),
                GFP_KERNEL,
            )?;
            let mut arg = StartArg { timer: Some(timer), handle: None };
            // SAFETY: `start_on_cpu` gets a pointer to `arg`, which outlives the synchronous
            // call (`wait` = true). Offline CPUs return an error and do not run the function.
            unsafe {
                bindings::smp_call_function_single(
                    cpu as i32,
                    Some(start_on_cpu),
                    (&raw mut arg).cast(),
                    true,
                )
            };
            if let Some(h) = arg.handle.take() {
                if let Err(e) = self.running.push(h, GFP_KERNEL) {
                    self.stop();
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        // Dropping the handles cancels the timers and waits for running callbacks.
        self.running.clear();
    }
}
