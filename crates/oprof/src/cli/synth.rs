//! `oprof synth SOURCE OUT --samples N` (hidden): a large stream made of a captured one.

use super::emit;
use crate::input::synth;
use anyhow::Result;
use std::path::PathBuf;

/// `oprof synth` options.
#[derive(clap::Args)]
pub struct Args {
    /// Captured stream whose samples (PCs, images, tasks, CPUs, call chains) are replicated.
    source: PathBuf,
    /// Output stream.
    out: PathBuf,
    /// Samples to write.
    #[arg(long)]
    samples: u64,
    /// Call chains: `recorded` (as captured), `none`, or `min:N` (only the samples with
    /// at least N frames).
    #[arg(long, default_value = "recorded")]
    chains: String,
    /// Word size in bytes of both streams.
    #[arg(long, default_value_t = 4)]
    word_size: usize,
}

/// Writes the stream and prints what it holds: `OUT: N samples, F frames, W words`.
pub fn run(a: &Args) -> Result<()> {
    let chains = synth::parse_chains(&a.chains)?;
    let w = synth::run(&a.source, &a.out, a.samples, chains, a.word_size)?;
    emit(&format!(
        "{}: {} samples, {} frames, {} words\n",
        a.out.display(),
        w.samples,
        w.frames,
        w.words
    ))
}
