//! Checks a `/dev/oprofile/buffer` stream against what the module writes, before any view
//! decodes it (issue 24). `oprof report`, `annotate`, `diff`, `decode` and `synth` refuse a
//! stream that breaks a rule below with one line naming the file and the byte offset of the
//! first bad word ([`Invalid`], exit status 2); with `--force` they skip from the record holding
//! the bad word to the next sync pass and say what they skipped ([`Skipped`]).
//!
//! The rules are the module's writer's (`rust/common/sync.rs`, `rust/buffer_sync.rs`,
//! `rust/user_stack.rs`, `rust/event_buffer.rs`):
//!
//! - Each open of `buffer` gets a fresh event buffer, which only sync passes and MODULE_LOADED
//!   write, and a pass starts every CPU's first group with CPU_SWITCH: the first record is
//!   CPU_SWITCH or MODULE_LOADED (an empty stream is fine).
//! - After a CPU_SWITCH the pass writes the mode (KERNEL_ENTER/EXIT) and the task (CTX_SWITCH)
//!   before its first sample.
//! - Escape codes and CTX_SWITCH's CTX_TGID part are the decoder's (`rust/common/event.rs`).
//! - A sample's counter (its event word; call-chain frames carry 0) is one the session sampled:
//!   session.json's counters (0 in timer mode), else one of the `--cpu-type` model's counters
//!   (0 for `timer`), else one any model has (0 to 6).
//! - CPU numbers are below the architecture's largest `NR_CPUS` (ARM: 32, arm64: 4096), pids
//!   and tgids below `PID_MAX_LIMIT` (32768 with 4-byte words, 4194304 with 8-byte words);
//!   4-byte streams are ARM's and 8-byte streams arm64's.
//! - USER_MAPS lists at most [`MAPS_MAX`] mappings; USER_STACK carries at most
//!   `user_stack_size` bytes of stack (session.json; else [`USER_STACK_SIZE_MAX`]), and a
//!   session without snapshots (`user_stack_size` 0) has neither record.
//! - A stream ends at a record boundary: the module writes whole groups and a read returns
//!   whole words, oldest first; `oprof record` and `optool capture` read `buffer_size` words
//!   at a time, which empties the buffer, so their captures never end inside a record. Only a
//!   read of fewer bytes that is not followed by the rest (or a copy cut short) does.
//! - A session's `samples` has the `totals.bytes` bytes session.json says `oprof record` read,
//!   and `--word-size`, if given, is its `pointer_size`.
//! - A session whose recorder died (session.json's `state` is `recording`) has no
//!   `totals.bytes`, and its stream may end inside a record or a word (the recorder was killed
//!   between two writes): [`check_recording`] reports it up to the last whole record, with a
//!   note. Only at the end: a bad word before it is an error as in any stream.
//!
//! Without `--force` the check reads the file in blocks (memory does not grow with the
//! stream); `--force` reads it whole and keeps the records outside the skipped ranges.

use crate::input::session::SessionInfo;
use crate::input::stream::{le_words, ChainState, Role};
use anyhow::{Context, Result};
use oprofile_common::event::{code, escape_code, DecodeError, Decoder, Record};
use oprofile_common::events::{write_counter_list, CpuModel, MODELS};
use serde::Serialize;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Mappings per USER_MAPS record at most (the module's, `common::event::USER_MAPS_MAX`).
pub const MAPS_MAX: u64 = oprofile_common::event::USER_MAPS_MAX as u64;
pub use oprofile_common::event::USER_STACK_SIZE_MAX;

/// Bytes read at a time by the bounded-memory check (whole words of 4 and 8 bytes).
const BLOCK_BYTES: usize = 1 << 20;

/// What a stream may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes per word (4 or 8).
    pub word_bytes: usize,
    /// Counters whose samples may appear: bit N for counter N.
    counters: u32,
    /// Where [`Limits::counters`] comes from, for messages.
    counters_from: String,
    /// Largest stack of a USER_STACK record, bytes; `None`: no snapshot records.
    stack_bytes: Option<u64>,
    /// Where [`Limits::stack_bytes`] comes from, for messages.
    stack_from: &'static str,
}

impl Limits {
    /// A bare stream's limits: the counters of `model` if a CPU type was given (`Some(None)`:
    /// timer mode), else the counters any model has.
    pub fn bare(word_bytes: usize, model: Option<Option<&CpuModel>>) -> Limits {
        let (n, from) = match model {
            Some(Some(m)) => (m.num_counters, m.name().to_string()),
            Some(None) => (1, "timer mode".to_string()),
            None => {
                let n = MODELS.iter().map(|m| m.num_counters).max().unwrap_or(1);
                (
                    n,
                    "any CPU type; give --cpu-type or a session directory".to_string(),
                )
            }
        };
        Limits {
            word_bytes,
            counters: mask_below(n),
            counters_from: from,
            stack_bytes: Some(USER_STACK_SIZE_MAX),
            stack_from: "the module's largest user_stack_size",
        }
    }

    /// The limits session.json sets: its word size, counters and snapshot size.
    pub fn session(info: &SessionInfo) -> Limits {
        let (counters, from) = if info.counters.is_empty() {
            (1, "session.json: timer mode".to_string())
        } else {
            let listed = info.counters.iter().filter(|c| c.counter < 32);
            (
                listed.fold(0, |m, c| m | 1 << c.counter),
                "session.json".to_string(),
            )
        };
        let stack = info.settings.user_stack_size;
        Limits {
            word_bytes: info.pointer_size,
            counters,
            counters_from: from,
            stack_bytes: (stack > 0).then_some(stack),
            stack_from: "session.json's user_stack_size",
        }
    }

    /// The same limits for words of `word_bytes`.
    fn with_word_bytes(&self, word_bytes: usize) -> Limits {
        Limits {
            word_bytes,
            ..self.clone()
        }
    }

    /// CPU numbers are below this: the largest `NR_CPUS` of ARM (32) or arm64 (4096).
    fn cpus(&self) -> u64 {
        if self.word_bytes == 8 {
            4096
        } else {
            32
        }
    }

    /// Pids are below this: `PID_MAX_LIMIT` of a 32-bit (32768) or 64-bit (4 Mi) kernel.
    fn pids(&self) -> u64 {
        if self.word_bytes == 8 {
            4 << 20
        } else {
            1 << 15
        }
    }

    fn counter_ok(&self, event: u64) -> bool {
        event < 32 && self.counters & (1 << event) != 0
    }

    /// Stack words a USER_STACK record may carry: [`Limits::stack_bytes`], and never more
    /// than the module's largest ([`USER_STACK_SIZE_MAX`]) whatever the limits say, so that a
    /// header claiming more is refused before the check awaits its payload (memory).
    fn stack_words(&self) -> Option<u64> {
        let bytes = self.stack_bytes?.min(USER_STACK_SIZE_MAX);
        Some(bytes / self.word_bytes as u64)
    }

    fn counter_list(&self) -> String {
        let mut s = String::new();
        let _ = write_counter_list(&mut s, self.counters);
        s
    }
}

/// Bits 0..n.
fn mask_below(n: u32) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1 << n) - 1
    }
}

/// What is wrong with a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The first record is not CPU_SWITCH or MODULE_LOADED (its name).
    Start(&'static str),
    /// A sample before the mode and task of its CPU's pass.
    NoContext,
    Counter(u64),
    Cpu(u64),
    /// A pid or tgid (which, value).
    Pid(&'static str, u64),
    Code(u64),
    /// A CTX_SWITCH without its `~0, 7` (CTX_TGID) part.
    CtxTgid,
    Maps(u64),
    Stack(u64),
    /// USER_MAPS or USER_STACK in a session without snapshots.
    NoSnapshots,
    /// The stream ends inside a record of `need` words, `have` of which are there.
    Truncated {
        need: usize,
        have: usize,
    },
    /// The stream ends with a part of a word (its bytes).
    PartialWord(u64),
}

impl Problem {
    /// The problem in words, given the limits that were checked.
    pub fn describe(&self, lim: &Limits) -> String {
        let wb = lim.word_bytes;
        match *self {
            Problem::Start(what) => format!(
                "the stream begins with {what}; the module begins one with CPU_SWITCH or \
                 MODULE_LOADED"
            ),
            Problem::NoContext => "a sample before KERNEL_ENTER/EXIT and CTX_SWITCH, which the \
                                   module writes after every CPU_SWITCH"
                .to_string(),
            Problem::Counter(c) => format!(
                "sample of counter {c}, not among counters {} ({})",
                lim.counter_list(),
                lim.counters_from
            ),
            Problem::Cpu(c) => format!("CPU {c}, not below {} ({wb}-byte words)", lim.cpus()),
            Problem::Pid(what, p) => {
                format!(
                    "{what} {p}, not below PID_MAX_LIMIT {} ({wb}-byte words)",
                    lim.pids()
                )
            }
            Problem::Code(c) => format!("unknown escape code {c}"),
            Problem::CtxTgid => "CTX_SWITCH without its CTX_TGID part (~0, 7)".to_string(),
            Problem::Maps(n) => {
                format!("USER_MAPS of {n} mappings (the module writes at most {MAPS_MAX})")
            }
            Problem::Stack(n) => format!(
                "USER_STACK of {n} stack words, more than {} ({} bytes, {})",
                lim.stack_words().unwrap_or(0),
                lim.stack_bytes.unwrap_or(0).min(USER_STACK_SIZE_MAX),
                lim.stack_from
            ),
            Problem::NoSnapshots => {
                "user stack record in a session without snapshots (user_stack_size 0)".to_string()
            }
            Problem::Truncated { need, have } => format!(
                "the stream ends inside a record of {need} words, after {have} of them; a \
                 capture ends at a record boundary"
            ),
            Problem::PartialWord(n) => {
                format!("the stream ends with {n} bytes, not a whole {wb}-byte word")
            }
        }
    }
}

/// The first bad word of a stream: its index, the index of its record's first word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    pub word: usize,
    pub record: usize,
    pub problem: Problem,
}

/// The error of a stream that is not as the module writes one: `PATH: byte offset N: WHAT`.
#[derive(Debug)]
pub struct Invalid {
    pub path: PathBuf,
    /// Byte offset of the first bad word (`None`: the stream and session.json disagree).
    pub offset: Option<u64>,
    pub what: String,
}

impl Bad {
    /// `problem` at word `off` of the record at index `record`.
    fn new(record: usize, off: usize, problem: Problem) -> Bad {
        Bad {
            word: record + off,
            record,
            problem,
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{}: byte offset {o}: {}", self.path.display(), self.what),
            None => write!(f, "{}: {}", self.path.display(), self.what),
        }
    }
}

impl std::error::Error for Invalid {}

/// Name of a record in messages.
fn name(rec: &Record) -> &'static str {
    match rec {
        Record::Sample { .. } => "a sample",
        Record::CtxSwitch { .. } => "CTX_SWITCH",
        Record::CpuSwitch { .. } => "CPU_SWITCH",
        Record::CookieSwitch { .. } => "COOKIE_SWITCH",
        Record::KernelEnter => "KERNEL_ENTER",
        Record::KernelExit => "KERNEL_EXIT",
        Record::ModuleLoaded => "MODULE_LOADED",
        Record::TraceBegin => "TRACE_BEGIN",
        Record::UserMaps { .. } => "USER_MAPS",
        Record::UserStack { .. } => "USER_STACK",
    }
}

/// The record-by-record check.
struct Checker<'a> {
    lim: &'a Limits,
    esc: u64,
    started: bool,
    /// Since the last CPU_SWITCH: a mode record, a task record.
    mode: bool,
    task: bool,
    chain: ChainState,
}

impl<'a> Checker<'a> {
    fn new(lim: &'a Limits) -> Self {
        let esc = escape_code(lim.word_bytes);
        Checker {
            lim,
            esc,
            started: false,
            mode: false,
            task: false,
            chain: ChainState::default(),
        }
    }

    /// Checks the records of `w`, whose first word has index `base`; returns how many words
    /// it checked: all unless `last` is false and `w` ends inside a record.
    fn scan(&mut self, w: &[u64], base: usize, last: bool) -> Result<usize, Bad> {
        let mut i = 0;
        while i < w.len() {
            match self.step(&w[i..], base + i, last)? {
                Some(rec) => i += rec.words(),
                None => break,
            }
        }
        Ok(i)
    }

    /// Checks the record at the start of `w` (index `at`); `None`: `w` ends inside it and
    /// more words follow (not `last`).
    fn step(&mut self, w: &[u64], at: usize, last: bool) -> Result<Option<Record>, Bad> {
        if let [pc, event, ..] = *w {
            if pc != self.esc {
                // A sample, the common case (as the decoder reads it).
                let rec = Record::Sample { pc, event };
                return self.record(&rec, at).map(|()| Some(rec));
            }
        }
        self.header(w, at)?;
        match Decoder::new(w, self.lim.word_bytes).next() {
            Some(Ok((_, rec))) => self.record(&rec, at).map(|()| Some(rec)),
            Some(Err(DecodeError::Truncated { .. })) | None if !last => Ok(None),
            Some(Err(e)) => Err(decode_error(e, at, w.len())),
            None => Ok(None),
        }
    }

    /// Checks the length words of USER_MAPS and USER_STACK before their payload is awaited.
    fn header(&self, w: &[u64], at: usize) -> Result<(), Bad> {
        let (Some(&e), Some(&c)) = (w.first(), w.get(1)) else {
            return Ok(());
        };
        let c = c as usize;
        if e != self.esc || !matches!(c, code::USER_MAPS | code::USER_STACK) {
            return Ok(());
        }
        let Some(max) = self.lim.stack_words() else {
            return ensure(false, at, 1, Problem::NoSnapshots);
        };
        match (c, w.get(3), w.get(2)) {
            (code::USER_MAPS, Some(&n), _) => ensure(n <= MAPS_MAX, at, 3, Problem::Maps(n)),
            (code::USER_STACK, _, Some(&n)) => ensure(n <= max, at, 2, Problem::Stack(n)),
            _ => Ok(()),
        }
    }

    /// Checks a decoded record at index `at` and follows the state.
    fn record(&mut self, rec: &Record, at: usize) -> Result<(), Bad> {
        let first = !std::mem::replace(&mut self.started, true);
        let starts = matches!(rec, Record::CpuSwitch { .. } | Record::ModuleLoaded);
        ensure(!first || starts, at, 0, Problem::Start(name(rec)))?;
        let role = self.chain.apply(rec);
        let pids = self.lim.pids();
        match *rec {
            Record::Sample { event, .. } if matches!(role, Some(Role::Sample { .. })) => {
                ensure(self.mode && self.task, at, 0, Problem::NoContext)?;
                ensure(self.lim.counter_ok(event), at, 1, Problem::Counter(event))
            }
            Record::CpuSwitch { cpu } => {
                (self.mode, self.task) = (false, false);
                ensure(cpu < self.lim.cpus(), at, 2, Problem::Cpu(cpu))
            }
            Record::KernelEnter | Record::KernelExit => {
                self.mode = true;
                Ok(())
            }
            Record::CtxSwitch { pid, tgid, .. } => {
                self.task = true;
                ensure(pid < pids, at, 2, Problem::Pid("pid", pid))?;
                ensure(tgid < pids, at, 6, Problem::Pid("tgid", tgid))
            }
            Record::UserMaps { tgid, .. } => ensure(tgid < pids, at, 2, Problem::Pid("tgid", tgid)),
            _ => Ok(()),
        }
    }
}

/// `Ok` if `ok`, else `problem` at word `off` of the record at index `at`.
fn ensure(ok: bool, at: usize, off: usize, problem: Problem) -> Result<(), Bad> {
    if ok {
        Ok(())
    } else {
        Err(Bad::new(at, off, problem))
    }
}

/// A decoder error of the record at `at`, `have` words before the end of the input.
fn decode_error(e: DecodeError, at: usize, have: usize) -> Bad {
    match e {
        DecodeError::UnknownCode { code, .. } => Bad::new(at, 1, Problem::Code(code)),
        DecodeError::BadCtxSwitch { .. } => Bad::new(at, 4, Problem::CtxTgid),
        DecodeError::Truncated { need, .. } => Bad::new(at, 0, Problem::Truncated { need, have }),
    }
}

/// The first bad word of the stream `r`, read in blocks.
pub fn first_bad(r: &mut impl Read, lim: &Limits) -> std::io::Result<Option<Bad>> {
    let wb = lim.word_bytes;
    let mut ck = Checker::new(lim);
    let (mut pending, mut base) = (Vec::with_capacity(BLOCK_BYTES / wb + 1), 0);
    let mut block = Vec::with_capacity(BLOCK_BYTES);
    loop {
        block.clear();
        r.by_ref()
            .take(BLOCK_BYTES as u64)
            .read_to_end(&mut block)?;
        let last = block.len() < BLOCK_BYTES;
        pending.extend(le_words(&block, wb));
        let done = match ck.scan(&pending, base, last) {
            Ok(n) => n,
            Err(bad) => return Ok(Some(bad)),
        };
        pending.drain(..done);
        base += done;
        if last {
            let rest = (block.len() % wb) as u64;
            return Ok((rest > 0).then(|| Bad::new(base, 0, Problem::PartialWord(rest))));
        }
    }
}

/// The first bad word of the stream file `path`.
fn first_bad_in(path: &Path, lim: &Limits) -> Result<Option<Bad>> {
    let reading = || format!("reading {}", path.display());
    let mut f = std::fs::File::open(path).with_context(reading)?;
    first_bad(&mut f, lim).with_context(reading)
}

/// The error for `bad` in `path`, with a hint when the other word size fits.
fn invalid(path: &Path, bad: &Bad, lim: &Limits) -> Result<anyhow::Error> {
    let mut what = bad.problem.describe(lim);
    let other = lim.with_word_bytes(12 - lim.word_bytes);
    if first_bad_in(path, &other)?.is_none() {
        what += &format!("; it is a valid stream of {}-byte words", other.word_bytes);
    }
    what += "; --force skips bad records";
    let offset = Some((bad.word * lim.word_bytes) as u64);
    Ok(Invalid {
        path: path.to_path_buf(),
        offset,
        what,
    }
    .into())
}

/// One skipped range of a stream (`--force`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Skip {
    /// Byte offset of the first skipped byte (the start of the record with the bad word).
    pub offset: u64,
    pub bytes: u64,
    /// Byte offset of the bad word.
    pub bad_offset: u64,
    pub reason: String,
}

/// What `--force` skipped.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Skipped {
    /// Bytes skipped in all.
    pub bytes: u64,
    pub ranges: Vec<Skip>,
}

impl Skipped {
    fn push(&mut self, bad: &Bad, end_word: usize, lim: &Limits) {
        let wb = lim.word_bytes as u64;
        let offset = bad.record as u64 * wb;
        let bytes = (end_word - bad.record) as u64 * wb;
        let reason = bad.problem.describe(lim);
        self.bytes += bytes;
        self.ranges.push(Skip {
            offset,
            bytes,
            bad_offset: bad.word as u64 * wb,
            reason,
        });
    }

    /// One line: how much was skipped and where (the first three ranges).
    pub fn note(&self, path: &Path) -> String {
        let shown: Vec<String> = self
            .ranges
            .iter()
            .take(3)
            .map(|s| {
                format!(
                    "{} bytes at byte offset {} ({})",
                    s.bytes, s.offset, s.reason
                )
            })
            .collect();
        let more = match self.ranges.len() - shown.len() {
            0 => String::new(),
            n => format!("; {n} more"),
        };
        let n = self.ranges.len();
        format!(
            "{}: --force skipped {} bytes in {n} range{}: {}{more}",
            path.display(),
            self.bytes,
            if n == 1 { "" } else { "s" },
            shown.join("; ")
        )
    }
}

/// The records `--force` keeps of a stream: word ranges, in order, and what it skipped.
#[derive(Debug, Default)]
pub struct Kept {
    pub ranges: Vec<Range<usize>>,
    pub skipped: Skipped,
}

/// Splits `words` into the ranges that pass the checks and the ranges skipped: from the record
/// with a bad word to the next CPU_SWITCH that starts a pass as the module does.
pub fn keep(words: &[u64], lim: &Limits) -> Kept {
    let mut kept = Kept::default();
    let mut pos = 0;
    while pos < words.len() {
        match Checker::new(lim).scan(&words[pos..], pos, true) {
            Ok(_) => {
                kept.ranges.push(pos..words.len());
                break;
            }
            Err(bad) => {
                if bad.record > pos {
                    kept.ranges.push(pos..bad.record);
                }
                pos = resync(words, bad.record + 1, lim);
                kept.skipped.push(&bad, pos, lim);
            }
        }
    }
    kept
}

/// Index of the first CPU_SWITCH at or after `from` that starts a pass as the module does
/// (its records check until the first sample), else the end.
fn resync(words: &[u64], from: usize, lim: &Limits) -> usize {
    let esc = escape_code(lim.word_bytes);
    (from..words.len().saturating_sub(1))
        .filter(|&j| words[j] == esc && words[j + 1] == code::CPU_SWITCH as u64)
        .find(|&j| starts_pass(&words[j..], lim))
        .unwrap_or(words.len())
}

fn starts_pass(w: &[u64], lim: &Limits) -> bool {
    let mut ck = Checker::new(lim);
    let mut i = 0;
    while i < w.len() {
        match ck.step(&w[i..], i, true) {
            Ok(Some(Record::Sample { .. })) | Ok(None) => return true,
            Ok(Some(rec)) => i += rec.words(),
            Err(_) => return false,
        }
    }
    true
}

/// Reads the stream file `path` whole and keeps what passes the checks (`--force`); a partial
/// word at the end is skipped too. Returns the words and what was kept of them.
pub fn read_kept(path: &Path, lim: &Limits) -> Result<(Vec<u64>, Kept)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let words: Vec<u64> = le_words(&bytes, lim.word_bytes).collect();
    let mut kept = keep(&words, lim);
    let rest = (bytes.len() % lim.word_bytes) as u64;
    if rest > 0 {
        let at = (words.len() * lim.word_bytes) as u64;
        let reason = Problem::PartialWord(rest).describe(lim);
        kept.skipped.bytes += rest;
        kept.skipped.ranges.push(Skip {
            offset: at,
            bytes: rest,
            bad_offset: at,
            reason,
        });
    }
    Ok((words, kept))
}

/// A checked stream: the file as it is, its first `bytes` bytes (a session whose recorder died
/// with a record half written), or (`--force`) the records kept of it.
pub enum Checked {
    File,
    Prefix { bytes: u64 },
    Kept { bytes: Vec<u8>, skipped: Skipped },
}

impl Checked {
    pub fn skipped(&self) -> Option<&Skipped> {
        match self {
            Checked::File | Checked::Prefix { .. } => None,
            Checked::Kept { skipped, .. } => Some(skipped),
        }
    }

    /// The checked stream of the file `path` as a reader (not for [`Checked::Kept`], which
    /// holds its bytes): the whole file or its prefix. Errors name the file.
    pub fn open(&self, path: &Path) -> Result<Prefix> {
        let f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let len = match self {
            Checked::Prefix { bytes } => *bytes,
            _ => f
                .metadata()
                .with_context(|| format!("reading {}", path.display()))?
                .len(),
        };
        Ok(Prefix { f, len, pos: 0 })
    }
}

/// The first `len` bytes of a file, read and seeked as a file of that length.
pub struct Prefix {
    f: std::fs::File,
    len: u64,
    pos: u64,
}

impl Read for Prefix {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.len.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        let n = self.f.read(&mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for Prefix {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        }
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        self.pos = self.f.seek(SeekFrom::Start(target))?;
        Ok(self.pos)
    }
}

/// Checks the stream of a session whose recorder died (state `recording`): as [`check`], but a
/// stream that ends inside a record or a word, which the dying recorder may have left, is
/// reported up to its last whole record ([`Checked::Prefix`]) with a note naming what is left
/// out. Anything else wrong is an error as in [`check`] (`force`: skipped as there).
pub fn check_recording(
    path: &Path,
    lim: &Limits,
    force: bool,
) -> Result<(Checked, Option<String>)> {
    crate::input::stream::check_size(0, lim.word_bytes)
        .with_context(|| format!("in {}", path.display()))?;
    if force {
        return Ok((check(path, lim, true)?, None));
    }
    let Some(bad) = first_bad_in(path, lim)? else {
        return Ok((Checked::File, None));
    };
    if !matches!(
        bad.problem,
        Problem::Truncated { .. } | Problem::PartialWord(_)
    ) {
        return Err(invalid(path, &bad, lim)?);
    }
    let at = (bad.record * lim.word_bytes) as u64;
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let note = format!(
        "{}: byte offset {at}: the stream ends with a torn record ({} bytes: {}); reported up \
         to it",
        path.display(),
        len - at,
        bad.problem.describe(lim)
    );
    Ok((Checked::Prefix { bytes: at }, Some(note)))
}

/// Checks the stream file `path`: an [`Invalid`] error at the first bad word, or with `force`
/// the records that pass.
pub fn check(path: &Path, lim: &Limits, force: bool) -> Result<Checked> {
    crate::input::stream::check_size(0, lim.word_bytes)
        .with_context(|| format!("in {}", path.display()))?;
    if !force {
        return match first_bad_in(path, lim)? {
            Some(bad) => Err(invalid(path, &bad, lim)?),
            None => Ok(Checked::File),
        };
    }
    let (words, kept) = read_kept(path, lim)?;
    if kept.skipped.ranges.is_empty() {
        return Ok(Checked::File);
    }
    let bytes = kept
        .ranges
        .iter()
        .flat_map(|r| &words[r.clone()])
        .flat_map(|w| w.to_le_bytes()[..lim.word_bytes].to_vec())
        .collect();
    Ok(Checked::Kept {
        bytes,
        skipped: kept.skipped,
    })
}

/// Checks what session.json says of its stream `samples`: `--word-size` (if given) is its
/// `pointer_size`, and the file has `totals.bytes` bytes. With `force` a size that differs
/// is a note (returned) instead of an error.
pub fn check_session(
    json: &Path,
    info: &SessionInfo,
    word_size: Option<usize>,
    samples: &Path,
    force: bool,
) -> Result<Option<String>> {
    if let Some(w) = word_size.filter(|&w| w != info.pointer_size) {
        let what = format!("pointer_size is {}, not --word-size {w}", info.pointer_size);
        return Err(Invalid {
            path: json.to_path_buf(),
            offset: None,
            what,
        }
        .into());
    }
    let len = std::fs::metadata(samples)
        .with_context(|| format!("reading {}", samples.display()))?
        .len();
    if info.state == crate::input::session::State::Recording {
        // The recorder died before it could say how much it read.
        return Ok(None);
    }
    let want = info.totals.bytes;
    if len == want {
        return Ok(None);
    }
    let what = if len < want {
        format!("the file ends here, {} bytes short of", want - len)
    } else {
        format!("{} bytes more than", len - want)
    };
    let what = format!(
        "{what} the {want} bytes {} recorded (totals.bytes)",
        json.display()
    );
    let (path, offset) = (samples.to_path_buf(), Some(len.min(want)));
    if force {
        let e = Invalid { path, offset, what };
        return Ok(Some(format!("{e} (--force: decoded as it is)")));
    }
    Err(Invalid { path, offset, what }.into())
}

#[cfg(test)]
mod tests;
