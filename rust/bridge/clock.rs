// SPDX-License-Identifier: GPL-2.0

//! The NMI-safe monotonic clock (`ktime_get_mono_fast_ns`; the kernel crate's
//! `Instant::<Monotonic>::now` is `ktime_get`, which may spin in an NMI that interrupted a
//! timekeeping update). A leaf: it imports nothing of the module, so the profile points (which
//! `bridge.rs` reads from their section) time sections through it without an import circle.

use kernel::bindings;

/// CLOCK_MONOTONIC in ns, read with `ktime_get_mono_fast_ns`: safe in any context, NMIs
/// included (a timekeeping update an NMI interrupted cannot make it spin), monotonic per CPU.
pub(crate) fn clock_ns() -> u64 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::ktime_get_mono_fast_ns() }
}
