//! The unwinder on real stacks: a C program built with Debian's armhf flags captures its own
//! registers and stack in `leaf` (reached from `caller_a`, `caller_b`, and glibc's `qsort`
//! through a comparison callback) under `qemu-arm` user mode (package `qemu-user`), and the
//! chains unwound from those captures are checked frame by frame; plus the EHABI decoder
//! against `arm-linux-gnueabihf-readelf -u`, and the CFI reader on x86-64 code.

use super::cfi::{Cfa, Cfi, Kind, Rule};
use super::ehabi::{decode, Entry, Op};
use super::maps::ProcessImages;
use super::test_target::{frame_names, ARMHF};
use super::*;
use crate::resolve::elf::ElfImage;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test program (unwind/capture.c with ARM's register block): argv[1] picks the path to
/// `leaf` (a, b, or q for qsort), argv[2] the output directory. regs: r0-r15 and CPSR.
const SRC: &str = concat!(
    r#"#define NREGS 17
#define SP_REG 13
#define REG_FMT "%08lx\n"
#define STACK_BYTES 16384
/* r0-r12 first, then SP and LR as they are at label 1, whose address is the PC; the CPSR's T
 * bit from the compiler's mode (MRS gives no T bit). */
#ifdef __thumb__
#define T_BIT (1 << 5)
#else
#define T_BIT 0
#endif
#define CAPTURE(r) do {							\
	__asm__ volatile(						\
		"stm %0, {r0-r12}\n\t"					\
		"str sp, [%0, #52]\n\t"					\
		"str lr, [%0, #56]\n\t"					\
		"1: adr ip, 1b\n\t"					\
		"str ip, [%0, #60]\n\t"					\
		"mrs ip, apsr\n\t"					\
		"str ip, [%0, #64]\n\t"					\
		: : "r"(r) : "ip", "memory");				\
	(r)[16] |= T_BIT;						\
} while (0)
"#,
    include_str!("capture.c")
);

/// What the program wrote.
struct Capture {
    regs: Regs,
    stack: Vec<u8>,
    maps: String,
}

/// Builds the test program with `flags` in `dir` as `name`.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    ARMHF.build(dir, name, SRC, flags)
}

/// Runs `exe` under qemu-arm taking path `mode` to `leaf`: r0-r15 and CPSR.
fn capture(exe: &Path, mode: &str) -> Capture {
    let cap = ARMHF.capture(exe, mode, &[]);
    let words: Vec<u32> = cap
        .words
        .iter()
        .map(|&w| u32::try_from(w).unwrap())
        .collect();
    assert_eq!(words.len(), 17);
    let mut r = [0; 16];
    r.copy_from_slice(&words[..16]);
    Capture {
        regs: Regs { r, cpsr: words[16] },
        stack: cap.stack,
        maps: cap.maps,
    }
}

fn host_file(path: &str) -> PathBuf {
    ARMHF.host_file(path)
}

fn images(cap: &Capture) -> ProcessImages {
    ARMHF.images(&cap.maps)
}

/// Each frame named `SYMBOL` (the program's symbols) or `lib:BASENAME` (other images).
fn names(chain: &Chain, procs: &ProcessImages, exe: &Path) -> Vec<String> {
    frame_names(chain.frames.iter().map(|f| u64::from(f.addr)), procs, exe)
}

fn unwind(cap: &Capture, procs: &ProcessImages) -> Chain {
    let stack = Stack {
        sp: cap.regs.r[13],
        bytes: &cap.stack,
    };
    Unwinder::new(64).unwind(procs, &cap.regs, &stack)
}

/// The program's instructions by ELF address, from `arm-linux-gnueabihf-objdump -d`.
fn objdump(exe: &Path) -> BTreeMap<u64, String> {
    let out = Command::new("arm-linux-gnueabihf-objdump")
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

/// The build variants (Debian's default Thumb-2; ARM; EHABI tables only; -O0 with r7 frames)
/// and the table that must unwind the program's frames.
const VARIANTS: [(&str, &[&str], Via); 4] = [
    ("o2g", &["-O2", "-g"], Via::Cfi),
    ("o2g-arm", &["-O2", "-g", "-marm"], Via::Cfi),
    ("o2-exidx", &["-O2", "-funwind-tables"], Via::Ehabi),
    ("o0g", &["-O0", "-g"], Via::Cfi),
];

/// The chain of `mode` in the program `exe`, checked: frames named as expected (libc frames
/// as `lib:libc.so.6`; for qsort at least one between `cmp` and `main`), ending at crt1.o's
/// `_start` (EXIDX_CANTUNWIND); the sampled PC first; the program's frames unwound by `via`
/// and in its instruction set; every program return address right after a BL/BLX (objdump)
/// that calls the frame before it, when that is in the program.
fn check_chain(exe: &Path, mode: &str, via: Via, thumb: bool) {
    let cap = capture(exe, mode);
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    let got = names(&chain, &procs, exe);
    let ctx = format!("{} {mode}: {got:?} {chain:?}", exe.display());
    let caller = match mode {
        "a" => vec!["caller_a"],
        "b" => vec!["caller_b"],
        _ => vec!["cmp"],
    };
    let libc = "lib:libc.so.6";
    let mut want: Vec<&str> = [vec!["leaf"], caller].concat();
    if mode == "q" {
        let k = got.iter().skip(2).take_while(|n| *n == libc).count();
        assert!(k >= 1, "qsort's frames: {ctx}");
        want.extend(std::iter::repeat_n(libc, k));
    }
    want.extend(["main", libc, libc, "_start"]);
    assert_eq!(got, want, "{ctx}");
    assert_eq!(chain.end, End::CantUnwind, "{ctx}");
    assert_eq!(chain.frames[0].addr, cap.regs.r[15], "{ctx}");
    let code = objdump(exe);
    for (i, f) in chain.frames.iter().enumerate() {
        let place = procs.find(u64::from(f.addr)).unwrap();
        if place.tables.path != exe {
            assert!(
                f.via == Some(Via::Ehabi) || f.via.is_none(),
                "libc frames by libc's exidx: {ctx}"
            );
            continue;
        }
        if got[i] != "_start" {
            assert_eq!(f.via, Some(via), "frame {i}: {ctx}");
        }
        if got[i] != "_start" && got[i] != "main" {
            assert_eq!(f.thumb, thumb, "frame {i}: {ctx}");
        }
        if i == 0 {
            continue;
        }
        let call = code
            .get(&(place.elf_addr - 4))
            .unwrap_or_else(|| panic!("frame {i}: {ctx}"));
        assert!(call.contains("\tbl"), "frame {i} follows {call:?}: {ctx}");
        if !got[i - 1].starts_with("lib:") {
            assert!(
                call.ends_with(&format!("<{}>", got[i - 1])) || call.contains("blx\tr"),
                "frame {i}: {call:?} {ctx}"
            );
        }
    }
}

#[test]
fn chains_through_callers_and_qsort() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags, via) in VARIANTS {
        let exe = build(dir.path(), name, flags);
        let thumb = !flags.contains(&"-marm");
        for mode in ["a", "b", "q"] {
            check_chain(&exe, mode, via, thumb);
        }
    }
}

/// Without tables the chain ends at the sampled PC; a stripped program's chain comes back
/// with its separate debug file as a second table source.
#[test]
fn no_tables_no_guess_and_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let bare = build(dir.path(), "o2", &["-O2"]);
    let cap = capture(&bare, "a");
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    assert_eq!(names(&chain, &procs, &bare), ["leaf"]);
    assert_eq!(
        chain.end,
        End::NoUnwindInfo {
            pc: u64::from(cap.regs.r[15])
        }
    );

    // EHABI tables but no symbols: the interrupted function's start is not known (ld merges
    // identical adjacent index entries), so its frame is not proved.
    let exidx = build(dir.path(), "o2-exidx", &["-O2", "-funwind-tables"]);
    let no_syms = dir.path().join("o2-exidx-stripped");
    assert!(Command::new("arm-linux-gnueabihf-objcopy")
        .arg("--strip-all")
        .arg(&exidx)
        .arg(&no_syms)
        .status()
        .unwrap()
        .success());
    let cap = capture(&no_syms, "b");
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    assert_eq!(
        (chain.frames.len(), chain.end),
        (
            1,
            End::UnprovenLeaf {
                pc: u64::from(cap.regs.r[15])
            }
        )
    );

    let full = build(dir.path(), "o2g", &["-O2", "-g"]);
    let debug = dir.path().join("o2g.debug");
    let stripped = dir.path().join("o2g-stripped");
    for args in [
        vec![
            "--only-keep-debug".as_ref(),
            full.as_os_str(),
            debug.as_os_str(),
        ],
        vec![
            "--strip-debug".as_ref(),
            full.as_os_str(),
            stripped.as_os_str(),
        ],
    ] {
        assert!(Command::new("arm-linux-gnueabihf-objcopy")
            .args(args)
            .status()
            .unwrap()
            .success());
    }
    let cap = capture(&stripped, "b");
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    assert_eq!(
        (chain.frames.len(), chain.end),
        (
            1,
            End::NoUnwindInfo {
                pc: u64::from(cap.regs.r[15])
            }
        )
    );
    let mut procs = images(&cap);
    let i = procs
        .images
        .iter()
        .position(|t| t.path == stripped)
        .unwrap();
    procs.images[i].add_debug_file(&debug).unwrap();
    let sources: Vec<&Path> = procs.images[i]
        .sources
        .iter()
        .map(|s| s.path.as_path())
        .collect();
    assert_eq!(sources, [stripped.as_path(), debug.as_path()]);
    let chain = unwind(&cap, &procs);
    assert_eq!(
        names(&chain, &procs, &stripped),
        [
            "leaf",
            "caller_b",
            "main",
            "lib:libc.so.6",
            "lib:libc.so.6",
            "_start"
        ]
    );
    assert_eq!(chain.frames[0].via, Some(Via::Cfi));
}

/// A corrupted saved LR, a short snapshot, or a sampled PC in the prologue (EHABI) end the
/// chain where the bad value is met, with no frame made up.
#[test]
fn corrupt_stack_ends_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags, _) in [VARIANTS[0], VARIANTS[2]] {
        let exe = build(dir.path(), name, flags);
        let cap = capture(&exe, "a");
        let procs = images(&cap);
        let good = unwind(&cap, &procs);
        let ra = good.frames[1].addr | u32::from(good.frames[1].thumb);
        // The leaf's saved LR: the first stack word holding caller_a's return address.
        let slot = cap
            .stack
            .chunks_exact(4)
            .position(|w| w == ra.to_le_bytes())
            .unwrap()
            * 4;
        let with = |word: u32| {
            let mut c = Capture {
                regs: cap.regs,
                stack: cap.stack.clone(),
                maps: cap.maps.clone(),
            };
            c.stack[slot..slot + 4].copy_from_slice(&word.to_le_bytes());
            unwind(&c, &procs)
        };
        let leaf_only = |c: &Chain, end: End| {
            assert_eq!(
                c.frames.iter().map(|f| f.addr).collect::<Vec<_>>(),
                [cap.regs.r[15]],
                "{name}: {c:?}"
            );
            assert_eq!(c.end, end, "{name}: {c:?}");
        };
        // leaf's own first instruction: mapped code, not after a call.
        let leaf_start = cap.regs.r[15] & !0xF;
        let not_call = (0..64).map(|k| leaf_start - 2 * k).find(|a| {
            let p = procs.find(u64::from(*a)).unwrap();
            let b = p.tables.code(p.elf_addr - 4..p.elf_addr).unwrap();
            crate::resolve::calls::ends_in_call(b, crate::resolve::isa::Isa::Thumb) == Some(false)
                && crate::resolve::calls::ends_in_call(b, crate::resolve::isa::Isa::Arm)
                    == Some(false)
        });
        leaf_only(&with(not_call.unwrap() | 1), End::NotACall);
        leaf_only(&with(0x1234_5679), End::NoMapping);
        // The stack (rw-) is mapped, but not executable.
        leaf_only(&with(cap.regs.r[13] | 1), End::NoMapping);
        let short = Capture {
            regs: cap.regs,
            stack: cap.stack[..slot].to_vec(),
            maps: cap.maps.clone(),
        };
        leaf_only(&unwind(&short, &procs), End::StackOutside);
    }
    // EHABI at the leaf's first instruction (before its push): not proved.
    let exe = dir.path().join("o2-exidx");
    let cap = capture(&exe, "a");
    let procs = images(&cap);
    let elf = ElfImage::load(&exe, false).unwrap();
    let place = procs.find(u64::from(cap.regs.r[15])).unwrap();
    let start = elf.symbols.lookup(place.elf_addr).unwrap().addr;
    let mut regs = cap.regs;
    regs.r[15] = cap.regs.r[15] - u32::try_from(place.elf_addr - start).unwrap();
    let stack = Stack {
        sp: regs.r[13],
        bytes: &cap.stack,
    };
    let chain = Unwinder::new(64).unwind(&procs, &regs, &stack);
    assert_eq!(
        (chain.frames.len(), chain.end),
        (
            1,
            End::UnprovenLeaf {
                pc: u64::from(regs.r[15])
            }
        )
    );
    // The depth bound.
    let stack = Stack {
        sp: cap.regs.r[13],
        bytes: &cap.stack,
    };
    let chain = Unwinder::new(3).unwind(&procs, &cap.regs, &stack);
    assert_eq!((chain.frames.len(), chain.end), (3, End::Depth));
}

/// Functions whose EHABI tables use compact models 0 and 1, vpush'ed d registers, `vsp = r7`,
/// pop {r0-r3}, a generic-model entry (gcc's `__gcc_personality_v0`, from `-fexceptions` and a
/// cleanup) and `.cantunwind`.
const TABLES_SRC: &str = r#"
void g(int *p);
__attribute__((noinline)) void g(int *p) { __asm__ volatile("" : : "r"(p) : "memory"); }
int small(int x) { int a[2] = { x, x }; g(a); return a[0]; }
int big(int x) { int a[100]; a[0] = x; g(a); return a[1]; }
double fl(double x, double y) { double z = x * y; g((int *)&z); return z + x * y; }
int many(int a, int b, int c, int d) { int r = a; g(&r); g(&a); return r + a + b * c + d; }
double vfp4(double a, double b, double c, double d, double e) { double z = a * b; g((int *)&z); return z * c + d * e + a * b * c * d * e; }
int vla(int n) { int a[n]; a[0] = n; g(a); return a[n / 2]; }
__asm__(".text\n.global cant\n.type cant,%function\ncant:\n.fnstart\n.cantunwind\nbx lr\n.fnend\n.size cant,.-cant\n");
static void done(int *p) { g(p); }
int cleanup(int x) { int __attribute__((cleanup(done))) v = x; g(&v); return v + 1; }
__attribute__((visibility("hidden"))) void __gcc_personality_v0(void) {}
void _Unwind_Resume(void *p) { g(p); for (;;); }
"#;

/// Builds TABLES_SRC as a shared object with `flags`.
fn build_tables(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let all = [
        &[
            "-O2",
            "-funwind-tables",
            "-fexceptions",
            "-shared",
            "-fPIC",
            "-nostdlib",
        ],
        flags,
    ]
    .concat();
    ARMHF.build(dir, name, TABLES_SRC, &all)
}

/// readelf's text of an op.
fn readelf_text(op: Op) -> String {
    let regs = |mask: u16| {
        (0..16)
            .filter(|n| mask & (1 << n) != 0)
            .map(|n| format!("r{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match op {
        Op::VspAdd(n) => format!("vsp = vsp + {n}"),
        Op::VspSub(n) => format!("vsp = vsp - {n}"),
        Op::Pop(mask) => format!("pop {{{}}}", regs(mask)),
        Op::SetVsp(n) => format!("vsp = r{n}"),
        Op::PopVfp {
            first,
            count: 1,
            fstmx: false,
        } => format!("pop {{D{first}}}"),
        Op::PopVfp {
            first,
            count,
            fstmx: false,
        } => format!("pop {{D{first}-D{}}}", first + count - 1),
        Op::Finish => "finish".into(),
        other => format!("{other:?}"),
    }
}

/// `arm-linux-gnueabihf-readelf -u` of `file`: per function address, `cantunwind` or the ops
/// as (bytes, text) up to the first `finish`.
fn readelf_unwind(file: &Path) -> BTreeMap<u64, Vec<(Vec<u8>, String)>> {
    let out = Command::new("arm-linux-gnueabihf-readelf")
        .arg("-u")
        .arg(file)
        .output()
        .unwrap();
    let mut map: BTreeMap<u64, Vec<(Vec<u8>, String)>> = BTreeMap::new();
    let mut cur = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("0x") {
            let addr = u64::from_str_radix(
                rest.split(|c: char| !c.is_ascii_hexdigit()).next().unwrap(),
                16,
            )
            .unwrap();
            let ops = map.entry(addr).or_default();
            if line.ends_with("[cantunwind]") {
                ops.push((vec![], "cantunwind".into()));
            }
            cur = Some(addr);
        } else if let (Some(a), Some(op)) = (cur, line.strip_prefix("  0x")) {
            let mut bytes = vec![];
            let mut words = format!("0x{op}")
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
                .into_iter()
                .peekable();
            while let Some(b) = words.next_if(|w| w.len() == 4 && w.starts_with("0x")) {
                bytes.push(u8::from_str_radix(&b[2..], 16).unwrap());
            }
            let ops = map.get_mut(&a).unwrap();
            if ops.last().is_none_or(|o| o.1 != "finish") {
                ops.push((bytes, words.collect::<Vec<_>>().join(" ")));
            }
        }
    }
    map
}

type Decoded = BTreeMap<u64, Vec<(Vec<u8>, String)>>;

/// Asserts that both decodings have the same entries, naming the first differences.
fn same_entries(ours: &Decoded, readelf: &Decoded, name: &str) {
    let keys: std::collections::BTreeSet<u64> =
        ours.keys().chain(readelf.keys()).copied().collect();
    let diff: Vec<_> = keys
        .iter()
        .filter(|k| ours.get(k) != readelf.get(k))
        .take(5)
        .map(|k| (k, ours.get(k), readelf.get(k)))
        .collect();
    assert!(
        diff.is_empty(),
        "{name}: {} entries, differences (address, ours, readelf): {diff:#x?}",
        ours.len()
    );
}

/// Our decoding of every entry, in the same shape.
fn our_unwind(file: &Path) -> BTreeMap<u64, Vec<(Vec<u8>, String)>> {
    let t = ImageTables::load(file).unwrap();
    let x = t.sources[0].exidx.as_ref().unwrap();
    x.entries()
        .iter()
        .map(|&(addr, e)| {
            let ops = match e {
                Entry::CantUnwind => vec![(vec![], "cantunwind".to_string())],
                e => {
                    let bytes = x.opcodes(e).unwrap();
                    let mut at = 0;
                    let mut ops = vec![];
                    while let Some((op, n)) = decode(&bytes[at..]) {
                        ops.push((bytes[at..at + n].to_vec(), readelf_text(op)));
                        at += n;
                        if op == Op::Finish {
                            break;
                        }
                    }
                    ops
                }
            };
            (addr, ops)
        })
        .collect()
}

#[test]
fn ehabi_tables_as_readelf_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [("thumb.so", &[][..]), ("arm.so", &["-marm"][..])] {
        let so = build_tables(dir.path(), name, flags);
        let ours = our_unwind(&so);
        same_entries(&ours, &readelf_unwind(&so), name);
        // The forms the source is there for.
        let all: Vec<&String> = ours.values().flatten().map(|o| &o.1).collect();
        // gcc's frame pointer is r7 in Thumb code, r11 in ARM code.
        let isa_forms: &[&str] = if flags.is_empty() {
            &["vsp = r7", "pop {r3}"]
        } else {
            &["vsp = r11", "vsp = vsp - 12"]
        };
        for want in ["cantunwind", "pop {D8}", "pop {D8-D11}", "pop {r4, r14}"]
            .iter()
            .chain(isa_forms)
        {
            assert!(all.iter().any(|t| *t == want), "{name}: {want} in {all:?}");
        }
        let t = ImageTables::load(&so).unwrap();
        let x = t.sources[0].exidx.as_ref().unwrap();
        let kinds = |f: fn(&Entry) -> bool| x.entries().iter().filter(|e| f(&e.1)).count();
        assert!(
            kinds(|e| matches!(e, Entry::Inline(_))) > 0
                && kinds(|e| matches!(e, Entry::Extab(_))) >= 3,
            "{name}"
        );
    }
    // Debian's libc: every entry decodes as readelf decodes it.
    let libc = Path::new(ARMHF.sysroot).join("lib/libc.so.6");
    // readelf decodes a generic-model entry only when it can name the personality routine, and
    // the stripped libc's `__gcc_personality_v0` has no symbol: those entries must decode
    // to known instructions.
    let mut ours = our_unwind(&libc);
    let readelf = readelf_unwind(&libc);
    assert!(ours.len() > 800, "{}", ours.len());
    let generic: Vec<u64> = readelf
        .iter()
        .filter(|e| e.1.is_empty())
        .map(|e| *e.0)
        .collect();
    assert!(generic.len() > 50, "{}", generic.len());
    for a in &generic {
        let ops = ours.remove(a).unwrap();
        assert!(
            !ops.is_empty()
                && ops.iter().all(|o| o.1.starts_with("pop {r")
                    || o.1.starts_with("vsp")
                    || o.1 == "finish"),
            "{a:#x}: {ops:?}"
        );
    }
    let readelf = readelf.into_iter().filter(|e| !e.1.is_empty()).collect();
    same_entries(&ours, &readelf, "libc.so.6");
}

/// x86-64's DWARF registers 0-15 as readelf names them.
const X86: [&str; 16] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// DWARF register numbers of readelf's column names (ARM `rN`, AArch64 `xN` and `sp`, x86-64
/// names).
fn dwarf_reg(name: &str, ra: u16) -> u16 {
    if name == "ra" {
        return ra;
    }
    if name == "sp" {
        return 31;
    }
    if let Some(i) = X86.iter().position(|n| *n == name) {
        return i as u16;
    }
    name.strip_prefix('r')
        .or(name.strip_prefix('x'))
        .unwrap()
        .parse()
        .unwrap()
}

/// readelf's name of DWARF register `r` on `arch`.
fn reg_name(arch: object::Architecture, r: u16) -> String {
    match arch {
        object::Architecture::X86_64 => X86[usize::from(r)].to_string(),
        object::Architecture::Aarch64 if r == 31 => "sp".into(),
        object::Architecture::Aarch64 => format!("x{r}"),
        _ => format!("r{r}"),
    }
}

/// Checks every row `readelf -wF` (`readelf`) prints for `file`'s CFI `section` against ours.
/// Returns the rows checked.
fn check_cfi(readelf: &str, file: &Path, section: &str) -> usize {
    let data = std::fs::read(file).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    use object::{Object, ObjectSection};
    let sec = obj.section_by_name(section).unwrap();
    let kind = if section == ".eh_frame" {
        Kind::EhFrame {
            addr: sec.address(),
        }
    } else {
        Kind::DebugFrame
    };
    let text = obj.section_by_name(".text").unwrap().address();
    let size = if obj.is_64() { 8 } else { 4 };
    let cfi = Cfi::new(
        kind,
        std::rc::Rc::from(sec.data().unwrap()),
        gimli::RunTimeEndian::Little,
        size,
        text,
    );
    let out = Command::new(readelf).arg("-wF").arg(file).output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let mut ctx = gimli::UnwindContext::new();
    let (mut cols, mut in_fde, mut rows) = (vec![], false, 0);
    for line in out.lines() {
        if line.contains(" FDE ") || line.contains(" CIE ") {
            in_fde = line.contains(" FDE ");
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            in_fde = false;
        }
        if f.first() == Some(&"LOC") {
            cols = f[2..].to_vec();
            continue;
        }
        if !in_fde || f.len() < 2 {
            continue;
        }
        let loc = u64::from_str_radix(f[0], 16).unwrap();
        let row = cfi
            .row(&mut ctx, loc)
            .unwrap()
            .unwrap_or_else(|| panic!("{section} {loc:#x}"));
        let cfa = match row.cfa {
            Cfa::RegOffset(r, o) => format!("{}{o:+}", reg_name(obj.architecture(), r)),
            Cfa::Expression => "exp".into(),
        };
        assert_eq!(cfa, f[1], "{} {loc:#x}", file.display());
        for (c, v) in cols.iter().zip(&f[2..]) {
            let rule = row.rule(dwarf_reg(c, row.ra));
            let ours = match rule {
                Rule::Same | Rule::Undefined => "u".to_string(),
                Rule::Offset(n) => format!("c{n}"),
                other => format!("{other:?}"),
            };
            assert_eq!(&ours, v, "{} {loc:#x} {c}", file.display());
        }
        rows += 1;
    }
    rows
}

#[test]
fn cfi_rows_as_readelf_interprets_them() {
    let dir = tempfile::tempdir().unwrap();
    // armhf .debug_frame (Thumb-2 and ARM), with -g instead of EHABI-only tables.
    for (name, flags) in [
        ("thumb-g.so", &["-g"][..]),
        ("arm-g.so", &["-g", "-marm"][..]),
    ] {
        let so = build_tables(dir.path(), name, flags);
        assert!(
            check_cfi("arm-linux-gnueabihf-readelf", &so, ".debug_frame") > 20,
            "{name}"
        );
    }
    // x86-64 .eh_frame (a DWARF expression CFA in the PLT's FDE, rbp-based frames).
    let src = dir.path().join("x.c");
    std::fs::write(
        &src,
        "void g(long *p);\n__attribute__((noinline)) void g(long *p) { __asm__ volatile(\"\" : : \"r\"(p) : \"memory\"); }\n\
         long many(long a, long b, long c, long d) { long r = a; g(&r); long s = b * c; g(&s); return r + s + d + a * b; }\n\
         long vla(long n) { long a[n]; a[0] = n; g(a); return a[n / 2]; }\n",
    )
    .unwrap();
    let so = dir.path().join("x.so");
    assert!(Command::new("gcc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    assert!(check_cfi("readelf", &so, ".eh_frame") > 10);
    // AArch64 .eh_frame (x29-based frames after `add x29, sp`): the same code, no C library needed.
    let so = dir.path().join("xa.so");
    let st = Command::new("aarch64-linux-gnu-gcc")
        .args(["-O2", "-shared", "-fPIC", "-nostdlib", "-o"])
        .arg(&so)
        .arg(&src)
        .status();
    assert!(st
        .expect("aarch64-linux-gnu-gcc (scripts/setup-host.sh)")
        .success());
    assert!(check_cfi("aarch64-linux-gnu-readelf", &so, ".eh_frame") > 8);
}

/// The stream words of `recs` (4-byte words), with raw words appended after each.
fn stream_words(parts: &[(Option<oprofile_common::event::Record>, Vec<u64>)]) -> Vec<u64> {
    let mut out = vec![];
    for (rec, raw) in parts {
        if let Some(r) = rec {
            let mut w = [0usize; 8];
            let n = r.encode(&mut w).unwrap();
            out.extend(w[..n].iter().map(|&x| u64::from(x as u32)));
        }
        out.extend(raw);
    }
    out
}

#[test]
fn expand_turns_snapshots_into_frames() {
    use crate::input::stream::{decode, Frame as StreamFrame, Stream};
    use oprofile_common::event::{user_maps_header, user_stack_header, Record as R};
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2g", &["-O2", "-g"]);
    let cap = capture(&exe, "a");
    // Image ids as the module's `images` gives them: 1 the program, 2.. the libraries.
    let mut paths: Vec<String> = vec![];
    let maps = exec_maps(&cap.maps, &mut paths);
    let place = |addr: u32| {
        let a = u64::from(addr);
        maps.iter()
            .find(|m| m.0 <= a && a < m.1)
            .map(|m| (m.3, m.2 + a - m.0))
            .unwrap()
    };
    let (cookie, offset) = place(cap.regs.r[15] & !1);
    let mut maps_words: Vec<u64> = user_maps_header(5, maps.len())
        .iter()
        .map(|&w| w as u32 as u64)
        .collect();
    maps_words.extend(maps.iter().flat_map(|m| [m.0, m.1, m.2, m.3]));
    let stack: Vec<u64> = cap
        .stack
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    let mut stack_words: Vec<u64> = user_stack_header(stack.len())
        .iter()
        .map(|&w| w as u32 as u64)
        .collect();
    stack_words.extend(cap.regs.r.iter().map(|&r| u64::from(r)));
    stack_words.push(u64::from(cap.regs.cpsr));
    stack_words.extend(&stack);
    let none = || None::<R>;
    let words = stream_words(&[
        (Some(R::CpuSwitch { cpu: 0 }), vec![]),
        (
            Some(R::CtxSwitch {
                pid: 5,
                tgid: 5,
                app_cookie: 1,
            }),
            vec![],
        ),
        (Some(R::KernelExit), vec![]),
        (Some(R::TraceBegin), vec![]),
        (Some(R::CookieSwitch { cookie }), vec![]),
        (
            Some(R::Sample {
                pc: offset,
                event: 0,
            }),
            vec![],
        ),
        (none(), maps_words.clone()),
        (none(), stack_words.clone()),
        // An untraced sample that relies on the elided mode and image: they must survive.
        (
            Some(R::Sample {
                pc: offset,
                event: 1,
            }),
            vec![],
        ),
        // A kernel-mode sample whose chain never reaches user space: its snapshot adds nothing.
        (Some(R::KernelEnter), vec![]),
        (Some(R::TraceBegin), vec![]),
        (
            Some(R::Sample {
                pc: 0xc000_1000,
                event: 0,
            }),
            vec![],
        ),
        (none(), stack_words.clone()),
        (
            Some(R::Sample {
                pc: 0xc000_2000,
                event: 0,
            }),
            vec![],
        ),
        // A kernel-mode sample whose chain ends with the user PC it entered the kernel from.
        (Some(R::TraceBegin), vec![]),
        (
            Some(R::Sample {
                pc: 0xc000_3000,
                event: 0,
            }),
            vec![],
        ),
        (none(), stack_words),
        (
            Some(R::Sample {
                pc: 0xc000_4000,
                event: 0,
            }),
            vec![],
        ),
        (Some(R::KernelExit), vec![]),
        (
            Some(R::Sample {
                pc: offset,
                event: 0,
            }),
            vec![],
        ),
        (
            Some(R::CtxSwitch {
                pid: 6,
                tgid: 6,
                app_cookie: 0,
            }),
            vec![],
        ),
    ]);
    let load = &mut |id: u64| {
        paths
            .get(id as usize - 1)
            .map(|p| ImageTables::load(&host_file(p)).unwrap())
    };
    let (out, stats) = expand::expand(&words, 4, Some(64), load).unwrap();
    assert!(!expand::has_snapshots(&out, 4) && expand::has_snapshots(&words, 4));
    // Read in blocks, the same (depth 3 cuts chains; a cut stream fails at the same offset).
    for (n, depth) in [
        (words.len(), Some(64)),
        (words.len(), Some(3)),
        (words.len() - 40, None),
    ] {
        super::expanding::assert_streams_alike(&words[..n], 4, depth, load);
    }
    let bytes: Vec<u8> = out.iter().flat_map(|&w| (w as u32).to_le_bytes()).collect();
    let d = decode(&Stream::from_bytes(&bytes, 4).unwrap()).unwrap();
    // The unwinder's own chain, as the stream's frames: (image id, file offset) of each caller.
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    assert_eq!(
        names(&chain, &procs, &exe)[..3],
        ["leaf", "caller_a", "main"]
    );
    let want: Vec<StreamFrame> = chain.frames[1..]
        .iter()
        .map(|f| {
            let (c, o) = place(f.addr);
            StreamFrame {
                pc: o,
                in_kernel: Some(false),
                cookie: Some(c),
            }
        })
        .collect();
    assert_eq!(d.samples.len(), 4);
    assert_eq!(d.samples[0].frames, want);
    assert_eq!(
        (d.samples[1].ctx.in_kernel, d.samples[1].ctx.cookie),
        (Some(false), Some(cookie)),
        "state restored"
    );
    assert!(d.samples[1].frames.is_empty() && d.samples[1].event == 1);
    assert_eq!(
        d.samples[2].frames,
        [StreamFrame {
            pc: 0xc000_2000,
            in_kernel: Some(true),
            cookie: Some(cookie)
        }]
    );
    let entered = [
        StreamFrame {
            pc: 0xc000_4000,
            in_kernel: Some(true),
            cookie: Some(cookie),
        },
        StreamFrame {
            pc: offset,
            in_kernel: Some(false),
            cookie: Some(cookie),
        },
    ];
    assert_eq!(d.samples[3].frames, [&entered[..], &want].concat());
    let n = want.len() as u64;
    assert_eq!(
        (
            stats.snapshots,
            stats.frames,
            stats.cut,
            stats.no_maps,
            stats.depth_taken,
            stats.truncated
        ),
        (3, 2 * n, 1, 0, 0, 0)
    );
    // With a depth of 3 the first chain (no frames before its snapshot's) keeps 3 callers, the
    // unwinder ending at the depth; the kernel sample's chain (1 kernel frame) is still cut short.
    assert!(want.len() > 3);
    let (short, stats) = expand::expand(&words, 4, Some(3), load).unwrap();
    let bytes: Vec<u8> = short
        .iter()
        .flat_map(|&w| (w as u32).to_le_bytes())
        .collect();
    let d = decode(&Stream::from_bytes(&bytes, 4).unwrap()).unwrap();
    assert_eq!(d.samples[0].frames, want[..3]);
    assert_eq!(
        d.samples[3].frames,
        [&entered[..], &want[..1]].concat(),
        "3 frames, kernel and user together"
    );
    assert_eq!(
        (
            stats.truncated,
            stats.cut,
            stats.depth_taken,
            stats.ends.get("depth")
        ),
        (1, 1, 0, Some(&3))
    );
    let (_, stats) = expand::expand(&words, 4, Some(1), load).unwrap();
    assert_eq!(
        (stats.cut, stats.depth_taken, stats.truncated),
        (0, 1, 1),
        "depth 1: the kernel frame took it"
    );
    assert_eq!(
        stats.ends.values().sum::<u64>(),
        3,
        "every snapshot unwound has its end counted"
    );
    // A stream cut inside a snapshot names the offset.
    let (_, stats) = expand::expand(&words, 4, None, load).unwrap();
    assert!(!stats.depth_known && stats.note().contains("give --backtrace-depth"));
    let e = expand::expand(&words[..words.len() - 40], 4, Some(64), &mut |_| None).unwrap_err();
    assert!(e.contains("truncated record"), "{e}");
}

/// The executable file mappings of the `/proc/PID/maps` text `maps` as (start, end, file
/// offset, image id), ids numbered as the module's `images` gives them: 1 + the path's index in
/// `paths`, which grows with each new path.
pub(super) fn exec_maps(maps: &str, paths: &mut Vec<String>) -> Vec<(u64, u64, u64, u64)> {
    let mut out = vec![];
    for (start, end, perms, offset, path) in maps.lines().filter_map(maps::parse_line) {
        let (Some(path), true) = (path, perms.contains('x')) else {
            continue;
        };
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_string());
        }
        let id = 1 + paths.iter().position(|p| p == path).unwrap() as u64;
        out.push((start, end, offset, id));
    }
    out
}

/// One sync pass of task `tgid`'s snapshot `cap` (4-byte words): the context, the task's
/// mappings (image ids by `paths`, which grows), and `n` traced user samples with the snapshot.
fn snapshot_pass(cap: &Capture, tgid: u64, n: usize, paths: &mut Vec<String>) -> Vec<u64> {
    use oprofile_common::event::{user_maps_header, user_stack_header, Record as R};
    let maps = exec_maps(&cap.maps, paths);
    let pc = u64::from(cap.regs.r[15] & !1);
    let m = maps.iter().find(|m| m.0 <= pc && pc < m.1).unwrap();
    let mut words = stream_words(&[
        (Some(R::CpuSwitch { cpu: 0 }), vec![]),
        (
            Some(R::CtxSwitch {
                pid: tgid,
                tgid,
                app_cookie: 1,
            }),
            vec![],
        ),
        (Some(R::KernelExit), vec![]),
        (Some(R::CookieSwitch { cookie: m.3 }), vec![]),
    ]);
    words.extend(user_maps_header(tgid as usize, maps.len()).map(|w| w as u32 as u64));
    words.extend(maps.iter().flat_map(|m| [m.0, m.1, m.2, m.3]));
    let stack = cap.stack.chunks_exact(4);
    let sample = stream_words(&[
        (Some(R::TraceBegin), vec![]),
        (
            Some(R::Sample {
                pc: m.2 + pc - m.0,
                event: 0,
            }),
            vec![],
        ),
        (
            None,
            user_stack_header(stack.len())
                .iter()
                .map(|&w| w as u32 as u64)
                .chain(cap.regs.r.iter().map(|&r| u64::from(r)))
                .chain([u64::from(cap.regs.cpsr)])
                .chain(stack.map(|c| u64::from(u32::from_le_bytes(c.try_into().unwrap()))))
                .collect(),
        ),
    ]);
    for _ in 0..n {
        words.extend(&sample);
    }
    words
}

/// The unwinding cost per sample, in a release build: `cargo test --release -p oprof --lib
/// expand_speed -- --ignored --nocapture` (`OPROF_BENCH_SAMPLES`, default 30000). Snapshots
/// of the three paths to `leaf` (through the program's frames and libc's qsort), in turn.
#[test]
#[ignore]
fn expand_speed() {
    let n: usize = std::env::var("OPROF_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30000);
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2g", &["-O2", "-g"]);
    let caps: Vec<Capture> = ["a", "b", "q"].iter().map(|m| capture(&exe, m)).collect();
    let mut paths = vec![];
    let mut words = vec![];
    for pass in 0..n / 100 {
        let cap = &caps[pass % caps.len()];
        words.extend(snapshot_pass(
            cap,
            5 + (pass % caps.len()) as u64,
            100,
            &mut paths,
        ));
    }
    // OPROF_BENCH_OUT=DIR: the stream for `oprof report DIR/samples --images DIR/images
    // --word-size 4 --sysroot /` too (the program copied to DIR).
    if let Some(out) = std::env::var_os("OPROF_BENCH_OUT").map(PathBuf::from) {
        std::fs::create_dir_all(&out).unwrap();
        let bytes: Vec<u8> = words
            .iter()
            .flat_map(|&w| (w as u32).to_le_bytes())
            .collect();
        std::fs::write(out.join("samples"), bytes).unwrap();
        std::fs::copy(&exe, out.join("o2g")).unwrap();
        let list: String = paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let host = if Path::new(p) == exe {
                    out.join("o2g")
                } else {
                    host_file(p)
                };
                format!("{} {}\n", i + 1, host.display())
            })
            .collect();
        std::fs::write(out.join("images"), list).unwrap();
    }
    let load = &mut |id: u64| {
        paths
            .get(id as usize - 1)
            .map(|p| ImageTables::load(&host_file(p)).unwrap())
    };
    // The thread's CPU time, as wall time on a busy host says little.
    let cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(r, 0);
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    let (t, c) = (std::time::Instant::now(), cpu());
    let (_, stats) = expand::expand(&words, 4, Some(64), load).unwrap();
    let (took, cpu_s) = (t.elapsed().as_secs_f64(), cpu() - c);
    let per = |s: f64| s * 1e6 / stats.snapshots as f64;
    eprintln!(
        "{} snapshots, {} frames: {took:.3} s wall, {cpu_s:.3} s CPU: {:.2} us CPU per sample \
         ({:.2} wall; image tables loaded included); {:?}",
        stats.snapshots,
        stats.frames,
        per(cpu_s),
        per(took),
        stats.ends
    );
    assert_eq!(stats.snapshots, (n / 100 * 100) as u64);
}

/// Every address of one image, as `Images`: the place `at` in `tables`, under image id `id`.
struct OnePlace<'a> {
    tables: &'a ImageTables,
    at: u64,
    id: Option<u64>,
}

impl Images for OnePlace<'_> {
    fn find(&self, _addr: u64) -> Option<Place<'_>> {
        Some(Place {
            tables: self.tables,
            elf_addr: self.at,
            executable: true,
            id: self.id,
        })
    }
}

/// The unwinder's rule cache keeps images apart: the same ELF address in the program and in
/// libc (different rules) gives each image's own step, cached or not, in either order.
#[test]
fn rule_cache_keeps_images_apart() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2r", &["-O2", "-g"]);
    let cap = capture(&exe, "q");
    let procs = images(&cap);
    let chain = unwind(&cap, &procs);
    let places: Vec<Place<'_>> = chain
        .frames
        .iter()
        .filter_map(|f| procs.find(u64::from(f.addr)))
        .collect();
    let prog = places[0];
    let other = places
        .iter()
        .find(|p| !std::ptr::eq(p.tables, prog.tables))
        .expect("a frame in libc");
    let s = State {
        r: cap.regs.r,
        known: 0xFFFF,
    };
    let stack = Stack {
        sp: cap.regs.r[13],
        bytes: &cap.stack,
    };
    let step = |u: &mut Unwinder, t: &ImageTables, id| {
        let img = OnePlace {
            tables: t,
            at: prog.elf_addr,
            id,
        };
        format!("{:?}", u.step(&img, &s, true, &stack))
    };
    let mut fresh = Unwinder::new(64);
    let own = step(&mut fresh, prog.tables, None);
    let libc = step(&mut fresh, other.tables, None);
    assert_ne!(own, libc, "the address has other rules in libc");
    let mut u = Unwinder::new(64);
    for _ in 0..2 {
        assert_eq!(step(&mut u, prog.tables, Some(1)), own);
        assert_eq!(step(&mut u, other.tables, Some(2)), libc);
    }
}
