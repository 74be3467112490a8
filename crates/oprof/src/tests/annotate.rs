//! `oprof annotate` and `oprof diff` on real ARM code built with `arm-linux-gnueabihf-gcc`: a
//! Thumb-2 and an ARM function (with a literal pool) in one executable, and the same code for
//! x86-64 with the host's `gcc`. The disassembly is checked against binutils' `objdump`
//! (instruction boundaries, so Thumb code must decode as Thumb), samples placed at chosen instructions through a stream are counted there and on
//! their source lines, and errors are one line naming the input.

use crate::aggregate::inputs::{Inputs, Want};
use crate::fixtures::stream;
use crate::resolve::disasm;
use crate::resolve::elf::ElfImage;
use crate::resolve::isa::Isa;
use crate::tests::programs::write_session;
use crate::view::annotate;
use crate::view::diff;
use crate::view::report;
use oprofile_common::event::Record;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = r#"
volatile unsigned int sink;

__attribute__((noinline, target("thumb"))) unsigned int t_loop(unsigned int n)
{
	unsigned int x = sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 1103515245u + 12345u;
	return x;
}

__attribute__((noinline, target("arm"))) unsigned int a_loop(unsigned int n)
{
	unsigned int x = sink;

	for (unsigned int i = 0; i < n; i++)
		x = x * 0x12345679u + 0xdeadbeefu;
	return x;
}

int main(int argc, char **argv)
{
	sink = t_loop(argc) + a_loop(argc);
	return 0;
}
"#;

/// Builds the test program (`-g` or not) in `dir` as `name`.
fn build(dir: &Path, name: &str, debug: bool) -> PathBuf {
    let src = dir.join("loops.c");
    std::fs::write(&src, SRC).unwrap();
    let exe = dir.join(name);
    let mut c = Command::new("arm-linux-gnueabihf-gcc");
    c.args(["-O2", "-no-pie", "-o"]).arg(&exe).arg(&src);
    if debug {
        c.arg("-g");
    }
    assert!(c
        .status()
        .expect("arm-linux-gnueabihf-gcc (scripts/setup-host.sh)")
        .success());
    exe
}

/// Instruction addresses of `sym` in `OBJDUMP -d` of `exe` inside `range` (objdump lists the
/// alignment padding after a function under its name too).
fn objdump_addrs(
    objdump: &str,
    exe: &Path,
    sym: &str,
    range: &std::ops::Range<u64>,
) -> BTreeSet<u64> {
    let out = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .arg(exe)
        .output()
        .expect(objdump);
    let text = String::from_utf8_lossy(&out.stdout);
    let head = format!("<{sym}>:");
    text.lines()
        .skip_while(|l| !l.ends_with(&head))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| u64::from_str_radix(l.trim().split(':').next()?, 16).ok())
        .filter(|a| range.contains(a))
        .collect()
}

fn sym_range(img: &ElfImage, name: &str) -> std::ops::Range<u64> {
    let data = std::fs::read(&img.path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    use object::{Object, ObjectSymbol};
    let a = f
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name}"))
        .address()
        & !1;
    img.symbols.extent(a).unwrap().1
}

#[test]
fn thumb_and_arm_disassemble_as_objdump_does() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "loops", true);
    let img = ElfImage::load(&exe, true).unwrap();
    for (name, isa) in [("t_loop", Isa::Thumb), ("a_loop", Isa::Arm)] {
        let r = sym_range(&img, name);
        assert_eq!(img.isa_at(r.start), Some(isa), "{name}: mapping symbols");
        let insns = disasm::disassemble(&img, r.clone()).unwrap();
        // Every byte in one row, and no row undecodable.
        assert_eq!(insns.first().unwrap().addr, r.start);
        assert_eq!(insns.last().unwrap().end(), r.end);
        assert!(insns.windows(2).all(|w| w[0].end() == w[1].addr));
        assert!(
            insns.iter().all(|i| !i.text.starts_with(".inst")),
            "{name}: {insns:#?}"
        );
        let ours: BTreeSet<u64> = insns.iter().map(|i| i.addr).collect();
        assert_eq!(
            ours,
            objdump_addrs("arm-linux-gnueabihf-objdump", &exe, name, &r),
            "{name}: instruction boundaries as objdump's"
        );
        if isa == Isa::Thumb {
            // Thumb code, and a literal pool ($d) for the constants, shown as data.
            assert!(insns.iter().any(|i| i.bytes.len() == 2), "{insns:#?}");
            assert!(insns.iter().all(
                |i| i.isa == Isa::Thumb || (i.isa == Isa::Data && i.text.starts_with(".word"))
            ));
        } else {
            // The two 32-bit constants come from a literal pool ($d) after the code, or from
            // movw/movt pairs: either way the loop's multiply is there.
            assert!(
                insns
                    .iter()
                    .any(|i| i.text.starts_with("mla") || i.text.starts_with("mul")),
                "{insns:#?}"
            );
        }
    }
}

#[test]
fn x86_64_disassembles_as_objdump_does() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("loops.c");
    std::fs::write(
        &src,
        SRC.replace(", target(\"thumb\")", "")
            .replace(", target(\"arm\")", ""),
    )
    .unwrap();
    let exe = dir.path().join("loops64");
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(st.success());
    let img = ElfImage::load(&exe, true).unwrap();
    assert_eq!(img.arch, object::Architecture::X86_64);
    for name in ["t_loop", "a_loop"] {
        let r = sym_range(&img, name);
        assert_eq!(img.isa_at(r.start), Some(Isa::X86_64));
        let insns = disasm::disassemble(&img, r.clone()).unwrap();
        assert_eq!(
            (insns.first().unwrap().addr, insns.last().unwrap().end()),
            (r.start, r.end)
        );
        assert!(
            insns.iter().all(|i| !i.text.starts_with(".inst")),
            "{name}: {insns:#?}"
        );
        assert_eq!(
            insns.iter().map(|i| i.addr).collect::<BTreeSet<u64>>(),
            objdump_addrs("objdump", &exe, name, &r),
            "{name}"
        );
        assert!(
            insns.iter().any(|i| i.text.starts_with("imul")),
            "{name}: the loop's multiply"
        );
    }
}

/// Writes a stream of user samples in image 1 at file offsets `pcs` (each `n` times) and the
/// images file naming image 1 `/bin/NAME`; returns the stream's path.
fn write_stream(dir: &Path, tag: &str, name: &str, pcs: &[(u64, u32)]) -> PathBuf {
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
    for &(pc, n) in pcs {
        recs.extend((0..n).map(|_| Record::Sample { pc, event: 0 }));
    }
    let st = stream(&recs);
    let bytes: Vec<u8> = st
        .words
        .iter()
        .flat_map(|&w| (w as u32).to_le_bytes())
        .collect();
    let buf = dir.join(format!("{tag}.buf"));
    std::fs::write(&buf, bytes).unwrap();
    std::fs::write(
        dir.join(format!("{tag}.images")),
        format!("1 /bin/{name}\n"),
    )
    .unwrap();
    buf
}

/// File offset of virtual address `va` in `img` (inverse of its PT_LOAD mapping).
fn offset_of(img: &ElfImage, va: u64) -> u64 {
    let l = img
        .loads
        .iter()
        .find(|l| va >= l.vaddr && va - l.vaddr < l.filesz)
        .unwrap();
    va - l.vaddr + l.offset
}

fn inputs(dir: &Path, tag: &str) -> Inputs {
    Inputs {
        buffer: Some(dir.join(format!("{tag}.buf"))),
        images: Some(dir.join(format!("{tag}.images"))),
        image_path: vec![dir.to_path_buf()],
        ..Default::default()
    }
}

fn opts(symbol: Option<&str>, source: bool, assembly: bool) -> annotate::Options {
    annotate::Options {
        symbol: symbol.map(String::from),
        image: None,
        source,
        assembly,
        threshold: 0.0,
        hot: 10.0,
        limit: 0,
        source_dirs: vec![],
    }
}

fn want() -> Want {
    Want {
        lines: true,
        kernel_lines: true,
        keys: Default::default(),
    }
}

#[test]
fn samples_count_on_their_instructions_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "loops", true);
    let img = ElfImage::load(&exe, true).unwrap();
    let insns = disasm::disassemble(&img, sym_range(&img, "t_loop")).unwrap();
    // The loop's multiply: 70 samples; its first instruction: 5; one a_loop instruction: 25.
    let mul = insns
        .iter()
        .find(|i| i.text.starts_with("mul") || i.text.starts_with("mla"))
        .expect("t_loop's multiply");
    let first = insns[0].addr;
    let a = sym_range(&img, "a_loop").start;
    let pcs = [
        (offset_of(&img, mul.addr), 70),
        (offset_of(&img, first), 5),
        (offset_of(&img, a), 25),
    ];
    write_stream(dir.path(), "s", "loops", &pcs);
    let mut p = inputs(dir.path(), "s").load(want()).unwrap();
    let r = annotate::build(&mut p, &opts(None, true, true)).unwrap();
    assert_eq!(r.total, 100);
    let names: Vec<&str> = r.symbols.iter().map(|s| s.symbol.as_str()).collect();
    assert_eq!(names, ["t_loop", "a_loop"], "hottest first");
    let t = &r.symbols[0];
    assert_eq!((t.samples, t.image.as_str()), (75, "/bin/loops"));
    assert_eq!(
        t.instructions.iter().map(|i| i.samples).sum::<u64>(),
        75,
        "instruction counts sum to the symbol's"
    );
    let at = |addr: u64| t.instructions.iter().find(|i| i.addr == addr).unwrap();
    assert_eq!((at(mul.addr).samples, at(mul.addr).hot), (70, true));
    assert_eq!(at(first).samples, 5);
    assert!(t
        .instructions
        .iter()
        .all(|i| matches!(i.isa, Isa::Thumb | Isa::Data)));
    // Encodings as objdump prints them: T32 halfwords, A32 words.
    assert!(t.instructions.iter().all(|i| i
        .bytes
        .split(' ')
        .all(|h| h.len() == if i.isa == Isa::Thumb { 4 } else { 8 })));
    let word = |i: &crate::resolve::disasm::Insn| {
        i.bytes
            .iter()
            .rev()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let a_first = disasm::disassemble(&img, sym_range(&img, "a_loop"))
        .unwrap()
        .remove(0);
    assert_eq!(r.symbols[1].instructions[0].bytes, word(&a_first));
    // Source: the hottest line is the loop body, with its text from loops.c.
    assert_eq!(
        t.lines.iter().map(|l| l.samples).sum::<u64>() + t.no_line_samples,
        75
    );
    let hottest = t.lines.iter().max_by_key(|l| l.samples).unwrap();
    assert!(
        hottest
            .text
            .as_deref()
            .unwrap()
            .contains("x = x * 1103515245u"),
        "{hottest:?}"
    );
    assert!(hottest.hot && hottest.file.ends_with("loops.c"));
    let text = annotate::render(&r, &opts(None, true, true));
    assert!(
        text.contains("== t_loop in /bin/loops: 75 samples (75.00% of 100)"),
        "{text}"
    );
    assert!(
        text.contains("-- assembly (data, thumb)") && text.contains("-- assembly (arm"),
        "{text}"
    );
    assert!(
        text.contains("x = x * 1103515245u + 12345u;"),
        "interleaved source: {text}"
    );
    serde_json::to_string(&r).unwrap();

    // One symbol, assembly only; the threshold keeps symbols of at least 30%.
    let r = annotate::build(
        &mut inputs(dir.path(), "s").load(want()).unwrap(),
        &opts(Some("a_loop"), false, true),
    )
    .unwrap();
    assert_eq!(r.symbols.len(), 1);
    assert!(r.symbols[0].lines.is_empty() && r.symbols[0].instructions[0].samples == 25);
    let mut o = opts(None, false, true);
    o.threshold = 30.0;
    let r = annotate::build(&mut inputs(dir.path(), "s").load(want()).unwrap(), &o).unwrap();
    assert_eq!(
        r.symbols
            .iter()
            .map(|s| s.symbol.as_str())
            .collect::<Vec<_>>(),
        ["t_loop"]
    );
}

#[test]
fn annotate_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "plain", false);
    let img = ElfImage::load(&exe, false).unwrap();
    let t = sym_range(&img, "t_loop").start;
    write_stream(dir.path(), "s", "plain", &[(offset_of(&img, t), 3)]);
    let err = |o: annotate::Options| {
        let mut p = inputs(dir.path(), "s").load(want()).unwrap();
        format!("{:#}", annotate::build(&mut p, &o).unwrap_err())
    };
    let e = err(opts(Some("t_lop"), true, true));
    assert_eq!(e, "no sampled symbol `t_lop` (close: t_loop)");
    let mut o = opts(None, true, true);
    o.image = Some("nope".into());
    assert!(err(o).starts_with("no samples in image `nope`"));
    let e = err(opts(Some("t_loop"), true, false));
    assert_eq!(
        e,
        format!("{}: no debug info (DWARF) for --source", exe.display())
    );
    assert!(!e.contains('\n'));
    // Without --source only: the assembly, and a note.
    let mut p = inputs(dir.path(), "s").load(want()).unwrap();
    let r = annotate::build(&mut p, &opts(Some("t_loop"), true, true)).unwrap();
    assert_eq!(
        r.symbols[0]
            .instructions
            .iter()
            .map(|i| i.samples)
            .sum::<u64>(),
        3
    );
    assert!(
        r.symbols[0]
            .notes
            .iter()
            .any(|n| n.contains("no debug info")),
        "{:?}",
        r.symbols[0].notes
    );
}

/// A session directory of `stream` with `cpu_type`.
fn session(dir: &Path, name: &str, buf: &Path, images: &Path, cpu_type: &str) -> PathBuf {
    let d = dir.join(name);
    let images = std::fs::read_to_string(images).unwrap();
    write_session(&d, &std::fs::read(buf).unwrap(), &images, cpu_type, 4);
    d
}

#[test]
fn diff_of_a_changed_split() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "loops", false);
    let img = ElfImage::load(&exe, false).unwrap();
    let (t, a) = (
        offset_of(&img, sym_range(&img, "t_loop").start),
        offset_of(&img, sym_range(&img, "a_loop").start),
    );
    // A: 70/30 of 100 samples; B: 30/70 of 200 (a longer run).
    let ba = write_stream(dir.path(), "a", "loops", &[(t, 70), (a, 30)]);
    let bb = write_stream(dir.path(), "b", "loops", &[(t, 60), (a, 140)]);
    let rep = |tag: &str| {
        let mut p = inputs(dir.path(), tag).load(Want::default()).unwrap();
        (
            report::build_counts(
                &p.counts,
                &mut p.res,
                &p.counters,
                report::Options::default(),
            ),
            p,
        )
    };
    let ((ra, pa), (rb, pb)) = (rep("a"), rep("b"));
    let side =
        |p: &crate::aggregate::inputs::Profile| (p.path.display().to_string(), p.cpu_type.clone());
    let d = diff::build(&ra, &rb, side(&pa), side(&pb), true).unwrap();
    let row = |s: &str| {
        d.rows
            .iter()
            .find(|r| r.symbol.as_deref() == Some(s))
            .unwrap()
    };
    assert_eq!((row("t_loop").a_samples, row("t_loop").b_samples), (70, 60));
    assert!(
        (row("t_loop").delta - -40.0).abs() < 1e-9 && (row("a_loop").delta - 40.0).abs() < 1e-9
    );
    assert_eq!(d.rows.len(), 2);
    let text = diff::render(&d, 0);
    assert!(
        text.contains("     -40.00  t_loop  /bin/loops") || text.contains("-40.00  t_loop"),
        "{text}"
    );
    // By image: no change.
    let d = diff::build(&ra, &rb, side(&pa), side(&pb), false).unwrap();
    assert_eq!((d.rows.len(), d.rows[0].delta), (1, 0.0));
    // Sessions of different CPU types: one line naming both.
    let sa = session(dir.path(), "sa", &ba, &dir.path().join("a.images"), "timer");
    let sb = session(
        dir.path(),
        "sb",
        &bb,
        &dir.path().join("b.images"),
        "arm/armv7-ca15",
    );
    let load = |d: &Path| {
        let mut p = Inputs {
            buffer: Some(d.to_path_buf()),
            image_path: vec![dir.path().to_path_buf()],
            ..Default::default()
        }
        .load(Want::default())
        .unwrap();
        (
            report::build_counts(
                &p.counts,
                &mut p.res,
                &p.counters,
                report::Options::default(),
            ),
            side(&p),
        )
    };
    let ((ra, sa_), (rb, sb_)) = (load(&sa), load(&sb));
    let e = format!("{:#}", diff::build(&ra, &rb, sa_, sb_, true).unwrap_err());
    assert_eq!(
        e,
        format!(
            "{} has cpu_type timer but {} has arm/armv7-ca15: profiles of different CPU types cannot be compared",
            sa.display(),
            sb.display()
        )
    );
}
