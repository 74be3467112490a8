// SPDX-License-Identifier: GPL-2.0

//! A profiling session: what exists while `buffer` is open (legacy `oprofile_setup` allocated
//! it: `alloc_cpu_buffers`, `alloc_event_buffer`). The sample path writes the per-CPU rings
//! ([`CpuBuffers`]), `buffer_sync` moves their samples to the event buffer and the image ids,
//! and the `buffer` reader drains the event buffer.

use crate::common::sync::KernelCode;
use crate::cpu_buffer::CpuBuffers;
use crate::event_buffer::EventBuffer;
use crate::image_ids::ImageIds;
use crate::stats::Stats;
use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, Arc, CondVar, Mutex};

/// The sizes a session is allocated with (the settings files at `buffer` open).
#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    /// Event buffer size, words.
    pub(crate) buffer_size: usize,
    /// Words left free when the reader is woken.
    pub(crate) buffer_watershed: usize,
    /// Per-CPU ring size, samples.
    pub(crate) cpu_buffer_size: u32,
    /// Frames recorded per sample (0: no backtraces).
    pub(crate) backtrace_depth: u32,
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
    /// A session of `sizes` counting into `stats`, whose kernel backtrace entries may point into
    /// `kernel_code`. Errors: `EINVAL` if `buffer_watershed >= buffer_size`; `ENOMEM`.
    pub(crate) fn new(stats: Arc<Stats>, sizes: &Sizes, kernel_code: KernelCode) -> Result<Arc<Session>> {
        let eb = EventBuffer::new(sizes.buffer_size, sizes.buffer_watershed)?;
        let cpu = CpuBuffers::new(stats.clone(), sizes.cpu_buffer_size, sizes.backtrace_depth, kernel_code)?;
        let images = ImageIds::new()?;
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
