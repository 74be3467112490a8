"""Host checks of tests/guest/user.sh: every case it profiled (its sample stream, stats and
session files: images, /proc/modules, module sections) through `oprof report` with the guest's
sysroot: exact accounting, image records, symbols and source lines, call graphs, flame graph,
samples in unmapped/exec'd/exited code and in a module loaded while profiling; `oprof annotate`
of hot_a and `oprof diff` of hot_timer (70/30) against flip (the same program at 30/70).

Cases: hot_timer, flip, hot_thumb (hot built -O2, no frame pointer: Thumb-2 on ARMv7), split,
sort, corrupt, noread, vvar (tests/guest/callers.c, -O2 (Thumb-2 on ARMv7), stripped, its debug
file on the host only; with user-stack snapshots), churn, kmod, and on boards with a PMU
interrupt (virt-a15, virt-a53, imx8mp-evk) hot_cycles and split_cycles.
Plan: per case 3 checks, + 3 for hot_*, + 7 for hot_timer, + 2 for flip, + 2 for hot_thumb, + 4
for split*, + 6 for sort, + 5 for corrupt, + 1 for noread and vvar, + 4 for churn, + 2 for kmod:
hot_timer 13, flip 5, hot_thumb 8, split 7, sort 9, corrupt 8, noread 4, vvar 4, churn 7, kmod 5,
hot_cycles 6, split_cycles 7 (70 on realview-pb-a8, 83 on the others). A case
whose stream, session blocks or reports are missing reports its planned checks as failed.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/user.py --log build/tests/virt-a15-user.log [--board virt-a15]
        [--out build/tests] [--root build/tests/initramfs.root] [--kout KERNEL_TREE]
        [--oprof target/release/oprof]
Writes NAME-CASE.buf, .images, .proc_modules, .module_sections, .json, .txt, .svg, .decode and
NAME-CASE-g.json (and NAME-hot_timer-annotate.json/.txt, NAME-flip-diff.json/.txt) next to the
log (NAME: the log's name).
"""
import json
import os
import re

from logcheck import ARM64, PMU_IRQ, REPO, Bail, kernel_code_ranges, karch, main, received_and_lost, repeated_kernel_frames
from logcheck import stray_kernel_entries
from logcheck import stats as read_stats


# Where oprofile.ko and optest.ko of the kernel the guest ran were built (tests/run-qemu-tests.sh
# exports them; scripts/lib.sh mod_dirs), by default the plain kernel's of the board's KARCH.
MODDIR_ENV = os.environ.get("MODDIR")


def moddirs(board):
    """oprofile.ko's and optest.ko's build directories for BOARD (scripts/lib.sh mod_dirs)."""
    d = MODDIR_ENV or os.path.join(REPO, "build/plain" if karch(board) == "arm" else f"build/{karch(board)}-plain")
    return d, os.environ.get("KMODDIR") or os.path.join(d, "kmod")


def libc_debug(board):
    """Debian's glibc debug files of BOARD's architecture (scripts/lib.sh GUEST_LIBC)."""
    cache = os.environ.get("OPROFILE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "oprofile-rs")
    return os.path.join(cache, ("arm64" if board in ARM64 else "armhf") + "-libc/usr/lib/debug")
CALLERS = "/bin/callers"
LIBC = "/lib/libc.so.6"
# Every call of tests/guest/callers.c: callee -> its callers in the program (the one libc caller
# that calls back into it, main's, is libc's __libc_start_call_main; cmp_words' are qsort's).
CALLS = {"leaf": {"caller_a", "caller_b", "cmp_words"}, "caller_a": {"main"}, "caller_b": {"main"},
         "sort_words": {"main"}, "spin_on_junk": {"main"}}


def cases(board):
    return (["hot_timer", "flip", "hot_thumb", "split", "sort", "corrupt", "noread", "vvar", "churn", "kmod"]
            + (["hot_cycles", "split_cycles"] if board in PMU_IRQ else []))


def case_plan(c):
    return (3 + 3 * c.startswith("hot") + 7 * (c == "hot_timer") + 2 * (c == "flip") + 2 * (c == "hot_thumb")
            + 4 * c.startswith("split") + 6 * (c == "sort") + 5 * (c == "corrupt") + (c in ("noread", "vvar"))
            + 4 * (c == "churn")
            + 2 * (c == "kmod"))


def plan(board, debug):
    return sum(case_plan(c) for c in cases(board))


def module_runner(decode, sections, module):
    """The process that ran MODULE's code in `oprof decode` listing DECODE (its text), as (pid, its samples in
    MODULE's sections, all its samples): the pid with the most samples between MODULE's lowest
    section address (the .module_sections file) and a page past its highest. Every CPU_SWITCH
    is followed by a full context (CTX_SWITCH) before any sample, so the pid is known
    throughout."""
    with open(sections) as f:
        addrs = [int(w[2], 16) for w in (line.split() for line in f) if len(w) == 3 and w[0] == module]
    if not addrs:
        return None, 0, 0
    lo, hi = min(addrs), max(addrs) + 4096
    pid, per_pid, in_module = None, {}, {}
    for line in decode.splitlines():
        m = re.search(r"CtxSwitch \{ pid: ([0-9a-f]+)", line)
        if m:
            pid = int(m.group(1), 16)
        elif "CpuSwitch" in line:
            pid = None
        elif m := re.search(r"Sample \{ pc: ([0-9a-f]+)", line):
            per_pid[pid] = per_pid.get(pid, 0) + 1
            if lo <= int(m.group(1), 16) < hi:
                in_module[pid] = in_module.get(pid, 0) + 1
    if not in_module:
        return None, 0, 0
    runner = max(in_module, key=in_module.get)
    return runner, in_module[runner], per_pid[runner]


def host_files(s):
    """oprof options for the host copies of the guest's files (shared by every case): the
    initramfs tree, its host-only debug files (scripts/initramfs.sh) and Debian's libc debug
    files of the board's architecture (scripts/setup-host.sh)."""
    moddir, kmoddir = moddirs(s.board)
    return ["--vmlinux", f"{s.kout}/vmlinux", "--sysroot", s.root, "--image-path", f"{s.root}/lib",
            "--image-path", moddir, "--image-path", kmoddir, "--debug-dir", s.root[:-len(".root")] + ".debug",
            "--debug-dir", libc_debug(s.board)]


def run_oprof(s, c):
    """Extracts case C's stream and session files and runs oprof on them (Bail if one fails)."""
    buf = s.stream(f"{c}.buf", f"-{c}.buf", gz=True)
    for b in ("images", "proc_modules", "module_sections"):
        s.block(f"{c}.{b}", f"-{c}.{b}")
    # The depth user.sh recorded the case with (its stream is raw: no session.json says it).
    depth = {"flip": 16, "hot_thumb": 16, "churn": 8, "kmod": 0, "hot_cycles": 0}.get(c, 16)
    session = ["--images", s.path(f"-{c}.images"), "--proc-modules", s.path(f"-{c}.proc_modules"),
               "--module-sections", s.path(f"-{c}.module_sections"), "--backtrace-depth", str(depth)] + host_files(s)
    if c == "hot_timer":
        s.oprof("annotate", buf, *session, "--symbol", "hot_a", "--json", out=f"-{c}-annotate.json",
                what="annotate --json")
        s.oprof("annotate", buf, *session, "--symbol", "hot_a", out=f"-{c}-annotate.txt", what="annotate")
    if c == "flip":
        side = lambda x, n: [f"--{x}-images", s.path(f"-{n}.images"), f"--{x}-proc-modules",
                             s.path(f"-{n}.proc_modules"), f"--{x}-module-sections", s.path(f"-{n}.module_sections")]
        ab = [s.path("-hot_timer.buf"), buf] + side("a", "hot_timer") + side("b", c) + host_files(s)
        s.oprof("diff", *ab, "-l", "--json", out=f"-{c}-diff.json", what="diff --json")
        s.oprof("diff", *ab, "-l", "-n", "20", out=f"-{c}-diff.txt", what="diff")
    rep = json.loads(s.oprof("report", buf, *session, "-l", "-c", "--json", out=f"-{c}.json"))
    s.oprof("report", buf, *session, "-l", "-c", "-n", "20", "--flame", s.path(f"-{c}.svg"), out=f"-{c}.txt",
            what="report (text, flame graph)")
    s.oprof("decode", buf, out=f"-{c}.decode")
    s.oprof("report", buf, *session, "-g", "--json", out=f"-{c}-g.json", what="report -g")
    return rep


def check_case(s, c, rep, allstats):
    pre = s.path(f"-{c}")
    st = {k.split(":", 1)[1]: v for k, v in allstats.items() if k.startswith(c + ":")}
    received, lost = received_and_lost(st)
    s.check(received > 0 and received == rep["total"] + lost,
            f"{c}: sample_received {received} == delivered {rep['total']} + lost {lost} (exact accounting)")
    rows = rep["rows"]
    lost_ctx = sum(r["samples"] for r in rows if r["image"].startswith("(user, no image)") or r["image"] == "(no context)")
    s.check(lost_ctx == 0, f"{c}: every user sample has its image record (COOKIE_SWITCH) and context ({lost_ctx} without)")

    with open(f"{pre}.decode") as f:
        dec = f.read()
    # Backtrace entries only: a sample's own PC is where the CPU was, possibly in a module's init
    # text, which is freed (and not in /proc/modules) by the time the session is captured.
    stray = [e for e in stray_kernel_entries(dec, kernel_code_ranges(f"{s.kout}/System.map", f"{pre}.proc_modules"))
             if e[2] == "frame"]
    again = repeated_kernel_frames(dec)
    s.check(not stray and not again, f"{c}: every kernel-mode backtrace entry is kernel or module text "
            f"({len(stray)} stray: {[(o, hex(pc), k) for o, pc, k in stray[:5]]}), none repeats its sample's PC "
            f"({len(again)}: {[(o, hex(pc)) for o, pc in again[:5]]})")

    def samples(image, symbol=None):
        return sum(r["samples"] for r in rows if r["image"] == image and (symbol is None or r["symbol"] == symbol))
    if c.startswith("hot"):
        hot = "/bin/hot_t2" if c == "hot_thumb" else "/bin/hot"
        a, b = samples(hot, "hot_a"), samples(hot, "hot_b")
        share = a / (a + b) if a + b else 0
        s.check(a + b >= 300 and abs(share - 0.70) <= 0.10,
                f"{c}: hot_a {a} / hot_b {b} samples = {share:.1%} / {1 - share:.1%} (want 70/30 +-10 points)")
        order = [r["symbol"] for r in rows if r["image"] == hot]
        s.check(order[:2] == ["hot_a", "hot_b"], f"{c}: {hot}'s hottest symbols in order: {order[:3]}")
        s.check(samples("vmlinux") > 0, f"{c}: kernel symbols next to user ones ({samples('vmlinux')} vmlinux samples)")
    if c == "hot_timer":
        with open(os.path.join(REPO, "tests/guest/hot.c")) as f:
            src = f.read().split("\n")
        loop = 1 + next(i for i, l in enumerate(src) if "x = x * 1103515245u" in l)
        with open(f"{pre}-g.json") as f:
            lines = json.load(f)["rows"]
        top = next((r.get("source", {}).get("display") for r in lines if r["symbol"] == "hot_a"), None)
        s.check(top == f"hot.c:{loop}", f"{c}: -g puts hot_a's samples on its loop, hot.c:{loop} (got {top})")
        s.check(rep.get("traced", 0) >= rep["total"] * 0.9,
                f"{c}: backtraces recorded ({rep.get('traced')} of {rep['total']} samples)")
        with open(f"{pre}.txt") as f:
            text = f.read()
        text_callers = callers_in_text(text, "/bin/hot", "hot_a")
        if s.board in ARM64:   # hot_a's edge to work is cut there (below)
            ok = text_callers is not None and text_callers <= {("/bin/hot", "work")}
        else:
            ok = text_callers is not None and ("/bin/hot", "work") in text_callers
        s.check(ok, f"{c}: call graph text: hot_a's callers {sorted(text_callers or [])} "
                    f"(want /bin/hot work{', or none' if s.board in ARM64 else ''})")
        if s.board in ARM64:
            # AArch64: hot_a and hot_b are leaves without a frame record, so their edge to work is
            # cut as unproven (the report's note counts it) and work shows only when sampled
            # itself (0-13 samples a run). What holds: no made-up caller above them, main above work.
            by = {(e["image"], e["symbol"]): e for e in rep.get("callgraph") or []}

            def callers(sym):
                return {(r["image"], r["symbol"]) for r in by.get(("/bin/hot", sym), {}).get("callers", [])}
            made_up = sorted((callers("hot_a") | callers("hot_b")) - {("/bin/hot", "work")})
            above_work = sorted(callers("work"))
            s.check(("/bin/hot", "hot_a") in by and not made_up and set(above_work) <= {("/bin/hot", "main")},
                    f"{c}: JSON call graph links main, work, hot_a as proven (hot_a/hot_b's other callers "
                    f"{made_up}, work's {above_work})")
        else:
            cg = json.dumps(rep.get("callgraph"))
            s.check('"work"' in cg and '"hot_a"' in cg and '"main"' in cg,
                    f"{c}: JSON call graph links main, work, hot_a")
        svg = ""
        if os.path.exists(f"{pre}.svg"):
            with open(f"{pre}.svg") as f:
                svg = f.read()
        s.check(svg.startswith("<?xml") and "hot_a" in svg and "work" in svg, f"{c}: flame graph SVG shows hot_a under work")
        with open(f"{pre}-annotate.json") as f:
            ann = json.load(f)["symbols"]
        a = samples("/bin/hot", "hot_a")
        insns = ann[0]["instructions"] if len(ann) == 1 else []
        isas = sorted({i["isa"] for i in insns})
        isa = "arm64" if s.board in ARM64 else "arm"   # hot is built ARM (-marm) on ARMv7
        s.check(a > 0 and sum(i["samples"] for i in insns) == a and isas in ([isa], [isa, "data"]),
                f"{c}: annotate: hot_a's per-instruction samples sum to its {a} report samples "
                f"({sum(i['samples'] for i in insns)} in {len(insns)} instructions, {isas})")
        lines = ann[0]["lines"] if len(ann) == 1 else []
        hottest = max(lines, key=lambda l: l["samples"], default={})
        s.check(hottest.get("line") == loop and hottest.get("file", "").endswith("hot.c")
                and "1103515245u" in (hottest.get("text") or "") and hottest.get("hot"),
                f"{c}: annotate: hot_a's hottest source line is its loop, hot.c:{loop} "
                f"(got {hottest.get('file')}:{hottest.get('line')}, {hottest.get('samples')} samples)")
    if c == "flip":
        with open(s.path("-hot_timer.json")) as f:
            base = json.load(f)
        with open(f"{pre}-diff.json") as f:
            d = json.load(f)
        base_n = lambda sym: sum(r["samples"] for r in base["rows"] if r["image"] == "/bin/hot" and r["symbol"] == sym)
        drow = {r.get("symbol"): r for r in d["rows"] if r["image"] == "/bin/hot"}
        ok = d["a"]["total"] == base["total"] and d["b"]["total"] == rep["total"]
        for sym in ("hot_a", "hot_b"):
            r = drow.get(sym, {})
            want = 100 * samples("/bin/hot", sym) / rep["total"] - 100 * base_n(sym) / base["total"]
            ok = ok and r.get("a_samples") == base_n(sym) and r.get("b_samples") == samples("/bin/hot", sym) \
                and abs(r.get("delta", 1e9) - want) < 0.01
        s.check(ok, f"{c}: diff against hot_timer: samples and deltas as the two reports give them "
                    f"(hot_a {drow.get('hot_a')}, hot_b {drow.get('hot_b')})")
        a, b = samples("/bin/hot", "hot_a"), samples("/bin/hot", "hot_b")
        share = a / (a + b) if a + b else 0
        da, db = drow.get("hot_a", {}).get("delta", 0), drow.get("hot_b", {}).get("delta", 0)
        s.check(a + b >= 200 and abs(share - 0.30) <= 0.10 and da < 0 < db,
                f"{c}: the reversed split shows in the diff: hot_a {a} / hot_b {b} = {share:.1%} (want 30% "
                f"+-10 points), deltas hot_a {da:+.2f} < 0 < hot_b {db:+.2f}")
    if c == "hot_thumb":
        # hot.c's only callers of hot_a and hot_b are work and main (-O2 makes work tail-call
        # hot_b: its return address is in main). The frame-pointer walk used to follow r11,
        # which Thumb-2 code does not keep as a frame pointer, and put every sample under a
        # made-up caller (__do_global_dtors_aux).
        cg = {(e["image"], e["symbol"]): e for e in rep.get("callgraph") or []}
        callers = sorted({(r["image"], r["symbol"]) for sym in ("hot_a", "hot_b")
                          for r in cg.get((hot, sym), {}).get("callers", [])})
        made_up = [x for x in callers if x not in ((hot, "work"), (hot, "main"))]
        s.check((hot, "hot_a") in cg and not made_up,
                f"{c}: no made-up caller of hot_a/hot_b (callers {callers}; only work and main call them)")
        if s.board in ARM64:
            # AArch64 has no Thumb: -O2 code keeps no frame record (x29 is the caller's, or
            # libc's), so a sample's chain either names its true caller (work, main) or is cut,
            # counted: by the module (stats/bt_user_bad_frame, bt_user_not_call) or by oprof's
            # CFI proof of each frame-record edge (its note "fp chains (arm64 frame records): N
            # checked with CFI, M cut at an unproven edge").
            true = sum(r["samples"] for sym in ("hot_a", "hot_b") for r in cg.get((hot, sym), {}).get("callers", [])
                       if (r["image"], r["symbol"]) in ((hot, "work"), (hot, "main")))
            m = next((re.search(r"fp chains \(arm64 frame records\): \d+ checked with CFI, (\d+) cut", w)
                      for w in rep.get("warnings", []) if w.startswith("fp chains")), None)
            cut = int(m[1]) if m else 0
            ended = st.get("bt_user_bad_frame", 0) + st.get("bt_user_not_call", 0) + cut
            s.check(true + ended >= a + b > 0,
                    f"{c}: every traced user sample names its true caller ({true}) or had its chain cut, counted "
                    f"(stats/bt_user_bad_frame + bt_user_not_call + oprof's fp chains cut {cut}: {ended}) >= "
                    f"hot_a + hot_b samples {a + b}")
        else:
            thumb = st.get("bt_user_thumb", 0)
            s.check(thumb >= a + b > 0,
                    f"{c}: every traced Thumb user sample ended its chain counted: stats/bt_user_thumb {thumb} >= "
                    f"hot_a + hot_b samples {a + b}")
    if c.startswith("split") or c in ("sort", "corrupt"):
        check_unwound(s, c, rep, st, samples)
    if c in ("noread", "vvar"):
        # sp in a PROT_NONE mapping (not VM_READ) or in [vvar] (VM_MIXEDMAP, as a driver's
        # device mapping): every traced sample of spin_on_junk (user mode, backtraces and
        # snapshots on) that found a free buffer is refused before any read, none read as a
        # fault or a snapshot.
        spin = samples(CALLERS, "spin_on_junk")
        refused, fault = st.get("user_stack_refused", 0), st.get("user_stack_fault", 0)
        no_buffer = st.get("user_stack_no_buffer", 0)
        snaps = snapshot_note(rep).get("snapshots", 0)
        s.check(spin >= 100 and refused + no_buffer >= spin and refused >= spin // 2 and snaps <= rep["total"] - spin,
                f"{c}: sp in memory the interrupt must not read: stats/user_stack_refused {refused} (+ "
                f"user_stack_no_buffer {no_buffer}) >= the {spin} samples in spin_on_junk (want >= 100), "
                f"user_stack_fault {fault}, {snaps} snapshots unwound <= the {rep['total'] - spin} other samples")
    if c == "churn":
        lib = samples("/lib/libspin.so", "spin_in_lib")
        s.check(lib > 0, f"{c}: samples in dlclose()d /lib/libspin.so spin_in_lib ({lib})")
        child = samples("/bin/churn", "child_spin")
        s.check(child > 0, f"{c}: samples in forked and exec'd children's child_spin ({child})")
        anon = sum(r["samples"] for r in rows if r["image"].startswith("[anon]"))
        s.check(anon > 0, f"{c}: samples in munmap()ed anonymous code ({anon})")
        missing = sorted({r["image"] for r in rows if r["symbol"] == "(image not found)"})
        s.check(not missing, f"{c}: every user image found under the sysroot (missing: {missing})")
    if c == "kmod":
        s.check("ModuleLoaded" in dec and rep.get("module_loaded", 0) >= 1, f"{c}: MODULE_LOADED in the stream")
        # optest_spin runs a fixed amount of work (user.sh: 36000 rounds of 10,000 multiply-adds,
        # about 1.8 s; the default 12000 gave 26% of the busy samples on the arm64 debug kernel,
        # whose KASAN, kmemleak and debug-object checks make the rest of insmod several times
        # slower, while the spin's register arithmetic is not instrumented), like the rest of
        # insmod, so its share of insmod's own samples does not depend on how long a busy host
        # descheduled the vCPU. Other processes are left out: the idle task's samples and the
        # other CPU's background work (kworkers, RCU, the debug kernel's object checks) grow
        # with the capture's wall time, which took the share of all busy samples from 48% to
        # 34% on virt-a53-debug beside heavy host load. It used to spin for 300 ms of
        # wall-clock time reading ktime_get(): on the debug kernel the clock reads
        # (seqcount_lockdep_reader_access, __arch_counter_get_cntvct) took a quarter of its
        # samples. insmod is the process with the most samples in optest.ko's sections
        # (measured 60-63% on the arm64 debug kernel, 83-97% elsewhere).
        spin = samples("optest.ko", "optest_spin")
        pid, in_module, runner = module_runner(dec, s.path(f"-{c}.module_sections"), "optest")
        share = spin / runner if runner > 0 else 0
        s.check(spin >= 30 and share >= 0.4,
                f"{c}: optest.ko's optest_spin attributed through its sections ({spin} samples, {share:.0%} of the "
                f"{runner} samples of insmod, pid {pid}, {in_module} of them in optest.ko's sections; want >= 30 and >= 40%)")


# A caller line: "  N  PERCENT  IMAGE  SYMBOL"; an image name has no space but "[anon] (PATH)", and
# one of 28 characters or more is followed by a single space.
CALLER = re.compile(r"^\s+\d+\s+[\d.]+\s+(\[anon\] \(\S+\)|\S+)\s+(\S.*?)\s*$")


def callers_in_text(text, image, symbol):
    """The callers in the call graph text (`oprof report -c`) of IMAGE's SYMBOL, as (image,
    symbol) pairs: the indented lines above its symbol line ("N  %  IMAGE  SYMBOL  [self; ...]")
    in its block between dashed lines; None when it has no block."""
    for block in re.split(r"(?m)^-{20,}$", text):
        lines = block.strip("\n").split("\n")
        at = next((i for i, l in enumerate(lines) if not l.startswith(" ") and "[self;" in l
                   and re.search(rf"\s{re.escape(image)}\s+{re.escape(symbol)}\s+\[self;", l)), None)
        if at is not None:
            return {m.groups() for m in map(CALLER.match, lines[:at]) if m}
    return None


def callgraph(rep):
    """The JSON call graph as {(image, symbol): {(image, symbol): samples of its callers}}."""
    return {(e["image"], e["symbol"]): {(r["image"], r["symbol"]): r["samples"] for r in e["callers"]}
            for e in rep.get("callgraph") or []}


def snapshot_note(rep):
    """The counts of oprof's "user stack snapshots: ..." note (unwind/expand.rs), or {}."""
    for w in rep.get("warnings", []):
        m = re.match(r"user stack snapshots: (\d+) unwound into (\d+) frames; chains ended: (.*); unused: (\d+) "
                     r"without mappings, (\d+) chains cut short, (\d+) kernel parts at the depth; (\d+) chains cut", w)
        if m:
            ends = {k: int(v) for v, k in re.findall(r"(\d+) ([a-z ]+)", m.group(3))}
            n = [int(g) for g in m.groups()[3:]]
            return {"snapshots": int(m.group(1)), "frames": int(m.group(2)), "ends": ends,
                    "no_maps": n[0], "cut": n[1], "depth_taken": n[2], "truncated": n[3]}
    return {}


def check_unwound(s, c, rep, st, samples):
    """Cases of tests/guest/callers.c: callers unwound from user-stack snapshots."""
    cg = callgraph(rep)
    made_up = sorted((callee, caller) for (img, callee), callers in cg.items() if img == CALLERS and callee in CALLS
                     for (cimg, caller) in callers if cimg != CALLERS or caller not in CALLS[callee])
    s.check(bool(cg) and not made_up, f"{c}: every caller of the program's functions calls them in callers.c "
                                      f"(made up: {made_up[:5]})")
    note = snapshot_note(rep)
    lost = {k: st.get(k, 0) for k in ("user_stack_no_buffer", "user_stack_lost")}
    # A snapshot whose record did not fit the event buffer is counted in user_stack_lost too: that
    # is the reader falling behind (event_lost_overflow counts the buffer's refusals; seen on
    # virt-a53-debug, whose reader copies slowly under KASAN, once snapshots stopped running dry),
    # not the pool. It is accounted for only in a capture whose event buffer did overflow.
    overflowed = st.get("event_lost_overflow", 0)
    if overflowed > 0 and 0 < lost["user_stack_lost"] <= overflowed:
        lost["user_stack_lost"] = 0
        lost["reader behind: event_lost_overflow"] = overflowed
    # On a debug kernel the sync pass cannot write 1,000 snapshots a second (a snapshot is some
    # 540 words through the event buffer, each step under KASAN and lockdep, on TCG): the pool of
    # the sampled CPU runs dry although its early pass was queued (user_stack_sync_wake > 0).
    # Those samples keep their frame-pointer chain and are counted (user_stack_no_buffer: 43 and
    # 148 of some 4,000 on virt-a53-debug); a throughput, which belongs in make bench, not a
    # loss the module failed to count. The plain kernels keep the pool from running dry.
    wakes = st.get("user_stack_sync_wake", 0)
    if s.debug_kernel and lost["user_stack_no_buffer"] > 0 and wakes > 0:
        lost["debug kernel's sync pass behind: user_stack_no_buffer"] = lost.pop("user_stack_no_buffer")
    # Every user-mode sample of the program carried a snapshot, unless the module counted why not,
    # and none went without for want of a buffer: a sample that leaves its CPU's pool half empty
    # queues a sync pass at once (user_stack_sync_wake, printed), so a late periodic pass does not
    # empty it (user_stack_no_buffer 53-353 on virt-a53-debug beside a host load before); every
    # snapshot had its task's mappings; one is left unused where the module cut its chain
    # before user space (counted) or its kernel frames took the whole depth.
    user = sum(r["samples"] for r in rep["rows"] if r["image"] == CALLERS)
    taken = note.get("snapshots", 0) + st.get("user_stack_fault", 0)
    cut = st.get("bt_lost_no_mapping", 0) + sum(v for k, v in st.items() if k.endswith("/backtrace_aborted"))
    s.check(user > 0 and taken >= user and note.get("no_maps") == 0 and note.get("cut", -1) in range(cut + 1)
            and not any(v for k, v in lost.items() if k.startswith("user_stack")),
            f"{c}: snapshots {note.get('snapshots')} + user_stack_fault {st.get('user_stack_fault', 0)} cover the "
            f"{user} samples in {CALLERS}; {note.get('no_maps')} without mappings; {note.get('cut')} chains cut "
            f"short <= {cut} the module cut (bt_lost_no_mapping, backtrace_aborted); none lost in the module ({lost}; "
            f"early sync passes: user_stack_sync_wake {st.get('user_stack_sync_wake', 'missing')})")
    if c.startswith("split"):
        callers = cg.get((CALLERS, "leaf"), {})
        a, b = callers.get((CALLERS, "caller_a"), 0), callers.get((CALLERS, "caller_b"), 0)
        share = a / (a + b) if a + b else 0
        s.check(a + b >= 300 and abs(share - 2 / 3) <= 0.05,
                f"{c}: leaf's callers caller_a {a} / caller_b {b} = {share:.1%} (want 66.7% +-5 points)")
        main = cg.get((CALLERS, "main"), {})
        s.check(cg.get((CALLERS, "caller_a"), {}).keys() == {(CALLERS, "main")}
                and (LIBC, "__libc_start_call_main") in main,
                f"{c}: chains reach main and libc's __libc_start_call_main, named from its debug file "
                f"(main's callers {sorted(main)})")
    if c == "sort":
        leaf = samples(CALLERS, "leaf")
        callers = cg.get((CALLERS, "leaf"), {})
        s.check(leaf >= 100 and set(callers) == {(CALLERS, "cmp_words")},
                f"{c}: leaf ({leaf} samples) is called by cmp_words only ({sorted(callers)})")
        libc_callers = {k for k, v in cg.get((CALLERS, "cmp_words"), {}).items()}
        s.check(bool(libc_callers) and all(img == LIBC for img, _ in libc_callers),
                f"{c}: cmp_words is called back by libc ({sorted(libc_callers)})")
        into_libc = sorted(callee for (img, callee), callers in cg.items() if img == LIBC and (CALLERS, "sort_words") in callers)
        s.check(bool(into_libc), f"{c}: the chains go on through libc back to sort_words (libc functions it calls: {into_libc})")
        s.check(cg.get((CALLERS, "sort_words"), {}).keys() == {(CALLERS, "main")},
                f"{c}: sort_words' caller is main ({sorted(cg.get((CALLERS, 'sort_words'), {}))})")
    if c == "corrupt":
        spin = samples(CALLERS, "spin_on_junk")
        s.check(spin >= 100, f"{c}: samples with the stack pointer on random words ({spin} in spin_on_junk)")
        ended = {k: v for k, v in note.get("ends", {}).items() if k not in ("cantunwind", "outermost")}
        s.check(sum(ended.values()) >= spin // 2,
                f"{c}: their chains end early, counted by reason ({ended}; {spin} samples)")
        s.check(st.get("user_stack_fault", 0) + sum(ended.values()) > 0,
                f"{c}: the module and the unwinder count what they could not follow "
                f"(user_stack_fault {st.get('user_stack_fault', 0)})")


def checks(s):
    allstats = read_stats(s.log)
    for c in cases(s.board):
        try:
            rep = run_oprof(s, c)
        except (Bail, ValueError) as e:   # ValueError: a report that is not JSON
            s.not_run(case_plan(c), f"{c}: {e}")
            continue
        check_case(s, c, rep, allstats)


if __name__ == "__main__":
    main(__doc__, plan, checks)
