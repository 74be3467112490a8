// SPDX-License-Identifier: GPL-2.0

//! Host build of the module's pure logic: the files under `rust/common/` are compiled here
//! unchanged, so `cargo test` tests exactly what `oprofile.ko` runs.
// The kernel has no `std`; tests may use it.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

#[path = "../../../rust/common/aarch64.rs"]
pub mod aarch64;
#[path = "../../../rust/common/arm.rs"]
pub mod arm;
#[path = "../../../rust/common/counter.rs"]
pub mod counter;
#[path = "../../../rust/common/event.rs"]
pub mod event;
#[path = "../../../rust/common/events.rs"]
pub mod events;
#[path = "../../../rust/common/image.rs"]
pub mod image;
#[path = "../../../rust/common/kprof.rs"]
pub mod kprof;
#[path = "../../../rust/common/parse.rs"]
pub mod parse;
#[path = "../../../rust/common/profile_point.rs"]
pub mod profile_point;
#[path = "../../../rust/common/ring.rs"]
pub mod ring;
#[path = "../../../rust/common/sync.rs"]
pub mod sync;
