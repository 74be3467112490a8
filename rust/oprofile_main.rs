// SPDX-License-Identifier: GPL-2.0

//! oprofile-rs: the OProfile kernel driver, in Rust.
//!
//! Crate root: declares the module and wires the model, the profiler state and oprofilefs.
//! The sample's journey, one file per stage (legacy `drivers/oprofile/` layout):
//!
//! 1. [`model`]: where samples come from (`oprofile_operations`): [`model::perf`] (hardware
//!    events through perf counters) or [`model::timer`] (hrtimers).
//! 2. [`cpu_buffer`]: per-CPU rings, written in interrupt context; user PCs resolved to
//!    (file, offset) there, backtraces taken.
//! 3. [`buffer_sync`]: process-context pass, samples to event words; files become image ids
//!    ([`image_ids`], the `images` file).
//! 4. [`event_buffer`]: the word stream and the `buffer` file.
//! 5. [`oprofilefs`]: the filesystem users mount on `/dev/oprofile`, a small abstraction (a
//!    trait per kind of file, `file_operations` generated per kind); [`files`]: its tree.
//!
//! [`oprof`] holds the setup/start/stop/shutdown state machine and the settings; [`stats`] the
//! counters under `stats/`; [`common`] the pure logic also built by host `cargo test`.
//!
//! Beside the sample path: [`kprof`] (Plan 9's kernel PC histogram, `kprof/kpctl` and
//! `kprof/kpdata`) and [`profile_point`] (timed sections of this module, `profile_points`).
//!
//! `unsafe` lives in [`bridge`] (the kernel's C beyond the kernel crate) and [`oprofilefs`]
//! (the filesystem's vtables) only: the compiler refuses it anywhere else.

#![deny(unsafe_code)]

use kernel::prelude::*;

// Shared with the host crate, which uses the decoder and helpers the module does not.
#[allow(dead_code, unreachable_pub)]
#[forbid(unsafe_code)]
#[path = "common/mod.rs"]
mod common;

#[allow(unsafe_code)]
mod bridge;
mod buffer_sync;
mod cpu_buffer;
mod event_buffer;
mod files;
mod image_ids;
mod kprof;
mod model;
mod oprof;
#[allow(unsafe_code)]
mod oprofilefs;
mod profile_point;
mod session;
mod stats;
mod user_stack;

module! {
    type: OprofileModule,
    name: "oprofile",
    authors: ["oprofile-rs developers"],
    description: "OProfile system profiler: oprofilefs, per-CPU sample buffers, legacy event buffer",
    license: "GPL",
    alias: ["fs-oprofilefs"],
    params: {
        timer: bool {
            default: false,
            description: "Use timer mode even where a hardware (perf PMU) model exists (legacy oprofile.timer=1)",
        },
        timer_hz: u32 {
            default: 1000,
            description: "Timer-mode sampling rate per CPU in Hz (1..=100000, default 1000)",
        },
        kprof_hz: u32 {
            default: 1000,
            description: "kprof clock ticks per CPU per second (1..=100000, default 1000)",
        },
        kprof_granularity: u32 {
            default: 0,
            description: "kprof slot size in bytes: 0 = one instruction (4 on ARM), or a larger power of two",
        },
    },
}

/// The loaded module, initialised in place: it owns the filesystem registration, which owns
/// the module-notifier registration, which owns the profiler instance both call.
///
/// Unloading undoes this inside out: the filesystem is unregistered (no superblock exists at
/// unload, as a mount pins the module), then the notifier (no callback runs after), then the
/// instance goes.
#[pin_data(PinnedDrop)]
struct OprofileModule {
    #[pin]
    fs: oprofilefs::Registration<oprof::Oprofile, bridge::ModuleNotifier<oprof::Oprofile>>,
    describe: &'static str,
}

impl kernel::InPlaceModule for OprofileModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let model = profile_point::check_registry().and_then(|()| {
            model::select(
                module_parameters::timer.value(),
                module_parameters::timer_hz.value(),
            )
        });
        let kprof = kprof::Kprof::new(
            module_parameters::kprof_hz.value(),
            module_parameters::kprof_granularity.value(),
        );
        try_pin_init!(Self {
            describe: model.as_ref().map_or("", |m| m.describe()),
            fs <- oprofilefs::Registration::new(bridge::ModuleNotifier::new(oprof::Oprofile::new(model?, kprof?))),
        }? Error)
        .pin_chain(|this| {
            let info = this.fs.ctx().model();
            pr_info!("using {} mode, cpu_type '{}'\n", info.describe(), info.cpu_type().to_str().unwrap_or("?"));
            Ok(())
        })
    }
}

// `#[pinned_drop]` writes the `unsafe impl` pin-init requires; nothing unsafe is ours.
#[allow(unsafe_code)]
#[pinned_drop]
impl PinnedDrop for OprofileModule {
    fn drop(self: Pin<&mut Self>) {
        pr_info!("unloaded ({} mode)\n", self.describe);
    }
}
