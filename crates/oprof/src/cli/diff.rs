//! `oprof diff A B`: two profiles compared per image or symbol.

use super::{emit, emit_json};
use crate::input::inputs::{Inputs, Want};
use crate::view::{diff, report};
use anyhow::Result;
use std::collections::BTreeSet;
use std::path::PathBuf;

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
    /// Word size in bytes of both streams (default: the sessions', else 4).
    #[arg(long)]
    word_size: Option<usize>,
    /// The `backtrace_depth` both streams were recorded with (see `oprof report
    /// --backtrace-depth`).
    #[arg(long, value_name = "FRAMES")]
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
}

/// The report of one side and (its path, its cpu_type) for the comparison.
fn load(i: Inputs) -> Result<(report::Report, (String, Option<String>))> {
    let mut p = i.load(Want::default())?;
    let r = report::build_counts(
        &p.counts,
        &mut p.res,
        &p.counters,
        report::Options::default(),
    );
    Ok((r, (p.path.display().to_string(), p.cpu_type)))
}

/// Prints the comparison (table or JSON); both sides' notes once each on stderr. Errors: as
/// [`Inputs::load`] and [`diff::build`] (other cpu_type, other events).
pub fn run(a: &Args) -> Result<()> {
    let (ra, sa) = load(a.inputs(Side::A))?;
    let (rb, sb) = load(a.inputs(Side::B))?;
    for w in ra
        .warnings
        .iter()
        .chain(&rb.warnings)
        .collect::<BTreeSet<_>>()
    {
        eprintln!("oprof: note: {w}");
    }
    let d = diff::build(&ra, &rb, sa, sb, a.symbols)?;
    if a.json {
        emit_json(&d)
    } else {
        emit(&diff::render(&d, a.limit))
    }
}
