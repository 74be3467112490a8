// SPDX-License-Identifier: GPL-2.0

//! Image ids: what legacy dcookies were (`fs/dcookies.c`, removed in Linux 5.12), without the
//! `lookup_dcookie` syscall.
//!
//! `buffer_sync` asks [`ImageIds::id_of`] for the id of every mapped file a sample points into
//! (and of every task's executable). The first time a path is seen it gets the next id (1, 2,
//! ...) and a line `ID PATH` is appended to the text of the oprofilefs `images` file (format:
//! [`crate::common::image`]); the table keeps a reference to that file, pinning its dentry and
//! vfsmount like a dcookie did, so the key stays unique until the table is dropped at `buffer`
//! close. Ids are therefore stable for the lifetime of the open buffer, and a path is taken
//! exactly once, when its id is created.

use crate::bridge::user;
use crate::common::image;
use kernel::fs::File;
use kernel::prelude::*;
use kernel::sync::aref::ARef;

/// `PATH_MAX`: the longest path `d_path` returns, in bytes with the NUL.
const PATH_MAX: usize = 4096;

/// One image: its path identity (dentry, vfsmount addresses), id and the file reference that
/// pins them.
struct Entry {
    key: (usize, usize),
    id: u32,
    _file: ARef<File>,
}

/// The id table of one open `buffer`.
///
/// # Invariants
///
/// `entries` is sorted by `key` without duplicates; each entry owns a reference to its file, so
/// its `key` cannot be reused by another path while the table lives. `text`
/// holds one [`image::write_line`] line per entry, in id order; ids are `1..next_id`.
pub(crate) struct ImageIds {
    entries: KVec<Entry>,
    text: KVVec<u8>,
    next_id: u32,
    /// `d_path` scratch, [`PATH_MAX`] bytes.
    path: KVVec<u8>,
}

impl ImageIds {
    /// An empty table. Errors: `ENOMEM`.
    pub(crate) fn new() -> Result<Self> {
        let mut path = KVVec::new();
        path.resize(PATH_MAX, 0, GFP_KERNEL)?;
        Ok(ImageIds {
            entries: KVec::new(),
            text: KVVec::new(),
            next_id: 1,
            path,
        })
    }

    /// The id of the path of `file`, creating it and its `images` line on first sight (the
    /// table then takes a reference to `file`). Process context.
    ///
    /// Errors: `ENOMEM`; `ENAMETOOLONG` from `d_path`; `EOVERFLOW` after `u32::MAX - 1` ids.
    pub(crate) fn id_of(&mut self, file: &File) -> Result<u32> {
        let key = user::file_key(file);
        let at = match self.entries.binary_search_by_key(&key, |e| e.key) {
            Ok(i) => return self.entries.get(i).map(|e| e.id).ok_or(EINVAL),
            Err(at) => at,
        };
        let id = self.next_id;
        if id == u32::MAX {
            return Err(EOVERFLOW);
        }
        let path = user::file_path(file, &mut self.path)?;
        let at_text = self.text.len();
        let end = at_text
            .checked_add(image::line_len(id, path))
            .ok_or(ENOMEM)?;
        self.entries.reserve(1, GFP_KERNEL)?;
        self.text.resize(end, 0, GFP_KERNEL)?;
        // Neither can fail (exact length, capacity reserved); never leave a line without entry.
        let written = self
            .text
            .get_mut(at_text..)
            .and_then(|t| image::write_line(id, path, t));
        // INVARIANT: inserted at its sorted position with its line, owning a new reference.
        let entry = Entry {
            key,
            id,
            _file: ARef::from(file),
        };
        if written.is_none() || self.entries.insert_within_capacity(at, entry).is_err() {
            self.text.truncate(at_text);
            return Err(ENOMEM);
        }
        self.next_id = id + 1;
        Ok(id)
    }

    /// The `images` file: one `ID PATH\n` line per id, in id order.
    pub(crate) fn text(&self) -> &[u8] {
        &self.text
    }

    /// Takes the text out, for showing after the table is gone.
    pub(crate) fn take_text(&mut self) -> KVVec<u8> {
        core::mem::take(&mut self.text)
    }
}
