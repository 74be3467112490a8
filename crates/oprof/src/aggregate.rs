//! Streaming input of `oprof report`: decodes a buffer stream block by block and counts its
//! samples by key while it reads, so memory is bounded by the number of distinct samples
//! (counter, call chain, address spaces and words), not by the length of the stream.
//!
//! The decoder state ([`SampleCtx`], [`ChainState`]) carries across records, so a block cannot
//! be decoded alone in general. The module starts every sync pass over a CPU's buffer with
//! CPU_SWITCH followed by the full context (mode and task) before the first sample
//! (`rust/common/sync.rs`, legacy `add_cpu_switch` + `op_cpu_buffer_reset`). Blocks are
//! therefore split at such a *resync point* ([`find_split`]): the state after it does not depend
//! on what came before, except TRACE_BEGIN's pending flag, which is assumed clear when the
//! prefix does not set it. Segments between resync points are decoded in parallel, each
//! starting from its assumed state; afterwards every segment's end state and alignment is
//! checked against the next segment's assumption. If any check fails (a stream that does not
//! follow the pattern, or a candidate that was not a real CPU_SWITCH record), the whole stream
//! is decoded again sequentially, so the result is always the sequential decoder's.
//!
//! [`inputs`] is the load pipeline every view starts with: it checks the stream, counts it here
//! and builds the [`crate::resolve::Resolver`] for it.

pub mod inputs;

use crate::input::stream::{self, shift, ChainState, Role, SampleCtx};
use crate::resolve::unwind::fpchain::Prover;
use crate::resolve::unwind::ImageTables;
use crate::resolve::{FastState, Space};
use anyhow::{anyhow, Context, Result};
use oprofile_common::event::{code, escape_code, DecodeError, Decoder, Record, MAX_RECORD_WORDS};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

/// Decoder state at a record boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    pub ctx: SampleCtx,
    pub chain: ChainState,
}

impl State {
    fn apply(&mut self, rec: &Record) -> Option<Role> {
        self.ctx.apply(rec);
        self.chain.apply(rec)
    }
}

/// Hash maps of the hot path (keys are not attacker-chosen in a way that matters here, and
/// iteration order never reaches the output: every table is sorted before it is printed).
type FastMap<K, V> = HashMap<K, V, FastState>;

/// Sample counts by key, from one or more segments of a stream.
///
/// A key is `[event, flags, app, entry...]`: the sample's counter (event word); flags bit 0:
/// traced (TRACE_BEGIN), bit 1: `app` holds the task's executable cookie (only with
/// [`Options::app`], for flame graphs), bit 2: with [`Options::task`], three words follow `app`:
/// CPU, pid and tid (`u64::MAX`: unknown); then the sample and its frames, innermost first, each
/// as an index into [`Counts::spaces`] and the stream word (packed as `space << 32 | word`
/// when words are 4 bytes, else two words).
#[derive(Debug, Default)]
pub struct Counts {
    pub keys: FastMap<Box<[u64]>, u64>,
    /// Address spaces of the entries, interned.
    pub spaces: Vec<Space>,
    space_ids: FastMap<Space, u32>,
    /// Samples per CPU (samples before any CPU_SWITCH are not counted here).
    pub per_cpu: BTreeMap<u64, u64>,
    /// MODULE_LOADED records.
    pub module_loaded: u64,
    /// Words per entry in a key (1 or 2).
    pub stride: usize,
}

/// One decoded key of [`Counts::keys`].
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    pub event: u64,
    pub traced: bool,
    /// The task's executable cookie, with [`Options::app`].
    pub app_cookie: Option<u64>,
    /// CPU, pid (the task's tgid) and tid (its pid), with [`Options::task`].
    pub task: Option<[Option<u64>; 3]>,
    entries: &'a [u64],
    stride: usize,
}

impl<'a> Key<'a> {
    /// The sample (first) and its frames, innermost first: (space index, word).
    pub fn entries(&self) -> impl Iterator<Item = (u32, u64)> + 'a {
        let stride = self.stride;
        self.entries.chunks_exact(stride).map(move |c| {
            if stride == 1 {
                ((c[0] >> 32) as u32, c[0] & 0xffff_ffff)
            } else {
                (c[0] as u32, c[1])
            }
        })
    }

    /// The packed form of entry (space, word), a cache key for its resolution.
    pub fn packed_entries(&self) -> impl Iterator<Item = &'a [u64]> + 'a {
        self.entries.chunks_exact(self.stride)
    }
}

impl Counts {
    fn new(word_bytes: usize) -> Counts {
        Counts {
            stride: if word_bytes == 4 { 1 } else { 2 },
            ..Counts::default()
        }
    }

    /// Decodes a key of [`Counts::keys`].
    pub fn key<'a>(&self, k: &'a [u64]) -> Key<'a> {
        let flags = k.get(1).copied().unwrap_or(0);
        let task = (flags & 4 != 0).then(|| {
            let w = |i: usize| k.get(i).copied().filter(|&v| v != u64::MAX);
            [w(3), w(4), w(5)]
        });
        let first = if task.is_some() { 6 } else { 3 };
        Key {
            event: k.first().copied().unwrap_or(0),
            traced: flags & 1 != 0,
            app_cookie: (flags & 2 != 0).then(|| k.get(2).copied().unwrap_or(0)),
            task,
            entries: k.get(first..).unwrap_or_default(),
            stride: self.stride,
        }
    }

    /// Shortens call chains: `keep(spaces, key, samples)` says how many entries of the key's
    /// chain (the sample first) to keep; keys that become equal are counted together.
    pub fn truncate_chains(&mut self, mut keep: impl FnMut(&[Space], &Key<'_>, u64) -> usize) {
        let keys = std::mem::take(&mut self.keys);
        let mut out = FastMap::with_capacity_and_hasher(keys.len(), Default::default());
        for (k, n) in keys {
            let key = self.key(&k);
            let total = key.entries.len() / self.stride;
            let kept = keep(&self.spaces, &key, n).min(total);
            let k = if kept < total {
                let header = k.len() - key.entries.len();
                k[..header + kept * self.stride].into()
            } else {
                k
            };
            *out.entry(k).or_default() += n;
        }
        self.keys = out;
    }

    fn space_id(&mut self, s: Space) -> u32 {
        if let Some(&i) = self.space_ids.get(&s) {
            return i;
        }
        let i = self.spaces.len() as u32;
        self.spaces.push(s);
        self.space_ids.insert(s, i);
        i
    }
}

/// What the keys hold besides counter, call chain and spaces.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The task's executable cookie (`SampleCtx::app_cookie`), which flame graphs root at.
    pub app: bool,
    /// The sample's CPU, pid and tid (pprof labels).
    pub task: bool,
}

/// Decodes one segment of a stream into [`Counts`].
struct Segment<'a> {
    counts: &'a mut Counts,
    opts: Options,
    word_bytes: usize,
    state: State,
    /// Space index of the current context (`None`: to be looked up again).
    space: Option<u32>,
    /// Spaces looked up last, most recent first.
    recent: [Option<(Space, u32)>; 4],
    /// The key of the sample being decoded (empty: none).
    key: Vec<u64>,
    /// Samples on `state.ctx.cpu` not yet added to `per_cpu`.
    cpu_run: u64,
    /// Words converted and not yet decoded: between calls of `feed`, the words of an
    /// incomplete record at the end of the input so far.
    buf: Vec<u64>,
    /// Global index of `buf[0]` (the next word to decode).
    pos: usize,
    /// The decode error that stopped the segment (word indexes are global).
    stop: Option<DecodeError>,
    /// Words of the longest record the module writes: a USER_STACK/USER_MAPS header claiming
    /// more stops the segment (as a truncated record) instead of holding the stream in `buf`.
    longest: usize,
}

/// The length in words of the USER_MAPS/USER_STACK record at the start of `w` (an escape),
/// when its header is in `w`.
fn variable_record_words(w: &[u64], esc: u64, word_bytes: usize) -> Option<usize> {
    let regs = oprofile_common::event::user_regs(word_bytes) as u64;
    let rec = match *w.get(..4)? {
        [e, c, tgid, n] if e == esc && c == code::USER_MAPS as u64 => Record::UserMaps { tgid, n },
        [e, c, n, _] if e == esc && c == code::USER_STACK as u64 => Record::UserStack { n, regs },
        _ => return None,
    };
    Some(rec.words())
}

/// Words converted per step (fits the L2 cache).
const STEP_WORDS: usize = 1 << 14;

impl<'a> Segment<'a> {
    fn new(
        counts: &'a mut Counts,
        opts: Options,
        word_bytes: usize,
        pos: usize,
        state: State,
    ) -> Self {
        Segment {
            counts,
            opts,
            word_bytes,
            state,
            space: None,
            recent: [None; 4],
            key: Vec::with_capacity(64),
            cpu_run: 0,
            buf: Vec::with_capacity(STEP_WORDS + MAX_RECORD_WORDS),
            longest: crate::resolve::unwind::expanding::longest_record(word_bytes),
            pos,
            stop: None,
        }
    }

    /// Decodes the little-endian words in `bytes` (whole words).
    fn feed(&mut self, bytes: &[u8]) {
        for step in bytes.chunks(STEP_WORDS * self.word_bytes) {
            if self.stop.is_some() {
                return;
            }
            let mut words = std::mem::take(&mut self.buf);
            match self.word_bytes {
                4 => words.extend(
                    step.chunks_exact(4)
                        .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
                ),
                _ => {
                    words.extend(step.chunks_exact(8).map(|c| {
                        u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
                    }))
                }
            }
            let done = self.decode(&words);
            words.drain(..done);
            self.buf = words;
        }
    }

    /// Decodes the records of `w` (from global index `pos`); returns the words decoded (the
    /// rest is an incomplete record, or follows a decode error).
    fn decode(&mut self, w: &[u64]) -> usize {
        let esc = escape_code(self.word_bytes);
        let n = w.len();
        let mut i = 0;
        while i + 1 < n {
            let w0 = w[i];
            if w0 != esc {
                // A Sample record, the common case: decoded here (a frame changes no state).
                let event = w[i + 1];
                if self.state.chain.is_frame(event) {
                    self.push_entry(w0);
                } else {
                    self.record(&Record::Sample { pc: w0, event });
                }
                i += 2;
                continue;
            }
            // An escape: decoded by the legacy decoder (the window holds any fixed-size record;
            // a USER_MAPS/USER_STACK record, normally unwound before, needs its whole length).
            let window =
                variable_record_words(&w[i..], esc, self.word_bytes).unwrap_or(MAX_RECORD_WORDS);
            match Decoder::new(&w[i..n.min(i.saturating_add(window))], self.word_bytes).next() {
                Some(Ok((_, rec))) => {
                    self.record(&rec);
                    i += rec.words();
                }
                // A record longer than any is not awaited: `buf` would hold the rest.
                Some(Err(DecodeError::Truncated { need, .. })) if need > self.longest => {
                    let e = DecodeError::Truncated { word: 0, need };
                    self.stop = Some(shift(e, self.pos + i));
                    break;
                }
                Some(Err(DecodeError::Truncated { .. })) | None => break,
                Some(Err(e)) => {
                    self.stop = Some(shift(e, self.pos + i));
                    break;
                }
            }
        }
        self.pos += i;
        i
    }

    fn record(&mut self, rec: &Record) {
        if let Record::CpuSwitch { .. } = rec {
            self.flush_cpu();
        }
        let role = self.state.apply(rec);
        match *rec {
            Record::Sample { pc, event } => match role {
                Some(Role::Frame) => self.push_entry(pc),
                Some(Role::Sample { traced }) => {
                    self.flush();
                    if self.state.ctx.cpu.is_some() {
                        self.cpu_run += 1;
                    }
                    let app = self.state.ctx.app_cookie.filter(|_| self.opts.app);
                    let task = self.opts.task;
                    let flags =
                        u64::from(traced) | u64::from(app.is_some()) << 1 | u64::from(task) << 2;
                    self.key.extend([event, flags, app.unwrap_or(0)]);
                    if task {
                        let c = &self.state.ctx;
                        self.key
                            .extend([c.cpu, c.tgid, c.pid].map(|v| v.unwrap_or(u64::MAX)));
                    }
                    self.push_entry(pc);
                }
                None => {}
            },
            Record::ModuleLoaded => self.counts.module_loaded += 1,
            Record::CpuSwitch { .. }
            | Record::KernelEnter
            | Record::KernelExit
            | Record::CtxSwitch { .. }
            | Record::CookieSwitch { .. } => self.space = None,
            Record::TraceBegin | Record::UserMaps { .. } | Record::UserStack { .. } => {}
        }
    }

    #[inline]
    fn push_entry(&mut self, word: u64) {
        let space = match self.space {
            Some(s) => s,
            None => self.current_space(),
        };
        if self.counts.stride == 1 {
            self.key.push(u64::from(space) << 32 | (word & 0xffff_ffff));
        } else {
            self.key.extend([u64::from(space), word]);
        }
    }

    /// Interns the space of the current context; the last few are kept at hand, as chains
    /// switch back and forth between the kernel and a few images.
    #[cold]
    fn current_space(&mut self) -> u32 {
        let sp = Space::of_sample(&self.state.ctx);
        let id = match self
            .recent
            .iter()
            .position(|r| matches!(r, Some((s, _)) if *s == sp))
        {
            Some(i) => {
                let hit = self.recent[i];
                self.recent.copy_within(..i, 1);
                self.recent[0] = hit;
                hit.map_or(0, |h| h.1)
            }
            None => {
                let id = self.counts.space_id(sp);
                self.recent.rotate_right(1);
                self.recent[0] = Some((sp, id));
                id
            }
        };
        self.space = Some(id);
        id
    }

    /// Counts the sample being decoded.
    fn flush(&mut self) {
        if self.key.is_empty() {
            return;
        }
        match self.counts.keys.get_mut(self.key.as_slice()) {
            Some(n) => *n += 1,
            None => {
                self.counts.keys.insert(self.key.as_slice().into(), 1);
            }
        }
        self.key.clear();
    }

    fn flush_cpu(&mut self) {
        if let (Some(cpu), n @ 1..) = (self.state.ctx.cpu, self.cpu_run) {
            *self.counts.per_cpu.entry(cpu).or_default() += n;
        }
        self.cpu_run = 0;
    }

    /// Ends the segment: counts the last sample; returns the end state.
    fn finish(mut self) -> SegmentEnd {
        self.flush();
        self.flush_cpu();
        let pending = match (self.stop, self.buf.is_empty()) {
            (None, false) => match Decoder::new(&self.buf, self.word_bytes).next() {
                Some(Err(e)) => Some(shift(e, self.pos)),
                _ => None,
            },
            _ => None,
        };
        SegmentEnd {
            state: self.state,
            end: self.pos,
            stop: self.stop,
            pending,
        }
    }
}

/// How a segment ended.
#[derive(Debug, Clone, Copy)]
struct SegmentEnd {
    state: State,
    /// Global index of the word after the last decoded record.
    end: usize,
    stop: Option<DecodeError>,
    /// The input ended inside a record (the stream's last record if this is the last segment;
    /// otherwise the segment boundary is not a record boundary).
    pending: Option<DecodeError>,
}

/// Finds a resync point near the start of `words`: a CPU_SWITCH record followed, before any
/// sample, by KERNEL_ENTER/EXIT and CTX_SWITCH (in any order). Returns the index of the word
/// after the record that completes the context, and the decoder state there (TRACE_BEGIN's
/// pending flag is assumed clear unless the prefix sets it). A candidate may be a false match
/// inside another record: [`read`] checks every assumption afterwards.
pub fn find_split(words: &[u64], word_bytes: usize) -> Option<(usize, State)> {
    let esc = escape_code(word_bytes);
    let cpu_switch = code::CPU_SWITCH as u64;
    (0..words.len().saturating_sub(1))
        .filter(|&i| words[i] == esc && words[i + 1] == cpu_switch)
        .find_map(|i| resync_at(&words[i..], word_bytes).map(|(n, st)| (i + n, st)))
}

fn resync_at(words: &[u64], word_bytes: usize) -> Option<(usize, State)> {
    let n = stream::context_prefix(words, word_bytes)?;
    let mut st = State::default();
    for item in Decoder::new(&words[..n], word_bytes) {
        st.apply(&item.ok()?.1);
    }
    Some((n, st))
}

/// How [`read`] works: threads and block size.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Decoding threads (1: decode sequentially in the calling thread).
    pub threads: usize,
    /// Bytes read at a time (rounded down to whole words); segments start at block starts.
    pub block_bytes: usize,
}

impl Default for Tuning {
    /// One thread per CPU (at most 8), or `OPROF_THREADS` if set to a number (1: sequential).
    fn default() -> Tuning {
        let cpus = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let threads = std::env::var("OPROF_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cpus)
            .max(1);
        Tuning {
            threads,
            block_bytes: 4 << 20,
        }
    }
}

/// The counts of a stream, in parts (one per decoding thread): add them up.
#[derive(Debug)]
pub struct Aggregated {
    pub parts: Vec<Counts>,
    /// Segments decoded (1: sequentially). Diagnostics, read by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub segments: usize,
    /// A parallel decode's assumption failed and the stream was decoded again sequentially.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fell_back: bool,
}

/// Words of a resync search at the start of a block.
const SPLIT_WINDOW_WORDS: usize = 1 << 14;
/// Blocks a queued segment may span; a longer one is decoded by the reading thread.
const MAX_JOB_BLOCKS: usize = 4;

/// A segment to decode: words from `start` (global index) in `parts`, from state `assumed`.
struct Job {
    index: usize,
    start: usize,
    assumed: State,
    parts: Vec<(Arc<Vec<u8>>, std::ops::Range<usize>)>,
}

/// What a decoding thread counted, and how each of its segments ended.
type WorkerResult = (Counts, Vec<JobEnd>);

struct JobEnd {
    index: usize,
    start: usize,
    assumed: State,
    end: SegmentEnd,
}

/// Reads up to `n` bytes (fewer only at the end of the input).
fn read_block(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(n);
    r.by_ref().take(n as u64).read_to_end(&mut v)?;
    Ok(v)
}

/// Reads a stream of `word_bytes`-byte little-endian words from `r` and counts its samples.
/// I/O errors are returned as they are; a stream of a partial number of words or with a
/// decode error fails with the message of [`stream::check_size`] / [`stream::describe`] (the
/// first error in stream order, as the sequential decoder finds it).
pub fn read<R: Read + std::io::Seek>(
    mut r: R,
    word_bytes: usize,
    opts: Options,
    tuning: Tuning,
) -> Result<Aggregated> {
    if tuning.threads <= 1 {
        return read_sequential(r, word_bytes, opts, tuning);
    }
    stream::check_size(0, word_bytes)?;
    let block = block_bytes(tuning, word_bytes);
    if let Some(a) = parallel(&mut r, word_bytes, opts, tuning.threads, block)? {
        return Ok(a);
    }
    r.rewind()?;
    sequential(&mut r, word_bytes, opts, block).map(|a| Aggregated {
        fell_back: true,
        ..a
    })
}

/// Bytes read at a time: `tuning.block_bytes` in whole words, at least one longest record.
fn block_bytes(tuning: Tuning, word_bytes: usize) -> usize {
    (tuning.block_bytes / word_bytes).max(MAX_RECORD_WORDS) * word_bytes
}

/// Counts the samples of the stream `r` as [`read`] does, sequentially, for a reader that
/// cannot seek: [`read`]'s parallel decode may find its split points wrong and decode again
/// from the start, and rewinding a reader that produces its bytes (the snapshot expansion,
/// [`crate::resolve::unwind::expanding`]) would redo all its work, the costly part; decoding
/// its output is cheap next to it.
pub fn read_sequential(
    mut r: impl Read,
    word_bytes: usize,
    opts: Options,
    tuning: Tuning,
) -> Result<Aggregated> {
    stream::check_size(0, word_bytes)?;
    sequential(&mut r, word_bytes, opts, block_bytes(tuning, word_bytes))
}

fn sequential(
    r: &mut impl Read,
    word_bytes: usize,
    opts: Options,
    block: usize,
) -> Result<Aggregated> {
    let mut counts = Counts::new(word_bytes);
    let mut seg = Segment::new(&mut counts, opts, word_bytes, 0, State::default());
    let mut total = 0u64;
    loop {
        let b = read_block(r, block)?;
        if b.is_empty() {
            break;
        }
        total += b.len() as u64;
        seg.feed(&b[..b.len() - b.len() % word_bytes]);
    }
    let end = seg.finish();
    stream::check_size(total, word_bytes)?;
    if let Some(e) = end.stop.or(end.pending) {
        return Err(anyhow!(stream::describe(
            e,
            word_bytes,
            (total / word_bytes as u64) as usize
        )));
    }
    Ok(Aggregated {
        parts: vec![counts],
        segments: 1,
        fell_back: false,
    })
}

/// Decodes segments in `threads` threads; `None` if a segment's assumed start state turned
/// out wrong (decode again sequentially). A segment longer than [`MAX_JOB_BLOCKS`] blocks (no
/// resync point found) is decoded by the reading thread itself as it reads, so memory stays
/// bounded by the blocks in flight.
fn parallel(
    r: &mut impl Read,
    word_bytes: usize,
    opts: Options,
    threads: usize,
    block: usize,
) -> Result<Option<Aggregated>> {
    let (tx, rx) = mpsc::sync_channel::<Job>(threads);
    let rx = Mutex::new(rx);
    let mut own = Counts::new(word_bytes);
    let mut own_ends: Vec<JobEnd> = Vec::new();
    let (total, mut results) = std::thread::scope(|scope| -> Result<(u64, Vec<WorkerResult>)> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let rx = &rx;
                scope.spawn(move || {
                    let mut counts = Counts::new(word_bytes);
                    let mut ends = Vec::new();
                    loop {
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => break,
                        };
                        let Ok(job) = job else { break };
                        let mut seg =
                            Segment::new(&mut counts, opts, word_bytes, job.start, job.assumed);
                        for (b, range) in &job.parts {
                            seg.feed(&b[range.clone()]);
                        }
                        ends.push(JobEnd {
                            index: job.index,
                            start: job.start,
                            assumed: job.assumed,
                            end: seg.finish(),
                        });
                    }
                    (counts, ends)
                })
            })
            .collect();
        let read = (|| -> Result<u64> {
            let mut job = Job {
                index: 0,
                start: 0,
                assumed: State::default(),
                parts: Vec::new(),
            };
            // The current job, when it grew too long to queue: decoded here as it is read.
            let mut inline: Option<Segment<'_>> = None;
            let own = &mut own;
            let (mut total, mut words) = (0u64, 0usize);
            loop {
                let b = read_block(r, block)?;
                if b.is_empty() {
                    break;
                }
                total += b.len() as u64;
                let whole = b.len() - b.len() % word_bytes;
                let split = if job.parts.is_empty() && inline.is_none() {
                    None
                } else {
                    find_split(
                        &to_words(&b[..whole.min(SPLIT_WINDOW_WORDS * word_bytes)], word_bytes),
                        word_bytes,
                    )
                };
                let head = split.map_or(whole, |(p, _)| p * word_bytes);
                let b = Arc::new(b);
                match inline.as_mut() {
                    Some(seg) => seg.feed(&b[..head]),
                    None => job.parts.push((b.clone(), 0..head)),
                }
                if let Some((p, state)) = split {
                    let next = Job {
                        index: job.index + 1,
                        start: words + p,
                        assumed: state,
                        parts: Vec::new(),
                    };
                    let done = std::mem::replace(&mut job, next);
                    match inline.take() {
                        Some(seg) => own_ends.push(JobEnd {
                            index: done.index,
                            start: done.start,
                            assumed: done.assumed,
                            end: seg.finish(),
                        }),
                        None => {
                            if tx.send(done).is_err() {
                                break;
                            }
                        }
                    }
                    job.parts.push((b, head..whole));
                } else if inline.is_none() && job.parts.len() >= MAX_JOB_BLOCKS {
                    let mut seg = Segment::new(&mut *own, opts, word_bytes, job.start, job.assumed);
                    for (b, range) in job.parts.drain(..) {
                        seg.feed(&b[range]);
                    }
                    inline = Some(seg);
                }
                words += whole / word_bytes;
            }
            match inline.take() {
                Some(seg) => own_ends.push(JobEnd {
                    index: job.index,
                    start: job.start,
                    assumed: job.assumed,
                    end: seg.finish(),
                }),
                None => {
                    let _ = tx.send(job);
                }
            }
            Ok(total)
        })();
        drop(tx);
        let results = workers
            .into_iter()
            .map(|w| w.join().expect("decoding thread panicked"))
            .collect();
        Ok((read?, results))
    })?;
    results.push((own, own_ends));
    stream::check_size(total, word_bytes)?;
    let words = (total / word_bytes as u64) as usize;
    let mut ends: Vec<&JobEnd> = results.iter().flat_map(|(_, e)| e).collect();
    ends.sort_by_key(|e| e.index);
    for (i, e) in ends.iter().enumerate() {
        if e.index != i {
            return Ok(None);
        }
        if let Some(prev) = i.checked_sub(1).map(|j| ends[j]) {
            let linked = prev.end.stop.is_none()
                && prev.end.pending.is_none()
                && prev.end.end == e.start
                && prev.end.state == e.assumed;
            if !linked {
                return Ok(None);
            }
        }
        if let Some(err) = e.end.stop {
            return Err(anyhow!(stream::describe(err, word_bytes, words)));
        }
    }
    if let Some(err) = ends.last().and_then(|e| e.end.pending) {
        return Err(anyhow!(stream::describe(err, word_bytes, words)));
    }
    let segments = ends.len();
    Ok(Some(Aggregated {
        parts: results.into_iter().map(|(c, _)| c).collect(),
        segments,
        fell_back: false,
    }))
}

/// Little-endian words of `word_bytes` bytes, widened.
fn to_words(bytes: &[u8], word_bytes: usize) -> Vec<u64> {
    bytes
        .chunks_exact(word_bytes)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..word_bytes].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

/// Counts the samples of a stream in memory, sequentially (see [`read`]).
#[cfg(test)]
pub fn from_words(words: &[u64], word_bytes: usize, opts: Options) -> Result<Aggregated> {
    stream::check_size(0, word_bytes)?;
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes()[..word_bytes].to_vec())
        .collect();
    read(
        std::io::Cursor::new(bytes),
        word_bytes,
        opts,
        Tuning {
            threads: 1,
            block_bytes: 4 << 20,
        },
    )
}

/// Opens the stream file `path` for [`read`], checking the word size and (for a regular file)
/// that it holds whole words, with the errors of [`crate::input::stream::Stream::read`].
pub fn open(path: &Path, word_bytes: usize) -> Result<std::fs::File> {
    let f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    stream::check_size(0, word_bytes).with_context(|| format!("in {}", path.display()))?;
    if meta.is_file() {
        stream::check_size(meta.len(), word_bytes)
            .with_context(|| format!("in {}", path.display()))?;
    }
    Ok(f)
}

/// Cuts the user part of every chain of `counts` (a stream of 8-byte words without snapshots)
/// at its first unproven edge. A chain's user part starts at its first user entry: the sampled
/// PC, or the PC a kernel-mode sample's task entered the kernel from; the rest are frame-record
/// return addresses.
pub fn prove_counts(
    counts: &mut Counts,
    prover: &mut Prover,
    load: &mut dyn FnMut(u64) -> Option<ImageTables>,
) {
    let mut user = Vec::new();
    counts.truncate_chains(|spaces, key, n| {
        let entries: Vec<(u32, u64)> = key.entries().collect();
        let is_user = |s: u32| matches!(spaces.get(s as usize), Some(Space::User { .. }));
        let Some(u) = entries.iter().position(|&(s, _)| is_user(s)) else {
            return entries.len();
        };
        user.clear();
        user.extend(
            entries[u..]
                .iter()
                .map(|&(s, w)| match spaces.get(s as usize) {
                    Some(Space::User {
                        cookie: Some(c), ..
                    }) if *c != 0 => Some((*c, w)),
                    _ => None,
                }),
        );
        u + prover.keep(&user, n, load)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_header_of_2_40_words_stops_the_segment() {
        // arm64 words: a pass, then a USER_STACK claiming 2^40 stack words, then 8 MiB of zeros
        // fed as the reader would; the segment stops at the header and holds none of them.
        let mut w = crate::fixtures::words(
            &[
                Record::CpuSwitch { cpu: 0 },
                Record::KernelExit,
                Record::CtxSwitch {
                    pid: 9,
                    tgid: 9,
                    app_cookie: 1,
                },
            ],
            8,
        );
        let at = w.len();
        w.extend([!0, code::USER_STACK as u64, 1 << 40]);
        let mut counts = Counts::new(8);
        let mut seg = Segment::new(&mut counts, Options::default(), 8, 0, State::default());
        seg.feed(&crate::fixtures::bytes(&w, 8));
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..8 {
            seg.feed(&zeros);
            assert!(seg.buf.len() < 1 << 16, "held {} words", seg.buf.len());
        }
        let need = (1usize << 40) + 3 + oprofile_common::event::user_regs(8);
        let end = seg.finish();
        assert_eq!(end.stop, Some(DecodeError::Truncated { word: at, need }));
    }
}
