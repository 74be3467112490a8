// SPDX-License-Identifier: GPL-2.0

//! A bounded lock-free ring of owned values between interrupt and process context: the storage
//! of a per-CPU sample buffer (legacy `drivers/oprofile/cpu_buffer.c` used the kernel's
//! `ring_buffer`, which has no Rust binding and stores bytes, not values that own references).
//!
//! One producer at a time writes at `head`, one consumer at a time reads from `tail`; neither
//! waits for the other. The intended producer is one CPU's sampling interrupt and the consumer
//! the sync pass under the event buffer mutex, but the type does not rely on that: a producer
//! or consumer that finds another one active (a nested interrupt, or a second CPU) is turned
//! away ([`Ring::push`] hands the value back, [`Ring::drain`] returns at once), so the API is
//! safe for any caller. Index arithmetic is `common::ring` (host-tested).

use crate::common::ring;
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

/// A ring of up to `capacity` values of `T`.
///
/// # Invariants
///
/// - `capacity == entries.len()`, in `1..=ring::MAX_CAPACITY`.
/// - Entries and `head` are written only by the holder of `producing`; entries are read and
///   `tail` written only by the holder of `consuming` (or through `&mut self`).
/// - Entries at ring positions `tail..head` are initialised (written before `head` is published
///   with release ordering); the others are uninitialised (never written, or moved out before
///   `tail` passed them with release ordering).
pub(crate) struct Ring<T> {
    entries: KVVec<UnsafeCell<MaybeUninit<T>>>,
    capacity: u32,
    head: Atomic<u32>,
    tail: Atomic<u32>,
    producing: Atomic<bool>,
    consuming: Atomic<bool>,
}

// SAFETY: Values move in on the producer's thread and out on the consumer's, so `T: Send`
// suffices; entries are never shared between threads (one holder of `producing`/`consuming`
// at a time, handing over through `head`/`tail` with acquire/release ordering).
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: As above: `&Ring` only moves values in and out, never hands out `&T` across threads.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// An empty ring of `capacity` values.
    ///
    /// Errors: `EINVAL` if `capacity` is 0 or above [`ring::MAX_CAPACITY`]; `ENOMEM`.
    pub(crate) fn new(capacity: u32) -> Result<Self> {
        if capacity == 0 || capacity > ring::MAX_CAPACITY {
            return Err(EINVAL);
        }
        let mut entries = KVVec::with_capacity(capacity as usize, GFP_KERNEL)?;
        for _ in 0..capacity {
            entries.push(UnsafeCell::new(MaybeUninit::uninit()), GFP_KERNEL)?;
        }
        Ok(Ring {
            entries,
            capacity,
            head: Atomic::new(0),
            tail: Atomic::new(0),
            producing: Atomic::new(false),
            consuming: Atomic::new(false),
        })
    }

    /// Whether one more value fits now (the consumer can only make more room meanwhile).
    pub(crate) fn has_room(&self) -> bool {
        ring::has_room(self.head.load(Relaxed), self.tail.load(Acquire), self.capacity)
    }

    /// Appends `v`. Never waits; any context, including hard interrupts. Errors: `v` back when
    /// the ring is full or another producer is active (a nested interrupt or a second CPU).
    pub(crate) fn push(&self, v: T) -> core::result::Result<(), T> {
        if self.producing.cmpxchg(false, true, Acquire).is_err() {
            return Err(v);
        }
        let head = self.head.load(Relaxed);
        let r = match self.entries.get(ring::slot(head, self.capacity)) {
            Some(cell) if ring::has_room(head, self.tail.load(Acquire), self.capacity) => {
                // SAFETY: We hold `producing`, so no other thread writes entries; the slot at
                // `head` is outside `tail..head` (there is room), so the consumer does not read it
                // and it holds nothing (type invariants): writing does not leak or race.
                unsafe { (*cell.get()).write(v) };
                // INVARIANT: the entry is initialised before `head` publishes it.
                self.head.store(ring::advance(head, self.capacity), Release);
                Ok(())
            }
            _ => Err(v),
        };
        self.producing.store(false, Release);
        r
    }

    /// Takes the oldest queued value. Never waits; any context. `None` when the ring is empty
    /// or another consumer is active.
    pub(crate) fn pop(&self) -> Option<T> {
        if self.consuming.cmpxchg(false, true, Acquire).is_err() {
            return None;
        }
        let head = self.head.load(Acquire);
        let tail = self.tail.load(Relaxed);
        let v = match self.entries.get(ring::slot(tail, self.capacity)) {
            Some(cell) if tail != head => {
                // SAFETY: As in `drain`: we hold `consuming` and `tail` is in `tail..head`; the
                // entry is moved out once, before `tail` passes it.
                let v = unsafe { (*cell.get()).assume_init_read() };
                // INVARIANT: the entry was moved out before `tail` passes it.
                self.tail.store(ring::advance(tail, self.capacity), Release);
                Some(v)
            }
            _ => None,
        };
        self.consuming.store(false, Release);
        v
    }

    /// Moves every queued value, oldest first, to `f`; returns how many. Returns 0 at once if
    /// another consumer is active. Never waits (`f` may sleep if the caller's context may).
    pub(crate) fn drain(&self, mut f: impl FnMut(T)) -> usize {
        if self.consuming.cmpxchg(false, true, Acquire).is_err() {
            return 0;
        }
        let head = self.head.load(Acquire);
        let mut tail = self.tail.load(Relaxed);
        let mut n = 0usize;
        while tail != head {
            let Some(cell) = self.entries.get(ring::slot(tail, self.capacity)) else {
                break;
            };
            // SAFETY: We hold `consuming`; `tail` is in `tail..head`, so the entry is initialised
            // and the producer does not write it until `tail` moves past it (type invariants).
            // It is moved out once: `tail` passes it before the next read.
            let v = unsafe { (*cell.get()).assume_init_read() };
            tail = ring::advance(tail, self.capacity);
            // INVARIANT: the entry was moved out before `tail` passes it.
            self.tail.store(tail, Release);
            f(v);
            n = n.saturating_add(1);
        }
        self.consuming.store(false, Release);
        n
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // Drop what is still queued (values may own references).
        self.drain(drop);
    }
}
