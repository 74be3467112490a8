//! `oprof decode BUFFER`: every record of a captured stream with its byte offset.

use super::emit;
use crate::input::events;
use crate::input::validate;
use crate::view::listing;
use crate::view::printable::Printable;
use anyhow::Result;
use std::path::PathBuf;

/// `oprof decode` options.
#[derive(clap::Args)]
pub struct Args {
    /// Captured stream (bytes read from /dev/oprofile/buffer).
    buffer: PathBuf,
    /// Word size in bytes: the target's /dev/oprofile/pointer_size (4 on ARM32, 8 on arm64).
    #[arg(long, default_value_t = 4)]
    word_size: usize,
    /// CPU type of the stream: bounds the counters its samples may name (default: any
    /// CPU type's).
    #[arg(long)]
    cpu_type: Option<String>,
    /// Print what can be decoded of a bad stream, skipping from each bad record to the
    /// next sync pass (see `oprof report --force`).
    #[arg(long)]
    force: bool,
}

/// Prints the listing on stdout and a note about skipped words on stderr. Errors: a bad stream
/// without `--force` ([`validate::Invalid`]), an unknown `--cpu-type`, an unreadable file.
pub fn run(a: &Args) -> Result<()> {
    let model = a
        .cpu_type
        .as_deref()
        .map(|t| events::model(Some(t)))
        .transpose()?;
    let limits = validate::Limits::bare(a.word_size, model);
    let (text, note) = listing::listing(&a.buffer, &limits, a.force)?;
    if let Some(n) = note {
        eprintln!("oprof: note: {}", Printable(&n));
    }
    emit(&text)
}
