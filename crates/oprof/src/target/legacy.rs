//! `oprof legacy -- CMD`: serves the `lookup_dcookie` system call, removed in Linux 5.12, to a
//! legacy OProfile userspace (0.9.x `opcontrol`, `oprofiled`) from `/dev/oprofile/images`.
//!
//! CMD runs under a seccomp filter (`SECCOMP_RET_USER_NOTIF` for `lookup_dcookie` of ARM EABI,
//! arm64 and x86-64, `SECCOMP_RET_ALLOW` for everything else) that everything it starts
//! inherits. A supervisor process (forked from oprof, in its own session) receives each call on
//! the filter's listener, looks the image id up in the images file and answers as legacy
//! `fs/dcookies.c` (`do_lookup_dcookie`, Linux 2.6 .. 5.11) did: the path's length including
//! its NUL, the path and NUL written into the caller's buffer; EPERM without CAP_SYS_ADMIN in
//! the initial user namespace (`capable()`: a `CapEff` in a child namespace does not count) or
//! when the caller's `/proc/PID` cannot be opened while it waits (Yama, hidepid, an LSM),
//! EINVAL for an id the images file does not list (or no images file: the module is not
//! loaded, legacy's "no dcookie user"), ENAMETOOLONG past a page, ERANGE when `size` is smaller
//! than the length, EFAULT when the buffer is not writable. oprof itself returns when CMD
//! exits (its status is oprof's); the supervisor stays while any process holds the filter
//! (`oprofiled`, which `opcontrol --start` leaves running) and exits when the last one is gone.
//! See `Documentation/legacy-client.rst`.

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `AUDIT_ARCH_ARM` (`EM_ARM | __AUDIT_ARCH_LE`): ARM EABI tasks, arm64 compat tasks too.
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
/// `AUDIT_ARCH_AARCH64` (`EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`).
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
/// `AUDIT_ARCH_X86_64` (`EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`).
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// The ABIs whose `lookup_dcookie` is served: audit arch, syscall number (Linux 5.11's tables:
/// arch/arm/tools/syscall.tbl 249, include/uapi/asm-generic/unistd.h 18, syscall_64.tbl 212).
const SERVED: [(u32, u32); 3] = [
    (AUDIT_ARCH_ARM, 249),
    (AUDIT_ARCH_AARCH64, 18),
    (AUDIT_ARCH_X86_64, 212),
];

/// `CAP_SYS_ADMIN`, the capability legacy `lookup_dcookie` demanded of its caller.
const CAP_SYS_ADMIN: u32 = 21;
/// Longest answer (path + NUL): legacy `d_path` worked in one page (`ENAMETOOLONG` beyond).
const PATH_LIMIT: usize = 4096;

#[derive(clap::Args, Debug, Clone)]
pub struct LegacyArgs {
    /// The images file the image ids are looked up in (read at each call).
    #[arg(long, value_name = "FILE", default_value = "/dev/oprofile/images")]
    pub images: PathBuf,
    /// Append one line per served call (and the supervisor's errors) to FILE; without it the
    /// supervisor, which outlives oprof, writes nothing.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The legacy command, after `--` (e.g. `opcontrol --start`); its exit status is oprof's.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Runs `args.command` under the filter and forks the supervisor; returns the command's exit
/// status (`128 + signal` when killed).
pub fn run(args: &LegacyArgs) -> Result<i32> {
    let pid = match spawn_filtered(args)? {
        Spawned::Running(pid) => pid,
        Spawned::ExecFailed(e) => {
            let name = args.command[0].to_string_lossy();
            eprintln!("oprof: error: running {name}: {e}");
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    wait_child(pid)
}

/// Waits for `pid`: its exit code, or `128 + signal` when a signal killed it.
fn wait_child(pid: libc::pid_t) -> Result<i32> {
    let mut st = 0;
    loop {
        // SAFETY: waits for our own child; `st` receives its status.
        if unsafe { libc::waitpid(pid, &mut st, 0) } == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e).context("waiting for the command");
        }
    }
    Ok(if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        128 + libc::WTERMSIG(st)
    })
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
fn pipe() -> Result<(File, File)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by nothing else.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

/// The BPF program: for each served (arch, nr), `USER_NOTIF` when both match; `ALLOW`
/// otherwise. `seccomp_data`: `nr` at offset 0, `arch` at 4.
pub fn filter_program() -> Vec<libc::sock_filter> {
    let ld = |k: u32| bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, k);
    let jeq = |k: u32, jt: u8, jf: u8| bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, jt, jf, k);
    let n = SERVED.len();
    let mut prog = Vec::with_capacity(4 * n + 2);
    for (i, &(arch, nr)) in SERVED.iter().enumerate() {
        // Blocks of 4; then RET USER_NOTIF at 4n, RET ALLOW at 4n + 1. Offsets count from the
        // next instruction.
        let to_notif = u8::try_from(4 * (n - i) - 4).unwrap_or(u8::MAX);
        // Another arch: the next block, or RET ALLOW after the last one.
        let next = if i + 1 == n { 3 } else { 2 };
        prog.push(ld(4));
        prog.push(jeq(arch, 0, next));
        prog.push(ld(0));
        prog.push(jeq(nr, to_notif, to_notif + 1));
    }
    let ret = libc::BPF_RET | libc::BPF_K;
    prog.push(bpf(ret, 0, 0, libc::SECCOMP_RET_USER_NOTIF));
    prog.push(bpf(ret, 0, 0, libc::SECCOMP_RET_ALLOW));
    prog
}

fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// What [`spawn_filtered`] started.
enum Spawned {
    /// CMD runs (pid) under the filter, served by the supervisor.
    Running(libc::pid_t),
    /// The filter is installed but CMD could not be executed (the child has exited).
    ExecFailed(std::io::Error),
}

/// Forks, installs the filter in the child and executes CMD there; the listener is taken from
/// the child with `pidfd_getfd` and the supervisor forked with it before the child executes CMD
/// (the listener is `O_CLOEXEC`: CMD does not inherit it). Not `std::process::Command`: its
/// fork path needs AF_UNIX sockets (a SOCK_SEQPACKET pair), which the guest kernels lack.
fn spawn_filtered(args: &LegacyArgs) -> Result<Spawned> {
    use std::os::unix::ffi::OsStrExt;
    let argv = args
        .command
        .iter()
        .map(|a| std::ffi::CString::new(a.as_bytes()).context("a NUL byte in the command"))
        .collect::<Result<Vec<_>>>()?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let prog = filter_program();
    let (mut info_r, info_w) = pipe()?;
    let (ack_r, mut ack_w) = pipe()?;
    // SAFETY: oprof is single-threaded; the child only makes system calls until it executes
    // CMD or exits (`child` below).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        child(&prog, &ptrs, info_w.as_raw_fd(), ack_r.as_raw_fd());
    }
    drop((info_w, ack_r));
    let mut info = [0u8; 8];
    if let Err(e) = info_r.read_exact(&mut info) {
        wait_child(pid)?;
        return Err(e).context("the command's child ended before installing the filter");
    }
    let (status, value) = two_words(&info);
    if status != 0 {
        wait_child(pid)?;
        let e = std::io::Error::from_raw_os_error(value);
        return Err(e).context("installing the seccomp filter (CONFIG_SECCOMP_FILTER?)");
    }
    let ours = [info_r.as_raw_fd(), ack_w.as_raw_fd()];
    start_supervisor(take_fd(pid, value)?, args, &ours)?;
    ack_w
        .write_all(b"k")
        .context("acknowledging the listener")?;
    // Then the pipe stays empty (EOF at exec) unless exec fails: its errno.
    let mut err = [0u8; 4];
    match info_r.read_exact(&mut err) {
        Ok(()) => {
            wait_child(pid)?;
            Ok(Spawned::ExecFailed(std::io::Error::from_raw_os_error(
                i32::from_ne_bytes(err),
            )))
        }
        Err(_) => Ok(Spawned::Running(pid)),
    }
}

fn two_words(b: &[u8; 8]) -> (i32, i32) {
    (
        i32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// The forked child: installs the filter (with `no_new_privs` only if it is needed: without
/// CAP_SYS_ADMIN), sends `(0, listener fd)` or `(1, errno)` on `info_fd`, waits for the parent
/// to have taken the listener, executes CMD; if that fails, sends its errno and exits 127.
fn child(
    prog: &[libc::sock_filter],
    argv: &[*const libc::c_char],
    info_fd: RawFd,
    ack_fd: RawFd,
) -> ! {
    let send = |a: i32, b: i32| {
        let mut w = [0u8; 8];
        w[..4].copy_from_slice(&a.to_ne_bytes());
        w[4..].copy_from_slice(&b.to_ne_bytes());
        // SAFETY: writes 8 bytes from `w`.
        unsafe { libc::write(info_fd, w.as_ptr().cast(), 8) };
    };
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    let mut fd = seccomp_install(&fprog);
    if fd < 0 && errno() == libc::EACCES {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        fd = seccomp_install(&fprog);
    }
    if fd < 0 {
        send(1, errno());
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(126) };
    }
    send(0, fd as i32);
    let mut ack = 0u8;
    // SAFETY: reads at most 1 byte into `ack`; then closes our copy of the listener (the
    // parent has its own) and executes CMD with a NULL-terminated argv of live CStrings.
    unsafe {
        if libc::read(ack_fd, (&raw mut ack).cast(), 1) != 1 {
            libc::_exit(126);
        }
        libc::close(fd as RawFd);
        libc::execvp(argv[0], argv.as_ptr());
    }
    let e = errno();
    // SAFETY: writes 4 bytes from `e`, then ends the child.
    unsafe {
        libc::write(info_fd, e.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, prog)`: the listener's
/// descriptor, or -1 with errno set.
fn seccomp_install(fprog: &libc::sock_fprog) -> libc::c_long {
    // SAFETY: `fprog` points to a valid program for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            std::ptr::from_ref(fprog),
        )
    }
}

/// A copy of descriptor `fd` of process `pid` (`pidfd_open` + `pidfd_getfd`).
fn take_fd(pid: libc::pid_t, fd: i32) -> Result<OwnedFd> {
    // SAFETY: plain system calls; the results are checked before use.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(std::io::Error::last_os_error()).context("pidfd_open of the command");
    }
    // SAFETY: pidfd_open returned a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: as above.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(std::io::Error::last_os_error()).context("pidfd_getfd of the seccomp listener");
    }
    // SAFETY: pidfd_getfd returned a new (O_CLOEXEC) descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// Forks the supervisor: a new session, stdin/stdout on /dev/null, stderr on the log or
/// /dev/null, `close` closed (the parent's ends of its pipes to the child); it serves `listener`
/// until no process holds the filter, then exits. The parent keeps nothing of the listener.
fn start_supervisor(listener: OwnedFd, args: &LegacyArgs, close: &[RawFd]) -> Result<()> {
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("/dev/null")?;
    let log = match &args.log {
        Some(p) => Some(
            File::options()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening the log {}", p.display()))?,
        ),
        None => None,
    };
    // SAFETY: oprof is single-threaded; the child continues with this thread's state only.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("fork of the supervisor"),
        0 => {
            let err = log.as_ref().unwrap_or(&null).as_raw_fd();
            // SAFETY: descriptor and session calls on descriptors we own.
            unsafe {
                libc::setsid();
                libc::dup2(null.as_raw_fd(), 0);
                libc::dup2(null.as_raw_fd(), 1);
                libc::dup2(err, 2);
                for &fd in close {
                    libc::close(fd);
                }
            }
            let mut sup = Supervisor {
                listener,
                images: args.images.clone(),
                log,
            };
            let code = match sup.serve() {
                Ok(()) => 0,
                Err(e) => {
                    sup.note(&format!("error: {e:#}"));
                    1
                }
            };
            // SAFETY: ends the supervisor without running the parent's exit handlers twice.
            unsafe { libc::_exit(code) }
        }
        _ => Ok(()),
    }
}

/// The serving side: the listener, the images file, the log.
///
/// # Invariants
///
/// `listener` is a seccomp user-notification listener of the filter [`filter_program`] builds.
struct Supervisor {
    listener: OwnedFd,
    images: PathBuf,
    log: Option<File>,
}

/// The served call's arguments, as the caller's ABI passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The image id (legacy: the dcookie).
    pub cookie: u64,
    /// The caller's buffer address.
    pub buf: u64,
    /// The buffer's size in bytes.
    pub size: u64,
}

impl Call {
    /// The arguments of a served call: ARM EABI passes the 64-bit cookie in a register pair
    /// (r0 low word, r1 high word, as opd_cookie.c's `syscall(nr, lo, hi, buf, size)`), then
    /// `buf`, `size`; arm64 and x86-64 pass `cookie, buf, size`. None for another arch.
    pub fn decode(arch: u32, args: &[u64; 6]) -> Option<Call> {
        let lo32 = |a: u64| a & 0xffff_ffff;
        match arch {
            AUDIT_ARCH_ARM => Some(Call {
                cookie: lo32(args[0]) | (lo32(args[1]) << 32),
                buf: lo32(args[2]),
                size: lo32(args[3]),
            }),
            AUDIT_ARCH_AARCH64 | AUDIT_ARCH_X86_64 => Some(Call {
                cookie: args[0],
                buf: args[1],
                size: args[2],
            }),
            _ => None,
        }
    }
}

/// What a served call gets.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The return value: the length written.
    Len(usize),
    /// The call fails with this errno.
    Errno(i32),
    /// The caller is gone (killed, exited): nothing to send.
    Gone,
}

impl Supervisor {
    /// Serves notifications until the listener hangs up (no process holds the filter).
    fn serve(&mut self) -> Result<()> {
        loop {
            let mut pfd = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd, no timeout.
            if unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e).context("poll of the listener");
            }
            if pfd.revents & libc::POLLIN != 0 {
                self.serve_one()?;
            } else if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                return Ok(());
            }
        }
    }

    /// Receives one notification and answers it.
    fn serve_one(&mut self) -> Result<()> {
        // SAFETY: seccomp_notif is plain data; RECV demands it zeroed.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV writes one seccomp_notif into `req`.
        if unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut req,
            )
        } != 0
        {
            let e = std::io::Error::last_os_error();
            // ENOENT: the caller went away between poll and RECV.
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::EINTR) => Ok(()),
                _ => Err(e).context("SECCOMP_IOCTL_NOTIF_RECV"),
            };
        }
        let answer = self.answer(&req);
        let (val, error) = match answer {
            Answer::Len(n) => (n as i64, 0),
            Answer::Errno(e) => (0, -e),
            Answer::Gone => {
                self.note(&format!("pid {}: gone before the answer", req.pid));
                return Ok(());
            }
        };
        self.note(&format!("pid {}: {answer:?}", req.pid));
        let resp = libc::seccomp_notif_resp {
            id: req.id,
            val,
            error,
            flags: 0,
        };
        // SAFETY: SEND reads one seccomp_notif_resp.
        if unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &resp,
            )
        } != 0
        {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e).context("SECCOMP_IOCTL_NOTIF_SEND");
            }
            self.note(&format!("pid {}: gone before the answer was sent", req.pid));
        }
        Ok(())
    }

    /// Whether notification `id` is still pending (its caller alive, in the call).
    fn id_valid(&self, id: u64) -> bool {
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &id,
            ) == 0
        }
    }

    /// The legacy answer to one call, in legacy's order of checks.
    fn answer(&self, req: &libc::seccomp_notif) -> Answer {
        let Some(call) = Call::decode(req.data.arch, &req.data.args) else {
            return Answer::Errno(libc::ENOSYS);
        };
        // The caller's memory and capabilities, opened by pid and then confirmed to be the
        // caller's by ID_VALID (a pid reused after the caller died fails it): every later
        // access goes through these, never through the pid again.
        let caller = match Caller::open(req.pid) {
            Ok(c) => c,
            Err(_) => return unopened(self.id_valid(req.id)),
        };
        if !self.id_valid(req.id) {
            return Answer::Gone;
        }
        let answer = self.lookup(&caller, call);
        if !self.id_valid(req.id) {
            return Answer::Gone;
        }
        answer
    }

    fn lookup(&self, caller: &Caller, call: Call) -> Answer {
        if !caller.cap_sys_admin || !caller.init_user_ns {
            return Answer::Errno(libc::EPERM);
        }
        let Some(mut path) = image_path(&self.images, call.cookie) else {
            return Answer::Errno(libc::EINVAL);
        };
        path.push(0);
        if path.len() > PATH_LIMIT {
            return Answer::Errno(libc::ENAMETOOLONG);
        }
        if (path.len() as u64) > call.size {
            return Answer::Errno(libc::ERANGE);
        }
        match caller.write(call.buf, &path) {
            true => Answer::Len(path.len()),
            false => Answer::Errno(libc::EFAULT),
        }
    }

    fn note(&mut self, line: &str) {
        if let Some(log) = self.log.as_mut() {
            // Best effort: a full disk must not stop the service.
            let _ = writeln!(log, "oprof legacy[{}]: {line}", std::process::id());
        }
    }
}

/// The path of image `cookie` in the images file (unescaped), if it lists it.
fn image_path(images: &Path, cookie: u64) -> Option<Vec<u8>> {
    let text = std::fs::read(images).ok()?;
    for line in text.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let mut buf = vec![0u8; line.len()];
        let Ok((id, n)) = oprofile_common::image::parse_line(line, &mut buf) else {
            continue;
        };
        if u64::from(id) == cookie {
            buf.truncate(n);
            return Some(buf);
        }
    }
    None
}

/// The answer to a caller whose `/proc/PID` files could not be opened: none when its
/// notification is no longer `valid` (it is gone); EPERM when it still waits (`/proc/PID`
/// refused by Yama, hidepid or an LSM): never silence, which would leave it blocked.
fn unopened(valid: bool) -> Answer {
    if valid {
        Answer::Errno(libc::EPERM)
    } else {
        Answer::Gone
    }
}

/// Whether `/proc/PID/ns/user` (`ns`) is the user namespace of `/proc/1` (`init`), compared by
/// (device, inode). Both absent (ENOENT: a kernel without `CONFIG_USER_NS`) is the initial one;
/// any other failure is not.
fn in_init_user_ns(
    ns: std::io::Result<std::fs::Metadata>,
    init: std::io::Result<std::fs::Metadata>,
) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (ns, init) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        (Err(a), Err(b)) => {
            a.kind() == std::io::ErrorKind::NotFound && b.kind() == std::io::ErrorKind::NotFound
        }
        _ => false,
    }
}

/// The initial user namespace: `/proc/1/ns/user`, or where `/proc/1` is refused to the supervisor
/// (a container's root lacking capabilities its init has) the supervisor's own, which oprof,
/// root on the target, shares with init.
fn initial_user_ns() -> std::io::Result<std::fs::Metadata> {
    std::fs::metadata("/proc/1/ns/user").or_else(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => std::fs::metadata("/proc/self/ns/user"),
        _ => Err(e),
    })
}

/// A caller's memory (`/proc/PID/mem`, opened read-write), its writable mappings and whether
/// it has CAP_SYS_ADMIN in the initial user namespace, taken when it was opened.
struct Caller {
    mem: File,
    writable: Vec<(u64, u64)>,
    cap_sys_admin: bool,
    /// `capable()` checks the initial user namespace; `CapEff` is relative to the task's own.
    init_user_ns: bool,
}

impl Caller {
    /// Opens `pid`'s memory, maps, status and user namespace. Errors: the process is gone, or
    /// its `/proc` files cannot be opened.
    fn open(pid: u32) -> std::io::Result<Caller> {
        let dir = PathBuf::from(format!("/proc/{pid}"));
        let mem = File::options()
            .read(true)
            .write(true)
            .open(dir.join("mem"))?;
        let maps = std::fs::read_to_string(dir.join("maps"))?;
        let status = std::fs::read_to_string(dir.join("status"))?;
        let ns = std::fs::metadata(dir.join("ns/user"));
        Ok(Caller {
            mem,
            writable: writable_ranges(&maps),
            cap_sys_admin: cap_eff(&status).is_some_and(|c| c & (1 << CAP_SYS_ADMIN) != 0),
            init_user_ns: in_init_user_ns(ns, initial_user_ns()),
        })
    }

    /// Writes `bytes` at `addr`, only where the caller could write itself (copy_to_user's
    /// rule: `/proc/PID/mem` would also write read-only pages); false if not all of it is.
    fn write(&self, addr: u64, bytes: &[u8]) -> bool {
        let Some(end) = addr.checked_add(bytes.len() as u64) else {
            return false;
        };
        if !covered(&self.writable, addr, end) {
            return false;
        }
        self.mem.write_all_at(bytes, addr).is_ok()
    }
}

/// `[start, end)` of every writable mapping in a `/proc/PID/maps` text, in order.
pub fn writable_ranges(maps: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .filter_map(crate::resolve::unwind::maps::parse_line)
        .filter(|&(_, _, perms, _, _)| perms.as_bytes().get(1) == Some(&b'w'))
        .map(|(start, end, ..)| (start, end))
        .collect()
}

/// Whether the sorted, non-overlapping `ranges` cover `[start, end)` without a gap.
pub fn covered(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    let mut at = start;
    for &(s, e) in ranges {
        if at >= end {
            break;
        }
        if s <= at && at < e {
            at = e;
        }
    }
    at >= end
}

/// `CapEff` of a `/proc/PID/status` text.
fn cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the classic BPF program on (arch, nr) as the kernel would.
    fn run_bpf(prog: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let mut pc = 0usize;
        let mut acc = 0u32;
        loop {
            let i = prog[pc];
            match u32::from(i.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    acc = if i.k == 0 {
                        nr
                    } else if i.k == 4 {
                        arch
                    } else {
                        panic!("load {}", i.k)
                    };
                    pc += 1;
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += 1 + usize::from(if acc == i.k { i.jt } else { i.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn filter_notifies_only_lookup_dcookie_of_its_arch() {
        let p = filter_program();
        let notif = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        assert_eq!(run_bpf(&p, AUDIT_ARCH_ARM, 249), notif);
        assert_eq!(run_bpf(&p, AUDIT_ARCH_AARCH64, 18), notif);
        assert_eq!(run_bpf(&p, AUDIT_ARCH_X86_64, 212), notif);
        // Another ABI's number, or another call, is allowed.
        assert_eq!(run_bpf(&p, AUDIT_ARCH_ARM, 18), allow);
        assert_eq!(run_bpf(&p, AUDIT_ARCH_ARM, 212), allow);
        assert_eq!(run_bpf(&p, AUDIT_ARCH_AARCH64, 249), allow);
        assert_eq!(run_bpf(&p, AUDIT_ARCH_X86_64, 18), allow);
        // Other ABIs: nothing is taken (i386, whose 253 was lookup_dcookie, among them).
        for arch in [0x4000_0003, 0, u32::MAX] {
            for nr in 0..500 {
                assert_eq!(run_bpf(&p, arch, nr), allow, "arch {arch:#x} nr {nr}");
            }
        }
        for nr in 0..500 {
            let n = run_bpf(&p, AUDIT_ARCH_ARM, nr);
            assert_eq!(n == notif, nr == 249, "arm nr {nr}");
        }
    }

    #[test]
    fn decode_arm_pair_and_64_bit() {
        let a = [7, 1, 0x1000, 64, 0, 0];
        assert_eq!(
            Call::decode(AUDIT_ARCH_ARM, &a),
            Some(Call {
                cookie: (1 << 32) | 7,
                buf: 0x1000,
                size: 64
            })
        );
        let a = [7, 0x7fff_0000_1000, 64, 0, 0, 0];
        assert_eq!(
            Call::decode(AUDIT_ARCH_AARCH64, &a),
            Some(Call {
                cookie: 7,
                buf: 0x7fff_0000_1000,
                size: 64
            })
        );
        assert_eq!(Call::decode(0x4000_0003, &a), None);
    }

    #[test]
    fn writable_coverage() {
        let maps = "00010000-00011000 r-xp 00000000 00:02 5 /bin/x\n\
                    00020000-00021000 rw-p 00000000 00:00 0\n\
                    00021000-00023000 rw-p 00000000 00:00 0 [heap]\n\
                    00030000-00031000 rw-p 00000000 00:00 0\n";
        let r = writable_ranges(maps);
        assert_eq!(
            r,
            [(0x20000, 0x21000), (0x21000, 0x23000), (0x30000, 0x31000)]
        );
        assert!(covered(&r, 0x20ff0, 0x21010)); // across adjacent mappings
        assert!(covered(&r, 0x22ff0, 0x23000));
        assert!(!covered(&r, 0x22ff0, 0x23001)); // past the heap's end: a gap
        assert!(!covered(&r, 0x10000, 0x10001)); // read-only
        assert!(!covered(&r, 0, 1));
    }

    #[test]
    fn images_lookup_unescapes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("images");
        std::fs::write(&f, b"1 /bin/a\n2 /tmp/new\\012line\n").unwrap();
        assert_eq!(image_path(&f, 1).as_deref(), Some(&b"/bin/a"[..]));
        assert_eq!(image_path(&f, 2).as_deref(), Some(&b"/tmp/new\nline"[..]));
        assert_eq!(image_path(&f, 3), None);
        assert_eq!(image_path(&f, 1 << 32 | 1), None);
        assert_eq!(image_path(&dir.path().join("none"), 1), None);
    }

    #[test]
    fn only_the_initial_user_namespace_is_capable() {
        let gone = || Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        let refused = || Err(std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(
            in_init_user_ns(gone(), gone()),
            "a kernel without user namespaces"
        );
        assert!(!in_init_user_ns(refused(), refused()));
        assert!(!in_init_user_ns(
            gone(),
            std::fs::metadata("/proc/1/ns/user")
        ));
        assert!(matches!(unopened(true), Answer::Errno(libc::EPERM)));
        assert!(matches!(unopened(false), Answer::Gone));
        let me = Caller::open(std::process::id()).unwrap();
        let link = |p: &str| std::fs::read_link(p);
        let initial = link("/proc/1/ns/user").or_else(|_| link("/proc/self/ns/user"));
        let same = link("/proc/self/ns/user").unwrap() == initial.unwrap();
        assert_eq!(
            me.init_user_ns, same,
            "this process, as readlink compares it"
        );
        assert!(Caller::open(u32::MAX).is_err(), "no such pid");
        // `unshare -Ur`: root (full CapEff) in a child user namespace, asked once it is in it.
        let mut child = match std::process::Command::new("unshare")
            .args(["-Ur", "sh", "-c", "echo in; exec sleep 10"])
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: unshare -Ur: {e}");
                return;
            }
        };
        let mut line = String::new();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let _ = std::io::BufRead::read_line(&mut out, &mut line);
        let opened = Caller::open(child.id());
        let _ = child.kill();
        let status = child.wait().unwrap();
        if line != "in\n" {
            eprintln!("skipped: unshare -Ur failed ({status})");
            return;
        }
        // Without CAP_SYS_PTRACE over it (a container's root) its /proc/PID/mem is refused: the
        // waiting caller then gets EPERM ([`unopened`]); opened, it is not in the initial one.
        match opened {
            Ok(c) => assert!(c.cap_sys_admin && !c.init_user_ns),
            Err(e) => eprintln!("/proc/{}: {e}: answered EPERM", child.id()),
        }
    }

    #[test]
    fn cap_eff_parse() {
        assert_eq!(
            cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ff_ffff_ffff)
        );
        assert_eq!(cap_eff("Name:\tx\n"), None);
    }
}
