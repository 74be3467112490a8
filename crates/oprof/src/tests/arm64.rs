//! End-to-end tests on real AArch64 ELF files built at test time with `aarch64-linux-gnu-gcc`
//! (Debian's `gcc-aarch64-linux-gnu`): 8-byte-word streams of an arm64 session (`pointer_size`
//! 8) through `Inputs::load` and the report, kernel symbols of an arm64 kallsyms
//! (0xffff8000_xxxxxxxx), an `ET_REL` module placed at arm64 module addresses (RELA DWARF), the
//! A64 call facts behind frame naming (`$x`/`$d` mapping symbols, `b` before a symbol), and
//! `oprof annotate`'s A64 disassembly against binutils' `objdump`.

use crate::aggregate::inputs::{Inputs, Want};
use crate::fixtures;
use crate::input::session::{KALLSYMS, PROC_MODULES, SAMPLES};
use crate::resolve::disasm;
use crate::resolve::elf::ElfImage;
use crate::resolve::images::ModuleSnapshot;
use crate::resolve::isa::Isa;
use crate::tests::programs::{
    a64_bl, file_offset, return_address_of_bl, symbol, write_session, Sym, ARM64,
};
use crate::view::annotate;
use crate::view::report;
use oprofile_common::event::Record;
use std::path::Path;
use std::process::Command;

/// The stream of `records` in 8-byte little-endian words (the arm64 module's `pointer_size`).
pub(crate) fn stream8(records: &[Record]) -> Vec<u8> {
    fixtures::bytes(&fixtures::words(records, 8), 8)
}

const PROG: &str = r#"static volatile int sink;
__attribute__((noinline)) int hot(int x) { /* hot-begin */
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i * i;
    return s;
} /* hot-end */
int main(void) {
    sink = hot(100);
    return 0;
}
"#;

/// The arm64 kernel's text and one module, as `/proc/kallsyms` lists them.
const KALLSYMS_ARM64: &str = "ffff800080010000 T _stext\n\
                              ffff800080010000 t $x\n\
                              ffff800080fa0000 T do_idle\n\
                              ffff800080fa0200 T cpu_startup_entry\n\
                              ffff800081000000 T _etext\n\
                              ffff80007a000000 t sample_handler\t[oprofile]\n";

/// A session directory recorded on arm64 (`pointer_size` 8, Cortex-A53 PMU): user samples in
/// an AArch64 program with a traced chain, kernel samples in vmlinux and a module by kallsyms.
#[test]
fn arm64_session_of_8_byte_words_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("host")).unwrap();
    // `hot` keeps a frame record (a leaf has none by default): its traced chain's edge to main
    // is proven with the CFI (`unwind::fpchain`).
    let exe = ARM64.build(
        d,
        "prog.c",
        PROG,
        &[
            "-g",
            "-O1",
            "-no-pie",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
        ],
        "host/prog",
    );
    let Sym { addr: hot, .. } = symbol(&exe, "hot");
    let hot_off = file_offset(&exe, hot);
    let ret_off = file_offset(&exe, return_address_of_bl(&exe, "main", hot, a64_bl));

    let s = |pc| Record::Sample { pc, event: 0 };
    let recs = [
        Record::CpuSwitch { cpu: 1 },
        Record::CtxSwitch {
            pid: 70,
            tgid: 70,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
        Record::TraceBegin,
        s(hot_off + 8),
        s(ret_off),
        // A new sync pass: its context again, as the module writes it.
        Record::CpuSwitch { cpu: 1 },
        Record::KernelExit,
        Record::CtxSwitch {
            pid: 70,
            tgid: 70,
            app_cookie: 1,
        },
        Record::CookieSwitch { cookie: 1 },
        s(hot_off + 12),
        Record::KernelEnter,
        s(0xffff_8000_80fa_0010),
        s(0xffff_8000_80fa_0204),
        s(0xffff_8000_7a00_0010),
        s(0xffff_8000_9000_0000), // past _etext, in no module
    ];
    let sess = d.join("sess");
    let bytes = stream8(&recs);
    assert!(
        bytes.len() % 8 == 0 && bytes[..8] == [0xFF; 8],
        "escape code u64::MAX"
    );
    write_session(&sess, &bytes, "1 /usr/bin/prog\n", "arm/armv8-ca53", 8);
    std::fs::write(sess.join(KALLSYMS), KALLSYMS_ARM64).unwrap();
    std::fs::write(
        sess.join(PROC_MODULES),
        "oprofile 8192 0 - Live 0xffff80007a000000 (O)\n",
    )
    .unwrap();

    let inputs = Inputs {
        buffer: Some(sess.clone()),
        image_path: vec![d.join("host")],
        ..Default::default()
    };
    let mut p = inputs
        .load(Want {
            lines: true,
            ..Default::default()
        })
        .unwrap();
    let r = report::build_counts(
        &p.counts,
        &mut p.res,
        &p.counters,
        report::Options {
            lines: true,
            flame: true,
        },
    );
    assert_eq!(
        (r.total, r.user, r.kernel, r.traced),
        (6, 2, 4, 1),
        "{:#?}",
        r.rows
    );
    let find = |sym: &str| {
        r.rows
            .iter()
            .find(|x| x.symbol == sym)
            .unwrap_or_else(|| panic!("{sym}: {:#?}", r.rows))
    };
    assert_eq!(
        (find("hot").image.as_str(), find("hot").samples),
        ("/usr/bin/prog", 2)
    );
    let src = find("hot").source.as_ref().unwrap();
    assert!(src.display.starts_with("prog.c:"), "{src:?}");
    assert_eq!(find("do_idle").samples, 1);
    assert_eq!(find("cpu_startup_entry").samples, 1);
    assert_eq!(
        (
            find("sample_handler").image.as_str(),
            find("sample_handler").samples
        ),
        ("oprofile.ko", 1)
    );
    let cg = r.callgraph.as_ref().unwrap();
    let hot_e = cg.iter().find(|e| e.symbol == "hot").unwrap();
    assert_eq!(
        (hot_e.callers[0].symbol.as_str(), hot_e.callers[0].samples),
        ("main", 1)
    );
    let note = "fp chains (arm64 frame records): 1 checked with CFI, 0 cut at an unproven edge (0 frames left out)";
    assert!(r.warnings.iter().any(|w| w == note), "{:?}", r.warnings);

    // The same stream bare: 4-byte words misread it; --word-size 8 reads it.
    let total = |word_size| -> Result<u64, String> {
        let bare = Inputs {
            buffer: Some(sess.join(SAMPLES)),
            word_size: Some(word_size),
            ..Default::default()
        };
        let mut p = bare.load(Want::default()).map_err(|e| format!("{e:#}"))?;
        Ok(report::build_counts(
            &p.counts,
            &mut p.res,
            &p.counters,
            report::Options::default(),
        )
        .total)
    };
    assert_eq!(total(8), Ok(6));
    let four = total(4).unwrap_err();
    assert!(!four.contains('\n'), "one line: {four}");
}

const MODULE: &str = r#"volatile int mod_state;
__attribute__((noinline)) int mod_fn(int x) { /* fn-begin */
    mod_state += x * 3;
    return mod_state;
} /* fn-end */
"#;

/// An AArch64 `ET_REL` placed as a module at arm64 module addresses: symbols and RELA-relocated
/// DWARF lines at 0xffff8000_7a000000.
#[test]
fn arm64_module_placed_from_sections() {
    let dir = tempfile::tempdir().unwrap();
    let ko = ARM64.build(
        dir.path(),
        "mod.c",
        MODULE,
        &["-g", "-O1", "-c"],
        "my_mod.ko",
    );
    let Sym { addr: fn_val, .. } = symbol(&ko, "mod_fn");
    let mut snap = ModuleSnapshot::default();
    snap.add_proc_modules("my_mod 16384 0 - Live 0xffff80007a000000 (O)\n", "pm")
        .unwrap();
    snap.add_sections(
        "my_mod .text 0xffff80007a000000\nmy_mod .data 0xffff80007a002000\n",
        "ms",
    )
    .unwrap();
    let placed = ElfImage::load_module(&ko, &snap.modules["my_mod"].sections, true, None).unwrap();
    let pc = 0xffff_8000_7a00_0000 + fn_val + 4;
    assert_eq!(placed.symbols.lookup(pc).unwrap().name, "mod_fn");
    let line = placed.source(pc).unwrap().line.unwrap();
    let first = MODULE.lines().position(|l| l.contains("fn-begin")).unwrap() as u32 + 1;
    assert!((first..first + 3).contains(&line), "mod_fn at line {line}");
    assert_eq!(placed.isa_at(pc), Some(Isa::Arm64));
}

/// `b` before a symbol and data (`$d`) that reads like a `bl` are no calls: frames whose return
/// address is such a symbol's start are named by it, not by the code before it.
const ENTRIES: &str = "    .text
    .globl _start
    .type _start, %function
_start:
    bl after_data
    .size _start, . - _start
    .type after_bl, %function
after_bl:
    nop
    b after_b
    .size after_bl, . - after_bl
    .type after_b, %function
after_b:
    ret
    .word 0x94000000
    .size after_b, . - after_b
    .type after_data, %function
after_data:
    ret
    .size after_data, . - after_data
";

#[test]
fn a64_symbols_entered_without_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let exe = ARM64.build(
        dir.path(),
        "k.S",
        ENTRIES,
        &["-nostdlib", "-static", "-Wl,-Ttext=0x400000"],
        "k",
    );
    let img = ElfImage::load(&exe, false).unwrap();
    let at = |name: &str| symbol(&exe, name).addr;
    let (after_bl, after_b, after_data) = (at("after_bl"), at("after_b"), at("after_data"));
    let t = &img.symbols;
    assert!(
        !t.entered_without_call(after_bl),
        "after a bl: the - 1 rule"
    );
    assert_eq!(t.lookup(t.frame_address(after_bl)).unwrap().name, "_start");
    assert!(t.entered_without_call(after_b), "after a b");
    assert_eq!(t.lookup(t.frame_address(after_b)).unwrap().name, "after_b");
    assert!(
        t.entered_without_call(after_data),
        "after $d data that reads as a bl"
    );
    // The mapping symbols: data at after_data - 4, A64 code around it.
    assert_eq!(img.isa_at(after_data - 4), Some(Isa::Data));
    assert_eq!(
        (img.isa_at(after_b), img.isa_at(after_data)),
        (Some(Isa::Arm64), Some(Isa::Arm64))
    );
    let insns = disasm::disassemble(&img, after_b..after_data).unwrap();
    let texts: Vec<(&str, Isa)> = insns.iter().map(|i| (i.text.as_str(), i.isa)).collect();
    assert_eq!(
        texts,
        [("ret", Isa::Arm64), (".word 0x94000000", Isa::Data)]
    );
}

/// The same code as a kernel: `_stext`/`_etext` around it, linked at arm64's kernel text
/// (0xffff8000_80010000), with labels as kallsyms lists them (`WithLabels`).
#[test]
fn arm64_vmlinux_names_kernel_frames() {
    let dir = tempfile::tempdir().unwrap();
    let src = ENTRIES.replace("_start:\n", "_stext:\n_start:\n")
        + "    .globl _etext\n_etext:\n    nop\n";
    let vm = ARM64.build(
        dir.path(),
        "vm.S",
        &src,
        &[
            "-nostdlib",
            "-static",
            "-Wl,-Ttext=0xffff800080010000",
            "-Wl,-e,_start",
        ],
        "vmlinux",
    );
    let k = crate::view::kprof::Kernel::load(&vm).unwrap();
    let at = |name: &str| symbol(&vm, name).addr;
    assert_eq!(
        (k.base, k.end),
        (0xffff_8000_8001_0000, at("_etext")),
        "no Thumb bit masking of 64-bit bounds"
    );
    let img = ElfImage::load_kernel(&vm, false, None).unwrap();
    let mut res = crate::resolve::Resolver::new(
        Default::default(),
        None,
        Some((vm.clone(), img)),
        &ModuleSnapshot::default(),
    );
    let s = |pc| Record::Sample { pc, event: 0 };
    let recs = [
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 0,
            tgid: 0,
            app_cookie: 0,
        },
        Record::KernelEnter,
        Record::TraceBegin,
        s(at("after_data")),
        s(at("after_b")),  // entered by `b`: named by itself
        s(at("after_bl")), // after `bl`: its caller, _start
    ];
    let st = crate::input::stream::Stream::from_bytes(&stream8(&recs), 8).unwrap();
    let r = report::build(
        &st,
        &mut res,
        &[],
        report::Options {
            lines: false,
            flame: true,
        },
    )
    .unwrap();
    assert_eq!(
        (
            r.kernel,
            r.rows[0].image.as_str(),
            r.rows[0].symbol.as_str()
        ),
        (1, "vmlinux", "after_data")
    );
    assert_eq!(r.folded.lines(), ["[kernel];_start;after_b;after_data 1"]);
}

/// `objdump -d` of `func` in `exe`: (address, mnemonic) per instruction.
fn objdump(exe: &Path, func: &str) -> Vec<(u64, String)> {
    let out = Command::new("aarch64-linux-gnu-objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(exe)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let body = text.split(&format!("<{func}>:\n")).nth(1).unwrap();
    body.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (a, rest) = l.split_once(':')?;
            Some((
                u64::from_str_radix(a.trim(), 16).ok()?,
                rest.split_whitespace().next()?.to_string(),
            ))
        })
        .collect()
}

#[test]
fn annotate_disassembles_a64() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let exe = ARM64.build(d, "prog.c", PROG, &["-g", "-O2", "-no-pie"], "prog");
    let img = ElfImage::load(&exe, true).unwrap();
    let Sym {
        addr: hot, size, ..
    } = symbol(&exe, "hot");
    let want = objdump(&exe, "hot");
    let got = disasm::disassemble(&img, hot..hot + size).unwrap();
    let got: Vec<(u64, String)> = got
        .iter()
        .map(|i| {
            (
                i.addr,
                i.text.split_whitespace().next().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(got, want, "capstone's A64 against objdump");
    // 30 samples on hot's third instruction, through an 8-byte stream.
    let s = Record::Sample {
        pc: file_offset(&exe, hot + 8),
        event: 0,
    };
    let mut recs = vec![
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 1,
            tgid: 1,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
    ];
    recs.extend(std::iter::repeat_n(s, 30));
    std::fs::write(d.join("s.buf"), stream8(&recs)).unwrap();
    std::fs::write(d.join("s.images"), "1 /bin/prog\n").unwrap();
    let inputs = Inputs {
        buffer: Some(d.join("s.buf")),
        images: Some(d.join("s.images")),
        image_path: vec![d.to_path_buf()],
        word_size: Some(8),
        ..Default::default()
    };
    let mut p = inputs
        .load(Want {
            lines: true,
            kernel_lines: false,
            keys: Default::default(),
        })
        .unwrap();
    let o = annotate::Options {
        symbol: Some("hot".into()),
        image: None,
        source: false,
        assembly: true,
        threshold: 0.0,
        hot: 10.0,
        limit: 0,
        source_dirs: vec![],
    };
    let r = annotate::build(&mut p, &o).unwrap();
    let sym = &r.symbols[0];
    assert_eq!((sym.symbol.as_str(), sym.samples), ("hot", 30));
    assert!(sym.instructions.iter().all(|i| i.isa == Isa::Arm64));
    assert_eq!(
        sym.instructions
            .iter()
            .find(|i| i.addr == hot + 8)
            .unwrap()
            .samples,
        30
    );
    assert!(
        annotate::render(&r, &o).contains("-- assembly (arm64"),
        "{}",
        annotate::render(&r, &o)
    );
}
