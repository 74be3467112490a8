//! The target system as `oprof record` uses it: oprofilefs files, loading the module, mounting
//! oprofilefs, and putting the system back as it was (like `opcontrol --init`/`--deinit`).
//!
//! oprofilefs files are written as one `write(2)` of `VALUE\n` at offset 0 (the filesystem
//! takes nothing else, see `Documentation/oprofilefs.rst`); errors name the file and the value.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where `opcontrol` and the README mount oprofilefs.
pub const OPROFILEFS: &str = "/dev/oprofile";
/// The module's name (legacy tools match it: `lsmod | grep oprofile`).
pub const MODULE: &str = "oprofile";

/// Whether the effective user is root (opening `buffer` needs CAP_SYS_ADMIN, loading the module
/// CAP_SYS_MODULE, mounting CAP_SYS_ADMIN).
pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Number of CPUs in a `/sys/devices/system/cpu/online`-style list (`0-1,3`).
pub fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
    }
    Some(n)
}

/// Online CPUs of the running system.
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| count_cpu_list(&s))
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// Whether a `/proc/modules` text lists module `name`.
pub fn modules_has(proc_modules: &str, name: &str) -> bool {
    proc_modules
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// Whether a `/proc/mounts` text has a mount of type `fstype` at `dir`.
pub fn mounts_has(mounts: &str, dir: &Path, fstype: &str) -> bool {
    let want = dir.to_string_lossy().replace(' ', "\\040");
    mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 3 && f[1] == want && f[2] == fstype
    })
}

/// The last kernel log line containing `tag` (e.g. `"oprofile: "`), the text after the tag:
/// the module logs why it rejected a `buffer` open (EINVAL). `None` if the log cannot be read.
pub fn last_kernel_message(tag: &str) -> Option<String> {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: SIZE_BUFFER ignores the buffer arguments.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    let len = usize::try_from(size).ok().filter(|&n| n > 0)?;
    let mut buf = vec![0u8; len];
    // SAFETY: `buf` is writable for `size` bytes.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), size) };
    buf.truncate(usize::try_from(n).ok()?);
    let text = String::from_utf8_lossy(&buf);
    text.lines()
        .rev()
        .find_map(|l| l.find(tag).map(|i| l[i + tag.len()..].trim().to_string()))
}

/// A mounted oprofilefs: reads and writes its files, remembering the original value of every
/// setting written with [`Fs::set`] so that [`Fs::restore`] can put it back.
#[derive(Debug)]
pub struct Fs {
    pub dir: PathBuf,
    /// (file, original value) in first-write order.
    saved: Vec<(String, String)>,
}

impl Fs {
    pub fn new(dir: &Path) -> Fs {
        Fs {
            dir: dir.to_path_buf(),
            saved: vec![],
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn exists(&self, name: &str) -> bool {
        self.path(name).exists()
    }

    /// The file's bytes. Errors name the file.
    pub fn read_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let p = self.path(name);
        let mut v = vec![];
        std::fs::File::open(&p)
            .and_then(|mut f| f.read_to_end(&mut v))
            .with_context(|| format!("reading {}", p.display()))?;
        Ok(v)
    }

    /// The file's first line without surrounding whitespace (settings are one line).
    pub fn read(&self, name: &str) -> Result<String> {
        let b = self.read_bytes(name)?;
        Ok(String::from_utf8_lossy(&b)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string())
    }

    /// The file as a decimal number.
    pub fn read_u64(&self, name: &str) -> Result<u64> {
        let t = self.read(name)?;
        t.parse()
            .map_err(|_| anyhow!("{}: not a number: {t:?}", self.path(name).display()))
    }

    /// Writes `value` + newline in one `write(2)`. Errors name the file and the value.
    pub fn write(&self, name: &str, value: &str) -> Result<()> {
        let p = self.path(name);
        let data = format!("{value}\n");
        let r = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|mut f| f.write(data.as_bytes()));
        match r {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => bail!(
                "writing {value} to {}: short write ({n} of {} bytes)",
                p.display(),
                data.len()
            ),
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(libc::EINVAL) => " (value rejected: out of range or invalid, see Documentation/oprofilefs.rst)",
                    Some(libc::EBUSY) => " (profiling is running: another session has /dev/oprofile/buffer open)",
                    _ => "",
                };
                Err(anyhow!("writing {value} to {}: {e}{why}", p.display()))
            }
        }
    }

    /// Writes a setting, first saving its current value for [`Fs::restore`].
    pub fn set(&mut self, name: &str, value: u64) -> Result<()> {
        if !self.saved.iter().any(|(n, _)| n == name) {
            let old = self.read(name)?;
            self.saved.push((name.to_string(), old));
        }
        self.write(name, &value.to_string())
    }

    /// Writes back every setting [`Fs::set`] changed, in reverse order; all are tried, the
    /// first error is returned.
    pub fn restore(&mut self) -> Result<()> {
        let mut first = Ok(());
        while let Some((name, old)) = self.saved.pop() {
            if let Err(e) = self.write(&name, &old) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    /// Every number under `stats/`, keyed by its path below `stats/` (`cpu0/sample_received`).
    pub fn stats(&self) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        let root = self.path("stats");
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
                let p = e
                    .with_context(|| format!("reading {}", d.display()))?
                    .path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                let rel = p
                    .strip_prefix(&root)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .into_owned();
                let t = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?;
                let v = t
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("{}: not a number: {:?}", p.display(), t.trim()))?;
                out.insert(rel, v);
            }
        }
        Ok(out)
    }
}

/// Refuses a module file (the opened `f`, checked with `fstat`: what is loaded is what was
/// checked) that is not a regular file owned by root and writable by root alone: anyone who can
/// write it could have put code into the kernel. Errors: one line naming `path`.
fn check_module_file(f: &std::fs::File, path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = f
        .metadata()
        .with_context(|| format!("{}", path.display()))?;
    if !m.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    if m.uid() != 0 {
        bail!(
            "{}: owned by uid {}, not root; not loading a module another user can replace (chown root)",
            path.display(),
            m.uid()
        );
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        bail!(
            "{}: writable by group or others (mode {mode:04o}); not loading it (chmod go-w)",
            path.display()
        );
    }
    Ok(())
}

/// `finit_module(2)` of the `.ko` at `path` with `params` (`name=value` words), from the
/// descriptor [`check_module_file`] checked. Loading a module already loaded is not an error.
/// Errors name the file and explain the usual errnos; a file not owned by root or writable by
/// group or others is refused before loading.
pub fn insmod(path: &Path, params: &str) -> Result<()> {
    let f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    check_module_file(&f, path)?;
    let cparams =
        CString::new(params).map_err(|_| anyhow!("module parameters contain a NUL byte"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd and a NUL-terminated string; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, f.as_raw_fd(), cparams.as_ptr(), 0) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    let why = match e.raw_os_error() {
        Some(libc::EEXIST) => return Ok(()),
        Some(libc::ENOEXEC) => {
            " (invalid module format: built for another kernel or architecture? see dmesg)"
        }
        Some(libc::EINVAL) => " (rejected: bad parameter or symbol mismatch, see dmesg)",
        Some(libc::EPERM) => " (loading modules needs root / CAP_SYS_MODULE)",
        _ => "",
    };
    bail!("loading {}: {e}{why}", path.display())
}

/// `delete_module(2)` of `name` (non-blocking: EBUSY while in use).
pub fn rmmod(name: &str) -> Result<()> {
    let c = CString::new(name).map_err(|_| anyhow!("module name contains a NUL byte"))?;
    // SAFETY: a NUL-terminated name and flags.
    let r = unsafe { libc::syscall(libc::SYS_delete_module, c.as_ptr(), libc::O_NONBLOCK) };
    if r != 0 {
        bail!(
            "unloading module {name}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// `modprobe NAME PARAMS...`; the error is modprobe's first line of stderr (or why it could not
/// run).
pub fn modprobe(name: &str, params: &[String]) -> std::result::Result<(), String> {
    match std::process::Command::new("modprobe")
        .arg(name)
        .args(params)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            Err(err
                .lines()
                .find(|l| !l.trim().is_empty())
                .map_or_else(|| o.status.to_string(), |l| l.trim().to_string()))
        }
        Err(e) => Err(format!("cannot run modprobe: {e}")),
    }
}

fn errno_result(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| anyhow!("{}: path contains a NUL byte", p.display()))
}

/// How to get the module and the filesystem ready.
#[derive(Debug, Clone, Default)]
pub struct Want {
    /// oprofilefs mount point.
    pub dir: PathBuf,
    /// `--module PATH`: the `.ko` to load; default: `modprobe oprofile`, then `oprofile.ko`
    /// beside the running binary.
    pub module: Option<PathBuf>,
    /// Module parameters when it is loaded here (`timer=1` for timer mode).
    pub params: Vec<String>,
}

/// The module and oprofilefs, set up by [`System::acquire`] and put back as found by
/// [`System::release`] (also on drop): settings restored, and only what was done here undone
/// (unmount, remove the mount point directory, unload).
#[derive(Debug)]
pub struct System {
    pub fs: Fs,
    /// The module was loaded here.
    pub loaded: bool,
    /// The `.ko` loaded here, if loaded from a file.
    pub module_path: Option<PathBuf>,
    mounted: bool,
    created_dir: bool,
    /// The recorder's pid file, kept up to date with what is held ([`System::checkpoint`]).
    pub pid_file: Option<PidFile>,
}

impl System {
    /// What is held, as the pid file says it.
    pub fn held(&self) -> Held {
        Held {
            pid: std::process::id(),
            oprofilefs: self.fs.dir.clone(),
            loaded: self.loaded,
            mounted: self.mounted,
            created_dir: self.created_dir,
            saved: self.fs.saved.clone(),
        }
    }

    /// Writes what is held to the pid file, if any.
    pub fn checkpoint(&mut self) -> Result<()> {
        let held = self.held();
        match &mut self.pid_file {
            Some(p) => p.write(&held),
            None => Ok(()),
        }
    }

    /// Loads the module if `/proc/modules` does not list it, and mounts oprofilefs at `want.dir`
    /// if `/proc/mounts` has no oprofilefs there. Errors: one line saying what failed and why.
    /// `pid_file`: kept in the [`System`], written with what is held after each step (before
    /// it, the module is loaded only when the file says so), removed by [`System::release`]
    /// once everything is undone.
    pub fn acquire(want: &Want, pid_file: Option<PidFile>) -> Result<System> {
        let mut sys = System {
            fs: Fs::new(&want.dir),
            loaded: false,
            module_path: None,
            mounted: false,
            created_dir: false,
            pid_file,
        };
        let modules = std::fs::read_to_string("/proc/modules").context("reading /proc/modules")?;
        if !modules_has(&modules, MODULE) {
            // Said before it is done: a recorder killed in between leaves a file that says too
            // much, which the next one checks against /proc/modules.
            sys.loaded = true;
            sys.checkpoint()?;
            sys.module_path = load_module(want).inspect_err(|_| sys.loaded = false)?;
        }
        let mounts = std::fs::read_to_string("/proc/mounts").context("reading /proc/mounts")?;
        if !mounts_has(&mounts, &want.dir, "oprofilefs") {
            (sys.mounted, sys.created_dir) = (true, !want.dir.exists());
            let r = sys.checkpoint();
            if r.is_err() {
                (sys.mounted, sys.created_dir) = (false, false);
            }
            if let Err(e) = r.and_then(|()| sys.mount()) {
                let _ = sys.release();
                return Err(e);
            }
        }
        sys.checkpoint()?;
        Ok(sys)
    }

    /// Mounts oprofilefs at the mount point, created first if missing. `mounted` and
    /// `created_dir` are set before (for the pid file) and cleared here on failure.
    fn mount(&mut self) -> Result<()> {
        let dir = self.fs.dir.clone();
        self.mounted = false;
        self.created_dir = false;
        if !dir.exists() {
            std::fs::create_dir(&dir).with_context(|| {
                format!("creating the oprofilefs mount point {}", dir.display())
            })?;
            self.created_dir = true;
        }
        let (src, target, fstype) = (c"nodev", cpath(&dir)?, c"oprofilefs");
        // SAFETY: NUL-terminated strings; no mount data.
        errno_result(unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        })
        .with_context(|| format!("mount -t oprofilefs nodev {}", dir.display()))?;
        self.mounted = true;
        Ok(())
    }

    /// Restores the settings, unmounts what was mounted here, removes the mount point created
    /// here and unloads the module loaded here. Idempotent; errors are collected (all steps are
    /// tried) and returned as lines.
    pub fn release(&mut self) -> Vec<String> {
        let mut errs = vec![];
        if let Err(e) = self.fs.restore() {
            errs.push(format!("{e:#}"));
        }
        if std::mem::take(&mut self.mounted) {
            let r = cpath(&self.fs.dir).and_then(|c| {
                // SAFETY: a NUL-terminated path.
                errno_result(unsafe { libc::umount2(c.as_ptr(), 0) }).map_err(anyhow::Error::from)
            });
            if let Err(e) = r {
                errs.push(format!("umount {}: {e:#}", self.fs.dir.display()));
            }
        }
        if std::mem::take(&mut self.created_dir) {
            if let Err(e) = std::fs::remove_dir(&self.fs.dir) {
                errs.push(format!("removing {}: {e}", self.fs.dir.display()));
            }
        }
        if std::mem::take(&mut self.loaded) {
            if let Err(e) = rmmod(MODULE) {
                errs.push(format!("{e:#}"));
            }
        }
        if let Some(p) = self.pid_file.take() {
            let r = if errs.is_empty() {
                p.remove()
            } else {
                // Left for the next recorder (or --cleanup) to try again.
                Ok(())
            };
            errs.extend(r.err().map(|e| format!("{e:#}")));
        }
        errs
    }
}

impl Drop for System {
    fn drop(&mut self) {
        for e in self.release() {
            eprintln!("oprof: warning: {e}");
        }
    }
}

/// Where `oprof record` keeps its pid file ([`PidFile`]).
pub const RUN_DIR: &str = "/run/oprof";
/// The pid file's name in [`RUN_DIR`].
pub const PID_FILE: &str = "record.pid";

/// What a recorder holds, as its pid file says: enough for the next recorder to undo it if
/// this one dies (SIGKILL) before [`System::release`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    pub pid: u32,
    /// The oprofilefs mount point.
    pub oprofilefs: PathBuf,
    /// The module was loaded by the recorder.
    pub loaded: bool,
    /// oprofilefs was mounted by it, at a directory it created (`created_dir`).
    pub mounted: bool,
    pub created_dir: bool,
    /// Settings it changed: (file, value before), in first-write order.
    pub saved: Vec<(String, String)>,
}

/// The pid file of the running recorder, `RUN_DIR/record.pid`: 0600, opened without following
/// a link, in a directory only root may write, and locked (`flock`) while the recorder lives:
/// the kernel drops the lock when it dies however it dies, so a file that can be locked is a
/// dead recorder's. It holds [`Held`] as JSON; removed by [`PidFile::remove`].
///
/// # Invariants
/// `file` is `path`'s open file, locked exclusively by this process.
#[derive(Debug)]
pub struct PidFile {
    file: std::fs::File,
    pub path: PathBuf,
}

/// `flock(fd, LOCK_EX | LOCK_NB)`.
fn try_lock(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open fd.
    errno_result(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) })
}

/// Creates `dir` (0700) if missing and checks that only root (the effective user) can write in
/// it: a directory, not a link, owned by us, not writable by group or others.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let shown = dir.display();
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {shown}"))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(anyhow!("creating {shown}: {e}"));
        }
        _ => {}
    }
    let m = std::fs::symlink_metadata(dir).with_context(|| format!("reading {shown}"))?;
    // SAFETY: no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        bail!("{shown}: not a private directory (a directory of uid {me}, not group/other writable, not a link); not using it");
    }
    Ok(())
}

impl PidFile {
    /// Takes the pid file in `run_dir` (created as [`private_dir`]). Returns it, with what a dead
    /// recorder's file says it held (`Some`: undo it with [`take_over`]). Errors: a live
    /// recorder holds it (one line naming its pid and the file), the file is a link or not
    /// ours, or cannot be made.
    pub fn take(run_dir: &Path) -> Result<(PidFile, Option<Held>)> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        private_dir(run_dir)?;
        let path = run_dir.join(PID_FILE);
        let shown = path.display();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("opening the pid file {shown}"))?;
        let m = file
            .metadata()
            .with_context(|| format!("reading {shown}"))?;
        // SAFETY: no preconditions.
        if !m.is_file() || m.uid() != unsafe { libc::geteuid() } || m.nlink() != 1 {
            bail!("{shown}: not a pid file of ours (a plain file owned by us); not using it");
        }
        let mut text = String::new();
        if let Err(e) = try_lock(&file) {
            (&file).read_to_string(&mut text).ok();
            let pid = serde_json::from_str::<Held>(&text)
                .map_or(String::new(), |h| format!("pid {}, ", h.pid));
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                bail!("another oprof record is running ({pid}{shown}); wait for it or stop it");
            }
            bail!("locking {shown}: {e}");
        }
        (&file)
            .read_to_string(&mut text)
            .with_context(|| format!("reading {shown}"))?;
        let stale = match text.trim() {
            "" => None,
            t => Some(serde_json::from_str::<Held>(t).unwrap_or_default()),
        };
        let mut pf = PidFile { file, path };
        pf.write(&Held {
            pid: std::process::id(),
            ..Default::default()
        })?;
        Ok((pf, stale))
    }

    /// Replaces the file's content by `held` (and syncs it).
    pub fn write(&mut self, held: &Held) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        let text = serde_json::to_string(held)? + "\n";
        let r = self
            .file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)).map(drop))
            .and_then(|()| self.file.write_all(text.as_bytes()))
            .and_then(|()| self.file.sync_data());
        r.with_context(|| format!("writing {}", self.path.display()))
    }

    /// Removes the file (the recorder has undone what it held), then drops the lock.
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path)
            .with_context(|| format!("removing {}", self.path.display()))
    }
}

/// What of `held` is still there (`mounts`, `modules`: `/proc/mounts`, `/proc/modules`), as a
/// [`System`] whose [`System::release`] undoes it: settings restored while the module stays,
/// oprofilefs unmounted (and its directory removed) if the dead recorder mounted it and it is
/// still mounted, the module unloaded if it loaded it and it is still loaded.
pub fn held_system(held: &Held, mounts: &str, modules: &str) -> System {
    let mounted = mounts_has(mounts, &held.oprofilefs, "oprofilefs");
    let loaded = held.loaded && modules_has(modules, MODULE);
    let mut fs = Fs::new(&held.oprofilefs);
    if mounted && !loaded {
        fs.saved = held.saved.clone();
    }
    System {
        fs,
        loaded,
        module_path: None,
        mounted: mounted && held.mounted,
        created_dir: held.created_dir && held.mounted && mounted,
        pid_file: None,
    }
}

/// Undoes what a dead recorder held ([`held_system`]): stops profiling if oprofilefs is
/// mounted, restores, unmounts, unloads. Returns a line of what was done, and the errors.
pub fn take_over(held: &Held) -> Result<(String, Vec<String>)> {
    let mounts = std::fs::read_to_string("/proc/mounts").context("reading /proc/mounts")?;
    let modules = std::fs::read_to_string("/proc/modules").context("reading /proc/modules")?;
    let mut sys = held_system(held, &mounts, &modules);
    let mut done = vec![];
    if mounts_has(&mounts, &held.oprofilefs, "oprofilefs") && sys.fs.write("enable", "0").is_ok() {
        done.push("profiling disabled".to_string());
    }
    if !sys.fs.saved.is_empty() {
        done.push(format!("{} settings restored", sys.fs.saved.len()));
    }
    if sys.mounted {
        done.push(format!("{} unmounted", held.oprofilefs.display()));
    }
    if sys.loaded {
        done.push(format!("module {MODULE} unloaded"));
    }
    let errs = sys.release();
    let what = if done.is_empty() {
        "nothing left to undo".to_string()
    } else {
        done.join(", ")
    };
    Ok((
        format!(
            "a dead oprof record (pid {}) left its pid file: {what}",
            held.pid
        ),
        errs,
    ))
}

/// Loads the module (see [`Want::module`]); returns the `.ko` path when loaded from a file.
fn load_module(want: &Want) -> Result<Option<PathBuf>> {
    let params = want.params.join(" ");
    if let Some(p) = &want.module {
        insmod(p, &params).context("cannot load the oprofile module")?;
        return Ok(Some(p.clone()));
    }
    let probe = match modprobe(MODULE, &want.params) {
        Ok(()) => return Ok(None),
        Err(e) => e,
    };
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join("oprofile.ko")));
    match beside {
        Some(ko) if ko.is_file() => {
            insmod(&ko, &params).context("cannot load the oprofile module")?;
            Ok(Some(ko))
        }
        Some(ko) => bail!(
            "cannot load the oprofile module: `modprobe oprofile` failed ({probe}) and there is no {} beside oprof; give --module PATH",
            ko.display()
        ),
        None => bail!("cannot load the oprofile module: `modprobe oprofile` failed ({probe}); give --module PATH"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,5,7-8"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
        let pm = "oprofile 65536 0 - Live 0xbf000000 (O)\noprofile_x 1 0 - Live 0x0\n";
        assert!(
            modules_has(pm, "oprofile")
                && !modules_has(pm, "oprof")
                && modules_has(pm, "oprofile_x")
        );
        let m = "proc /proc proc rw 0 0\nnodev /dev/oprofile oprofilefs rw,relatime 0 0\nx /a\\040b tmpfs rw 0 0\n";
        assert!(mounts_has(m, Path::new("/dev/oprofile"), "oprofilefs"));
        assert!(!mounts_has(m, Path::new("/dev/oprofile"), "tmpfs"));
        assert!(!mounts_has(m, Path::new("/mnt"), "oprofilefs"));
        assert!(mounts_has(m, Path::new("/a b"), "tmpfs"));
    }

    /// `PidFile::take` once the lock is free. A flock belongs to the open file description, and a
    /// test of this process that forks (to spawn a command) between the file's open and the
    /// child's exec shares that description until the exec: the lock then outlives `drop` for
    /// that instant (seen under `cargo test --release`). Waits up to 5 s for that, no longer.
    fn take_once_free(run: &Path) -> (PidFile, Option<Held>) {
        for _ in 0..500 {
            match PidFile::take(run) {
                Err(e) if format!("{e:#}").contains("another oprof record is running") => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                r => return r.unwrap(),
            }
        }
        panic!("the pid file's lock stayed held 5 s after its holder was dropped");
    }

    #[test]
    fn pid_files_tell_a_dead_recorder_from_a_live_one() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run/oprof");
        let (mut pf, stale) = PidFile::take(&run).unwrap();
        assert_eq!(stale, None, "a first run finds nothing");
        let mode = |p: &Path| p.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&run), mode(&pf.path)), (0o700, 0o600));
        let text = std::fs::read_to_string(&pf.path).unwrap();
        let held: Held = serde_json::from_str(&text).unwrap();
        assert_eq!(held.pid, std::process::id());
        // A live recorder (the lock is held: another open file description) is refused.
        let e = format!("{:#}", PidFile::take(&run).unwrap_err());
        assert!(
            e.contains(&format!(
                "another oprof record is running (pid {}, ",
                held.pid
            )) && e.contains("record.pid"),
            "{e}"
        );
        // What it holds is written; when it dies the lock goes and the next one takes over.
        let dead = Held {
            pid: 999_999,
            oprofilefs: "/dev/oprofile".into(),
            loaded: true,
            mounted: true,
            created_dir: false,
            saved: vec![("buffer_size".into(), "131072".into())],
        };
        pf.write(&dead).unwrap();
        drop(pf);
        let (pf, stale) = take_once_free(&run);
        assert_eq!(stale, Some(dead));
        pf.remove().unwrap();
        assert!(!run.join(PID_FILE).exists());
        assert_eq!(take_once_free(&run).1, None, "removed: nothing stale");
    }

    #[test]
    fn pid_files_are_not_followed_or_shared() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("oprof");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let target = d.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, run.join(PID_FILE)).unwrap();
        let e = format!("{:#}", PidFile::take(&run).unwrap_err());
        assert!(e.contains("opening the pid file"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        std::fs::remove_file(run.join(PID_FILE)).unwrap();
        std::fs::hard_link(&target, run.join(PID_FILE)).unwrap();
        let e = format!("{:#}", PidFile::take(&run).unwrap_err());
        assert!(e.contains("not a pid file of ours"), "{e}");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = format!("{:#}", PidFile::take(&run).unwrap_err());
        assert!(e.contains("not a private directory"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let e = format!("{:#}", PidFile::take(&link).unwrap_err());
        assert!(e.contains("not a private directory"), "{e}");
    }

    #[test]
    fn a_dead_recorders_holdings_are_undone_as_far_as_they_remain() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("buffer_size"), "1048576\n").unwrap();
        let held = Held {
            pid: 999_999,
            oprofilefs: d.path().to_path_buf(),
            loaded: false,
            mounted: false,
            created_dir: false,
            saved: vec![("buffer_size".into(), "131072".into())],
        };
        let at = d.path().display().to_string();
        let mounted = format!("nodev {at} oprofilefs rw 0 0\n");
        let loaded = "oprofile 65536 0 - Live 0xbf000000 (O)\n";
        // A module it did not load: settings restored, nothing unmounted or unloaded.
        let mut sys = held_system(&held, &mounted, loaded);
        assert!(!sys.loaded && !sys.mounted && !sys.created_dir);
        assert!(sys.release().is_empty());
        assert_eq!(Fs::new(d.path()).read("buffer_size").unwrap(), "131072");
        // It loaded and mounted: both undone (settings go with the module), if still there.
        let all = Held {
            loaded: true,
            mounted: true,
            created_dir: true,
            ..held.clone()
        };
        let sys = held_system(&all, &mounted, loaded);
        assert!(sys.loaded && sys.mounted && sys.created_dir && sys.fs.saved.is_empty());
        let gone = held_system(&all, "", "");
        assert!(!gone.loaded && !gone.mounted && !gone.created_dir);
        // Not released: that would unmount and unload on the host.
        std::mem::forget(sys);
        std::mem::forget(gone);
    }

    #[test]
    fn module_files_others_can_write_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let ko = d.path().join("oprofile.ko");
        std::fs::write(&ko, "not a module").unwrap();
        let want = Want {
            module: Some(ko.clone()),
            ..Want::default()
        };
        let chmod = |m| std::fs::set_permissions(&ko, std::fs::Permissions::from_mode(m)).unwrap();
        for m in [0o666, 0o620, 0o602] {
            chmod(m);
            let e = format!("{:#}", load_module(&want).unwrap_err());
            assert!(
                e.ends_with(&format!(
                    "{}: writable by group or others (mode {m:04o}); not loading it (chmod go-w)",
                    ko.display()
                )),
                "{e}"
            );
        }
        chmod(0o644);
        let f = std::fs::File::open(&ko).unwrap();
        if !is_root() {
            assert!(format!("{:#}", check_module_file(&f, &ko).unwrap_err()).contains("not root"));
            eprintln!("skipped: a module file owned by uid 1000 (needs root to chown)");
            return;
        }
        check_module_file(&f, &ko).unwrap();
        std::os::unix::fs::chown(&ko, Some(1000), None).unwrap();
        let e = format!("{:#}", load_module(&want).unwrap_err());
        assert!(
            e.ends_with(&format!("{}: owned by uid 1000, not root; not loading a module another user can replace (chown root)", ko.display())),
            "{e}"
        );
        let dir = d.path().join("dir.ko");
        std::fs::create_dir(&dir).unwrap();
        assert!(format!(
            "{:#}",
            check_module_file(&std::fs::File::open(&dir).unwrap(), &dir).unwrap_err()
        )
        .contains("not a regular file"));
    }

    #[test]
    fn fs_set_and_restore() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("0")).unwrap();
        std::fs::write(d.path().join("buffer_size"), "131072\n").unwrap();
        std::fs::write(d.path().join("0/count"), "0\n").unwrap();
        let mut fs = Fs::new(d.path());
        fs.set("buffer_size", 262144).unwrap();
        fs.set("0/count", 100000).unwrap();
        fs.set("buffer_size", 4096).unwrap();
        assert_eq!(fs.read_u64("buffer_size").unwrap(), 4096);
        assert_eq!(fs.read("0/count").unwrap(), "100000");
        fs.restore().unwrap();
        assert_eq!(
            fs.read_u64("buffer_size").unwrap(),
            131072,
            "the value before the first set"
        );
        assert_eq!(fs.read_u64("0/count").unwrap(), 0);
        let e = format!("{:#}", fs.set("nope", 1).unwrap_err());
        assert!(e.contains("reading") && e.contains("nope"), "{e}");
        let e = format!("{:#}", fs.write("1/count", "5").unwrap_err());
        assert!(
            e.starts_with("writing 5 to ") && e.contains("1/count"),
            "{e}"
        );
        std::fs::create_dir_all(d.path().join("stats/cpu0")).unwrap();
        std::fs::write(d.path().join("stats/cpu0/sample_received"), "12\n").unwrap();
        std::fs::write(d.path().join("stats/event_lost_overflow"), "0\n").unwrap();
        let st = fs.stats().unwrap();
        assert_eq!(st.get("cpu0/sample_received"), Some(&12));
        assert_eq!(st.get("event_lost_overflow"), Some(&0));
        std::fs::write(d.path().join("stats/bad"), "x\n").unwrap();
        assert!(format!("{:#}", fs.stats().unwrap_err()).contains("not a number"));
    }
}
