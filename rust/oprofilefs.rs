// SPDX-License-Identifier: GPL-2.0

//! oprofilefs: a small filesystem abstraction for the tree mounted on `/dev/oprofile` (legacy
//! `drivers/oprofile/oprofilefs.c`).
//!
//! As the kernel's `miscdevice` and `debugfs` abstractions do, a kind of file is a type that
//! implements [`OpFile`], and [`Dir::file`] installs a `file_operations` generated for that type
//! at compile time. The type gives the file's mode ([`OpFile::MODE`]) and the type of its
//! identity ([`OpFile::Id`]: which CPU, counter or setting of its kind the file shows, `()` for a
//! kind with one file); [`Dir::file`] takes a value of that type, which the inode carries in
//! `i_private` (as debugfs's typed `i_private`, but a value of one word instead of a pointer:
//! it needs no storage and no lifetime). Every operation receives the filesystem's context `C`
//! (the profiler instance, given to [`Registration::new`]) and the file's id, so files need no
//! allocation, no lookup can land on another file, and the code implementing them has no
//! `unsafe`: the VFS pointers are handled here and in `oprofilefs_shim.c` only.
//!
//! The legacy kinds have ready-made types: [`Ro`] (read-only `"%lu\n"`, the stats counters),
//! [`Rw`] (an `unsigned long` with a range, written as in legacy `oprofilefs_ulong_from_user`),
//! command files (an [`OpFile::write`] gets the written bytes, at most [`MAX_WRITE`]), stream
//! files ([`OpFile::STREAM`], like `buffer`) and directories ([`Dir::mkdir`]). The tree itself is
//! declared in one place, `files.rs`.
//!
//! Rules every file gets from this layer (`Documentation/oprofilefs.rst`):
//! - Privilege: opening for writing needs CAP_SYS_ADMIN in the opener (`EPERM`), checked at open
//!   as Unix files are, so a privileged program cannot be made to write a file an unprivileged
//!   user opened (the kernel's rule for files, as `kallsyms` and `/dev/mem`). Legacy checked only
//!   `buffer`; its control files relied on 0644 root ownership, which root without CAP_SYS_ADMIN
//!   passes.
//! - Command writes: offset must be 0 and at most 49 bytes (legacy `TMPBUFSIZE - 1`), else
//!   `EINVAL`; `EFAULT` on a bad user pointer; a zero-length write at offset 0 does nothing and
//!   returns 0. Writing a file without a write operation is `EINVAL` (VFS).
//! - Reads of text files go through `simple_read_from_buffer` semantics ([`read_bytes`]).

use crate::common::parse;
use core::ffi::{c_int, c_void};
use core::marker::{PhantomData, PhantomPinned};
use core::ops::Deref;
use kernel::bindings;
use kernel::error::VTABLE_DEFAULT_ERROR;
use kernel::fs::file::Offset;
use kernel::prelude::*;
use kernel::uaccess::{UserPtr, UserSlice, UserSliceWriter};

// Only pointers to these bindgen structs cross (some have zero-sized members, which the lint
// flags); the C side defines them.
#[allow(improper_ctypes)]
extern "C" {
    fn oprofilefs_shim_register(
        ctx: *const c_void,
        fill: unsafe extern "C" fn(*const c_void, *mut bindings::dentry) -> c_int,
    ) -> c_int;
    fn oprofilefs_shim_unregister();
    fn oprofilefs_shim_create(
        parent: *mut bindings::dentry,
        name: *const c_char,
        mode: bindings::umode_t,
        fops: *const bindings::file_operations,
        private: *mut c_void,
    ) -> *mut bindings::dentry;
}

/// Largest accepted command write, in bytes (legacy `TMPBUFSIZE - 1`).
pub(crate) const MAX_WRITE: usize = 49;

/// `struct file::f_mode` bits (`include/linux/fs.h`; bindgen skips their `__force` casts).
const FMODE_READ: bindings::fmode_t = 1 << 0;
const FMODE_WRITE: bindings::fmode_t = 1 << 1;

/// Whether the current task has CAP_SYS_ADMIN (legacy `buffer` open check). Errors: none.
pub(crate) fn capable_sys_admin() -> bool {
    // SAFETY: FFI call without preconditions; checks the current task.
    unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) }
}

/// What tells a file from the others of its kind (a CPU, a counter, a setting): a value its
/// inode carries in `i_private`, as one word ([`OpFile::Id`]).
pub(crate) trait FileId: Copy + 'static {
    /// The `i_private` word of the file with this id.
    fn to_word(self) -> usize;

    /// The id whose [`Self::to_word`] is `word`. Errors: `EIO` for a word no id of this type
    /// makes (the word comes back from the VFS, so it is checked rather than trusted; no inode
    /// of the kind carries one).
    fn from_word(word: usize) -> Result<Self>;
}

/// The id of a kind with one file.
impl FileId for () {
    fn to_word(self) -> usize {
        0
    }

    fn from_word(word: usize) -> Result<()> {
        match word {
            0 => Ok(()),
            _ => Err(EIO),
        }
    }
}

/// A small number (a position in a table of at most 256 entries).
impl FileId for u8 {
    fn to_word(self) -> usize {
        self.into()
    }

    fn from_word(word: usize) -> Result<u8> {
        u8::try_from(word).map_err(|_| EIO)
    }
}

/// A number: a CPU id or a hardware counter number.
impl FileId for u16 {
    fn to_word(self) -> usize {
        self.into()
    }

    fn from_word(word: usize) -> Result<u16> {
        u16::try_from(word).map_err(|_| EIO)
    }
}

/// A number and a small number: file `.1` (a position in a table of at most 256 entries) of
/// CPU or counter `.0`.
impl FileId for (u16, u8) {
    fn to_word(self) -> usize {
        // Below 2^24: fits the 32-bit words of ARM.
        usize::from(self.0) << 8 | usize::from(self.1)
    }

    fn from_word(word: usize) -> Result<(u16, u8)> {
        let high = u16::try_from(word >> 8).map_err(|_| EIO)?;
        let low = u8::try_from(word & 0xff).map_err(|_| EIO)?;
        Ok((high, low))
    }
}

/// How a file is being opened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// What an open file remembers from its `open` (for `kpctl`: whether the opener may see kernel
/// addresses); kept in `private_data`, a plain value, not a reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Open(pub(crate) usize);

impl Open {
    /// The `private_data` word.
    fn to_private(self) -> *mut c_void {
        core::ptr::without_provenance_mut(self.0)
    }

    /// The value [`Self::to_private`] stored.
    fn from_private(p: *mut c_void) -> Open {
        Open(p.addr())
    }
}

/// A kind of oprofilefs file over the context `C`. Each operation not implemented is absent
/// from the generated `file_operations` (a `write` then fails with `EINVAL` in the VFS).
#[vtable]
pub(crate) trait OpFile<C: Sync + 'static>: 'static {
    /// The file's permission bits (0644, 0444, ...; owner root).
    const MODE: u16;

    /// What tells a file of this kind from the others (`()` for a kind with one file); every
    /// operation gets the file's.
    type Id: FileId;

    /// Opened with `stream_open` (no offsets: `lseek`, `pread`, `pwrite` fail with `ESPIPE`)
    /// instead of `default_llseek` seeking.
    const STREAM: bool = false;

    /// Called at open after the CAP_SYS_ADMIN check for writers; an error refuses the open.
    fn open(_ctx: &C, _id: Self::Id, _access: Access) -> Result<Open> {
        Ok(Open::default())
    }

    /// Called at the last close of a successful open.
    fn release(_ctx: &C, _id: Self::Id) {}

    /// Reads at `*pos` into `out`; returns the bytes written. A [`Self::STREAM`] file has no
    /// offset (the VFS passes none): `pos` is then a scratch 0, whatever the call makes of it
    /// is dropped.
    fn read(
        _ctx: &C,
        _id: Self::Id,
        _open: Open,
        _out: &mut UserSliceWriter,
        _pos: &mut Offset,
    ) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A command write: `input` is what was written (1..=[`MAX_WRITE`] bytes at offset 0).
    fn write(_ctx: &C, _id: Self::Id, _input: &[u8]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A write whose data is not read (`dump`): any length at any offset; called for non-zero
    /// lengths only, and the write returns the whole length.
    fn write_any(_ctx: &C, _id: Self::Id) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A value shown as `"%lu\n"` by [`Ro`] and [`Rw`] files.
pub(crate) trait Ulong<C>: 'static {
    /// Which value of its kind a file shows (as [`OpFile::Id`]).
    type Id: FileId;

    /// The value of file `id`. Errors: as the value's owner says.
    fn get(ctx: &C, id: Self::Id) -> Result<u64>;
}

/// A writable [`Ulong`] (legacy `oprofilefs_ulong_from_user`).
pub(crate) trait UlongSetting<C>: Ulong<C> {
    /// The accepted values, inclusive; others get `EINVAL`.
    fn range(ctx: &C, id: Self::Id) -> (u64, u64);
    /// Stores `value` (within [`Self::range`]). Errors: `EBUSY` while profiling runs (the
    /// "not while running" gate, checked under the lock that orders it with `enable`).
    fn set(ctx: &C, id: Self::Id, value: u64) -> Result;
}

/// A read-only `"%lu\n"` file showing `T`, mode `MODE` (legacy `oprofilefs_create_ro_ulong`:
/// 0444, the stats counters; `pointer_size` is 0644).
pub(crate) struct Ro<T, const MODE: u16 = 0o444>(PhantomData<T>);

#[vtable]
impl<C: Sync + 'static, T: Ulong<C>, const M: u16> OpFile<C> for Ro<T, M> {
    const MODE: u16 = M;
    type Id = T::Id;

    fn read(
        ctx: &C,
        id: T::Id,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_ulong(T::get(ctx, id)?, out, pos)
    }
}

/// A read-write `"%lu\n"` file of `T`, mode 0644 (legacy `oprofilefs_create_ulong`): reads as
/// [`Ro`]; writes parse one number in `T`'s range (`EINVAL` for junk or out of range; then
/// `T::set`'s errors).
pub(crate) struct Rw<T>(PhantomData<T>);

#[vtable]
impl<C: Sync + 'static, T: UlongSetting<C>> OpFile<C> for Rw<T> {
    const MODE: u16 = 0o644;
    type Id = T::Id;

    fn read(
        ctx: &C,
        id: T::Id,
        open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        <Ro<T> as OpFile<C>>::read(ctx, id, open, out, pos)
    }

    fn write(ctx: &C, id: T::Id, input: &[u8]) -> Result {
        let (min, max) = T::range(ctx, id);
        let v = parse::parse_ulong_in(input, min, max).map_err(|_| EINVAL)?;
        T::set(ctx, id, v)
    }
}

/// Reads `bytes` at `*pos` into `out` (legacy `simple_read_from_buffer`): 0 at or beyond the end
/// (also for offsets beyond `usize`). Errors: `EFAULT`.
pub(crate) fn read_bytes(
    bytes: &[u8],
    out: &mut UserSliceWriter,
    pos: &mut Offset,
) -> Result<usize> {
    out.write_slice_file(bytes, pos)
}

/// Reads `value` as `"%lu\n"` at `*pos` into `out`, as [`read_bytes`].
pub(crate) fn read_ulong(value: u64, out: &mut UserSliceWriter, pos: &mut Offset) -> Result<usize> {
    let mut num = [0u8; 21];
    read_bytes(parse::format_ulong(value, &mut num), out, pos)
}

/// The `file_operations` of kind `T` over context `C`.
struct Vtable<C, T>(PhantomData<(C, T)>);

impl<C: Tree, T: OpFile<C>> Vtable<C, T> {
    /// The context of the superblock `inode` belongs to.
    ///
    /// # Safety
    ///
    /// `inode` must be a live inode of an oprofilefs superblock whose registration has context
    /// type `C`.
    unsafe fn ctx<'a>(inode: *const bindings::inode) -> &'a C {
        // SAFETY: `inode` and its superblock are live (our contract); `s_fs_info` is the context
        // pointer `Registration<C>` registered (the shim's fill_super sets it), and the context
        // lives while the registration does, which outlives every superblock (a mount pins the
        // module, whose exit drops the registration).
        unsafe { &*(*(*inode).i_sb).s_fs_info.cast::<C>() }
    }

    /// The context and the id of the file of `inode` (its `i_private`, set by [`Dir::file`]).
    /// Errors: `EIO` if `i_private` is no id of `T` ([`FileId::from_word`]).
    ///
    /// # Safety
    ///
    /// As [`Self::ctx`].
    unsafe fn ctx_id<'a>(inode: *const bindings::inode) -> Result<(&'a C, T::Id)> {
        // SAFETY: `inode` is live (our contract); `i_private` is never written after creation.
        let word = unsafe { (*inode).i_private }.addr();
        // SAFETY: As ours.
        Ok((unsafe { Self::ctx(inode) }, T::Id::from_word(word)?))
    }

    /// # Safety
    ///
    /// Called by the VFS for a file of this vtable being opened, with its inode.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `file` is being opened (our contract): its mode is set.
        let mode = unsafe { (*file).f_mode };
        let access = Access {
            read: mode & FMODE_READ != 0,
            write: mode & FMODE_WRITE != 0,
        };
        // The opener is the current task.
        if access.write && !capable_sys_admin() {
            return EPERM.to_errno();
        }
        // SAFETY: `inode` is the live inode of an oprofilefs file of this vtable (our contract;
        // `Dir::file` installs it only below a `Registration<C>`).
        let ctx_id = unsafe { Self::ctx_id(inode) };
        let open = match ctx_id.and_then(|(ctx, id)| T::open(ctx, id, access)) {
            Ok(open) => open,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: `file` is being opened: `private_data` is ours. It holds a plain value.
        unsafe { (*file).private_data = open.to_private() };
        if T::STREAM {
            // SAFETY: `inode` and `file` are valid (our contract). Makes the file a stream: no
            // offsets, lseek fails with ESPIPE (legacy: nonseekable_open).
            unsafe { bindings::stream_open(inode, file) }
        } else {
            0
        }
    }

    /// # Safety
    ///
    /// Called by the VFS once per successful [`Self::open`] (so the id is valid: `open` read
    /// it).
    unsafe extern "C" fn release(inode: *mut bindings::inode, _file: *mut bindings::file) -> c_int {
        // SAFETY: As in `open`: the inode of an open file of this vtable is live.
        if let Ok((ctx, id)) = unsafe { Self::ctx_id(inode) } {
            T::release(ctx, id);
        }
        0
    }

    /// The file position the VFS passed: `None` for a stream file ([`OpFile::STREAM`]:
    /// `stream_open` cleared `FMODE_ATOMIC_POS` and the offset modes, so `ksys_read` and
    /// `ksys_write` pass a null `ppos`, `file_ppos`), else the position.
    ///
    /// # Safety
    ///
    /// `ppos` is null or valid and not aliased for `'a`.
    unsafe fn pos<'a>(ppos: *mut bindings::loff_t) -> Option<&'a mut Offset> {
        // SAFETY: Null or valid and unaliased for `'a` (our contract); `Offset` is `loff_t`.
        unsafe { ppos.as_mut() }
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of this vtable, `buf` a user pointer of `count` bytes,
    /// `ppos` null (a stream file) or valid and not aliased during the call.
    unsafe extern "C" fn read(
        file: *mut bindings::file,
        buf: *mut c_char,
        count: usize,
        ppos: *mut bindings::loff_t,
    ) -> isize {
        // SAFETY: `file` is open (our contract), so `f_inode` is its live inode.
        let (ctx, id) = match unsafe { Self::ctx_id((*file).f_inode) } {
            Ok(ctx_id) => ctx_id,
            Err(e) => return e.to_errno() as isize,
        };
        // SAFETY: `file` is open: `private_data` holds the value `open` stored.
        let open = Open::from_private(unsafe { (*file).private_data });
        let mut out = UserSlice::new(UserPtr::from_ptr(buf.cast()), count).writer();
        // A stream file has no offset: its reads see a scratch 0 (`OpFile::read`).
        let mut scratch: Offset = 0;
        // SAFETY: `ppos` is null or valid and not aliased during the call (our contract).
        let pos = unsafe { Self::pos(ppos) }.unwrap_or(&mut scratch);
        match T::read(ctx, id, open, &mut out, pos) {
            Ok(n) => n as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// A command write (module docs).
    ///
    /// # Safety
    ///
    /// As [`Self::read`].
    unsafe extern "C" fn write(
        file: *mut bindings::file,
        buf: *const c_char,
        count: usize,
        ppos: *mut bindings::loff_t,
    ) -> isize {
        // SAFETY: `ppos` is null or valid (our contract). A stream file has no offset: its
        // writes count as at 0.
        let at = unsafe { Self::pos(ppos) }.map_or(0, |p| *p);
        if at != 0 || count > MAX_WRITE {
            return EINVAL.to_errno() as isize;
        }
        if count == 0 {
            return 0;
        }
        // SAFETY: `file` is open (our contract), so `f_inode` is its live inode.
        let (ctx, id) = match unsafe { Self::ctx_id((*file).f_inode) } {
            Ok(ctx_id) => ctx_id,
            Err(e) => return e.to_errno() as isize,
        };
        let mut data = [0u8; MAX_WRITE];
        let mut r = UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count).reader();
        let res = match data.get_mut(..count) {
            Some(input) => r.read_slice(input).and_then(|()| T::write(ctx, id, input)),
            None => Err(EINVAL),
        };
        match res {
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// A write whose data is not read ([`OpFile::write_any`]).
    ///
    /// # Safety
    ///
    /// As [`Self::read`].
    unsafe extern "C" fn write_any(
        file: *mut bindings::file,
        _buf: *const c_char,
        count: usize,
        _ppos: *mut bindings::loff_t,
    ) -> isize {
        if count == 0 {
            return 0;
        }
        // SAFETY: `file` is open (our contract), so `f_inode` is its live inode.
        let ctx_id = unsafe { Self::ctx_id((*file).f_inode) };
        let res = ctx_id.and_then(|(ctx, id)| T::write_any(ctx, id));
        match res {
            // The VFS caps `count` at `MAX_RW_COUNT` (< isize::MAX).
            Ok(()) => isize::try_from(count).unwrap_or(isize::MAX),
            Err(e) => e.to_errno() as isize,
        }
    }

    const VTABLE: bindings::file_operations = bindings::file_operations {
        open: Some(Self::open),
        release: Some(Self::release),
        read: if T::HAS_READ { Some(Self::read) } else { None },
        write: if T::HAS_WRITE {
            Some(Self::write)
        } else if T::HAS_WRITE_ANY {
            Some(Self::write_any)
        } else {
            None
        },
        llseek: Some(bindings::default_llseek),
        owner: kernel::module::this_module::<C::Owner>().as_ptr(),
        ..pin_init::zeroed()
    };
}

/// A directory of a mounted oprofilefs, while `fill_super` builds the tree.
///
/// # Invariants
///
/// `dentry` is a live directory dentry of a superblock being filled for a `Registration<C>`.
pub(crate) struct Dir<C> {
    dentry: *mut bindings::dentry,
    _ctx: PhantomData<C>,
}

impl<C: Tree> Dir<C> {
    /// Creates the entry `name` with permissions `mode`: a directory if `fops` is `None`, else a
    /// file with those operations whose `i_private` is the word `id` (a [`FileId`], not a
    /// pointer). Errors: `ENOMEM`.
    fn create(
        &self,
        name: &CStr,
        mode: u16,
        fops: Option<&'static bindings::file_operations>,
        id: usize,
    ) -> Result<*mut bindings::dentry> {
        // SAFETY: `self.dentry` is live (type invariants), `name` is NUL-terminated, `fops` is
        // `'static`; the shim copies the name.
        let d = unsafe {
            oprofilefs_shim_create(
                self.dentry,
                name.as_char_ptr(),
                mode,
                fops.map_or(core::ptr::null(), core::ptr::from_ref),
                core::ptr::without_provenance_mut(id),
            )
        };
        kernel::error::from_err_ptr(d)
    }

    /// Creates the subdirectory `name` (mode 0755). Errors: `ENOMEM`.
    pub(crate) fn mkdir(&self, name: &CStr) -> Result<Dir<C>> {
        // INVARIANT: the shim returned a live directory dentry of the same superblock.
        Ok(Dir {
            dentry: self.create(name, 0o755, None, 0)?,
            _ctx: PhantomData,
        })
    }

    /// Creates the file `name` of kind `T` (mode [`OpFile::MODE`]) showing `id`. Errors:
    /// `ENOMEM`.
    pub(crate) fn file<T: OpFile<C>>(&self, name: &CStr, id: T::Id) -> Result {
        self.create(name, T::MODE, Some(&Vtable::<C, T>::VTABLE), id.to_word())
            .map(|_| ())
    }

    /// The subdirectory `<prefix><n>` (`cpu0`, `3`). Errors: as [`Self::mkdir`].
    pub(crate) fn mkdir_numbered(&self, prefix: &[u8], n: u16) -> Result<Dir<C>> {
        let mut name = [0u8; 16];
        self.mkdir(numbered_name(prefix, n, &mut name)?)
    }
}

/// Formats `<prefix><n>` as a C string into `buf`. Errors: `EINVAL` if it does not fit.
fn numbered_name<'a>(prefix: &[u8], n: u16, buf: &'a mut [u8; 16]) -> Result<&'a CStr> {
    let mut digits = [0u8; 21];
    let d = parse::format_ulong(n.into(), &mut digits);
    let d = d.get(..d.len().saturating_sub(1)).ok_or(EINVAL)?; // without the newline
    let p = prefix.len();
    let end = p + d.len();
    buf.get_mut(..p).ok_or(EINVAL)?.copy_from_slice(prefix);
    buf.get_mut(p..end).ok_or(EINVAL)?.copy_from_slice(d);
    *buf.get_mut(end).ok_or(EINVAL)? = 0;
    CStr::from_bytes_with_nul(buf.get(..=end).ok_or(EINVAL)?).map_err(|_| EINVAL)
}

/// The context of an oprofilefs: what every file operation receives, and how the tree is built.
pub(crate) trait Tree: Sync + Sized + 'static {
    /// The module whose code the files run (`file_operations::owner`: an open file pins it).
    type Owner: kernel::ModuleMetadata;

    /// Builds the tree below `root` at mount time (when the superblock is created).
    fn fill(&self, root: &Dir<Self>) -> Result;
}

/// Called by the shim's `fill_super` with the new root directory.
///
/// # Safety
///
/// `ctx` must be the context pointer a live `Registration<C>` registered; `root` the live root
/// dentry of a superblock being filled.
unsafe extern "C" fn fill_root<C: Tree>(ctx: *const c_void, root: *mut bindings::dentry) -> c_int {
    // SAFETY: `ctx` points to the registration's live context (our contract).
    let ctx = unsafe { &*ctx.cast::<C>() };
    // INVARIANT: `root` is a live directory dentry of a superblock being filled for `C`.
    match ctx.fill(&Dir {
        dentry: root,
        _ctx: PhantomData,
    }) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The registered filesystem type `oprofilefs`, owning `inner`, which leads to the context the
/// files see (`W` derefs to it: the context itself behind another registration that owns it, as
/// the module's `ModuleNotifier<Oprofile>`). Pinned in place (the module's `InPlaceModule`);
/// on drop the filesystem is unregistered before `inner` goes. One may exist at a time (the
/// shim's `file_system_type` is static; a second initialisation fails with `EBUSY`, leaving the
/// first intact).
///
/// # Invariants
///
/// From initialisation until drop the filesystem is registered with the address of `*inner`'s
/// target as its context; `inner` is pinned and never mutated, so that address stays valid.
#[pin_data(PinnedDrop)]
pub(crate) struct Registration<C: Tree, W: Deref<Target = C> + Sync + 'static> {
    #[pin]
    inner: W,
    #[pin]
    _pin: PhantomPinned,
}

impl<C: Tree, W: Deref<Target = C> + Sync + 'static> Registration<C, W> {
    /// Initialises `inner`, then registers `oprofilefs`, whose files will see `*inner`.
    /// Errors: `inner`'s; `EBUSY` while another is registered or if the name is taken (then
    /// `inner` is dropped).
    pub(crate) fn new(inner: impl PinInit<W, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            inner <- inner,
            _pin: {
                // SAFETY: `this` points to the slot being initialised, whose `inner` was
                // initialised above (fields initialise in order) and is pinned; the shared
                // reference lives only for this block, in which nothing writes the slot (the
                // `Pin<&mut W>` binding pin-init made for `inner` is not used).
                let inner = unsafe { &(*this.as_ptr()).inner };
                let ctx: *const C = &**inner;
                // SAFETY: FFI call; the shim's file_system_type is static. The context stays valid
                // while registered: `inner` is pinned here until `drop` unregisters.
                kernel::error::to_result(unsafe { oprofilefs_shim_register(ctx.cast(), fill_root::<C>) })?;
                // INVARIANT: registered above with `*inner`'s target.
                PhantomPinned
            },
        }? Error)
    }

    /// The context.
    pub(crate) fn ctx(&self) -> &C {
        &self.inner
    }
}

#[pinned_drop]
impl<C: Tree, W: Deref<Target = C> + Sync + 'static> PinnedDrop for Registration<C, W> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Registered at initialisation (type invariants). No superblock exists (a mount
        // pins the module, and only module exit or a failed init drops this), so no file
        // operation can reach the context after this.
        unsafe { oprofilefs_shim_unregister() };
    }
}
