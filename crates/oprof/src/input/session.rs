//! Session directories: what `oprof record -o DIR` writes and `oprof report DIR` reads.
//!
//! | file | content |
//! |---|---|
//! | `samples` | the raw `/dev/oprofile/buffer` stream (native words, `pointer_size` bytes) |
//! | `images` | `/dev/oprofile/images` after the session (image id → target path) |
//! | `proc_modules` | `/proc/modules` after the session |
//! | `module_sections` | `NAME SECTION 0xADDR` from `/sys/module/*/sections/*` |
//! | `kallsyms` | `/proc/kallsyms` (kernel and module symbols without vmlinux or `.ko`) |
//! | `stats.json` | every `/dev/oprofile/stats` file, `{"cpu0/sample_received": N, ...}` |
//! | `session.json` | [`SessionInfo`] |
//! | `kpdata` | `/dev/oprofile/kprof/kpdata` (`--kprof`) |
//! | `profile_points` | `/dev/oprofile/profile_points` (`--points`) |
//! | `root/` | `--archive`: copies of the sampled user images and `.ko` files at their target paths |

use anyhow::{bail, Context, Result};
use oprofile_common::event::USER_STACK_SIZE_MAX;
use oprofile_common::events::CpuModel;
use oprofile_common::sync::BACKTRACE_DEPTH_MAX;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `oprof record`'s and `oprof report`'s default directory (like `perf.data`).
pub const DEFAULT_DIR: &str = "oprofile_data";
pub const SAMPLES: &str = "samples";
/// `oprof record --max-size`'s chunks of the stream while it records (joined into
/// [`SAMPLES`] at the end).
pub const CHUNKS: &str = "samples.d";
pub const IMAGES: &str = "images";
pub const PROC_MODULES: &str = "proc_modules";
pub const MODULE_SECTIONS: &str = "module_sections";
pub const KALLSYMS: &str = "kallsyms";
pub const STATS: &str = "stats.json";
pub const SESSION: &str = "session.json";
pub const KPDATA: &str = "kpdata";
pub const PROFILE_POINTS: &str = "profile_points";
pub const ROOT: &str = "root";
/// Format version of `session.json`. Fields added within a format have defaults that read an
/// older file as it was meant (`state` absent: complete); a change an older `oprof` would
/// misread takes a new number, and a session of a newer format is refused ([`Session::open`]).
pub const FORMAT: u32 = 1;

/// The files a recorder writes after the capture: missing from a session whose recorder died.
pub const AFTER_CAPTURE: [&str; 5] = [IMAGES, STATS, PROC_MODULES, MODULE_SECTIONS, KALLSYMS];

/// Where a session's recording stands ([`SessionInfo::state`]).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Written when the capture starts (settings and command known; no totals, no stop): the
    /// recorder has not finished. Read back, the recorder died (SIGKILL, power loss): `samples`
    /// holds what it wrote, possibly ending inside a record.
    Recording,
    /// Rewritten atomically when the session is written (sessions without the field).
    #[default]
    Complete,
}

/// The running kernel (`uname`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelInfo {
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// `uname -m`.
    pub machine: String,
    /// `uname -n`.
    pub nodename: String,
}

/// `uname(2)` of the running kernel (empty fields if it fails).
pub fn uname() -> KernelInfo {
    // SAFETY: `utsname` is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `utsname`.
    if unsafe { libc::uname(&mut u) } != 0 {
        return KernelInfo::default();
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    KernelInfo {
        release: s(&u.release),
        version: s(&u.version),
        machine: s(&u.machine),
        nodename: s(&u.nodename),
    }
}

/// One hardware counter of the session (absent in timer mode).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CounterInfo {
    /// Counter number (the samples' event word).
    pub counter: u32,
    /// Event name, e.g. `CPU_CYCLES`.
    pub event: String,
    /// Event number written to `N/event`.
    pub event_number: u32,
    /// Sampling period in events (`N/count`); 0 = counting only.
    pub count: u64,
    pub unit_mask: u64,
    pub kernel: bool,
    pub user: bool,
    /// `N/total`: events counted in the session.
    pub total: Option<u64>,
}

/// What one counter counted, from `--counter` (or just its number).
#[derive(Debug, Clone, Serialize)]
pub struct Counter {
    pub counter: u64,
    /// Event name, e.g. `CPU_CYCLES`; `event N` when not given.
    pub event: String,
    /// Sampling period in events, when given.
    pub count: Option<u64>,
}

impl Counter {
    /// Parses `N:EVENT[:COUNT]` (the event by name or number; a name is checked against
    /// `model` when given, a number is named from it).
    pub fn parse(spec: &str, model: Option<&CpuModel>) -> Result<Counter> {
        let mut it = spec.split(':');
        let (Some(n), Some(ev)) = (it.next(), it.next()) else {
            bail!("--counter {spec:?}: expected COUNTER:EVENT[:COUNT], e.g. 0:CPU_CYCLES:100000");
        };
        let counter = n
            .parse()
            .with_context(|| format!("--counter {spec:?}: bad counter number {n:?}"))?;
        let count = it
            .next()
            .map(|c| {
                c.parse::<u64>()
                    .with_context(|| format!("--counter {spec:?}: bad count {c:?}"))
            })
            .transpose()?;
        if it.next().is_some() {
            bail!("--counter {spec:?}: too many fields (COUNTER:EVENT[:COUNT])");
        }
        let number = ev
            .strip_prefix("0x")
            .map(|h| u64::from_str_radix(h, 16))
            .unwrap_or_else(|| ev.parse());
        let event = match (model, number) {
            (Some(m), Ok(num)) => m
                .event(num)
                .with_context(|| {
                    format!(
                        "--counter {spec:?}: event {num:#x} is not a {} event",
                        m.name()
                    )
                })?
                .name
                .to_string(),
            (Some(m), Err(_)) => m
                .event_by_name(ev)
                .with_context(|| {
                    format!(
                        "--counter {spec:?}: no event {ev:?} for {} (see `oprof events`)",
                        m.name()
                    )
                })?
                .name
                .to_string(),
            (None, Ok(num)) => format!("event {num:#x}"),
            (None, Err(_)) => ev.to_string(),
        };
        Ok(Counter {
            counter,
            event,
            count,
        })
    }
}

impl Counter {
    /// A counter as `session.json` describes it.
    pub fn from_session(c: &CounterInfo) -> Counter {
        Counter {
            counter: u64::from(c.counter),
            event: c.event.clone(),
            count: Some(c.count),
        }
    }
}

/// The oprofilefs settings in force (read back after writing them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Settings {
    /// Event buffer size, words.
    pub buffer_size: u64,
    /// Words left free when the reader is woken.
    pub buffer_watershed: u64,
    /// Per-CPU ring size, samples.
    pub cpu_buffer_size: u64,
    /// Frames recorded per sample, at most [`BACKTRACE_DEPTH_MAX`] ([`Session::open`] refuses
    /// more).
    pub backtrace_depth: u64,
    /// Bytes of user stack copied per traced sample (0: none; sessions before it: 0), at most
    /// [`USER_STACK_SIZE_MAX`] ([`Session::open`] refuses more).
    #[serde(default)]
    pub user_stack_size: u64,
    /// Image ids the module could give (`image_ids_max`; 0: a module or session before it).
    #[serde(default)]
    pub image_ids_max: u64,
}

impl Settings {
    /// Checks the settings against the module's limits: a `backtrace_depth` above
    /// [`BACKTRACE_DEPTH_MAX`] frames or a `user_stack_size` above [`USER_STACK_SIZE_MAX`]
    /// bytes cannot come from the module. Such a value is refused, not clamped: the stream was
    /// not recorded with the clamped value, so its chains and snapshots would be misread.
    /// Errors: one line naming `file` and the field.
    pub fn check(&self, file: &Path) -> Result<()> {
        let fields = [
            (
                "backtrace_depth",
                self.backtrace_depth,
                BACKTRACE_DEPTH_MAX,
                "frames",
            ),
            (
                "user_stack_size",
                self.user_stack_size,
                USER_STACK_SIZE_MAX,
                "bytes",
            ),
        ];
        for (name, value, max, unit) in fields {
            anyhow::ensure!(
                value <= max,
                "{}: settings.{name} {value} is beyond the module's largest ({max} {unit})",
                file.display()
            );
        }
        Ok(())
    }
}

/// A point in time: Unix nanoseconds and the same as UTC text.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Time {
    pub unix_ns: u64,
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub utc: String,
}

impl Time {
    pub fn now() -> Time {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Time {
            unix_ns: ns,
            utc: utc(ns),
        }
    }
}

/// `unix_ns` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, H. Hinnant's `civil_from_days`).
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let ms = (unix_ns / 1_000_000) % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Sample totals of the session.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Totals {
    /// Samples in `samples` (call-chain entries are not samples).
    pub samples: u64,
    /// Sum of `stats/cpuN/sample_received`: samples taken.
    pub sample_received: u64,
    /// Samples taken but lost (see [`Losses`]).
    pub lost: u64,
    /// Sampling periods never sampled (`sample_lost_no_irq`, `sample_lost_overrun`: see
    /// [`Losses`]).
    pub not_taken: u64,
    /// Bytes of `samples`.
    pub bytes: u64,
    /// Bytes read from `buffer` that could not be written to `samples` (a full disk: ENOSPC,
    /// EDQUOT, EIO), and bytes of a record cut there; sessions before it: 0.
    #[serde(default)]
    pub unwritten: u64,
    /// `read`s of `buffer` that returned data.
    pub reads: u64,
    /// `--max-size` (the flight recorder): the oldest chunks of the stream dropped to keep it
    /// within the size: chunks, their bytes (not in `bytes`) and their samples (not in
    /// `samples`; taken = `samples` + `dropped.samples` + `lost`). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<DroppedTotals>,
}

/// What the flight recorder dropped ([`Totals::dropped`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedTotals {
    pub chunks: u64,
    pub bytes: u64,
    pub samples: u64,
}

/// `session.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionInfo {
    /// [`FORMAT`].
    pub format: u32,
    /// `recording` (the recorder has not finished, or died) or `complete`.
    #[serde(default)]
    pub state: State,
    /// Version of the `oprof` that recorded.
    pub oprof_version: String,
    /// `/dev/oprofile/cpu_type`.
    pub cpu_type: String,
    /// `/dev/oprofile/pointer_size`: bytes per word of `samples`.
    pub pointer_size: usize,
    pub kernel: KernelInfo,
    /// Online CPUs.
    pub cpus: usize,
    /// Hardware counters; empty in timer mode.
    pub counters: Vec<CounterInfo>,
    /// Timer mode: samples per second per CPU (module parameter `timer_hz`).
    pub timer_hz: Option<u64>,
    pub settings: Settings,
    pub start: Time,
    pub stop: Time,
    pub duration_ns: u64,
    /// The profiled command (`-- CMD ARGS`), if any.
    pub command: Option<Vec<String>>,
    /// Its exit status (128 + signal number when killed).
    pub exit_status: Option<i32>,
    /// What ended the session: `command`, `duration`, `SIGINT`, `SIGTERM`, `reader error`.
    pub ended_by: String,
    /// `oprof`'s own command line.
    pub command_line: Vec<String>,
    /// `--max-size`: bytes of stream kept at most (the flight recorder; see [`Totals::dropped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    pub totals: Totals,
    /// Kernel modules whose `.ko` was found on the target: name → target path.
    #[serde(default)]
    pub modules: BTreeMap<String, String>,
    /// Whether `root/` holds copies of the images (`--archive`).
    #[serde(default)]
    pub archive: bool,
    /// `--kprof`: the `kprof/kpctl` settings (`hz`, `granularity`, `text`, ...).
    #[serde(default)]
    pub kprof: Option<BTreeMap<String, String>>,
    /// Notes (e.g. kallsyms hidden by kptr_restrict).
    #[serde(default)]
    pub notes: Vec<String>,
    /// `--archive`: build-id and `.gnu_debuglink` of each archived image, by target path, so
    /// that a host finds their debug files (the board has none) and can tell a different copy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub debug_ids: BTreeMap<String, Ids>,
}

/// The identity of an image a debug file must match (and `oprof record --archive` keeps).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ids {
    /// GNU build-id, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// `.gnu_debuglink` file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debuglink: Option<String>,
    /// `.gnu_debuglink` CRC32 of the debug file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debuglink_crc: Option<u32>,
}

/// Samples taken and lost, from a `stats.json` map (the accounting of
/// `Documentation/oprofilefs.rst`: taken = in the stream + lost), and the periods never sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Losses {
    /// Sum of `cpuN/sample_received`.
    pub received: u64,
    /// `cpuN/sample_lost_overflow`, `cpuN/sample_invalid_eip` (also perf overflows that came
    /// without registers), `cpuN/sample_lost_nmi_overflow`, `cpuN/sample_lost_nmi_task`,
    /// `sample_lost_no_mm`, `sample_lost_no_mapping`, `event_lost_overflow`.
    pub lost: u64,
    /// The global `sample_lost_no_irq` and `sample_lost_overrun`: sampling periods that passed
    /// without a sample (no overflow interrupt; an interrupt, or in timer mode an hrtimer tick,
    /// more than a period late), which are no samples taken. `cpuN/sample_lost_overrun` and
    /// `N/sample_lost_*` split the same periods by CPU and by counter: not added again.
    pub not_taken: u64,
}

impl Losses {
    pub fn of(stats: &BTreeMap<String, u64>) -> Losses {
        let mut l = Losses::default();
        for (k, &v) in stats {
            let leaf = k.rsplit('/').next().unwrap_or(k);
            let per_cpu = k.starts_with("cpu") && k.contains('/');
            let global = !k.contains('/');
            match leaf {
                "sample_received" if per_cpu => l.received += v,
                "sample_lost_overflow"
                | "sample_invalid_eip"
                | "sample_lost_nmi_overflow"
                | "sample_lost_nmi_task"
                    if per_cpu =>
                {
                    l.lost += v
                }
                "sample_lost_no_mm" | "sample_lost_no_mapping" | "event_lost_overflow"
                    if global =>
                {
                    l.lost += v
                }
                "sample_lost_no_irq" | "sample_lost_overrun" if global => l.not_taken += v,
                _ => {}
            }
        }
        l
    }
}

/// A session directory opened for reading.
#[derive(Debug)]
pub struct Session {
    pub dir: PathBuf,
    pub info: SessionInfo,
}

impl Session {
    /// Whether `dir` looks like a session directory (has `session.json` or `samples`).
    pub fn is_session(dir: &Path) -> bool {
        dir.join(SESSION).is_file() || dir.join(SAMPLES).is_file()
    }

    /// Opens `dir`: reads `session.json`. Errors name the file: unreadable, not JSON, a newer
    /// format, settings beyond the module's limits ([`Settings::check`]).
    pub fn open(dir: &Path) -> Result<Session> {
        let p = dir.join(SESSION);
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "{}: not a session directory (reading {SESSION})",
                dir.display()
            )
        })?;
        let info: SessionInfo = serde_json::from_str(&text)
            .with_context(|| format!("{}: bad session file", p.display()))?;
        if info.format > FORMAT {
            anyhow::bail!(
                "{}: session format {} is newer than this oprof's ({FORMAT}); use a newer oprof",
                p.display(),
                info.format
            );
        }
        info.settings.check(&p)?;
        Ok(Session {
            dir: dir.to_path_buf(),
            info,
        })
    }

    /// Whether the recorder of the session died before finishing it (state `recording`).
    pub fn crashed(&self) -> bool {
        self.info.state == State::Recording
    }

    /// For a session whose recorder died: a note saying so and what is missing (the files
    /// written after the capture that are not there, the totals and losses).
    pub fn crash_note(&self) -> Option<String> {
        if !self.crashed() {
            return None;
        }
        let missing: Vec<&str> = AFTER_CAPTURE
            .into_iter()
            .filter(|f| self.file(f).is_none())
            .collect();
        let files = if missing.is_empty() {
            String::new()
        } else {
            format!("no {}; ", missing.join(", "))
        };
        Some(format!(
            "{}: the recorder died while recording (session.json state \"recording\"): {files}\
             no totals, losses or stop time; the samples written are reported",
            self.dir.display()
        ))
    }

    /// `dir/name` if that file exists.
    pub fn file(&self, name: &str) -> Option<PathBuf> {
        let p = self.dir.join(name);
        p.is_file().then_some(p)
    }

    /// `dir/root` if `--archive` filled it.
    pub fn archive_root(&self) -> Option<PathBuf> {
        let p = self.dir.join(ROOT);
        p.is_dir().then_some(p)
    }

    /// Whether the running system is the one that recorded (same kernel release, version,
    /// machine and node name): then the target paths in the session are this system's files.
    pub fn recorded_here(&self, here: &KernelInfo) -> bool {
        !self.info.kernel.release.is_empty() && self.info.kernel == *here
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_text() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_123_000_000), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc(1_700_000_000_999_999_999), "2023-11-14T22:13:20.999Z");
        assert_eq!(utc(4_107_542_399_000_000_000), "2100-02-28T23:59:59.000Z");
    }

    #[test]
    fn losses_follow_the_accounting() {
        let st: BTreeMap<String, u64> = [
            ("cpu0/sample_received", 100),
            ("cpu1/sample_received", 50),
            ("cpu0/sample_lost_overflow", 3),
            ("cpu1/sample_invalid_eip", 1),
            ("cpu0/backtrace_aborted", 7),
            ("sample_lost_no_mm", 2),
            ("sample_lost_no_mapping", 1),
            ("event_lost_overflow", 4),
            ("bt_lost_no_mapping", 9),
            ("sample_lost_no_irq", 5),
            ("sample_lost_overrun", 6),
            // The same periods by CPU and by counter, and readings rejected: no losses.
            ("cpu0/sample_lost_overrun", 2),
            ("cpu1/sample_lost_overrun", 4),
            ("0/sample_lost_overrun", 6),
            ("0/sample_lost_no_irq", 5),
            ("0/event_throttled", 3),
            ("0/event_read_rejected", 1),
            ("event_read_rejected", 1),
            ("period_ns", 1_000_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(
            Losses::of(&st),
            Losses {
                received: 150,
                lost: 11,
                not_taken: 11
            }
        );
    }

    #[test]
    fn session_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!Session::is_session(dir.path()));
        let e = format!("{:#}", Session::open(dir.path()).unwrap_err());
        assert!(e.contains("not a session directory"), "{e}");
        let info = SessionInfo {
            format: FORMAT,
            cpu_type: "timer".into(),
            pointer_size: 4,
            ..Default::default()
        };
        std::fs::write(
            dir.path().join(SESSION),
            serde_json::to_string(&info).unwrap(),
        )
        .unwrap();
        let s = Session::open(dir.path()).unwrap();
        assert_eq!(
            (s.info.cpu_type.as_str(), s.info.pointer_size),
            ("timer", 4)
        );
        assert!(s.file(SAMPLES).is_none() && s.archive_root().is_none());
        assert!(
            !s.recorded_here(&KernelInfo::default()),
            "an unknown kernel is not this one"
        );
        assert!(
            !s.crashed() && s.crash_note().is_none(),
            "no state: complete"
        );
        let mut recording = info.clone();
        recording.state = State::Recording;
        let text = serde_json::to_string(&recording).unwrap();
        assert!(text.contains(r#""state":"recording""#), "{text}");
        std::fs::write(dir.path().join(SESSION), text).unwrap();
        std::fs::write(dir.path().join(KALLSYMS), "").unwrap();
        let s = Session::open(dir.path()).unwrap();
        let note = s.crash_note().unwrap();
        assert!(
            note.contains("no images, stats.json, proc_modules, module_sections; no totals"),
            "{note}"
        );
        for (field, value) in [
            ("backtrace_depth", BACKTRACE_DEPTH_MAX + 1),
            ("user_stack_size", 1 << 43),
        ] {
            let mut bad = serde_json::to_value(&info).unwrap();
            bad["settings"][field] = value.into();
            std::fs::write(dir.path().join(SESSION), bad.to_string()).unwrap();
            let e = format!("{:#}", Session::open(dir.path()).unwrap_err());
            let want = format!("session.json: settings.{field} {value} is beyond the module's");
            assert!(e.contains(&want) && !e.contains('\n'), "{e}");
        }
        let mut edge = info.clone();
        edge.settings.backtrace_depth = 128;
        edge.settings.user_stack_size = 16384;
        let text = serde_json::to_string(&edge).unwrap();
        std::fs::write(dir.path().join(SESSION), text).unwrap();
        assert!(
            Session::open(dir.path()).is_ok(),
            "the module's largest values"
        );
        std::fs::write(dir.path().join(SESSION), "{").unwrap();
        assert!(
            format!("{:#}", Session::open(dir.path()).unwrap_err()).contains("bad session file")
        );
    }
}
