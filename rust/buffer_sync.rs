// SPDX-License-Identifier: GPL-2.0

//! Process-context pass from per-CPU buffers to the event buffer (legacy
//! `drivers/oprofile/buffer_sync.c`).
//!
//! [`sync_all`] drains every CPU's ring under the event buffer mutex (legacy `buffer_mutex`),
//! resolving each sample's location and encoding it with [`SyncPass`]. It runs from
//! [`SyncWork`] every [`SYNC_INTERVAL_MS`] while profiling, and through [`Flush`] on `dump`, on
//! stop, before MODULE_LOADED, and at once when a sampling interrupt finds its CPU's user-stack
//! snapshot pool low ([`Flush::kick`]: the pass is late, and the pool would run dry before the
//! next interval). Every pass runs on the module's workqueue, never in the task
//! that asked for it: naming an image (`d_path`) needs a filesystem root, and the last close of
//! `buffer` may run in a task that is exiting and has none left (`exit_fs` runs before the
//! final `fput`'s task work). Image paths are therefore always relative to the root of the
//! kernel's own threads (init's root), whoever reads `buffer`.
//!
//! Kernel samples and kernel backtrace entries carry the raw PC (legacy). User ones were
//! resolved to a mapped file and offset when sampled (`cpu_buffer`); here the file becomes an
//! image id ([`ImageIds`]): COOKIE_SWITCH carries the id, the sample word the file offset
//! `(vm_pgoff << PAGE_SHIFT) + pc - vm_start`; anonymous memory gives `NO_COOKIE` and the PC.
//! CTX_SWITCH carries the image id of the task's executable (0 for kernel threads). Samples the
//! interrupt could not resolve (their mm was being changed) are looked up now, under
//! `mmap_lock`; a PC in no mapping is then `sample_lost_no_mapping`, a task without mm
//! `sample_lost_no_mm`.
//!
//! A sample's user-stack snapshot (`user_stack`) follows its sample as USER_STACK, after the
//! task's USER_MAPS record when this pass over the CPU has not written one yet; the snapshot
//! buffer then goes back to its CPU's pool.

use crate::bridge::user::{self, Lookup};
use crate::bridge::QueueRef;
use crate::common::event::{Record, NO_COOKIE};
use crate::common::sync::{EventSink, FrameOutcome, Location, Outcome, SampleLoc, SyncPass};
use crate::cpu_buffer::Sample;
use crate::image_ids::ImageIds;
use crate::model::Poll;
use crate::profile_point::{define_profile_point, profile_point_time};
use crate::session::Session;
use crate::stats::{self, Stats};
use crate::user_stack::MapsWritten;
use kernel::fs::File;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{new_condvar, new_mutex, Arc, Completion, CondVar, Mutex};
use kernel::workqueue::{self, DelayedWork, Work};
use kernel::{impl_has_delayed_work, impl_has_work, new_delayed_work, new_work};

// Profile point: sync passes over all CPU buffers (`sync_all`).
define_profile_point!(SYNC_PASS, "sync_pass");

/// Period of the background sync while profiling, in milliseconds (legacy: HZ/10).
pub(crate) const SYNC_INTERVAL_MS: u32 = 100;

/// The image id of `file`, `None` when it cannot be given: a full table (counted,
/// [`ImageIds::id_or_refused`]), or `ENOMEM` or an absurd path (warned once).
fn image_id(images: &mut ImageIds, file: &File, stats: &Stats) -> Option<u32> {
    match images.id_or_refused(file, stats) {
        Ok(id) => id,
        Err(e) => {
            kernel::pr_warn_once!(
                "cannot name a sampled image (error {}); its samples count as no mapping\n",
                e.to_errno()
            );
            None
        }
    }
}

/// The user location of `file` at `offset`: its image id (no mapping when it has none).
fn file_location(images: &mut ImageIds, file: &File, offset: usize, stats: &Stats) -> Location {
    match image_id(images, file, stats) {
        Some(id) => Location::User {
            cookie: id.into(),
            offset: offset as u64,
        },
        None => Location::NoMapping,
    }
}

/// Where `s` points, given what the interrupt found (see the module docs). Process context.
fn locate(s: &Sample, images: &mut ImageIds, stats: &Stats) -> Location {
    let anon = Location::User {
        cookie: NO_COOKIE,
        offset: s.pc as u64,
    };
    match &s.loc {
        SampleLoc::Kernel => Location::Kernel,
        SampleLoc::Anon => anon,
        SampleLoc::File { file, offset } => file_location(images, file, *offset, stats),
        SampleLoc::Deferred { mm } => match user::lookup_mm(mm, s.pc) {
            // A backtrace entry must be a return address: in executable memory.
            Lookup::File { exec: false, .. } | Lookup::Anon { exec: false } if s.is_frame() => {
                Location::NotCode
            }
            Lookup::File { file, offset, .. } => file_location(images, &file, offset, stats),
            Lookup::Anon { .. } => anon,
            Lookup::NoMapping => Location::NoMapping,
            Lookup::NoMm | Lookup::Retry => Location::NoMm,
        },
    }
}

/// The image id of a sample's executable (0: none, or none could be given).
fn app_cookie(s: &Sample, images: &mut ImageIds, stats: &Stats) -> u64 {
    s.app
        .as_ref()
        .and_then(|app| image_id(images, app, stats))
        .map_or(NO_COOKIE, u64::from)
}

/// Drains all CPU buffers of `session` into its event buffer and wakes the reader if the buffer
/// became ready. Sleeps (takes the event buffer mutex): process context only.
pub(crate) fn sync_all(session: &Session) {
    profile_point_time!(SYNC_PASS);
    let mut eb = session.event_buffer.lock();
    let mut images = session.images.lock();
    let stats = &session.stats;
    for (cpu, buf) in session.cpu.iter().enumerate() {
        let mut pass = SyncPass::new(cpu as u32);
        let mut maps = MapsWritten::new();
        buf.drain(|s| {
            let loc = locate(s, &mut images, stats);
            if s.is_frame() {
                match pass.add_frame(s, loc, &mut *eb) {
                    FrameOutcome::Delivered | FrameOutcome::Orphan => {}
                    FrameOutcome::LostNoMapping => stats::inc(&stats.bt_lost_no_mapping),
                    FrameOutcome::LostOverflow | FrameOutcome::NotCode => {
                        if let Some(c) = stats.cpu.get(cpu) {
                            stats::inc(&c.backtrace_aborted);
                        }
                    }
                }
                return;
            }
            let outcome = pass.add_sample(s, loc, app_cookie(s, &mut images, stats), &mut *eb);
            if let Some(stack) = s.stack.take() {
                if outcome == Outcome::Delivered {
                    maps.write(&stack, &mut images, &mut *eb, stats);
                }
                buf.give_back(stack);
            }
            match outcome {
                Outcome::Delivered => {}
                Outcome::LostNoMm => stats::inc(&stats.sample_lost_no_mm),
                Outcome::LostNoMapping => stats::inc(&stats.sample_lost_no_mapping),
                Outcome::LostOverflow => stats::inc(&stats.event_lost_overflow),
            }
        });
    }
    drop(images);
    if eb.is_ready() {
        session.reader_wait.notify_all();
    }
}

/// A module reached `MODULE_STATE_COMING` while profiling: queued samples go out first (through
/// `flush`), then MODULE_LOADED (legacy `module_load_notify`), so samples before it precede it in
/// the stream. If the event buffer is full the record is dropped and logged.
pub(crate) fn module_loaded(session: &Session, flush: &Arc<Flush>) {
    flush.sync();
    let mut words = [0usize; 2];
    let n = Record::ModuleLoaded.encode(&mut words).unwrap_or(0);
    if !session.event_buffer.lock().write_group(&words[..n]) {
        pr_warn!("event buffer full: MODULE_LOADED record lost\n");
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
    queue: QueueRef,
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
        queue: QueueRef,
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
        let queue = this.queue.clone();
        let unqueued = match queue.with(|q| q.enqueue_delayed(this.clone(), delay)) {
            // Already queued: cannot happen (only `run` re-arms).
            Some(Err(_)) => true,
            Some(Ok(())) => false,
            // The queue's owner is gone: cannot happen (it outlives every session).
            None => true,
        };
        if unqueued {
            // Never leave `stop` waiting.
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

/// Requests and completions of [`Flush`] passes, counted since the session began.
struct FlushState {
    requested: u64,
    done: u64,
}

/// On-demand sync passes of one session, run on the module's workqueue: the caller of
/// [`Flush::sync`] waits until a pass that began after its call has finished. Used by `dump`,
/// stop (including the last close of `buffer` by an exiting or killed task) and MODULE_LOADED;
/// see the module docs for why a pass never runs in the caller's task.
///
/// # Invariants
///
/// `state.done <= state.requested`; a pass of `work` covers every request counted before it
/// read `requested`, and a request made while no pass is queued queues one.
#[pin_data]
pub(crate) struct Flush {
    session: Arc<Session>,
    queue: QueueRef,
    #[pin]
    state: Mutex<FlushState>,
    #[pin]
    finished: CondVar,
    #[pin]
    work: Work<Flush>,
}

impl_has_work! {
    impl HasWork<Self> for Flush { self.work }
}

impl Flush {
    /// Flush passes of `session` on `queue`. Errors: `ENOMEM`.
    pub(crate) fn new(session: Arc<Session>, queue: QueueRef) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Flush {
                session,
                queue,
                state <- new_mutex!(FlushState { requested: 0, done: 0 }, "oprofile::Flush::state"),
                finished <- new_condvar!("oprofile::Flush::finished"),
                work <- new_work!("oprofile::Flush::work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Moves every sample queued before this call to the event buffer (a [`sync_all`] on the
    /// workqueue) and waits for it, uninterruptibly: the caller may be an exiting task. Sleeps:
    /// process context, without the event buffer or images mutex held.
    pub(crate) fn sync(self: &Arc<Self>) {
        let ticket = {
            let mut s = self.state.lock();
            s.requested = s.requested.saturating_add(1);
            s.requested
        };
        // Already queued: that pass has not read `requested` yet and covers this request.
        // The queue's owner gone (cannot happen: it outlives every session): no pass will run.
        let queued = self.queue.with(|q| {
            let _ = q.enqueue(self.clone());
        });
        if queued.is_none() {
            return;
        }
        let mut s = self.state.lock();
        while s.done < ticket {
            self.finished.wait(&mut s);
        }
    }

    /// Queues a pass without waiting for it, unless one is queued already (which then drains
    /// the same samples); returns whether this call queued it. The sampling interrupt's request
    /// when a CPU's snapshot pool runs low (`cpu_buffer`): any context but NMI (enqueueing
    /// takes only the workqueue's raw spinlock, with interrupts off; nothing here sleeps).
    pub(crate) fn kick(this: &Arc<Self>) -> bool {
        // Already queued (`Err`: the reference comes back and drops here, not the last one),
        // or the queue's owner gone (`None`: cannot happen while a session runs).
        matches!(this.queue.with(|q| q.enqueue(this.clone())), Some(Ok(())))
    }
}

impl workqueue::WorkItem for Flush {
    type Pointer = Arc<Flush>;

    fn run(this: Arc<Flush>) {
        let covered = this.state.lock().requested;
        sync_all(&this.session);
        let mut s = this.state.lock();
        // INVARIANT: `covered` was read from `requested`, which only grows.
        s.done = s.done.max(covered);
        this.finished.notify_all();
    }
}
