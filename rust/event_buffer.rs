// SPDX-License-Identifier: GPL-2.0

//! The event buffer (legacy `drivers/oprofile/event_buffer.c`); its file, `buffer`, is
//! `files::Buffer`.
//!
//! `buffer_size` native words (`unsigned long`) filled by `buffer_sync` in the legacy word format
//! and drained by the reader of `/dev/oprofile/buffer`. A reader blocks until the buffer is
//! *ready*: the fill level reached `buffer_size - buffer_watershed`, or `dump` was written, or
//! profiling stopped.
//!
//! Differences from legacy, on purpose: a read may ask for any multiple of the word size (legacy
//! required exactly `buffer_size` words; that still works) and gets whole words, oldest first,
//! the rest staying queued; records are never split (see `common::sync`).

use crate::common::sync::EventSink;
use crate::profile_point::{define_profile_point, profile_point_time};
use kernel::prelude::*;

// Profile point: copies of the event buffer to a `buffer` reader (`read_to_user`).
define_profile_point!(BUFFER_READ, "buffer_read");

/// Size of one event word in bytes (`pointer_size`).
pub(crate) const WORD: usize = core::mem::size_of::<usize>();

/// The words waiting for the reader.
///
/// # Invariants
///
/// `pos <= words.len()`; `watershed_at <= words.len()`.
pub(crate) struct EventBuffer {
    words: KVVec<usize>,
    pos: usize,
    watershed_at: usize,
    ready: bool,
}

impl EventBuffer {
    /// Allocates `size` words; the reader is woken when `size - watershed` are filled.
    ///
    /// Errors: `EINVAL` if `watershed >= size` (legacy `alloc_event_buffer`); `ENOMEM`.
    pub(crate) fn new(size: usize, watershed: usize) -> Result<Self> {
        if watershed >= size {
            return Err(EINVAL);
        }
        let mut words = KVVec::with_capacity(size, GFP_KERNEL)?;
        words.resize(size, 0, GFP_KERNEL)?;
        Ok(EventBuffer {
            words,
            pos: 0,
            watershed_at: size - watershed,
            ready: false,
        })
    }

    /// Wakes the reader even if the watershed was not reached (dump, stop).
    pub(crate) fn mark_ready(&mut self) {
        self.ready = true;
    }

    /// Whether a blocked reader should return.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }

    /// Copies up to `max_words` of the oldest words to `out` and removes them.
    ///
    /// Returns the number of bytes written. Errors: `EFAULT` from the copy, in which case the
    /// words stay queued.
    pub(crate) fn read_to_user(
        &mut self,
        out: &mut kernel::uaccess::UserSliceWriter,
        max_words: usize,
    ) -> Result<usize> {
        profile_point_time!(BUFFER_READ);
        let n = max_words.min(self.pos);
        out.write_slice(self.words.get(..n).ok_or(EINVAL)?.as_bytes())?;
        self.words.copy_within(n..self.pos, 0);
        self.pos -= n;
        self.ready = self.pos > 0;
        Ok(n * WORD)
    }
}

impl EventSink for EventBuffer {
    fn write_group(&mut self, group: &[usize]) -> bool {
        let end = match self.pos.checked_add(group.len()) {
            Some(end) if end <= self.words.len() => end,
            _ => return false,
        };
        if let Some(dst) = self.words.get_mut(self.pos..end) {
            dst.copy_from_slice(group);
            self.pos = end;
        }
        if self.pos >= self.watershed_at {
            self.ready = true;
        }
        true
    }
}
