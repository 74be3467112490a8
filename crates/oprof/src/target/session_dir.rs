//! The session directory of `oprof record`, written as root on a shared machine: private (the
//! directory and `root/`'s directories 0700, every file 0600: a session holds raw user-stack
//! bytes and kernel addresses) and never written through a path someone else could change.
//!
//! [`SessionDir::prepare`] checks the output path once (`lstat`: no symbolic link; an existing
//! directory must be owned by the effective user and writable by nobody else), creates it (0700)
//! if absent, and opens it once (`O_DIRECTORY|O_NOFOLLOW`). Everything after goes through that
//! descriptor: files are only created new (`openat` with `O_CREAT|O_EXCL|O_NOFOLLOW`, 0600),
//! directories with `mkdirat` (0700), archive paths are walked one component at a time
//! (`O_DIRECTORY|O_NOFOLLOW`, no `..`), and an old session (`--force`) or a failed run's files are
//! removed with `unlinkat`, never following a link. [`private_umask`] sets umask 077 for the
//! rest of the process (CMD gets the caller's umask back, [`with_caller_umask`]).

use anyhow::{anyhow, bail, Context, Result};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, AtFlags, OFlag, AT_FDCWD};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, umask, FileStat, Mode, SFlag};
use nix::unistd::{fsync, geteuid, unlinkat, UnlinkatFlags};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Mode of the session directory and of the directories under it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every session file.
pub const FILE_MODE: u32 = 0o600;
/// Directory levels below the session directory that a removal descends (an archived path has
/// at most `PATH_MAX / 2` components; deeper is refused with ELOOP).
const MAX_DEPTH: usize = 2048;

/// The caller's umask before [`private_umask`] (`u32::MAX`: not set).
static CALLER_UMASK: AtomicU32 = AtomicU32::new(u32::MAX);

/// Sets umask 077 for the rest of the process, so that nothing `oprof record` creates (also
/// outside [`SessionDir`]) is readable by others; the first caller's umask is kept for
/// [`with_caller_umask`].
pub fn private_umask() {
    let old = umask(Mode::from_bits_truncate(0o077));
    let _ = CALLER_UMASK.compare_exchange(u32::MAX, old.bits(), Ordering::SeqCst, Ordering::SeqCst);
}

/// Runs `f` (the spawn of the profiled command) with the umask the caller had before
/// [`private_umask`], then sets 077 again: the command creates its files as it would without
/// oprof. (Not a `pre_exec` hook: that makes std fork instead of `posix_spawn`, and its
/// `fork` path needs `AF_UNIX` sockets, which minimal kernels lack.) Files of the session keep
/// 0600 meanwhile: their modes are set explicitly.
pub fn with_caller_umask<T>(f: impl FnOnce() -> T) -> T {
    let mask = CALLER_UMASK.load(Ordering::SeqCst);
    if mask == u32::MAX {
        return f();
    }
    umask(Mode::from_bits_truncate(mask));
    let r = f();
    umask(Mode::from_bits_truncate(0o077));
    r
}

/// The `std::io::Error` of `e` (its text: "File exists (os error 17)").
fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// The file type bits of `st`.
fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// `name` as one path component: no `/`, not empty, `.` or `..`. Errors name it.
fn plain_name(name: &str) -> Result<&OsStr> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        bail!("{name:?}: not a plain file name");
    }
    Ok(OsStr::new(name))
}

/// The session directory while `oprof record` writes it: every access goes through the
/// descriptor opened by [`SessionDir::prepare`]. Dropped armed (before [`SessionDir::keep`]),
/// it removes what the run made: its content, and the directory itself unless it existed
/// before (that one is left empty with its old mode), so a failed run leaves nothing that looks
/// like a session.
///
/// # Invariants
///
/// `dir` is the directory `name` of `parent`, opened without following a link, owned by the
/// effective user, mode [`DIR_MODE`] (unless changed by the same user since). `path` is how the
/// user named it, for messages only.
#[derive(Debug)]
pub struct SessionDir {
    path: PathBuf,
    parent: OwnedFd,
    name: OsString,
    dir: OwnedFd,
    /// The permission bits of a directory that was there before; `None`: created here.
    existed: Option<u32>,
    armed: bool,
}

impl SessionDir {
    /// Makes `path` an empty private directory and opens it: creates it (0700, and missing
    /// parents), or takes an empty directory, or with `force` clears an old session there.
    /// Errors (one line naming `path`): a symbolic link, a non-directory, a directory not owned
    /// by the effective user or writable by group or others, a directory with other content, an
    /// old session without `force`, or a directory that cannot be created or written.
    pub fn prepare(path: &Path, force: bool) -> Result<SessionDir> {
        let shown = path.display();
        let (parent_path, name) = split(path)?;
        let cannot = || format!("cannot create the session directory {shown}");
        std::fs::create_dir_all(&parent_path).with_context(cannot)?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let parent = openat(AT_FDCWD, &parent_path, flags, Mode::empty())
            .map_err(io)
            .with_context(cannot)?;
        let existed = match fstatat(&parent, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if kind(&st) == SFlag::S_IFLNK => bail!(
                "{shown} is a symbolic link; a session is written only into a real directory (give another -o)"
            ),
            Ok(st) if kind(&st) != SFlag::S_IFDIR => bail!("{shown} exists and is not a directory"),
            Ok(st) => Some(st.st_mode & 0o7777),
            Err(Errno::ENOENT) => {
                mkdirat(&parent, name.as_os_str(), Mode::from_bits_truncate(DIR_MODE))
                    .map_err(io)
                    .with_context(cannot)?;
                None
            }
            Err(e) => return Err(io(e)).with_context(cannot),
        };
        let nofollow = flags | OFlag::O_NOFOLLOW;
        let dir = openat(&parent, name.as_os_str(), nofollow, Mode::empty())
            .map_err(io)
            .with_context(|| format!("opening the session directory {shown}"))?;
        check_private(&fstat(&dir).map_err(io)?, path)?;
        let mut sd = SessionDir {
            path: path.to_path_buf(),
            parent,
            name,
            dir,
            existed,
            armed: false,
        };
        sd.empty_it(force)?;
        sd.armed = true;
        // Root passes permission bits; a read-only filesystem still fails here.
        let probe = ".oprof-probe";
        let writable = sd.create(probe).and_then(|_| {
            unlinkat(&sd.dir, probe, UnlinkatFlags::NoRemoveDir).map_err(|e| anyhow!(io(e)))
        });
        writable
            .and_then(|()| {
                fchmod(&sd.dir, Mode::from_bits_truncate(DIR_MODE)).map_err(|e| anyhow!(io(e)))
            })
            .with_context(|| format!("cannot write in the session directory {shown}"))?;
        Ok(sd)
    }

    /// Empties a directory that was there before: nothing to do when empty; an old session is
    /// removed with `force`, refused without; other content is refused.
    fn empty_it(&mut self, force: bool) -> Result<()> {
        let shown = self.path.display();
        if self.existed.is_none() || entries(self.dir.as_fd()).map_err(io)?.is_empty() {
            return Ok(());
        }
        let is_file = |n: &str| {
            fstatat(&self.dir, n, AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| kind(&st) == SFlag::S_IFREG)
        };
        if !is_file(crate::input::session::SESSION) && !is_file(crate::input::session::SAMPLES) {
            bail!("{shown} exists and is not an oprof session directory; not overwriting it");
        }
        if !force {
            bail!("{shown} holds a session already; use --force to overwrite it, or -o another directory");
        }
        remove_entries(self.dir.as_fd(), 0)
            .map_err(io)
            .with_context(|| format!("removing the old session {shown}"))
    }

    /// Keeps the directory and what is in it whatever happens next.
    pub fn keep(&mut self) {
        self.armed = false;
    }

    /// The directory as the user named it (for messages and reading).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the new file `name` (a plain name), mode 0600, open for writing. Errors: the
    /// name exists (also as a symbolic link: not followed), or cannot be created; one line
    /// naming the file.
    pub fn create(&self, name: &str) -> Result<File> {
        let n = plain_name(name)?;
        create_at(self.dir.as_fd(), n, &self.path.join(n))
    }

    /// Writes the new file `name` ([`SessionDir::create`]) with `data`.
    pub fn write(&self, name: &str, data: &[u8]) -> Result<()> {
        let mut f = self.create(name)?;
        f.write_all(data)
            .with_context(|| format!("writing {}", self.path.join(name).display()))
    }

    /// Replaces `name` atomically: writes `NAME.tmp` (created new, 0600), syncs it, renames it
    /// over `name` (a link there is replaced, not followed) and syncs the directory. A reader
    /// sees the old content or the new, whole. Errors name the file.
    pub fn write_atomic(&self, name: &str, data: &[u8]) -> Result<()> {
        let n = plain_name(name)?;
        let tmp = format!("{name}.tmp");
        let shown = self.path.join(&tmp);
        let mut f = self.create(&tmp)?;
        let written = f
            .write_all(data)
            .and_then(|()| f.sync_all())
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                renameat(&self.dir, tmp.as_str(), &self.dir, n).map_err(|e| anyhow!(io(e)))
            });
        if let Err(e) = written {
            let _ = unlinkat(&self.dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(e.context(format!("writing {}", shown.display())));
        }
        // The rename is durable once the directory is synced; a failure there is not an error
        // of the content.
        let _ = fsync(&self.dir);
        Ok(())
    }

    /// The content of the regular file `name` (a link is not followed). Errors name it.
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        let n = plain_name(name)?;
        let shown = self.path.join(n);
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut v = vec![];
        openat(&self.dir, n, flags, Mode::empty())
            .map_err(io)
            .map(File::from)
            .and_then(|mut f| f.read_to_end(&mut v))
            .with_context(|| format!("reading {}", shown.display()))?;
        Ok(v)
    }

    /// Opens the regular file `name` of the session for reading and writing (not through a
    /// link): the recorder's own pass over `samples`. Errors name the file.
    pub fn open_rw(&self, name: &str) -> Result<File> {
        open_in(self.dir.as_fd(), &self.path, name, OFlag::O_RDWR)
    }

    /// Removes the file `name` of the session (a link itself, never what it points to).
    /// Errors name the file.
    pub fn remove(&self, name: &str) -> Result<()> {
        remove_in(self.dir.as_fd(), &self.path, name)
    }

    /// Creates the directory `name` (a plain name) with mode 0700; one already there as a
    /// directory (not a link) is fine. Errors name it.
    pub fn mkdir(&self, name: &str) -> Result<()> {
        let n = plain_name(name)?;
        subdir(self.dir.as_fd(), n, &self.path.join(n)).map(drop)
    }

    /// Creates the new file `top/TARGET` (`top` a plain name, `target` an absolute or relative
    /// path on the target, e.g. `/usr/bin/ls`), mode 0600, open for writing; the directories on
    /// the way are made 0700. Each component is opened `O_DIRECTORY|O_NOFOLLOW`: a symbolic
    /// link on the way, a `..` in `target`, or a file already there is refused (one line naming
    /// the destination).
    pub fn create_under(&self, top: &str, target: &Path) -> Result<File> {
        let rel = target.strip_prefix("/").unwrap_or(target);
        let shown = self.path.join(top).join(rel);
        let mut names = vec![];
        for c in target.components() {
            match c {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(n) => names.push(n),
                Component::ParentDir | Component::Prefix(_) => {
                    bail!("{}: a `..` in the path; not archived", target.display())
                }
            }
        }
        let Some(last) = names.pop() else {
            bail!("{}: no file name to archive", target.display());
        };
        let top = plain_name(top)?;
        let mut cur = subdir(self.dir.as_fd(), top, &self.path.join(top))?;
        let mut at = self.path.join(top);
        for n in names {
            at.push(n);
            cur = subdir(cur.as_fd(), n, &at)?;
        }
        create_at(cur.as_fd(), last, &shown)
    }
}

/// A directory under the session directory ([`SessionDir::subdir`]), written the same way:
/// files only created new (0600, no link followed), removed with `unlinkat`. The flight
/// recorder's chunk files live in one.
///
/// # Invariants
///
/// `dir` is a directory opened without following a link, below a [`SessionDir`]; `path` is
/// its path for messages only.
#[derive(Debug)]
pub struct SubDir {
    path: PathBuf,
    dir: OwnedFd,
}

impl SubDir {
    /// The directory's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the new file `name` (a plain name), mode 0600, open for writing. Errors as
    /// [`SessionDir::create`].
    pub fn create(&self, name: &str) -> Result<File> {
        let n = plain_name(name)?;
        create_at(self.dir.as_fd(), n, &self.path.join(n))
    }

    /// Opens the regular file `name` for reading (not through a link). Errors name it.
    pub fn open(&self, name: &str) -> Result<File> {
        open_in(self.dir.as_fd(), &self.path, name, OFlag::O_RDONLY)
    }

    /// Removes the file `name` (a link itself, never what it points to). Errors name it.
    pub fn remove(&self, name: &str) -> Result<()> {
        remove_in(self.dir.as_fd(), &self.path, name)
    }

    /// Removes the entry `name` (a plain name) if it is there, a link itself and never what it
    /// points to: whether it was. Errors: it cannot be removed (a directory: EISDIR; EPERM,
    /// EROFS...), one line naming it.
    pub fn remove_if_present(&self, name: &str) -> Result<bool> {
        let n = plain_name(name)?;
        match unlinkat(&self.dir, n, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => {
                Err(io(e)).with_context(|| format!("removing {}", self.path.join(n).display()))
            }
        }
    }

    /// Makes the new directory `name` (a plain name; 0700) here and opens it as a
    /// [`SessionDir`] of its own (armed: dropped before [`SessionDir::keep`], it is removed),
    /// through this directory's descriptor: no path is resolved again. Errors: `name` exists
    /// (also as a link: not followed), or cannot be made; one line naming it.
    pub fn new_session(&self, name: &str) -> Result<SessionDir> {
        let n = plain_name(name)?;
        let path = self.path.join(n);
        let shown = path.display();
        mkdirat(&self.dir, n, Mode::from_bits_truncate(DIR_MODE)).map_err(|e| {
            anyhow!(
                "creating {shown}: {}{}",
                io(e),
                in_the_way(self.dir.as_fd(), n, e)
            )
        })?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let dir = openat(&self.dir, n, flags, Mode::empty())
            .map_err(io)
            .with_context(|| format!("opening {shown}"))?;
        let parent = self
            .dir
            .try_clone()
            .with_context(|| format!("opening {}", self.path.display()))?;
        // INVARIANT: made here, 0700, opened without following a link, owned by us.
        Ok(SessionDir {
            path,
            parent,
            name: n.to_os_string(),
            dir,
            existed: None,
            armed: true,
        })
    }

    /// Bytes an unprivileged writer could still write on the directory's filesystem
    /// (`fstatvfs`: available blocks times the fragment size). Errors name it.
    // fsblkcnt_t and c_ulong are u64 here, 32-bit on ARM32: the conversions are needed there.
    #[allow(clippy::useless_conversion)]
    pub fn free_bytes(&self) -> Result<u64> {
        let st = nix::sys::statvfs::fstatvfs(&self.dir)
            .map_err(io)
            .with_context(|| format!("statvfs {}", self.path.display()))?;
        Ok(u64::from(st.blocks_available()).saturating_mul(u64::from(st.fragment_size())))
    }

    /// The names in the directory, sorted (names that are not UTF-8 are left out: the
    /// recorder makes none). Errors name it.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = entries(self.dir.as_fd())
            .map_err(io)
            .with_context(|| format!("reading {}", self.path.display()))?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect();
        v.sort();
        Ok(v)
    }
}

impl SessionDir {
    /// The session directory itself as a [`SubDir`] (its descriptor duplicated). Errors name
    /// it.
    pub fn handle(&self) -> Result<SubDir> {
        let dir = self
            .dir
            .try_clone()
            .with_context(|| format!("opening {}", self.path.display()))?;
        Ok(SubDir {
            path: self.path.clone(),
            dir,
        })
    }

    /// The directory `name` (a plain name) of the session, made 0700 if absent and opened
    /// without following a link. Errors name it.
    pub fn subdir(&self, name: &str) -> Result<SubDir> {
        let n = plain_name(name)?;
        let path = self.path.join(n);
        let dir = subdir(self.dir.as_fd(), n, &path)?;
        Ok(SubDir { path, dir })
    }

    /// Moves the file `from` of `sub` to `to` in the session directory (`renameat`: a link
    /// there is replaced, not followed). Errors name both.
    pub fn take_from(&self, sub: &SubDir, from: &str, to: &str) -> Result<()> {
        let (f, t) = (plain_name(from)?, plain_name(to)?);
        renameat(&sub.dir, f, &self.dir, t)
            .map_err(io)
            .with_context(|| {
                format!(
                    "moving {} to {}",
                    sub.path.join(f).display(),
                    self.path.join(t).display()
                )
            })
    }

    /// Removes the empty directory `name` of the session (a link is not followed). Errors
    /// name it.
    pub fn remove_dir(&self, name: &str) -> Result<()> {
        let n = plain_name(name)?;
        unlinkat(&self.dir, n, UnlinkatFlags::RemoveDir)
            .map_err(io)
            .with_context(|| format!("removing {}", self.path.join(n).display()))
    }
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = remove_entries(self.dir.as_fd(), 0);
        match self.existed {
            Some(mode) => {
                let _ = fchmod(&self.dir, Mode::from_bits_truncate(mode));
            }
            None => {
                // Only the directory made here: the same inode under the same name.
                let here = fstat(&self.dir);
                let named = fstatat(
                    &self.parent,
                    self.name.as_os_str(),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                );
                if let (Ok(a), Ok(b)) = (here, named) {
                    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) {
                        let _ = unlinkat(
                            &self.parent,
                            self.name.as_os_str(),
                            UnlinkatFlags::RemoveDir,
                        );
                    }
                }
            }
        }
    }
}

/// `path` as (parent directory, last component); `.` and `..` as the last component are resolved
/// first. Errors: a path without a directory name (`/`).
fn split(path: &Path) -> Result<(PathBuf, OsString)> {
    let resolved;
    let p = match path.components().next_back() {
        Some(Component::Normal(_)) => path,
        _ => {
            resolved = std::fs::canonicalize(path).with_context(|| {
                format!("cannot create the session directory {}", path.display())
            })?;
            &resolved
        }
    };
    match p.components().next_back() {
        Some(Component::Normal(n)) => {
            let parent = p
                .parent()
                .filter(|q| !q.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            Ok((parent.to_path_buf(), n.to_os_string()))
        }
        _ => bail!(
            "{}: not a directory a session can be written to",
            path.display()
        ),
    }
}

/// Refuses a session directory not owned by the effective user or writable by group or others:
/// someone else could then replace its files.
fn check_private(st: &FileStat, path: &Path) -> Result<()> {
    let euid = geteuid().as_raw();
    if st.st_uid != euid {
        bail!(
            "{} is owned by uid {}, not by uid {euid} who records; not writing a session into it (give another -o)",
            path.display(),
            st.st_uid
        );
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        bail!(
            "{} is writable by group or others (mode {mode:04o}); not writing a session into it (chmod go-w, or another -o)",
            path.display()
        );
    }
    Ok(())
}

/// Opens the existing file `name` (a plain name) of `dir` with `access` (`O_RDONLY`, `O_RDWR`),
/// not through a link. `shown`: `dir`'s path, for messages. Errors name the file.
fn open_in(dir: BorrowedFd<'_>, shown: &Path, name: &str, access: OFlag) -> Result<File> {
    let n = plain_name(name)?;
    openat(
        dir,
        n,
        access | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)
    .map(File::from)
    .with_context(|| format!("opening {}", shown.join(n).display()))
}

/// Removes the file `name` (a plain name) of `dir`: a link itself, never what it points to.
/// `shown`: `dir`'s path, for messages. Errors name the file.
fn remove_in(dir: BorrowedFd<'_>, shown: &Path, name: &str) -> Result<()> {
    let n = plain_name(name)?;
    unlinkat(dir, n, UnlinkatFlags::NoRemoveDir)
        .map_err(io)
        .with_context(|| format!("removing {}", shown.join(n).display()))
}

/// Creates the new file `name` in `dir` with mode 0600 (set exactly, whatever the umask), open
/// for writing. `shown`: the path for messages.
fn create_at(dir: BorrowedFd<'_>, name: &OsStr, shown: &Path) -> Result<File> {
    let flags =
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_WRONLY | OFlag::O_CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::from_bits_truncate(FILE_MODE)) {
        Ok(fd) => fd,
        Err(e) => bail!(
            "creating {}: {}{}",
            shown.display(),
            io(e),
            in_the_way(dir, name, e)
        ),
    };
    fchmod(&fd, Mode::from_bits_truncate(FILE_MODE))
        .map_err(io)
        .with_context(|| format!("creating {}", shown.display()))?;
    Ok(File::from(fd))
}

/// Why a create or open of `name` in `dir` failed with `e`, when something is in the way.
fn in_the_way(dir: BorrowedFd<'_>, name: &OsStr, e: Errno) -> &'static str {
    if !matches!(e, Errno::EEXIST | Errno::ELOOP | Errno::ENOTDIR) {
        return "";
    }
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if kind(&st) == SFlag::S_IFLNK => " (a symbolic link is there; not followed)",
        Ok(_) if e == Errno::EEXIST => " (already there; session files are only created new)",
        _ => "",
    }
}

/// The directory `name` in `dir`, made with mode 0700 if absent, opened without following a
/// link. `shown`: the path for messages.
fn subdir(dir: BorrowedFd<'_>, name: &OsStr, shown: &Path) -> Result<OwnedFd> {
    let made = match mkdirat(dir, name, Mode::from_bits_truncate(DIR_MODE)) {
        Ok(()) => true,
        Err(Errno::EEXIST) => false,
        Err(e) => bail!("creating {}: {}", shown.display(), io(e)),
    };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => bail!(
            "opening {}: {}{}",
            shown.display(),
            io(e),
            in_the_way(dir, name, e)
        ),
    };
    if made {
        fchmod(&fd, Mode::from_bits_truncate(DIR_MODE))
            .map_err(io)
            .with_context(|| format!("creating {}", shown.display()))?;
    }
    Ok(fd)
}

/// The names in `dir` but `.` and `..`.
fn entries(dir: BorrowedFd<'_>) -> nix::Result<Vec<CString>> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut d = Dir::openat(dir, ".", flags, Mode::empty())?;
    let mut names = vec![];
    for e in d.iter() {
        let n = e?.file_name().to_owned();
        if n.as_bytes() != b"." && n.as_bytes() != b".." {
            names.push(n);
        }
    }
    Ok(names)
}

/// Removes everything in `dir` without following a link (a link is removed, not its target):
/// files and links with `unlinkat`, directories emptied first through their own descriptor.
/// `depth`: levels below the session directory (beyond [`MAX_DEPTH`]: ELOOP).
fn remove_entries(dir: BorrowedFd<'_>, depth: usize) -> nix::Result<()> {
    if depth > MAX_DEPTH {
        return Err(Errno::ELOOP);
    }
    for n in entries(dir)? {
        let st = fstatat(dir, n.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if kind(&st) == SFlag::S_IFDIR {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let sub = openat(dir, n.as_c_str(), flags, Mode::empty())?;
            remove_entries(sub.as_fd(), depth + 1)?;
            unlinkat(dir, n.as_c_str(), UnlinkatFlags::RemoveDir)?;
        } else {
            unlinkat(dir, n.as_c_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::session::{KALLSYMS, ROOT, SAMPLES, SESSION};
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    /// Permission bits of `p` itself (a link is not followed).
    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn chmod(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
        format!("{:#}", r.unwrap_err())
    }

    /// Held by the tests that change the process's umask.
    static UMASK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn the_command_gets_the_callers_umask() {
        let _held = UMASK.lock().unwrap_or_else(|e| e.into_inner());
        umask(Mode::from_bits_truncate(0o027));
        private_umask();
        let out = with_caller_umask(|| {
            std::process::Command::new("sh")
                .args(["-c", "umask"])
                .output()
        })
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0027\n");
        let now = umask(Mode::from_bits_truncate(0o022));
        assert_eq!(now.bits(), 0o077, "oprof's own umask again after the spawn");
    }

    #[test]
    fn private_modes_whatever_the_umask() {
        let _held = UMASK.lock().unwrap_or_else(|e| e.into_inner());
        // The usual umask: with it, a plain create_dir/File::create made 0755/0644.
        umask(Mode::from_bits_truncate(0o022));
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("s");
        let mut sd = SessionDir::prepare(&out, false).unwrap();
        sd.write(SAMPLES, b"words").unwrap();
        sd.write_atomic(SESSION, b"{\"a\": 1}\n").unwrap();
        sd.write_atomic(SESSION, b"{\"a\": 2}\n").unwrap();
        sd.mkdir(ROOT).unwrap();
        sd.mkdir(ROOT).unwrap();
        sd.create_under(ROOT, Path::new("/usr/lib/libc.so.6"))
            .unwrap()
            .write_all(b"elf")
            .unwrap();
        sd.keep();
        drop(sd);
        assert_eq!(mode(&out), 0o700, "session directory");
        for f in [SAMPLES, SESSION, "root/usr/lib/libc.so.6"] {
            assert_eq!(mode(&out.join(f)), 0o600, "{f}");
        }
        for dir in ["root", "root/usr", "root/usr/lib"] {
            assert_eq!(mode(&out.join(dir)), 0o700, "{dir}");
        }
        assert_eq!(std::fs::read(out.join(SESSION)).unwrap(), b"{\"a\": 2}\n");
        assert!(!out.join("session.json.tmp").exists());
        // An empty directory of the user's, 0755: private while used, as found after a failure.
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        chmod(&empty, 0o755);
        let sd = SessionDir::prepare(&empty, false).unwrap();
        assert_eq!(mode(&empty), 0o700);
        sd.write(SAMPLES, b"x").unwrap();
        drop(sd);
        assert_eq!(mode(&empty), 0o755, "a failed run puts the mode back");
        assert_eq!(
            std::fs::read_dir(&empty).unwrap().count(),
            0,
            "and empties it"
        );
    }

    #[test]
    fn foreign_shared_or_linked_directories_are_refused() {
        let d = tempfile::tempdir().unwrap();
        for m in [0o770, 0o1777, 0o757] {
            let shared = d.path().join(format!("shared{m:o}"));
            std::fs::create_dir(&shared).unwrap();
            chmod(&shared, m);
            let e = err(SessionDir::prepare(&shared, true));
            assert_eq!(
                e,
                format!("{} is writable by group or others (mode {m:04o}); not writing a session into it (chmod go-w, or another -o)", shared.display())
            );
            assert_eq!(mode(&shared), m, "left as it was");
        }
        // A link to an empty directory of the user's, and a dangling one (root would create
        // its target): both refused, neither target touched.
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        chmod(&real, 0o755);
        for (link, target) in [
            ("link", real.clone()),
            ("dangling", d.path().join("cron.d")),
        ] {
            let l = d.path().join(link);
            symlink(&target, &l).unwrap();
            let e = err(SessionDir::prepare(&l, true));
            assert!(
                e.contains(&format!("{} is a symbolic link", l.display())),
                "{e}"
            );
            assert!(std::fs::symlink_metadata(&l).unwrap().is_symlink());
        }
        assert_eq!(
            (mode(&real), std::fs::read_dir(&real).unwrap().count()),
            (0o755, 0)
        );
        assert!(!d.path().join("cron.d").exists());
        if !geteuid().is_root() {
            eprintln!("skipped: a directory owned by uid 1000 (needs root to chown)");
            return;
        }
        let foreign = d.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        chmod(&foreign, 0o700);
        std::os::unix::fs::chown(&foreign, Some(1000), Some(1000)).unwrap();
        let e = err(SessionDir::prepare(&foreign, true));
        assert_eq!(
            e,
            format!("{} is owned by uid 1000, not by uid 0 who records; not writing a session into it (give another -o)", foreign.display())
        );
        assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
    }

    #[test]
    fn planted_links_are_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let victim_dir = d.path().join("home");
        std::fs::create_dir(&victim_dir).unwrap();
        let out = d.path().join("s");
        let mut sd = SessionDir::prepare(&out, false).unwrap();
        sd.keep();
        for name in [SAMPLES, KALLSYMS, "session.json.tmp"] {
            symlink(&victim, out.join(name)).unwrap();
        }
        let e = err(sd.create(SAMPLES));
        assert!(
            e.starts_with(&format!(
                "creating {}: File exists",
                out.join(SAMPLES).display()
            )) && e.ends_with("(a symbolic link is there; not followed)"),
            "{e}"
        );
        assert!(err(sd.write(KALLSYMS, b"x")).contains("a symbolic link is there"));
        assert!(err(sd.write_atomic(SESSION, b"x")).contains("a symbolic link is there"));
        // A link in place of the file itself is replaced, not written through.
        std::fs::remove_file(out.join("session.json.tmp")).unwrap();
        symlink(&victim, out.join(SESSION)).unwrap();
        sd.write_atomic(SESSION, b"{}\n").unwrap();
        assert!(std::fs::symlink_metadata(out.join(SESSION))
            .unwrap()
            .is_file());
        // The archive: a link on the way, or at the file's place.
        sd.mkdir(ROOT).unwrap();
        symlink(&victim_dir, out.join("root/home")).unwrap();
        let e = err(sd.create_under(ROOT, Path::new("/home/u/.bashrc")));
        assert!(
            e.contains(&format!("opening {}", out.join("root/home").display()))
                && e.ends_with("(a symbolic link is there; not followed)"),
            "{e}"
        );
        std::fs::create_dir(out.join("root/bin")).unwrap();
        symlink(&victim, out.join("root/bin/sh")).unwrap();
        assert!(err(sd.create_under(ROOT, Path::new("/bin/sh"))).contains("a symbolic link"));
        std::fs::write(out.join("root/etc"), "").unwrap();
        assert!(err(sd.create_under(ROOT, Path::new("/etc/passwd"))).contains("Not a directory"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_dir(&victim_dir).unwrap().count(), 0);
        // A link to the victim is not read as a session file either.
        symlink(&victim, out.join("images")).unwrap();
        assert!(err(sd.read("images")).contains("reading"));
    }

    #[test]
    fn archive_paths_and_names_stay_inside() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("s");
        let sd = SessionDir::prepare(&out, false).unwrap();
        let e = err(sd.create_under(ROOT, Path::new("/a/../../../x")));
        assert_eq!(e, "/a/../../../x: a `..` in the path; not archived");
        assert!(!out.join("root").exists() && !d.path().join("x").exists());
        assert!(err(sd.create_under(ROOT, Path::new("/"))).contains("no file name"));
        for bad in ["..", ".", "", "a/b", "../x"] {
            assert!(
                err(sd.create(bad)).contains("not a plain file name"),
                "{bad:?}"
            );
            assert!(err(sd.create_under(bad, Path::new("/x"))).contains("not a plain file name"));
        }
        assert!(!d.path().join("x").exists() && !d.path().join("b").exists());
    }

    #[test]
    fn force_removes_an_old_session_without_following_links() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "mine").unwrap();
        let out = d.path().join("s");
        let mut sd = SessionDir::prepare(&out, false).unwrap();
        sd.write(SAMPLES, b"").unwrap();
        sd.create_under(ROOT, Path::new("/usr/bin/x")).unwrap();
        sd.keep();
        drop(sd);
        symlink(&outside, out.join("root/lib")).unwrap();
        symlink(outside.join("keep"), out.join(KALLSYMS)).unwrap();
        SessionDir::prepare(&out, true).unwrap().keep();
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "--force starts afresh"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn output_directory_rules() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("s");
        {
            let _failed = SessionDir::prepare(&out, false).unwrap();
            assert!(out.is_dir());
        }
        assert!(
            !out.exists(),
            "a run that fails before capturing leaves nothing"
        );
        let mut ok = SessionDir::prepare(&out, false).unwrap();
        ok.keep();
        drop(ok);
        std::fs::write(out.join(SAMPLES), "").unwrap();
        let e = err(SessionDir::prepare(&out, false));
        assert!(e.contains("holds a session already; use --force"), "{e}");
        assert!(out.join(SAMPLES).exists());
        std::fs::write(out.join("extra"), "x").unwrap();
        SessionDir::prepare(&out, true).unwrap().keep();
        assert!(!out.join("extra").exists(), "--force starts afresh");
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.txt"), "mine").unwrap();
        let e = err(SessionDir::prepare(&other, true));
        assert!(e.contains("is not an oprof session directory"), "{e}");
        assert!(other.join("notes.txt").exists());
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(err(SessionDir::prepare(&file, true)).contains("is not a directory"));
        let e = err(SessionDir::prepare(&file.join("s"), false));
        assert!(e.contains("cannot create the session directory"), "{e}");
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        drop(SessionDir::prepare(&empty, false).unwrap());
        assert!(empty.is_dir(), "an empty directory given stays");
        let deep = d.path().join("a/b/c");
        SessionDir::prepare(&deep, false).unwrap().keep();
        assert!(deep.is_dir(), "missing parents are made");
    }
}
