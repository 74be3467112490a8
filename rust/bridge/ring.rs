// SPDX-License-Identifier: GPL-2.0

//! A bounded lock-free ring of owned values between interrupt and process context: the storage
//! of a per-CPU sample buffer (legacy `drivers/oprofile/cpu_buffer.c` used the kernel's
//! `ring_buffer`, which has no Rust binding and stores bytes, not values that own references).
//!
//! One producer at a time writes at `head`, one consumer at a time reads from `tail` up to
//! `published`; neither waits for the other. A producer may queue several values and publish
//! them together ([`Ring::push_pending`], [`Ring::publish`]): a sample and its backtrace
//! entries reach the consumer in one piece, never split by a sync pass that ran between them.
//! The intended producer is one CPU's sampling interrupt and the consumer the sync pass under
//! the event buffer mutex, but the type does not rely on that: a producer or consumer that
//! finds another one active (a nested interrupt, or a second CPU) is turned away
//! ([`Ring::push`] hands the value back, [`Ring::drain`] returns at once), so the API is safe
//! for any caller. Index arithmetic is `common::ring` (host-tested).

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
/// - Entries, `head` and `published` are written only by the holder of `producing`; entries are
///   read and `tail` written only by the holder of `consuming` (or through `&mut self`).
/// - Ring positions run `tail <= published <= head` (in ring order). Entries at `tail..head` are
///   initialised (each written before `head` passes it); the others are uninitialised (never
///   written, or moved out before `tail` passed them with release ordering). The consumer reads
///   only `tail..published`: `published` is stored with release ordering after the entries
///   before it were written.
pub(crate) struct Ring<T> {
    entries: KVVec<UnsafeCell<MaybeUninit<T>>>,
    capacity: u32,
    head: Atomic<u32>,
    published: Atomic<u32>,
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
            published: Atomic::new(0),
            tail: Atomic::new(0),
            producing: Atomic::new(false),
            consuming: Atomic::new(false),
        })
    }

    /// Whether one more value fits now (the consumer can only make more room meanwhile).
    pub(crate) fn has_room(&self) -> bool {
        ring::has_room(
            self.head.load(Relaxed),
            self.tail.load(Acquire),
            self.capacity,
        )
    }

    /// Appends `v` and publishes it with every value queued before it. Never waits; any
    /// context, including hard interrupts. Errors: `v` back when the ring is full or another
    /// producer is active (a nested interrupt or a second CPU).
    pub(crate) fn push(&self, v: T) -> core::result::Result<(), T> {
        self.produce(v, true)
    }

    /// Appends `v` without publishing it: the consumer sees it after the next [`Ring::publish`]
    /// or [`Ring::push`]. Errors as [`Ring::push`].
    pub(crate) fn push_pending(&self, v: T) -> core::result::Result<(), T> {
        self.produce(v, false)
    }

    /// Publishes every value queued so far. Never waits; returns false (publishing nothing) when
    /// another producer is active, which publishes them instead.
    pub(crate) fn publish(&self) -> bool {
        if self.producing.cmpxchg(false, true, Acquire).is_err() {
            return false;
        }
        // INVARIANT: every entry before `head` was written before this release store.
        self.published.store(self.head.load(Relaxed), Release);
        self.producing.store(false, Release);
        true
    }

    fn produce(&self, v: T, publish: bool) -> core::result::Result<(), T> {
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
                let next = ring::advance(head, self.capacity);
                // INVARIANT: the entry is initialised before `head` passes it, and before
                // `published` does (release).
                self.head.store(next, Relaxed);
                if publish {
                    self.published.store(next, Release);
                }
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
        let published = self.published.load(Acquire);
        let tail = self.tail.load(Relaxed);
        let v = match self.entries.get(ring::slot(tail, self.capacity)) {
            Some(cell) if tail != published => {
                // SAFETY: As in `drain`: we hold `consuming` and `tail` is in `tail..published`;
                // the entry is moved out once, before `tail` passes it.
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

    /// Values published and not yet taken (`0..=capacity`): exact for the consumer between its
    /// own calls, a lower bound for anyone else (the producer may publish more meanwhile).
    pub(crate) fn published_len(&self) -> u32 {
        ring::len(
            self.published.load(Acquire),
            self.tail.load(Acquire),
            self.capacity,
        )
    }

    /// Moves every queued value, oldest first, to `f`; returns how many. Returns 0 at once if
    /// another consumer is active. Never waits (`f` may sleep if the caller's context may).
    pub(crate) fn drain(&self, mut f: impl FnMut(T)) -> usize {
        if self.consuming.cmpxchg(false, true, Acquire).is_err() {
            return 0;
        }
        let published = self.published.load(Acquire);
        let mut tail = self.tail.load(Relaxed);
        let mut n = 0usize;
        while tail != published {
            let Some(cell) = self.entries.get(ring::slot(tail, self.capacity)) else {
                break;
            };
            // SAFETY: We hold `consuming`; `tail` is in `tail..published`, so the entry is
            // initialised, written before the release store of `published` we acquired, and the
            // producer does not write it until `tail` moves past it (type invariants).
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
        // Drop what is still queued, published or not (values may own references). No
        // producer is active: `&mut self`.
        // INVARIANT: `published` moves to `head`, every entry before it being initialised.
        self.published.store(self.head.load(Relaxed), Relaxed);
        self.drain(drop);
    }
}
