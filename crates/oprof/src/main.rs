//! `oprof`: the oprofile-rs host tool.
//!
//! - `oprof decode BUFFER`: print every record of a captured `/dev/oprofile/buffer` stream.
//! - `oprof report BUFFER --vmlinux VMLINUX`: samples per image and symbol, like `opreport -l`.

mod report;
mod stream;
mod symbols;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "oprof", version, about = "oprofile-rs host tool")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every record of a buffer stream with its byte offset.
    Decode {
        /// Captured stream (bytes read from /dev/oprofile/buffer).
        buffer: PathBuf,
        /// Word size in bytes: the target's /dev/oprofile/pointer_size (4 on ARM32).
        #[arg(long, default_value_t = 4)]
        word_size: usize,
    },
    /// Attribute samples to images and symbols.
    Report {
        /// Captured stream (bytes read from /dev/oprofile/buffer).
        buffer: PathBuf,
        /// Kernel image with symbols, for kernel samples.
        #[arg(long)]
        vmlinux: Option<PathBuf>,
        /// Word size in bytes: the target's /dev/oprofile/pointer_size (4 on ARM32).
        #[arg(long, default_value_t = 4)]
        word_size: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Show at most this many rows (0: all).
        #[arg(long, short = 'n', default_value_t = 0)]
        limit: usize,
    },
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("oprof: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Decode { buffer, word_size } => {
            let st = stream::Stream::read(&buffer, word_size)?;
            let mut out = String::new();
            stream::walk(&st, |off, rec, _| {
                out.push_str(&format!("{off:>8}: {rec:x?}\n"));
            })
            .with_context(|| format!("decoding {}", buffer.display()))?;
            print!("{out}");
        }
        Cmd::Report { buffer, vmlinux, word_size, json, limit } => {
            let st = stream::Stream::read(&buffer, word_size)?;
            let syms = vmlinux.as_deref().map(symbols::SymbolTable::from_elf).transpose()?;
            if let (Some(t), Some(p)) = (&syms, &vmlinux) {
                anyhow::ensure!(!t.is_empty(), "{}: no function symbols (stripped?)", p.display());
            }
            let r = report::build(&st, syms.as_ref())
                .with_context(|| format!("decoding {}", buffer.display()))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", report::render(&r, limit));
            }
        }
    }
    Ok(())
}
