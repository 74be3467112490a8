//! End-to-end tests on real ARM ELF files built at test time with `arm-linux-gnueabihf-gcc`
//! (installed by `scripts/setup-host.sh`): executables, a stripped shared library, and an
//! `ET_REL` object placed as a kernel module, through the stream → report pipeline.

use crate::fixtures::stream;
use crate::resolve::elf::ElfImage;
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::{self, Resolver};
use crate::tests::programs::{a32_bl, file_offset, return_address_of_bl, symbol, Sym, ARMHF};
use crate::view::report::{self, View};
use oprofile_common::event::Record;

use std::process::Command;

/// The 1-based line of the first line of `src` containing `marker`.
fn line_of(src: &str, marker: &str) -> u32 {
    src.lines().position(|l| l.contains(marker)).expect(marker) as u32 + 1
}

const PROG: &str = r#"static volatile int sink;
__attribute__((noinline)) int hot(int x) { /* hot-begin */
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i * i;
    return s;
} /* hot-end */
int main(void) { /* main-begin */
    sink = hot(100);
    return 0;
} /* main-end */
"#;

#[test]
fn executable_offsets_symbols_lines_callgraph_and_flame() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    let exe = ARMHF.build(
        dir.path(),
        "prog.c",
        PROG,
        &["-no-pie"],
        "root/usr/bin/prog",
    );

    let Sym {
        addr: hot,
        size: hot_size,
        ..
    } = symbol(&exe, "hot");
    assert!(
        hot >= 0x1_0000,
        "non-PIE: vaddr {hot:#x} differs from its file offset"
    );
    let hot_off = file_offset(&exe, hot);
    assert_ne!(hot, hot_off);
    let ret = return_address_of_bl(&exe, "main", hot, a32_bl);
    let ret_off = file_offset(&exe, ret);

    // ElfImage alone: offset → vaddr, symbol, source line.
    let img = ElfImage::load(&exe, true).unwrap();
    assert_eq!(img.offset_to_vaddr(hot_off + 8), Some(hot + 8));
    assert_eq!(img.symbols.lookup(hot + 8).unwrap().name, "hot");
    assert!(img
        .symbols
        .lookup(hot + hot_size)
        .is_none_or(|s| s.name != "hot"));
    let src = img.source(hot + 8).expect("line of hot+8");
    assert!(src.file.ends_with("prog.c"), "{src:?}");
    let l = src.line.unwrap();
    assert!(
        (line_of(PROG, "hot-begin")..=line_of(PROG, "hot-end")).contains(&l),
        "hot+8 at line {l}"
    );
    let main_src = img.source(ret - 1).unwrap();
    assert_eq!(
        main_src.line,
        Some(line_of(PROG, "sink = hot(100)")),
        "the call's line"
    );
    // Compressed debug sections (SHF_COMPRESSED, as kernels built with
    // DEBUG_INFO_COMPRESSED) give the same lines.
    let gz = ARMHF.build(
        dir.path(),
        "prog.c",
        PROG,
        &["-no-pie", "-gz=zlib"],
        "prog-gz",
    );
    assert_eq!(
        ElfImage::load(&gz, true).unwrap().source(hot + 8),
        Some(src.clone())
    );

    // Through the stream: 3 samples in hot (2 traced, called from main), 1 in main; the
    // frames (return addresses in main) are looked up at addr - 1 and are no samples.
    let images = ImageMap::parse(b"1 /usr/bin/prog\n", "images").unwrap();
    let opts = resolve::Options {
        sysroots: vec![root.clone()],
        lines: true,
        ..Default::default()
    };
    let mut res = Resolver::new(opts, Some(images), None, &ModuleSnapshot::default());
    let s = |pc| Record::Sample { pc, event: 0 };
    let st2 = stream(&[
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 50,
            tgid: 50,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
        Record::TraceBegin,
        s(hot_off + 8),
        s(ret_off),
        Record::TraceBegin,
        s(hot_off + 12),
        s(ret_off),
        Record::CpuSwitch { cpu: 0 }, // ends the chain: the next two are ordinary samples
        Record::CookieSwitch { cookie: 1 },
        s(hot_off + 4),
        s(ret_off - 4), // the `bl hot` in main
    ]);
    let r = report::build(
        &st2,
        &mut res,
        &[],
        report::Options {
            lines: true,
            flame: true,
        },
    )
    .unwrap();
    assert_eq!((r.total, r.user, r.traced), (4, 4, 2));
    let hot_rows: Vec<_> = r.rows.iter().filter(|x| x.symbol == "hot").collect();
    assert_eq!(hot_rows.iter().map(|x| x.samples).sum::<u64>(), 3);
    assert!(hot_rows.iter().all(|x| x.image == "/usr/bin/prog"));
    for x in &hot_rows {
        let src = x.source.as_ref().unwrap();
        assert!(src.display.starts_with("prog.c:"), "{src:?}");
        assert!(
            (line_of(PROG, "hot-begin")..=line_of(PROG, "hot-end")).contains(&src.line.unwrap())
        );
    }
    let main_row = r.rows.iter().find(|x| x.symbol == "main").unwrap();
    assert_eq!(main_row.samples, 1);
    assert_eq!(
        r.images[0].path_on_host.as_deref(),
        Some(exe.to_str().unwrap())
    );
    let cg = r.callgraph.as_ref().unwrap();
    let hot_e = cg.iter().find(|e| e.symbol == "hot").unwrap();
    assert_eq!((hot_e.self_samples, hot_e.total), (3, 3));
    assert_eq!(
        (hot_e.callers[0].symbol.as_str(), hot_e.callers[0].samples),
        ("main", 2)
    );
    let main_e = cg.iter().find(|e| e.symbol == "main").unwrap();
    assert_eq!(
        (main_e.self_samples, main_e.total, main_e.callees[0].samples),
        (1, 3, 2)
    );
    let text = report::render(&r, View::Symbols, 0);
    assert!(
        text.contains("source") && text.contains("prog.c:"),
        "{text}"
    );
    assert_eq!(
        r.folded.lines(),
        ["prog;hot 1", "prog;main 1", "prog;main;hot 2"]
    );
    let svg = dir.path().join("flame.svg");
    r.folded.write_svg_file("t", &svg).unwrap();
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.contains(">hot") && svg.contains("main") && svg.contains("prog"),
        "frames missing in SVG"
    );
}

const LIB: &str = r#"static volatile int acc;
static __attribute__((noinline)) void helper(int x) { acc += x; }
int lib_work(int n) { /* lib-begin */
    for (int i = 0; i < n; i++)
        helper(i);
    return acc;
} /* lib-end */
"#;

#[test]
fn stripped_shared_library_names_exported_functions() {
    let dir = tempfile::tempdir().unwrap();
    let libdir = dir.path().join("libs");
    std::fs::create_dir(&libdir).unwrap();
    let so = ARMHF.build(
        dir.path(),
        "lib.c",
        LIB,
        &["-shared", "-fPIC"],
        "libwork.so.1.full",
    );
    let stripped = libdir.join("libwork.so.1");
    let st = Command::new("arm-linux-gnueabihf-strip")
        .arg("--strip-all")
        .arg(&so)
        .arg("-o")
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(st.success());
    let Sym { addr: work, .. } = symbol(&so, "lib_work");
    let off = file_offset(&so, work);
    let img = ElfImage::load(&stripped, true).unwrap();
    assert!(!img.has_lines());
    assert_eq!(
        img.symbols
            .lookup(img.offset_to_vaddr(off + 4).unwrap())
            .unwrap()
            .name,
        "lib_work"
    );

    // By basename in --image-path; -g shows "(no debug info)" for the stripped copy.
    let images = ImageMap::parse(
        b"7 /usr/lib/libwork.so.1\n8 /usr/lib/libgone.so\n",
        "images",
    )
    .unwrap();
    let opts = resolve::Options {
        image_path: vec![libdir.clone()],
        lines: true,
        ..Default::default()
    };
    let mut res = Resolver::new(opts, Some(images), None, &ModuleSnapshot::default());
    let s = |pc| Record::Sample { pc, event: 0 };
    let st = stream(&[
        Record::CtxSwitch {
            pid: 1,
            tgid: 1,
            app_cookie: 8,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 7 },
        s(off + 4),
        s(off + 8),
        Record::CookieSwitch { cookie: 8 },
        s(0x400),
        Record::CookieSwitch { cookie: 0 },
        s(0x7f00_1234),
    ]);
    let r = report::build(
        &st,
        &mut res,
        &[],
        report::Options {
            lines: true,
            flame: false,
        },
    )
    .unwrap();
    let row = &r.rows[0];
    assert_eq!(
        (row.image.as_str(), row.symbol.as_str(), row.samples),
        ("/usr/lib/libwork.so.1", "lib_work", 2)
    );
    assert_eq!(row.source.as_ref().unwrap().display, "(no debug info)");
    assert!(r
        .rows
        .iter()
        .any(|x| x.image == "/usr/lib/libgone.so" && x.symbol == "(image not found)"));
    assert!(r
        .rows
        .iter()
        .any(|x| x.image == "[anon] (/usr/lib/libgone.so)"));

    // The unstripped copy gives lines.
    let full = ElfImage::load(&so, true).unwrap();
    let l = full.source(work + 4).unwrap().line.unwrap();
    assert!((line_of(LIB, "lib-begin")..=line_of(LIB, "lib-end")).contains(&l));
}

const MODULE: &str = r#"volatile int mod_state;
__attribute__((noinline)) int mod_fn(int x) { /* fn-begin */
    mod_state += x * 3;
    return mod_state;
} /* fn-end */
__attribute__((section(".init.text"), noinline)) int mod_init(void) { /* init-begin */
    mod_state = 7;
    return mod_fn(1);
} /* init-end */
"#;

/// An `ET_REL` object stands in for a module: .text at 0xbf000000, .init.text at 0xbf100000.
#[test]
fn kernel_module_placed_from_sections() {
    let dir = tempfile::tempdir().unwrap();
    let kodir = dir.path().join("modules");
    std::fs::create_dir(&kodir).unwrap();
    // Module "my_mod" is found as my-mod.ko (`_`/`-` swapped).
    let ko = ARMHF.build(dir.path(), "mod.c", MODULE, &["-c"], "modules/my-mod.ko");
    let Sym {
        addr: fn_val,
        section: fn_sec,
        ..
    } = symbol(&ko, "mod_fn");
    let Sym {
        addr: init_val,
        section: init_sec,
        ..
    } = symbol(&ko, "mod_init");
    assert_eq!(
        (fn_sec.as_str(), init_sec.as_str()),
        (".text", ".init.text")
    );
    // Both sections start at 0 in the object: only placement tells them apart.
    let mut snap = ModuleSnapshot::default();
    snap.add_proc_modules(
        "my_mod 16384 0 - Live 0xbf000000 (O)\nother 4096 0 - Live 0xbf200000\n",
        "pm",
    )
    .unwrap();
    snap.add_sections(
        "my_mod .text 0xbf000000\nmy_mod .init.text 0xbf100000\nmy_mod .data 0xbf002000\n",
        "ms",
    )
    .unwrap();

    let placed = ElfImage::load_module(&ko, &snap.modules["my_mod"].sections, true, None).unwrap();
    let fn_pc = 0xbf00_0000 + fn_val + 4;
    let init_pc = 0xbf10_0000 + init_val + 4;
    assert_eq!(placed.symbols.lookup(fn_pc).unwrap().name, "mod_fn");
    assert_eq!(placed.symbols.lookup(init_pc).unwrap().name, "mod_init");
    // Relocated DWARF: each section's lines at its runtime address.
    let l = placed.source(fn_pc).unwrap().line.unwrap();
    assert!(
        (line_of(MODULE, "fn-begin")..=line_of(MODULE, "fn-end")).contains(&l),
        "mod_fn at line {l}"
    );
    let l = placed.source(init_pc).unwrap().line.unwrap();
    assert!(
        (line_of(MODULE, "init-begin")..=line_of(MODULE, "init-end")).contains(&l),
        "mod_init at line {l}"
    );
    assert!(
        ElfImage::load(&ko, false).is_err(),
        "an ET_REL is no executable"
    );

    let opts = resolve::Options {
        image_path: vec![kodir],
        lines: true,
        ..Default::default()
    };
    let mut res = Resolver::new(opts, None, None, &snap);
    let s = |pc| Record::Sample { pc, event: 0 };
    let st = stream(&[
        Record::CtxSwitch {
            pid: 1,
            tgid: 1,
            app_cookie: 0,
        },
        Record::KernelEnter,
        s(fn_pc),
        s(fn_pc),
        s(init_pc),
        s(0xbf00_3000), // in the /proc/modules range, in no placed text section
        s(0xbf20_0010), // module without a .ko
        s(0xc000_0000), // no vmlinux given
    ]);
    let r = report::build(
        &st,
        &mut res,
        &[],
        report::Options {
            lines: true,
            flame: false,
        },
    )
    .unwrap();
    let find = |img: &str, sym: &str| {
        r.rows
            .iter()
            .find(|x| x.image == img && x.symbol == sym)
            .map(|x| x.samples)
    };
    assert_eq!(find("my_mod.ko", "mod_fn"), Some(2));
    assert_eq!(find("my_mod.ko", "mod_init"), Some(1));
    assert_eq!(find("my_mod.ko", "(no symbols)"), Some(1));
    assert_eq!(find("other.ko", "(no symbols)"), Some(1));
    assert_eq!(find("(kernel, unknown)", "(no symbols)"), Some(1));
    let fn_row = r.rows.iter().find(|x| x.symbol == "mod_fn").unwrap();
    assert!(
        fn_row
            .source
            .as_ref()
            .unwrap()
            .display
            .starts_with("mod.c:"),
        "{:?}",
        fn_row.source
    );
    let m = r.images.iter().find(|x| x.image == "my_mod.ko").unwrap();
    assert_eq!(m.samples, 4);
    assert!(m.path_on_host.as_deref().unwrap().ends_with("my-mod.ko"));
    assert!(
        r.warnings.iter().any(|w| w.contains("other.ko: not found")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn unreadable_image_is_a_row_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    std::fs::write(dir.path().join("bin/bad"), b"#!/bin/sh\necho not elf\n").unwrap();
    let images = ImageMap::parse(b"5 /bin/bad (deleted)\n", "images").unwrap();
    let opts = resolve::Options {
        sysroots: vec![dir.path().into()],
        ..Default::default()
    };
    let mut res = Resolver::new(opts, Some(images), None, &ModuleSnapshot::default());
    let st = stream(&[
        Record::CtxSwitch {
            pid: 1,
            tgid: 1,
            app_cookie: 5,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 5 },
        Record::Sample { pc: 0x10, event: 0 },
    ]);
    let r = report::build(&st, &mut res, &[], report::Options::default()).unwrap();
    assert_eq!(r.rows[0].image, "/bin/bad");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("/bin/bad: deleted on the target")),
        "{:?}",
        r.warnings
    );
    assert!(
        r.rows[0].symbol.starts_with("(unreadable: not an ELF file"),
        "{}",
        r.rows[0].symbol
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("bin/bad: unreadable")),
        "{:?}",
        r.warnings
    );
}
