// SPDX-License-Identifier: GPL-2.0

//! Counters shown under `stats/` (legacy `drivers/oprofile/oprofile_stats.c`).
//!
//! Per-CPU counters are written in interrupt context by their own CPU and read from process
//! context, so they are relaxed atomics. All counters are reset on every `enable=1`.
//!
//! Losses that belong to one hardware counter are counted twice: under `stats/N/` for counter
//! `N` ([`CounterStats`]) and in the global file of the same name, which is their sum.
//! `sample_lost_overrun` is also counted per CPU (`stats/cpuN/`, [`CpuStats`]): the global file
//! is the sum of those too (timer mode has no counters, only the per-CPU and global files).
//!
//! Each group of counters is declared by [`stat_counters!`], one line per counter: the field
//! name is the file name and the declaration order is the file order (legacy order first), so
//! adding a counter is one line (plus its doc comment) in [`CpuStats`], [`CounterStats`] or
//! [`GlobalStats`]; `files.rs` makes a file for every entry of the group's
//! [`COUNTERS`](GlobalStats::COUNTERS).

use core::ops::Deref;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};

/// A counter of the group `S`: its file name and its field.
pub(crate) type Counter<S> = (&'static CStr, fn(&S) -> &Atomic<usize>);

/// Declares a group of `stats/` counters: a struct with one `pub(crate)` [`Atomic<usize>`]
/// field per listed name (doc comments kept), and
///
/// - `COUNTERS`: every field as a [`Counter`], named by the field name, in declaration order;
/// - `new()`: every counter 0 (`const`);
/// - `reset()`: sets every counter to 0.
///
/// ```ignore
/// stat_counters! {
///     /// Counters of one CPU.
///     pub(crate) struct CpuStats {
///         /// Samples taken on this CPU.
///         sample_received,
///     }
/// }
/// ```
macro_rules! stat_counters {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fattr:meta])* $field:ident ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $( $(#[$fattr])* pub(crate) $field: Atomic<usize>, )*
        }

        impl $name {
            /// File names and accessors of the counters, in declaration (file) order.
            pub(crate) const COUNTERS: &'static [Counter<Self>] = &[
                $( (kernel::c_str!(stringify!($field)), |s| &s.$field), )*
            ];

            /// All counters 0.
            pub(crate) const fn new() -> Self {
                Self { $( $field: Atomic::new(0), )* }
            }

            /// Sets every counter to 0.
            pub(crate) fn reset(&self) {
                for (_, get) in Self::COUNTERS {
                    get(self).store(0, Relaxed);
                }
            }
        }
    };
}

stat_counters! {
    /// Counters of one CPU, as `stats/cpuN/<name>` (mode 0444, `"%lu\n"`), in legacy order.
    pub(crate) struct CpuStats {
        /// Samples taken on this CPU (delivered or lost).
        sample_received,
        /// Samples dropped because this CPU's buffer was full.
        sample_lost_overflow,
        /// Backtraces cut short for want of room (this CPU's ring filled up during the walk, or
        /// the event buffer had no room for an entry at sync time) or at a broken frame whose PC
        /// equals ESCAPE_CODE (legacy `oprofile_add_trace`).
        backtrace_aborted,
        /// Samples without a valid PC (no interrupt registers).
        sample_invalid_eip,
        /// Samples taken in NMI context (arm64 pseudo-NMIs) dropped because this CPU's NMI
        /// staging ring was full: more NMIs than fit while its interrupts stayed masked
        /// (`cpu_buffer::Staged`). Always 0 without NMIs (ARMv7).
        sample_lost_nmi_overflow,
        /// User-mode samples taken in NMI context dropped because another task ran on this CPU
        /// before their deferred step: its mappings cannot be looked up for it any more.
        /// Always 0 without NMIs (and expected 0 with them: a user-mode NMI returns to user
        /// space with interrupts unmasked, so the deferred step runs first).
        sample_lost_nmi_task,
        /// Kernel-mode samples taken in NMI context whose task was switched out before their
        /// deferred step: delivered with their kernel call chain, but without their task's
        /// executable (app cookie 0) and the user part of their chain. Not a loss.
        nmi_task_switched,
        /// Sampling periods of this CPU that passed without a sample because its interrupt came
        /// more than a period late. Timer mode: the hrtimer's overruns beyond the expiry its
        /// callback samples (`hrtimer_forward` returns every period that elapsed), counted
        /// exactly at each late tick. Hardware models: the sum of this CPU's per-counter
        /// estimates (as `stats/N/sample_lost_overrun`). Periods never sampled, not samples
        /// taken: not part of `sample_received`. The global `sample_lost_overrun` is their sum.
        sample_lost_overrun,
    }
}

stat_counters! {
    /// Losses of one hardware counter, as `stats/N/<name>` (mode 0444, `"%lu\n"`), summed over
    /// CPUs; hardware models only. Each global counter of the same name is their sum.
    pub(crate) struct CounterStats {
        /// Overflows of this counter the PMU did not signal with an interrupt (sampling
        /// periods), estimated from its count.
        sample_lost_no_irq,
        /// Sampling periods of this counter skipped by an interrupt more than a period late.
        sample_lost_overrun,
        /// Times perf throttled this counter.
        event_throttled,
        /// Readings of this counter (one CPU's perf event, read about every 100 ms) rejected
        /// because they cannot be right: lower than the previous reading (perf's count never
        /// decreases), or, for an event counting CPU cycles, more cycles since the previous
        /// reading than `common::counter::MAX_CYCLES_PER_NS` per ns of time running plus
        /// `common::counter::READ_SKEW_EVENTS` (a 32-bit counter that steps back, as QEMU's did
        /// once, reads as a wrap too many: about 2^32 more). The events, time and overflow
        /// handler calls between the rejected reading and the one before it are left out of
        /// `N/total`, `N/time_running` and the loss estimates.
        event_read_rejected,
        /// Overflow handler calls (sampling periods the PMU signalled) in the intervals left
        /// out for [`Self::event_read_rejected`]: their samples are delivered as usual, but no
        /// count says how many periods elapsed there, so they are left out of the loss
        /// estimates too. A check of samples against periods subtracts them.
        event_read_rejected_overflows,
    }
}

stat_counters! {
    /// The global counters, as `stats/<name>` (mode 0444, `"%lu\n"`), in legacy order; the
    /// ones from `sample_lost_no_irq` on are ours. Reached through [`Stats`]
    /// (`stats.sample_lost_no_mm`).
    pub(crate) struct GlobalStats {
        /// User samples of a task without mm.
        sample_lost_no_mm,
        /// User samples whose PC lies in no mapping.
        sample_lost_no_mapping,
        /// Samples dropped whole because the event buffer was full. Legacy counted dropped
        /// words; we never split a record, so we count samples (see `common::sync`).
        event_lost_overflow,
        /// Backtraces cut short at a user return address in no mapping (the rest is dropped).
        bt_lost_no_mapping,
        /// Counter overflows the PMU did not signal with an interrupt (sampling periods that
        /// elapsed without a sample), estimated from the counts; hardware models only. Sum of
        /// `stats/N/sample_lost_no_irq`.
        sample_lost_no_irq,
        /// Sampling periods skipped because a sampling interrupt came more than a period late
        /// (a late hrtimer in timer mode, a late overflow interrupt in hardware models). Sum
        /// of `stats/cpuN/sample_lost_overrun`, and in hardware models of
        /// `stats/N/sample_lost_overrun`.
        sample_lost_overrun,
        /// Times perf throttled a sampling counter (it counts nothing until perf's next tick
        /// restarts it). Sum of `stats/N/event_throttled`.
        event_throttled,
        /// User call chains ended at Thumb code (the sampled code, or a caller returned to),
        /// whose r11 is no frame pointer (`common::sync::UserWalkEnd::Thumb`).
        bt_user_thumb,
        /// User call chains ended at a frame pointer outside the stack mapping, misaligned, not
        /// above the previous frame, or unreadable (`UserWalkEnd::BadFrame`).
        bt_user_bad_frame,
        /// User call chains ended at a saved return address that follows no call instruction
        /// (`UserWalkEnd::NotCall`).
        bt_user_not_call,
        /// User-stack snapshots not taken: no free snapshot buffer (`user_stack`).
        user_stack_no_buffer,
        /// User-stack snapshots not taken: the user stack could not be read.
        user_stack_fault,
        /// User-stack snapshots not taken: the stack pointer is in a mapping that is not
        /// readable or is device memory (`VM_IO`, `VM_PFNMAP`, `VM_MIXEDMAP`); nothing read.
        user_stack_refused,
        /// User-stack snapshots taken but not written: no room in the event buffer, or the
        /// task's mappings could not be listed.
        user_stack_lost,
        /// Image id lookups refused because the session holds `image_ids_max` ids or 16 MiB
        /// of `images` text (`image_ids`), one per sample, frame, executable or mapping that
        /// needed a new id: a refused sample also counts in `sample_lost_no_mapping`, a frame
        /// in `bt_lost_no_mapping`; a refused mapping is left out of its USER_MAPS record, a
        /// refused executable is app cookie 0 in CTX_SWITCH.
        image_ids_refused,
        /// Sync passes queued early by a sampling interrupt whose CPU's snapshot pool fell to
        /// its low watermark (`user_stack`); a request while a pass was already queued is not
        /// counted.
        user_stack_sync_wake,
        /// Counter readings rejected as impossible; hardware models only. Sum of
        /// `stats/N/event_read_rejected`.
        event_read_rejected,
        /// Overflow handler calls in the intervals of rejected readings; hardware models
        /// only. Sum of `stats/N/event_read_rejected_overflows`.
        event_read_rejected_overflows,
    }
}

/// All counters: one [`CpuStats`] per possible CPU (index = CPU id), one [`CounterStats`] per
/// hardware counter (index = counter number; none in timer mode) and the [`GlobalStats`], which
/// `Stats` dereferences to.
pub(crate) struct Stats {
    /// `stats/cpuN/`, index = CPU id.
    pub(crate) cpu: KVec<CpuStats>,
    /// `stats/N/`, index = hardware counter number.
    pub(crate) counter: KVec<CounterStats>,
    /// `stats/`.
    pub(crate) global: GlobalStats,
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
            global: GlobalStats::new(),
        })
    }

    /// Zeroes every counter (legacy `oprofile_reset_stats`, on `enable=1`).
    pub(crate) fn reset(&self) {
        self.cpu.iter().for_each(CpuStats::reset);
        self.counter.iter().for_each(CounterStats::reset);
        self.global.reset();
    }
}

/// `stats.sample_lost_no_mm` for `stats.global.sample_lost_no_mm`, as in legacy's flat
/// `oprofile_stats`.
impl Deref for Stats {
    type Target = GlobalStats;

    fn deref(&self) -> &GlobalStats {
        &self.global
    }
}

/// The value of counter `item` of `table` in `group` (a file of `stats/`). Errors: `EINVAL`
/// when `group` is `None` (no such CPU or counter) or `item` is not in `table`.
pub(crate) fn read<S>(group: Option<&S>, table: &[Counter<S>], item: u8) -> Result<u64> {
    let (_, get) = table.get(usize::from(item)).ok_or(EINVAL)?;
    Ok(get(group.ok_or(EINVAL)?).load(Relaxed) as u64)
}

/// Adds one to `counter` (wrapping, as `atomic_inc`).
#[inline]
pub(crate) fn inc(counter: &Atomic<usize>) {
    counter.add(1, Relaxed);
}
