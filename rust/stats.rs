// SPDX-License-Identifier: GPL-2.0

//! Counters shown under `stats/` (legacy `drivers/oprofile/oprofile_stats.c`).
//!
//! Per-CPU counters are written in interrupt context by their own CPU and read from process
//! context, so they are relaxed atomics. All counters are reset on every `enable=1`.
//!
//! Losses that belong to one hardware counter are counted twice: under `stats/N/` for counter
//! `N` ([`CounterStats`]) and in the global file of the same name, which is their sum.

use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Counters of one CPU, as `stats/cpuN/<name>` (mode 0444, `"%lu\n"`).
pub(crate) struct CpuStats {
    /// Samples taken on this CPU (delivered or lost).
    pub(crate) sample_received: Atomic<usize>,
    /// Samples dropped because this CPU's buffer was full.
    pub(crate) sample_lost_overflow: Atomic<usize>,
    /// Backtraces cut short for want of room (this CPU's ring filled up during the walk, or the
    /// event buffer had no room for an entry at sync time) or at a broken frame whose PC equals
    /// ESCAPE_CODE (legacy `oprofile_add_trace`).
    pub(crate) backtrace_aborted: Atomic<usize>,
    /// Samples without a valid PC (no interrupt registers).
    pub(crate) sample_invalid_eip: Atomic<usize>,
}

/// Names and accessors of the per-CPU counters, in legacy order.
pub(crate) const CPU_STATS: [(&CStr, fn(&CpuStats) -> &Atomic<usize>); 4] = [
    (c"sample_received", |s| &s.sample_received),
    (c"sample_lost_overflow", |s| &s.sample_lost_overflow),
    (c"backtrace_aborted", |s| &s.backtrace_aborted),
    (c"sample_invalid_eip", |s| &s.sample_invalid_eip),
];

/// Losses of one hardware counter, as `stats/N/<name>` (mode 0444, `"%lu\n"`), summed over
/// CPUs. See the global counters of the same names.
pub(crate) struct CounterStats {
    pub(crate) sample_lost_no_irq: Atomic<usize>,
    pub(crate) sample_lost_overrun: Atomic<usize>,
    pub(crate) event_throttled: Atomic<usize>,
}

/// Names and accessors of the per-counter losses.
pub(crate) const COUNTER_STATS: [(&CStr, fn(&CounterStats) -> &Atomic<usize>); 3] = [
    (c"sample_lost_no_irq", |s| &s.sample_lost_no_irq),
    (c"sample_lost_overrun", |s| &s.sample_lost_overrun),
    (c"event_throttled", |s| &s.event_throttled),
];

/// All counters: one [`CpuStats`] per possible CPU (index = CPU id), one [`CounterStats`] per
/// hardware counter (index = counter number; none in timer mode) and the global ones.
pub(crate) struct Stats {
    pub(crate) cpu: KVec<CpuStats>,
    pub(crate) counter: KVec<CounterStats>,
    /// User samples of a task without mm.
    pub(crate) sample_lost_no_mm: Atomic<usize>,
    /// User samples whose PC lies in no mapping.
    pub(crate) sample_lost_no_mapping: Atomic<usize>,
    /// Samples dropped whole because the event buffer was full. Legacy counted dropped words;
    /// we never split a record, so we count samples (see `common::sync`).
    pub(crate) event_lost_overflow: Atomic<usize>,
    /// Backtraces cut short at a user return address in no mapping (the rest is dropped).
    pub(crate) bt_lost_no_mapping: Atomic<usize>,
    /// Counter overflows the PMU did not signal with an interrupt (sampling periods that
    /// elapsed without a sample), estimated from the counts; hardware models only. Sum of
    /// `stats/N/sample_lost_no_irq`.
    pub(crate) sample_lost_no_irq: Atomic<usize>,
    /// Sampling periods skipped because an overflow interrupt came more than a period late.
    /// Sum of `stats/N/sample_lost_overrun`.
    pub(crate) sample_lost_overrun: Atomic<usize>,
    /// Times perf throttled a sampling counter (it counts nothing until perf's next tick
    /// restarts it). Sum of `stats/N/event_throttled`.
    pub(crate) event_throttled: Atomic<usize>,
}

/// Names and accessors of the global counters, in legacy order; the last three are ours.
pub(crate) const GLOBAL_STATS: [(&CStr, fn(&Stats) -> &Atomic<usize>); 7] = [
    (c"sample_lost_no_mm", |s| &s.sample_lost_no_mm),
    (c"sample_lost_no_mapping", |s| &s.sample_lost_no_mapping),
    (c"event_lost_overflow", |s| &s.event_lost_overflow),
    (c"bt_lost_no_mapping", |s| &s.bt_lost_no_mapping),
    (c"sample_lost_no_irq", |s| &s.sample_lost_no_irq),
    (c"sample_lost_overrun", |s| &s.sample_lost_overrun),
    (c"event_throttled", |s| &s.event_throttled),
];

impl CpuStats {
    fn new() -> Self {
        CpuStats {
            sample_received: Atomic::new(0),
            sample_lost_overflow: Atomic::new(0),
            backtrace_aborted: Atomic::new(0),
            sample_invalid_eip: Atomic::new(0),
        }
    }
}

impl CounterStats {
    fn new() -> Self {
        CounterStats {
            sample_lost_no_irq: Atomic::new(0),
            sample_lost_overrun: Atomic::new(0),
            event_throttled: Atomic::new(0),
        }
    }
}

impl Stats {
    /// Counters for `nr_cpus` CPUs (ids `0..nr_cpus`) and `nr_counters` hardware counters, all
    /// zero. Errors: `ENOMEM`.
    pub(crate) fn new(nr_cpus: u32, nr_counters: usize) -> Result<Self> {
        let mut cpu = KVec::with_capacity(nr_cpus as usize, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            cpu.push(CpuStats::new(), GFP_KERNEL)?;
        }
        let mut counter = KVec::with_capacity(nr_counters, GFP_KERNEL)?;
        for _ in 0..nr_counters {
            counter.push(CounterStats::new(), GFP_KERNEL)?;
        }
        Ok(Stats {
            cpu,
            counter,
            sample_lost_no_mm: Atomic::new(0),
            sample_lost_no_mapping: Atomic::new(0),
            event_lost_overflow: Atomic::new(0),
            bt_lost_no_mapping: Atomic::new(0),
            sample_lost_no_irq: Atomic::new(0),
            sample_lost_overrun: Atomic::new(0),
            event_throttled: Atomic::new(0),
        })
    }

    /// Zeroes every counter (legacy `oprofile_reset_stats`, on `enable=1`).
    pub(crate) fn reset(&self) {
        for c in self.cpu.iter() {
            for (_, get) in CPU_STATS {
                get(c).store(0, Relaxed);
            }
        }
        for c in self.counter.iter() {
            for (_, get) in COUNTER_STATS {
                get(c).store(0, Relaxed);
            }
        }
        for (_, get) in GLOBAL_STATS {
            get(self).store(0, Relaxed);
        }
    }
}

/// The value of counter `item` of `table` in `group` (a file of `stats/`). Errors: `EINVAL`
/// when `group` is `None` (no such CPU or counter) or `item` is not in `table`.
pub(crate) fn read<S>(group: Option<&S>, table: &[(&CStr, fn(&S) -> &Atomic<usize>)], item: u8) -> Result<u64> {
    let (_, get) = table.get(usize::from(item)).ok_or(EINVAL)?;
    Ok(get(group.ok_or(EINVAL)?).load(Relaxed) as u64)
}

/// Adds one to `counter` (wrapping, as `atomic_inc`).
#[inline]
pub(crate) fn inc(counter: &Atomic<usize>) {
    counter.add(1, Relaxed);
}
