//! [`Expanding`]: the expansion of [`super::expand`] as a reader, in bounded memory. The
//! stream is read in blocks, its records decoded and fed to an [`Expander`] one by one (a
//! record cut by a block's end waits for the next block), and the output words are handed out
//! as little-endian bytes once no later record can change them. Memory is then the unwind
//! tables, one block and the open chain, whatever the stream's length.

use super::expand::{Expander, Expansion};
use super::ImageTables;
use crate::input::stream::{check_size, describe, le_words};
use oprofile_common::event::{
    user_stack_header_words, DecodeError, Decoder, MAX_RECORD_WORDS, USER_MAPS_ENTRY,
    USER_MAPS_HEADER, USER_MAPS_MAX, USER_STACK_SIZE_MAX,
};
use std::io::{self, Read};

/// Bytes read at a time by default (as the validator and the snapshot scan read).
pub const BLOCK_BYTES: usize = 1 << 20;

/// Reads the stream `r` and yields it with its snapshots unwound, as [`super::expand::expand`]
/// returns it, as little-endian words of the stream's size. Errors (`io::ErrorKind::Other`):
/// the reader's, a stream of a partial number of words ([`check_size`]'s message), and decode
/// errors described with their byte offset in the input stream ([`describe`]); after an error
/// the reader is not to be read again.
///
/// # Invariants
/// `carry` holds the input words from absolute index `pos` on that are not decoded yet (the
/// start of a record the block cut); `out[out_at..]` are output bytes not handed out yet;
/// `x` is `None` once the input ended, and then `stats` is set.
pub struct Expanding<'a, R> {
    r: R,
    x: Option<Expander<'a>>,
    word_bytes: usize,
    block: Vec<u8>,
    carry: Vec<u64>,
    pos: usize,
    /// Input bytes read so far.
    read: u64,
    out: Vec<u8>,
    out_at: usize,
    /// Final output words of the last block, before they become bytes.
    words: Vec<u64>,
    stats: Option<Expansion>,
}

impl<'a, R: Read> Expanding<'a, R> {
    /// Expands the stream `r` of `word_bytes`-byte words read `block_words` words at a time (at
    /// least 1; [`BLOCK_BYTES`] normally); `depth` and `load` as in [`super::expand::expand`].
    pub fn new(
        r: R,
        word_bytes: usize,
        depth: Option<usize>,
        load: &'a mut dyn FnMut(u64) -> Option<ImageTables>,
        block_words: usize,
    ) -> Self {
        Expanding {
            r,
            x: Some(Expander::new(word_bytes, depth, load)),
            word_bytes,
            block: vec![0; block_words.max(1).saturating_mul(word_bytes)],
            carry: Vec::new(),
            pos: 0,
            read: 0,
            out: Vec::new(),
            out_at: 0,
            words: Vec::new(),
            stats: None,
        }
    }

    /// What the expansion did, once the whole stream was read (`None` before).
    pub fn into_stats(self) -> Option<Expansion> {
        self.stats
    }

    /// Reads and expands the next block into `out`.
    fn fill(&mut self) -> io::Result<()> {
        let mut n = 0;
        while n < self.block.len() {
            match self.r.read(&mut self.block[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.read = self.read.saturating_add(n as u64);
        let wb = self.word_bytes;
        self.carry.extend(le_words(&self.block[..n / wb * wb], wb));
        let eof = n < self.block.len();
        if eof {
            check_size(self.read, wb).map_err(|e| io::Error::other(e.to_string()))?;
        }
        self.decode(eof)?;
        if eof {
            if let Some(x) = self.x.take() {
                let (rest, stats) = x.finish();
                self.words.extend(rest);
                self.stats = Some(stats);
            }
        }
        self.out.clear();
        self.out_at = 0;
        for w in self.words.drain(..) {
            self.out.extend_from_slice(&w.to_le_bytes()[..wb]);
        }
        Ok(())
    }

    /// Feeds the whole records of `carry` to the expander and takes its final words; at the
    /// end of the input (`eof`) a record left incomplete is an error.
    fn decode(&mut self, eof: bool) -> io::Result<()> {
        let wb = self.word_bytes;
        let Some(x) = self.x.as_mut() else {
            return Ok(());
        };
        let mut used = 0;
        for item in Decoder::new(&self.carry, wb) {
            match item {
                Ok((at, rec)) => {
                    let end = at.saturating_add(rec.words());
                    x.record(&rec, self.carry.get(at..end).unwrap_or(&[]));
                    used = end;
                }
                Err(DecodeError::Truncated { word, need }) if !eof => {
                    if need > longest_record(wb) {
                        let at = self.pos.saturating_add(word).saturating_mul(wb);
                        return Err(io::Error::other(format!(
                            "record at byte offset {at} of {need} words, longer than any ({})",
                            longest_record(wb)
                        )));
                    }
                    used = word;
                    break;
                }
                Err(e) => {
                    let words = usize::try_from(self.read / wb as u64).unwrap_or(usize::MAX);
                    return Err(io::Error::other(describe(shift(e, self.pos), wb, words)));
                }
            }
        }
        self.carry.drain(..used);
        self.pos = self.pos.saturating_add(used);
        x.take_final(&mut self.words);
        Ok(())
    }
}

impl<R: Read> Read for Expanding<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.out_at >= self.out.len() {
            if self.x.is_none() {
                return Ok(0);
            }
            self.fill()?;
        }
        let rest = &self.out[self.out_at..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.out_at += n;
        Ok(n)
    }
}

/// The most words a record of a `word_bytes`-byte stream takes: a USER_STACK record of the
/// module's largest stack, or a USER_MAPS record of the most mappings. A record claiming more
/// is never awaited (its words would be held until the stream ends).
pub(crate) fn longest_record(word_bytes: usize) -> usize {
    let stack = user_stack_header_words(word_bytes) + USER_STACK_SIZE_MAX as usize / word_bytes;
    let maps = USER_MAPS_HEADER + USER_MAPS_MAX * USER_MAPS_ENTRY;
    stack.max(maps).max(MAX_RECORD_WORDS)
}

/// `e` with its word index moved on by `by` words.
fn shift(e: DecodeError, by: usize) -> DecodeError {
    match e {
        DecodeError::Truncated { word, need } => DecodeError::Truncated {
            word: word.saturating_add(by),
            need,
        },
        DecodeError::UnknownCode { word, code } => DecodeError::UnknownCode {
            word: word.saturating_add(by),
            code,
        },
        DecodeError::BadCtxSwitch { word } => DecodeError::BadCtxSwitch {
            word: word.saturating_add(by),
        },
    }
}

/// Checks that [`Expanding`] gives what [`super::expand::expand`] gives for `words` (output
/// bytes and stats, or the error's message), read in blocks of every size from 1 to 40 words:
/// records are cut at every seam, USER_STACK records across many blocks.
#[cfg(test)]
pub(super) fn assert_streams_alike(
    words: &[u64],
    wb: usize,
    depth: Option<usize>,
    load: &mut dyn FnMut(u64) -> Option<ImageTables>,
) {
    let whole = super::expand::expand(words, wb, depth, load).map(|(out, stats)| {
        let bytes: Vec<u8> = out
            .iter()
            .flat_map(|w| w.to_le_bytes()[..wb].to_vec())
            .collect();
        (bytes, stats)
    });
    let input: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes()[..wb].to_vec())
        .collect();
    for block in 1..=40 {
        let mut x = Expanding::new(io::Cursor::new(&input), wb, depth, load, block);
        let mut got = Vec::new();
        let streamed = match x.read_to_end(&mut got) {
            Ok(_) => Ok((got, x.into_stats().expect("stats at the end"))),
            Err(e) => Err(e.to_string()),
        };
        assert!(streamed == whole, "blocks of {block} words: {streamed:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::Expanding;
    use std::io::{Cursor, Read};

    fn read_all(bytes: &[u8], block: usize) -> Result<Vec<u8>, String> {
        let load = &mut |_| None;
        let mut x = Expanding::new(Cursor::new(bytes), 4, Some(16), load, block);
        let mut out = Vec::new();
        x.read_to_end(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn bad_input_is_refused_with_its_offset() {
        // A CPU_SWITCH and a sample, then half a word.
        let words: [u32; 5] = [!0, 2, 0, 0x1000, 1];
        let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(
            read_all(&b, 2).unwrap(),
            b,
            "no snapshot: the stream as it is"
        );
        b.extend([0, 0]);
        let e = read_all(&b, 2).unwrap_err();
        assert!(
            e.contains("22 bytes is not a whole number of 4-byte words"),
            "{e}"
        );
        // A USER_STACK of 100000 stack words (3 + 17 + 100000 in all) at byte offset 20: refused
        // before it is read, whatever the stream's length, not held in memory.
        let mut b: Vec<u8> = [!0u32, 2, 0, 0x1000, 1, !0, 33, 100_000]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        b.extend(vec![0; 4 * 64]);
        let e = read_all(&b, 8).unwrap_err();
        assert_eq!(
            e,
            "record at byte offset 20 of 100020 words, longer than any (4116)"
        );
        // At the end of the stream, the decoder's own message.
        let e = read_all(&b, 1 << 10).unwrap_err();
        assert!(
            e.starts_with("truncated record at byte offset 20: needs 100020 words"),
            "{e}"
        );
    }
}
