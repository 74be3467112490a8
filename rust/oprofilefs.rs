// SPDX-License-Identifier: GPL-2.0

//! oprofilefs: a small filesystem abstraction for the tree mounted on `/dev/oprofile` (legacy
//! `drivers/oprofile/oprofilefs.c`).
//!
//! As the kernel's `miscdevice` and `debugfs` abstractions do, a kind of file is a type that
//! implements [`OpFile`], and [`Dir::file`] installs a `file_operations` generated for that type
//! at compile time. Every operation receives the filesystem's context `C` (the profiler instance,
//! given to [`Registration::new`]) and the file's [`Key`] (which CPU, counter or statistic of its
//! kind the file shows), so files need no allocation and the code implementing them has no
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
use core::ffi::{c_int, c_ulong, c_void};
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
        key: c_ulong,
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

/// Which file of a kind a file is: `index` (a CPU id or counter number, below 2^24) and `item`
/// (a statistic or field of it). Kept in the inode's `i_private`; kinds that need neither use
/// [`Key::NONE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) index: u32,
    pub(crate) item: u8,
}

impl Key {
    /// The key of a kind with one file.
    pub(crate) const NONE: Key = Key { index: 0, item: 0 };

    /// The key of file `item` of `index`.
    pub(crate) const fn new(index: u32, item: u8) -> Key {
        Key { index, item }
    }

    /// The `i_private` word. Errors: `EINVAL` if `index` does not fit 24 bits.
    fn to_raw(self) -> Result<c_ulong> {
        if self.index >= 1 << 24 {
            return Err(EINVAL);
        }
        Ok(c_ulong::from(self.index) << 8 | c_ulong::from(self.item))
    }

    fn from_raw(raw: c_ulong) -> Key {
        // `c_ulong` is u32 on ARM, u64 on arm64; `to_raw` stored an index below 2^24.
        #[allow(clippy::unnecessary_cast)]
        Key {
            index: (raw >> 8) as u32,
            item: (raw & 0xff) as u8,
        }
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
pub(crate) struct Open(pub(crate) u32);

/// A kind of oprofilefs file over the context `C`. Each operation not implemented is absent
/// from the generated `file_operations` (a `write` then fails with `EINVAL` in the VFS).
#[vtable]
pub(crate) trait OpFile<C: Sync + 'static>: 'static {
    /// Opened with `stream_open` (no offsets: `lseek`, `pread`, `pwrite` fail with `ESPIPE`)
    /// instead of `default_llseek` seeking.
    const STREAM: bool = false;

    /// Called at open after the CAP_SYS_ADMIN check for writers; an error refuses the open.
    fn open(_ctx: &C, _key: Key, _access: Access) -> Result<Open> {
        Ok(Open::default())
    }

    /// Called at the last close of a successful open.
    fn release(_ctx: &C, _key: Key) {}

    /// Reads at `*pos` into `out`; returns the bytes written.
    fn read(
        _ctx: &C,
        _key: Key,
        _open: Open,
        _out: &mut UserSliceWriter,
        _pos: &mut Offset,
    ) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A command write: `input` is what was written (1..=[`MAX_WRITE`] bytes at offset 0).
    fn write(_ctx: &C, _key: Key, _input: &[u8]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A write whose data is not read (`dump`): any length at any offset; called for non-zero
    /// lengths only, and the write returns the whole length.
    fn write_any(_ctx: &C, _key: Key) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A value shown as `"%lu\n"` by [`Ro`] and [`Rw`] files.
pub(crate) trait Ulong<C>: 'static {
    /// The value of file `key`. Errors: as the value's owner says (`EINVAL` for a bad key).
    fn get(ctx: &C, key: Key) -> Result<u64>;
}

/// A writable [`Ulong`] (legacy `oprofilefs_ulong_from_user`).
pub(crate) trait UlongSetting<C>: Ulong<C> {
    /// The accepted values, inclusive; others get `EINVAL`.
    fn range(ctx: &C, key: Key) -> (u64, u64);
    /// Stores `value` (within [`Self::range`]). Errors: `EBUSY` while profiling runs (the
    /// "not while running" gate, checked under the lock that orders it with `enable`).
    fn set(ctx: &C, key: Key, value: u64) -> Result;
}

/// A read-only `"%lu\n"` file showing `T` (mode 0444 for the stats counters).
pub(crate) struct Ro<T>(PhantomData<T>);

#[vtable]
impl<C: Sync + 'static, T: Ulong<C>> OpFile<C> for Ro<T> {
    fn read(
        ctx: &C,
        key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_ulong(T::get(ctx, key)?, out, pos)
    }
}

/// A read-write `"%lu\n"` file of `T`: writes parse one number in `T`'s range (`EINVAL` for
/// junk or out of range; then `T::set`'s errors).
pub(crate) struct Rw<T>(PhantomData<T>);

#[vtable]
impl<C: Sync + 'static, T: UlongSetting<C>> OpFile<C> for Rw<T> {
    fn read(
        ctx: &C,
        key: Key,
        _open: Open,
        out: &mut UserSliceWriter,
        pos: &mut Offset,
    ) -> Result<usize> {
        read_ulong(T::get(ctx, key)?, out, pos)
    }

    fn write(ctx: &C, key: Key, input: &[u8]) -> Result {
        let (min, max) = T::range(ctx, key);
        let v = parse::parse_ulong_in(input, min, max).map_err(|_| EINVAL)?;
        T::set(ctx, key, v)
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

    /// The key of `inode` (its `i_private`, set by [`Dir::file`]).
    ///
    /// # Safety
    ///
    /// `inode` must be live.
    unsafe fn key(inode: *const bindings::inode) -> Key {
        // SAFETY: `inode` is live (our contract); `i_private` is never written after creation.
        Key::from_raw(unsafe { (*inode).i_private } as c_ulong)
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
        let (ctx, key) = unsafe { (Self::ctx(inode), Self::key(inode)) };
        let open = match T::open(ctx, key, access) {
            Ok(open) => open,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: `file` is being opened: `private_data` is ours. It holds a plain value.
        unsafe { (*file).private_data = core::ptr::without_provenance_mut(open.0 as usize) };
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
    /// Called by the VFS once per successful [`Self::open`].
    unsafe extern "C" fn release(inode: *mut bindings::inode, _file: *mut bindings::file) -> c_int {
        // SAFETY: As in `open`: the inode of an open file of this vtable is live.
        let (ctx, key) = unsafe { (Self::ctx(inode), Self::key(inode)) };
        T::release(ctx, key);
        0
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of this vtable, `buf` a user pointer of `count` bytes,
    /// `ppos` valid.
    unsafe extern "C" fn read(
        file: *mut bindings::file,
        buf: *mut c_char,
        count: usize,
        ppos: *mut bindings::loff_t,
    ) -> isize {
        // SAFETY: `file` is open (our contract), so `f_inode` is its live inode; `private_data`
        // holds the value `open` stored.
        let (ctx, key, open) = unsafe {
            let inode = (*file).f_inode;
            (
                Self::ctx(inode),
                Self::key(inode),
                Open((*file).private_data as usize as u32),
            )
        };
        let mut out = UserSlice::new(UserPtr::from_ptr(buf.cast()), count).writer();
        // SAFETY: `ppos` is valid and not aliased during the call (our contract).
        let pos = unsafe { &mut *ppos };
        match T::read(ctx, key, open, &mut out, pos) {
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
        // SAFETY: `ppos` is valid (our contract).
        if unsafe { *ppos } != 0 || count > MAX_WRITE {
            return EINVAL.to_errno() as isize;
        }
        if count == 0 {
            return 0;
        }
        // SAFETY: `file` is open (our contract), so `f_inode` is its live inode.
        let (ctx, key) = unsafe {
            let inode = (*file).f_inode;
            (Self::ctx(inode), Self::key(inode))
        };
        let mut data = [0u8; MAX_WRITE];
        let mut r = UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count).reader();
        let res = match data.get_mut(..count) {
            Some(input) => r.read_slice(input).and_then(|()| T::write(ctx, key, input)),
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
        let (ctx, key) = unsafe {
            let inode = (*file).f_inode;
            (Self::ctx(inode), Self::key(inode))
        };
        match T::write_any(ctx, key) {
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
    fn create(
        &self,
        name: &CStr,
        mode: u16,
        fops: Option<&'static bindings::file_operations>,
        key: Key,
    ) -> Result<*mut bindings::dentry> {
        let key = key.to_raw()?;
        // SAFETY: `self.dentry` is live (type invariants), `name` is NUL-terminated, `fops` is
        // `'static`; the shim copies the name.
        let d = unsafe {
            oprofilefs_shim_create(
                self.dentry,
                name.as_char_ptr(),
                mode,
                fops.map_or(core::ptr::null(), core::ptr::from_ref),
                key,
            )
        };
        kernel::error::from_err_ptr(d)
    }

    /// Creates the subdirectory `name` (mode 0755). Errors: `ENOMEM`.
    pub(crate) fn mkdir(&self, name: &CStr) -> Result<Dir<C>> {
        // INVARIANT: the shim returned a live directory dentry of the same superblock.
        Ok(Dir {
            dentry: self.create(name, 0o755, None, Key::NONE)?,
            _ctx: PhantomData,
        })
    }

    /// Creates the file `name` of kind `T` with permissions `mode`, showing `key`. Errors:
    /// `ENOMEM`; `EINVAL` for a key index of 2^24 or more.
    pub(crate) fn file<T: OpFile<C>>(&self, name: &CStr, mode: u16, key: Key) -> Result {
        self.create(name, mode, Some(&Vtable::<C, T>::VTABLE), key)
            .map(|_| ())
    }

    /// The subdirectory `<prefix><n>` (`cpu0`, `3`). Errors: as [`Self::mkdir`].
    pub(crate) fn mkdir_numbered(&self, prefix: &[u8], n: u32) -> Result<Dir<C>> {
        let mut name = [0u8; 16];
        self.mkdir(numbered_name(prefix, n, &mut name)?)
    }
}

/// Formats `<prefix><n>` as a C string into `buf`. Errors: `EINVAL` if it does not fit.
fn numbered_name<'a>(prefix: &[u8], n: u32, buf: &'a mut [u8; 16]) -> Result<&'a CStr> {
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
