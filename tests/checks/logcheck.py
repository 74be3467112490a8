"""Shared library of the host checks in tests/checks/ (one module per guest script).

tests/run-qemu-tests.sh boots a board with tests/guest/SCRIPT.sh, then runs
tests/checks/SCRIPT.py (when there is one) on the guest's serial log. A check module extracts
what the guest printed (base64 streams and text blocks between "== MARK begin" and
"== MARK end" lines), runs `oprof` on it and reports TAP on stdout:

    1..N          the plan, printed first and computed from the arguments only (the board)
    ok - ...      one line per check, N lines in all
    not ok - ...

Exit status 0 means that every planned check ran (passed or failed). Anything else is a crash:
an exception (traceback on stderr, status 1) or missing input, i.e. a block the guest did not
print or `oprof` failing (Bail: a "Bail out! REASON" line, status 2). The runner then reports
the reason and counts the checks that did not run as failed.

Every module takes the same arguments (main() parses them):

    --log LOG      the guest's serial log, e.g. build/tests/virt-a15-user.log (required)
    --board BOARD  realview-pb-a8, virt-a15, virt-a53 or imx8mp-evk (default: the start of the
                   log's file name)
    --out DIR      where extracted files and oprof's output go (default: the log's directory)
    --name NAME    prefix of those files (default: the log's file name without .log)
    --kout DIR     kernel build tree with vmlinux and System.map (default: $KOUT, else the
                   cached tree scripts/build-kernel.sh prints)
    --oprof PATH   the host tool (default: target/release/oprof of this checkout)
    --root DIR     the guest's sysroot (default: OUT/initramfs.root)

By hand, on a saved log: python3 tests/checks/user.py --log build/tests/virt-a15-user.log
"""
import argparse
import base64
import bisect
import gzip
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The boards tests/run-qemu-tests.sh boots (scripts/qemu.sh), with their CPU count.
BOARDS = {"realview-pb-a8": 1, "virt-a15": 2, "virt-a53": 2, "imx8mp-evk": 4}
# The boards whose PMU raises overflow interrupts: event-based sampling works there.
PMU_IRQ = {"virt-a15", "virt-a53", "imx8mp-evk"}
# The arm64 boards (scripts/lib.sh board_arch; the others are ARMv7): KARCH of a board, and the
# word size of its kernel (pointer_size, the buffer's words).
ARM64 = {"virt-a53", "imx8mp-evk"}


def karch(board):
    """scripts/lib.sh's KARCH of BOARD: arm or arm64."""
    return "arm64" if board in ARM64 else "arm"


def word_size(board):
    """The board's kernel word size in bytes (oprofilefs pointer_size)."""
    return 8 if board in ARM64 else 4


# The oprof commands that read a sample stream and take --word-size (Session.oprof).
WORD_SIZE_CMDS = {"report", "annotate", "diff", "decode"}


class Bail(Exception):
    """Input a check needs is missing (a block the guest did not print, `oprof` failing)."""


class Session:
    """One run of a check module: its arguments, the guest log and the checks reported so far.

    Files it writes are named OUT/NAME + suffix (`path`), e.g. build/tests/virt-a15-user-churn.buf.
    """

    def __init__(self, args):
        self.board, self.cpus = args.board, BOARDS[args.board]
        self.out = args.out or os.path.dirname(os.path.abspath(args.log))
        self.name = args.name or re.sub(r"\.log$", "", os.path.basename(args.log))
        self.root = args.root or os.path.join(self.out, "initramfs.root")
        self.oprof_path = args.oprof
        self._kout = args.kout
        self.ran = 0
        self.log = read_log(args.log)
        self.debug_kernel = debug_kernel(self.log)

    @property
    def kout(self):
        """The kernel build tree: --kout, $KOUT or scripts/build-kernel.sh's cached tree."""
        if not self._kout:
            self._kout = os.environ.get("KOUT") or subprocess.run(
                ["bash", os.path.join(REPO, "scripts/build-kernel.sh")], env=dict(os.environ, KARCH=karch(self.board)),
                check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        return self._kout

    def path(self, suffix):
        """OUT/NAME + suffix."""
        return os.path.join(self.out, self.name + suffix)

    def check(self, ok, msg):
        """Reports one check as a TAP line, at once (a later crash keeps what was reported)."""
        self.ran += 1
        print(("ok - " if ok else "not ok - ") + msg, flush=True)

    def not_run(self, n, why):
        """Reports N planned checks that could not run (their input is missing) as failed."""
        for i in range(n):
            self.check(False, f"{why} (check {i + 1} of {n} not run)")

    def _lines(self, mark):
        """The lines between "== MARK begin" and "== MARK end" (once in the log)."""
        lines = self.log.split("\n")
        begins = [i for i, l in enumerate(lines) if l.startswith(f"== {mark} begin")]
        if not begins:
            raise Bail(f"no {mark} block in log")
        if len(begins) > 1:
            raise Bail(f"{mark} block printed {len(begins)} times")
        end = next((i for i in range(begins[0] + 1, len(lines)) if lines[i].startswith(f"== {mark} end")), None)
        if end is None:
            raise Bail(f"{mark} block has no end line (guest stopped while printing it?)")
        return lines[begins[0] + 1:end]

    def block(self, mark, suffix):
        """The text block MARK (guest: echo "== MARK begin"; ...; echo "== MARK end"), written
        to path(suffix); returns that path (scripts/lib.sh log_block does the same in bash)."""
        p = self.path(suffix)
        with open(p, "w") as f:
            f.write("".join(l + "\n" for l in self._lines(mark)))
        return p

    def stream(self, mark, suffix, gz=False):
        """The base64 block MARK (guest lib.sh print_stream, or print_gz with gz=True) decoded
        into path(suffix); returns that path (scripts/lib.sh log_stream does it in bash). Lines
        that are not base64 (a kernel message in between) are skipped, as log_stream does."""
        b64 = "".join(l for l in self._lines(mark) if re.fullmatch(r"[A-Za-z0-9+/=]+", l))
        try:
            data = base64.b64decode(b64, validate=True)
            if gz:
                data = gzip.decompress(data)
        except (ValueError, OSError, EOFError) as e:
            raise Bail(f"{mark} block does not decode: {e}") from e
        p = self.path(suffix)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def oprof(self, *args, out=None, what=None):
        """Runs `oprof ARGS...`; its stdout goes to path(out) when OUT is given and is returned.
        The commands that read a sample stream (report, annotate, diff, decode) get the board's
        word size, `--word-size 8` on arm64: a bare stream (the guest's buffer) does not say
        its word size and oprof takes 4 (a session directory's session.json says the same).
        Fails (Bail) with the head of its stderr when it exits non-zero."""
        if args and args[0] in WORD_SIZE_CMDS and "--word-size" not in args:
            args = (*args, "--word-size", str(word_size(self.board)))
        r = subprocess.run([self.oprof_path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, errors="replace")
        if r.returncode != 0:
            raise Bail(f"oprof {what or args[0]} failed (status {r.returncode}): {r.stderr[:300].strip()}")
        if out:
            with open(self.path(out), "w") as f:
                f.write(r.stdout)
        return r.stdout


def debug_kernel(log):
    """Whether the guest ran a debug kernel: tests/guest/lib.sh debug_report prints lockdep's
    state there (scripts/kconfig/debug.config), nothing on a plain kernel."""
    return re.search(r"^== lockdep debug_locks ", log, re.M) is not None


def read_log(path):
    """A guest serial log as text, CRLF-safe."""
    with open(path, errors="replace") as f:
        return f.read().replace("\r", "")


def stats(log):
    """The `STAT name value` lines a guest script printed, as a dict."""
    return {m[0]: int(m[1]) for m in re.findall(r"^STAT (\S+) (\d+)$", log, re.M)}


# Documentation/oprofilefs.rst, "Accounting": every sample taken (cpuN/sample_received) is
# delivered or lost in one of these (per CPU, and global). sample_invalid_eip also counts perf
# overflows that came without registers.
LOST_PER_CPU = ("sample_lost_overflow", "sample_invalid_eip", "sample_lost_nmi_overflow", "sample_lost_nmi_task")
LOST_GLOBAL = ("sample_lost_no_mm", "sample_lost_no_mapping", "event_lost_overflow")
# Sampling periods that passed without a sample (no overflow interrupt; an overflow interrupt or
# a timer-mode hrtimer tick more than a period late): no samples taken. The global files; the
# cpuN/ and N/ files of the same names split the same periods by CPU and by counter.
NOT_SAMPLED = ("sample_lost_no_irq", "sample_lost_overrun")


def received_and_lost(st):
    """Samples taken (sum of cpuN/sample_received) and samples lost after being taken."""
    received = sum(v for k, v in st.items() if re.fullmatch(r"cpu\d+/sample_received", k))
    lost = sum(v for k, v in st.items() if re.fullmatch(rf"cpu\d+/({'|'.join(LOST_PER_CPU)})", k))
    lost += sum(st.get(k, 0) for k in LOST_GLOBAL)
    return received, lost


def not_sampled(st):
    """Sampling periods that passed without a sample (the global NOT_SAMPLED files)."""
    return sum(st.get(k, 0) for k in NOT_SAMPLED)


def expects(log):
    """The `EXPECT name value` lines a guest script printed (values it measured), as a dict."""
    return {m[0]: int(m[1]) for m in re.findall(r"^EXPECT (\w+) (\d+)$", log, re.M)}


def kernel_code_ranges(sysmap_path, proc_modules_path):
    """Kernel code ranges: vmlinux text (_stext.._etext from System.map) and every module's
    [address, address + size) from /proc/modules."""
    syms = {}
    for line in open(sysmap_path):
        f = line.split()
        if len(f) == 3:
            syms[f[2]] = int(f[0], 16)
    ranges = [(syms["_stext"], syms["_etext"], "vmlinux")]
    for line in open(proc_modules_path):
        f = line.split()
        if len(f) >= 6:
            base = int(f[5], 16)
            ranges.append((base, base + int(f[1]), f[0]))
    return ranges


def stray_kernel_entries(decode_text, ranges):
    """Kernel-mode samples and backtrace entries of an `oprof decode` listing that are no kernel
    code: [(offset, pc, 'sample'|'frame')]."""
    kernel = None
    in_trace = False
    first = False
    bad = []
    for line in decode_text.splitlines():
        off, _, rec = line.partition(": ")
        rec = rec.strip()
        if rec == "KernelEnter":
            kernel = True
        elif rec == "KernelExit":
            kernel = False
        elif rec == "TraceBegin":
            in_trace, first = True, True
        elif rec.startswith("CpuSwitch") or (rec.startswith("CtxSwitch") and not first):
            # A trace's own CTX_SWITCH comes between TRACE_BEGIN and its sample.
            in_trace = False
        elif rec.startswith("Sample"):
            m = re.search(r"pc: (?:0x)?([0-9a-f]+)", rec)
            pc = int(m[1], 16)
            kind = "frame" if in_trace and not first else "sample"
            first = False
            if kernel and not any(lo <= pc < hi for lo, hi, _ in ranges):
                bad.append((off.strip(), pc, kind))
    return bad


def repeated_kernel_frames(decode_text):
    """Kernel-mode traces of an `oprof decode` listing whose first backtrace entry is the sample's
    own PC: a lock function's caller, which the sample already is (profile_pc()), reported
    again by the chain. [(offset, pc)]."""
    kernel, trace, bad = None, [], []
    for line in decode_text.splitlines():
        off, _, rec = line.partition(": ")
        rec = rec.strip()
        if rec in ("KernelEnter", "KernelExit"):
            kernel = rec == "KernelEnter"
        elif rec == "TraceBegin":
            trace = [off.strip()]
        elif rec.startswith("CpuSwitch") or (rec.startswith("CtxSwitch") and len(trace) > 1):
            trace = []
        elif rec.startswith("Sample") and trace:
            pc = int(re.search(r"pc: (?:0x)?([0-9a-f]+)", rec)[1], 16)
            trace.append(pc)
            if len(trace) == 3:
                if kernel and trace[1] == trace[2]:
                    bad.append((trace[0], trace[1]))
                trace = []
    return bad


# The routines that zero dd's buffer in `dd if=/dev/zero of=/dev/null` (the kernel-bound workload
# of profile.sh, events.sh): each read(2) is drivers/char/mem.c read_zero, which clears the user
# buffer a page at a time with clear_user: arm64's __arch_clear_user (a loop of 8-byte STTR
# stores; the Cortex-A53 has no FEAT_MOPS), ARMv7's arm_clear_user (alias __clear_user_std).
# The write to /dev/null copies nothing. Not clear_user_highpage and the like (page faults).
ZEROING = re.compile(r"^(\w*_)?clear_user(_std)?$|^read_zero$")
# The least share of a dd's kernel samples that falls in ZEROING, stated from the workload, not
# from a ranking: every 64 KiB read zeroes 16 pages in clear_user (8192 stores on arm64, 16384
# on ARMv7: some 25,000 instructions per read), assembly that no debug option instruments, so
# its time per read is the same on every kernel variant. The rest of a read/write pair (two
# system calls' entry and exit, fdget, the per-page signal check and cond_resched) is C, which
# lockdep, KASAN and the might_sleep checks make many times slower: cond_resched's
# might_sleep check alone asks lockdep three times per page (lock_is_held_type), each an
# interrupt mask and unmask, which QEMU's TCG emulates slowly (on the arm64 debug kernel with
# pseudo-NMIs a write of the GIC's priority mask). Timer-mode samples also move to where
# interrupts come back on (el0_svc, lock_is_held_type), all within dd's own samples. 1 % lets
# that rest take up to 99 times the zeroing's time. What the floor catches is attribution gone
# wrong: PCs resolved against the wrong text leave a share of the order of the two routines'
# size in the kernel text (well under 0.1 %), samples charged to the wrong task none.
ZEROING_FLOOR = 0.01


def work_pids(log):
    """The pids of the last each_cpu workload, as the guest printed them (lib.sh work_pids:
    "WORKPIDS PID..."), as a set; empty when the line is missing."""
    m = re.findall(r"^WORKPIDS((?: \d+)*)$", log, re.M)
    return {int(x) for x in m[-1].split()} if m else set()


def text_symbols(sysmap_path):
    """System.map's text symbols (types t, T, w, W) as (sorted addresses, their names)."""
    syms = []
    with open(sysmap_path) as f:
        for line in f:
            w = line.split()
            if len(w) == 3 and w[1] in "tTwW":
                syms.append((int(w[0], 16), w[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def kernel_samples_by_pid(decode_text):
    """The kernel-mode samples of an `oprof decode` listing (not call-chain frames, grouped as
    `oprof report` groups them: input/stream.rs ChainState), as {pid: [pc, ...]}; pid None for
    samples between a CPU_SWITCH and the CTX_SWITCH after it (the module writes none there)."""
    pid, kernel, trace_next, chain_open = None, None, False, False
    out = {}
    for line in decode_text.splitlines():
        rec = line.partition(": ")[2].strip()
        if rec in ("KernelEnter", "KernelExit"):
            kernel = rec == "KernelEnter"
        elif rec == "TraceBegin":
            trace_next, chain_open = True, False
        elif rec.startswith("CpuSwitch"):
            pid, chain_open = None, False
        elif m := re.match(r"CtxSwitch \{ pid: (?:0x)?([0-9a-f]+)", rec):
            pid, chain_open = int(m[1], 16), False
        elif m := re.match(r"Sample \{ pc: (?:0x)?([0-9a-f]+), event: (?:0x)?([0-9a-f]+)", rec):
            if chain_open and int(m[2], 16) == 0 and not trace_next:
                continue
            chain_open, trace_next = trace_next, False
            if kernel:
                out.setdefault(pid, []).append(int(m[1], 16))
    return out


def zeroing_samples(decode_text, sysmap_path, pids):
    """How the kernel samples of an `oprof decode` listing fall on the ZEROING routines, by
    System.map (not by oprof's symbol tables): (the samples of PIDS in them, all kernel samples
    of PIDS, the samples of every task in them)."""
    addrs, names = text_symbols(sysmap_path)

    def zeroing(pc):
        i = bisect.bisect_right(addrs, pc) - 1
        return i >= 0 and ZEROING.search(names[i]) is not None

    by_pid = kernel_samples_by_pid(decode_text)
    mine = [pc for p in pids for pc in by_pid.get(p, [])]
    every = sum(zeroing(pc) for pcs in by_pid.values() for pc in pcs)
    return sum(map(zeroing, mine)), len(mine), every


def zeroing_checks(s, rep, decode, what=""):
    """Two checks of a capture of `dd if=/dev/zero of=/dev/null` per CPU (REP: its `oprof report
    --json`; DECODE: its `oprof decode` listing) that kernel samples land on the right routine in
    the right task, whatever the kernel's debug options add around it: the dd processes' own
    kernel samples (their pids from the guest's WORKPIDS line, their samples from the listing's
    task switches, their symbols from System.map) fall on ZEROING at least ZEROING_FLOOR of the
    time, and dd holds most of ZEROING's samples (other tasks zero user memory only at exec);
    `oprof report` puts on those routines exactly the samples System.map does. WHAT prefixes
    the checks' names."""
    pids = work_pids(s.log)
    mine_zero, mine, every = zeroing_samples(decode, f"{s.kout}/System.map", pids)
    share = mine_zero / mine if mine else 0
    s.check(len(pids) == s.cpus and mine >= 200 and share >= ZEROING_FLOOR and mine_zero >= 0.9 * every,
            f"{what}dd's zeroing routines hold {mine_zero} of the {mine} kernel samples of its pids {sorted(pids)} "
            f"({share:.1%}, want >= {ZEROING_FLOOR:.0%} of >= 200, one dd per CPU) and >= 90% of the {every} "
            f"samples of every task there")
    rows = {r["symbol"]: r["samples"] for r in rep["rows"] if r["image"] == "vmlinux" and ZEROING.search(r["symbol"])}
    s.check(sum(rows.values()) == every,
            f"{what}oprof report's zeroing rows {rows} hold the {every} samples System.map puts there")


def main(doc, plan, checks):
    """Runs a check module: parses the common arguments (module docstring DOC as help), prints
    the plan `1..plan(board, debug)` (DEBUG: whether the log is a debug kernel's), runs
    checks(Session) and verifies that it reported that many. A plan of 0 prints "1..0 # SKIP"
    (nothing to check on this board)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log", required=True, help="the guest's serial log")
    p.add_argument("--board", choices=sorted(BOARDS), help="default: the start of the log's file name")
    p.add_argument("--out", help="directory for extracted files and oprof output (default: the log's)")
    p.add_argument("--name", help="prefix of those files (default: the log's name without .log)")
    p.add_argument("--kout", help="kernel build tree (default: $KOUT or the cached tree)")
    p.add_argument("--oprof", default=os.path.join(REPO, "target/release/oprof"), help="the host tool")
    p.add_argument("--root", help="the guest's sysroot (default: OUT/initramfs.root)")
    args = p.parse_args()
    if not args.board:
        base = os.path.basename(args.log)
        args.board = next((b for b in BOARDS if base.startswith(b + "-")), None)
        if not args.board:
            p.error(f"--board: cannot tell the board from the log's name {base!r}")
    s = Session(args)
    n = plan(args.board, s.debug_kernel)
    print(f"1..{n}" + (f" # SKIP nothing to check on {args.board}" if n == 0 else ""), flush=True)
    try:
        checks(s)
    except Bail as e:
        print(f"Bail out! {e}", flush=True)
        sys.exit(2)
    if s.ran != n:
        sys.exit(f"{s.ran} checks reported, the plan says {n}")
