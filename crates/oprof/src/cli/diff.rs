//! `oprof diff A B`: two profiles compared per image or symbol, and as a differential flame
//! graph (`--flame`) or its folded lines (`--folded`).

use super::{emit, emit_json};
use crate::aggregate;
use crate::aggregate::inputs::{Inputs, Profile, Want};
use crate::view::flame::Differential;
use crate::view::printable::Printable;
use crate::view::{diff, report};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `oprof diff` options.
#[derive(clap::Args)]
pub struct Args {
    /// Baseline: session directory or stream.
    a: PathBuf,
    /// Compared with A: session directory or stream.
    b: PathBuf,
    /// Images file of stream A.
    #[arg(long, value_name = "FILE")]
    a_images: Option<PathBuf>,
    /// Images file of stream B.
    #[arg(long, value_name = "FILE")]
    b_images: Option<PathBuf>,
    /// /proc/modules copy of stream A.
    #[arg(long, value_name = "FILE")]
    a_proc_modules: Option<PathBuf>,
    /// /proc/modules copy of stream B.
    #[arg(long, value_name = "FILE")]
    b_proc_modules: Option<PathBuf>,
    /// Module sections of stream A.
    #[arg(long, value_name = "FILE")]
    a_module_sections: Option<PathBuf>,
    /// Module sections of stream B.
    #[arg(long, value_name = "FILE")]
    b_module_sections: Option<PathBuf>,
    /// Kernel image with symbols, for both (default: each session's kallsyms).
    #[arg(long, value_name = "FILE")]
    vmlinux: Option<PathBuf>,
    /// Root of a copy of the target's filesystem, for both.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Directory with host copies of target files, for both. Repeatable.
    #[arg(long = "image-path", value_name = "DIR")]
    image_path: Vec<PathBuf>,
    /// Directory of separate debug files, for both (see `oprof report --debug-dir`).
    /// Repeatable.
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Do not ask the debuginfod servers of DEBUGINFOD_URLS for missing debug files (asked
    /// by build-id after the local places; only http:// servers; cached as elfutils does).
    #[arg(long)]
    no_debuginfod: bool,
    /// Word size in bytes of both streams (default: the sessions', else 4).
    #[arg(long)]
    word_size: Option<usize>,
    /// The `backtrace_depth` both streams were recorded with (see `oprof report
    /// --backtrace-depth`).
    #[arg(long, value_name = "FRAMES", value_parser = crate::aggregate::inputs::depth_arg())]
    backtrace_depth: Option<u64>,
    /// CPU type of both streams (default: the sessions').
    #[arg(long)]
    cpu_type: Option<String>,
    /// Decode streams that are not as the module writes them (see `oprof report --force`).
    #[arg(long)]
    force: bool,
    /// Compare symbols instead of images.
    #[arg(short = 'l', long = "symbols")]
    symbols: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Show at most this many rows (0: all).
    #[arg(long, short = 'n', default_value_t = 0)]
    limit: usize,
    /// Also write a differential flame graph SVG (Brendan Gregg's): B's stacks (the frames of
    /// `oprof report --flame`, matched by name, not address, so two builds compare), each frame
    /// red where its own samples' share grew from A to B and blue where it shrank, deeper for
    /// larger changes; A's counts are scaled to B's total first. Hover shows B's samples and
    /// the change in points of the graph's total.
    #[arg(long, value_name = "OUT.svg")]
    flame: Option<PathBuf>,
    /// Print the differential's folded lines instead of the table: `ROOT;...;SYMBOL A B`, A's
    /// count scaled to B's total (truncated), B's as counted; sorted. The input of
    /// flamegraph.pl and inferno-flamegraph (as difffolded.pl writes it).
    #[arg(long, conflicts_with = "json")]
    folded: bool,
    /// With --flame/--folded: draw A's stacks instead of B's, so code gone in B shows (blue);
    /// red still means more in B. The columns are swapped (`STACK B A`, B scaled to A's
    /// total), as for `flamegraph.pl --negate`.
    #[arg(long)]
    negate: bool,
}

/// One of the two profiles compared.
enum Side {
    A,
    B,
}

impl Args {
    /// The inputs of one side: its stream and files, and the options given for both.
    fn inputs(&self, side: Side) -> Inputs {
        let (buffer, images, proc_modules, module_sections) = match side {
            Side::A => (
                &self.a,
                &self.a_images,
                &self.a_proc_modules,
                &self.a_module_sections,
            ),
            Side::B => (
                &self.b,
                &self.b_images,
                &self.b_proc_modules,
                &self.b_module_sections,
            ),
        };
        Inputs {
            buffer: Some(buffer.clone()),
            images: images.clone(),
            proc_modules: proc_modules.clone(),
            module_sections: module_sections.clone(),
            vmlinux: self.vmlinux.clone(),
            sysroot: self.sysroot.clone(),
            image_path: self.image_path.clone(),
            debug_dirs: self.debug_dirs.clone(),
            word_size: self.word_size,
            backtrace_depth: self.backtrace_depth,
            counters: vec![],
            cpu_type: self.cpu_type.clone(),
            force: self.force,
        }
    }

    /// Whether folded stacks are needed (`--flame`, `--folded`).
    fn stacks(&self) -> bool {
        self.flame.is_some() || self.folded
    }

    /// The word size a side's stream is read with: `--word-size`, else its session's, else 4
    /// (as [`Inputs::load`] chooses it).
    fn word_size(&self, p: &Profile) -> usize {
        self.word_size
            .or(p.session.as_ref().map(|s| s.info.pointer_size))
            .unwrap_or(4)
    }
}

/// One loaded side: its report, (path, cpu_type) for the comparison, and its word size.
struct Loaded {
    report: report::Report,
    side: (String, Option<String>),
    word_size: usize,
}

/// Loads one side; folded stacks (rooted at the task's executable) when `a` draws a flame graph.
fn load(a: &Args, side: Side) -> Result<Loaded> {
    let want = Want {
        keys: aggregate::Options {
            app: a.stacks(),
            task: false,
        },
        ..Want::default()
    };
    let mut p = a.inputs(side).load(want)?;
    let opts = report::Options {
        lines: false,
        flame: a.stacks(),
    };
    let report = report::build_counts(&p.counts, &mut p.res, &p.counters, opts);
    Ok(Loaded {
        report,
        word_size: a.word_size(&p),
        side: (p.path.display().to_string(), p.cpu_type),
    })
}

/// Refuses sides read with different word sizes (a 32-bit and a 64-bit kernel's profile).
fn check_word_sizes(a: &Loaded, b: &Loaded) -> Result<()> {
    if a.word_size != b.word_size {
        bail!(
            "{} has {}-byte words but {} has {}-byte words: compare profiles of one word size",
            a.side.0,
            a.word_size,
            b.side.0,
            b.word_size
        );
    }
    Ok(())
}

/// Prints the comparison (table, JSON or the differential's folded lines) and writes the
/// `--flame` SVG; both sides' notes once each on stderr. Errors: as [`Inputs::load`],
/// [`diff::build`] (other cpu_type, other events), other word sizes, a side without samples
/// for `--flame`/`--folded`, and writing the SVG.
pub fn run(a: &Args) -> Result<()> {
    if a.no_debuginfod {
        crate::resolve::debuginfod::disable();
    }
    if a.negate && !a.stacks() {
        bail!("--negate draws the flame graph of A: give --flame or --folded");
    }
    let la = load(a, Side::A)?;
    let lb = load(a, Side::B)?;
    check_word_sizes(&la, &lb)?;
    let (ra, rb) = (&la.report, &lb.report);
    for w in ra
        .warnings
        .iter()
        .chain(&rb.warnings)
        .collect::<BTreeSet<_>>()
    {
        eprintln!("oprof: note: {}", Printable(w));
    }
    let d = diff::build(ra, rb, la.side.clone(), lb.side.clone(), a.symbols)?;
    let delta = a.stacks().then(|| differential(a, &la, &lb)).transpose()?;
    match &delta {
        Some(x) if a.folded => emit(&x.text())?,
        _ if a.json => emit_json(&d)?,
        _ => emit(&diff::render(&d, a.limit))?,
    }
    if let (Some(out), Some(x)) = (&a.flame, &delta) {
        x.write_svg_file(&flame_title(&la.side.0, &lb.side.0), out)?;
    }
    Ok(())
}

/// The differential of the two sides' folded stacks (see [`Differential`]). Errors: a side
/// without samples, named.
fn differential(a: &Args, la: &Loaded, lb: &Loaded) -> Result<Differential> {
    for l in [la, lb] {
        if l.report.folded.is_empty() {
            bail!("{}: no samples: no differential flame graph", l.side.0);
        }
    }
    Differential::new(&la.report.folded, &lb.report.folded, a.negate)
        .with_context(|| format!("comparing {} with {}", la.side.0, lb.side.0))
}

/// The flame graph's title: `oprof diff: A → B` with the file names of the sessions or streams.
fn flame_title(a: &str, b: &str) -> String {
    let name = |p: &str| {
        Path::new(p)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    format!("oprof diff: {} \u{2192} {}", name(a), name(b))
}
