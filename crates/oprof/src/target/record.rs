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

use crate::input::events::{self, Placement};
use crate::input::points;
use crate::input::session::Ids;
use crate::input::session::{
    self, CounterInfo, DroppedTotals, Losses, SessionInfo, Settings, State, Time, Totals,
    DEFAULT_DIR,
};
use crate::input::stream::{self, ChainState, Role, SampleCtx};
use crate::resolve::images::ModuleSnapshot;
use crate::resolve::kallsyms::Kallsyms;
use crate::target::flight::{self, Kept, Ring, Snapshots};
use crate::target::session_dir::{self, SessionDir};
use crate::target::system::{self, Fs, PidFile, System, Want, OPROFILEFS};
use anyhow::{anyhow, bail, Context, Result};
use nix::sys::signal::{kill, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;
use oprofile_common::event::{DecodeError, Decoder, Record, MAX_RECORD_WORDS};
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

/// `image_ids_max` without `--image-ids-max`: the module's default (rust/oprof.rs), written so
/// that a value left on the mount by someone else does not apply.
const DEFAULT_IMAGE_IDS_MAX: u64 = 16384;

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
    /// Image ids the session may give (`image_ids_max`, 1..=1048576; default 16384): files
    /// sampled past it are counted in stats/image_ids_refused and their samples lost.
    #[arg(long, value_name = "N")]
    pub image_ids_max: Option<u64>,
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
    /// Flight recorder: keep only the last SIZE bytes of the stream (suffix K, M or G: KiB,
    /// MiB, GiB; at least 64K), in chunks of SIZE/8 of which the oldest is dropped whole; the
    /// session then holds the recording's last minutes, its samples plus the dropped ones'
    /// count in session.json. SIGUSR1, or a file DIR/snapshot (removed then), writes what is
    /// kept at that moment into DIR/snapshot-N/ (a session of its own) while recording goes on.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_size: Option<u64>,
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
    /// Only undo what a recorder killed before it could clean up left behind (its pid file in
    /// /run/oprof says what: profiling stopped, settings restored, oprofilefs unmounted, the
    /// module unloaded), then exit; `oprof record` does the same before recording.
    #[arg(long, conflicts_with = "command")]
    pub cleanup: bool,
    /// The command to profile, after `--`; the whole system is profiled while it runs and its
    /// exit status is oprof's.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// The smallest `--max-size`: 8 chunks of 8 KiB.
const MIN_MAX_SIZE: u64 = 64 << 10;

/// `--max-size`'s SIZE: bytes, or KiB/MiB/GiB with a K/M/G suffix; at least [`MIN_MAX_SIZE`].
fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes < MIN_MAX_SIZE {
        return Err(format!("{text:?} is less than 64K"));
    }
    Ok(bytes)
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
#[derive(Debug, Default, Clone)]
struct ReadTotals {
    /// Bytes written to the samples file.
    bytes: u64,
    reads: u64,
    /// Bytes read that could not be written (a full disk).
    unwritten: u64,
    /// Why writing stopped (the first write error).
    write_error: Option<String>,
    /// `--max-size`: the chunks the ring kept and what it dropped.
    kept: Option<Kept>,
}

/// Where the reader writes what it reads of `buffer`: the samples file, or the flight
/// recorder's [`Ring`].
trait StreamOut: Send {
    /// Writes one read of `buffer` as far as it goes: the bytes written, and the error that
    /// stopped it.
    fn put(&mut self, data: &[u8]) -> (usize, Option<std::io::Error>);
    /// Ends the writing: the ring's kept chunks (`None` for a file).
    fn finish(self) -> Option<Kept>;
}

impl<W: Write + Send> StreamOut for W {
    fn put(&mut self, data: &[u8]) -> (usize, Option<std::io::Error>) {
        write_counted(self, data)
    }
    fn finish(self) -> Option<Kept> {
        None
    }
}

impl StreamOut for Ring {
    fn put(&mut self, data: &[u8]) -> (usize, Option<std::io::Error>) {
        Ring::put(self, data)
    }
    fn finish(self) -> Option<Kept> {
        Some(Ring::finish(self))
    }
}

/// Writes `data` to `out` as far as it goes: the bytes written, and the error that stopped it.
pub(super) fn write_counted(out: &mut impl Write, data: &[u8]) -> (usize, Option<std::io::Error>) {
    let mut done = 0;
    while done < data.len() {
        match out.write(&data[done..]) {
            Ok(0) => return (done, Some(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// The reader loop: blocking reads of `chunk` bytes from `buffer`, appended to `out`. Once
/// `stop` is seen set before a read, that read is the last one: it returns everything left
/// (profiling is stopped and flushed, and a read takes up to `buffer_size` words). A write
/// that fails (a full disk: ENOSPC, EDQUOT, EIO) sets `full` and ends the writing, not the
/// reading: the buffer is still drained, and what is read is counted as unwritten.
fn drain(
    mut buffer: impl Read,
    mut out: impl StreamOut,
    chunk: usize,
    stop: &AtomicBool,
    full: &AtomicBool,
) -> Result<ReadTotals> {
    let mut buf = vec![0u8; chunk];
    let mut t = ReadTotals::default();
    loop {
        let last = stop.load(Ordering::Acquire);
        match buffer.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                t.reads += 1;
                let (written, err) = if t.write_error.is_none() {
                    out.put(&buf[..n])
                } else {
                    (0, None)
                };
                t.bytes += written as u64;
                t.unwritten += (n - written) as u64;
                if let Some(e) = err {
                    t.write_error = Some(e.to_string());
                    full.store(true, Ordering::Release);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow!("reading /dev/oprofile/buffer: {e}")),
        }
        if last {
            break;
        }
    }
    drop(buffer);
    t.kept = out.finish();
    Ok(t)
}

/// Runs `f` with SIGINT, SIGTERM, SIGCHLD and SIGUSR1 blocked, so that a thread it spawns
/// inherits the mask and the signals go to the main thread.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGCHLD,
        Signal::SIGUSR1,
    ] {
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
    /// The reader could not write (a full disk).
    full: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<Result<ReadTotals>>>,
}

impl Capture {
    /// Opens `buffer`, starts the reader (appending to `out`, reads of `chunk` bytes) and
    /// writes 1 to `enable`.
    fn start(fs: &Fs, out: impl StreamOut + 'static, chunk: usize) -> Result<Capture> {
        let buffer = open_buffer(fs)?;
        let stop = Arc::new(AtomicBool::new(false));
        let full = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel::<()>();
        let (st, fu) = (stop.clone(), full.clone());
        let handle = with_signals_blocked(|| {
            std::thread::Builder::new()
                .name("oprof-reader".into())
                .spawn(move || {
                    let _done = tx; // dropped when the reader ends: wakes `finish`
                    drain(buffer, out, chunk, &st, &fu)
                })
        })
        .context("starting the reader thread")?;
        let cap = Capture {
            fs: fs.dir.clone(),
            stop,
            full,
            done,
            handle: Some(handle),
        };
        Fs::new(&cap.fs).write("enable", "1")?;
        Ok(cap)
    }

    /// Whether the reader could not write the samples file (a full disk).
    fn disk_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
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

/// What the decoded stream says: samples, and what `--archive` should copy. Its size is
/// bounded by the distinct images and modules sampled, not by the stream's length.
#[derive(Debug, Default, PartialEq, Eq)]
struct StreamFacts {
    samples: u64,
    /// Image ids of user samples, call-chain frames and tasks.
    images: BTreeSet<u64>,
    /// Names of the modules (of [`ModuleRanges`]) holding a sampled kernel PC (samples and
    /// frames).
    modules: BTreeSet<String>,
}

/// The core memory of each module of a [`ModuleSnapshot`]: `(base, end, name)` sorted by base.
#[derive(Debug, Default)]
struct ModuleRanges(Vec<(u64, u64, String)>);

impl ModuleRanges {
    fn of(snapshot: &ModuleSnapshot) -> ModuleRanges {
        let mut v: Vec<(u64, u64, String)> = snapshot
            .modules
            .iter()
            .filter_map(|(name, m)| {
                let (base, size) = m.core?;
                Some((base, base.checked_add(size)?, name.clone()))
            })
            .collect();
        v.sort();
        ModuleRanges(v)
    }

    /// The module whose core memory holds `pc`.
    fn find(&self, pc: u64) -> Option<&str> {
        let i = self.0.partition_point(|(base, _, _)| *base <= pc);
        let (_, end, name) = self.0.get(i.checked_sub(1)?)?;
        (pc < *end).then_some(name.as_str())
    }
}

/// Bytes read at a time by every pass over a recorded stream (whole words of 4 and 8 bytes).
const BLOCK_BYTES: usize = 1 << 20;

/// A record longer than this many words cannot be awaited across block seams (the longest the
/// module writes, USER_MAPS of 256 mappings, is 1028 words).
const MAX_CARRY_WORDS: usize = 1 << 16;

/// Reads the stream `r` of `wb`-byte words in blocks of `block` bytes (a multiple of `wb`)
/// and calls `f` with each record and the decoder state after it; a record cut at a block
/// seam is carried to the next block. Memory: one block and one carried record. Returns the
/// bytes of the whole records. Errors: read errors, and a stream that does not decode (the
/// byte offset of the record at fault), ends inside a record or with part of a word (unless
/// `torn_ok`: a stream cut short by a full disk ends so).
fn each_record(
    r: &mut impl Read,
    wb: usize,
    block: usize,
    torn_ok: bool,
    mut f: impl FnMut(&Record, &SampleCtx),
) -> Result<u64> {
    stream::check_size(0, wb)?;
    let mut ctx = SampleCtx::default();
    let mut pending: Vec<u64> = Vec::with_capacity(block / wb + MAX_RECORD_WORDS);
    let mut buf = Vec::with_capacity(block);
    let (mut base, mut bytes) = (0usize, 0u64);
    loop {
        buf.clear();
        r.by_ref().take(block as u64).read_to_end(&mut buf)?;
        bytes += buf.len() as u64;
        let last = buf.len() < block;
        pending.extend(stream::le_words(&buf, wb));
        let mut used = 0;
        for item in Decoder::new(&pending, wb) {
            match item {
                Ok((at, rec)) => {
                    ctx.apply(&rec);
                    f(&rec, &ctx);
                    used = at + rec.words();
                }
                Err(DecodeError::Truncated { need, .. }) if !last && need <= MAX_CARRY_WORDS => {
                    break
                }
                Err(DecodeError::Truncated { .. }) if torn_ok => break,
                Err(e) => {
                    let e = stream::shift(e, base);
                    bail!("{}", stream::describe(e, wb, base + pending.len()));
                }
            }
        }
        pending.drain(..used);
        base += used;
        if last {
            let rest = buf.len() % wb;
            if torn_ok {
                return Ok((base * wb) as u64);
            }
            if rest > 0 {
                bail!(
                    "the stream ends with {rest} bytes, not a whole {wb}-byte word (byte offset {})",
                    bytes - rest as u64
                );
            }
            return Ok((base * wb) as u64);
        }
    }
}

/// The facts of the stream `r` ([`each_record`] in blocks of `block` bytes): samples counted
/// as [`stream::decode`] groups them (call-chain frames are not samples), images and modules
/// of samples and frames; and the bytes of its whole records (`torn_ok`: see [`each_record`]).
fn stream_facts(
    r: &mut impl Read,
    wb: usize,
    block: usize,
    torn_ok: bool,
    modules: &ModuleRanges,
) -> Result<(StreamFacts, u64)> {
    let mut f = StreamFacts::default();
    let mut chain = ChainState::default();
    let whole = each_record(r, wb, block, torn_ok, |rec, ctx| {
        let role = chain.apply(rec);
        let Record::Sample { pc, .. } = *rec else {
            return;
        };
        if let Some(Role::Sample { .. }) = role {
            f.samples += 1;
            f.images.extend(ctx.app_cookie.filter(|&c| c != 0));
        }
        match ctx.in_kernel {
            Some(true) => {
                if let Some(m) = modules.find(pc).filter(|m| !f.modules.contains(*m)) {
                    f.modules.insert(m.to_string());
                }
            }
            Some(false) => f.images.extend(ctx.cookie.filter(|&c| c != 0)),
            None => {}
        }
    })?;
    Ok((f, whole))
}

/// The samples of the stream `r` of `wb`-byte words, counted as [`stream_facts`] counts them,
/// in bounded memory. Errors: as [`each_record`] (a stream that does not decode).
pub(super) fn count_samples(r: &mut impl Read, wb: usize) -> Result<u64> {
    let none = ModuleRanges::default();
    Ok(stream_facts(r, wb, BLOCK_BYTES, false, &none)?.0.samples)
}

/// The samples and the bytes of the whole records of the stream `r`, which may end inside a
/// record (a chunk being written). Errors: as [`each_record`].
pub(super) fn whole_records(r: &mut impl Read, wb: usize) -> Result<(u64, u64)> {
    let none = ModuleRanges::default();
    let (f, whole) = stream_facts(r, wb, BLOCK_BYTES, true, &none)?;
    Ok((f.samples, whole))
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

/// Set by SIGUSR1 when `--max-size` installed its handler: a snapshot is asked for.
static SNAPSHOT_ASKED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Installs the SIGUSR1 handler of `--max-size` (once per process; without it SIGUSR1 keeps its
/// default action, ending oprof like any program).
fn install_snapshot_handler() -> Result<()> {
    let mut fresh = false;
    let flag = SNAPSHOT_ASKED.get_or_init(|| {
        fresh = true;
        Arc::new(AtomicBool::new(false))
    });
    if fresh {
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, flag.clone())
            .context("installing the SIGUSR1 handler")?;
    }
    flag.store(false, Ordering::SeqCst);
    Ok(())
}

/// Whether a snapshot was asked for since the last call (SIGUSR1).
fn snapshot_asked() -> bool {
    SNAPSHOT_ASKED
        .get()
        .is_some_and(|f| f.swap(false, Ordering::SeqCst))
}

/// Writes a snapshot of the flight recording ([`Snapshots::take`]) and says so on stderr; a
/// failed one is a warning (the recording goes on).
fn snapshot(snaps: &mut Snapshots) {
    match snaps.take() {
        Ok((dir, samples, bytes)) => eprintln!(
            "oprof record: snapshot: {samples} samples, {bytes} bytes in {}",
            dir.display()
        ),
        Err(e) => eprintln!("oprof record: warning: snapshot not written: {e:#}"),
    }
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
    let (pid_file, stale) = PidFile::take(Path::new(system::RUN_DIR))?;
    let took_over = stale.is_some();
    if let Some(held) = stale {
        let (done, errs) = system::take_over(&held)?;
        eprintln!("oprof record: {done}");
        for e in errs {
            eprintln!("oprof: warning: {e}");
        }
    }
    if args.cleanup {
        pid_file.remove()?;
        if !took_over {
            eprintln!("oprof record: --cleanup: no pid file of a dead recorder, nothing to undo");
        }
        return Ok(0);
    }
    // A session holds process memory (stack bytes, addresses): nothing of it is for others.
    session_dir::private_umask();
    let mut out = match SessionDir::prepare(&args.output, args.force) {
        Ok(o) => o,
        Err(e) => {
            let _ = pid_file.remove();
            return Err(e);
        }
    };
    let want = Want {
        dir: args.oprofilefs.clone(),
        module: args.module.clone(),
        params: if args.events.is_empty() {
            vec!["timer=1".into()]
        } else {
            vec![]
        },
    };
    let mut sys = System::acquire(&want, Some(pid_file))?;
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
    /// The samples file could not be written (a full disk): profiling was stopped at once and
    /// CMD, if any, left to run to its end.
    DiskFull,
}

impl End {
    /// `command`, `SIGINT`, `SIGTERM` (`signal` for another), `duration`, `reader error` or
    /// `disk full`.
    fn as_str(self) -> &'static str {
        match self {
            End::Command => "command",
            End::Signal(sig) => signal_name(sig),
            End::Duration => "duration",
            End::ReaderError => "reader error",
            End::DiskFull => "disk full",
        }
    }
}

/// A file of zeros the recorder keeps in the session directory during the capture, removed
/// when it is over: room for session.json and the small files if the stream fills the disk.
const RESERVE: &str = ".oprof-reserve";
const RESERVE_BYTES: usize = 256 << 10;

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

/// `--max-size` without `--watershed`: the reader is woken once half a chunk
/// (`max / flight::CHUNKS / 2` bytes) is in the event buffer, not three quarters of it, so that
/// the ring can close its chunks near their size (a chunk ends between two passes).
fn flight_watershed(fs: &mut Fs, max: u64, pointer_size: usize) -> Result<()> {
    let wake = (max / flight::CHUNKS / 2 / pointer_size as u64).max(1);
    let at_least = fs.read_u64("buffer_size")?.saturating_sub(wake);
    if fs.read_u64("buffer_watershed")? < at_least {
        fs.set("buffer_watershed", at_least)?;
    }
    Ok(())
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
    let image_ids_max = if fs.exists("image_ids_max") {
        let m = args.image_ids_max.unwrap_or(DEFAULT_IMAGE_IDS_MAX);
        fs.set("image_ids_max", m)?;
        fs.read_u64("image_ids_max")?
    } else if args.image_ids_max.is_some() {
        bail!("--image-ids-max: this oprofile.ko has no image_ids_max");
    } else {
        0
    };
    if let Some(m) = events::model(Some(&cpu_type))? {
        for (file, v) in events::counter_writes(m, &placed) {
            fs.set(&file, v)?;
        }
    }
    if let (Some(max), None) = (args.max_size, args.watershed) {
        flight_watershed(fs, max, pointer_size)?;
    }
    let settings = Settings {
        buffer_size: fs.read_u64("buffer_size")?,
        buffer_watershed: fs.read_u64("buffer_watershed")?,
        cpu_buffer_size: fs.read_u64("cpu_buffer_size")?,
        backtrace_depth: fs.read_u64("backtrace_depth")?,
        user_stack_size: stack,
        image_ids_max,
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
/// or the reader ends; CMD still running then is sent SIGTERM and waited for. A full disk
/// stops profiling (`enable` 0) at once and ends the wait without CMD; CMD is left to run to
/// its end (or to a signal or `limit`). Returns why it ended ([`End::DiskFull`] once the disk
/// was full) and CMD's exit status ([`exit_code`]). With `snaps`, a snapshot is taken when
/// SIGUSR1 or the file `DIR/snapshot` asks for one.
fn supervise(
    child: Option<&mut std::process::Child>,
    cap: &Capture,
    limit: Option<Duration>,
    t0: Instant,
    mut snaps: Option<&mut Snapshots>,
) -> Result<(End, Option<i32>)> {
    let mut child = child;
    let mut full = false;
    loop {
        if let Some(s) = snaps.as_deref_mut() {
            // Both asks are taken: one snapshot answers a signal and a file at once.
            if snapshot_asked() | s.trigger_asked() {
                snapshot(s);
            }
        }
        if !full && cap.disk_full() {
            full = true;
            let _ = Fs::new(&cap.fs).write("enable", "0");
        }
        let ended = |end| if full { End::DiskFull } else { end };
        if let Some(c) = child.as_mut() {
            if let Some(st) = c.try_wait().context("waiting for the command")? {
                return Ok((ended(End::Command), Some(exit_code(st))));
            }
        }
        let sig = signal_received();
        let end = if sig != 0 {
            Some(End::Signal(sig))
        } else if limit.is_some_and(|d| t0.elapsed() >= d) {
            Some(End::Duration)
        } else if cap.reader_ended() {
            Some(End::ReaderError)
        } else if full && child.is_none() {
            Some(End::DiskFull)
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
            return Ok((ended(end), exit_status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes the session file `name` ([`SessionDir::write`]); a file that cannot be written (a
/// full disk) is removed again and is a warning and a note, so that what fits is still written.
fn put(out: &SessionDir, name: &str, data: &[u8], notes: &mut Vec<String>) {
    if let Err(e) = out.write(name, data) {
        let _ = out.remove(name);
        let n = format!("{name}: not written: {e:#}");
        eprintln!("oprof record: warning: {n}");
        notes.push(n);
    }
}

/// What [`collect`] copied of the system after the run.
pub(super) struct Collected {
    pub(super) stats: BTreeMap<String, u64>,
    snapshot: ModuleSnapshot,
    kprof_info: Option<BTreeMap<String, String>>,
    pub(super) notes: Vec<String>,
}

/// Copies the session files of the closed capture into `dir` (`images` keeps the closed
/// session's ids until the next open): images, stats, kpdata, profile points, /proc/modules,
/// module sections, kallsyms; puts kprof and the profile points back as [`Extras`] found them.
fn collect(args: &RecordArgs, fs: &Fs, out: &SessionDir, extras: Extras) -> Result<Collected> {
    let mut c = collect_system(fs, out)?;
    let notes = &mut c.notes;
    if args.kprof {
        put(out, session::KPDATA, &fs.read_bytes("kprof/kpdata")?, notes);
        c.kprof_info = Some(kpctl(fs)?);
        if extras.kprof_was_started {
            fs.write("kprof/kpctl", "start")?;
        }
    }
    if let Some(before) = extras.points_before {
        let table = fs.read_bytes("profile_points")?;
        put(out, session::PROFILE_POINTS, &table, notes);
        fs.write("profile_points", "disable all")?;
        for p in before.iter().filter(|p| p.enabled) {
            fs.write("profile_points", &format!("enable {}", p.name))?;
        }
    }
    Ok(c)
}

/// Writes the files every session has besides `samples` and `session.json` (images,
/// stats.json, proc_modules, module_sections, kallsyms) into `out`, and returns what they
/// say. A file that cannot be written is a note ([`put`]); errors: reading one.
pub(super) fn collect_system(fs: &Fs, out: &SessionDir) -> Result<Collected> {
    let mut notes = vec![];
    put(out, session::IMAGES, &fs.read_bytes("images")?, &mut notes);
    let stats = fs.stats()?;
    let text = serde_json::to_string_pretty(&stats)? + "\n";
    put(out, session::STATS, text.as_bytes(), &mut notes);
    let proc_modules = std::fs::read_to_string("/proc/modules").context("reading /proc/modules")?;
    put(
        out,
        session::PROC_MODULES,
        proc_modules.as_bytes(),
        &mut notes,
    );
    let sections = module_sections();
    put(
        out,
        session::MODULE_SECTIONS,
        sections.as_bytes(),
        &mut notes,
    );
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")?;
    put(out, session::KALLSYMS, kallsyms.as_bytes(), &mut notes);
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
        kprof_info: None,
        notes,
    })
}

/// Counts the samples of the written stream (call-chain entries are not samples) in blocks,
/// finds what was sampled (modules: of `snapshot`), and checks the count against the
/// module's: samples + lost = taken. A stream that does not decode or a count that does not
/// add up is a warning and a note. `full`: the disk filled up, the stream may end inside a
/// record and is cut back to its whole records (the bytes cut are added to `read.unwritten`).
fn verify(
    out: &SessionDir,
    pointer_size: usize,
    losses: &Losses,
    snapshot: &ModuleSnapshot,
    read: &mut ReadTotals,
    notes: &mut Vec<String>,
) -> Result<StreamFacts> {
    let samples_path = out.path().join(session::SAMPLES);
    let shown = samples_path.display();
    let mut f = out.open_rw(session::SAMPLES)?;
    let ranges = ModuleRanges::of(snapshot);
    let full = read.write_error.is_some();
    let facts = match stream_facts(&mut f, pointer_size, BLOCK_BYTES, full, &ranges) {
        Ok((facts, whole)) if whole < read.bytes => {
            f.set_len(whole)
                .with_context(|| format!("cutting {shown} to its whole records"))?;
            read.unwritten += read.bytes - whole;
            read.bytes = whole;
            facts
        }
        Ok((f, _)) => f,
        Err(e) => {
            let n = format!("samples: the stream does not decode: {e:#}");
            eprintln!("oprof record: warning: {n}");
            notes.push(n);
            StreamFacts::default()
        }
    };
    let dropped = read.kept.as_ref().map(|k| &k.dropped);
    if let Some(e) = dropped.and_then(|d| d.uncounted.as_ref()) {
        let n = format!("samples: a dropped chunk's samples were not counted: {e}");
        eprintln!("oprof record: warning: {n}");
        notes.push(n);
    }
    let dropped_samples = dropped.map_or(0, |d| d.samples);
    let kept = facts.samples.saturating_add(dropped_samples);
    if kept.saturating_add(losses.lost) != losses.received {
        let unwritten = if full {
            format!(
                " ({} bytes read were not written: disk full)",
                read.unwritten
            )
        } else {
            String::new()
        };
        let with_dropped = match dropped {
            Some(_) => format!(" + {dropped_samples} dropped (--max-size)"),
            None => String::new(),
        };
        let n = format!(
            "samples: {} in the stream{with_dropped} + {} lost != {} taken (stats/cpu*/sample_received){unwritten}",
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
    for name in &facts.modules {
        if let Some(p) = modules.get(name) {
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

/// Prints the summary line: `oprof record: N samples (L lost[, T not taken][, D older dropped by
/// --max-size]), M MiB in DIR`.
fn print_summary(dir: &Path, samples: u64, losses: &Losses, dropped: Option<&DroppedTotals>) {
    let mib = dir_bytes(dir) as f64 / (1024.0 * 1024.0);
    let mut not_taken = if losses.not_taken > 0 {
        format!(", {} not taken", losses.not_taken)
    } else {
        String::new()
    };
    if let Some(d) = dropped {
        not_taken.push_str(&format!(", {} older dropped by --max-size", d.samples));
    }
    eprintln!(
        "oprof record: {} samples ({} lost{not_taken}), {mib:.1} MiB in {}",
        samples,
        losses.lost,
        dir.display()
    );
}

/// `session.json` as known when the capture starts (state `recording`): settings, counters
/// (no totals yet), the command; [`finish_info`] completes it.
fn initial_info(
    args: &RecordArgs,
    argv: &[String],
    fs: &Fs,
    cfg: &Configured,
    cmd: &Option<Cmd>,
) -> SessionInfo {
    SessionInfo {
        format: session::FORMAT,
        state: State::Recording,
        oprof_version: env!("CARGO_PKG_VERSION").to_string(),
        counters: counter_infos(fs, &cfg.placed)
            .into_iter()
            .map(|c| CounterInfo { total: None, ..c })
            .collect(),
        timer_hz: timer_hz(&cfg.placed),
        cpu_type: cfg.cpu_type.clone(),
        pointer_size: cfg.pointer_size,
        kernel: session::uname(),
        cpus: system::online_cpus(),
        settings: cfg.settings.clone(),
        start: Time::now(),
        command: cmd.as_ref().map(|(n, _, rest)| {
            std::iter::once(n)
                .chain(rest)
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        }),
        command_line: argv.to_vec(),
        max_size: args.max_size,
        archive: args.archive,
        ..Default::default()
    }
}

/// Writes `info` as `session.json`, atomically ([`SessionDir::write_atomic`]).
pub(super) fn write_info(out: &SessionDir, info: &SessionInfo) -> Result<()> {
    let text = serde_json::to_string_pretty(info)? + "\n";
    out.write_atomic(session::SESSION, text.as_bytes())
}

/// How the capture went, for [`finish_info`].
struct Captured {
    stop: Time,
    duration_ns: u64,
    end: End,
    exit_status: Option<i32>,
    read: ReadTotals,
}

/// Completes `info` (state `complete`) with the capture, the collected files and the facts.
fn finish_info(
    info: &mut SessionInfo,
    fs: &Fs,
    placed: &[Placement],
    cap: Captured,
    c: Collected,
    facts: &StreamFacts,
    losses: &Losses,
) {
    info.state = State::Complete;
    info.counters = counter_infos(fs, placed);
    info.stop = cap.stop;
    info.duration_ns = cap.duration_ns;
    info.exit_status = cap.exit_status;
    info.ended_by = cap.end.as_str().to_string();
    info.totals = Totals {
        samples: facts.samples,
        sample_received: losses.received,
        lost: losses.lost,
        not_taken: losses.not_taken,
        bytes: cap.read.bytes,
        reads: cap.read.reads,
        unwritten: cap.read.unwritten,
        dropped: cap.read.kept.map(|k| DroppedTotals {
            chunks: k.dropped.chunks,
            bytes: k.dropped.bytes,
            samples: k.dropped.samples,
        }),
    };
    info.kprof = c.kprof_info;
    info.notes = c.notes;
}

/// What a capture runs: the options, oprofilefs, the reader's read size (bytes: the event
/// buffer's), CMD and `--duration`.
#[derive(Clone, Copy)]
struct Run<'a> {
    args: &'a RecordArgs,
    fs: &'a Fs,
    chunk: usize,
    cmd: &'a Option<Cmd>,
    limit: Option<Duration>,
}

/// Runs the capture: starts the reader and CMD, waits ([`supervise`]) and stops. Errors:
/// starting it; the reader's (after CMD has ended).
fn capture(
    run: &Run,
    out: impl StreamOut + 'static,
    outdir: &mut SessionDir,
    snaps: Option<&mut Snapshots>,
) -> Result<Captured> {
    let Run {
        args,
        fs,
        chunk,
        cmd,
        limit,
    } = *run;
    let t0 = Instant::now();
    let mut cap = Capture::start(fs, out, chunk)?;
    if args.kprof {
        fs.write("kprof/kpctl", "startclr")?;
    }
    let mut child = spawn(cmd, limit)?;
    // From here on the session is written whatever happens (a CMD that cannot be started
    // leaves nothing, like the errors before).
    outdir.keep();
    let (end, exit_status) = supervise(child.as_mut(), &cap, limit, t0, snaps)?;
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
    Ok(Captured {
        stop,
        duration_ns,
        end,
        exit_status,
        read: read?,
    })
}

/// With `--max-size` (`read.kept`), joins the kept chunks into `samples` ([`flight::assemble`]);
/// `read`'s bytes become those of `samples`, and chunks that could not be joined count as
/// unwritten. Returns the notes (each also printed as a warning); none without `--max-size`.
fn join(out: &SessionDir, read: &mut ReadTotals) -> Result<Vec<String>> {
    let Some(kept) = &read.kept else {
        return Ok(vec![]);
    };
    let j = flight::assemble(out, kept)?;
    let gone = kept.dropped.bytes.saturating_add(j.left_bytes);
    let notes: Vec<String> = kept.notes.iter().cloned().chain(j.notes).collect();
    read.bytes = read.bytes.saturating_sub(gone);
    read.unwritten = read.unwritten.saturating_add(j.left_bytes);
    for n in &notes {
        eprintln!("oprof record: warning: {n}");
    }
    Ok(notes)
}

/// [`capture`] into the flight recorder's ring of `max` bytes, with snapshots on SIGUSR1 or
/// the file `DIR/snapshot`.
fn flight_capture(
    run: &Run,
    max: u64,
    outdir: &mut SessionDir,
    info: &SessionInfo,
) -> Result<Captured> {
    let ring = Ring::new(outdir.subdir(flight::CHUNK_DIR)?, info.pointer_size, max);
    let mut snaps = Snapshots::new(outdir, info, &run.args.oprofilefs, max)?;
    install_snapshot_handler()?;
    let cap = capture(run, ring, outdir, Some(&mut snaps));
    // A trigger that came after the last look asks for nothing now: not left in the session.
    let _ = outdir.remove(flight::TRIGGER);
    cap
}

/// Notes the image id lookups the module refused (`stats/image_ids_refused`), if any: the
/// session reached `image_ids_max` ids (or the module's 16 MiB of `images` text).
fn note_refused_ids(stats: &BTreeMap<String, u64>, max: u64, notes: &mut Vec<String>) {
    let refused = stats.get("image_ids_refused").copied().unwrap_or(0);
    if refused > 0 {
        let n = format!(
            "stats/image_ids_refused: {refused} image id lookups refused (image_ids_max {max} \
             reached, or 16 MiB of images text): their samples are lost as no mapping and no \
             chain is unwound through their mappings; see --image-ids-max"
        );
        eprintln!("oprof record: warning: {n}");
        notes.push(n);
    }
}

/// One session: settings, session.json (state `recording`), capture while CMD runs,
/// collection of the session files, verification of the stream, `--archive`, session.json
/// rewritten (state `complete`) and the summary line. Returns CMD's exit status (0 without
/// CMD). Errors: each step's; a reader that failed, or a full disk, after the session was
/// written.
fn record(
    args: &RecordArgs,
    argv: &[String],
    sys: &mut System,
    outdir: &mut SessionDir,
    cmd: Option<Cmd>,
    limit: Option<Duration>,
) -> Result<i32> {
    let dir = &args.output;
    let cfg = configure(args, &mut sys.fs)?;
    let extras = start_extras(args, &sys.fs)?;
    sys.checkpoint()?;
    let fs = &sys.fs;
    let chunk = usize::try_from(cfg.settings.buffer_size)
        .ok()
        .and_then(|w| w.checked_mul(cfg.pointer_size))
        .context("buffer_size too large")?;
    let samples_path = dir.join(session::SAMPLES);
    let mut info = initial_info(args, argv, fs, &cfg, &cmd);
    write_info(outdir, &info)?;
    // Room for the metadata if the stream fills the disk: freed when the capture is over.
    outdir.write(RESERVE, &[0; RESERVE_BYTES])?;
    let run = Run {
        args,
        fs,
        chunk,
        cmd: &cmd,
        limit,
    };
    let cap = match args.max_size {
        Some(max) => flight_capture(&run, max, outdir, &info),
        None => outdir
            .create(session::SAMPLES)
            .and_then(|f| capture(&run, f, outdir, None)),
    };
    let _ = outdir.remove(RESERVE);
    let mut cap = cap?;
    let join_notes = join(outdir, &mut cap.read)?;

    // The session files, checked, archived, described.
    let mut c = collect(args, fs, outdir, extras)?;
    c.notes.extend(join_notes);
    let losses = Losses::of(&c.stats);
    note_refused_ids(&c.stats, cfg.settings.image_ids_max, &mut c.notes);
    let facts = verify(
        outdir,
        cfg.pointer_size,
        &losses,
        &c.snapshot,
        &mut cap.read,
        &mut c.notes,
    )?;
    let modules = module_files(sys, &c.snapshot, &info.kernel.release);
    if args.archive {
        info.debug_ids = archive(outdir, &facts, &mut c, &modules)?;
    }
    info.modules = modules;
    let (end, exit_status, read) = (cap.end, cap.exit_status, cap.read.clone());
    finish_info(&mut info, &sys.fs, &cfg.placed, cap, c, &facts, &losses);
    let written = write_info(outdir, &info);
    if let Some(e) = &read.write_error {
        let kept = match written {
            Ok(()) => "the session is partial",
            Err(_) => "session.json stays \"recording\"",
        };
        let cmd = if info.command.is_some() {
            "; CMD ran to its end"
        } else {
            ""
        };
        bail!(
            "{}: {e}: profiling stopped after {} samples ({} bytes), {} bytes read were not \
             written; {kept}{cmd}",
            samples_path.display(),
            facts.samples,
            read.bytes,
            read.unwritten
        );
    }
    written?;
    print_summary(dir, facts.samples, &losses, info.totals.dropped.as_ref());
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

    /// A disk that takes `room` bytes, then fails with ENOSPC.
    struct Disk {
        data: Vec<u8>,
        room: usize,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.room - self.data.len());
            if n == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_stops_the_writing_not_the_draining() {
        // The buffer yields 10 reads of up to 64 bytes (a chunk), the disk takes 100 bytes.
        let stream: Vec<u8> = (0..640u32).map(|i| i as u8).collect();
        let (stop, full) = (AtomicBool::new(true), AtomicBool::new(false));
        let mut disk = Disk {
            data: vec![],
            room: 100,
        };
        // `stop` set: one read takes everything left, as after `enable` 0.
        let t = drain(&stream[..], &mut disk, 64, &stop, &full).unwrap();
        assert_eq!(
            (t.bytes, t.unwritten, t.reads),
            (64, 0, 1),
            "one read of 64"
        );
        let stop = AtomicBool::new(false);
        let mut disk = Disk {
            data: vec![],
            room: 100,
        };
        // Without `stop` the loop runs until a read after it is set: stop it from a reader
        // that sets it once drained.
        struct Src<'a>(&'a [u8], &'a AtomicBool);
        impl Read for Src<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.read(buf)?;
                if self.0.is_empty() {
                    self.1.store(true, Ordering::Release);
                }
                Ok(n)
            }
        }
        let t = drain(Src(&stream, &stop), &mut disk, 64, &stop, &full).unwrap();
        assert!(full.load(Ordering::Acquire), "the full disk is signalled");
        assert_eq!(disk.data, stream[..100], "what fitted, in order");
        assert_eq!(
            (t.bytes, t.unwritten),
            (100, 540),
            "every byte read is counted"
        );
        assert_eq!(t.reads, 10, "the buffer is still drained");
        assert!(t.write_error.unwrap().contains("No space left on device"));
    }

    #[test]
    fn a_stream_cut_by_a_full_disk_keeps_its_whole_records() {
        use oprofile_common::event::Record as R;
        let bytes = crate::fixtures::bytes32(&[
            R::CpuSwitch { cpu: 0 },
            R::KernelEnter,
            R::CtxSwitch {
                pid: 1,
                tgid: 1,
                app_cookie: 0,
            },
            R::Sample { pc: 4, event: 0 },
            R::CtxSwitch {
                pid: 2,
                tgid: 2,
                app_cookie: 0,
            },
        ]);
        let whole = (3 + 2 + 7 + 2) * 4;
        let none = ModuleRanges::default();
        for cut in [whole, whole + 1, whole + 4, whole + 27] {
            for block in [8, BLOCK_BYTES] {
                let (f, at) = stream_facts(&mut &bytes[..cut], 4, block, true, &none).unwrap();
                assert_eq!((f.samples, at), (1, whole as u64), "cut at {cut}");
            }
            if cut > whole {
                assert!(stream_facts(&mut &bytes[..cut], 4, 8, false, &none).is_err());
            }
        }
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
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules(
            "oprofile 4096 0 - Live 0xbf000000\nother 4096 0 - Live 0xbf002000\n",
            "t",
        )
        .unwrap();
        let ranges = ModuleRanges::of(&snap);
        let facts = |b: &[u8], block| stream_facts(&mut &b[..], 4, block, false, &ranges);
        let f = facts(&bytes, BLOCK_BYTES).unwrap().0;
        assert_eq!(f.samples, 2);
        assert_eq!(f.images.iter().copied().collect::<Vec<_>>(), [2, 3]);
        // 0xbf00_0010 is oprofile's, 0xc000_0010 (a frame) the kernel's.
        assert_eq!(f.modules.iter().collect::<Vec<_>>(), ["oprofile"]);
        for cut in [2, 4] {
            let e = format!("{:#}", facts(&bytes[..bytes.len() - cut], 8).unwrap_err());
            assert!(e.contains("byte offset"), "{e}");
        }
    }

    /// The whole-stream facts of a stream: [`stream::decode`]'s samples, their images and the
    /// modules of their kernel PCs (the expected values of the streamed pass).
    fn decoded_facts(st: &stream::Stream, ranges: &ModuleRanges) -> StreamFacts {
        let d = stream::decode(st).unwrap();
        let mut f = StreamFacts {
            samples: d.samples.len() as u64,
            ..Default::default()
        };
        let pc = |pc, k: Option<bool>, cookie: Option<u64>, f: &mut StreamFacts| match k {
            Some(true) => f.modules.extend(ranges.find(pc).map(str::to_string)),
            Some(false) => f.images.extend(cookie.filter(|&c| c != 0)),
            None => {}
        };
        for s in &d.samples {
            f.images.extend(s.ctx.app_cookie.filter(|&c| c != 0));
            pc(s.pc, s.ctx.in_kernel, s.ctx.cookie, &mut f);
            for fr in &s.frames {
                pc(fr.pc, fr.in_kernel, fr.cookie, &mut f);
            }
        }
        f
    }

    /// `VmHWM` of this process, kB.
    fn vm_hwm_kb() -> u64 {
        let st = std::fs::read_to_string("/proc/self/status").unwrap();
        let l = st.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The recorder's passes over a 512 MiB stream (generated as it is read) stay within a
    /// few blocks: peak RSS grows by less than 8 MiB. Alone, as the peak is the process's:
    /// `cargo test --release -p oprof --lib facts_memory -- --ignored --test-threads=1`.
    #[test]
    #[ignore]
    fn facts_memory_is_bounded() {
        use oprofile_common::event::Record as R;
        let group = crate::fixtures::bytes32(&[
            R::CpuSwitch { cpu: 0 },
            R::KernelEnter,
            R::CtxSwitch {
                pid: 1,
                tgid: 1,
                app_cookie: 2,
            },
            R::TraceBegin,
            R::Sample {
                pc: 0xbf00_0010,
                event: 0,
            },
            R::Sample {
                pc: 0xc000_0010,
                event: 0,
            },
        ]);
        let total: u64 = 512 << 20;
        let n = total / group.len() as u64;
        struct Gen<'a>(&'a [u8], u64, usize);
        impl Read for Gen<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let mut k = 0;
                while k < out.len() && self.1 > 0 {
                    let take = (self.0.len() - self.2).min(out.len() - k);
                    out[k..k + take].copy_from_slice(&self.0[self.2..self.2 + take]);
                    (k, self.2) = (k + take, self.2 + take);
                    if self.2 == self.0.len() {
                        (self.1, self.2) = (self.1 - 1, 0);
                    }
                }
                Ok(k)
            }
        }
        let before = vm_hwm_kb();
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules("oprofile 4096 0 - Live 0xbf000000\n", "t")
            .unwrap();
        let f = stream_facts(
            &mut Gen(&group, n, 0),
            4,
            BLOCK_BYTES,
            false,
            &ModuleRanges::of(&snap),
        )
        .unwrap()
        .0;
        let grown = vm_hwm_kb() - before;
        eprintln!("VmHWM {before} kB before, grown by {grown} kB over {total} bytes");
        assert_eq!(f.samples, n);
        assert!(grown < 8 << 10, "peak RSS grew by {grown} kB");
    }

    #[test]
    fn streamed_facts_are_the_whole_streams_at_every_block_seam() {
        use oprofile_common::event::Record as R;
        // Every record kind the facts look at, a USER_MAPS longer than the smallest blocks,
        // chains in the kernel and in user images, modules at both ends of their ranges.
        let mut recs = vec![R::CpuSwitch { cpu: 1 }, R::KernelEnter];
        for (i, pc) in [
            0xbf00_0000u64,
            0xbf00_0fff,
            0xbf00_1000,
            0xbf00_2000,
            0xc000_0000,
        ]
        .into_iter()
        .enumerate()
        {
            let i = i as u64;
            recs.push(R::CtxSwitch {
                pid: 10 + i,
                tgid: 10 + i,
                app_cookie: 20 + i,
            });
            recs.extend([R::TraceBegin, R::Sample { pc, event: 1 }]);
            recs.extend([
                R::Sample {
                    pc: pc + 4,
                    event: 0,
                },
                R::KernelExit,
            ]);
            recs.extend([
                R::CookieSwitch { cookie: 30 + i },
                R::Sample { pc: 8, event: 0 },
            ]);
            recs.extend([R::Sample { pc: 12, event: 1 }, R::KernelEnter]);
        }
        let mut bytes = crate::fixtures::bytes32(&recs);
        // A USER_MAPS of 3 mappings (16 words) after the first CPU_SWITCH's group.
        let maps: Vec<u32> = [!0u32, 32, 10, 3].into_iter().chain(1..=12).collect();
        let at = 5 * 4;
        bytes.splice(at..at, maps.iter().flat_map(|w| w.to_le_bytes()));
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules(
            "oprofile 4096 0 - Live 0xbf000000\nother 4096 0 - Live 0xbf002000\nunused 4096 0 - Live 0xbf004000\n",
            "t",
        )
        .unwrap();
        let ranges = ModuleRanges::of(&snap);
        let st = stream::Stream::from_bytes(&bytes, 4).unwrap();
        let want = decoded_facts(&st, &ranges);
        assert_eq!(want.samples, 10);
        assert_eq!(
            want.modules.iter().collect::<Vec<_>>(),
            ["oprofile", "other"]
        );
        for block in (4..=96).step_by(4).chain([BLOCK_BYTES]) {
            let got = stream_facts(&mut &bytes[..], 4, block, false, &ranges)
                .unwrap()
                .0;
            assert_eq!(got, want, "blocks of {block} bytes");
        }
    }
}
