//! The command line: one module per subcommand, each with its clap `Args` and its `run`;
//! [`run`] dispatches, [`exit_code`] turns an error into the exit status.

mod annotate;
mod decode;
mod diff;
mod events;
mod generate;
mod kprof;
mod points;
mod report;
mod setup;
mod synth;

use crate::input::validate;
use crate::target::legacy::{self, LegacyArgs};
use crate::target::record::{self, RecordArgs};
use crate::view::printable::Printable;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "oprof",
    version,
    about = "oprofile-rs tool: record on the target, report anywhere"
)]
pub struct Cli {
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
    Record(RecordArgs),
    /// Run a legacy OProfile 0.9.x command (opcontrol) with `lookup_dcookie` served from
    /// /dev/oprofile/images (a seccomp supervisor; Documentation/legacy-client.rst).
    Legacy(LegacyArgs),
    /// Print every record of a buffer stream with its byte offset.
    ///
    /// A stream that is not as the module writes one is refused (exit status 2) with the byte
    /// offset of its first bad word, as by `report`; --force prints the records around the bad
    /// ones and a `skipped` line for each range it skipped.
    #[command(verbatim_doc_comment)]
    Decode(decode::Args),
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
    Report(report::Args),
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
    Annotate(annotate::Args),
    /// Compare two profiles: per image (or symbol, -l) the share of each session's samples and
    /// the delta, largest change first, like perf diff.
    ///
    /// A and B are session directories or streams; a stream's images, modules and sections
    /// come from the --a-*/--b-* options. Both must be of one cpu_type and word size and count
    /// the same events. --flame draws a differential flame graph (red: grew in B, blue: shrank).
    #[command(verbatim_doc_comment)]
    Diff(diff::Args),
    /// Write a stream of N samples made of a captured stream's samples, round and round
    /// (benchmarks of `oprof report`; see crates/oprof/src/synth.rs).
    #[command(hide = true)]
    Synth(synth::Args),
    /// Place events on counters (like opcontrol) and print the oprofilefs writes as shell lines.
    Setup(setup::Args),
    /// List the hardware events of a CPU type, like ophelp.
    Events(events::Args),
    /// Kernel ticks per function from a kprof histogram, like Plan 9's kprof(1).
    ///
    /// Counts are clock ticks (the module's kprof_hz, all CPUs), not ms. Each non-zero slot
    /// counts for the function containing its start address; "(no symbol)" when none does.
    #[command(verbatim_doc_comment)]
    Kprof(kprof::Args),
    /// Check and print the profile-point table, longest total first.
    Points(points::Args),
    /// Write oprof's man pages or a shell completion script (used by `make install`).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: generate::Generate,
    },
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

/// Writes `v` to stdout as pretty JSON and a newline.
fn emit_json<T: serde::Serialize>(v: &T) -> Result<()> {
    emit(&(serde_json::to_string_pretty(v)? + "\n"))
}

/// Runs a command; returns the exit status (`oprof record`'s is its command's).
pub fn run(cli: Cli, argv: &[String]) -> Result<i32> {
    match cli.cmd {
        Cmd::Record(args) => return record::run(&args, argv),
        Cmd::Legacy(args) => return legacy::run(&args),
        Cmd::Generate { what } => generate::run(&what)?,
        Cmd::Decode(a) => decode::run(&a)?,
        Cmd::Synth(a) => synth::run(&a)?,
        Cmd::Setup(a) => setup::run(&a)?,
        Cmd::Events(a) => events::run(&a)?,
        Cmd::Kprof(a) => kprof::run(&a)?,
        Cmd::Points(a) => points::run(&a)?,
        Cmd::Annotate(a) => annotate::run(a)?,
        Cmd::Diff(a) => diff::run(&a)?,
        Cmd::Report(a) => report::run(a)?,
    }
    Ok(0)
}

/// Runs `cli` and returns the exit status; an error is printed as `oprof: error: ...` and ends
/// with [`record::Failed`]'s code, 2 for a stream that is not as the module writes one
/// ([`validate::Invalid`]), else 1.
pub fn exit_code(cli: Cli, argv: &[String]) -> i32 {
    match run(cli, argv) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("oprof: error: {}", Printable(&format!("{e:#}")));
            match e.downcast_ref::<record::Failed>() {
                Some(f) => f.code,
                None if e.downcast_ref::<validate::Invalid>().is_some() => 2,
                None => 1,
            }
        }
    }
}

#[cfg(test)]
mod cli_tests {
    use super::*;
    use oprofile_common::event::Record;

    #[test]
    fn man_pages_and_completions_from_the_cli() {
        use clap::CommandFactory;
        let dir = tempfile::tempdir().unwrap();
        generate::write_man_pages(&Cli::command(), dir.path()).unwrap();
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
        let bytes = crate::fixtures::bytes32(&[
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
