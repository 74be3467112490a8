//! `oprof report`: samples per image, symbol and source line; call graph, flame graph, pprof.

use super::{emit, emit_json};
use crate::aggregate;
use crate::aggregate::inputs::{Inputs, Profile, Want};
use crate::view::printable::Printable;
use crate::view::{pprof, report};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// `oprof report` options.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    inputs: Inputs,
    /// Do not ask the debuginfod servers of DEBUGINFOD_URLS for missing debug files (asked
    /// by build-id after the local places; only http:// servers; cached as elfutils does).
    #[arg(long)]
    no_debuginfod: bool,
    /// Show samples per symbol (like opreport -l) instead of per image.
    #[arg(short = 'l', long = "symbols")]
    symbols: bool,
    /// One row per symbol and source line (implies -l): a `source` column `file:line`
    /// (innermost inlined position of the sampled address, from the image's DWARF),
    /// "(no line info)" when the DWARF does not cover the address, "(no debug info)" for
    /// images without DWARF. JSON rows get `source` {file, line, display}.
    #[arg(short = 'g', long = "debug-info")]
    debug_info: bool,
    /// After the symbol table (implies -l), print the call graph of traced samples: each
    /// symbol (hottest first, -n of them) with its callers and callees.
    #[arg(short = 'c', long = "callgraph")]
    callgraph: bool,
    /// Write a flame graph SVG: stacks rooted at the task's executable (`[kernel]` for
    /// kernel threads), callers outermost first, the sampled symbol on top.
    #[arg(long, value_name = "OUT.svg")]
    flame: Option<PathBuf>,
    /// Print folded stacks instead of the table: one line per distinct stack, `ROOT;CALLER;...;SYMBOL COUNT`
    /// (the frames of --flame, outermost first), the input of flamegraph.pl, inferno and
    /// speedscope.
    #[arg(long, conflicts_with = "json")]
    folded: bool,
    /// Also write the profile in pprof format (profile.proto, gzip'd) for `go tool pprof`,
    /// Pyroscope or Parca: per counter a samples type and, with a known period, an events
    /// type; call stacks, addresses, source lines where the images have DWARF, mappings with
    /// build ids, labels cpu/pid/tid.
    #[arg(long, value_name = "OUT.pb.gz")]
    pprof: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also print which file named each image (its separate debug file found by build-id,
    /// .gnu_debuglink, debuginfod or MiniDebugInfo, or the image itself) and how it was found (JSON
    /// has it always: `debug_file`, `debug_found_by` per image).
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Show at most this many rows (0: all); also call graph entries.
    #[arg(long, short = 'n', default_value_t = 0)]
    limit: usize,
}

impl Args {
    /// The report's options: source lines for `-g`, folded stacks for `--flame`/`--folded`.
    fn options(&self) -> report::Options {
        report::Options {
            lines: self.debug_info,
            flame: self.flame.is_some() || self.folded,
        }
    }

    /// What to read of the inputs. pprof locations carry source lines wherever the images
    /// have DWARF.
    fn want(&self) -> Want {
        Want {
            lines: self.debug_info || self.pprof.is_some(),
            kernel_lines: self.debug_info,
            keys: aggregate::Options {
                app: self.options().flame,
                task: self.pprof.is_some(),
            },
        }
    }

    /// The table printed: symbols for `-l`, `-g` and `-c`, else images.
    fn view(&self) -> report::View {
        if self.symbols || self.debug_info || self.callgraph {
            report::View::Symbols
        } else {
            report::View::Images
        }
    }
}

/// Prints the report (table, JSON or folded stacks; notes on stderr) and writes the
/// `--pprof` and `--flame` files. Errors: as [`Inputs::load`], and writing the files.
pub fn run(a: Args) -> Result<()> {
    if a.no_debuginfod {
        crate::resolve::debuginfod::disable();
    }
    let want = a.want();
    let Profile {
        path,
        session: ses,
        counters,
        counts,
        mut res,
        skipped,
        ..
    } = a.inputs.load(want)?;
    let mut r = report::build_counts(&counts, &mut res, &counters, a.options());
    r.skipped = skipped;
    for w in &r.warnings {
        eprintln!("oprof: note: {}", Printable(w));
    }
    if let Some(out) = &a.pprof {
        let meta = pprof::Meta {
            comment: ses.as_ref().map(|s| {
                report::render_session(&path, &s.info)
                    .trim_end()
                    .to_string()
            }),
            duration_ns: ses.as_ref().map_or(0, |s| s.info.duration_ns),
        };
        pprof::write_file(&pprof::build(&counts, &mut res, &counters, &meta), out)?;
    }
    if a.json {
        emit_json(&r)?;
    } else if a.folded {
        emit(&r.folded.text())?;
    } else {
        if let Some(s) = &ses {
            emit(&report::render_session(&path, &s.info))?;
        }
        emit(&tables(&a, &r))?;
    }
    if let Some(out) = &a.flame {
        r.folded.write_svg_file(&flame_title(&path), out)?;
    }
    Ok(())
}

/// The text tables: images or symbols, then the debug files (`-v`) and the call graph (`-c`).
fn tables(a: &Args, r: &report::Report) -> String {
    let mut out = report::render(r, a.view(), a.limit);
    if a.verbose {
        out.push('\n');
        out.push_str(&report::render_debug_files(r));
    }
    if a.callgraph {
        out.push('\n');
        out.push_str(&report::render_callgraph(r, a.limit));
    }
    out
}

/// The flame graph's title: `oprof: ` and the session's (or stream's) file name.
fn flame_title(path: &Path) -> String {
    format!(
        "oprof: {}",
        path.file_name().unwrap_or_default().to_string_lossy()
    )
}
