//! Separate debug files ([`crate::resolve::debugfile`]) end to end: a Thumb-2 program built with
//! `arm-linux-gnueabihf-gcc -O2 -g -Wl,--build-id` (Debian's defaults), its debug file made with
//! `objcopy --only-keep-debug`, the program stripped with a `.gnu_debuglink`; samples in a
//! stream are named through `Inputs::load` and the report as `oprof report` does. The names and
//! source lines the unstripped program gives are the oracle.

use crate::aggregate::inputs::{Inputs, Want};
use crate::fixtures::stream;
use crate::input::session::Ids;
use crate::input::session::{IMAGES, SAMPLES, SESSION};
use crate::resolve::debugfile;
use crate::resolve::elf::ElfImage;
use crate::tests::programs::session_info;
use crate::view::annotate;
use crate::view::report::{self, Report};
use object::{Object, ObjectSegment, ObjectSymbol};
use oprofile_common::event::Record;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = r#"volatile unsigned int sink;

__attribute__((noinline)) unsigned int hot_a(unsigned int n)
{
	unsigned int x = sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 1103515245u + 12345u;
	return x;
}

__attribute__((noinline)) unsigned int hot_b(unsigned int n)
{
	unsigned int x = sink;

	for (unsigned int i = 0; i < n; i++)
		x ^= x << 7 | i;
	return x;
}

int main(int argc, char **argv)
{
	sink = hot_a(argc) + hot_b(argc);
	return 0;
}
"#;

/// Runs a binutils/gcc command in `dir`; panics with its stderr when it fails.
fn run(dir: &Path, prog: &str, args: &[&str]) {
    let out = Command::new(prog)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{prog} not runnable ({e}): scripts/setup-host.sh installs it"));
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program, its debug file and stripped copies, and what the unstripped build says.
struct Prog {
    dir: tempfile::TempDir,
    /// Unstripped (the oracle).
    full: PathBuf,
    /// `objcopy --only-keep-debug` of `full`.
    debug: PathBuf,
    /// `--strip-all` with `--add-gnu-debuglink=prog.debug`.
    stripped: PathBuf,
    build_id: String,
    /// (function, file offset of a sampled instruction, samples).
    samples: Vec<(&'static str, u64, u32)>,
}

/// Builds `src` as `name` (`-O2 -g -Wl,--build-id`, PIE, Thumb-2) with its debug file
/// `name.debug` and the stripped copy `name.stripped` linking to it.
fn build(src: &str, name: &str) -> Prog {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join(format!("{name}.c")), src).unwrap();
    run(
        d,
        "arm-linux-gnueabihf-gcc",
        &[
            "-O2",
            "-g",
            "-Wl,--build-id",
            "-o",
            name,
            &format!("{name}.c"),
        ],
    );
    let debug = format!("{name}.debug");
    run(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--only-keep-debug", name, &debug],
    );
    let stripped = format!("{name}.stripped");
    run(
        d,
        "arm-linux-gnueabihf-objcopy",
        &[
            "--strip-all",
            &format!("--add-gnu-debuglink={debug}"),
            name,
            &stripped,
        ],
    );
    let full = d.join(name);
    let build_id = Ids::read(&full)
        .and_then(|i| i.build_id)
        .expect("a build-id");
    let samples = vec![
        ("hot_a", offset_in(&full, "hot_a", 4), 3),
        ("hot_b", offset_in(&full, "hot_b", 2), 2),
    ];
    Prog {
        full,
        debug: d.join(debug),
        stripped: d.join(stripped),
        build_id,
        samples,
        dir,
    }
}

/// The file offset of `sym + delta` in `exe`.
fn offset_in(exe: &Path, sym: &str, delta: u64) -> u64 {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let va = (f
        .symbols()
        .find(|s| s.name() == Ok(sym))
        .expect(sym)
        .address()
        & !1)
        + delta;
    let g = f
        .segments()
        .find(|g| va >= g.address() && va - g.address() < g.file_range().1)
        .unwrap();
    va - g.address() + g.file_range().0
}

impl Prog {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Copies `from` to `DIR/rel` (parents created); returns the path.
    fn place(&self, from: &Path, rel: &str) -> PathBuf {
        let to = self.path(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
        to
    }

    /// `usr/lib/debug/.build-id/xx/yyyy.debug` of this program, relative to a root.
    fn build_id_rel(&self) -> String {
        format!(
            "usr/lib/debug/.build-id/{}/{}.debug",
            &self.build_id[..2],
            &self.build_id[2..]
        )
    }

    /// Writes the stream `s.buf` of user samples in image 1 (`/bin/prog`) and its images file.
    fn write_stream(&self) {
        let mut recs = vec![
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 7,
                tgid: 7,
                app_cookie: 1,
            },
            Record::KernelExit,
            Record::CookieSwitch { cookie: 1 },
        ];
        for &(_, off, n) in &self.samples {
            recs.extend((0..n).map(|_| Record::Sample { pc: off, event: 0 }));
        }
        let words = stream(&recs).words;
        std::fs::write(
            self.path("s.buf"),
            words
                .iter()
                .flat_map(|&w| (w as u32).to_le_bytes())
                .collect::<Vec<u8>>(),
        )
        .unwrap();
        std::fs::write(self.path("s.images"), "1 /bin/prog\n").unwrap();
    }

    /// The inputs of the stream with sysroot `root/` and `debug_dirs`.
    fn inputs(&self, debug_dirs: &[PathBuf]) -> Inputs {
        Inputs {
            buffer: Some(self.path("s.buf")),
            images: Some(self.path("s.images")),
            sysroot: Some(self.path("root")),
            debug_dirs: debug_dirs.to_vec(),
            ..Default::default()
        }
    }

    /// `oprof report -g` of the stream.
    fn report(&self, debug_dirs: &[PathBuf]) -> Report {
        let mut p = self
            .inputs(debug_dirs)
            .load(Want {
                lines: true,
                ..Default::default()
            })
            .unwrap();
        report::build_counts(
            &p.counts,
            &mut p.res,
            &p.counters,
            report::Options {
                lines: true,
                flame: false,
            },
        )
    }

    /// Asserts that every sampled function is named with the unstripped build's source line
    /// (with `lines`; else "(no debug info)"), and that `file` found by `how` named the image.
    fn assert_named(&self, r: &Report, file: &Path, how: &str, lines: bool) {
        let oracle = ElfImage::load(&self.full, true).unwrap();
        for &(func, off, n) in &self.samples {
            let va = oracle.offset_to_vaddr(off).unwrap();
            assert_eq!(oracle.symbols.lookup(va).unwrap().name, func, "the oracle");
            let row = r
                .rows
                .iter()
                .find(|x| x.symbol == func)
                .unwrap_or_else(|| panic!("{func}: {:#?}", r.rows));
            assert_eq!(
                (row.image.as_str(), row.samples),
                ("/bin/prog", u64::from(n))
            );
            let src = row.source.as_ref().unwrap();
            if lines {
                let want = oracle.source(va).unwrap();
                assert_eq!(
                    (src.file.as_deref(), src.line),
                    (Some(want.file.as_str()), want.line),
                    "{func}"
                );
                assert!(want.file.ends_with("prog.c") && want.line.is_some());
            } else {
                assert_eq!(src.display, "(no debug info)");
            }
        }
        let img = &r.images[0];
        assert_eq!(
            img.debug_file.as_deref(),
            Some(file.display().to_string().as_str()),
            "{:?}",
            r.warnings
        );
        assert_eq!(img.debug_found_by, Some(how));
    }
}

#[test]
fn debug_files_are_found_in_gdbs_order() {
    let p = build(SRC, "prog");
    p.write_stream();
    let host = p.place(&p.stripped, "root/bin/prog");
    let places = [
        (p.build_id_rel(), "build-id"),
        ("bin/prog.debug".to_string(), "debuglink"),
        ("bin/.debug/prog.debug".to_string(), "debuglink"),
        ("usr/lib/debug/bin/prog.debug".to_string(), "debuglink"),
    ];
    let placed: Vec<PathBuf> = places
        .iter()
        .map(|(rel, _)| p.place(&p.debug, &format!("root/{rel}")))
        .collect();
    // With all four present the first wins; removing each shows the next.
    for (i, (path, (_, how))) in placed.iter().zip(&places).enumerate() {
        let r = p.report(&[]);
        p.assert_named(&r, path, how, true);
        assert!(
            r.warnings.iter().all(|w| !w.contains("no debug file")),
            "step {i}: {:?}",
            r.warnings
        );
        std::fs::remove_file(path).unwrap();
    }
    // None left: the stripped PIE names nothing, and one note lists it.
    let r = p.report(&[]);
    assert_eq!(
        r.rows.iter().map(|x| x.symbol.as_str()).collect::<Vec<_>>(),
        ["(no symbols)"]
    );
    assert_eq!(
        (
            r.images[0].debug_file.as_deref(),
            r.images[0].debug_found_by
        ),
        (None, None)
    );
    let summary: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("no debug file"))
        .collect();
    assert_eq!(summary.len(), 1, "{:?}", r.warnings);
    assert!(
        summary[0].ends_with(": /bin/prog (no symbols)"),
        "{}",
        summary[0]
    );
    assert!(
        summary[0].contains(&p.path("root/usr/lib/debug").display().to_string()),
        "{}",
        summary[0]
    );
    // --debug-dir outside the sysroot: DEBUGDIR/TARGETDIR/NAME, and by build-id.
    let dd = p.path("dbg");
    let link = p.place(&p.debug, "dbg/bin/prog.debug");
    p.assert_named(
        &p.report(std::slice::from_ref(&dd)),
        &link,
        "debuglink",
        true,
    );
    let bid = p.place(
        &p.debug,
        &format!(
            "dbg/{}",
            p.build_id_rel().trim_start_matches("usr/lib/debug/")
        ),
    );
    p.assert_named(&p.report(std::slice::from_ref(&dd)), &bid, "build-id", true);
    // Without -g the image's symbols are all it needs: the same names from the debug file.
    let mut pr = p
        .inputs(std::slice::from_ref(&dd))
        .load(Want::default())
        .unwrap();
    let r = report::build_counts(
        &pr.counts,
        &mut pr.res,
        &pr.counters,
        report::Options::default(),
    );
    assert_eq!(r.rows[0].symbol, "hot_a");
    assert!(host.is_file());
}

#[test]
fn mismatched_and_corrupt_debug_files_are_refused() {
    let p = build(SRC, "prog");
    let other = build(&SRC.replace("1103515245u", "69069u"), "prog");
    assert_ne!(p.build_id, other.build_id);
    p.write_stream();
    let host = p.place(&p.stripped, "root/bin/prog");
    // Another build's debug file at this build-id's path; a re-made debug file (same build-id,
    // other bytes) beside the image.
    let wrong = p.place(&other.debug, &format!("root/{}", p.build_id_rel()));
    let remade = p.path("root/bin/prog.debug");
    run(
        p.dir.path(),
        "arm-linux-gnueabihf-objcopy",
        &[
            "--remove-section=.comment",
            p.debug.to_str().unwrap(),
            remade.to_str().unwrap(),
        ],
    );
    assert_eq!(
        Ids::read(&remade).unwrap().build_id,
        Some(p.build_id.clone()),
        "only the CRC tells"
    );
    let r = p.report(&[]);
    assert_eq!(
        r.rows.iter().map(|x| x.symbol.as_str()).collect::<Vec<_>>(),
        ["(no symbols)"],
        "nothing unproved names"
    );
    let has = |parts: &[&str]| {
        r.warnings
            .iter()
            .any(|w| parts.iter().all(|s| w.contains(s)))
    };
    let (w, h) = (wrong.display().to_string(), host.display().to_string());
    assert!(
        has(&[
            &w,
            &format!(
                "build-id {} differs from the image's {}",
                other.build_id, p.build_id
            ),
            &h,
            "not used"
        ]),
        "{:?}",
        r.warnings
    );
    assert!(
        has(&[
            &remade.display().to_string(),
            "CRC32",
            "differs from the",
            ".gnu_debuglink",
            &h
        ]),
        "{:?}",
        r.warnings
    );
    // The right file further down the list is still found, and the refusals stay noted.
    let good = p.place(&p.debug, "root/bin/.debug/prog.debug");
    let r = p.report(&[]);
    p.assert_named(&r, &good, "debuglink", true);
    assert!(
        r.warnings
            .iter()
            .any(|x| x.contains(&w) && x.contains("differs")),
        "{:?}",
        r.warnings
    );
    // A corrupt file at the build-id path is a note, not a panic.
    std::fs::remove_file(&good).unwrap();
    std::fs::write(&wrong, b"\x7fELF\x01\x01\x01 truncated").unwrap();
    let r = p.report(&[]);
    assert!(
        r.warnings
            .iter()
            .any(|x| x.contains(&w) && x.contains("not an ELF file")),
        "{:?}",
        r.warnings
    );
}

/// Adds Fedora's MiniDebugInfo to `p.stripped` (as find-debuginfo.sh does) as `minidebug`.
fn add_minidebuginfo(p: &Prog) -> PathBuf {
    let script = r#"set -e
nm=arm-linux-gnueabihf-nm; objcopy=arm-linux-gnueabihf-objcopy
$nm -D prog --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms
$nm prog --format=posix --defined-only | awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort > funcsyms
comm -13 dynsyms funcsyms > keep_symbols
$objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep_symbols prog.debug mini_debuginfo
rm -f mini_debuginfo.xz
xz mini_debuginfo
$objcopy --add-section .gnu_debugdata=mini_debuginfo.xz prog.stripped minidebug
"#;
    run(p.dir.path(), "sh", &["-c", script]);
    p.path("minidebug")
}

#[test]
fn minidebuginfo_names_functions() {
    let p = build(SRC, "prog");
    p.write_stream();
    let mini = add_minidebuginfo(&p);
    let host = p.place(&mini, "root/bin/prog");
    // Names, no lines (MiniDebugInfo has no DWARF); the debug file is the image itself.
    let r = p.report(&[]);
    p.assert_named(&r, &host, "minidebuginfo", false);
    assert!(
        r.warnings.iter().all(|w| !w.contains("no debug file")),
        "{:?}",
        r.warnings
    );
    // A full debug file wins over it.
    let full = p.place(&p.debug, &format!("root/{}", p.build_id_rel()));
    p.assert_named(&p.report(&[]), &full, "build-id", true);
    std::fs::remove_file(&full).unwrap();
    // A .gnu_debugdata that does not decompress is a note.
    let bad = p.path("bad.xz");
    std::fs::write(&bad, b"\xfd7zXZ\0 not really").unwrap();
    run(
        p.dir.path(),
        "arm-linux-gnueabihf-objcopy",
        &["--remove-section=.gnu_debugdata", "minidebug", "nomini"],
    );
    let arg = format!(".gnu_debugdata={}", bad.display());
    run(
        p.dir.path(),
        "arm-linux-gnueabihf-objcopy",
        &["--add-section", &arg, "nomini", "badmini"],
    );
    p.place(&p.path("badmini"), "root/bin/prog");
    let r = p.report(&[]);
    assert_eq!(r.rows[0].symbol, "(no symbols)");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains(".gnu_debugdata (MiniDebugInfo) does not decompress")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn debug_dir_errors_json_and_verbose() {
    let p = build(SRC, "prog");
    p.write_stream();
    p.place(&p.stripped, "root/bin/prog");
    let missing = p.path("no-such-dir");
    let e = p
        .inputs(std::slice::from_ref(&missing))
        .load(Want::default())
        .err()
        .unwrap();
    assert_eq!(
        format!("{e:#}"),
        format!("--debug-dir {}: not a directory", missing.display())
    );
    let bid = p.place(&p.debug, &format!("root/{}", p.build_id_rel()));
    let r = p.report(&[]);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["images"][0]["debug_file"], bid.display().to_string());
    assert_eq!(j["images"][0]["debug_found_by"], "build-id");
    let text = report::render_debug_files(&r);
    assert!(
        text.contains(&format!("  /bin/prog: {} (build-id)\n", bid.display())),
        "{text}"
    );
}

#[test]
fn annotate_disassembles_the_image_with_names_from_the_debug_file() {
    let p = build(SRC, "prog");
    p.write_stream();
    p.place(&p.stripped, "root/bin/prog");
    p.place(&p.debug, "root/bin/prog.debug");
    let opts = annotate::Options {
        symbol: Some("hot_a".into()),
        image: None,
        source: true,
        assembly: true,
        threshold: 0.0,
        hot: 10.0,
        limit: 0,
        source_dirs: vec![],
    };
    let want = Want {
        lines: true,
        kernel_lines: false,
        keys: Default::default(),
    };
    let a = annotate::build(&mut p.inputs(&[]).load(want).unwrap(), &opts).unwrap();
    // The oracle: the same samples annotated on the unstripped program.
    p.place(&p.full, "root/bin/prog");
    let b = annotate::build(&mut p.inputs(&[]).load(want).unwrap(), &opts).unwrap();
    let (sa, sb) = (&a.symbols[0], &b.symbols[0]);
    assert_eq!((sa.symbol.as_str(), sa.samples), ("hot_a", 3));
    assert!(
        sa.host_path.as_deref().unwrap().ends_with("root/bin/prog"),
        "code from the image: {:?}",
        sa.host_path
    );
    let insns = |s: &annotate::Annotation| {
        s.instructions
            .iter()
            .map(|i| (i.addr, i.bytes.clone(), i.samples))
            .collect::<Vec<_>>()
    };
    assert!(!sa.instructions.is_empty());
    assert_eq!(
        insns(sa),
        insns(sb),
        "the same Thumb-2 code, mapping symbols from the debug file"
    );
    let lines = |s: &annotate::Annotation| {
        s.lines
            .iter()
            .map(|l| (l.line, l.samples, l.text.clone()))
            .collect::<Vec<_>>()
    };
    assert!(
        sa.lines.iter().any(|l| l.samples > 0 && l.text.is_some()),
        "{:#?}",
        sa.lines
    );
    assert_eq!(lines(sa), lines(sb));
}

#[test]
fn stripped_vmlinux_and_module_use_their_debug_files() {
    let p = build(SRC, "prog");
    // A stripped ARM executable stands in for vmlinux: kernel samples at its addresses.
    let vm = p.place(&p.stripped, "boot/vmlinux");
    let oracle = ElfImage::load(&p.full, false).unwrap();
    let va = oracle.offset_to_vaddr(p.samples[0].1).unwrap();
    let words = stream(&[
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 0,
            tgid: 0,
            app_cookie: 0,
        },
        Record::KernelEnter,
        Record::Sample { pc: va, event: 0 },
    ])
    .words;
    std::fs::write(
        p.path("k.buf"),
        words
            .iter()
            .flat_map(|&w| (w as u32).to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let dd = p.path("dbg");
    std::fs::create_dir(&dd).unwrap();
    let inputs = Inputs {
        buffer: Some(p.path("k.buf")),
        vmlinux: Some(vm.clone()),
        debug_dirs: vec![dd.clone()],
        ..Default::default()
    };
    let e = format!("{:#}", inputs.load(Want::default()).err().unwrap());
    assert!(
        e.contains("no function symbols (stripped, and no debug file found"),
        "{e}"
    );
    let bid = p.place(
        &p.debug,
        &format!(
            "dbg/.build-id/{}/{}.debug",
            &p.build_id[..2],
            &p.build_id[2..]
        ),
    );
    let mut pr = inputs.load(Want::default()).unwrap();
    let r = report::build_counts(
        &pr.counts,
        &mut pr.res,
        &pr.counters,
        report::Options::default(),
    );
    assert_eq!(
        (r.rows[0].image.as_str(), r.rows[0].symbol.as_str()),
        ("vmlinux", "hot_a")
    );
    assert_eq!(
        r.images[0].debug_file.as_deref(),
        Some(bid.display().to_string().as_str())
    );

    // A module stripped as `INSTALL_MOD_STRIP=1` does (`--strip-debug`: symbols stay), its
    // DWARF in a debuglinked file: relocated source lines at the placed addresses.
    let d = p.dir.path();
    run(
        d,
        "arm-linux-gnueabihf-gcc",
        &["-O2", "-g", "-c", "-o", "m.ko", "prog.c"],
    );
    run(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--only-keep-debug", "m.ko", "m.ko.debug"],
    );
    std::fs::create_dir(d.join("mods")).unwrap();
    run(
        d,
        "arm-linux-gnueabihf-objcopy",
        &[
            "--strip-debug",
            "--add-gnu-debuglink=m.ko.debug",
            "m.ko",
            "mods/m.ko",
        ],
    );
    std::fs::rename(d.join("m.ko.debug"), d.join("mods/m.ko.debug")).unwrap();
    let placement = [(".text".to_string(), 0xbf00_0000u64)]
        .into_iter()
        .collect();
    let search = debugfile::Search::new(&[], &[]);
    let look = crate::resolve::elf::DebugLookup {
        search: &search,
        target: None,
        recorded: None,
    };
    let ko = ElfImage::load_module(&d.join("mods/m.ko"), &placement, true, Some(look)).unwrap();
    let unstripped = ElfImage::load_module(&d.join("m.ko"), &placement, true, None).unwrap();
    let data = std::fs::read(d.join("m.ko")).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let pc = 0xbf00_0000
        + (f.symbols()
            .find(|s| s.name() == Ok("hot_a"))
            .unwrap()
            .address()
            & !1)
        + 4;
    assert_eq!(ko.symbols.lookup(pc).unwrap().name, "hot_a");
    assert_eq!(unstripped.symbols.lookup(pc).unwrap().name, "hot_a");
    assert!(unstripped.source(pc).is_some_and(|l| l.line.is_some()));
    assert_eq!(
        ko.source(pc),
        unstripped.source(pc),
        "relocated DWARF of the debug file"
    );
    let src = ko.debug.as_ref().unwrap();
    assert_eq!(
        (src.file.clone(), src.method),
        (d.join("mods/m.ko.debug"), debugfile::Method::Debuglink)
    );
}

#[test]
fn archived_build_ids_find_debug_files_on_the_host() {
    let p = build(SRC, "prog");
    p.write_stream();
    // What `oprof record --archive` keeps of the board's /bin/prog.
    let board = p.place(&p.stripped, "board/bin/prog");
    let mut ids = std::collections::BTreeMap::new();
    let mut out = crate::target::session_dir::SessionDir::prepare(&p.path("sess"), false).unwrap();
    out.keep();
    crate::target::record::archive_image(&out, &board, &mut ids).unwrap();
    let kept = &ids[&board.display().to_string()];
    assert_eq!(kept.build_id.as_deref(), Some(p.build_id.as_str()));
    assert_eq!(kept.debuglink.as_deref(), Some("prog.debug"));
    assert!(p.path(&format!("sess/root{}", board.display())).is_file());
    // A session of /bin/prog with those ids; the host copy (in --image-path) lost its build-id
    // note and debuglink, and the host's debug directory has the file by build-id.
    let sess = p.path("sess");
    std::fs::copy(p.path("s.buf"), sess.join(SAMPLES)).unwrap();
    std::fs::copy(p.path("s.images"), sess.join(IMAGES)).unwrap();
    std::fs::remove_dir_all(sess.join("root")).unwrap();
    let bytes = std::fs::metadata(sess.join(SAMPLES)).unwrap().len();
    let info = |ids| {
        let mut i = session_info("timer", 4, bytes);
        i.debug_ids = ids;
        i
    };
    let recorded = [("/bin/prog".to_string(), kept.clone())]
        .into_iter()
        .collect();
    std::fs::write(
        sess.join(SESSION),
        serde_json::to_string(&info(recorded)).unwrap(),
    )
    .unwrap();
    std::fs::create_dir(p.path("host")).unwrap();
    let bare = [
        "--strip-all",
        "--remove-section=.note.gnu.build-id",
        "prog",
        "host/prog",
    ];
    run(p.dir.path(), "arm-linux-gnueabihf-objcopy", &bare);
    assert_eq!(Ids::read(&p.path("host/prog")), Some(Ids::default()));
    let bid = p.place(
        &p.debug,
        &format!(
            "dbg/.build-id/{}/{}.debug",
            &p.build_id[..2],
            &p.build_id[2..]
        ),
    );
    let inputs = Inputs {
        buffer: Some(sess.clone()),
        image_path: vec![p.path("host")],
        debug_dirs: vec![p.path("dbg")],
        ..Default::default()
    };
    let load = |i: &Inputs| {
        let mut pr = i
            .load(Want {
                lines: true,
                ..Default::default()
            })
            .unwrap();
        report::build_counts(
            &pr.counts,
            &mut pr.res,
            &pr.counters,
            report::Options {
                lines: true,
                flame: false,
            },
        )
    };
    p.assert_named(&load(&inputs), &bid, "build-id", true);
    // Without the recorded ids nothing proves a debug file.
    std::fs::write(
        sess.join(SESSION),
        serde_json::to_string(&info(Default::default())).unwrap(),
    )
    .unwrap();
    assert_eq!(load(&inputs).rows[0].symbol, "(no symbols)");
    // A host copy of another build: named by its own debug file, with a note.
    let other = build(&SRC.replace("1103515245u", "69069u"), "prog");
    std::fs::copy(&other.stripped, p.path("host/prog")).unwrap();
    let recorded = [("/bin/prog".to_string(), kept.clone())]
        .into_iter()
        .collect();
    std::fs::write(
        sess.join(SESSION),
        serde_json::to_string(&info(recorded)).unwrap(),
    )
    .unwrap();
    let r = load(&inputs);
    let note = format!(
        "build-id {} differs from the profiled /bin/prog's {}",
        other.build_id, p.build_id
    );
    assert!(
        r.warnings.iter().any(|w| w.contains(&note)),
        "{:?}",
        r.warnings
    );
}
