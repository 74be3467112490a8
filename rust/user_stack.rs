// SPDX-License-Identifier: GPL-2.0

//! User-stack snapshots: the registers and a copy of the live user stack per sample, for
//! call chains of code without frame pointers (Thumb-2 and `-O2` code as distributions build
//! it), unwound later by `oprof` from the images' `.ARM.exidx`/`.debug_frame`/`.eh_frame`
//! (perf's `--call-graph dwarf` way; no legacy counterpart).
//!
//! Enabled by `user_stack_size` (bytes) together with `backtrace_depth`. Each CPU has a
//! [`StackPool`] of preallocated [`UserStack`] buffers, as many as 4 MiB holds (256 to 2048,
//! [`event::stack_pool_buffers`]): the sampling interrupt takes a free one,
//! fills it ([`StackPool::take`]) and queues it with its sample; `buffer_sync` writes it as a
//! USER_STACK record (after a USER_MAPS record of the task's executable mappings, once per
//! task and CPU pass: [`MapsWritten`]) and gives it back ([`StackPool::give_back`]). No
//! allocation happens in the interrupt. What is counted (global `stats/`):
//!
//! - `user_stack_no_buffer`: no free buffer (the sync pass has not caught up);
//! - `user_stack_sync_wake`: a sync pass queued at once because a take left the pool with
//!   half its buffers or fewer (the caller queues it: [`Taken::low`]), as the
//!   event buffer's watershed wakes its reader, so a pass that fell behind its interval does
//!   not leave the pool empty until the next one;
//! - `user_stack_fault`: the stack could not be read (no mapping at sp, a page not present);
//!   the sample keeps an empty buffer, which the sync pass gives back (nothing is freed in the
//!   interrupt);
//! - `user_stack_refused`: sp is in a mapping that must not be read from the interrupt: not
//!   `VM_READ`, or device memory (`VM_IO`, `VM_PFNMAP`, `VM_MIXEDMAP`: a driver's MMIO, where
//!   up to `user_stack_size` bytes of loads could have side effects, or abort on arm64);
//!   nothing is read, the sample keeps an empty buffer as for a fault;
//! - `user_stack_lost`: the record did not fit the event buffer, or the task's mappings could
//!   not be listed.
//!
//! A sample without its snapshot keeps its frame-pointer chain; nothing is guessed.

use crate::bridge::user::StackEnd;
use crate::bridge::{self, regs::Regs, ring::Ring, user};
use crate::common::event::USER_MAPS_MAX as MAX_MAPS;
pub(crate) use crate::common::event::USER_STACK_SIZE_MAX;
use crate::common::event::{
    self, USER_MAPS_ENTRY, USER_MAPS_HEADER, USER_REGS, USER_REGS_SP, USER_STACK_HEADER,
};
use crate::common::sync::EventSink;
use crate::image_ids::ImageIds;
use crate::stats::{self, Stats};
use kernel::mm::MmWithUserAsync;
use kernel::prelude::*;
use kernel::sync::aref::ARef;

/// What [`StackPool::take`] got: the snapshot, if a buffer was free, and whether the pool is
/// now at or below its low watermark (the caller should queue a sync pass).
pub(crate) struct Taken {
    /// The snapshot (empty if the stack could not be read), or `None` without a free buffer.
    pub(crate) stack: Option<KBox<UserStack>>,
    /// The pool is low.
    pub(crate) low: bool,
}

/// One snapshot: the USER_STACK record's words, written in place (header, registers, stack),
/// and a reference to the task's mm for its USER_MAPS record.
///
/// # Invariants
///
/// `words.len() == USER_STACK_HEADER + stack words`, fixed at allocation; `len <=
/// words.len()` words of it form the record.
pub(crate) struct UserStack {
    words: KVec<usize>,
    len: usize,
    tgid: i32,
    mm: Option<ARef<MmWithUserAsync>>,
}

impl UserStack {
    fn new(stack_words: usize) -> Result<KBox<Self>> {
        let n = stack_words.checked_add(USER_STACK_HEADER).ok_or(EINVAL)?;
        let mut words = KVec::with_capacity(n, GFP_KERNEL)?;
        words.resize(n, 0, GFP_KERNEL)?;
        Ok(KBox::new(
            UserStack {
                words,
                len: 0,
                tgid: 0,
                mm: None,
            },
            GFP_KERNEL,
        )?)
    }

    /// Fills the snapshot with user registers `uregs` and the current task's stack above their
    /// sp (interrupt context); leaves it empty (`len` 0) when the stack cannot be read, or
    /// must not be: sp in a mapping that is not readable or is device memory
    /// ([`StackEnd::Refused`], nothing read).
    fn fill(&mut self, uregs: &[usize; USER_REGS], tgid: i32) -> Filled {
        self.len = 0;
        let sp = uregs[USER_REGS_SP];
        let stack_end = match bridge::user::stack_end_irq(sp) {
            StackEnd::End(end) => end,
            StackEnd::Refused => return Filled::Refused,
            StackEnd::Unknown => return Filled::Fault,
        };
        let room = self.words.len().saturating_sub(USER_STACK_HEADER);
        let n = room.min(stack_end.saturating_sub(sp) / core::mem::size_of::<usize>());
        let len = USER_STACK_HEADER + n;
        let Some((head, stack)) = self
            .words
            .get_mut(..len)
            .map(|w| w.split_at_mut(USER_STACK_HEADER))
        else {
            return Filled::Fault;
        };
        if !bridge::regs::read_user_words(sp, stack) {
            return Filled::Fault;
        }
        let (code, regs) = head.split_at_mut(3);
        code.copy_from_slice(&event::user_stack_header(n));
        regs.copy_from_slice(uregs);
        self.len = len;
        self.tgid = tgid;
        self.mm = bridge::user::mm_get_irq();
        Filled::Ok
    }
}

/// What [`UserStack::fill`] did.
enum Filled {
    /// The snapshot holds the stack.
    Ok,
    /// The stack could not be read (`user_stack_fault`).
    Fault,
    /// The stack pointer is in memory that must not be read (`user_stack_refused`).
    Refused,
}

/// One CPU's free snapshot buffers: taken by its sampling interrupt, given back by the sync
/// pass ([`Ring`]: one consumer and one producer at a time).
///
/// # Invariants
///
/// `low` is half the buffers the pool was made with.
pub(crate) struct StackPool {
    free: Ring<KBox<UserStack>>,
    /// Free buffers at or below which a take asks for a sync pass at once: half the pool, so
    /// the periodic pass alone refills a pool that keeps up (100 ms of samples at 1,000/s is
    /// 100) and only a pass that fell behind by half the pool is hurried.
    low: u32,
}

impl StackPool {
    /// Buffers of `stack_words` words, as many as [`event::stack_pool_buffers`] gives for them
    /// and a CPU ring of `ring_capacity` samples. Errors: `ENOMEM`, `EINVAL` (no buffers).
    pub(crate) fn new(stack_words: usize, ring_capacity: u32) -> Result<Self> {
        let words = stack_words.checked_add(USER_STACK_HEADER).ok_or(EINVAL)?;
        let bytes = words
            .checked_mul(core::mem::size_of::<usize>())
            .ok_or(EINVAL)?;
        let n = event::stack_pool_buffers(bytes, ring_capacity);
        let free = Ring::new(n)?;
        for _ in 0..n {
            free.push(UserStack::new(stack_words)?)
                .map_err(|_| EINVAL)?;
        }
        // INVARIANT: half of the `n` buffers.
        Ok(StackPool { free, low: n / 2 })
    }

    /// A snapshot of the user context of `regs` (interrupt context); `None` for a kernel
    /// thread, else the [`Taken`] snapshot: none (counted in `stats`) without a free buffer. A
    /// stack that cannot be read is counted and gives an empty snapshot, which the sync pass
    /// writes nothing for and gives back: nothing is freed here (the pool's ring may refuse a
    /// second producer, and a hard interrupt must not `kfree`: SLUB's slow path takes a
    /// sleeping lock on PREEMPT_RT, which lockdep reports as an invalid wait context).
    pub(crate) fn take(&self, stats: &Stats, regs: &Regs, tgid: i32) -> Option<Taken> {
        let uregs = regs.user_regs()?;
        let Some(mut buf) = self.free.pop() else {
            stats::inc(&stats.user_stack_no_buffer);
            return Some(Taken {
                stack: None,
                low: true,
            });
        };
        match buf.fill(&uregs, tgid) {
            Filled::Ok => {}
            Filled::Fault => stats::inc(&stats.user_stack_fault),
            Filled::Refused => stats::inc(&stats.user_stack_refused),
        }
        Some(Taken {
            stack: Some(buf),
            low: self.free.published_len() <= self.low,
        })
    }

    /// Returns a written snapshot's buffer (process context, under the event buffer mutex).
    pub(crate) fn give_back(&self, mut buf: KBox<UserStack>) {
        buf.mm = None;
        buf.len = 0;
        let _ = self.free.push(buf);
    }
}

/// The address spaces whose USER_MAPS record was written in the current pass over one CPU (a
/// record stays valid until the next CPU_SWITCH), by task and mm: an `exec` gives the task a new
/// mm, whose mappings are written again. (A snapshot holds its mm, so an mm address cannot be
/// reused while a snapshot of it waits.)
pub(crate) struct MapsWritten {
    written: KVec<(i32, usize)>,
}

impl MapsWritten {
    /// None yet. Allocates when the first task is added.
    pub(crate) fn new() -> Self {
        MapsWritten {
            written: KVec::new(),
        }
    }

    /// Writes `stack` to `sink`, preceded by its task's USER_MAPS record unless written in this
    /// pass. Process context (lists the mappings under `mmap_lock`). Counts what is lost.
    pub(crate) fn write(
        &mut self,
        stack: &UserStack,
        images: &mut ImageIds,
        sink: &mut impl EventSink,
        stats: &Stats,
    ) {
        if stack.len == 0 {
            // Empty: the stack could not be read (counted in `user_stack_fault`).
            return;
        }
        let Some(mm) = &stack.mm else {
            return stats::inc(&stats.user_stack_lost);
        };
        let key = (stack.tgid, mm.as_raw() as usize);
        if !self.written.contains(&key) {
            match maps_record(mm, stack.tgid, images, stats) {
                Ok(words) if sink.write_group(&words) => {
                    // Not remembered (ENOMEM): the record is written again next time.
                    let _ = self.written.push(key, GFP_KERNEL);
                }
                _ => return stats::inc(&stats.user_stack_lost),
            }
        }
        if !stack
            .words
            .get(..stack.len)
            .is_some_and(|w| sink.write_group(w))
        {
            stats::inc(&stats.user_stack_lost);
        }
    }
}

/// The USER_MAPS record of `mm` (task `tgid`): its executable file mappings with image ids. A
/// mapping whose image gets no id (`image_ids_max` reached: counted in `image_ids_refused`) is
/// left out: the host unwinds no frame through it. Errors: `EINTR`, `ENOMEM`, or an image
/// that cannot be named.
fn maps_record(
    mm: &MmWithUserAsync,
    tgid: i32,
    images: &mut ImageIds,
    stats: &Stats,
) -> Result<KVec<usize>> {
    let mut maps = KVec::new();
    let mut err = Ok(());
    user::exec_maps(mm, |m| {
        err = maps.push(m, GFP_KERNEL).map_err(Error::from);
        err.is_ok() && maps.len() < MAX_MAPS
    })?;
    err?;
    let mut words =
        KVec::with_capacity(USER_MAPS_HEADER + USER_MAPS_ENTRY * maps.len(), GFP_KERNEL)?;
    // The header's count is set once the refused mappings are known.
    words.extend_from_slice(&event::user_maps_header(tgid as usize, 0), GFP_KERNEL)?;
    let mut n = 0;
    for m in &maps {
        let Some(id) = images.id_or_refused(&m.file, stats)? else {
            continue;
        };
        words.extend_from_slice(&[m.start, m.end, m.offset, id as usize], GFP_KERNEL)?;
        n += 1;
    }
    if let Some(h) = words.get_mut(..USER_MAPS_HEADER) {
        h.copy_from_slice(&event::user_maps_header(tgid as usize, n));
    }
    Ok(words)
}
