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

use kernel::prelude::*;
use kernel::sync::Arc;

// Shared with the host crate, which uses the decoder and helpers the module does not.
#[allow(dead_code, unreachable_pub)]
#[path = "common/mod.rs"]
mod common;

mod bridge;
mod buffer_sync;
mod cpu_buffer;
mod event_buffer;
mod files;
mod image_ids;
mod kprof;
mod model;
mod oprof;
mod oprofilefs;
mod profile_point;
mod session;
mod stats;

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

/// The loaded module: the filesystem and module-notifier registrations, each holding a
/// reference to the profiler instance they call.
///
/// Fields drop in declaration order: the registrations end (no superblock exists at unload, as a
/// mount pins the module, and no notifier callback runs after unregistering) before the last
/// reference to the instance goes.
struct OprofileModule {
    _fs: oprofilefs::Registration<oprof::Oprofile>,
    _modules: bridge::ModuleNotifier<oprof::Oprofile>,
    describe: &'static str,
}

impl kernel::Module for OprofileModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        profile_point::check_registry()?;
        let hz = module_parameters::timer_hz.value();
        let model = model::select(module_parameters::timer.value(), hz)?;
        let kprof = kprof::Kprof::new(module_parameters::kprof_hz.value(), module_parameters::kprof_granularity.value())?;
        let oprofile = Arc::pin_init(oprof::Oprofile::new(model, kprof), GFP_KERNEL)?;
        let modules = bridge::ModuleNotifier::new(oprofile.clone())?;
        let fs = oprofilefs::Registration::new(oprofile)?;
        let info = fs.ctx().model();
        pr_info!("using {} mode, cpu_type '{}'\n", info.describe(), info.cpu_type().to_str().unwrap_or("?"));
        Ok(OprofileModule { _fs: fs, _modules: modules, describe: info.describe() })
    }
}

impl Drop for OprofileModule {
    fn drop(&mut self) {
        pr_info!("unloaded ({} mode)\n", self.describe);
    }
}
