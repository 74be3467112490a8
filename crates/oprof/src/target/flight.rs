//! The flight recorder of `oprof record --max-size`: the stream kept in a ring of chunk files,
//! the oldest whole chunk dropped when the kept ones pass the size, so that an always-on
//! recording holds the last minutes, in bounded disk (the ring's), whatever its length (perf's
//! `--overwrite`, with whole chunks instead of a ring of pages).
//!
//! A chunk must decode without the chunks before it. The reader takes `buffer` whole at each
//! read (a read of `buffer_size` words, under the module's event buffer mutex, which every sync
//! pass holds), so a read holds whole records from its start, and every pass over a CPU's
//! buffer starts with CPU_SWITCH and the full context ([`stream::context_prefix`]). Each read is
//! decoded from its start, and a chunk starts only where a pass's context does; what has none
//! (the stream's first records, a read that does not decode) goes on in the open chunk. The
//! stream kept is therefore at most `max` plus the open chunk: a chunk (`max / CHUNKS`) and
//! one pass of one CPU. Image ids stay valid across chunks: the module never reuses one, and
//! `images` is written at the end.
//!
//! Files: `samples.d/NNNNNNNNNN` while recording (0600, [`SubDir`]); when the recording ends,
//! [`assemble`] joins the kept chunks, in order, into `samples`, so the session is read like
//! any other. SIGUSR1 (or a file `DIR/snapshot`) while recording writes the chunks as they are
//! into a session of their own, `snapshot-N/` ([`Snapshots`]), and recording goes on: what
//! happened just before a glitch.

use super::record::{collect_system, count_samples, whole_records, write_info};
use super::session_dir::{SessionDir, SubDir};
use super::system::Fs;
use crate::input::session::{self, Losses, SessionInfo, State, Time, Totals};
use crate::input::stream;
use anyhow::{bail, Context, Result};
use oprofile_common::event::{Decoder, Record};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Bytes a snapshot's system files take at most, for [`Snapshots`]' free-space check (kallsyms
/// of a distribution kernel is a few MiB).
const SNAPSHOT_FILES: u64 = 16 << 20;

/// The file whose appearance in the session directory asks for a snapshot, as SIGUSR1 does
/// (`touch DIR/snapshot`): [`Snapshots::trigger_asked`] removes it.
pub const TRIGGER: &str = "snapshot";

/// The chunk directory of a session, while recording.
pub const CHUNK_DIR: &str = session::CHUNKS;

/// Chunks that `--max-size` is divided into: a chunk closes at the first pass's start after it
/// holds `max / CHUNKS` bytes, so the closed chunks kept hold at most `max` bytes, and the
/// open chunk up to `max / CHUNKS` and one pass.
pub const CHUNKS: u64 = 8;

/// What the ring dropped: whole chunks, oldest first.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub chunks: u64,
    /// Bytes of the dropped chunks.
    pub bytes: u64,
    /// Samples in them (counted as [`count_samples`] counts a stream: frames are not samples).
    pub samples: u64,
    /// Why a dropped chunk's samples could not be counted (the first such error).
    pub uncounted: Option<String>,
}

/// The chunks kept when the ring is finished: their names, oldest first, and what was dropped.
#[derive(Debug, Default, Clone)]
pub struct Kept {
    pub names: Vec<String>,
    pub dropped: Dropped,
    /// Whether a chunk was closed (a stream without a sync pass's context stays in one chunk,
    /// however long).
    pub cut: bool,
    /// Why the ring kept more than `max` (no context to cut at).
    pub notes: Vec<String>,
}

/// The ring of chunk files the reader writes ([`Ring::put`]).
///
/// # Invariants
///
/// `closed` holds the names and sizes of the closed chunks, oldest first, their sizes adding
/// up to `closed_bytes`; after every [`Ring::put`], `closed_bytes <= max` unless one chunk
/// alone is larger.
#[derive(Debug)]
pub struct Ring {
    dir: SubDir,
    word_bytes: usize,
    /// Bytes of closed chunks kept at most (`--max-size`).
    max: u64,
    /// A chunk closes at the first read boundary at or after this many bytes.
    chunk: u64,
    next: u64,
    open: Option<(String, File, u64)>,
    closed: VecDeque<(String, u64)>,
    closed_bytes: u64,
    dropped: Dropped,
    cut: bool,
    /// The words of the read being written (kept for its capacity).
    words: Vec<u64>,
}

impl Ring {
    /// A ring writing chunks into `dir`, keeping at most `max` bytes of closed chunks of a
    /// stream of `word_bytes`-byte words.
    pub fn new(dir: SubDir, word_bytes: usize, max: u64) -> Ring {
        Ring {
            dir,
            word_bytes,
            max,
            chunk: (max / CHUNKS).max(1),
            next: 0,
            open: None,
            closed: VecDeque::new(),
            closed_bytes: 0,
            dropped: Dropped::default(),
            cut: false,
            words: Vec::new(),
        }
    }

    /// Writes one read of `buffer` (`data`: whole sync passes), pass by pass: before a pass,
    /// the open chunk is closed when it has reached its size; then the oldest closed chunks
    /// are dropped while the closed ones hold more than `max`. Returns the bytes written and
    /// the error that stopped the writing (a full disk, a chunk that cannot be created).
    pub fn put(&mut self, data: &[u8]) -> (usize, Option<std::io::Error>) {
        let starts = self.pass_starts(data);
        let ends = starts
            .iter()
            .copied()
            .filter(|&s| s > 0)
            .chain([data.len()]);
        let mut from = 0;
        for to in ends {
            let full = self.open.as_ref().is_some_and(|o| o.2 >= self.chunk);
            let at_pass = starts.binary_search(&from).is_ok();
            if self.open.is_none() || (full && at_pass) {
                self.cut |= self.open.is_some();
                if let Err(e) = self.begin() {
                    return (from, Some(e));
                }
            }
            let Some((_, file, bytes)) = self.open.as_mut() else {
                return (from, Some(std::io::ErrorKind::NotFound.into()));
            };
            let (n, err) = super::record::write_counted(file, &data[from..to]);
            *bytes = bytes.saturating_add(n as u64);
            if err.is_some() {
                return (from + n, err);
            }
            from = to;
        }
        (from, None)
    }

    /// The byte offsets in `data` where a sync pass's context starts
    /// ([`stream::context_prefix`]), found by decoding it from its start (a read of `buffer`
    /// starts at a record); none after a record that does not decode.
    fn pass_starts(&mut self, data: &[u8]) -> Vec<usize> {
        let wb = self.word_bytes;
        self.words.clear();
        self.words.extend(stream::le_words(data, wb));
        let words = &self.words;
        Decoder::new(words, wb)
            .map_while(Result::ok)
            .filter(|(at, rec)| {
                matches!(rec, Record::CpuSwitch { .. })
                    && stream::context_prefix(&words[*at..], wb).is_some()
            })
            .map(|(at, _)| at * wb)
            .collect()
    }

    /// Closes the open chunk (if any), drops the oldest while over `max`, opens the next.
    fn begin(&mut self) -> std::io::Result<()> {
        if let Some((name, _, bytes)) = self.open.take() {
            self.closed.push_back((name, bytes));
            self.closed_bytes = self.closed_bytes.saturating_add(bytes);
        }
        while self.closed_bytes > self.max && self.closed.len() > 1 {
            self.drop_oldest();
        }
        let name = format!("{:010}", self.next);
        self.next = self.next.wrapping_add(1);
        let file = self.dir.create(&name).map_err(std::io::Error::other)?;
        self.open = Some((name, file, 0));
        Ok(())
    }

    /// Counts the oldest closed chunk's samples and removes it.
    fn drop_oldest(&mut self) {
        let Some((name, bytes)) = self.closed.pop_front() else {
            return;
        };
        self.closed_bytes = self.closed_bytes.saturating_sub(bytes);
        let counted = self
            .dir
            .open(&name)
            .and_then(|mut f| count_samples(&mut f, self.word_bytes));
        let d = &mut self.dropped;
        match counted {
            Ok(n) => d.samples = d.samples.saturating_add(n),
            Err(e) => {
                let at = self.dir.path().join(&name);
                d.uncounted
                    .get_or_insert(format!("{}: {e:#}", at.display()));
            }
        }
        d.chunks = d.chunks.saturating_add(1);
        d.bytes = d.bytes.saturating_add(bytes);
        // A chunk that cannot be removed stays on disk but out of the session.
        if let Err(e) = self.dir.remove(&name) {
            d.uncounted.get_or_insert(format!("{e:#}"));
        }
    }

    /// Ends the ring: the kept chunks (the open one last) and what was dropped.
    pub fn finish(mut self) -> Kept {
        let mut notes = vec![];
        if let Some((name, mut file, bytes)) = self.open.take() {
            let _ = file.flush();
            if bytes > self.max {
                notes.push(format!(
                    "--max-size: {} holds {bytes} bytes, more than {}: no sync pass's context \
                     in it to cut at",
                    self.dir.path().join(&name).display(),
                    self.max
                ));
            }
            self.closed.push_back((name, bytes));
        }
        Kept {
            names: self.closed.into_iter().map(|(n, _)| n).collect(),
            dropped: self.dropped,
            cut: self.cut,
            notes,
        }
    }
}

/// What [`assemble`] could not do: chunks left in [`CHUNK_DIR`] (oldest first; not in
/// `samples`) and their bytes, and a note for each problem.
#[derive(Debug, Default)]
pub struct Joined {
    pub left: Vec<String>,
    pub left_bytes: u64,
    pub notes: Vec<String>,
}

/// Joins the chunks `kept` of `out`'s [`CHUNK_DIR`], in order, into `samples` (the first is
/// renamed, the others appended and removed one by one: the disk holds one chunk more than the
/// stream at most) and removes the chunk directory. An append that fails (a full disk) is
/// undone and ends the joining: that chunk and the later ones stay in [`CHUNK_DIR`], said in
/// [`Joined`], as is a chunk or directory that cannot be removed. Errors (nothing joined):
/// the chunk directory, the first chunk's rename, `samples`; they name the file.
pub fn assemble(out: &SessionDir, kept: &Kept) -> Result<Joined> {
    let dir = out.subdir(CHUNK_DIR)?;
    let mut names = kept.names.iter();
    match names.next() {
        Some(first) => out.take_from(&dir, first, session::SAMPLES)?,
        None => drop(out.create(session::SAMPLES)?),
    }
    let mut samples = out.open_rw(session::SAMPLES)?;
    let mut j = Joined::default();
    for name in names.by_ref() {
        if let Err(e) = append(&mut samples, &dir, name) {
            j.notes.push(format!("{e:#}"));
            j.left.push(name.clone());
            break;
        }
        if let Err(e) = dir.remove(name) {
            j.notes
                .push(format!("{e:#} (joined into samples: remove it)"));
        }
    }
    j.left.extend(names.cloned());
    for name in &j.left {
        let len = dir.open(name).and_then(|f| Ok(f.metadata()?.len()));
        j.left_bytes = j.left_bytes.saturating_add(len.unwrap_or(0));
    }
    if let Some(first) = j.left.first() {
        j.notes.push(format!(
            "{} chunks ({} bytes) of the stream's end, from {}, were not joined: they are not \
             in samples",
            j.left.len(),
            j.left_bytes,
            dir.path().join(first).display()
        ));
    } else if let Err(e) = out.remove_dir(CHUNK_DIR) {
        j.notes.push(format!("{e:#}"));
    }
    Ok(j)
}

/// Appends the chunk `name` of `dir` to `samples`; on an error `samples` is cut back to its
/// length before. Errors name both files.
fn append(samples: &mut File, dir: &SubDir, name: &str) -> Result<()> {
    let at = dir.path().join(name);
    let mut chunk = dir.open(name)?;
    let before = samples.seek(std::io::SeekFrom::End(0))?;
    let copied = std::io::copy(&mut chunk, samples);
    if let Err(e) = copied {
        let _ = samples.set_len(before);
        return Err(e).with_context(|| format!("appending {} to samples", at.display()));
    }
    Ok(())
}

/// The snapshots of a flight recording (SIGUSR1 or the file [`TRIGGER`]): `DIR/snapshot-N/`,
/// each a complete session of the chunks on disk when asked, while the recording goes on.
///
/// # Invariants
///
/// `chunks` is the recording's [`CHUNK_DIR`]; `info` its `session.json` as written at the start.
pub struct Snapshots {
    session: SubDir,
    oprofilefs: PathBuf,
    chunks: SubDir,
    info: SessionInfo,
    /// Bytes a snapshot needs free beyond what it writes, so that the ring can go on.
    room: u64,
    taken: u32,
    /// [`TRIGGER`] could not be removed (said once; it then asks for nothing).
    trigger_stuck: bool,
}

impl Snapshots {
    /// Snapshots of the recording into `out` (its chunk directory opened here) of a ring of
    /// `max` bytes, described by `info`; `oprofilefs` is where the module's files are mounted.
    /// A [`TRIGGER`] left in the directory (a session replaced with `--force`) is removed.
    pub fn new(
        out: &SessionDir,
        info: &SessionInfo,
        oprofilefs: &Path,
        max: u64,
    ) -> Result<Snapshots> {
        let session = out.handle()?;
        session.remove_if_present(TRIGGER)?;
        Ok(Snapshots {
            session,
            oprofilefs: oprofilefs.to_path_buf(),
            chunks: out.subdir(CHUNK_DIR)?,
            info: info.clone(),
            room: (max / CHUNKS)
                .saturating_mul(2)
                .saturating_add(SNAPSHOT_FILES),
            taken: 0,
            trigger_stuck: false,
        })
    }

    /// Whether the file [`TRIGGER`] asked for a snapshot since the last call: it is removed
    /// through the session directory's descriptor (a link itself, never what it points to).
    /// Only who can write into the session directory (0700: its owner) can ask. One that
    /// cannot be removed (a directory) is a warning, once, and asks for nothing.
    pub fn trigger_asked(&mut self) -> bool {
        if self.trigger_stuck {
            return false;
        }
        match self.session.remove_if_present(TRIGGER) {
            Ok(asked) => asked,
            Err(e) => {
                eprintln!("oprof record: warning: snapshot trigger ignored: {e:#}");
                self.trigger_stuck = true;
                false
            }
        }
    }

    /// Refuses a snapshot that could fill the disk (and so stop the recording): the free
    /// bytes must hold the chunks, their system files ([`SNAPSHOT_FILES`]) and two chunks more.
    fn check_room(&self) -> Result<()> {
        let mut need = self.room;
        for name in self.chunks.names()? {
            let len = self
                .chunks
                .open(&name)
                .and_then(|f| Ok(f.metadata()?.len()));
            need = need.saturating_add(len.unwrap_or(0));
        }
        let free = self.session.free_bytes()?;
        if free < need {
            bail!(
                "{free} bytes free in {}, {need} needed: the snapshot could fill the disk and \
                 stop the recording",
                self.session.path().display()
            );
        }
        Ok(())
    }

    /// Writes the next snapshot, `snapshot-N/`: the chunks in order (the one being written up
    /// to its last whole record; those older than a chunk dropped meanwhile are left out, so
    /// the stream kept is the recording's tail from a sync pass's start), the system's files as the end of a
    /// session writes them, and `session.json` (state `complete`, `ended_by` `snapshot`).
    /// Profiling goes on. Returns the directory, its samples and bytes. Errors name the file;
    /// the recording is not affected.
    pub fn take(&mut self) -> Result<(PathBuf, u64, u64)> {
        self.check_room()?;
        self.taken = self.taken.saturating_add(1);
        let mut out = self
            .session
            .new_session(&format!("snapshot-{}", self.taken))?;
        let path = out.path().to_path_buf();
        let (samples, bytes) = self.copy_chunks(&out)?;
        let fs = Fs::new(&self.oprofilefs);
        let c = collect_system(&fs, &out)?;
        let losses = Losses::of(&c.stats);
        let mut info = self.info.clone();
        info.state = State::Complete;
        info.stop = Time::now();
        info.duration_ns = info.stop.unix_ns.saturating_sub(info.start.unix_ns);
        info.ended_by = "snapshot".to_string();
        info.totals = Totals {
            samples,
            sample_received: losses.received,
            lost: losses.lost,
            not_taken: losses.not_taken,
            bytes,
            ..Totals::default()
        };
        info.notes = c.notes;
        info.notes.push(
            "a snapshot of a flight recording (SIGUSR1 or DIR/snapshot): samples holds the \
             stream's last chunks when asked; stats.json and the totals' sample_received and \
             lost count the whole recording up to it"
                .to_string(),
        );
        write_info(&out, &info)?;
        out.keep();
        Ok((path, samples, bytes))
    }

    /// Copies the chunks, oldest first, into `out`'s `samples`: their samples and bytes.
    fn copy_chunks(&self, out: &SessionDir) -> Result<(u64, u64)> {
        let mut samples = out.create(session::SAMPLES)?;
        let shown = out.path().join(session::SAMPLES);
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut prev: Option<u64> = None;
        for name in self.chunks.names()? {
            // A chunk dropped since the listing, or a number missing from it: the ring drops
            // the oldest first, so what was copied before is older than a gap. Start again
            // from here: a tail, from a pass's context.
            let opened = self.chunks.open(&name);
            let num = name.parse::<u64>().ok();
            let next = prev.and_then(|p| p.checked_add(1));
            if opened.is_err() || (prev.is_some() && num != next) {
                samples
                    .set_len(0)
                    .and_then(|()| samples.rewind())
                    .with_context(|| format!("truncating {}", shown.display()))?;
                (n, bytes) = (0, 0);
            }
            prev = num;
            let Ok(mut chunk) = opened else {
                prev = None;
                continue;
            };
            let at = self.chunks.path().join(&name);
            let (s, whole) = whole_records(&mut chunk, self.info.pointer_size)
                .with_context(|| format!("reading {}", at.display()))?;
            chunk
                .rewind()
                .and_then(|()| {
                    std::io::copy(&mut Read::by_ref(&mut chunk).take(whole), &mut samples)
                })
                .with_context(|| format!("copying {} to {}", at.display(), shown.display()))?;
            n = n.saturating_add(s);
            bytes = bytes.saturating_add(whole);
        }
        Ok((n, bytes))
    }
}

#[cfg(test)]
mod tests;
