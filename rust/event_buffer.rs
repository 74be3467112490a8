// SPDX-License-Identifier: GPL-2.0

//! The event buffer and the `buffer` file (legacy `drivers/oprofile/event_buffer.c`).
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
use crate::oprof;
use crate::oprofilefs;
use crate::profile_point::{define_profile_point, profile_point_time};
use core::ffi::c_int;
use kernel::bindings;
use kernel::prelude::*;
use kernel::uaccess::{UserPtr, UserSlice};

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
        Ok(EventBuffer { words, pos: 0, watershed_at: size - watershed, ready: false })
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
        let src = self.words.get(..n).ok_or(EINVAL)?;
        // SAFETY: `src` is a valid slice of `n` initialised `usize`s; viewing it as `n * WORD`
        // bytes is valid (`usize` has no padding and any alignment suffices for `u8`).
        let bytes = unsafe { core::slice::from_raw_parts(src.as_ptr().cast::<u8>(), n * WORD) };
        out.write_slice(bytes)?;
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

/// `open` of `buffer`: `EPERM` without CAP_SYS_ADMIN (legacy), `EINVAL` unless opened read-only
/// (`O_RDONLY`; legacy set up a whole session for a write-only open too, which could only be
/// a mistake), `EBUSY` if already open, otherwise [`oprof::Oprofile::setup`] (its errors:
/// `EINVAL` for bad sizes, `ENOMEM`, model errors). A refused open sets nothing up.
///
/// # Safety
///
/// Called by the VFS with valid `inode` and `file`.
unsafe extern "C" fn buffer_open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
    // SAFETY: FFI call without preconditions; checks the current task's capability.
    if !unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) } {
        return EPERM.to_errno();
    }
    // SAFETY: `file` is valid (our contract).
    let mode = unsafe { (*file).f_mode };
    if mode & (oprofilefs::FMODE_READ | oprofilefs::FMODE_WRITE) != oprofilefs::FMODE_READ {
        return EINVAL.to_errno();
    }
    let r = oprof::get().and_then(|o| o.setup());
    if let Err(e) = r {
        return e.to_errno();
    }
    // SAFETY: `inode` and `file` are valid (our contract). Makes the file a stream: no offsets,
    // lseek fails with ESPIPE (legacy: nonseekable_open).
    unsafe { bindings::stream_open(inode, file) }
}

/// `release` of `buffer`: stops profiling if running and frees the buffers (legacy order).
///
/// # Safety
///
/// Called by the VFS once per successful open.
unsafe extern "C" fn buffer_release(_inode: *mut bindings::inode, _file: *mut bindings::file) -> c_int {
    if let Ok(o) = oprof::get() {
        o.shutdown();
    }
    0
}

/// `read` of `buffer`. `count` must be a multiple of [`WORD`] (else `EINVAL`); blocks until the
/// buffer is ready (`EINTR` on a signal), then returns up to `count / WORD` words (0 possible).
///
/// # Safety
///
/// Called by the VFS with a user buffer `buf` of `count` bytes.
unsafe extern "C" fn buffer_read(
    _file: *mut bindings::file,
    buf: *mut c_char,
    count: usize,
    _ppos: *mut bindings::loff_t,
) -> isize {
    let mut out = UserSlice::new(UserPtr::from_ptr(buf.cast()), count).writer();
    match oprof::get().and_then(|o| o.read_buffer(&mut out, count)) {
        Ok(n) => n as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// File operations of `/dev/oprofile/buffer` (opened with `stream_open`: not seekable; `lseek`,
/// `pread` and `pwrite` fail with `ESPIPE`, `write` with `EBADF` as the file is read-only).
pub(crate) const BUFFER_FOPS: &bindings::file_operations =
    &oprofilefs::file_ops(Some(buffer_open), Some(buffer_release), Some(buffer_read), None);
