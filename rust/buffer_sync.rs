// SPDX-License-Identifier: GPL-2.0

//! Process-context pass from per-CPU buffers to the event buffer (legacy
//! `drivers/oprofile/buffer_sync.c`).
//!
//! [`sync_all`] drains every CPU's ring under the event buffer mutex (legacy `buffer_mutex`),
//! resolving each sample's location and encoding it with [`SyncPass`]. It runs from
//! [`SyncWork`] every [`SYNC_INTERVAL_MS`] while profiling, on `dump`, and once more on stop.
//!
//! Kernel samples carry the raw PC (legacy). User samples are emitted as anonymous
//! (`NO_COOKIE`, offset = PC) until image resolution lands (issue 4); `sample_lost_no_mm` and
//! `sample_lost_no_mapping` are counted once it does.

use crate::common::event::NO_COOKIE;
use crate::common::sync::{CpuSample, Location, Outcome, SyncPass};
use crate::model::Poll;
use crate::oprof::Session;
use crate::stats;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{Arc, Completion};
use kernel::workqueue::{self, DelayedWork, Queue};
use kernel::{impl_has_delayed_work, new_delayed_work};

/// Period of the background sync while profiling, in milliseconds (legacy: HZ/10).
pub(crate) const SYNC_INTERVAL_MS: u32 = 100;

/// Where `s` points. Process context; the task may have exited since the sample was taken.
fn locate(s: &CpuSample) -> Location {
    if s.is_kernel() {
        Location::Kernel
    } else {
        Location::User { cookie: NO_COOKIE, offset: s.pc as u64 }
    }
}

/// Drains all CPU buffers of `session` into its event buffer and wakes the reader if the buffer
/// became ready. Sleeps (takes the event buffer mutex): process context only.
pub(crate) fn sync_all(session: &Session) {
    let mut eb = session.event_buffer.lock();
    let stats = &session.stats;
    for (cpu, buf) in session.cpu_buffers.iter().enumerate() {
        let mut pass = SyncPass::new(cpu as u32);
        buf.drain(|s| match pass.add_sample(s, locate(s), 0, &mut *eb) {
            Outcome::Delivered => {}
            Outcome::LostNoMm => stats::inc(&stats.sample_lost_no_mm),
            Outcome::LostNoMapping => stats::inc(&stats.sample_lost_no_mapping),
            Outcome::LostOverflow => stats::inc(&stats.event_lost_overflow),
        });
    }
    if eb.is_ready() {
        session.reader_wait.notify_all();
    }
}

/// The periodic sync while profiling: a self-rearming delayed work item, which also runs the
/// model's poller (counter folding) after each pass.
///
/// # Invariants
///
/// Once `running` is false, the item re-arms no more and completes `stopped` on its next run.
#[pin_data]
pub(crate) struct SyncWork {
    session: Arc<Session>,
    queue: &'static Queue,
    poller: Option<Arc<dyn Poll>>,
    running: Atomic<bool>,
    #[pin]
    stopped: Completion,
    #[pin]
    work: DelayedWork<SyncWork>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for SyncWork { self.work }
}

impl SyncWork {
    /// Starts syncing `session` (and polling `poller`) every [`SYNC_INTERVAL_MS`] on `queue`.
    /// Errors: `ENOMEM`.
    pub(crate) fn start(
        session: Arc<Session>,
        queue: &'static Queue,
        poller: Option<Arc<dyn Poll>>,
    ) -> Result<Arc<Self>> {
        let this = Arc::pin_init(
            pin_init!(SyncWork {
                session,
                queue,
                poller,
                running: Atomic::new(true),
                stopped <- Completion::new(),
                work <- new_delayed_work!("oprofile::SyncWork::work"),
            }),
            GFP_KERNEL,
        )?;
        Self::arm(this.clone());
        Ok(this)
    }

    fn arm(this: Arc<Self>) {
        let delay = kernel::time::msecs_to_jiffies(SYNC_INTERVAL_MS);
        let queue = this.queue;
        if let Err(this) = queue.enqueue_delayed(this, delay) {
            // Already queued: cannot happen (only `run` re-arms), but never leave `stop` waiting.
            this.stopped.complete_all();
        }
    }

    /// Stops the periodic sync and waits (at most about two intervals) until it has stopped.
    pub(crate) fn stop(&self) {
        self.running.store(false, Relaxed);
        self.stopped.wait_for_completion();
    }
}

impl workqueue::WorkItem for SyncWork {
    type Pointer = Arc<SyncWork>;

    fn run(this: Arc<SyncWork>) {
        if this.running.load(Relaxed) {
            sync_all(&this.session);
            if let Some(p) = &this.poller {
                p.poll();
            }
        }
        if this.running.load(Relaxed) {
            Self::arm(this);
        } else {
            this.stopped.complete_all();
        }
    }
}
