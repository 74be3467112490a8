//! `oprof record`: profile the target system and write a session directory (the roles of
//! legacy `opcontrol` + `oprofiled` + `oparchive`, in the shape of `operf` / `perf record`).
//!
//! Steps: checks that need nothing from the kernel (the command exists, root, the output
//! directory), then the module and oprofilefs ([`System::acquire`]), the settings (events placed
//! on counters as `oprof setup` does, buffer sizes, `backtrace_depth`), then the capture:
//! `buffer` is opened and drained by a reader thread with blocking reads of `buffer_size`
//! words (as `oprofiled` read), `enable` is written 1, the command runs (or the time passes, or
//! a signal comes), `enable` is written 0 (stop + flush), the reader empties the buffer and
//! `buffer` is closed (always before exiting: also on errors and signals). Then the session files
//! are copied, the system put back as found, and one summary line printed.

use crate::input::session::{
    self, CounterInfo, Losses, SessionInfo, Settings, Time, Totals, DEFAULT_DIR,
};
use crate::input::stream::{self, Stream};
use crate::resolve::debugfile::Ids;
use crate::resolve::images::ModuleSnapshot;
use crate::resolve::kallsyms::Kallsyms;
use crate::target::events::{self, Placement};
use crate::target::session_dir::{self, SessionDir};
use crate::target::system::{self, Fs, System, Want, OPROFILEFS};
use crate::view::points;
use anyhow::{anyhow, bail, Context, Result};
use nix::sys::signal::{kill, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// `--user-stack` default, bytes: perf's `--call-graph dwarf` takes 8192; 2048 holds the chains
/// of C programs (a qsort comparison back to main) at a quarter of the words per sample.
const DEFAULT_USER_STACK: u64 = 2048;
/// `buffer_size` (words) with snapshots unless `--buffer-size` is given: a sample takes about
/// 540 words, so the legacy 131072 would hold 100 ms of 2 CPUs at 1,000 samples/s, no more.
const SNAPSHOT_BUFFER_SIZE: u64 = 1 << 20;

/// `oprof record` options.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Hardware event, `NAME[:COUNT[:UNITMASK[:KERNEL[:USER]]]]` as opcontrol/operf spell it
    /// (COUNT: sampling period, 0 = count only; KERNEL/USER: 0 or 1). Repeatable, or
    /// comma-separated. Placed on counters like `oprof setup`. Default: timer mode (when the
    /// module is loaded here: `timer=1`; a module already running a hardware model samples
    /// CPU_CYCLES:100000, the legacy default event).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// Record call chains of up to DEPTH frames per sample (`backtrace_depth`, 0..=128).
    #[arg(short = 'g', long = "callgraph", value_name = "DEPTH")]
    pub callgraph: Option<u64>,
    /// With -g: bytes of user stack copied per sample (`user_stack_size`, 0..=16384; default
    /// 2048 where the module has the file, 0 turns it off), unwound by `oprof report` with
    /// the images' .ARM.exidx/.debug_frame/.eh_frame: call chains of code without frame
    /// pointers (Thumb-2, -O2).
    #[arg(long, value_name = "BYTES")]
    pub user_stack: Option<u64>,
    /// Event buffer size in words (`buffer_size`; default 131072, 1048576 with user stack
    /// snapshots).
    #[arg(long, value_name = "WORDS")]
    pub buffer_size: Option<u64>,
    /// Per-CPU buffer size in samples (`cpu_buffer_size`; default 8192).
    #[arg(long, value_name = "SAMPLES")]
    pub cpu_buffer_size: Option<u64>,
    /// Words left free when the reader is woken (`buffer_watershed`; default 32768, half the
    /// buffer with snapshots unless --buffer-size is given).
    #[arg(long, value_name = "WORDS")]
    pub watershed: Option<u64>,
    /// Also run Plan 9 kprof (`kprof/kpctl` startclr .. stop) and save `kpdata`.
    #[arg(long)]
    pub kprof: bool,
    /// Also time the module's profile points and save `profile_points`: every point, or with
    /// `--points=NAME,...` only those (reset + enable; the others are disabled for the run).
    #[arg(long, value_name = "NAMES", num_args = 0..=1, require_equals = true, value_delimiter = ',',
          default_missing_value = "all")]
    pub points: Option<Vec<String>>,
    /// Session directory to write.
    #[arg(short = 'o', long, value_name = "DIR", default_value = DEFAULT_DIR)]
    pub output: PathBuf,
    /// Overwrite an existing session directory.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Stop after this many seconds (a running CMD then gets SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Copy every sampled user image and the sampled modules' .ko files into DIR/root/ (like
    /// oparchive), so the session can be reported anywhere.
    #[arg(long)]
    pub archive: bool,
    /// The oprofile.ko to load when the module is not loaded (default: `modprobe oprofile`,
    /// then oprofile.ko beside the oprof binary).
    #[arg(long, value_name = "PATH")]
    pub module: Option<PathBuf>,
    /// oprofilefs mount point (mounted here when nothing is mounted there).
    #[arg(long, value_name = "DIR", default_value = OPROFILEFS)]
    pub oprofilefs: PathBuf,
    /// The command to profile, after `--`; the whole system is profiled while it runs and its
    /// exit status is oprof's.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// An error with its own exit status (127: command not found, 126: not executable).
#[derive(Debug)]
pub struct Failed {
    pub code: i32,
    pub msg: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Failed {}

/// Directories searched for a command when `PATH` is unset.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `cmd` as a shell would: a name with a `/` as is, else in each `PATH` directory.
/// Errors: [`Failed`] with 127 (not found) or 126 (found but not an executable file).
pub fn find_command(cmd: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf> {
    let shown = cmd.to_string_lossy();
    let p = Path::new(cmd);
    let candidates: Vec<PathBuf> = if cmd.as_bytes().contains(&b'/') {
        vec![p.to_path_buf()]
    } else if cmd.is_empty() {
        vec![]
    } else {
        std::env::split_paths(path_var.unwrap_or(OsStr::new(DEFAULT_PATH)))
            .map(|d| d.join(p))
            .collect()
    };
    if let Some(c) = candidates.iter().find(|c| is_executable(c)) {
        return Ok(c.clone());
    }
    if candidates.iter().any(|c| c.is_file()) {
        return Err(Failed {
            code: 126,
            msg: format!("{shown}: permission denied (not executable)"),
        }
        .into());
    }
    Err(Failed {
        code: 127,
        msg: format!("{shown}: command not found"),
    }
    .into())
}

/// Checks `duration` (seconds): positive and finite.
fn duration(secs: Option<f64>) -> Result<Option<Duration>> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| anyhow!("--duration {s}: expected a positive number of seconds"))
    })
    .transpose()
}

/// What the reader thread read.
#[derive(Debug, Default, Clone, Copy)]
struct ReadTotals {
    bytes: u64,
    reads: u64,
}

/// The reader loop: blocking reads of `chunk` bytes from `buffer`, appended to `out`. Once
/// `stop` is seen set before a read, that read is the last one: it returns everything left
/// (profiling is stopped and flushed, and a read takes up to `buffer_size` words).
fn drain(mut buffer: File, mut out: File, chunk: usize, stop: &AtomicBool) -> Result<ReadTotals> {
    let mut buf = vec![0u8; chunk];
    let mut t = ReadTotals::default();
    loop {
        let last = stop.load(Ordering::Acquire);
        match buffer.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                out.write_all(&buf[..n])
                    .context("writing the samples file")?;
                t.bytes += n as u64;
                t.reads += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow!("reading /dev/oprofile/buffer: {e}")),
        }
        if last {
            break;
        }
    }
    drop(buffer);
    Ok(t)
}

/// Runs `f` with SIGINT, SIGTERM and SIGCHLD blocked, so that a thread it spawns inherits the
/// mask and the signals go to the main thread.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGCHLD] {
        set.add(s);
    }
    let mut old = SigSet::empty();
    // pthread_sigmask(3) fails only for an invalid `how`.
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old));
    let r = f();
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    r
}

/// Opens `buffer`; errors say why in the module's terms (for EINVAL the reason the module
/// logged, if the open logged one).
fn open_buffer(fs: &Fs) -> Result<File> {
    let p = fs.path("buffer");
    let logged_before = system::last_kernel_message("oprofile: ");
    File::open(&p).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => " (needs root: CAP_SYS_ADMIN)".to_string(),
            Some(libc::EBUSY) => {
                " (another profiler has it open: oprof record, oprofiled or optool capture)"
                    .to_string()
            }
            Some(libc::EINVAL) => match system::last_kernel_message("oprofile: ")
                .filter(|m| Some(m) != logged_before.as_ref())
            {
                Some(m) => format!(" (kernel log: {m})"),
                None => " (settings rejected, see dmesg)".to_string(),
            },
            _ => String::new(),
        };
        anyhow!("opening {}: {e}{why}", p.display())
    })
}

/// A running capture: `buffer` open in the reader thread, profiling enabled. [`Capture::finish`]
/// (or drop) stops profiling, lets the reader empty the buffer and closes it.
struct Capture {
    fs: PathBuf,
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<Result<ReadTotals>>>,
}

impl Capture {
    /// Opens `buffer`, starts the reader (appending to `out`, reads of `chunk` bytes) and
    /// writes 1 to `enable`.
    fn start(fs: &Fs, out: File, chunk: usize) -> Result<Capture> {
        let buffer = open_buffer(fs)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel::<()>();
        let st = stop.clone();
        let handle = with_signals_blocked(|| {
            std::thread::Builder::new()
                .name("oprof-reader".into())
                .spawn(move || {
                    let _done = tx; // dropped when the reader ends: wakes `finish`
                    drain(buffer, out, chunk, &st)
                })
        })
        .context("starting the reader thread")?;
        let cap = Capture {
            fs: fs.dir.clone(),
            stop,
            done,
            handle: Some(handle),
        };
        Fs::new(&cap.fs).write("enable", "1")?;
        Ok(cap)
    }

    /// Whether the reader has ended early (an error).
    fn reader_ended(&self) -> bool {
        matches!(self.done.try_recv(), Err(mpsc::TryRecvError::Disconnected))
    }

    /// Stops profiling (`enable` 0: the module flushes every CPU buffer), wakes the reader with
    /// `dump` until it has read everything, and joins it (`buffer` is closed then).
    fn finish(&mut self) -> Result<ReadTotals> {
        let Some(handle) = self.handle.take() else {
            bail!("capture already finished");
        };
        let fs = Fs::new(&self.fs);
        let stopped = fs.write("enable", "0");
        self.stop.store(true, Ordering::Release);
        let mut dump_err = None;
        for _ in 0..600 {
            if let Err(e) = fs.write("dump", "1") {
                dump_err = Some(e);
            }
            match self.done.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                _ => {
                    dump_err = None;
                    break;
                }
            }
        }
        if let Some(e) = dump_err {
            return Err(e.context("the reader of /dev/oprofile/buffer did not finish"));
        }
        let totals = match handle.join() {
            Ok(r) => r?,
            Err(_) => bail!("the reader thread panicked"),
        };
        stopped?;
        Ok(totals)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.handle.is_some() {
            if let Err(e) = self.finish() {
                eprintln!("oprof: warning: stopping the capture: {e:#}");
            }
        }
    }
}

/// The name of signal `sig` (SIGINT/SIGTERM; `signal` for another) for `ended_by`.
fn signal_name(sig: usize) -> &'static str {
    match i32::try_from(sig)
        .ok()
        .and_then(|s| Signal::try_from(s).ok())
    {
        Some(Signal::SIGINT) => "SIGINT",
        Some(Signal::SIGTERM) => "SIGTERM",
        _ => "signal",
    }
}

/// `128 + signal` for a killed process, else its exit code.
fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// `NAME SECTION 0xADDR` lines of every module's `/sys/module/NAME/sections/*`.
fn module_sections() -> String {
    let mut out = String::new();
    let Ok(rd) = std::fs::read_dir("/sys/module") else {
        return out;
    };
    let mut mods: Vec<PathBuf> = rd.filter_map(|e| Some(e.ok()?.path())).collect();
    mods.sort();
    for m in mods {
        let Ok(secs) = std::fs::read_dir(m.join("sections")) else {
            continue;
        };
        let name = m
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut files: Vec<PathBuf> = secs.filter_map(|e| Some(e.ok()?.path())).collect();
        files.sort();
        for f in files {
            if let Ok(v) = std::fs::read_to_string(&f) {
                let sec = f
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                out.push_str(&format!("{name} {sec} {}\n", v.trim()));
            }
        }
    }
    out
}

/// `.ko` files under `dir` (recursively, at most 8 levels), by module name (`-` as `_`).
fn find_kos(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && depth < 8 {
                stack.push((p, depth + 1));
            } else if ft.is_file() {
                if let Some(stem) = p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".ko"))
                {
                    out.entry(stem.replace('-', "_")).or_insert(p);
                }
            }
        }
    }
    out
}

/// Copies the target file `path` to `root/PATH` of the session ([`SessionDir::create_under`]:
/// no link followed, 0600) and records its build-id and `.gnu_debuglink` (read from the bytes
/// copied; nothing for a file with neither, or no ELF file) in `ids` by target path: what a host
/// needs to find the debug file later. Errors name the file.
pub fn archive_image(out: &SessionDir, path: &Path, ids: &mut BTreeMap<String, Ids>) -> Result<()> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut dest = out.create_under(session::ROOT, path)?;
    dest.write_all(&data).with_context(|| {
        format!(
            "copying {} into {}/{}",
            path.display(),
            out.path().display(),
            session::ROOT
        )
    })?;
    let found = object::File::parse(&*data).ok().map(|f| Ids::of(&f));
    if let Some(found) = found.filter(|i| !i.is_empty()) {
        ids.insert(path.display().to_string(), found);
    }
    Ok(())
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => n += m.len(),
                Err(_) => {}
            }
        }
    }
    n
}

/// What the decoded stream says: samples, and what `--archive` should copy.
#[derive(Debug, Default)]
struct StreamFacts {
    samples: u64,
    /// Image ids of user samples, call-chain frames and tasks.
    images: BTreeSet<u64>,
    /// Kernel PCs (samples and frames), to find the sampled modules.
    kernel_pcs: Vec<u64>,
}

fn stream_facts(bytes: &[u8], word: usize) -> Result<StreamFacts> {
    let st = Stream::from_bytes(bytes, word)?;
    let d = stream::decode(&st)?;
    let mut f = StreamFacts {
        samples: d.samples.len() as u64,
        ..Default::default()
    };
    for s in &d.samples {
        f.images.extend(s.ctx.app_cookie.filter(|&c| c != 0));
        match s.ctx.in_kernel {
            Some(true) => f.kernel_pcs.push(s.pc),
            Some(false) => f.images.extend(s.ctx.cookie.filter(|&c| c != 0)),
            None => {}
        }
        for fr in &s.frames {
            match fr.in_kernel {
                Some(true) => f.kernel_pcs.push(fr.pc),
                Some(false) => f.images.extend(fr.cookie.filter(|&c| c != 0)),
                None => {}
            }
        }
    }
    Ok(f)
}

/// The last SIGINT/SIGTERM received (its number; 0: none), set by signal-hook's handlers.
static SIGNAL: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();

/// Installs the SIGINT/SIGTERM handlers (once per process) and clears [`SIGNAL`].
fn install_signal_handlers() -> Result<()> {
    let mut fresh = false;
    let flag = SIGNAL.get_or_init(|| {
        fresh = true;
        Arc::new(AtomicUsize::new(0))
    });
    if fresh {
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_usize(s, flag.clone(), s as usize)
                .context("installing signal handlers")?;
        }
    }
    flag.store(0, Ordering::SeqCst);
    Ok(())
}

/// The signal received since [`install_signal_handlers`], 0 if none.
fn signal_received() -> usize {
    SIGNAL.get().map_or(0, |f| f.load(Ordering::SeqCst))
}

/// Runs `oprof record`; returns the exit status (CMD's, or 0).
pub fn run(args: &RecordArgs, argv: &[String]) -> Result<i32> {
    let cmd = match args.command.split_first() {
        Some((c, rest)) => Some((
            c.clone(),
            find_command(c, std::env::var_os("PATH").as_deref())?,
            rest.to_vec(),
        )),
        None => None,
    };
    let limit = duration(args.duration)?;
    if !system::is_root() {
        bail!("must be run as root (opening /dev/oprofile/buffer needs CAP_SYS_ADMIN, loading the module CAP_SYS_MODULE)");
    }
    install_signal_handlers()?;
    // A session holds process memory (stack bytes, addresses): nothing of it is for others.
    session_dir::private_umask();
    let mut out = SessionDir::prepare(&args.output, args.force)?;
    let want = Want {
        dir: args.oprofilefs.clone(),
        module: args.module.clone(),
        params: if args.events.is_empty() {
            vec!["timer=1".into()]
        } else {
            vec![]
        },
    };
    let mut sys = System::acquire(&want)?;
    let r = record(args, argv, &mut sys, &mut out, cmd, limit);
    for e in sys.release() {
        eprintln!("oprof: warning: {e}");
    }
    r
}

/// The events of the session: `-e` placed on counters; none in timer mode.
fn placements(args: &RecordArgs, cpu_type: &str) -> Result<Vec<Placement>> {
    let model = events::model(Some(cpu_type))?;
    Ok(match (model, args.events.is_empty()) {
        (None, true) => vec![],
        (None, false) => bail!(
            "cpu_type is timer (module loaded with timer=1, or the kernel has no supported PMU): hardware events are not available; leave out -e for timer mode"
        ),
        (Some(m), false) => events::place(m, &args.events.join(","))?,
        (Some(m), true) => {
            let (name, count) = oprofile_common::events::DEFAULT_EVENT;
            eprintln!("oprof record: note: no -e given and the module runs the {cpu_type} model: sampling {name}:{count} (load it with timer=1 for timer mode)");
            events::place(m, name)?
        }
    })
}

/// Why the capture ended: [`SessionInfo::ended_by`] says it as [`End::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// CMD exited (or was killed by someone else).
    Command,
    /// SIGINT or SIGTERM (the signal's number); CMD, if any, was sent SIGTERM.
    Signal(usize),
    /// `--duration` passed.
    Duration,
    /// The reader of `buffer` ended early (an error): the session is incomplete.
    ReaderError,
}

impl End {
    /// `command`, `SIGINT`, `SIGTERM` (`signal` for another), `duration` or `reader error`.
    fn as_str(self) -> &'static str {
        match self {
            End::Command => "command",
            End::Signal(sig) => signal_name(sig),
            End::Duration => "duration",
            End::ReaderError => "reader error",
        }
    }
}

/// The command to profile: the name it was given as (its `argv[0]`), its path, its arguments.
type Cmd = (OsString, PathBuf, Vec<OsString>);

/// The oprofilefs settings of a session, as written and read back.
struct Configured {
    cpu_type: String,
    /// Bytes per stream word: 4 or 8.
    pointer_size: usize,
    placed: Vec<Placement>,
    settings: Settings,
}

/// Writes the session's settings (buffer sizes, `backtrace_depth`, `user_stack_size`, the
/// counters) and reads them back. Errors: an unexpected `pointer_size`, events that do not fit,
/// options this module lacks, a watershed not below the buffer size.
fn configure(args: &RecordArgs, fs: &mut Fs) -> Result<Configured> {
    let cpu_type = fs.read("cpu_type")?;
    let pointer_size = usize::try_from(fs.read_u64("pointer_size")?).unwrap_or(0);
    if pointer_size != 4 && pointer_size != 8 {
        bail!(
            "{}: unexpected pointer_size {pointer_size}",
            fs.path("pointer_size").display()
        );
    }
    let placed = placements(args, &cpu_type)?;
    let depth = args.callgraph.unwrap_or(0);
    let stack = if depth > 0 && fs.exists("user_stack_size") {
        args.user_stack.unwrap_or(DEFAULT_USER_STACK)
    } else {
        0
    };
    if args.user_stack.is_some_and(|s| s > 0) && !fs.exists("user_stack_size") {
        bail!("--user-stack: this oprofile.ko has no user_stack_size");
    }
    let buffer_size = args
        .buffer_size
        .or((stack > 0).then_some(SNAPSHOT_BUFFER_SIZE));
    // The reader is woken when fewer than `buffer_watershed` words are free: with snapshots, at
    // half the buffer (the legacy 32768 words would leave room for some 60 samples).
    let watershed = args
        .watershed
        .or((stack > 0 && args.buffer_size.is_none()).then_some(SNAPSHOT_BUFFER_SIZE / 2));
    for (name, v) in [
        ("buffer_size", buffer_size),
        ("buffer_watershed", watershed),
        ("cpu_buffer_size", args.cpu_buffer_size),
    ] {
        if let Some(v) = v {
            fs.set(name, v)?;
        }
    }
    fs.set("backtrace_depth", depth)?;
    if fs.exists("user_stack_size") {
        fs.set("user_stack_size", stack)?;
    }
    if let Some(m) = events::model(Some(&cpu_type))? {
        for (file, v) in events::counter_writes(m, &placed) {
            fs.set(&file, v)?;
        }
    }
    let settings = Settings {
        buffer_size: fs.read_u64("buffer_size")?,
        buffer_watershed: fs.read_u64("buffer_watershed")?,
        cpu_buffer_size: fs.read_u64("cpu_buffer_size")?,
        backtrace_depth: fs.read_u64("backtrace_depth")?,
        user_stack_size: stack,
    };
    if settings.buffer_watershed >= settings.buffer_size {
        bail!(
            "buffer_watershed {} must be below buffer_size {} words (--watershed, --buffer-size)",
            settings.buffer_watershed,
            settings.buffer_size
        );
    }
    Ok(Configured {
        cpu_type,
        pointer_size,
        placed,
        settings,
    })
}

/// What `--points` and `--kprof` found before the run, to put back after it.
struct Extras {
    /// The profile-point table before `--points` reset it.
    points_before: Option<Vec<points::Point>>,
    /// Whether kprof was running before (it is started again after the run).
    kprof_was_started: bool,
}

/// Checks `--kprof`'s file and starts `--points`. Errors: the module lacks one of them.
fn start_extras(args: &RecordArgs, fs: &Fs) -> Result<Extras> {
    if args.kprof && !fs.exists("kprof/kpctl") {
        bail!(
            "--kprof: {} does not exist (a module without kprof?)",
            fs.path("kprof/kpctl").display()
        );
    }
    let points_before = match &args.points {
        Some(names) => Some(start_points(fs, names)?),
        None => None,
    };
    let kprof_was_started = args.kprof && kpctl(fs)?.get("state").is_some_and(|s| s == "started");
    Ok(Extras {
        points_before,
        kprof_was_started,
    })
}

/// Starts CMD, or says how long the whole system is profiled without one. Errors: CMD cannot
/// be started ([`Failed`] with 127 when not found, else 126).
fn spawn(cmd: &Option<Cmd>, limit: Option<Duration>) -> Result<Option<std::process::Child>> {
    let Some((name, path, rest)) = cmd else {
        let until = limit.map_or("Ctrl-C".to_string(), |d| {
            format!("{:.1} s have passed or Ctrl-C", d.as_secs_f64())
        });
        eprintln!("oprof record: profiling the whole system until {until}");
        return Ok(None);
    };
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(path);
    command.arg0(name).args(rest);
    match session_dir::with_caller_umask(|| command.spawn()) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            Err(Failed {
                code,
                msg: format!("{}: {e}", name.to_string_lossy()),
            }
            .into())
        }
    }
}

/// Waits (polling every 20 ms) until CMD exits, a signal comes, `limit` has passed since `t0`
/// or the reader ends; CMD still running then is sent SIGTERM and waited for. Returns why it
/// ended and CMD's exit status ([`exit_code`]).
fn supervise(
    child: Option<&mut std::process::Child>,
    cap: &Capture,
    limit: Option<Duration>,
    t0: Instant,
) -> Result<(End, Option<i32>)> {
    let mut child = child;
    loop {
        if let Some(c) = child.as_mut() {
            if let Some(st) = c.try_wait().context("waiting for the command")? {
                return Ok((End::Command, Some(exit_code(st))));
            }
        }
        let sig = signal_received();
        let end = if sig != 0 {
            Some(End::Signal(sig))
        } else if limit.is_some_and(|d| t0.elapsed() >= d) {
            Some(End::Duration)
        } else if cap.reader_ended() {
            Some(End::ReaderError)
        } else {
            None
        };
        if let Some(end) = end {
            let mut exit_status = None;
            if let Some(c) = child.as_mut() {
                // Our own child, not yet waited for: kill(2) reaches it even if it has exited (a
                // zombie takes the signal harmlessly).
                if let Ok(pid) = i32::try_from(c.id()) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                }
                exit_status = Some(exit_code(c.wait().context("waiting for the command")?));
            }
            return Ok((end, exit_status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What [`collect`] copied of the system after the run.
struct Collected {
    stats: BTreeMap<String, u64>,
    snapshot: ModuleSnapshot,
    kprof_info: Option<BTreeMap<String, String>>,
    notes: Vec<String>,
}

/// Copies the session files of the closed capture into `dir` (`images` keeps the closed
/// session's ids until the next open): images, stats, kpdata, profile points, /proc/modules,
/// module sections, kallsyms; puts kprof and the profile points back as [`Extras`] found them.
fn collect(args: &RecordArgs, fs: &Fs, out: &SessionDir, extras: Extras) -> Result<Collected> {
    let mut notes = vec![];
    out.write(session::IMAGES, &fs.read_bytes("images")?)?;
    let stats = fs.stats()?;
    out.write(
        session::STATS,
        (serde_json::to_string_pretty(&stats)? + "\n").as_bytes(),
    )?;
    let mut kprof_info = None;
    if args.kprof {
        out.write(session::KPDATA, &fs.read_bytes("kprof/kpdata")?)?;
        kprof_info = Some(kpctl(fs)?);
        if extras.kprof_was_started {
            fs.write("kprof/kpctl", "start")?;
        }
    }
    if let Some(before) = extras.points_before {
        out.write(session::PROFILE_POINTS, &fs.read_bytes("profile_points")?)?;
        fs.write("profile_points", "disable all")?;
        for p in before.iter().filter(|p| p.enabled) {
            fs.write("profile_points", &format!("enable {}", p.name))?;
        }
    }
    let proc_modules = std::fs::read_to_string("/proc/modules").context("reading /proc/modules")?;
    out.write(session::PROC_MODULES, proc_modules.as_bytes())?;
    let sections = module_sections();
    out.write(session::MODULE_SECTIONS, sections.as_bytes())?;
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")?;
    out.write(session::KALLSYMS, kallsyms.as_bytes())?;
    if Kallsyms::parse(&kallsyms, "/proc/kallsyms").is_ok_and(|k| k.hidden) {
        let n =
            "kallsyms: every address is 0 (kernel.kptr_restrict): kernel symbols need a vmlinux"
                .to_string();
        eprintln!("oprof record: note: {n}");
        notes.push(n);
    }
    let mut snapshot = ModuleSnapshot::default();
    snapshot.add_proc_modules(&proc_modules, "/proc/modules")?;
    snapshot.add_sections(&sections, "module sections")?;
    Ok(Collected {
        stats,
        snapshot,
        kprof_info,
        notes,
    })
}

/// Counts the samples of the written stream (call-chain entries are not samples), finds what
/// was sampled, and checks the count against the module's: samples + lost = taken. A stream
/// that does not decode or a count that does not add up is a warning and a note.
fn verify(
    samples_path: &Path,
    pointer_size: usize,
    losses: &Losses,
    notes: &mut Vec<String>,
) -> Result<StreamFacts> {
    let bytes = std::fs::read(samples_path)
        .with_context(|| format!("reading {}", samples_path.display()))?;
    let facts = match stream_facts(&bytes, pointer_size) {
        Ok(f) => f,
        Err(e) => {
            let n = format!("samples: the stream does not decode: {e:#}");
            eprintln!("oprof record: warning: {n}");
            notes.push(n);
            StreamFacts::default()
        }
    };
    if facts.samples + losses.lost != losses.received {
        let n = format!(
            "samples: {} in the stream + {} lost != {} taken (stats/cpu*/sample_received)",
            facts.samples, losses.lost, losses.received
        );
        eprintln!("oprof record: warning: {n}");
        notes.push(n);
    }
    Ok(facts)
}

/// Modules' .ko files on the target (module name → path): the one `sys` loaded, else under
/// `/lib/modules/RELEASE`.
fn module_files(
    sys: &System,
    snapshot: &ModuleSnapshot,
    release: &str,
) -> BTreeMap<String, String> {
    let mut modules = BTreeMap::new();
    let kos = find_kos(&Path::new("/lib/modules").join(release));
    for name in snapshot.modules.keys() {
        let found = if name == system::MODULE {
            sys.module_path.as_deref().and_then(absolute)
        } else {
            None
        };
        if let Some(p) = found.or_else(|| kos.get(&name.replace('-', "_")).cloned()) {
            modules.insert(name.clone(), p.display().to_string());
        }
    }
    modules
}

/// `--archive`: copies the sampled user images and the sampled modules' .ko files into
/// `dir/root` (created even when nothing is copied); returns their build ids. What cannot be
/// copied is a note.
fn archive(
    out: &SessionDir,
    facts: &StreamFacts,
    c: &mut Collected,
    modules: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Ids>> {
    let mut debug_ids = BTreeMap::new();
    out.mkdir(session::ROOT)?;
    let map = crate::resolve::images::ImageMap::parse(&out.read(session::IMAGES)?, "images")?;
    let notes = &mut c.notes;
    // A path listed under two ids is copied once.
    let mut copied = BTreeSet::new();
    for id in &facts.images {
        match map.path(*id) {
            Some(p) if !p.ends_with(" (deleted)") && Path::new(p).is_file() => {
                if copied.insert(p.to_string()) {
                    if let Err(e) = archive_image(out, Path::new(p), &mut debug_ids) {
                        notes.push(format!("archive: {e:#}"));
                    }
                }
            }
            Some(p) => notes.push(format!("archive: {p}: not on the target any more")),
            None => notes.push(format!("archive: image id {id} is not in the images file")),
        }
    }
    for (name, m) in &c.snapshot.modules {
        let Some((base, size)) = m.core else { continue };
        let sampled = facts
            .kernel_pcs
            .iter()
            .any(|&pc| pc >= base && pc - base < size);
        if let (true, Some(p)) = (sampled, modules.get(name)) {
            if copied.insert(p.clone()) {
                if let Err(e) = archive_image(out, Path::new(p), &mut debug_ids) {
                    notes.push(format!("archive: {e:#}"));
                }
            }
        }
    }
    Ok(debug_ids)
}

/// The session's counters: the placed events with each counter's `total` read after the run.
fn counter_infos(fs: &Fs, placed: &[Placement]) -> Vec<CounterInfo> {
    placed
        .iter()
        .map(|p| CounterInfo {
            counter: p.counter,
            event: p.event.name.to_string(),
            event_number: p.event.number,
            count: p.count,
            unit_mask: p.unit_mask,
            kernel: p.kernel,
            user: p.user,
            total: fs.read_u64(&format!("{}/total", p.counter)).ok(),
        })
        .collect()
}

/// The module's `timer_hz` parameter in timer mode (no counters), if readable.
fn timer_hz(placed: &[Placement]) -> Option<u64> {
    placed.is_empty().then(|| {
        std::fs::read_to_string("/sys/module/oprofile/parameters/timer_hz")
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })?
}

/// Prints the summary line: `oprof record: N samples (L lost[, T not taken]), M MiB in DIR`.
fn print_summary(dir: &Path, samples: u64, losses: &Losses) {
    let mib = dir_bytes(dir) as f64 / (1024.0 * 1024.0);
    let not_taken = if losses.not_taken > 0 {
        format!(", {} not taken", losses.not_taken)
    } else {
        String::new()
    };
    eprintln!(
        "oprof record: {} samples ({} lost{not_taken}), {mib:.1} MiB in {}",
        samples,
        losses.lost,
        dir.display()
    );
}

/// One session: settings, capture while CMD runs, collection of the session files,
/// verification of the stream, `--archive`, session.json and the summary line. Returns CMD's
/// exit status (0 without CMD). Errors: each step's; a reader that failed after the session
/// was written.
fn record(
    args: &RecordArgs,
    argv: &[String],
    sys: &mut System,
    outdir: &mut SessionDir,
    cmd: Option<Cmd>,
    limit: Option<Duration>,
) -> Result<i32> {
    let dir = &args.output;
    let fs = &mut sys.fs;
    let cfg = configure(args, fs)?;
    let extras = start_extras(args, fs)?;
    let chunk = usize::try_from(cfg.settings.buffer_size)
        .ok()
        .and_then(|w| w.checked_mul(cfg.pointer_size))
        .context("buffer_size too large")?;
    let samples_path = dir.join(session::SAMPLES);
    let out = outdir.create(session::SAMPLES)?;

    // The capture.
    let start = Time::now();
    let t0 = Instant::now();
    let mut cap = Capture::start(fs, out, chunk)?;
    if args.kprof {
        fs.write("kprof/kpctl", "startclr")?;
    }
    let mut child = spawn(&cmd, limit)?;
    // From here on the session is written whatever happens (a CMD that cannot be started
    // leaves nothing, like the errors before).
    outdir.keep();
    let (end, exit_status) = supervise(child.as_mut(), &cap, limit, t0)?;
    let stop = Time::now();
    let duration_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let kprof_stopped = if args.kprof {
        fs.write("kprof/kpctl", "stop")
    } else {
        Ok(())
    };
    let read = cap.finish();
    drop(cap);
    kprof_stopped?;
    let read = read?;

    // The session files, checked, archived, described.
    let mut c = collect(args, fs, outdir, extras)?;
    let losses = Losses::of(&c.stats);
    let facts = verify(&samples_path, cfg.pointer_size, &losses, &mut c.notes)?;
    let kernel = system::uname();
    let modules = module_files(sys, &c.snapshot, &kernel.release);
    let debug_ids = if args.archive {
        archive(outdir, &facts, &mut c, &modules)?
    } else {
        BTreeMap::new()
    };
    let fs = &sys.fs;
    let info = SessionInfo {
        format: session::FORMAT,
        oprof_version: env!("CARGO_PKG_VERSION").to_string(),
        counters: counter_infos(fs, &cfg.placed),
        timer_hz: timer_hz(&cfg.placed),
        cpu_type: cfg.cpu_type,
        pointer_size: cfg.pointer_size,
        kernel,
        cpus: system::online_cpus(),
        settings: cfg.settings,
        start,
        stop,
        duration_ns,
        command: cmd.as_ref().map(|(n, _, rest)| {
            std::iter::once(n)
                .chain(rest)
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        }),
        exit_status,
        ended_by: end.as_str().to_string(),
        command_line: argv.to_vec(),
        totals: Totals {
            samples: facts.samples,
            sample_received: losses.received,
            lost: losses.lost,
            not_taken: losses.not_taken,
            bytes: read.bytes,
            reads: read.reads,
        },
        modules,
        archive: args.archive,
        kprof: c.kprof_info,
        notes: c.notes,
        debug_ids,
    };
    outdir.write_atomic(
        session::SESSION,
        (serde_json::to_string_pretty(&info)? + "\n").as_bytes(),
    )?;
    print_summary(dir, facts.samples, &losses);
    if end == End::ReaderError {
        bail!("the reader of /dev/oprofile/buffer failed; the session is incomplete");
    }
    Ok(exit_status.unwrap_or(0))
}

/// Resets the profile points and enables `names` (`["all"]`: every point; the others are
/// disabled). Returns the table as it was, to restore the enabled set after the run. Errors: no
/// `profile_points` file, or a name the module has no point of (one line naming it).
fn start_points(fs: &Fs, names: &[String]) -> Result<Vec<points::Point>> {
    if !fs.exists("profile_points") {
        bail!(
            "--points: {} does not exist (a module without profile points?)",
            fs.path("profile_points").display()
        );
    }
    let before = points::parse(
        "profile_points",
        &String::from_utf8_lossy(&fs.read_bytes("profile_points")?),
    )?;
    if let Some(bad) = names
        .iter()
        .find(|n| *n != "all" && !before.iter().any(|p| &p.name == *n))
    {
        let known: Vec<&str> = before.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "--points: the module has no profile point {bad:?} (it has: {})",
            known.join(", ")
        );
    }
    fs.write("profile_points", "reset all")?;
    fs.write("profile_points", "disable all")?;
    for name in names {
        fs.write("profile_points", &format!("enable {name}"))?;
    }
    Ok(before)
}

/// `p` made absolute (the session records target paths).
fn absolute(p: &Path) -> Option<PathBuf> {
    if p.is_absolute() {
        Some(p.to_path_buf())
    } else {
        std::env::current_dir().ok().map(|d| d.join(p))
    }
}

/// `kprof/kpctl` as `key value` pairs.
fn kpctl(fs: &Fs) -> Result<BTreeMap<String, String>> {
    let text = String::from_utf8_lossy(&fs.read_bytes("kprof/kpctl")?).into_owned();
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(' ')?;
            Some((k.to_string(), v.trim().to_string()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_like_a_shell() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = d.path().join("data");
        std::fs::write(&plain, "x").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), d.path()]).unwrap();
        assert_eq!(find_command(OsStr::new("tool"), Some(&path)).unwrap(), exe);
        assert_eq!(find_command(exe.as_os_str(), None).unwrap(), exe);
        let code = |c: &str, p: Option<&OsStr>| {
            let e = find_command(OsStr::new(c), p).unwrap_err();
            let f = e.downcast_ref::<Failed>().unwrap();
            (f.code, f.msg.clone())
        };
        assert_eq!(
            code("nope-oprof", Some(&path)),
            (127, "nope-oprof: command not found".into())
        );
        assert_eq!(
            code("./nope", None),
            (127, "./nope: command not found".into())
        );
        assert_eq!(code("data", Some(&path)).0, 126);
        assert_eq!(code("", Some(&path)).0, 127);
    }

    #[test]
    fn durations() {
        assert_eq!(
            duration(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(duration(None).unwrap(), None);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(format!("{:#}", duration(Some(bad)).unwrap_err())
                .contains("positive number of seconds"));
        }
    }

    #[test]
    fn stream_facts_count_samples_not_frames() {
        use oprofile_common::event::Record;
        let st = crate::fixtures::stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 5,
                tgid: 5,
                app_cookie: 2,
            },
            Record::KernelEnter,
            Record::TraceBegin,
            Record::Sample {
                pc: 0xbf00_0010,
                event: 0,
            },
            Record::Sample {
                pc: 0xc000_0010,
                event: 0,
            }, // frame
            Record::KernelExit,
            Record::CookieSwitch { cookie: 3 },
            Record::Sample {
                pc: 0x400,
                event: 0,
            }, // frame in image 3
            Record::TraceBegin,
            Record::Sample {
                pc: 0x500,
                event: 0,
            },
        ]);
        let bytes: Vec<u8> = st
            .words
            .iter()
            .flat_map(|&w| (w as u32).to_le_bytes())
            .collect();
        let f = stream_facts(&bytes, 4).unwrap();
        assert_eq!(f.samples, 2);
        assert_eq!(f.images.iter().copied().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(f.kernel_pcs, [0xbf00_0010, 0xc000_0010]);
        assert!(stream_facts(&bytes[..bytes.len() - 2], 4).is_err());
    }
}
