//! Frame-record chains of arm64 streams proven with CFI ([`super::fpchain`]), on real chains: a
//! program built with `aarch64-linux-gnu-gcc` runs under `qemu-aarch64` and a timer signal
//! captures its interrupted registers (x0–x30, SP, PC, PSTATE) and stack; the module's walk
//! (`oprofile_common::sync::walk_user_frames_a64`) over that state gives the chain the module
//! would write, which goes into an 8-byte-word stream read by `Inputs::load` and the report.

use super::fpchain::{record_at, Cut, Prover};
use super::maps::{self, ProcessImages};
use super::test_target::ARM64;
use super::tests_a64::host_file;
use super::ImageTables;
use crate::aggregate::inputs::{Inputs, Want};
use crate::view::report;
use object::{Object, ObjectSymbol};
use oprofile_common::event::Record;
use oprofile_common::sync::{walk_user_frames_a64, UserFrameRegs};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `main` → `work` → (tail call at -O2) `hot_b`, a leaf (and `enter`, run once before the
/// captures, for its prologue); a SIGALRM handler writes
/// DIR/regs.K (34 doublewords), DIR/stack.K (bytes from the interrupted SP to the end of the
/// stack mapping) and DIR/maps for the first captures.
const SRC: &str = r#"#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include <fcntl.h>

#define WANT 8
volatile int sink;
static unsigned long top;
static const char *dir;
static volatile int taken;

__attribute__((noinline)) int hot_b(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i * sink;
	return s;
}

__attribute__((noinline)) int work(int x)
{
	sink += x;
	return hot_b(x * 2);
}

/* At -O2 GCC schedules the argument's add between `stp x29, x30` and `mov x29, sp`. */
__attribute__((noinline)) int enter(int x)
{
	return work(x + 1000) * 3;
}

/* Not run; their code is checked. A call after an epilogue that returned (the restore of x29
 * does not reach it), and one after x29 is overwritten. */
__attribute__((noinline)) int twoexit(int x)
{
	if (x > 5) {
		int r = work(x);
		sink = r;
		return r + 1;
	}
	sink = x;
	int q = work(x + 1);
	return q * q * 2 + sink;
}

__attribute__((noinline)) int clobber(int x)
{
	int r = work(x);
	__asm__ volatile("mov x29, %0" : : "r"(0L) : "x29");
	return work(r) + 1;
}

static void put(const char *name, int k, const void *p, unsigned long n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.%d", dir, name, k);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, p, n) != (long)n || close(fd))
		_exit(2);
}

static void on_alarm(int sig, siginfo_t *si, void *p)
{
	ucontext_t *uc = p;
	unsigned long regs[34];

	(void)sig;
	(void)si;
	if (taken >= WANT)
		return;
	memcpy(regs, uc->uc_mcontext.regs, 31 * sizeof(regs[0]));
	regs[31] = uc->uc_mcontext.sp;
	regs[32] = uc->uc_mcontext.pc;
	regs[33] = uc->uc_mcontext.pstate;
	put("regs", taken, regs, sizeof(regs));
	put("stack", taken, (void *)regs[31], top - regs[31]);
	taken++;
}

int main(int argc, char **argv)
{
	static char text[65536];
	unsigned long lo, hi, here = (unsigned long)&lo;
	FILE *m = fopen("/proc/self/maps", "r");
	size_t n = m ? fread(text, 1, sizeof(text) - 1, m) : 0;
	int r = 0;

	if (argc != 2)
		return 1;
	dir = argv[1];
	text[n] = 0;
	for (char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : 0)
		if (sscanf(l, "%lx-%lx", &lo, &hi) == 2 && lo <= here && here < hi)
			top = hi;
	put("maps", 0, text, n);
	sink = enter(argc);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGALRM, &sa, 0);
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	setitimer(ITIMER_REAL, &it, 0);
	while (taken < WANT)
		r += work(argc + 100000);
	printf("%d\n", r);
	return 0;
}
"#;

const WANT: usize = 8;

fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("fpchain.c");
    std::fs::write(&src, SRC).unwrap();
    let exe = dir.join(name);
    let st = Command::new("aarch64-linux-gnu-gcc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status();
    assert!(
        st.expect("aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)")
            .success(),
        "{flags:?}"
    );
    exe
}

/// (address, size) of function symbol `name`.
fn symbol(exe: &Path, name: &str) -> (u64, u64) {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f.symbols().find(|s| s.name() == Ok(name)).expect(name);
    (s.address(), s.size())
}

/// One capture: registers (x0–x30, SP, PC, PSTATE) and the stack from SP.
struct Capture {
    regs: Vec<u64>,
    stack: Vec<u8>,
}

/// Runs `exe` under qemu-aarch64: its captures and `/proc/self/maps`.
fn run(exe: &Path) -> (Vec<Capture>, String) {
    let out = exe.with_extension("out");
    std::fs::create_dir_all(&out).unwrap();
    let st = Command::new("qemu-aarch64")
        .args(["-L", ARM64.sysroot])
        .arg(exe)
        .arg(&out)
        .output();
    let st = st.expect("qemu-aarch64 (package qemu-user)");
    assert!(st.status.success(), "{}: {st:?}", exe.display());
    let caps = (0..WANT)
        .map(|k| {
            let regs = std::fs::read(out.join(format!("regs.{k}"))).unwrap();
            Capture {
                regs: regs
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
                stack: std::fs::read(out.join(format!("stack.{k}"))).unwrap(),
            }
        })
        .collect();
    (caps, std::fs::read_to_string(out.join("maps.0")).unwrap())
}

/// The process's file mappings as the module names them: (start, end, file offset, image id),
/// ids 1.. in order of `paths`.
struct Maps {
    paths: Vec<String>,
    maps: Vec<(u64, u64, u64, u64)>,
    stack_end: Vec<(u64, u64)>,
    procs: ProcessImages,
}

impl Maps {
    fn new(text: &str) -> Maps {
        let mut paths: Vec<String> = vec![];
        let mut maps = vec![];
        let mut stack_end = vec![];
        for (start, end, _, offset, path) in text.lines().filter_map(maps::parse_line) {
            stack_end.push((start, end));
            let Some(path) = path else { continue };
            if !paths.iter().any(|p| p == path) {
                paths.push(path.to_string());
            }
            maps.push((
                start,
                end,
                offset,
                1 + paths.iter().position(|p| p == path).unwrap() as u64,
            ));
        }
        let procs = ProcessImages::from_maps(text, |p| ImageTables::load(&host_file(p)).ok());
        Maps {
            paths,
            maps,
            stack_end,
            procs,
        }
    }

    /// (image id, file offset) of runtime address `a`.
    fn place(&self, a: u64) -> (u64, u64) {
        let m = self
            .maps
            .iter()
            .find(|m| m.0 <= a && a < m.1)
            .unwrap_or_else(|| panic!("{a:#x} in no file mapping"));
        (m.3, m.2 + a - m.0)
    }

    /// The return addresses the module's frame-record walk gives for capture `c`.
    fn walk(&self, c: &Capture) -> Vec<u64> {
        use super::Images;
        let (sp, pc) = (c.regs[31], c.regs[32]);
        let end = self
            .stack_end
            .iter()
            .find(|m| m.0 <= sp && sp < m.1)
            .unwrap()
            .1;
        let regs = UserFrameRegs {
            fp: c.regs[29] as usize,
            lr: c.regs[30] as usize,
            sp: sp as usize,
            cpsr: c.regs[33] as usize,
            stack_end: end as usize,
        };
        let read = |a: usize| -> Option<usize> {
            let a = a as u64;
            if a >= sp && a + 8 <= sp + c.stack.len() as u64 {
                let off = (a - sp) as usize;
                return Some(
                    u64::from_le_bytes(c.stack[off..off + 8].try_into().unwrap()) as usize,
                );
            }
            let place = self.procs.find(a)?;
            let b = place.tables.code(place.elf_addr..place.elf_addr + 4)?;
            Some(u32::from_le_bytes(b.try_into().unwrap()) as usize)
        };
        let mut rets = vec![];
        walk_user_frames_a64(&regs, read, |r| {
            rets.push(r as u64);
            rets.len() < 64
        });
        assert_ne!(rets.first(), Some(&pc));
        rets
    }

    /// The image (basename) and symbol of runtime address `a` of the program `exe`, for
    /// messages and checks: the program's symbols, `lib:NAME` elsewhere.
    fn name(&self, exe: &Path, a: u64) -> String {
        let (id, off) = self.place(a);
        let path = &self.paths[id as usize - 1];
        if Path::new(path) != exe {
            return format!(
                "lib:{}",
                Path::new(path).file_name().unwrap().to_string_lossy()
            );
        }
        let data = std::fs::read(exe).unwrap();
        let f = object::File::parse(&*data).unwrap();
        // A return address: named by its call instruction.
        let call =
            crate::resolve::elf::offset_to_vaddr(&ImageTables::load(exe).unwrap().loads, off)
                .unwrap()
                - 4;
        f.symbols()
            .find(|s| s.address() <= call && call < s.address() + s.size())
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_else(|| format!("?{call:#x}"))
    }
}

/// The 8-byte stream of `chains` (each: the user entries, the first the sampled PC; `kernel`:
/// as kernel-mode samples whose chain continues into user space at that PC).
fn stream(m: &Maps, chains: &[Vec<u64>], kernel: bool) -> Vec<u8> {
    let mut recs = vec![
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 50,
            tgid: 50,
            app_cookie: 1,
        },
    ];
    let mut cookie = None;
    for c in chains {
        recs.push(Record::TraceBegin);
        if kernel {
            recs.extend([
                Record::KernelEnter,
                Record::Sample {
                    pc: 0xffff_8000_80fa_0010,
                    event: 0,
                },
            ]);
        }
        recs.push(Record::KernelExit);
        for &a in c {
            let (id, off) = m.place(a);
            if cookie != Some(id) {
                recs.push(Record::CookieSwitch { cookie: id });
                cookie = Some(id);
            }
            recs.push(Record::Sample { pc: off, event: 0 });
        }
    }
    crate::tests::arm64::stream8(&recs)
}

/// `Inputs::load` of the stream `bytes` with the process's images; the report.
fn load(
    dir: &Path,
    m: &Maps,
    name: &str,
    bytes: &[u8],
) -> (crate::aggregate::inputs::Profile, report::Report) {
    let buf = dir.join(format!("{name}.buf"));
    std::fs::write(&buf, bytes).unwrap();
    let list: String = m
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{} {p}\n", i + 1))
        .collect();
    let images = dir.join(format!("{name}.images"));
    std::fs::write(&images, list).unwrap();
    let inputs = Inputs {
        buffer: Some(buf),
        images: Some(images),
        sysroot: Some(PathBuf::from("/")),
        image_path: vec![Path::new(ARM64.sysroot).join("lib")],
        word_size: Some(8),
        ..Default::default()
    };
    let mut p = inputs.load(Want::default()).unwrap();
    let r = report::build_counts(
        &p.counts,
        &mut p.res,
        &p.counters,
        report::Options {
            lines: false,
            flame: true,
        },
    );
    (p, r)
}

/// The captures of `exe` whose PC is in `hot_b` past its first two and before its last two
/// instructions (a prologue or epilogue position is excluded: the frame-pointer build's checks
/// are about the body), with their walked chains (PC first).
fn hot_chains(exe: &Path) -> (Maps, Vec<Vec<u64>>) {
    let (caps, text) = run(exe);
    let m = Maps::new(&text);
    let (hot, size) = symbol(exe, "hot_b");
    let exe_start = m
        .maps
        .iter()
        .find(|x| m.paths[x.3 as usize - 1] == exe.to_str().unwrap())
        .unwrap();
    let (lo, hi) = (hot + 8, hot + size - 8);
    let chains: Vec<Vec<u64>> = caps
        .iter()
        .filter(|c| {
            // A capture outside the program (its libc, the loader) has no address in its
            // segments: test the image first.
            let (id, off) = m.place(c.regs[32]);
            id == exe_start.3
                && crate::resolve::elf::offset_to_vaddr(&ImageTables::load(exe).unwrap().loads, off)
                    .is_some_and(|va| (lo..hi).contains(&va))
        })
        .map(|c| std::iter::once(c.regs[32]).chain(m.walk(c)).collect())
        .collect();
    assert!(!chains.is_empty(), "no capture in hot_b's body");
    (m, chains)
}

/// GCC -O2 as Debian builds (frame pointers in non-leaf functions, none in leaves; `work`
/// tail-calls `hot_b`): x29 at a sample in `hot_b` is `main`'s record, so the module's walk
/// names libc's start code as `hot_b`'s caller. The edge is cut at the sample (a leaf has no
/// record), in user-mode and kernel-mode chains alike, and counted in the note.
#[test]
fn fp_chain_of_a_leaf_is_cut_at_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2", &["-O2"]);
    let (m, chains) = hot_chains(&exe);
    for c in &chains {
        assert!(c.len() >= 3, "{c:x?}");
        assert_eq!(
            m.name(&exe, c[1]),
            "lib:libc.so.6",
            "the invented edge: hot_b's first 'caller' is libc's start code"
        );
    }
    let n = chains.len() as u64;
    for (kernel, name) in [(false, "user"), (true, "kernel")] {
        let (p, r) = load(dir.path(), &m, name, &stream(&m, &chains, kernel));
        let cg = r.callgraph.as_ref().unwrap();
        let hot = cg
            .iter()
            .find(|e| e.symbol == "hot_b")
            .unwrap_or_else(|| panic!("{cg:#?}"));
        assert!(
            hot.callers.is_empty(),
            "{name}: no caller is proven: {cg:#?}"
        );
        // Every chain keeps its sample and user PC only: (kernel PC,) hot_b.
        for k in p
            .counts
            .parts
            .iter()
            .flat_map(|c| c.keys.keys().map(|k| c.key(k).entries().count()))
        {
            assert_eq!(k, 1 + usize::from(kernel), "{name}");
        }
        let dropped: usize = chains.iter().map(|c| c.len() - 1).sum();
        let note = format!(
            "fp chains (arm64 frame records): {n} checked with CFI, {n} cut at an unproven edge ({dropped} frames left out): {n} leaf or no frame record"
        );
        assert!(r.warnings.contains(&note), "{name}: {:?}", r.warnings);
    }
}

/// A stream with user-stack snapshots goes through the expansion ([`super::expand`]): the
/// chain unwound from a snapshot (CFI-exact: `hot_b` returns to `main`, `work` tail-called it)
/// is kept, the frame-record chains of samples without one are proven and cut there.
#[test]
fn fp_chains_are_cut_in_streams_with_snapshots() {
    use oprofile_common::event::{user_maps_header, user_stack_header};
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "o2", &["-O2"]);
    let (caps, text) = run(&exe);
    let m = Maps::new(&text);
    let (hot, size) = symbol(&exe, "hot_b");
    let loads = ImageTables::load(&exe).unwrap().loads;
    let in_hot = |c: &&Capture| {
        let (id, off) = m.place(c.regs[32]);
        let va = crate::resolve::elf::offset_to_vaddr(&loads, off).unwrap();
        m.paths[id as usize - 1] == exe.to_str().unwrap() && (hot..hot + size).contains(&va)
    };
    let hot_caps: Vec<&Capture> = caps.iter().filter(in_hot).collect();
    assert!(hot_caps.len() >= 2, "two captures in hot_b");
    let chains: Vec<Vec<u64>> = hot_caps[1..]
        .iter()
        .map(|c| std::iter::once(c.regs[32]).chain(m.walk(c)).collect())
        .collect();
    let mut bytes = stream(&m, &chains, false);
    // The first capture as a snapshot: the sample, the task's mappings, the registers and stack.
    let snap = hot_caps[0];
    let (id, off) = m.place(snap.regs[32]);
    bytes.extend(crate::tests::arm64::stream8(&[
        Record::TraceBegin,
        Record::CookieSwitch { cookie: id },
        Record::Sample { pc: off, event: 0 },
    ]));
    let mut words: Vec<u64> = user_maps_header(50, m.maps.len())
        .iter()
        .map(|&w| w as u64)
        .collect();
    words.extend(m.maps.iter().flat_map(|x| [x.0, x.1, x.2, x.3]));
    let stack: Vec<u64> = snap
        .stack
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    words.extend(user_stack_header(stack.len()).iter().map(|&w| w as u64));
    words.extend(&snap.regs);
    words.extend(&stack);
    bytes.extend(words.iter().flat_map(|w| w.to_le_bytes()));
    // Read in blocks, the expansion drops the same unproven frames as over the whole stream:
    // chains cut at every seam.
    let all: Vec<u64> = crate::input::stream::le_words(&bytes, 8).collect();
    let paths = m.paths.clone();
    super::expanding::assert_streams_alike(&all, 8, Some(64), &mut |id| {
        let p = paths.get(usize::try_from(id).ok()?.checked_sub(1)?)?;
        ImageTables::load(&host_file(p)).ok()
    });
    let (_, r) = load(dir.path(), &m, "snap", &bytes);
    let cg = r.callgraph.as_ref().unwrap();
    let hot_e = cg.iter().find(|e| e.symbol == "hot_b").unwrap();
    let callers: Vec<(&str, u64)> = hot_e
        .callers
        .iter()
        .map(|c| (c.symbol.as_str(), c.samples))
        .collect();
    assert_eq!(
        callers,
        [("main", 1)],
        "the snapshot's caller only: {cg:#?}"
    );
    let n = chains.len();
    let dropped: usize = chains.iter().map(|c| c.len() - 1).sum();
    let note = format!("fp chains (arm64 frame records): {n} checked with CFI, {n} cut at an unproven edge ({dropped} frames left out): {n} leaf or no frame record");
    assert!(r.warnings.contains(&note), "{:?}", r.warnings);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("user stack snapshots: 1 unwound into")),
        "{:?}",
        r.warnings
    );
}

/// `-O1 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer`: every function keeps a record
/// and sets x29 to it, libc's start code too (the walk ends in `_start`, whose x29 is 0): every
/// edge of the walked chain is proven and the chain is kept whole.
#[test]
fn fp_chain_with_frame_pointers_is_kept_whole() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "fp",
        &[
            "-O1",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
        ],
    );
    let (m, chains) = hot_chains(&exe);
    for c in &chains {
        let names: Vec<String> = c[1..].iter().map(|&a| m.name(&exe, a)).collect();
        // main's callers: libc's start code (2 frames), crt1.o's _start.
        assert_eq!(
            names,
            ["work", "main", "lib:libc.so.6", "lib:libc.so.6", "_start"],
            "{c:x?}"
        );
    }
    let (p, r) = load(dir.path(), &m, "fp", &stream(&m, &chains, false));
    let mut lens: Vec<usize> = p
        .counts
        .parts
        .iter()
        .flat_map(|c| c.keys.keys().map(|k| c.key(k).entries().count()))
        .collect();
    let mut want: Vec<usize> = chains.iter().map(Vec::len).collect();
    lens.sort_unstable();
    want.sort_unstable();
    want.dedup();
    lens.dedup();
    assert_eq!(lens, want, "whole chains");
    let cg = r.callgraph.as_ref().unwrap();
    let callers = |f: &str| -> Vec<String> {
        cg.iter()
            .find(|e| e.symbol == f)
            .unwrap()
            .callers
            .iter()
            .map(|c| c.symbol.clone())
            .collect()
    };
    assert_eq!(callers("hot_b"), ["work"]);
    assert_eq!(callers("work"), ["main"]);
    let n = chains.len();
    let note = format!("fp chains (arm64 frame records): {n} checked with CFI, 0 cut at an unproven edge (0 frames left out)");
    assert!(r.warnings.contains(&note), "{:?}", r.warnings);
}

/// The frame-record test at each instruction of a prologue, on the real code: before and at
/// `stp x29, x30` no record; after it, up to and including `mov x29, sp`, x29 is not yet the
/// frame pointer; after it the record is proven. A leaf never has one, nor a function built
/// `-fomit-frame-pointer` (GCC saves x30 alone).
#[test]
fn fp_record_through_the_prologue() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = gimli::UnwindContext::new();
    let cs = {
        use capstone::prelude::*;
        Capstone::new()
            .arm64()
            .mode(capstone::arch::arm64::ArchMode::Arm)
            .detail(true)
            .build()
            .unwrap()
    };
    let exe = build(dir.path(), "o2", &["-O2"]);
    let t = ImageTables::load(&exe).unwrap();
    let word = |a: u64| u32::from_le_bytes(t.code(a..a + 4).unwrap().try_into().unwrap());
    let (f, size) = symbol(&exe, "enter");
    let stp = (f..f + size)
        .step_by(4)
        .find(|&a| word(a) & 0xFFC0_7FFF == 0xA980_7BFD)
        .expect("stp x29, x30, [sp, #-N]!");
    let mov = (stp..f + size)
        .step_by(4)
        .find(|&a| word(a) == 0x9100_03FD)
        .expect("mov x29, sp");
    assert!(
        mov > stp + 4,
        "an instruction between stp and mov: stp at +{:#x}, mov at +{:#x}",
        stp - f,
        mov - f
    );
    for a in (f..=mov + 4).step_by(4) {
        let want = if a <= stp {
            Err(Cut::NoRecord)
        } else if a <= mov {
            Err(Cut::FpNotSet)
        } else {
            Ok(())
        };
        assert_eq!(
            record_at(&t, &mut ctx, Some(&cs), a),
            want,
            "enter+{:#x} (stp +{:#x}, mov +{:#x})",
            a - f,
            stp - f,
            mov - f
        );
    }
    // Every `bl work` in twoexit (the second after `ldp x29, x30, [sp], #32; ret`) keeps the
    // record; in clobber, the call after `mov x29, x1` does not.
    let calls_of_work = |f: &str| -> Vec<u64> {
        let (work, _) = symbol(&exe, "work");
        let (s, size) = symbol(&exe, f);
        (s..s + size)
            .step_by(4)
            .filter(|&a| {
                word(a) & 0xFC00_0000 == 0x9400_0000
                    && a.wrapping_add((((word(a) << 6) as i32 >> 6) as i64 * 4) as u64) == work
            })
            .collect()
    };
    let verdicts = |f: &str, ctx: &mut gimli::UnwindContext<usize>| -> Vec<Result<(), Cut>> {
        calls_of_work(f)
            .into_iter()
            .map(|a| record_at(&t, ctx, Some(&cs), a))
            .collect()
    };
    assert_eq!(verdicts("twoexit", &mut ctx), [Ok(()), Ok(())]);
    assert_eq!(verdicts("clobber", &mut ctx), [Ok(()), Err(Cut::FpNotSet)]);
    let (hot, size) = symbol(&exe, "hot_b");
    for a in (hot..hot + size).step_by(4) {
        assert_eq!(
            record_at(&t, &mut ctx, Some(&cs), a),
            Err(Cut::NoRecord),
            "hot_b+{:#x}",
            a - hot
        );
    }
    // -fomit-frame-pointer: `work` saves x30 alone (`str x30, [sp, #-16]!`): no record at its
    // call of hot_b.
    let exe = build(dir.path(), "omit", &["-O1", "-fomit-frame-pointer"]);
    let t = ImageTables::load(&exe).unwrap();
    let word = |a: u64| u32::from_le_bytes(t.code(a..a + 4).unwrap().try_into().unwrap());
    let (work, size) = symbol(&exe, "work");
    let (hot, _) = symbol(&exe, "hot_b");
    let call = (work..work + size)
        .step_by(4)
        .find(|&a| {
            word(a) & 0xFC00_0000 == 0x9400_0000
                && a.wrapping_add((((word(a) << 6) as i32 >> 6) as i64 * 4) as u64) == hot
        })
        .expect("bl hot_b");
    assert_eq!(record_at(&t, &mut ctx, Some(&cs), call), Err(Cut::NoRecord));
    // The prover caches by (image, offset); without tables an edge is unproven.
    let mut p = Prover::new();
    assert_eq!(
        p.keep(&[Some((1, 0x10)), Some((1, 0x20))], 3, &mut |_| None),
        1
    );
    assert_eq!(p.keep(&[None, Some((1, 0x20))], 1, &mut |_| None), 1);
    assert_eq!(p.stats.note().unwrap(), "fp chains (arm64 frame records): 4 checked with CFI, 4 cut at an unproven edge (4 frames left out): 4 no unwind info");
}

/// Only 8-byte (arm64) streams are proven: the same traced chains in 4-byte words (ARM, whose
/// module walk has its own checks) give the report they gave before, byte for byte: the
/// report of `Inputs::load` equals the report of the bare counts (`aggregate::read`, no proof
/// stage), every chain whole, no note. In 8-byte words the same chains, whose images have no
/// host file, are cut at the sample ("no unwind info").
#[test]
fn fp_chains_of_4_byte_streams_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let recs = [
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 7,
            tgid: 7,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
        Record::TraceBegin,
        Record::Sample {
            pc: 0x1040,
            event: 0,
        },
        Record::Sample {
            pc: 0x1104,
            event: 0,
        },
        Record::CookieSwitch { cookie: 2 },
        Record::Sample {
            pc: 0x2208,
            event: 0,
        },
        Record::TraceBegin,
        Record::KernelEnter,
        Record::Sample {
            pc: 0xc010_0000,
            event: 0,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
        Record::Sample {
            pc: 0x1044,
            event: 0,
        },
        Record::Sample {
            pc: 0x1104,
            event: 0,
        },
    ];
    let render = |r: &report::Report| {
        format!(
            "{}{}{}{:?}",
            report::render(r, report::View::Symbols, 0),
            report::render_callgraph(r, 0),
            r.folded.lines().join("\n"),
            r.warnings
        )
    };
    for word_size in [4usize, 8] {
        let bytes: Vec<u8> = match word_size {
            4 => {
                let mut out = vec![];
                for r in &recs {
                    let mut w = [0usize; 7];
                    let n = r.encode(&mut w).unwrap();
                    out.extend(w[..n].iter().flat_map(|&x| (x as u32).to_le_bytes()));
                }
                out
            }
            _ => crate::tests::arm64::stream8(&recs),
        };
        let buf = dir.path().join(format!("s{word_size}.buf"));
        std::fs::write(&buf, &bytes).unwrap();
        std::fs::write(
            dir.path().join("images"),
            "1 /usr/bin/prog\n2 /lib/libc.so.6\n",
        )
        .unwrap();
        let inputs = Inputs {
            buffer: Some(buf.clone()),
            images: Some(dir.path().join("images")),
            word_size: Some(word_size),
            ..Default::default()
        };
        let mut p = inputs
            .load(Want {
                keys: crate::aggregate::Options {
                    app: true,
                    task: false,
                },
                ..Default::default()
            })
            .unwrap();
        let opts = report::Options {
            lines: false,
            flame: true,
        };
        let r = report::build_counts(&p.counts, &mut p.res, &p.counters, opts);
        let lens: Vec<usize> = p
            .counts
            .parts
            .iter()
            .flat_map(|c| c.keys.keys().map(|k| c.key(k).entries().count()))
            .collect();
        let bare = crate::aggregate::read(
            std::fs::File::open(&buf).unwrap(),
            word_size,
            crate::aggregate::Options {
                app: true,
                task: false,
            },
            Default::default(),
        )
        .unwrap();
        let r0 = report::build_counts(&bare, &mut p.res, &p.counters, opts);
        let fp_note = r.warnings.iter().find(|w| w.starts_with("fp chains"));
        if word_size == 4 {
            assert_eq!(
                render(&r),
                render(&r0),
                "4-byte words: the report without a proof stage"
            );
            let mut lens = lens;
            lens.sort_unstable();
            assert_eq!(lens, [3, 3], "whole chains");
            assert_eq!(fp_note, None);
        } else {
            assert_ne!(render(&r), render(&r0));
            assert_eq!(
                lens.iter().sum::<usize>(),
                1 + 2,
                "8-byte words: cut at the user PC"
            );
            let note = "fp chains (arm64 frame records): 2 checked with CFI, 2 cut at an unproven edge (3 frames left out): 2 no unwind info";
            assert_eq!(fp_note.map(String::as_str), Some(note));
        }
    }
}
