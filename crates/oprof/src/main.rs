//! `oprof`: the oprofile-rs host tool.
//!
//! - `oprof decode BUFFER`: print every record of a captured `/dev/oprofile/buffer` stream.
//! - `oprof report BUFFER --vmlinux VMLINUX`: samples per image and symbol, like `opreport -l`,
//!   with a column pair per counter when several counters sampled (`--counter`).
//! - `oprof events [--cpu-type T]`: the hardware events of a CPU type, like `ophelp`.
//! - `oprof setup --cpu-type T EVENTS`: place events on counters and print the oprofilefs writes.

mod events;
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
        /// What a counter counted, `COUNTER:EVENT[:COUNT]` (event by name or number), as written
        /// to /dev/oprofile/COUNTER/{event,count}; repeat per counter. Names columns.
        #[arg(long = "counter", value_name = "N:EVENT[:COUNT]")]
        counters: Vec<String>,
        /// CPU type the counters' events belong to (checks and names `--counter` events).
        #[arg(long)]
        cpu_type: Option<String>,
    },
    /// Place events on counters (like opcontrol) and print the oprofilefs writes as shell lines.
    Setup {
        /// CPU type, e.g. arm/armv7 (default: /dev/oprofile/cpu_type of this machine).
        #[arg(long)]
        cpu_type: Option<String>,
        /// Events, `NAME[:COUNT],...`; COUNT 0 counts without sampling (see N/total).
        events: String,
        /// oprofilefs mount point.
        #[arg(long, default_value = "/dev/oprofile")]
        dir: String,
        /// Print the matching `oprof report --counter` arguments instead.
        #[arg(long)]
        report_args: bool,
    },
    /// List the hardware events of a CPU type, like ophelp.
    Events {
        /// CPU type, e.g. arm/armv7 (default: /dev/oprofile/cpu_type of this machine).
        #[arg(long)]
        cpu_type: Option<String>,
        /// List the known CPU types instead.
        #[arg(long)]
        list_types: bool,
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
        Cmd::Setup { cpu_type, events: spec, dir, report_args } => {
            let Some(model) = events::model(cpu_type.as_deref())? else {
                anyhow::bail!("cpu_type timer has no counters to set up");
            };
            let placed = events::place(model, &spec)?;
            if report_args {
                let args: Vec<String> = placed
                    .iter()
                    .map(|p| format!("--counter {}:{}:{}", p.counter, p.event.name, p.count))
                    .collect();
                println!("--cpu-type {} {}", model.name(), args.join(" "));
            } else {
                print!("{}", events::setup_script(model, &placed, &dir));
            }
        }
        Cmd::Events { cpu_type, list_types } => {
            if list_types {
                print!("{}", events::list_types());
            } else {
                print!("{}", events::render(events::model(cpu_type.as_deref())?));
            }
        }
        Cmd::Report { buffer, vmlinux, word_size, json, limit, counters, cpu_type } => {
            let model = match &cpu_type {
                Some(t) => events::model(Some(t))?,
                None => None,
            };
            let counters = counters
                .iter()
                .map(|c| report::Counter::parse(c, model))
                .collect::<Result<Vec<_>>>()?;
            let st = stream::Stream::read(&buffer, word_size)?;
            let syms = vmlinux.as_deref().map(symbols::SymbolTable::from_elf).transpose()?;
            if let (Some(t), Some(p)) = (&syms, &vmlinux) {
                anyhow::ensure!(!t.is_empty(), "{}: no function symbols (stripped?)", p.display());
            }
            let r = report::build(&st, syms.as_ref(), &counters)
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
