// SPDX-License-Identifier: GPL-2.0

//! Sample sources (legacy `struct oprofile_operations`).
//!
//! A model is chosen once at module init ([`select`]). Every method except [`Model::cpu_type`],
//! [`Model::describe`] and [`Model::num_counters`] is called with the profiler's control mutex
//! held, in process context, in the legacy order: `setup` at `buffer` open, `start`/`stop` on
//! `enable`, `shutdown` at `buffer` close.

pub(crate) mod perf;
pub(crate) mod timer;

use crate::common::counter::CounterConfig;
use crate::session::Session;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A counter's reading summed over its per-CPU perf events (`perf_event_read_value`).
#[derive(Clone, Copy, Default)]
pub(crate) struct CounterTotal {
    /// Events counted.
    pub(crate) events: u64,
    /// Time (ns) the events were on the PMU counting, perf's `time_running`: the sum over CPUs
    /// of each event's span from its first enable to its disable, less any time perf had it
    /// off the PMU (multiplexing).
    pub(crate) running_ns: u64,
}

/// A sample source.
pub(crate) trait Model: Send + Sync {
    /// The `cpu_type` string (legacy userspace names, e.g. `timer`, `arm/armv7`).
    fn cpu_type(&self) -> &'static CStr;
    /// Human-readable name for the kernel log.
    fn describe(&self) -> &'static str;
    /// Number of counter directories `0/ .. N-1/` (0: none, as in timer mode).
    fn num_counters(&self) -> usize {
        0
    }
    /// Validates and takes the counter configuration at `buffer` open (`counters` has
    /// [`Model::num_counters`] entries). Errors: `EINVAL` for a configuration the model cannot
    /// run, with the reason in the kernel log; an error fails the open.
    fn setup(&mut self, _counters: &[CounterConfig]) -> Result {
        Ok(())
    }
    /// Undoes `setup` at `buffer` close.
    fn shutdown(&mut self) {}
    /// Starts delivering samples into `session` on every online CPU, and on every CPU that comes
    /// online until [`Model::stop`]; a CPU going offline meanwhile stops first (CPU hotplug,
    /// `bridge::cpuhp`). Not with `cpus_read_lock` held.
    fn start(&mut self, session: &Arc<Session>) -> Result;
    /// Stops delivering samples; when it returns no sample handler is running and no hotplug
    /// callback of the run will.
    fn stop(&mut self);
    /// Work to do periodically while running (from the `buffer_sync` work, process context),
    /// e.g. folding 32-bit hardware counters before they wrap. Asked right after `start`.
    fn poller(&self) -> Option<Arc<dyn Poll>> {
        None
    }
    /// What counter `counter` counted on all CPUs in the current profiling period (live while
    /// running) or the last one; `None` if the counter does not exist or never ran.
    fn counter_total(&self, _counter: usize) -> Option<CounterTotal> {
        None
    }
    /// Whether `backtrace_depth` > 0 is supported: samples carry their interrupted registers,
    /// so every model can, where `sample_shim.c` has a stack walker (ARM, arm64).
    fn has_backtrace(&self) -> bool {
        cfg!(CONFIG_ARM) || cfg!(CONFIG_ARM64)
    }
}

/// Periodic work of a running model, see [`Model::poller`].
pub(crate) trait Poll: Send + Sync {
    /// Called about every `buffer_sync::SYNC_INTERVAL_MS` while profiling, in process context.
    fn poll(&self);
}

/// Chooses the model at init, as legacy `oprofile_arch_init` + `timer_init`: the perf-counter
/// model for the PMU the kernel reports, or timer mode with `timer=1` or when no PMU model
/// fits. Logs the choice and why. Errors: `EINVAL` for a bad `timer_hz`; `ENOMEM`.
pub(crate) fn select(force_timer: bool, timer_hz: u32) -> Result<KBox<dyn Model>> {
    // Refused whichever model is chosen: a bad parameter must not load silently.
    timer::check_hz(timer_hz, "timer_hz")?;
    if !force_timer {
        match perf::PerfModel::probe() {
            Ok(m) => {
                pr_info!(
                    "hardware events on perf PMU {}: cpu_type {}, {} counters\n",
                    m.pmu_name(),
                    m.describe(),
                    m.num_counters()
                );
                return Ok(KBox::new(m, GFP_KERNEL)?);
            }
            Err(why) => pr_info!("no hardware model ({}); using timer mode\n", why),
        }
    }
    let m = timer::TimerModel::new(timer_hz)?;
    pr_info!(
        "timer mode at {} Hz per CPU ({})\n",
        timer_hz,
        if force_timer {
            "timer=1"
        } else {
            "no hardware model"
        }
    );
    Ok(KBox::new(m, GFP_KERNEL)?)
}
