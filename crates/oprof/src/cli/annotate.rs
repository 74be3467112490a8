//! `oprof annotate`: source lines and instructions of sampled functions with their samples.

use super::{emit, emit_json};
use crate::aggregate::inputs::{Inputs, Want};
use crate::resolve;
use crate::view::annotate;
use crate::view::printable::Printable;
use anyhow::Result;
use std::path::PathBuf;

/// `oprof annotate` options.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    inputs: Inputs,
    /// Do not ask the debuginfod servers of DEBUGINFOD_URLS for missing debug files (asked
    /// by build-id after the local places; only http:// servers; cached as elfutils does).
    #[arg(long)]
    no_debuginfod: bool,
    /// Only this function (its name as `oprof report -l` shows it).
    #[arg(long, short = 's')]
    symbol: Option<String>,
    /// Only functions of this image (the report's image name, or its basename).
    #[arg(long)]
    image: Option<String>,
    /// Show the source lines (an error for images without DWARF).
    #[arg(long)]
    source: bool,
    /// Show the instructions.
    #[arg(long)]
    assembly: bool,
    /// Only functions with at least this % of all samples (opannotate --threshold).
    #[arg(long, short = 't', default_value_t = 0.0, value_name = "PCT")]
    threshold: f64,
    /// Mark lines and instructions with at least this % of their function's samples.
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    hot: f64,
    /// Annotate at most this many functions, hottest first (0: all).
    #[arg(long, short = 'n', default_value_t = 0)]
    limit: usize,
    /// Directory to find source files in when the DWARF's path does not exist here
    /// (tried as DIR/PATH, then DIR/BASENAME). Repeatable.
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The view's options: neither `--source` nor `--assembly` means both.
    fn options(&self) -> annotate::Options {
        let both = !self.source && !self.assembly;
        annotate::Options {
            symbol: self.symbol.clone(),
            image: self.image.clone(),
            source: self.source || both,
            assembly: self.assembly || both,
            threshold: self.threshold,
            hot: self.hot,
            limit: self.limit,
            source_dirs: self.source_dirs.clone(),
        }
    }
}

/// Prints the annotated functions (text or JSON), notes on stderr. Errors: as
/// [`Inputs::load`] and [`annotate::build`].
pub fn run(a: Args) -> Result<()> {
    if a.no_debuginfod {
        crate::resolve::debuginfod::disable();
    }
    let opts = a.options();
    // The vmlinux's line tables are large: loaded only when kernel code may be annotated.
    let kernel_lines = opts.image.as_deref().is_none_or(|i| i == resolve::VMLINUX);
    let want = Want {
        lines: true,
        kernel_lines,
        keys: Default::default(),
    };
    let mut p = a.inputs.load(want)?;
    let ann = annotate::build(&mut p, &opts)?;
    for w in &ann.warnings {
        eprintln!("oprof: note: {}", Printable(w));
    }
    if a.json {
        emit_json(&ann)
    } else {
        emit(&annotate::render(&ann, &opts))
    }
}
