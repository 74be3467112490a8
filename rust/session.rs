// SPDX-License-Identifier: GPL-2.0

//! A profiling session: what exists while `buffer` is open (legacy `oprofile_setup` allocated
//! it: `alloc_cpu_buffers`, `alloc_event_buffer`). The sample path writes the per-CPU rings
//! ([`CpuBuffers`]), `buffer_sync` moves their samples to the event buffer and the image ids,
//! and the `buffer` reader drains the event buffer.

use crate::common::sync::KernelCode;
use crate::cpu_buffer::{self, CpuBuffers};
use crate::event_buffer::EventBuffer;
use crate::image_ids::ImageIds;
use crate::stats::Stats;
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};

/// Values of the settings files (`oprof.rs` keeps them; a session is allocated with them at
/// `buffer` open). Each is within its range (`oprof::*_RANGE`), so it fits a `usize`/`u32`.
#[derive(Clone, Copy)]
pub(crate) struct Settings {
    /// Event buffer size, words.
    pub(crate) buffer_size: u64,
    /// Words left free when the reader is woken.
    pub(crate) buffer_watershed: u64,
    /// Per-CPU ring size, samples.
    pub(crate) cpu_buffer_size: u64,
    /// Frames recorded per sample (0: no backtraces).
    pub(crate) backtrace_depth: u64,
    /// Bytes of user stack copied per sample with a backtrace (0: no snapshots;
    /// `user_stack`).
    pub(crate) user_stack_size: u64,
    /// Image ids the session may give (`image_ids_max`; [`ImageIds`]).
    pub(crate) image_ids_max: u64,
}

/// What exists while `buffer` is open: the buffers samples travel through.
#[pin_data]
pub(crate) struct Session {
    pub(crate) stats: Arc<Stats>,
    /// One ring per CPU id (`0..nr_cpu_ids`), where samples are taken.
    pub(crate) cpu: CpuBuffers,
    #[pin]
    pub(crate) event_buffer: Mutex<EventBuffer>,
    /// Image ids of this session (the `images` file). Lock order: `event_buffer` first.
    #[pin]
    pub(crate) images: Mutex<ImageIds>,
    /// The `buffer` reader waits here for [`EventBuffer::is_ready`].
    #[pin]
    pub(crate) reader_wait: CondVar,
}

impl Session {
    /// A session sized by `s`, counting into `stats`, whose kernel backtrace entries may point
    /// into `kernel_code`. Errors: `EINVAL` if `buffer_watershed >= buffer_size`; `ENOMEM`.
    pub(crate) fn new(
        stats: Arc<Stats>,
        s: &Settings,
        kernel_code: KernelCode,
    ) -> Result<Arc<Session>> {
        let eb = EventBuffer::new(s.buffer_size as usize, s.buffer_watershed as usize)?;
        let stack_words = cpu_buffer::stack_words(s.user_stack_size);
        let cpu = CpuBuffers::new(
            stats.clone(),
            s.cpu_buffer_size as u32,
            s.backtrace_depth as u32,
            stack_words,
            kernel_code,
        )?;
        let images = ImageIds::new(s.image_ids_max as u32)?;
        Arc::pin_init(
            pin_init!(Session {
                stats,
                cpu,
                event_buffer <- new_mutex!(eb, "oprofile::event_buffer"),
                images <- new_mutex!(images, "oprofile::images"),
                reader_wait <- new_condvar!("oprofile::buffer_wait"),
            }),
            GFP_KERNEL,
        )
    }
}
