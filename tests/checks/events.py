"""Host checks of tests/guest/events.sh: event-based sampling on the A15 with CCNT (counter 0,
CPU_CYCLES every 2M cycles) and counter 1 (CLOCK_CYCLES every 1M cycles) over a kernel-bound dd
per CPU, and a kernel-only (user=0) stream, through `oprof report`.

Plan: 8 checks on virt-a15; none on realview-pb-a8 (no PMU interrupt: the guest script checks
the lost samples itself).

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/events.py --log build/tests/virt-a15-events.log [--board virt-a15]
        [--out build/tests] [--kout KERNEL_TREE] [--oprof target/release/oprof]
Writes NAME.buf, NAME.kbuf (the streams), NAME.json, NAME.txt, NAME-k.json next to the log.
"""
import json
import re

from logcheck import PMU_IRQ, main, received_and_lost, stats as read_stats

COUNTERS = ["--cpu-type", "arm/armv7-ca15", "--counter", "0:CPU_CYCLES:2000000", "--counter", "1:CLOCK_CYCLES:1000000"]


def plan(board):
    return 8 if board in PMU_IRQ else 0


def checks(s):
    if plan(s.board) == 0:
        return
    buf, kbuf = s.stream("opbuf", ".buf"), s.stream("kbuf", ".kbuf")
    vmlinux = ["--vmlinux", f"{s.kout}/vmlinux"]
    rep = json.loads(s.oprof("report", buf, *vmlinux, *COUNTERS, "--json", out=".json"))
    text = s.oprof("report", buf, *vmlinux, *COUNTERS, "-n", "8", out=".txt", what="report (text)")
    krep = json.loads(s.oprof("report", kbuf, "--json", out="-k.json", what="report of the kernel-only stream"))
    log = s.log
    stats = read_stats(log)
    pe = {int(k): v for k, v in rep["per_event"].items()}
    s0, s1 = pe.get(0, 0), pe.get(1, 0)
    s.check(s0 >= 200 and s1 >= 200, f"both counters sampled (counter 0: {s0}, counter 1: {s1})")
    ratio = s1 / s0 if s0 else 0
    s.check(1.6 <= ratio <= 2.4, f"sample ratio counter1/counter0 = {ratio:.3f}, periods say 2.0 (+-20%)")
    m = re.search(r"^TOTAL counter0 (\d+) counter1 (\d+)$", log, re.M)
    if m:
        t0, t1 = int(m[1]), int(m[2])
        for c, t, period, got in ((0, t0, 2_000_000, s0), (1, t1, 1_000_000, s1)):
            want = t / period
            s.check(want > 0 and abs(got - want) <= 0.2 * want,
                    f"counter {c} samples {got} match total {t} / count {period} = {want:.0f} (+-20%)")
    else:
        for c in (0, 1):
            s.check(False, f"counter {c}: TOTAL line missing")
    received, lost = received_and_lost(stats)
    s.check(received == rep["total"] + lost, f"sample_received {received} == delivered {rep['total']} + lost {lost}")
    top = [r["symbol"] for r in rep["rows"] if r["image"] == "vmlinux"][:5]
    hot = re.compile(r"clear_user|memzero|memset|copy_to_user|read_zero|iov_iter|zero")
    s.check(any(hot.search(x) for x in top), f"cycles put dd's zero/copy routines among the hottest kernel symbols {top}")
    s.check("CPU_CYCLES" in text and "CLOCK_CYCLES" in text and "Counter 1:" in text,
            "text report has a column per counter, named by event")
    s.check(krep["total"] >= 50 and krep["user"] == 0,
            f"user=0 gives kernel samples only ({krep['kernel']} kernel, {krep['user']} user)")


if __name__ == "__main__":
    main(__doc__, plan, checks)
