//! The AArch64 unwinder on real stacks: a C program built with `aarch64-linux-gnu-gcc` (no
//! frame pointers) captures its own registers (x0–x30, SP, PC, NZCV) and stack in `leaf`
//! (reached from `caller_a`, `caller_b`, and glibc's `qsort` through a comparison callback)
//! under `qemu-aarch64` user mode, and the chains unwound from those captures are checked frame
//! by frame against `objdump`; then damaged snapshots, a program without tables, and the
//! stream stage ([`super::expand`]) on an 8-byte-word stream.

use super::a64::{Chain64, Regs64, Stack64};
use super::expand;
use super::maps::ProcessImages;
use super::test_target::{frame_names, ARM64};
use super::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test program (unwind/capture.c with AArch64's register block): x0-x30, SP, PC, NZCV.
const SRC: &str = concat!(
    r#"#define NREGS 34
#define SP_REG 31
#define REG_FMT "%016lx\n"
#define STACK_BYTES 32768
/* x0-x30 first, then SP as it is at label 1, whose address is the PC (x9 is scratch). */
#define CAPTURE(r) __asm__ volatile(					\
		"stp x0, x1, [%0, #0]\n\t"				\
		"stp x2, x3, [%0, #16]\n\t"				\
		"stp x4, x5, [%0, #32]\n\t"				\
		"stp x6, x7, [%0, #48]\n\t"				\
		"stp x8, x9, [%0, #64]\n\t"				\
		"stp x10, x11, [%0, #80]\n\t"				\
		"stp x12, x13, [%0, #96]\n\t"				\
		"stp x14, x15, [%0, #112]\n\t"				\
		"stp x16, x17, [%0, #128]\n\t"				\
		"stp x18, x19, [%0, #144]\n\t"				\
		"stp x20, x21, [%0, #160]\n\t"				\
		"stp x22, x23, [%0, #176]\n\t"				\
		"stp x24, x25, [%0, #192]\n\t"				\
		"stp x26, x27, [%0, #208]\n\t"				\
		"stp x28, x29, [%0, #224]\n\t"				\
		"str x30, [%0, #240]\n\t"					\
		"mov x9, sp\n\t"					\
		"str x9, [%0, #248]\n\t"					\
		"1: adr x9, 1b\n\t"					\
		"str x9, [%0, #256]\n\t"					\
		"mrs x9, nzcv\n\t"					\
		"str x9, [%0, #264]\n\t"					\
		: : "r"(r) : "x9", "memory")
"#,
    include_str!("capture.c")
);

/// Builds the test program with `flags` in `dir` as `name`.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    ARM64.build(dir, name, SRC, flags)
}

/// What the program wrote.
struct Capture {
    regs: Regs64,
    stack: Vec<u8>,
    maps: String,
}

/// Runs `exe` under qemu-aarch64 taking path `mode` to `leaf`.
fn capture(exe: &Path, mode: &str) -> Capture {
    capture_on(exe, mode, "max")
}

/// [`capture`] on QEMU's CPU model `cpu` (`max` has pointer authentication, `cortex-a53` not).
fn capture_on(exe: &Path, mode: &str, cpu: &str) -> Capture {
    let cap = ARM64.capture(exe, mode, &["-cpu", cpu]);
    Capture {
        regs: Regs64::from_words(&cap.words).unwrap(),
        stack: cap.stack,
        maps: cap.maps,
    }
}

/// The host file of a target path: itself, else the sysroot's `lib/` copy.
pub(super) fn host_file(path: &str) -> PathBuf {
    ARM64.host_file(path)
}

fn images(cap: &Capture) -> ProcessImages {
    ARM64.images(&cap.maps)
}

fn unwind(cap: &Capture, procs: &ProcessImages) -> Chain64 {
    Unwinder::new(64).unwind_a64(
        procs,
        &cap.regs,
        &Stack64 {
            sp: cap.regs.sp,
            bytes: &cap.stack,
        },
    )
}

/// Each frame named `SYMBOL` (the program's symbols) or `lib:BASENAME` (other images).
fn names(chain: &Chain64, procs: &ProcessImages, exe: &Path) -> Vec<String> {
    frame_names(chain.frames.iter().copied(), procs, exe)
}

/// The program's instructions by ELF address, from `aarch64-linux-gnu-objdump -d`.
fn objdump(exe: &Path) -> BTreeMap<u64, String> {
    let out = Command::new("aarch64-linux-gnu-objdump")
        .arg("-d")
        .arg(exe)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(":\t")?;
            Some((u64::from_str_radix(a.trim(), 16).ok()?, rest.to_string()))
        })
        .collect()
}

/// The build variants: `.eh_frame` only (gcc's default on AArch64), `.debug_frame` only, and
/// -O0 (x29-based CFA rules).
const VARIANTS: [(&str, &[&str]); 3] = [
    ("o2", &["-O2", "-fomit-frame-pointer"]),
    (
        "o2-debug-frame",
        &[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    ),
    ("o0g", &["-O0", "-g"]),
];

/// The chain of `mode` in `exe`, checked: frames named as expected (libc frames as
/// `lib:libc.so.6`; for qsort at least one between `cmp` and `main`), ending at crt1.o's
/// `_start` (`cfi_undefined x30`: outermost); the sampled PC first; every program return
/// address right after a `bl`/`blr` (objdump) that calls the frame before it.
fn check_chain(exe: &Path, mode: &str) {
    let cap = capture(exe, mode);
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    let got = names(&chain, &procs, exe);
    let ctx = format!("{} {mode}: {got:?} {chain:x?}", exe.display());
    let libc = "lib:libc.so.6";
    let mut want = vec![
        "leaf",
        if mode == "a" {
            "caller_a"
        } else if mode == "b" {
            "caller_b"
        } else {
            "cmp"
        },
    ];
    if mode == "q" {
        let k = got.iter().skip(2).take_while(|n| *n == libc).count();
        assert!(k >= 1, "qsort's frames: {ctx}");
        want.extend(std::iter::repeat_n(libc, k));
    }
    want.extend(["main", libc, libc, "_start"]);
    assert_eq!(got, want, "{ctx}");
    assert_eq!(
        (chain.frames[0], chain.end),
        (cap.regs.pc, End::Outermost),
        "{ctx}"
    );
    let code = objdump(exe);
    for (i, &f) in chain.frames.iter().enumerate().skip(1) {
        let place = procs.find(f).unwrap();
        if place.tables.path != exe {
            continue;
        }
        let call = code
            .get(&(place.elf_addr - 4))
            .unwrap_or_else(|| panic!("frame {i}: {ctx}"));
        assert!(
            call.contains("\tbl\t") || call.contains("\tblr\t"),
            "frame {i} follows {call:?}: {ctx}"
        );
        if !got[i - 1].starts_with("lib:") {
            assert!(
                call.ends_with(&format!("<{}>", got[i - 1])),
                "frame {i}: {call:?} {ctx}"
            );
        }
    }
}

#[test]
fn a64_chains_through_callers_and_qsort() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in VARIANTS {
        let exe = build(dir.path(), name, flags);
        for mode in ["a", "b", "q"] {
            check_chain(&exe, mode);
        }
    }
}

/// `-mbranch-protection=pac-ret`: on a core with pointer authentication the saved return
/// addresses carry a PAC, and the chain ends at the sampled PC ([`End::Unsupported`]) rather
/// than strip bits by a guessed address size; on a Cortex-A53 (`paciasp` is a NOP) the same
/// binary's signed-state CFI rows give plain addresses and the whole chain.
#[test]
fn a64_pointer_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "pac",
        &["-O2", "-fomit-frame-pointer", "-mbranch-protection=pac-ret"],
    );
    // The PAC (bits 48-54 with Linux's top-byte-ignore) is 0 in 1 of 128 runs: the keys are
    // random per process, so run again.
    let cap = (0..8)
        .map(|_| capture_on(&exe, "a", "max"))
        .find(|c| c.regs.x[30] >> 48 != 0)
        .unwrap();
    let c = unwind(&cap, &images(&cap));
    assert_eq!((c.frames.len(), c.end), (1, End::Unsupported), "{c:x?}");
    let cap = capture_on(&exe, "a", "cortex-a53");
    let procs = images(&cap);
    let c = unwind(&cap, &procs);
    assert_eq!(
        names(&c, &procs, &exe),
        [
            "leaf",
            "caller_a",
            "main",
            "lib:libc.so.6",
            "lib:libc.so.6",
            "_start"
        ]
    );
    assert_eq!(c.end, End::Outermost);
}

/// Damaged snapshots end the chain with the reason, never with an invented frame: a stack
/// copy cut below the saved registers, a saved return address that follows no call, one in no
/// mapping, and a program whose tables were removed.
#[test]
fn a64_damage_ends_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2", VARIANTS[0].1);
    let cap = capture(&exe, "a");
    let procs = images(&cap);
    let good = unwind(&cap, &procs);
    assert!(good.frames.len() >= 6, "{good:x?}");
    // Only 8 bytes of stack: leaf's saved x29/x30 are outside.
    let short = Unwinder::new(64).unwind_a64(
        &procs,
        &cap.regs,
        &Stack64 {
            sp: cap.regs.sp,
            bytes: &cap.stack[..8],
        },
    );
    assert_eq!((short.frames.len(), short.end), (1, End::StackOutside));
    // Where leaf saved caller_a's return address: replace it (the doubleword equal to it).
    let slot = (0..cap.stack.len() / 8)
        .find(|&k| cap.stack[8 * k..8 * k + 8] == good.frames[1].to_le_bytes())
        .unwrap();
    let with = |ra: u64| {
        let mut s = cap.stack.clone();
        s[8 * slot..8 * slot + 8].copy_from_slice(&ra.to_le_bytes());
        Unwinder::new(64).unwind_a64(
            &procs,
            &cap.regs,
            &Stack64 {
                sp: cap.regs.sp,
                bytes: &s,
            },
        )
    };
    assert_eq!(
        (
            with(good.frames[1] + 4).frames.len(),
            with(good.frames[1] + 4).end
        ),
        (1, End::NotACall)
    );
    assert_eq!(with(good.frames[1] + 2).end, End::NotACall, "misaligned");
    assert_eq!(with(0x10).end, End::NoMapping);
    assert_eq!(with(0).end, End::Outermost);
    // The depth bound.
    let c = Unwinder::new(3).unwind_a64(
        &procs,
        &cap.regs,
        &Stack64 {
            sp: cap.regs.sp,
            bytes: &cap.stack,
        },
    );
    assert_eq!((&c.frames[..], c.end), (&good.frames[..3], End::Depth));
    // No .eh_frame: no unwind info at the sampled PC.
    let bare = dir.path().join("bare");
    let st = Command::new("aarch64-linux-gnu-objcopy")
        .args([
            "--remove-section=.eh_frame",
            "--remove-section=.eh_frame_hdr",
        ])
        .arg(&exe)
        .arg(&bare)
        .status();
    assert!(st.unwrap().success());
    let mut procs = images(&cap);
    let i = procs.images.iter().position(|t| t.path == exe).unwrap();
    procs.images[i] = ImageTables::load(&bare).unwrap();
    let c = unwind(&cap, &procs);
    assert_eq!(
        (c.frames.len(), c.end),
        (1, End::NoUnwindInfo { pc: cap.regs.pc })
    );
}

/// A program whose CFI is only in `.debug_frame` (no `.eh_frame` FDEs of its own), stripped:
/// no unwind information at the sampled PC; with its separate debug file
/// (`objcopy --only-keep-debug`) as a second table source the chain is whole again.
#[test]
fn a64_debug_frame_from_a_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "df", VARIANTS[1].1);
    let (stripped, debug) = (dir.path().join("df.stripped"), dir.path().join("df.debug"));
    let objcopy = |args: &[&str], out: &Path| {
        let st = Command::new("aarch64-linux-gnu-objcopy")
            .args(args)
            .arg(&exe)
            .arg(out)
            .status();
        assert!(st.unwrap().success());
    };
    objcopy(&["--only-keep-debug"], &debug);
    objcopy(&["--strip-debug"], &stripped);
    let cap = capture(&exe, "a");
    let mut procs = images(&cap);
    let i = procs.images.iter().position(|t| t.path == exe).unwrap();
    procs.images[i] = ImageTables::load(&stripped).unwrap();
    let c = unwind(&cap, &procs);
    assert_eq!(
        (c.frames.len(), c.end),
        (1, End::NoUnwindInfo { pc: cap.regs.pc })
    );
    procs.images[i].add_debug_file(&debug).unwrap();
    let c = unwind(&cap, &procs);
    assert_eq!((c.frames.len(), c.end), (6, End::Outermost), "{c:x?}");
    assert_eq!(
        c,
        unwind(&cap, &images(&cap)),
        "the same chain as the unstripped program's"
    );
}

/// An 8-byte-word stream with the module's USER_MAPS and USER_STACK records (34 registers):
/// [`expand::expand`] appends the unwinder's callers as frames.
#[test]
fn a64_snapshots_expand_in_8_byte_streams() {
    use crate::input::stream::{decode, Frame as StreamFrame, Stream};
    use oprofile_common::event::{user_maps_header, user_stack_header, Record as R};
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2", VARIANTS[0].1);
    let cap = capture(&exe, "b");
    let mut paths: Vec<String> = vec![];
    let maps = super::tests::exec_maps(&cap.maps, &mut paths);
    assert!(
        !maps.is_empty() && maps.iter().all(|m| m.0 > u64::from(u32::MAX)),
        "mappings above 4 GiB parse: {maps:x?}"
    );
    let place = |a: u64| {
        maps.iter()
            .find(|m| m.0 <= a && a < m.1)
            .map(|m| (m.3, m.2 + a - m.0))
            .unwrap()
    };
    let (cookie, offset) = place(cap.regs.pc);
    let mut words: Vec<u64> = vec![];
    let rec = |w: &mut Vec<u64>, r: R| {
        let mut b = [0usize; 8];
        let n = r.encode(&mut b).unwrap();
        w.extend(b[..n].iter().map(|&x| x as u64));
    };
    rec(&mut words, R::CpuSwitch { cpu: 0 });
    rec(
        &mut words,
        R::CtxSwitch {
            pid: 9,
            tgid: 9,
            app_cookie: 1,
        },
    );
    rec(&mut words, R::KernelExit);
    rec(&mut words, R::TraceBegin);
    rec(&mut words, R::CookieSwitch { cookie });
    rec(
        &mut words,
        R::Sample {
            pc: offset,
            event: 0,
        },
    );
    words.extend(user_maps_header(9, maps.len()).iter().map(|&w| w as u64));
    words.extend(maps.iter().flat_map(|m| [m.0, m.1, m.2, m.3]));
    let stack: Vec<u64> = cap
        .stack
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    words.extend(user_stack_header(stack.len()).iter().map(|&w| w as u64));
    words.extend(cap.regs.x);
    words.extend([cap.regs.sp, cap.regs.pc, cap.regs.pstate]);
    words.extend(&stack);
    // An AArch32 (compat) task's snapshot: not unwound, counted.
    rec(&mut words, R::TraceBegin);
    rec(
        &mut words,
        R::Sample {
            pc: offset,
            event: 0,
        },
    );
    words.extend(user_stack_header(stack.len()).iter().map(|&w| w as u64));
    words.extend(cap.regs.x);
    words.extend([cap.regs.sp, cap.regs.pc, 0x10]);
    words.extend(&stack);
    rec(
        &mut words,
        R::CtxSwitch {
            pid: 10,
            tgid: 10,
            app_cookie: 0,
        },
    );
    assert!(expand::has_snapshots(&words, 8));
    let load = &mut |id: u64| {
        paths
            .get(id as usize - 1)
            .map(|p| ImageTables::load(&host_file(p)).unwrap())
    };
    let (out, stats) = expand::expand(&words, 8, Some(64), load).unwrap();
    super::expanding::assert_streams_alike(&words, 8, Some(64), load);
    let bytes: Vec<u8> = out.iter().flat_map(|&w| w.to_le_bytes()).collect();
    let d = decode(&Stream::from_bytes(&bytes, 8).unwrap()).unwrap();
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    assert_eq!(
        names(&chain, &procs, &exe)[..3],
        ["leaf", "caller_b", "main"]
    );
    let want: Vec<StreamFrame> = chain.frames[1..]
        .iter()
        .map(|&f| {
            let (c, o) = place(f);
            StreamFrame {
                pc: o,
                in_kernel: Some(false),
                cookie: Some(c),
            }
        })
        .collect();
    assert_eq!(d.samples.len(), 2);
    assert_eq!(d.samples[0].frames, want);
    assert!(d.samples[1].frames.is_empty(), "compat task: no frames");
    assert_eq!(
        (stats.snapshots, stats.frames, stats.no_maps),
        (2, want.len() as u64, 0)
    );
    assert_eq!(
        (stats.ends.get("outermost"), stats.ends.get("compat task")),
        (Some(&1), Some(&1)),
        "{stats:?}"
    );

    // The same stream through `Inputs::load` and the report: leaf's callers are named in the
    // call graph. The images are the files qemu mapped (`host_file`): `--sysroot /`, then the
    // cross sysroot by basename. (qemu-aarch64's ld.so takes the host's
    // /usr/lib/aarch64-linux-gnu/libc.so.6 when that exists, a build other than the cross
    // package's: with the other file the return into libc is no call, and the chain ends.)
    let buf = dir.path().join("s.buf");
    std::fs::write(
        &buf,
        words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let list: String = paths
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{} {p}\n", i + 1))
        .collect();
    std::fs::write(dir.path().join("s.images"), list).unwrap();
    let inputs = crate::aggregate::inputs::Inputs {
        buffer: Some(buf),
        images: Some(dir.path().join("s.images")),
        sysroot: Some(PathBuf::from("/")),
        image_path: vec![Path::new(ARM64.sysroot).join("lib")],
        word_size: Some(8),
        backtrace_depth: Some(64),
        ..Default::default()
    };
    let mut p = inputs
        .load(crate::aggregate::inputs::Want::default())
        .unwrap();
    let r = crate::view::report::build_counts(
        &p.counts,
        &mut p.res,
        &p.counters,
        crate::view::report::Options {
            lines: false,
            flame: true,
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    let leaf = cg.iter().find(|e| e.symbol == "leaf").unwrap();
    assert_eq!(
        (leaf.callers[0].symbol.as_str(), leaf.callers[0].samples),
        ("caller_b", 1),
        "{cg:#?}"
    );
    let main = cg.iter().find(|e| e.symbol == "main").unwrap();
    assert_eq!(
        main.callers.len(),
        1,
        "libc's start code: {cg:#?} {:#?}",
        r.warnings
    );
    let full = |l: &&String| {
        l.starts_with("[unknown];_start [o2];")
            && l.ends_with(";main [o2];caller_b [o2];leaf [o2] 1")
            && l.matches(" [libc.so.6];").count() == 2
    };
    assert!(
        r.folded.lines().iter().any(|l| full(&l)),
        "{:?}",
        r.folded.lines()
    );
    let note =
        "user stack snapshots: 2 unwound into 5 frames; chains ended: 1 compat task, 1 outermost;";
    assert!(
        r.warnings.iter().any(|w| w.starts_with(note)),
        "{:?}",
        r.warnings
    );
}
