//! `oprof points FILE`: the profile-point table, longest total first.

use super::{emit, emit_json};
use crate::input::points;
use crate::view::points::render;
use anyhow::Result;
use std::path::PathBuf;

/// `oprof points` options.
#[derive(clap::Args)]
pub struct Args {
    /// Copy of /dev/oprofile/profile_points, or a kernel log (dmesg) with its `print` output.
    file: PathBuf,
    /// Print JSON (an array of {name, enabled, total_ns, nr, avg_ns}) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Prints the table or JSON. Errors: as [`points::read`].
pub fn run(a: &Args) -> Result<()> {
    let points = points::read(&a.file)?;
    if a.json {
        emit_json(&points)
    } else {
        emit(&render(&points))
    }
}
