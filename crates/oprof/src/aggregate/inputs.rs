//! What every view reads: a session directory (`oprof record -o DIR`) or a raw stream with its
//! files, turned into counted samples and a [`Resolver`] for them. `oprof report`, `oprof
//! annotate` and each side of `oprof diff` start here.
//!
//! On a session directory every input comes from it: `samples`, `images`, `proc_modules`,
//! `module_sections`, the counters, CPU type and word size of `session.json`; kernel symbols
//! from its `kallsyms` when no `--vmlinux` is given; user images and `.ko` files from `DIR/root`
//! (`--archive`), then `--sysroot`, then `/` when run on the system that recorded. Options given
//! explicitly take precedence.

use crate::aggregate::{self, Aggregated};
use crate::input::events;
use crate::input::session::Counter;
use crate::input::session::{self, Session};
use crate::input::validate::{self, Checked, Limits, Skipped};
use crate::resolve::elf::ElfImage;
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::kallsyms::Kallsyms;
use crate::resolve::unwind;
use crate::resolve::{self, Resolver};
use anyhow::{Context, Result};
use std::io::Cursor;
use std::path::{Path, PathBuf};

/// The input options shared by the views (clap flattens them into each subcommand).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Inputs {
    /// Session directory (default ./oprofile_data), or a captured stream (bytes read from
    /// /dev/oprofile/buffer).
    pub buffer: Option<PathBuf>,
    /// Copy of /dev/oprofile/images (`ID PATH` lines): names the user images of the stream.
    #[arg(long, value_name = "FILE")]
    pub images: Option<PathBuf>,
    /// Copy of the target's /proc/modules: attributes kernel PCs to modules.
    #[arg(long, value_name = "FILE")]
    pub proc_modules: Option<PathBuf>,
    /// `NAME SECTION 0xADDR` lines from /sys/module/NAME/sections/: places each module's
    /// .ko (found in --image-path as NAME.ko) for its symbols and source lines.
    #[arg(long, value_name = "FILE")]
    pub module_sections: Option<PathBuf>,
    /// Kernel image with symbols, for kernel samples.
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<PathBuf>,
    /// Root of a copy of the target's filesystem: user image PATH is looked up as SYSROOT/PATH.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Directory with host copies of target files: user images by basename, modules as
    /// NAME.ko (`-`/`_` swapped too); tried after --sysroot. Repeatable.
    #[arg(long = "image-path", value_name = "DIR")]
    pub image_path: Vec<PathBuf>,
    /// Directory of separate debug files (as gdb's debug-file-directory, e.g. /usr/lib/debug):
    /// `DIR/.build-id/xx/yyyy.debug` and `DIR/TARGETDIR/DEBUGLINK`; searched before
    /// `SYSROOT/usr/lib/debug` of each sysroot. Repeatable.
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
    /// The `backtrace_depth` the stream was recorded with (default: the session's): bounds the
    /// chains unwound from user-stack snapshots, and tells a chain the depth ended from one cut
    /// short.
    #[arg(long, value_name = "FRAMES", value_parser = depth_arg())]
    pub backtrace_depth: Option<u64>,
    /// Word size in bytes: the target's /dev/oprofile/pointer_size (default: the session's,
    /// else 4 as on ARM32; 8 on arm64).
    #[arg(long)]
    pub word_size: Option<usize>,
    /// What a counter counted, `COUNTER:EVENT[:COUNT]` (event by name or number), as written
    /// to /dev/oprofile/COUNTER/{event,count}; repeat per counter. Names columns.
    #[arg(long = "counter", value_name = "N:EVENT[:COUNT]")]
    pub counters: Vec<String>,
    /// CPU type the counters' events belong to (checks and names `--counter` events, and
    /// bounds the counters a bare stream's samples may name).
    #[arg(long)]
    pub cpu_type: Option<String>,
    /// Decode a stream that is not as the module writes one: skip from each record with a bad
    /// word to the next CPU_SWITCH that starts a sync pass, and say what was skipped (stderr;
    /// `skipped` in `report --json`). Without it such a stream is refused (exit status 2).
    #[arg(long)]
    pub force: bool,
}

/// What to load besides symbols.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    /// DWARF line tables of user images and modules (`-g`, pprof, annotate).
    pub lines: bool,
    /// Also the vmlinux's line tables (large: only when source lines are shown).
    pub kernel_lines: bool,
    /// What the counted keys hold (executable, task).
    pub keys: aggregate::Options,
}

/// A loaded profile: counted samples and everything needed to name them.
pub struct Profile {
    /// As given: the session directory or the stream.
    pub path: PathBuf,
    pub session: Option<Session>,
    /// `cpu_type` of the session or `--cpu-type` (`None`: timer mode or unknown).
    pub cpu_type: Option<String>,
    pub counters: Vec<Counter>,
    pub counts: Aggregated,
    pub res: Resolver,
    /// What `--force` skipped of the stream.
    pub skipped: Option<Skipped>,
}

/// Why the session `dir` has no stream: no `samples`, or (`oprof record --max-size` killed
/// before it joined them) only its chunks, with the command that joins them; `crashed`: its
/// recorder died (state `recording`), so before its stream began.
fn no_samples(dir: &Path, crashed: bool) -> String {
    let chunks = dir.join(session::CHUNKS);
    if chunks.is_dir() {
        return format!(
            "{}: no {} file, but {}/: its recorder (--max-size) died before joining its chunks; \
             `(umask 077; cat {}/* > {})` joins them",
            dir.display(),
            session::SAMPLES,
            chunks.display(),
            chunks.display(),
            dir.join(session::SAMPLES).display()
        );
    }
    let why = if crashed {
        ": its recorder died before the stream began (session.json state \"recording\")"
    } else {
        ""
    };
    format!("{}: no {} file{why}", dir.display(), session::SAMPLES)
}

impl Inputs {
    /// Reads and counts the stream, and sets up the resolver. Errors name the file at fault.
    pub fn load(&self, want: Want) -> Result<Profile> {
        let path = self
            .buffer
            .clone()
            .unwrap_or_else(|| PathBuf::from(session::DEFAULT_DIR));
        let ses = if path.is_dir() {
            Some(Session::open(&path)?)
        } else {
            None
        };
        let from_session = |given: &Option<PathBuf>, name: &str| {
            given.clone().or_else(|| ses.as_ref()?.file(name))
        };
        let buffer = match &ses {
            Some(s) => s
                .file(session::SAMPLES)
                .with_context(|| no_samples(&path, s.crashed()))?,
            None => path.clone(),
        };
        let word_size = self
            .word_size
            .or(ses.as_ref().map(|s| s.info.pointer_size))
            .unwrap_or(4);
        let cpu_type = self.cpu_type.clone().or_else(|| {
            ses.as_ref()
                .map(|s| s.info.cpu_type.clone())
                .filter(|t| t != "timer")
        });
        let model = match &cpu_type {
            Some(t) => events::model(Some(t))?,
            None => None,
        };
        let mut counters = self
            .counters
            .iter()
            .map(|c| Counter::parse(c, model))
            .collect::<Result<Vec<_>>>()?;
        if let (true, Some(s)) = (counters.is_empty(), &ses) {
            counters = s.info.counters.iter().map(Counter::from_session).collect();
            if s.info.counters.is_empty() {
                counters.push(Counter {
                    counter: 0,
                    event: "timer".into(),
                    count: None,
                });
            }
        }
        let (checked, size_note) = self.check_stream(&buffer, ses.as_ref(), word_size, model)?;
        let images = from_session(&self.images, session::IMAGES);
        let proc_modules = from_session(&self.proc_modules, session::PROC_MODULES);
        let module_sections = from_session(&self.module_sections, session::MODULE_SECTIONS);
        let images = images.as_deref().map(ImageMap::read).transpose()?;
        let snapshot = ModuleSnapshot::read(proc_modules.as_deref(), module_sections.as_deref())?;
        let mut ropts = resolve::Options {
            image_path: self.image_path.clone(),
            debug_dirs: self.debug_dirs.clone(),
            lines: want.lines,
            ..Default::default()
        };
        let here = ses
            .as_ref()
            .is_some_and(|s| s.recorded_here(&session::uname()));
        ropts
            .sysroots
            .extend(ses.as_ref().and_then(Session::archive_root));
        ropts.sysroots.extend(self.sysroot.clone());
        if here {
            ropts.sysroots.push(PathBuf::from("/"));
        }
        resolve::check_dirs(&ropts)?;
        let mut vm = match &self.vmlinux {
            Some(p) => Some((p.clone(), load_vmlinux(p, want.kernel_lines, &ropts)?)),
            None => None,
        };
        let mut notes = vec![];
        if let Some(s) = &ses {
            ropts.recorded_ids = s.info.debug_ids.clone();
            for (name, ko) in &s.info.modules {
                if let Err(why) = resolve::confine::relative(ko) {
                    notes.push(format!("{ko} (module {name}): {why}"));
                    continue;
                }
                let archived = s
                    .archive_root()
                    .and_then(|r| resolve::confine::file_in(&r, ko));
                let local = here.then(|| PathBuf::from(ko)).filter(|p| p.is_file());
                if let Some(p) = archived.or(local) {
                    ropts.module_files.insert(name.clone(), p);
                }
            }
            if let Some(k) = s.file(session::KALLSYMS) {
                let text = std::fs::read_to_string(&k)
                    .with_context(|| format!("reading {}", k.display()))?;
                let ks = Kallsyms::parse(&text, &k.display().to_string())?;
                ropts.module_symbols = ks.module_tables(&snapshot);
                if vm.is_none() {
                    match ks.kernel_table() {
                        Some(t) => {
                            if want.kernel_lines {
                                notes.push(format!(
                                    "kernel symbols from {} (no --vmlinux): no kernel source lines",
                                    k.display()
                                ));
                            }
                            vm = Some((k.clone(), ElfImage::from_symbols(&k, t, vec![])));
                            ropts.kallsyms = Some(k.clone());
                        }
                        None => notes.push(format!(
                            "{}: no kernel symbols (hidden by kptr_restrict?); give --vmlinux",
                            k.display()
                        )),
                    }
                }
            }
        }
        let mut res = Resolver::new(ropts, images, vm, &snapshot);
        res.warnings
            .extend(ses.as_ref().and_then(Session::crash_note));
        res.warnings.extend(notes);
        res.warnings.extend(size_note);
        let skip_note = checked.skipped().map(|s| s.note(&buffer));
        res.warnings.extend(skip_note);
        let depth = self
            .backtrace_depth
            .or(ses.as_ref().map(|s| s.info.settings.backtrace_depth));
        // A session says whether it took snapshots; a raw stream is scanned.
        let snapshots = ses
            .as_ref()
            .is_none_or(|s| s.info.settings.user_stack_size > 0);
        let depth = if snapshots && has_snapshots(&buffer, &checked, word_size)? {
            Some(
                depth
                    .and_then(|d| usize::try_from(d).ok())
                    .filter(|&d| d > 0),
            )
        } else {
            None
        };
        let (mut counts, expansion) = count(&buffer, &checked, depth, &res, word_size, want.keys)?;
        let was_expanded = expansion.is_some();
        if let Some(stats) = expansion {
            res.warnings.insert(stats.note());
            res.warnings.extend(stats.fp.note());
        }
        // arm64 frame-record chains are proven with CFI (in the expansion when there were
        // snapshots); ARM's stay as the module wrote them.
        if word_size == 8 && !was_expanded {
            let mut prover = unwind::fpchain::Prover::new();
            for part in &mut counts.parts {
                aggregate::prove_counts(part, &mut prover, &mut |id| res.unwind_tables(id));
            }
            res.warnings.extend(prover.stats.note());
        }
        let skipped = checked.skipped().cloned();
        Ok(Profile {
            path,
            session: ses,
            cpu_type,
            counters,
            counts,
            res,
            skipped,
        })
    }

    /// Checks the stream `buffer` ([`validate`]): against session.json for a session (word
    /// size, size, counters, snapshots), else against `--cpu-type`'s counters (`model`).
    /// Returns it, and a note when `--force` lets a size that session.json contradicts pass.
    fn check_stream(
        &self,
        buffer: &std::path::Path,
        ses: Option<&Session>,
        word_size: usize,
        model: Option<&'static oprofile_common::events::CpuModel>,
    ) -> Result<(Checked, Option<String>)> {
        let (limits, note) = match ses {
            Some(s) => {
                let json = s.dir.join(session::SESSION);
                let (info, force) = (&s.info, self.force);
                let note = validate::check_session(&json, info, self.word_size, buffer, force)?;
                if s.crashed() {
                    // Its recorder died: the stream may end inside a record.
                    let (checked, torn) =
                        validate::check_recording(buffer, &Limits::session(info), force)?;
                    return Ok((checked, note.or(torn)));
                }
                (Limits::session(info), note)
            }
            None => {
                let model = self.cpu_type.is_some().then_some(model);
                (Limits::bare(word_size, model), None)
            }
        };
        Ok((validate::check(buffer, &limits, self.force)?, note))
    }
}

/// Whether the checked stream `buffer` may hold user-stack snapshots
/// ([`scan_for_snapshots`], in bounded memory: a stream without them, the common case, is
/// counted as it is).
fn has_snapshots(buffer: &std::path::Path, checked: &Checked, word_size: usize) -> Result<bool> {
    let reading = || format!("reading {}", buffer.display());
    match checked {
        Checked::File | Checked::Prefix { .. } => {
            let mut f = checked.open(buffer)?;
            scan_for_snapshots(&mut f, word_size).with_context(reading)
        }
        Checked::Kept { bytes, .. } => {
            scan_for_snapshots(&mut Cursor::new(bytes.as_slice()), word_size).with_context(reading)
        }
    }
}

/// Counts the samples of the checked stream `buffer`. With `expand` (`Some(depth)`: the
/// recorded backtrace depth if known, else the module's largest is assumed) its user-stack
/// snapshots are unwound into call-chain frames as it is read ([`unwind::expanding`], tables
/// from `res`), and what the expansion did is returned too. Memory: the counts, the unwind
/// tables and a few blocks, whatever the stream's length.
fn count(
    buffer: &std::path::Path,
    checked: &Checked,
    expand: Option<Option<usize>>,
    res: &Resolver,
    word_size: usize,
    keys: aggregate::Options,
) -> Result<(Aggregated, Option<unwind::expand::Expansion>)> {
    let tuning = aggregate::Tuning::default();
    let decoding = || format!("decoding {}", buffer.display());
    let Some(depth) = expand else {
        let counts = match checked {
            Checked::Kept { bytes, .. } => {
                aggregate::read(Cursor::new(bytes.as_slice()), word_size, keys, tuning)
            }
            Checked::File => {
                let f = aggregate::open(buffer, word_size)?;
                aggregate::read(f, word_size, keys, tuning)
            }
            Checked::Prefix { .. } => {
                aggregate::read(checked.open(buffer)?, word_size, keys, tuning)
            }
        };
        return Ok((counts.with_context(decoding)?, None));
    };
    let load = &mut |id| res.unwind_tables(id);
    let block = unwind::expanding::BLOCK_BYTES / word_size;
    let counted = |r: &mut dyn std::io::Read| {
        aggregate::read_sequential(r, word_size, keys, tuning).with_context(decoding)
    };
    let (counts, stats) = match checked {
        Checked::Kept { bytes, .. } => {
            let src = Cursor::new(bytes.as_slice());
            let mut x = unwind::expanding::Expanding::new(src, word_size, depth, load, block);
            (counted(&mut x)?, x.into_stats())
        }
        Checked::File => {
            let f = aggregate::open(buffer, word_size)?;
            let mut x = unwind::expanding::Expanding::new(f, word_size, depth, load, block);
            (counted(&mut x)?, x.into_stats())
        }
        Checked::Prefix { .. } => {
            let f = checked.open(buffer)?;
            let mut x = unwind::expanding::Expanding::new(f, word_size, depth, load, block);
            (counted(&mut x)?, x.into_stats())
        }
    };
    // The counting read to the end, so the expansion finished.
    let stats = stats.with_context(|| format!("{}: expansion unfinished", buffer.display()))?;
    Ok((counts, Some(stats)))
}

/// Parser of `--backtrace-depth FRAMES`: 0 ..= the module's largest, `BACKTRACE_DEPTH_MAX`
/// frames (a stream cannot hold deeper chains).
pub fn depth_arg() -> clap::builder::RangedU64ValueParser<u64> {
    let max = oprofile_common::sync::BACKTRACE_DEPTH_MAX;
    clap::value_parser!(u64).range(0..=max)
}

/// Whether the stream `r` may hold USER_STACK records ([`unwind::expand::has_snapshots`]),
/// read in 1 MiB blocks.
fn scan_for_snapshots(r: &mut impl std::io::Read, word_size: usize) -> std::io::Result<bool> {
    let mut block = vec![0u8; (1 << 20) / word_size * word_size];
    let mut carry: Option<u64> = None;
    loop {
        let mut n = 0;
        while n < block.len() {
            match r.read(&mut block[n..])? {
                0 => break,
                k => n += k,
            }
        }
        // A block is whole words but the last, which `aggregate::open` checked already.
        let mut words = crate::input::stream::Stream::from_bytes(
            &block[..n / word_size * word_size],
            word_size,
        )
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .words;
        if let Some(last) = carry {
            words.insert(0, last);
        }
        if unwind::expand::has_snapshots(&words, word_size) {
            return Ok(true);
        }
        if n < block.len() {
            return Ok(false);
        }
        carry = words.last().copied();
    }
}

/// Loads `--vmlinux` (symbols from its debug file when it is stripped). Errors: unreadable, or
/// no function symbols from either.
fn load_vmlinux(p: &std::path::Path, lines: bool, ropts: &resolve::Options) -> Result<ElfImage> {
    let search = crate::resolve::debugfile::Search::new(&ropts.debug_dirs, &ropts.sysroots);
    let lookup = crate::resolve::elf::DebugLookup {
        search: &search,
        target: None,
        recorded: None,
    };
    let e = ElfImage::load_kernel(p, lines, Some(lookup)).context("--vmlinux")?;
    if e.symbols.is_empty() {
        let why = e
            .debug_notes
            .first()
            .map_or(String::new(), |n| format!("; {n}"));
        anyhow::bail!(
            "{}: no function symbols (stripped, and no debug file found{why})",
            p.display()
        );
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::scan_for_snapshots;

    #[test]
    fn snapshot_scan_reads_blocks_and_their_seams() {
        // 32-bit words; a block is 1 MiB, 262144 words. USER_STACK's escape word ends block 1.
        let mut w = vec![0u32; 262143];
        w.extend([!0, 33, 0]);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert!(scan_for_snapshots(&mut std::io::Cursor::new(&bytes), 4).unwrap());
        // The same words with another escape code, and a stream shorter than a block.
        let other: Vec<u8> = bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| if i == 262144 * 4 { 8 } else { b })
            .collect();
        assert!(!scan_for_snapshots(&mut std::io::Cursor::new(&other), 4).unwrap());
        let short: Vec<u8> = [!0u32, 33].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert!(scan_for_snapshots(&mut std::io::Cursor::new(&short), 4).unwrap());
        assert!(!scan_for_snapshots(&mut std::io::Cursor::new(&short[..4]), 4).unwrap());
    }
}
