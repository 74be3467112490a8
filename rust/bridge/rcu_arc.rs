// SPDX-License-Identifier: GPL-2.0

//! An optional [`Arc`] that a hard interrupt handler can borrow while process context replaces
//! it: the sampling interrupt's way to reach the session's sync pass ([`crate::buffer_sync`])
//! without owning it (the session owns the rings the interrupt writes, so an owning reference
//! from there would be a cycle). The kernel crate (7.3) has no RCU-protected pointer.

use core::ptr;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{rcu, Arc, ArcBorrow};

/// An optional `Arc<T>`, read under the RCU read lock from any context but NMI, replaced from
/// process context.
///
/// # Invariants
///
/// `ptr` is null or `Arc::into_raw` of an `Arc<T>` this value owns (one reference). A pointer
/// replaced by [`RcuArc::set`] keeps its reference until an RCU grace period has passed, so a
/// reader that loaded it under the RCU read lock has finished with it first.
pub(crate) struct RcuArc<T: Send + Sync> {
    ptr: Atomic<*const T>,
}

impl<T: Send + Sync> RcuArc<T> {
    /// Empty.
    pub(crate) fn new() -> Self {
        // INVARIANT: null.
        RcuArc {
            ptr: Atomic::new(ptr::null()),
        }
    }

    /// Replaces the value with `v` (`None`: empty) and drops the old one after an RCU grace
    /// period (`synchronize_rcu`) when there was one. Sleeps: process context.
    pub(crate) fn set(&self, v: Option<Arc<T>>) {
        let new = v.map_or(ptr::null(), Arc::into_raw);
        // INVARIANT: `new` is null or an `Arc` reference handed to `self`.
        let old = self.ptr.xchg(new, Release);
        if old.is_null() {
            return;
        }
        // Readers that loaded `old` did so under the RCU read lock: wait for them.
        rcu::synchronize_rcu();
        // SAFETY: `old` came from `Arc::into_raw` and its reference was owned by `self` (type
        // invariants); it was taken out of `ptr` above and no reader holds it any more.
        let old = unsafe { Arc::from_raw(old) };
        drop(old);
    }

    /// Calls `f` with the value, if any, under the RCU read lock (`f` must not sleep). Any
    /// context but NMI.
    pub(crate) fn with<R>(&self, f: impl FnOnce(ArcBorrow<'_, T>) -> R) -> Option<R> {
        let _guard = rcu::read_lock();
        let p = self.ptr.load(Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` (type invariants) and its reference is dropped
        // only after a grace period that follows its removal from `ptr`, which cannot end while
        // `_guard` (held until `f` returns, which the borrow's lifetime cannot outlive) is held.
        let value = unsafe { ArcBorrow::from_raw(p) };
        Some(f(value))
    }
}

impl<T: Send + Sync> Drop for RcuArc<T> {
    fn drop(&mut self) {
        let p = self.ptr.xchg(ptr::null(), Relaxed);
        if !p.is_null() {
            // SAFETY: `p` came from `Arc::into_raw` and `self` owned its reference (type
            // invariants); `&mut self` means no reader borrows it.
            let value = unsafe { Arc::from_raw(p) };
            drop(value);
        }
    }
}
