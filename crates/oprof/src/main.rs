//! `oprof`: the oprofile-rs tool, for the host and (statically linked) for the target.
//!
//! - `oprof record [-e EVENT]... [-g DEPTH] [-o DIR] [-- CMD ARGS...]` (on the target, as
//!   root): load the module and mount oprofilefs if needed, profile the system while CMD runs (or
//!   until Ctrl-C / `--duration`), write a session directory (`session.rs`).
//! - `oprof decode BUFFER`: print every record of a captured `/dev/oprofile/buffer` stream.
//! - `oprof report [DIR]`: the same on a session directory (default `./oprofile_data`), which
//!   supplies the stream and every file below by itself.
//! - `oprof report BUFFER [--images F] [--proc-modules F --module-sections F] [--vmlinux F]
//!   [--sysroot D] [--image-path D]... [-l] [-g] [-c] [--flame OUT.svg] [--folded]
//!   [--pprof OUT.pb.gz] [--json]`: samples per
//!   image (like `opreport`), per symbol (`-l`), per symbol and source line (`-g`), with a call
//!   graph (`-c`) and a flame graph (`--flame`); a column pair per counter when several counters
//!   sampled (`--counter`).
//! - `oprof events [--cpu-type T]`: the hardware events of a CPU type, like `ophelp`.
//! - `oprof setup --cpu-type T EVENTS`: place events on counters and print the oprofilefs writes.
//! - `oprof kprof VMLINUX KPDATA [--granularity BYTES] [--json] [-n N]`: the kprof kernel PC
//!   histogram (`/dev/oprofile/kprof/kpdata`) per kernel function, like Plan 9's kprof(1).
//! - `oprof points FILE [--json]`: the profile-point table (`/dev/oprofile/profile_points`, or
//!   as logged in dmesg), checked and sorted by total time.

mod aggregate;
mod annotate;
mod callgraph;
mod calls;
mod debugfile;
mod diff;
mod disasm;
mod elf;
mod events;
mod flame;
mod images;
mod inputs;
mod kallsyms;
mod kprof;
mod legacy;
mod percent;
mod points;
mod pprof;
mod record;
mod report;
mod resolve;
mod session;
mod stream;
mod symbols;
mod synth;
mod target;
mod validate;
// The host unwinder of `--call-graph dwarf`-style samples (issue 21); the stream that will carry
// the kernel's register + stack snapshots to it is not there yet.
#[cfg(test)]
mod tests_annotate;
#[cfg(test)]
mod tests_arm;
#[cfg(test)]
mod tests_arm64;
#[cfg(test)]
mod tests_debugfile;
#[cfg(test)]
mod tests_frames;
#[cfg(test)]
mod tests_pprof;
#[cfg(test)]
mod tests_stream;
#[cfg_attr(not(test), allow(dead_code))]
mod unwind;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "oprof",
    version,
    about = "oprofile-rs tool: record on the target, report anywhere"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Profile the system (as root, on the target) and write a session directory.
    ///
    /// Loads oprofile.ko and mounts oprofilefs when needed (and undoes that at the end), sets the
    /// events and buffers, then samples the whole system while CMD runs (its exit status is
    /// oprof's; 127 if not found), or until SIGINT/SIGTERM or --duration without CMD. The buffer
    /// is drained continuously; losses are counted in stats.json and in the summary line.
    /// Writes DIR/{samples, images, proc_modules, module_sections, kallsyms, stats.json,
    /// session.json} (+ kpdata, profile_points, root/). `oprof report DIR` reads it.
    #[command(verbatim_doc_comment)]
    Record(record::RecordArgs),
    /// Run a legacy OProfile 0.9.x command (opcontrol) with `lookup_dcookie` served from
    /// /dev/oprofile/images (a seccomp supervisor; Documentation/legacy-client.rst).
    Legacy(legacy::LegacyArgs),
    /// Print every record of a buffer stream with its byte offset.
    ///
    /// A stream that is not as the module writes one is refused (exit status 2) with the byte
    /// offset of its first bad word, as by `report`; --force prints the records around the bad
    /// ones and a `skipped` line for each range it skipped.
    #[command(verbatim_doc_comment)]
    Decode {
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
    },
    /// Attribute samples to images, symbols and source lines; call graph and flame graph.
    ///
    /// Images: `vmlinux` (kernel PCs in its text), `NAME.ko` (kernel modules: symbols from the
    /// .ko found in --image-path and placed at the addresses of --module-sections; otherwise by
    /// the --proc-modules range, "(no symbols)"), `(kernel, unknown)` (other kernel PCs), the
    /// target path of a user image, without " (deleted)" (file offsets are mapped through the ELF's PT_LOAD headers;
    /// "(image not found)" when no host copy is found, "(no symbols)" when it has none,
    /// "(unreadable: REASON)" when it does not parse), `[anon] (APP)` (anonymous memory) and
    /// `(no context)` (samples before the first kernel/user switch). Names are demangled (Rust,
    /// C++). Call-chain frames are looked up at their return address - 1 (the call), unless the
    /// return address starts a function that code reaches without a call (ARM's syscall return
    /// `ret_fast_syscall`: the instruction before it is no call), and never count as samples. Notes about missing files go to stderr (and `warnings` in --json).
    ///
    /// On a session directory (`oprof record -o DIR`; the default) every input comes from it:
    /// samples, images, proc_modules, module_sections, the counters and word size of
    /// session.json; kernel symbols from its kallsyms when no --vmlinux is given; user images and
    /// .ko files from DIR/root (--archive), then --sysroot, then / when run on the system that
    /// recorded. Options given explicitly take precedence.
    #[command(verbatim_doc_comment)]
    Report {
        #[command(flatten)]
        inputs: inputs::Inputs,
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
        /// .gnu_debuglink or MiniDebugInfo, or the image itself) and how it was found (JSON
        /// has it always: `debug_file`, `debug_found_by` per image).
        #[arg(short = 'v', long)]
        verbose: bool,
        /// Show at most this many rows (0: all); also call graph entries.
        #[arg(long, short = 'n', default_value_t = 0)]
        limit: usize,
    },
    /// Source lines and instructions of sampled functions with their samples, like opannotate.
    ///
    /// A sample counts for the instruction at its PC and for that instruction's source line
    /// (innermost inlined position). Code comes from the host copy of the image (as for
    /// `report`), disassembled with capstone: ARM and Thumb-2 as the image's mapping symbols
    /// ($a/$t/$d) say, AArch64, x86-64. Source files are read where the DWARF says, else in
    /// --source-dir. Without --source/--assembly both are shown, instructions interleaved with
    /// their source lines. `*` marks lines and instructions with at least --hot % of their
    /// function's samples.
    #[command(verbatim_doc_comment)]
    Annotate {
        #[command(flatten)]
        inputs: inputs::Inputs,
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
    },
    /// Compare two profiles: per image (or symbol, -l) the share of each session's samples and
    /// the delta, largest change first, like perf diff.
    ///
    /// A and B are session directories or streams; a stream's images, modules and sections
    /// come from the --a-*/--b-* options. Both must be of one cpu_type and count the same events.
    #[command(verbatim_doc_comment)]
    Diff {
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
    },
    /// Write a stream of N samples made of a captured stream's samples, round and round
    /// (benchmarks of `oprof report`; see crates/oprof/src/synth.rs).
    #[command(hide = true)]
    Synth {
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
    },
    /// Place events on counters (like opcontrol) and print the oprofilefs writes as shell lines.
    Setup {
        /// CPU type, e.g. arm/armv7 (default: /dev/oprofile/cpu_type of this machine).
        #[arg(long)]
        cpu_type: Option<String>,
        /// Events, `NAME[:COUNT[:UNITMASK[:KERNEL[:USER]]]],...` (opcontrol syntax); COUNT 0
        /// counts without sampling (see N/total).
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
    /// Kernel ticks per function from a kprof histogram, like Plan 9's kprof(1).
    ///
    /// Counts are clock ticks (the module's kprof_hz, all CPUs), not ms. Each non-zero slot
    /// counts for the function containing its start address; "(no symbol)" when none does.
    #[command(verbatim_doc_comment)]
    Kprof {
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
    },
    /// Check and print the profile-point table, longest total first.
    Points {
        /// Copy of /dev/oprofile/profile_points, or a kernel log (dmesg) with its `print` output.
        file: PathBuf,
        /// Print JSON (an array of {name, enabled, total_ns, nr, avg_ns}) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write oprof's man pages or a shell completion script (used by `make install`).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
}

#[derive(Subcommand)]
enum Generate {
    /// Man pages (section 1): oprof.1 and oprof-SUBCOMMAND.1 for each subcommand, into DIR.
    Man {
        /// Directory to write the pages to (created if missing).
        dir: PathBuf,
    },
    /// A completion script for SHELL on stdout.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// Writes the man pages of `cmd` and of each visible subcommand into `dir` (`clap_mangen`).
fn write_man_pages(cmd: &clap::Command, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pages = vec![(cmd.get_name().to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut out)
            .with_context(|| format!("rendering {name}.1"))?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Writes `s` to stdout; a closed pipe (`oprof decode BUF | head`) ends the program quietly.
fn emit(s: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.context("writing to stdout"),
    }
}

fn main() {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = match run(Cli::parse(), &argv) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("oprof: error: {e:#}");
            match e.downcast_ref::<record::Failed>() {
                Some(f) => f.code,
                None if e.downcast_ref::<validate::Invalid>().is_some() => 2,
                None => 1,
            }
        }
    };
    std::process::exit(code);
}

/// Runs a command; returns the exit status.
fn run(cli: Cli, argv: &[String]) -> Result<i32> {
    match cli.cmd {
        Cmd::Record(args) => return record::run(&args, argv),
        Cmd::Legacy(args) => return legacy::run(&args),
        Cmd::Generate {
            what: Generate::Man { dir },
        } => {
            use clap::CommandFactory;
            write_man_pages(&Cli::command(), &dir)?;
        }
        Cmd::Generate {
            what: Generate::Completions { shell },
        } => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "oprof", &mut out);
            emit(&String::from_utf8_lossy(&out))?;
        }
        Cmd::Decode {
            buffer,
            word_size,
            cpu_type,
            force,
        } => {
            let model = cpu_type
                .as_deref()
                .map(|t| events::model(Some(t)))
                .transpose()?;
            let limits = validate::Limits::bare(word_size, model);
            let (text, note) = stream::listing(&buffer, &limits, force)?;
            if let Some(n) = note {
                eprintln!("oprof: note: {n}");
            }
            emit(&text)?;
        }
        Cmd::Synth {
            source,
            out,
            samples,
            chains,
            word_size,
        } => {
            let w = synth::run(
                &source,
                &out,
                samples,
                synth::parse_chains(&chains)?,
                word_size,
            )?;
            emit(&format!(
                "{}: {} samples, {} frames, {} words\n",
                out.display(),
                w.samples,
                w.frames,
                w.words
            ))?;
        }
        Cmd::Setup {
            cpu_type,
            events: spec,
            dir,
            report_args,
        } => {
            let Some(model) = events::model(cpu_type.as_deref())? else {
                anyhow::bail!("cpu_type timer has no counters to set up");
            };
            let placed = events::place(model, &spec)?;
            if report_args {
                let args: Vec<String> = placed
                    .iter()
                    .map(|p| format!("--counter {}:{}:{}", p.counter, p.event.name, p.count))
                    .collect();
                emit(&format!("--cpu-type {} {}\n", model.name(), args.join(" ")))?;
            } else {
                emit(&events::setup_script(model, &placed, &dir))?;
            }
        }
        Cmd::Events {
            cpu_type,
            list_types,
        } => {
            if list_types {
                emit(&events::list_types())?;
            } else {
                emit(&events::render(events::model(cpu_type.as_deref())?))?;
            }
        }
        Cmd::Kprof {
            vmlinux,
            kpdata,
            granularity,
            json,
            limit,
        } => {
            let p = kprof::run(&vmlinux, &kpdata, granularity)?;
            if json {
                emit(&(serde_json::to_string_pretty(&p)? + "\n"))?;
            } else {
                emit(&kprof::render(&p, limit))?;
            }
        }
        Cmd::Points { file, json } => {
            let points = points::read(&file)?;
            if json {
                emit(&(serde_json::to_string_pretty(&points)? + "\n"))?;
            } else {
                emit(&points::render(&points))?;
            }
        }
        Cmd::Annotate {
            inputs,
            symbol,
            image,
            source,
            assembly,
            threshold,
            hot,
            limit,
            source_dirs,
            json,
        } => {
            let both = !source && !assembly;
            let opts = annotate::Options {
                symbol,
                image,
                source: source || both,
                assembly: assembly || both,
                threshold,
                hot,
                limit,
                source_dirs,
            };
            // The vmlinux's line tables are large: loaded only when kernel code may be annotated.
            let kernel_lines = opts.image.as_deref().is_none_or(|i| i == resolve::VMLINUX);
            let want = inputs::Want {
                lines: true,
                kernel_lines,
                keys: Default::default(),
            };
            let mut p = inputs.load(want)?;
            let a = annotate::build(&mut p, &opts)?;
            for w in &a.warnings {
                eprintln!("oprof: note: {w}");
            }
            if json {
                emit(&(serde_json::to_string_pretty(&a)? + "\n"))?;
            } else {
                emit(&annotate::render(&a, &opts))?;
            }
        }
        Cmd::Diff {
            a,
            b,
            a_images,
            b_images,
            a_proc_modules,
            b_proc_modules,
            a_module_sections,
            b_module_sections,
            vmlinux,
            sysroot,
            image_path,
            debug_dirs,
            word_size,
            backtrace_depth,
            cpu_type,
            force,
            symbols,
            json,
            limit,
        } => {
            let side = |buffer: PathBuf, images, proc_modules, module_sections| inputs::Inputs {
                buffer: Some(buffer),
                images,
                proc_modules,
                module_sections,
                vmlinux: vmlinux.clone(),
                sysroot: sysroot.clone(),
                image_path: image_path.clone(),
                debug_dirs: debug_dirs.clone(),
                word_size,
                backtrace_depth,
                counters: vec![],
                cpu_type: cpu_type.clone(),
                force,
            };
            let load = |i: inputs::Inputs| -> Result<(report::Report, (String, Option<String>))> {
                let mut p = i.load(inputs::Want::default())?;
                let r = report::build_counts(
                    &p.counts,
                    &mut p.res,
                    &p.counters,
                    report::Options::default(),
                );
                Ok((r, (p.path.display().to_string(), p.cpu_type)))
            };
            let (ra, sa) = load(side(a, a_images, a_proc_modules, a_module_sections))?;
            let (rb, sb) = load(side(b, b_images, b_proc_modules, b_module_sections))?;
            for w in ra
                .warnings
                .iter()
                .chain(&rb.warnings)
                .collect::<std::collections::BTreeSet<_>>()
            {
                eprintln!("oprof: note: {w}");
            }
            let d = diff::build(&ra, &rb, sa, sb, symbols)?;
            if json {
                emit(&(serde_json::to_string_pretty(&d)? + "\n"))?;
            } else {
                emit(&diff::render(&d, limit))?;
            }
        }
        Cmd::Report {
            inputs,
            symbols,
            debug_info,
            callgraph,
            flame,
            folded,
            pprof,
            json,
            verbose,
            limit,
        } => {
            let opts = report::Options {
                lines: debug_info,
                flame: flame.is_some() || folded,
            };
            // pprof locations carry source lines wherever the images have DWARF.
            let want = inputs::Want {
                lines: debug_info || pprof.is_some(),
                kernel_lines: debug_info,
                keys: aggregate::Options {
                    app: opts.flame,
                    task: pprof.is_some(),
                },
            };
            let p = inputs.load(want)?;
            let inputs::Profile {
                path,
                session: ses,
                counters,
                counts,
                mut res,
                skipped,
                ..
            } = p;
            let mut r = report::build_counts(&counts, &mut res, &counters, opts);
            r.skipped = skipped;
            for w in &r.warnings {
                eprintln!("oprof: note: {w}");
            }
            if let Some(out) = &pprof {
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
            if json {
                emit(&(serde_json::to_string_pretty(&r)? + "\n"))?;
            } else if folded {
                emit(&r.folded.text())?;
            } else {
                if let Some(s) = &ses {
                    emit(&report::render_session(&path, &s.info))?;
                }
                let view = if symbols || debug_info || callgraph {
                    report::View::Symbols
                } else {
                    report::View::Images
                };
                let mut out = report::render(&r, view, limit);
                if verbose {
                    out.push('\n');
                    out.push_str(&report::render_debug_files(&r));
                }
                if callgraph {
                    out.push('\n');
                    out.push_str(&report::render_callgraph(&r, limit));
                }
                emit(&out)?;
            }
            if let Some(out) = &flame {
                let title = format!(
                    "oprof: {}",
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                r.folded.write_svg_file(&title, out)?;
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod cli_tests {
    use super::*;
    use oprofile_common::event::Record;

    #[test]
    fn man_pages_and_completions_from_the_cli() {
        use clap::CommandFactory;
        let dir = tempfile::tempdir().unwrap();
        write_man_pages(&Cli::command(), dir.path()).unwrap();
        for page in ["oprof", "oprof-record", "oprof-report", "oprof-kprof"] {
            let text = std::fs::read_to_string(dir.path().join(format!("{page}.1"))).unwrap();
            assert!(
                text.contains(".TH") && text.contains(page),
                "{page}.1: {text:.200}"
            );
        }
        assert!(
            !dir.path().join("oprof-generate.1").exists(),
            "hidden subcommand has no page"
        );
        let record = std::fs::read_to_string(dir.path().join("oprof-record.1")).unwrap();
        assert!(
            record.contains("callgraph") && record.contains("archive"),
            "{record:.400}"
        );
        let mut out = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "oprof",
            &mut out,
        );
        let bash = String::from_utf8(out).unwrap();
        assert!(
            bash.contains("_oprof()") && bash.contains("record") && bash.contains("--callgraph")
        );
    }

    fn report(args: &[&str]) -> Result<()> {
        let mut v = vec!["oprof", "report"];
        v.extend_from_slice(args);
        run(Cli::try_parse_from(v)?, &[]).map(|_| ())
    }

    #[test]
    fn report_inputs_are_checked_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        let st = stream::tests::stream(&[
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 1,
                tgid: 1,
                app_cookie: 1,
            },
            Record::KernelExit,
            Record::CookieSwitch { cookie: 1 },
            Record::Sample { pc: 0x10, event: 0 },
        ]);
        let bytes: Vec<u8> = st
            .words
            .iter()
            .flat_map(|&w| (w as u32).to_le_bytes())
            .collect();
        std::fs::write(p("buf"), bytes).unwrap();
        std::fs::write(p("images"), "1 /bin/app\nbogus\n").unwrap();
        std::fs::write(p("good-images"), "1 /bin/app\n").unwrap();
        std::fs::write(p("pm"), "m 10 0 - Live\n").unwrap();
        let err = |args: &[&str]| format!("{:#}", report(args).unwrap_err());
        let e = err(&[&p("buf"), "--images", &p("nope")]);
        assert!(
            e.contains(&format!("reading images file {}", p("nope"))),
            "{e}"
        );
        let e = err(&[&p("buf"), "--images", &p("images")]);
        assert!(
            e.contains(&format!("{}:2: expected `ID PATH`", p("images"))),
            "{e}"
        );
        let e = err(&[&p("buf"), "--vmlinux", &p("nope")]);
        assert!(e.contains(&p("nope")) && e.contains("cannot read"), "{e}");
        let e = err(&[&p("buf"), "--vmlinux", &p("good-images")]);
        assert!(
            e.contains(&p("good-images")) && e.contains("not an ELF file"),
            "{e}"
        );
        let e = err(&[&p("buf"), "--proc-modules", &p("pm")]);
        assert!(e.contains(&format!("{}:1: expected", p("pm"))), "{e}");
        let e = err(&[&p("buf"), "--image-path", &p("nodir")]);
        assert!(e.contains("not a directory"), "{e}");
        // A report with every view and a flame graph runs; a missing image is a row, not an error.
        report(&[
            &p("buf"),
            "--images",
            &p("good-images"),
            "-l",
            "-g",
            "-c",
            "--flame",
            &p("f.svg"),
        ])
        .unwrap();
        let svg = std::fs::read_to_string(p("f.svg")).unwrap();
        assert!(
            svg.contains("app") && svg.contains("(image not found)"),
            "flame graph frames"
        );
        report(&[&p("buf"), "--json", "-n", "1"]).unwrap();
    }
}
