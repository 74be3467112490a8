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
//!
//! A session gives at most `image_ids_max` ids (a setting; each pins a file and holds up to
//! [`PATH_MAX`] bytes of path until `buffer` closes) and [`TEXT_MAX`] bytes of `images` text:
//! a task mapping and unlinking files in a loop cannot grow kernel memory without bound. Past
//! either, [`ImageIds::id_of`] refuses with `ENOSPC` and its callers count the refusal in
//! `stats/image_ids_refused`. Lookups and
//! inserts are O(log n) (an rbtree keyed by the path identity).

use crate::bridge::user;
use crate::common::image;
use crate::stats::{self, Stats};
use kernel::fs::File;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::aref::ARef;

/// `PATH_MAX`: the longest path `d_path` returns, in bytes with the NUL.
const PATH_MAX: usize = 4096;

/// Bytes of `images` text a session may hold: 16 MiB (some 160000 lines of typical paths, 4096
/// of the longest), so that the text's buffer (grown by doubling) stays far below what
/// `kvrealloc` takes on a 32-bit board.
const TEXT_MAX: usize = 16 << 20;

/// One image: its id and the file reference that pins its path identity (the tree's key).
struct Entry {
    id: u32,
    _file: ARef<File>,
}

/// The id table of one open `buffer`.
///
/// # Invariants
///
/// `entries` maps each image's path identity (dentry, vfsmount addresses) to its entry, which
/// owns a reference to the file, so the key cannot be reused by another path while the table
/// lives. `text` holds one [`image::write_line`] line per entry, in id order, at most
/// [`TEXT_MAX`] bytes; ids are `1..next_id`, and `next_id - 1 <= max`.
pub(crate) struct ImageIds {
    entries: RBTree<(usize, usize), Entry>,
    text: KVVec<u8>,
    next_id: u32,
    /// `image_ids_max`: ids this table may give.
    max: u32,
    /// `d_path` scratch, [`PATH_MAX`] bytes.
    path: KVVec<u8>,
}

impl ImageIds {
    /// An empty table giving at most `max` ids. Errors: `ENOMEM`.
    pub(crate) fn new(max: u32) -> Result<Self> {
        let mut path = KVVec::new();
        path.resize(PATH_MAX, 0, GFP_KERNEL)?;
        Ok(ImageIds {
            entries: RBTree::new(),
            text: KVVec::new(),
            next_id: 1,
            max,
            path,
        })
    }

    /// The id of the path of `file`, creating it and its `images` line on first sight (the
    /// table then takes a reference to `file`). Process context.
    ///
    /// Errors: `ENOSPC` when the table already gives `image_ids_max` ids or its line would pass
    /// [`TEXT_MAX`] (the caller counts it: `image_ids_refused`); `ENOMEM`; `ENAMETOOLONG` from `d_path`; `EOVERFLOW` after
    /// `u32::MAX - 1` ids.
    pub(crate) fn id_of(&mut self, file: &File) -> Result<u32> {
        let key = user::file_key(file);
        if let Some(e) = self.entries.get(&key) {
            return Ok(e.id);
        }
        let id = self.next_id;
        if id > self.max {
            return Err(ENOSPC);
        }
        let next = id.checked_add(1).ok_or(EOVERFLOW)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let path = user::file_path(file, &mut self.path)?;
        let at_text = self.text.len();
        let end = at_text
            .checked_add(image::line_len(id, path))
            .ok_or(ENOMEM)?;
        if end > TEXT_MAX {
            return Err(ENOSPC);
        }
        self.text.resize(end, 0, GFP_KERNEL)?;
        // Cannot fail (exact length); never leave a line without its entry.
        if self
            .text
            .get_mut(at_text..)
            .and_then(|t| image::write_line(id, path, t))
            .is_none()
        {
            self.text.truncate(at_text);
            return Err(ENOMEM);
        }
        // INVARIANT: a key not in the tree, with its line, owning a new reference; the node
        // was allocated above, so the insert cannot fail.
        let entry = Entry {
            id,
            _file: ARef::from(file),
        };
        self.entries.insert(node.into_node(key, entry));
        self.next_id = next;
        Ok(id)
    }

    /// [`Self::id_of`] with its refusal counted in `stats/image_ids_refused`: `None` when the
    /// table is full. Errors: the other errors of [`Self::id_of`].
    pub(crate) fn id_or_refused(&mut self, file: &File, stats: &Stats) -> Result<Option<u32>> {
        match self.id_of(file) {
            Ok(id) => Ok(Some(id)),
            Err(e) if e == ENOSPC => {
                stats::inc(&stats.image_ids_refused);
                Ok(None)
            }
            Err(e) => Err(e),
        }
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
