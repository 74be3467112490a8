//! Call-chain frames entered without a call ([`SymbolTable::frame_address`]): ARM syscall
//! chains of a real stream (`testdata/virt-a15-run.*`, whose kernel symbols are
//! `virt-a15-run.kallsyms`: the System.map lines of the kernel that recorded it for every
//! kernel word of the stream, the next symbol, and the linker's text markers) and real ARM/Thumb
//! code built with `arm-linux-gnueabihf-gcc`: return addresses set by hand, `noreturn` calls as
//! a function's last instruction, size-less assembler symbols and aliases at one address.

use crate::aggregate;
use crate::input::stream::Stream;
use crate::resolve::elf::ElfImage;
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::kallsyms::Kallsyms;
use crate::resolve::symbols::SymbolTable;
use crate::resolve::{self, Resolver, Space};
use crate::tests::streaming::testdata;
use crate::view::report::{self, Options};
use std::path::Path;
use std::process::Command;

/// `ret_fast_syscall` in the kernel of the test stream (after `cpu_v7_reset` and its aliases,
/// 0xc0100044 + 0x1c).
const RET_FAST_SYSCALL: u64 = 0xc010_0060;

fn kernel_table() -> SymbolTable {
    let text = std::fs::read_to_string(testdata("virt-a15-run.kallsyms")).unwrap();
    Kallsyms::parse(&text, "virt-a15-run.kallsyms")
        .unwrap()
        .kernel_table()
        .unwrap()
}

#[test]
fn syscall_chains_of_a_real_stream_read_ret_fast_syscall() {
    let table = kernel_table();
    assert!(table.entered_without_call(RET_FAST_SYSCALL));
    assert_eq!(
        table.lookup(RET_FAST_SYSCALL - 1).unwrap().name,
        "cpu_ca15_reset",
        "the old label (an alias)"
    );
    let bytes = std::fs::read(testdata("virt-a15-run.buf")).unwrap();
    let images = ImageMap::parse(
        &std::fs::read(testdata("virt-a15-run.images")).unwrap(),
        "images",
    )
    .unwrap();
    let mut snap = ModuleSnapshot::default();
    snap.add_proc_modules(
        &std::fs::read_to_string(testdata("virt-a15-run.proc_modules")).unwrap(),
        "pm",
    )
    .unwrap();
    let vm = ElfImage::from_symbols(Path::new("kallsyms"), table.clone(), vec![]);
    let mut res = Resolver::new(
        resolve::Options::default(),
        Some(images),
        Some(("kallsyms".into(), vm)),
        &snap,
    );

    // Independently of the resolver: kernel frames at ret_fast_syscall, and every other kernel
    // frame keeps the `- 1` rule.
    let st = Stream::from_bytes(&bytes, 4).unwrap();
    let decoded = crate::input::stream::decode(&st).unwrap();
    let (mut syscall_chains, mut others) = (0u64, 0u64);
    for s in &decoded.samples {
        let mut has = false;
        for f in &s.frames {
            if f.in_kernel != Some(true) {
                continue;
            }
            let l = res.frame(f, s);
            let (_, name) = res.names(l);
            if f.pc == RET_FAST_SYSCALL {
                assert_eq!(name, "ret_fast_syscall");
                has = true;
            } else {
                let want = table
                    .lookup(f.pc - 1)
                    .map_or("(no symbols)", |x| x.name.as_str());
                assert_eq!(name, want, "frame {:#x}: the - 1 rule", f.pc);
                others += 1;
            }
        }
        syscall_chains += u64::from(has);
    }
    assert!(
        syscall_chains > 100 && others > 1000,
        "{syscall_chains} syscall chains, {others} other kernel frames"
    );

    // The report's call graph: no reset function, ret_fast_syscall calls the handlers.
    let agg = aggregate::read(
        std::io::Cursor::new(&bytes),
        4,
        aggregate::Options {
            app: true,
            task: false,
        },
        Default::default(),
    )
    .unwrap();
    let r = report::build_counts(
        &agg,
        &mut res,
        &[],
        Options {
            lines: false,
            flame: true,
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    assert!(
        cg.iter().all(|e| !e.symbol.ends_with("_reset")),
        "a *_reset frame is left"
    );
    let rfs = cg
        .iter()
        .find(|e| e.symbol == "ret_fast_syscall")
        .expect("ret_fast_syscall in the call graph");
    assert!(
        rfs.total >= syscall_chains,
        "total {} < {syscall_chains} chains",
        rfs.total
    );
    let handlers: Vec<&str> = rfs.callees.iter().map(|a| a.symbol.as_str()).collect();
    assert!(
        handlers.iter().any(|h| h.starts_with("sys_")),
        "callees {handlers:?}"
    );
    assert!(
        r.folded
            .lines()
            .iter()
            .any(|l| l.contains(";ret_fast_syscall;sys_")),
        "flame stacks"
    );
    assert!(
        r.folded.lines().iter().all(|l| !l.contains("_reset;")),
        "flame stacks"
    );
}

/// ARM and Thumb code with hand-set return addresses (`adr lr, X; bx r3`), `noreturn` calls as
/// a function's last instruction, a size-less function and aliases at one address.
const ASM: &str = r#"
    .syntax unified
    .text
    .arm
    .global cpu_v7_reset
    .type cpu_v7_reset, %function
cpu_v7_reset:
    mov r1, r0
    bx r0
    .size cpu_v7_reset, . - cpu_v7_reset
    .global cpu_ca9mp_reset
    .type cpu_ca9mp_reset, %function
    .set cpu_ca9mp_reset, cpu_v7_reset
    .global ret_fast
    .type ret_fast, %function
ret_fast:                @ size-less (assembler routine)
    nop
    bx lr
    .global dispatch
    .type dispatch, %function
dispatch:
    adr lr, ret_fast
    bx r3
    .size dispatch, . - dispatch
    .global dies
    .type dies, %function
dies:
    push {r4, lr}
    bl abort             @ noreturn: its return address is the next function's start
    .size dies, . - dies
    .global after_dies
    .type after_dies, %function
after_dies:
    bx lr
    .size after_dies, . - after_dies
    .thumb
    .global t_before
    .type t_before, %function
    .thumb_func
t_before:
    bx r0
    .size t_before, . - t_before
    .global t_ret
    .type t_ret, %function
    .thumb_func
t_ret:
    nop
    bx lr
    .size t_ret, . - t_ret
    .global t_dies
    .type t_dies, %function
    .thumb_func
t_dies:
    push {r4, lr}
    bl abort
    .size t_dies, . - t_dies
    .global t_after
    .type t_after, %function
    .thumb_func
t_after:
    blx r3
    .size t_after, . - t_after
    .global t_next
    .type t_next, %function
    .thumb_func
t_next:
    bx lr
    .size t_next, . - t_next
    .arm
    .global main
    .type main, %function
main:
    mov r0, #0
    bx lr
    .size main, . - main
    .section .note.GNU-stack, "", %progbits
"#;

#[test]
fn user_frames_entered_without_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("frames.S");
    std::fs::write(&src, ASM).unwrap();
    let exe = dir.path().join("frames");
    let st = Command::new("arm-linux-gnueabihf-gcc")
        .args(["-no-pie", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("arm-linux-gnueabihf-gcc (scripts/setup-host.sh)");
    assert!(st.success());
    let img = ElfImage::load(&exe, false).unwrap();
    let data = std::fs::read(&exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let addr = |name: &str| {
        use object::{Object, ObjectSymbol};
        f.symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("{name}"))
            .address()
            & !1
    };
    let t = &img.symbols;
    // The code before each symbol start: `bx r0` and data/literals are no calls; `bl` and
    // `blx r3` are.
    assert!(
        t.entered_without_call(addr("ret_fast")),
        "after bx r0 (ARM)"
    );
    assert!(t.entered_without_call(addr("t_ret")), "after bx r0 (Thumb)");
    assert!(
        !t.entered_without_call(addr("after_dies")),
        "after bl abort (ARM)"
    );
    assert!(
        !t.entered_without_call(addr("t_after")),
        "after bl abort (Thumb)"
    );
    assert!(
        !t.entered_without_call(addr("t_next")),
        "after blx r3 (Thumb)"
    );

    // Frames through the resolver: return address = file offset in image 1.
    let images = ImageMap::parse(b"1 /bin/frames\n", "images").unwrap();
    let opts = resolve::Options {
        image_path: vec![dir.path().to_path_buf()],
        ..Default::default()
    };
    let mut res = Resolver::new(opts, Some(images), None, &ModuleSnapshot::default());
    let text = object::Object::segments(&f)
        .find(|g| object::ObjectSegment::address(g) <= addr("main"))
        .unwrap();
    let off = |va: u64| {
        va - object::ObjectSegment::address(&text) + object::ObjectSegment::file_range(&text).0
    };
    let space = Space::User {
        cookie: Some(1),
        app: None,
        tgid: None,
    };
    let mut frame = |va: u64| {
        let l = res.resolve(space, off(va), true);
        res.names(l).1.to_string()
    };
    assert_eq!(frame(addr("ret_fast")), "ret_fast", "hand-set lr (ARM)");
    assert_eq!(frame(addr("t_ret")), "t_ret", "hand-set lr (Thumb)");
    assert_eq!(frame(addr("after_dies")), "dies", "noreturn call (ARM)");
    assert_eq!(frame(addr("t_after")), "t_dies", "noreturn call (Thumb)");
    assert_eq!(
        frame(addr("t_next")),
        "t_after",
        "blx r3 as the last instruction"
    );
    // Ordinary return addresses inside a function, and the alias rule at one address.
    // `.set` gives the alias the same size (as in vmlinux): Symbol::alias_key's name order
    // picks, as it does among kallsyms' size-less aliases.
    assert_eq!(
        frame(addr("cpu_v7_reset") + 4),
        "cpu_ca9mp_reset",
        "aliases at one address"
    );
    assert_eq!(
        frame(addr("ret_fast") + 4),
        "ret_fast",
        "inside the size-less function"
    );
    assert_eq!(frame(addr("dispatch") + 4), "dispatch");
    assert_eq!(
        frame(addr("dies")),
        "dies",
        "after dispatch's bx r3: entered without a call"
    );
}
