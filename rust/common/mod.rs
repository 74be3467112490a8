// SPDX-License-Identifier: GPL-2.0

//! Pure logic shared by the `oprofile` module and the host tools.
//!
//! Nothing here names a `kernel::` item or allocates: the module compiles these files into
//! `oprofile.ko`, and the host crate `oprofile-common` compiles the very same files (through
//! `#[path]`) so `cargo test` exercises the code the kernel runs.
//!
//! - [`aarch64`]: A64 call instructions and frame records.
//! - [`arm`]: ARM and Thumb call instructions (is a return address after a call?).
//! - [`counter`]: counter directory values, their validation, the no-interrupt loss estimate.
//! - [`event`]: the legacy event-buffer word format (`ESCAPE_CODE` records) and its decoder.
//! - [`image`]: lines of the `images` file (image id, escaped path).
//! - [`kprof`]: the Plan 9 kprof histogram: `kpctl` commands, `kpdata` layout and byte order.
//! - [`events`]: the PMU models' hardware event tables (`cpu_type`, events, counters, minimums).
//! - [`profile_point`]: the `profile_points` table, its commands and its parser.
//! - [`parse`]: strict parsing of numbers written to oprofilefs files.
//! - [`ring`]: index math of the per-CPU sample rings.
//! - [`sync`]: the `buffer_sync` state machine that turns CPU-buffer samples into event words.

pub mod aarch64;
pub mod arm;
pub mod counter;
pub mod event;
pub mod events;
pub mod image;
pub mod kprof;
pub mod parse;
pub mod profile_point;
pub mod ring;
pub mod sync;
