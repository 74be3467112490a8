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
//! 5. [`oprofilefs`]: the filesystem users mount on `/dev/oprofile`.
//!
//! [`oprof`] holds the setup/start/stop/shutdown state machine and the settings; [`stats`] the
//! counters under `stats/`; [`common`] the pure logic also built by host `cargo test`.
//!
//! Beside the sample path: [`kprof`] (Plan 9's kernel PC histogram, `kprof/kpctl` and
//! `kprof/kpdata`) and [`profile_point`] (timed sections of this module, `profile_points`).

use kernel::prelude::*;

// Shared with the host crate, which uses the decoder and helpers the module does not.
#[allow(dead_code, unreachable_pub)]
#[path = "common/mod.rs"]
mod common;

mod buffer_sync;
mod cpu_buffer;
mod event_buffer;
mod image_ids;
mod kprof;
mod model;
mod oprof;
mod oprofilefs;
mod profile_point;
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

/// The loaded module: the profiler instance, published for the filesystem callbacks, and the
/// filesystem registration.
///
/// # Invariants
///
/// The instance published by [`oprof::publish`] is `*self.oprofile`, from before `fs` and
/// `modules` are registered until after they are unregistered.
struct OprofileModule {
    fs: Option<oprofilefs::Registration>,
    modules: Option<buffer_sync::ModuleNotifier>,
    oprofile: Pin<KBox<oprof::Oprofile>>,
}

impl kernel::Module for OprofileModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        profile_point::check_registry()?;
        let hz = module_parameters::timer_hz.value();
        let model = model::select(module_parameters::timer.value(), hz)?;
        let kprof = kprof::Kprof::new(module_parameters::kprof_hz.value(), module_parameters::kprof_granularity.value())?;
        let oprofile = KBox::pin_init(oprof::Oprofile::new(model, kprof), GFP_KERNEL)?;
        oprof::publish(&oprofile);
        let modules = buffer_sync::ModuleNotifier::new();
        let fs = modules.and_then(|m| Ok((m, oprofilefs::Registration::new()?)));
        let (modules, fs) = match fs {
            Ok(r) => r,
            Err(e) => {
                oprof::unpublish();
                return Err(e);
            }
        };
        pr_info!("using {} mode, cpu_type '{}'\n", oprofile.model().describe(), oprofile.model().cpu_type().to_str().unwrap_or("?"));
        Ok(OprofileModule { fs: Some(fs), modules: Some(modules), oprofile })
    }
}

impl Drop for OprofileModule {
    fn drop(&mut self) {
        // No superblock exists (a mount pins the module), so after unregistering no file
        // operation can reach the instance; then it may be unpublished and freed.
        drop(self.fs.take());
        drop(self.modules.take());
        oprof::unpublish();
        pr_info!("unloaded ({} mode)\n", self.oprofile.model().describe());
    }
}
