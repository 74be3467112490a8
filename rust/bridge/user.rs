// SPDX-License-Identifier: GPL-2.0

//! User mappings and files, through `sample_shim.c`: the speculative VMA lookup of the sampling
//! interrupt (`mmap_lock_speculate_*`, `get_file_active`), the locked one at sync time, a
//! task's executable, and a file's path identity and name (`f_path`, `d_path`). The kernel
//! crate (7.3) has `vma_lookup` but no VMA file or page offset, and no `struct path` access.
//! References the shim takes arrive here as `ARef`s, so they are released by their owner's drop.

use crate::common::sync::file_offset;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::ffi::{c_int, c_void};
use kernel::fs::File;
use kernel::mm::{MmWithUser, MmWithUserAsync};
use kernel::prelude::*;
use kernel::sync::aref::ARef;

use super::shim_bindings::{
    oprofile_shim_exe_file_irq, oprofile_shim_exec_maps, oprofile_shim_file_key,
    oprofile_shim_file_path, oprofile_shim_user_lookup_irq, oprofile_shim_user_lookup_mm,
    oprofile_vma as Vma, OPROFILE_LOOKUP_ANON, OPROFILE_LOOKUP_FILE, OPROFILE_LOOKUP_NO_MM,
    OPROFILE_LOOKUP_RETRY,
};

/// Results of `oprofile_shim_user_lookup_*` (`sample_shim.h`), as the shims return them.
const LOOKUP_FILE: c_int = OPROFILE_LOOKUP_FILE as c_int;
const LOOKUP_ANON: c_int = OPROFILE_LOOKUP_ANON as c_int;
// OPROFILE_LOOKUP_NONE: no mapping contains the PC.
const LOOKUP_NO_MM: c_int = OPROFILE_LOOKUP_NO_MM as c_int;
const LOOKUP_RETRY: c_int = OPROFILE_LOOKUP_RETRY as c_int;

/// Where a user PC is.
pub(crate) enum Lookup {
    /// In a file mapping: the file (referenced) and the PC's offset in it, `(vm_pgoff <<
    /// PAGE_SHIFT) + pc - vm_start`; `exec`: the mapping is `VM_EXEC`.
    File {
        file: ARef<File>,
        offset: usize,
        exec: bool,
    },
    /// In anonymous memory.
    Anon { exec: bool },
    /// In no mapping.
    NoMapping,
    /// The task has no mm.
    NoMm,
    /// The mm was being changed at that instant (interrupt lookup only): look up again under
    /// `mmap_lock` ([`mm_get_irq`], [`lookup_mm`]).
    Retry,
}

/// Takes ownership of a file reference the shim handed over (`None` for null).
///
/// # Safety
///
/// `file` must be null or a `struct file *` on which the caller owns a reference, which moves
/// into the result, taken from a reference that stays held elsewhere meanwhile (a VMA's
/// `vm_file`, an mm's `exe_file`), so that no `fdget_pos` can have skipped `f_pos_lock` on it.
unsafe fn owned_file(file: *mut bindings::file) -> Option<ARef<File>> {
    // SAFETY: A referenced, live file whose reference moves into the `ARef` (our contract);
    // `File` is `repr(transparent)` over `struct file`. `File`'s other invariant holds: the
    // mapping or mm owned a second reference when ours was taken, so `file_count > 1` and
    // `fdget_pos` takes `f_pos_lock` (`kernel::fs::File`).
    NonNull::new(file.cast::<File>()).map(|f| unsafe { ARef::from_raw(f) })
}

/// The result of a shim lookup that returned `r` with `file` and `vma` for `pc`.
///
/// # Safety
///
/// `file` must be null or referenced by the caller, the reference moving into the result.
unsafe fn lookup_result(r: c_int, file: *mut bindings::file, vma: &Vma, pc: usize) -> Lookup {
    // SAFETY: Our contract; a reference not put into the result drops here.
    let file = unsafe { owned_file(file) };
    match (r, file) {
        (LOOKUP_FILE, Some(file)) => Lookup::File {
            file,
            offset: file_offset(pc, vma.start, vma.pgoff, kernel::page::PAGE_SHIFT as u32),
            exec: vma.exec,
        },
        (LOOKUP_ANON, _) => Lookup::Anon { exec: vma.exec },
        (LOOKUP_NO_MM, _) => Lookup::NoMm,
        (LOOKUP_RETRY, _) => Lookup::Retry,
        // LOOKUP_NONE (or FILE without a file, which the shim never returns).
        _ => Lookup::NoMapping,
    }
}

/// Looks user `pc` up in the current task's mm without locks (any context; never sleeps).
pub(crate) fn lookup_irq(pc: usize) -> Lookup {
    let mut file = core::ptr::null_mut();
    let mut vma = Vma::default();
    // SAFETY: Valid out-pointers; the shim takes no lock and does not sleep.
    let r = unsafe { oprofile_shim_user_lookup_irq(pc, &mut file, &mut vma) };
    // SAFETY: The shim referenced `file` for LOOKUP_FILE and left it null otherwise.
    unsafe { lookup_result(r, file, &vma, pc) }
}

/// The current task's mapping that contains a user stack pointer, for reading the stack
/// ([`stack_end_irq`]).
pub(crate) enum StackEnd {
    /// The end (exclusive) of a mapping that is readable and no device memory: the stack's
    /// top.
    End(usize),
    /// A mapping a read must not touch: not `VM_READ`, or device memory (`VM_IO`,
    /// `VM_PFNMAP`, `VM_MIXEDMAP`: a driver's MMIO, where a load may have side effects or, on
    /// arm64, raise a fatal external abort).
    Refused,
    /// No mapping contains it, the task has no mm, or its mm is being changed.
    Unknown,
}

/// Where the current task's mapping that contains user address `addr` (a stack pointer) ends,
/// if its memory may be read ([`StackEnd`]); looked up without locks (any context; never
/// sleeps).
pub(crate) fn stack_end_irq(addr: usize) -> StackEnd {
    let mut file = core::ptr::null_mut();
    let mut vma = Vma::default();
    // SAFETY: Valid out-pointers; the shim takes no lock and does not sleep.
    let r = unsafe { oprofile_shim_user_lookup_irq(addr, &mut file, &mut vma) };
    // SAFETY: The shim referenced `file` for LOOKUP_FILE and left it null otherwise; the
    // reference drops here.
    match unsafe { lookup_result(r, file, &vma, addr) } {
        Lookup::File { .. } | Lookup::Anon { .. } if vma.plain => StackEnd::End(vma.end),
        Lookup::File { .. } | Lookup::Anon { .. } => StackEnd::Refused,
        _ => StackEnd::Unknown,
    }
}

/// Looks user `pc` up in `mm` under its `mmap_lock` (process context; sleeps). Never
/// [`Lookup::Retry`].
pub(crate) fn lookup_mm(mm: &MmWithUser, pc: usize) -> Lookup {
    let mut file = core::ptr::null_mut();
    let mut vma = Vma::default();
    // SAFETY: `mm` has users (its type); valid out-pointers.
    let r = unsafe { oprofile_shim_user_lookup_mm(mm.as_raw(), pc, &mut file, &mut vma) };
    // SAFETY: As in `lookup_irq`.
    unsafe { lookup_result(r, file, &vma, pc) }
}

/// One executable file mapping of an mm ([`exec_maps`]): virtual `start..end`, the file
/// offset of `start` in bytes (`vm_pgoff << PAGE_SHIFT`, wrapping), and the file.
pub(crate) struct ExecMap {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) offset: usize,
    pub(crate) file: ARef<File>,
}

/// Calls `f` with each executable file mapping of `mm`, in address order, until it returns
/// false, under `mmap_lock` for reading (process context; sleeps; `f` must not take
/// `mmap_lock`). Errors: `EINTR` when a fatal signal interrupted the wait for the lock.
pub(crate) fn exec_maps(mm: &MmWithUser, mut f: impl FnMut(ExecMap) -> bool) -> Result {
    let mut ctx: &mut dyn FnMut(ExecMap) -> bool = &mut f;
    // SAFETY: `mm` has users (its type); `ctx` is a `&mut dyn FnMut` live across the
    // synchronous call, as `exec_map` expects.
    let r = unsafe { oprofile_shim_exec_maps(mm.as_raw(), Some(exec_map), (&raw mut ctx).cast()) };
    if r < 0 {
        return Err(Error::from_errno(r));
    }
    Ok(())
}

/// One mapping of [`exec_maps`].
///
/// # Safety
///
/// `ctx` must point to a live `&mut dyn FnMut(ExecMap) -> bool`, not otherwise borrowed; `file`
/// must be a live file, referenced by its mapping for the duration of the call.
unsafe extern "C" fn exec_map(
    ctx: *mut c_void,
    start: usize,
    end: usize,
    pgoff: usize,
    file: *mut bindings::file,
) -> bool {
    // SAFETY: Our contract.
    let f = unsafe { &mut *ctx.cast::<&mut dyn FnMut(ExecMap) -> bool>() };
    // SAFETY: `file` is live for the call (our contract); the mapping holds a reference, so
    // `fdget_pos` cannot have skipped `f_pos_lock` on it (`File`'s invariant).
    let file: ARef<File> = unsafe { File::from_raw_file(file) }.into();
    let offset = pgoff.wrapping_shl(kernel::page::PAGE_SHIFT as u32);
    f(ExecMap {
        start,
        end,
        offset,
        file,
    })
}

/// The current task's mm with a user reference dropped by `mmput_async` (so any context may
/// drop it); `None` for a task without mm or whose mm is exiting.
pub(crate) fn mm_get_irq() -> Option<ARef<MmWithUserAsync>> {
    let mm = kernel::current!().mm()?.mmget_not_zero()?;
    Some(MmWithUser::into_mmput_async(mm))
}

/// The current task's executable, referenced; `None` for kernel threads or while it is being
/// replaced (any context; never sleeps).
pub(crate) fn exe_file_irq() -> Option<ARef<File>> {
    // SAFETY: FFI call without preconditions; it hands over a reference or null.
    unsafe { owned_file(oprofile_shim_exe_file_irq()) }
}

/// The identity of `file`'s path (what a dcookie was): its dentry and vfsmount addresses,
/// stable while a reference to the file is held.
pub(crate) fn file_key(file: &File) -> (usize, usize) {
    let (mut dentry, mut mnt) = (0usize, 0usize);
    // SAFETY: `file` is live (borrowed); valid out-pointers.
    unsafe { oprofile_shim_file_key(file.as_ptr(), &mut dentry, &mut mnt) };
    (dentry, mnt)
}

/// The absolute path of `file` (`d_path`, relative to the caller's root), written into `buf`;
/// the path's bytes, without NUL. Errors: `ENAMETOOLONG` when it does not fit `buf`.
pub(crate) fn file_path<'a>(file: &File, buf: &'a mut [u8]) -> Result<&'a [u8]> {
    let len = c_int::try_from(buf.len()).map_err(|_| EINVAL)?;
    let mut start: c_int = 0;
    // SAFETY: `file` is live; `buf` is writable for `len` bytes.
    let n =
        unsafe { oprofile_shim_file_path(file.as_ptr(), buf.as_mut_ptr().cast(), len, &mut start) };
    let n = usize::try_from(n).map_err(|_| Error::from_errno(n.min(-1)))?;
    let start = usize::try_from(start).map_err(|_| EINVAL)?;
    buf.get(start..start.checked_add(n).ok_or(EINVAL)?)
        .ok_or(EINVAL)
}
