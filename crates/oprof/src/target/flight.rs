//! The flight recorder of `oprof record --max-size`: the stream kept in a ring of chunk files,
//! the oldest whole chunk dropped when the kept ones pass the size, so that an always-on
//! recording holds the last minutes, in bounded disk, whatever its length (perf's
//! `--overwrite`, with whole chunks instead of a ring of pages).
//!
//! A chunk must decode without the chunks before it. The reader takes `buffer` whole at each
//! read (a read of `buffer_size` words, under the module's event buffer mutex, which every sync
//! pass holds), so a read holds whole sync passes, and every pass over a CPU's buffer starts
//! with CPU_SWITCH and the full context ([`stream::context_prefix`]). A chunk therefore starts
//! only at a read whose words begin with that context; a read that does not (the stream's
//! first, or one after an event buffer overflow) goes on in the open chunk. Image ids stay
//! valid across chunks: the module never reuses one, and `images` is written at the end.
//!
//! Files: `samples.d/NNNNNNNNNN` while recording (0600, [`SubDir`]); when the recording ends,
//! [`assemble`] joins the kept chunks, in order, into `samples`, so the session is read like
//! any other.

use super::record::count_samples;
use super::session_dir::{SessionDir, SubDir};
use crate::input::session;
use crate::input::stream;
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;

/// The chunk directory of a session, while recording.
pub const CHUNK_DIR: &str = "samples.d";

/// Chunks that `--max-size` is divided into: a chunk closes once it holds `max / CHUNKS`
/// bytes, so the kept stream is between `max - max / CHUNKS` and `max` bytes, plus the open
/// chunk.
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
    /// Whether a read began a chunk (a stream no read of which started a sync pass's context
    /// stays in one chunk, however long).
    pub cut: bool,
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
        }
    }

    /// Writes one read of `buffer` (`data`: whole sync passes). The open chunk is closed first
    /// when it has reached its size and `data` starts a pass's context; then the oldest closed
    /// chunks are dropped while the closed ones hold more than `max`. Returns the bytes
    /// written and the error that stopped the writing (a full disk, a chunk that cannot be
    /// created).
    pub fn put(&mut self, data: &[u8]) -> (usize, Option<std::io::Error>) {
        let full = self.open.as_ref().is_some_and(|o| o.2 >= self.chunk);
        if self.open.is_none() || (full && self.starts_context(data)) {
            if self.open.is_some() {
                self.cut = true;
            }
            if let Err(e) = self.begin() {
                return (0, Some(e));
            }
        }
        let Some((_, file, bytes)) = self.open.as_mut() else {
            return (0, Some(std::io::ErrorKind::NotFound.into()));
        };
        let (n, err) = super::record::write_counted(file, data);
        *bytes += n as u64;
        (n, err)
    }

    /// Whether `data` starts with a sync pass's context.
    fn starts_context(&self, data: &[u8]) -> bool {
        // The context is a few records: its words are within the first 64.
        let head = &data[..data.len().min(64 * self.word_bytes)];
        let words: Vec<u64> = stream::le_words(head, self.word_bytes).collect();
        stream::context_prefix(&words, self.word_bytes).is_some()
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
        if let Some((name, mut file, bytes)) = self.open.take() {
            let _ = file.flush();
            self.closed.push_back((name, bytes));
        }
        Kept {
            names: self.closed.into_iter().map(|(n, _)| n).collect(),
            dropped: self.dropped,
            cut: self.cut,
        }
    }
}

/// Joins the chunks `kept` of `out`'s [`CHUNK_DIR`], in order, into `samples` (the first is
/// renamed, the others appended and removed one by one: the disk holds one chunk more than the
/// stream at most) and removes the chunk directory. Errors name the file at fault; the chunks
/// not joined stay in [`CHUNK_DIR`].
pub fn assemble(out: &SessionDir, kept: &Kept) -> Result<()> {
    let dir = out.subdir(CHUNK_DIR)?;
    let mut names = kept.names.iter();
    match names.next() {
        Some(first) => out.take_from(&dir, first, session::SAMPLES)?,
        None => drop(out.create(session::SAMPLES)?),
    }
    let mut samples = out.open_rw(session::SAMPLES)?;
    let shown = out.path().join(session::SAMPLES);
    for name in names {
        let mut chunk = dir.open(name)?;
        std::io::Seek::seek(&mut samples, std::io::SeekFrom::End(0))
            .and_then(|_| std::io::copy(&mut chunk, &mut samples))
            .with_context(|| {
                format!(
                    "appending {} to {}",
                    dir.path().join(name).display(),
                    shown.display()
                )
            })?;
        dir.remove(name)?;
    }
    drop(dir);
    out.remove_dir(CHUNK_DIR)
}

#[cfg(test)]
mod tests;
