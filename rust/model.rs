// SPDX-License-Identifier: GPL-2.0

//! Sample sources (legacy `struct oprofile_operations`).
//!
//! A model is chosen once at module init. Every method except [`Model::cpu_type`] and
//! [`Model::describe`] is called with the profiler's control mutex held, in process context,
//! in the legacy order: `create_files` at mount, `setup` at `buffer` open, `start`/`stop` on
//! `enable`, `shutdown` at `buffer` close.

pub(crate) mod timer;

use crate::oprof::Session;
use crate::oprofilefs::Dir;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A sample source.
pub(crate) trait Model: Send + Sync {
    /// The `cpu_type` string (legacy userspace names, e.g. `timer`, `arm/armv7`).
    fn cpu_type(&self) -> &'static CStr;
    /// Human-readable name for the kernel log.
    fn describe(&self) -> &'static str;
    /// Adds the model's files (e.g. counter directories) at mount time.
    fn create_files(&self, _root: &Dir) -> Result {
        Ok(())
    }
    /// Validates and prepares the configuration at `buffer` open; an error fails the open.
    fn setup(&mut self) -> Result {
        Ok(())
    }
    /// Undoes `setup` at `buffer` close.
    fn shutdown(&mut self) {}
    /// Starts delivering samples into `session` on every online CPU.
    fn start(&mut self, session: &Arc<Session>) -> Result;
    /// Stops delivering samples; when it returns no sample handler is running.
    fn stop(&mut self);
    /// Whether `backtrace_depth` > 0 is supported.
    fn has_backtrace(&self) -> bool {
        false
    }
}

/// Chooses the model at init: timer mode (`timer=1`, or no hardware model; hardware models
/// come with the PMU support). Errors: `EINVAL` for a bad `timer_hz`; `ENOMEM`.
pub(crate) fn select(force_timer: bool, timer_hz: u32) -> Result<KBox<dyn Model>> {
    let why = if force_timer { "timer=1" } else { "no hardware model" };
    let m = timer::TimerModel::new(timer_hz)?;
    pr_info!("oprofile: timer mode at {} Hz per CPU ({})\n", timer_hz, why);
    Ok(KBox::new(m, GFP_KERNEL)?)
}
