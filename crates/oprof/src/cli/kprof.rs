//! `oprof kprof VMLINUX KPDATA`: kernel ticks per function.

use super::{emit, emit_json};
use crate::view::kprof;
use anyhow::Result;
use std::path::PathBuf;

/// `oprof kprof` options.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel image with symbols (_stext, _etext and functions) the histogram was taken on.
    vmlinux: PathBuf,
    /// Copy of /dev/oprofile/kprof/kpdata.
    kpdata: PathBuf,
    /// Bytes per slot (a power of two); default: inferred from the slot count and the text size.
    #[arg(long, value_name = "BYTES")]
    granularity: Option<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Show at most this many rows in the table (0: all); JSON has every row.
    #[arg(long, short = 'n', default_value_t = 0)]
    limit: usize,
}

/// Prints the table or JSON. Errors: as [`kprof::run`].
pub fn run(a: &Args) -> Result<()> {
    let p = kprof::run(&a.vmlinux, &a.kpdata, a.granularity)?;
    if a.json {
        emit_json(&p)
    } else {
        emit(&kprof::render(&p, a.limit))
    }
}
