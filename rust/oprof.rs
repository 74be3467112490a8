// SPDX-License-Identifier: GPL-2.0

//! The profiler: settings and the setup/start/stop/shutdown state machine (legacy
//! `drivers/oprofile/oprof.c` and `oprofile_files.c`).
//!
//! States: *idle* (settings writable) → `buffer` open: *set up* ([`Session`] allocated, model
//! set up) → `enable=1`: *running* (model sampling, periodic sync) → `enable=0`: set up →
//! `buffer` closed: idle. All transitions and setting changes happen under one mutex (legacy
//! `start_mutex`/`oprofilefs_lock`); the sample path never takes it.

use crate::bridge::{OwnedQueue, QueueRef};
use crate::buffer_sync::{self, Flush, SyncWork};
use crate::common::counter::{CounterConfig, Field};
use crate::common::sync::KernelCode;
use crate::cpu_buffer;
use crate::event_buffer::WORD;
use crate::kprof::Kprof;
use crate::model::{CounterTotal, Model};
use crate::session::{Session, Settings};
use crate::stats::Stats;
use crate::user_stack::USER_STACK_SIZE_MAX;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::time::{Instant, Monotonic};
use kernel::uaccess::UserSliceWriter;

/// Legacy defaults (`oprofile_files.c`), restored at every mount.
pub(crate) const DEFAULT_BUFFER_SIZE: u64 = 131072;
pub(crate) const DEFAULT_BUFFER_WATERSHED: u64 = 32768;
pub(crate) const DEFAULT_CPU_BUFFER_SIZE: u64 = 8192;

/// Accepted ranges; values outside get `EINVAL`. `buffer_size`/`buffer_watershed` in words
/// (64 MiB of words at most on 32-bit), `cpu_buffer_size` in samples per CPU.
pub(crate) const BUFFER_SIZE_RANGE: (u64, u64) = (1024, 1 << 24);
pub(crate) const BUFFER_WATERSHED_RANGE: (u64, u64) = (0, 1 << 24);
pub(crate) const CPU_BUFFER_SIZE_RANGE: (u64, u64) = (16, 1 << 20);
/// Image ids a session may give (`image_ids_max`, ours): each pins a file and holds its path
/// (up to 4 KiB) until `buffer` closes.
pub(crate) const IMAGE_IDS_MAX_RANGE: (u64, u64) = (1, 1 << 20);
/// Default `image_ids_max`: far above a system's executables and libraries, and at most 64 MiB
/// of paths.
pub(crate) const DEFAULT_IMAGE_IDS_MAX: u64 = 16384;
/// Backtrace depth limit (frames; `common::sync`).
pub(crate) use crate::common::sync::BACKTRACE_DEPTH_MAX;

/// A writable setting of the root directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Setting {
    BufferSize,
    BufferWatershed,
    CpuBufferSize,
    BacktraceDepth,
    UserStackSize,
    ImageIdsMax,
}

/// The legacy default settings.
const DEFAULT_SETTINGS: Settings = Settings {
    buffer_size: DEFAULT_BUFFER_SIZE,
    buffer_watershed: DEFAULT_BUFFER_WATERSHED,
    cpu_buffer_size: DEFAULT_CPU_BUFFER_SIZE,
    backtrace_depth: 0,
    user_stack_size: 0,
    image_ids_max: DEFAULT_IMAGE_IDS_MAX,
};

struct Control {
    model: KBox<dyn Model>,
    settings: Settings,
    /// Counter directories `0/ .. N-1/` (empty in timer mode). Kept across mounts, as legacy.
    counters: KVec<CounterConfig>,
    session: Option<Arc<Session>>,
    /// On-demand sync passes of `session` (`Some` exactly when `session` is).
    flush: Option<Arc<Flush>>,
    sync: Option<Arc<SyncWork>>,
    /// Start of the running profiling period.
    period_start: Option<Instant<Monotonic>>,
    /// Length of the last finished profiling period, in ns.
    period_ns: u64,
    /// The `images` text of the last closed session, shown until the next `buffer` open.
    last_images: KVVec<u8>,
}

/// The profiler instance (one per loaded module).
///
/// # Invariants
///
/// `started` is true exactly while `ctl.sync` is `Some`, and then `ctl.session` is `Some`.
#[pin_data]
pub(crate) struct Oprofile {
    cpu_type: &'static CStr,
    describe: &'static str,
    /// Whether the model records backtraces (`backtrace_depth` may be non-zero).
    has_backtrace: bool,
    kernel_code: KernelCode,
    stats: Arc<Stats>,
    started: Atomic<bool>,
    buffer_busy: Atomic<bool>,
    /// The sync passes' workqueue; dropped after the last session ended.
    queue: OwnedQueue,
    #[pin]
    ctl: Mutex<Control>,
    #[pin]
    kprof: Kprof,
}

impl Oprofile {
    /// A profiler using `model`, idle, with legacy default settings.
    pub(crate) fn new(
        model: KBox<dyn Model>,
        kprof: impl PinInit<Kprof, Error>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Oprofile {
            cpu_type: model.cpu_type(),
            describe: model.describe(),
            has_backtrace: model.has_backtrace(),
            kernel_code: cpu_buffer::kernel_code(),
            stats: Arc::new(Stats::new(kernel::cpu::nr_cpu_ids(), model.num_counters())?, GFP_KERNEL)?,
            started: Atomic::new(false),
            buffer_busy: Atomic::new(false),
            queue: OwnedQueue::new()?,
            ctl <- new_mutex!(
                Control {
                    counters: {
                        let mut v = KVec::with_capacity(model.num_counters(), GFP_KERNEL)?;
                        for _ in 0..model.num_counters() {
                            v.push(CounterConfig::DEFAULT, GFP_KERNEL)?;
                        }
                        v
                    },
                    model,
                    settings: DEFAULT_SETTINGS,
                    session: None,
                    flush: None,
                    sync: None,
                    period_start: None,
                    period_ns: 0,
                    last_images: KVVec::new(),
                },
                "oprofile::ctl"
            ),
            kprof <- kprof,
        }? Error)
    }

    /// The model's description and `cpu_type`.
    pub(crate) fn model(&self) -> ModelInfo {
        ModelInfo {
            cpu_type: self.cpu_type,
            describe: self.describe,
        }
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Number of counter directories.
    pub(crate) fn num_counters(&self) -> usize {
        self.ctl.lock().counters.len()
    }

    /// Reads file `field` of counter directory `counter`. Errors: `EINVAL` for a bad counter.
    pub(crate) fn counter(&self, counter: usize, field: Field) -> Result<u64> {
        self.ctl
            .lock()
            .counters
            .get(counter)
            .map(|c| field.get(c))
            .ok_or(EINVAL)
    }

    /// Writes `value` (within [`Field::range`]) to file `field` of counter directory `counter`.
    ///
    /// Errors: `EBUSY` while running; `EINVAL` for a bad counter (events and counts are checked
    /// against the model's table at the next `buffer` open). On error nothing changes.
    pub(crate) fn set_counter(&self, counter: usize, field: Field, value: u64) -> Result {
        let mut ctl = self.ctl.lock();
        if self.is_started() {
            return Err(EBUSY);
        }
        let c = ctl.counters.get_mut(counter).ok_or(EINVAL)?;
        field.set(c, value);
        Ok(())
    }

    /// `N/total` and `N/time_running`: what counter `counter` counted on all CPUs during the
    /// current profiling period (live) or the last one; zeros before the first.
    pub(crate) fn counter_total(&self, counter: usize) -> CounterTotal {
        self.ctl
            .lock()
            .model
            .counter_total(counter)
            .unwrap_or_default()
    }

    /// `stats/period_ns`: length of the current profiling period so far, or of the last one,
    /// in ns; 0 before the first.
    pub(crate) fn period_ns(&self) -> u64 {
        let ctl = self.ctl.lock();
        match &ctl.period_start {
            Some(t) => u64::try_from(t.elapsed().as_nanos()).unwrap_or(0),
            None => ctl.period_ns,
        }
    }

    pub(crate) fn is_started(&self) -> bool {
        self.started.load(Relaxed)
    }

    /// A reference to the workqueue for a session's work items. The queue is destroyed when
    /// `self` is dropped, after every work item was stopped (no session exists at unload: the
    /// module cannot unload while `buffer` is open).
    fn queue(&self) -> QueueRef {
        self.queue.reference()
    }

    /// Restores the legacy defaults (every mount re-initialises them, as legacy 3.x+ did),
    /// unless a session is in progress.
    pub(crate) fn reset_settings(&self) {
        let mut ctl = self.ctl.lock();
        if ctl.session.is_none() {
            ctl.settings = DEFAULT_SETTINGS;
        }
    }

    /// Reads a setting.
    pub(crate) fn setting(&self, which: Setting) -> u64 {
        let s = self.ctl.lock().settings;
        match which {
            Setting::BufferSize => s.buffer_size,
            Setting::BufferWatershed => s.buffer_watershed,
            Setting::CpuBufferSize => s.cpu_buffer_size,
            Setting::BacktraceDepth => s.backtrace_depth,
            Setting::UserStackSize => s.user_stack_size,
            Setting::ImageIdsMax => s.image_ids_max,
        }
    }

    /// The values setting `which` accepts, inclusive (see the `*_RANGE` constants; only 0 for
    /// `backtrace_depth` and `user_stack_size` when the model has no backtrace).
    pub(crate) fn setting_range(&self, which: Setting) -> (u64, u64) {
        match which {
            Setting::BufferSize => BUFFER_SIZE_RANGE,
            Setting::BufferWatershed => BUFFER_WATERSHED_RANGE,
            Setting::CpuBufferSize => CPU_BUFFER_SIZE_RANGE,
            Setting::BacktraceDepth => (
                0,
                if self.has_backtrace {
                    BACKTRACE_DEPTH_MAX
                } else {
                    0
                },
            ),
            Setting::UserStackSize => (
                0,
                if self.has_backtrace {
                    USER_STACK_SIZE_MAX
                } else {
                    0
                },
            ),
            Setting::ImageIdsMax => IMAGE_IDS_MAX_RANGE,
        }
    }

    /// Writes `value` (within [`Self::setting_range`]) to a setting. Errors: `EBUSY` while
    /// running; then nothing changes. A value takes effect at the next `buffer` open.
    pub(crate) fn set_setting(&self, which: Setting, value: u64) -> Result {
        let mut ctl = self.ctl.lock();
        if self.is_started() {
            return Err(EBUSY);
        }
        let s = &mut ctl.settings;
        match which {
            Setting::BufferSize => s.buffer_size = value,
            Setting::BufferWatershed => s.buffer_watershed = value,
            Setting::CpuBufferSize => s.cpu_buffer_size = value,
            Setting::BacktraceDepth => s.backtrace_depth = value,
            Setting::UserStackSize => s.user_stack_size = value,
            Setting::ImageIdsMax => s.image_ids_max = value,
        }
        Ok(())
    }

    /// Opening `buffer` (legacy `oprofile_setup`): allocates the buffers and sets the model up.
    ///
    /// Errors: `EBUSY` if `buffer` is already open; `EINVAL` if `buffer_watershed >=
    /// buffer_size`; `ENOMEM`; the model's setup error. On error nothing stays allocated.
    pub(crate) fn setup(&self) -> Result {
        if self.buffer_busy.cmpxchg(false, true, Acquire).is_err() {
            return Err(EBUSY);
        }
        let r = (|| {
            let mut ctl = self.ctl.lock();
            let session = Session::new(self.stats.clone(), &ctl.settings, self.kernel_code)?;
            let flush = Flush::new(session.clone(), self.queue())?;
            let Control {
                model, counters, ..
            } = &mut *ctl;
            model.setup(counters)?;
            ctl.session = Some(session);
            ctl.flush = Some(flush);
            ctl.last_images = KVVec::new();
            Ok(())
        })();
        if r.is_err() {
            self.buffer_busy.store(false, Release);
        }
        r
    }

    /// Closing `buffer` (legacy `oprofile_stop` + `oprofile_shutdown`). Safe in any task that
    /// may close a file, including one that is exiting or was killed: the final sync runs on the
    /// workqueue (see [`Flush`]).
    pub(crate) fn shutdown(&self) {
        let mut ctl = self.ctl.lock();
        self.stop_locked(&mut ctl);
        ctl.flush = None;
        if let Some(session) = ctl.session.take() {
            ctl.model.shutdown();
            ctl.last_images = session.images.lock().take_text();
        }
        drop(ctl);
        self.buffer_busy.store(false, Release);
    }

    /// `enable` = non-zero. Errors: `EINVAL` if `buffer` is not open; the model's start error.
    /// Starting twice is not an error. Resets the stats.
    pub(crate) fn start(&self) -> Result {
        let mut ctl = self.ctl.lock();
        let Some(session) = ctl.session.clone() else {
            return Err(EINVAL);
        };
        if ctl.sync.is_some() {
            return Ok(());
        }
        self.stats.reset();
        // Samples may queue a pass when a snapshot pool runs low (`cpu_buffer`); cleared at
        // stop, which breaks the cycle session -> rings -> flush -> session.
        session.cpu.set_sync_wake(ctl.flush.clone());
        if let Err(e) = ctl.model.start(&session) {
            session.cpu.set_sync_wake(None);
            return Err(e);
        }
        let sync = match SyncWork::start(session.clone(), self.queue(), ctl.model.poller()) {
            Ok(sync) => sync,
            Err(e) => {
                ctl.model.stop();
                session.cpu.set_sync_wake(None);
                return Err(e);
            }
        };
        ctl.sync = Some(sync);
        ctl.period_start = Some(Instant::now());
        self.started.store(true, Relaxed);
        Ok(())
    }

    /// `enable` = 0: stops sampling, moves every queued sample to the event buffer and wakes the
    /// reader. Idempotent.
    pub(crate) fn stop(&self) {
        let mut ctl = self.ctl.lock();
        self.stop_locked(&mut ctl);
    }

    fn stop_locked(&self, ctl: &mut Control) {
        let Some(sync) = ctl.sync.take() else {
            return;
        };
        // The periodic work first: it may poll the model, which `stop` tears down. Samples
        // taken meanwhile wait in the CPU buffers for the final sync below.
        sync.stop();
        drop(sync);
        ctl.model.stop();
        if let Some(session) = &ctl.session {
            session.cpu.set_sync_wake(None);
        }
        if let Some(t) = ctl.period_start.take() {
            ctl.period_ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(0);
        }
        self.started.store(false, Relaxed);
        if let (Some(session), Some(flush)) = (&ctl.session, &ctl.flush) {
            Self::flush_and_wake(session, flush);
        }
    }

    /// Moves every queued sample to the event buffer and wakes the reader, even if the buffer
    /// is below its watershed.
    fn flush_and_wake(session: &Session, flush: &Arc<Flush>) {
        flush.sync();
        session.event_buffer.lock().mark_ready();
        session.reader_wait.notify_all();
    }

    /// The open session and its flush passes, if `buffer` is open.
    fn session(&self) -> Option<(Arc<Session>, Arc<Flush>)> {
        let ctl = self.ctl.lock();
        Some((ctl.session.clone()?, ctl.flush.clone()?))
    }

    /// `dump`: moves queued samples to the event buffer and wakes the reader, even if empty.
    /// (Legacy only woke the reader; flushing the CPU buffers first loses nothing.)
    pub(crate) fn dump(&self) {
        if let Some((session, flush)) = self.session() {
            Self::flush_and_wake(&session, &flush);
        }
    }

    /// A copy of the `images` file's text: the open session's image ids, else the last
    /// session's (empty before the first). Copied so that no lock is held while the reader's
    /// buffer is written (a slow or faulting user copy must not stall the sync pass).
    /// Errors: `ENOMEM`.
    pub(crate) fn images_text(&self) -> Result<KVVec<u8>> {
        let ctl = self.ctl.lock();
        let mut text = KVVec::new();
        match &ctl.session {
            // Lock order ctl -> images, as in `stop_locked` (ctl -> event buffer -> images).
            Some(s) => text.extend_from_slice(s.images.lock().text(), GFP_KERNEL)?,
            None => text.extend_from_slice(&ctl.last_images, GFP_KERNEL)?,
        }
        Ok(text)
    }

    /// A kernel module is coming: while profiling, emit MODULE_LOADED (see
    /// [`buffer_sync::module_loaded`]).
    pub(crate) fn module_coming(&self) {
        let running = {
            let ctl = self.ctl.lock();
            match (&ctl.sync, &ctl.session, &ctl.flush) {
                (Some(_), Some(session), Some(flush)) => Some((session.clone(), flush.clone())),
                _ => None,
            }
        };
        if let Some((session, flush)) = running {
            buffer_sync::module_loaded(&session, &flush);
        }
    }

    /// `read` of `buffer`, see [`crate::event_buffer`]. Errors: `EINVAL` (count not a multiple
    /// of the word size, or no session), `EINTR`, `EFAULT`.
    pub(crate) fn read_buffer(&self, out: &mut UserSliceWriter, count: usize) -> Result<usize> {
        if count % WORD != 0 {
            return Err(EINVAL);
        }
        if count == 0 {
            return Ok(0);
        }
        let session = self.ctl.lock().session.clone().ok_or(EINVAL)?;
        let mut eb = session.event_buffer.lock();
        while !eb.is_ready() {
            if session.reader_wait.wait_interruptible(&mut eb) {
                return Err(EINTR);
            }
        }
        eb.read_to_user(out, count / WORD)
    }
}

/// kprof (`kprof/` files).
impl AsRef<Kprof> for Oprofile {
    fn as_ref(&self) -> &Kprof {
        &self.kprof
    }
}

impl crate::bridge::ModuleEvents for Oprofile {
    fn module_coming(&self) {
        Oprofile::module_coming(self);
    }
}

/// Model identity for logs and the `cpu_type` file.
pub(crate) struct ModelInfo {
    cpu_type: &'static CStr,
    describe: &'static str,
}

impl ModelInfo {
    pub(crate) fn cpu_type(&self) -> &'static CStr {
        self.cpu_type
    }
    pub(crate) fn describe(&self) -> &'static str {
        self.describe
    }
}
