// SPDX-License-Identifier: GPL-2.0

//! Per-CPU sample rings (legacy `drivers/oprofile/cpu_buffer.c`).
//!
//! Each CPU owns one ring of [`CpuSample`] entries, `cpu_buffer_size` entries long. The producer
//! is that CPU's sampling interrupt (`log_sample`); the consumer is `buffer_sync` in process
//! context, serialised by the event buffer's mutex. No lock is taken on the producer side, so a
//! sample can never deadlock or wait; a full ring drops the sample and counts it in
//! `stats/cpuN/sample_lost_overflow`.

use crate::common::ring;
use crate::common::sync::{CpuSample, IS_KERNEL};
use crate::stats::{self, CpuStats};
use core::cell::UnsafeCell;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

/// One CPU's ring.
///
/// # Invariants
///
/// - `capacity == entries.len()`, in `1..=ring::MAX_CAPACITY`.
/// - Only code running on this buffer's CPU with interrupts disabled (the sampling interrupt)
///   writes entries and `head`: sampling interrupts do not nest on one CPU.
/// - Only the holder of the event buffer mutex reads entries and writes `tail`.
/// - Entries in `tail..head` (ring positions) are initialised by the producer before `head`
///   is published with release ordering.
pub(crate) struct CpuBuffer {
    entries: KVVec<UnsafeCell<CpuSample>>,
    capacity: u32,
    head: Atomic<u32>,
    tail: Atomic<u32>,
}

// SAFETY: Entries are accessed by one producer and one consumer at a time, handing over through
// `head`/`tail` with acquire/release ordering (see the type invariants).
unsafe impl Sync for CpuBuffer {}
// SAFETY: `CpuSample` is plain data; the buffer owns its storage.
unsafe impl Send for CpuBuffer {}

impl CpuBuffer {
    /// Allocates a ring of `capacity` entries (`cpu_buffer_size`).
    ///
    /// Errors: `EINVAL` if `capacity` is 0 or above [`ring::MAX_CAPACITY`]; `ENOMEM`.
    pub(crate) fn new(capacity: u32) -> Result<Self> {
        if capacity == 0 || capacity > ring::MAX_CAPACITY {
            return Err(EINVAL);
        }
        let mut entries = KVVec::with_capacity(capacity as usize, GFP_KERNEL)?;
        for _ in 0..capacity {
            entries.push(UnsafeCell::new(CpuSample::default()), GFP_KERNEL)?;
        }
        Ok(CpuBuffer { entries, capacity, head: Atomic::new(0), tail: Atomic::new(0) })
    }

    /// Records a sample (legacy `log_sample`): counts it received, then stores it or counts it
    /// lost to overflow. `pc` is `None` when no valid PC was available (`sample_invalid_eip`).
    ///
    /// Must be called on this buffer's CPU from its sampling interrupt (type invariants).
    pub(crate) fn log_sample(
        &self,
        stats: &CpuStats,
        pc: Option<usize>,
        is_kernel: bool,
        event: u32,
        pid: i32,
        tgid: i32,
    ) {
        stats::inc(&stats.sample_received);
        let Some(pc) = pc else {
            stats::inc(&stats.sample_invalid_eip);
            return;
        };
        let head = self.head.load(Relaxed);
        let tail = self.tail.load(Acquire);
        if !ring::has_room(head, tail, self.capacity) {
            stats::inc(&stats.sample_lost_overflow);
            return;
        }
        let flags = if is_kernel { IS_KERNEL } else { 0 };
        let slot = ring::slot(head, self.capacity);
        if let Some(cell) = self.entries.get(slot) {
            // SAFETY: `slot` is outside `tail..head`, so the consumer does not read it (type
            // invariants), and only this CPU's interrupt writes entries.
            unsafe { *cell.get() = CpuSample { pc, event, flags, pid, tgid } };
        }
        self.head.store(ring::advance(head, self.capacity), Release);
    }

    /// Hands every queued sample, oldest first, to `f`, then frees their slots.
    ///
    /// The caller must hold the event buffer mutex (the single-consumer invariant).
    pub(crate) fn drain(&self, mut f: impl FnMut(&CpuSample)) -> usize {
        let head = self.head.load(Acquire);
        let mut tail = self.tail.load(Relaxed);
        let mut n = 0;
        while tail != head {
            if let Some(cell) = self.entries.get(ring::slot(tail, self.capacity)) {
                // SAFETY: `tail` is in `tail..head`: initialised and not written by the producer
                // until `tail` moves past it (type invariants).
                f(unsafe { &*cell.get() });
            }
            tail = ring::advance(tail, self.capacity);
            n += 1;
        }
        self.tail.store(tail, Release);
        n
    }
}
