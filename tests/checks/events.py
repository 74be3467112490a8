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
    # Samples each counter accounts for: delivered + its own losses (stats/N/; periods perf
    # skipped when an interrupt came late, overflows without interrupt).
    lost_n = [stats.get(f"{c}/sample_lost_overrun", 0) + stats.get(f"{c}/sample_lost_no_irq", 0) for c in (0, 1)]
    acc0, acc1 = s0 + lost_n[0], s1 + lost_n[1]
    ratio = acc1 / acc0 if acc0 else 0
    s.check(1.6 <= ratio <= 2.4,
            f"accounted samples ratio counter1/counter0 = {ratio:.3f} ({acc1}/{acc0}), periods say 2.0 (+-20%)")
    received, lost = received_and_lost(stats)
    m = re.search(r"^TOTAL counter0 (\d+) counter1 (\d+)$", log, re.M)
    if m:
        # Bound proved in Documentation/events.rst ("Lost samples are never silent"): per
        # counter over n CPUs, total/count - (2n - 1) <= received + lost <= total/count. The
        # buffers' own losses (`lost`, all counters together) can only lower the delivered
        # count further, so they widen the lower bound by exactly their number.
        n = s.cpus
        for c, t, period, got in ((0, int(m[1]), 2_000_000, s0), (1, int(m[2]), 1_000_000, s1)):
            want = t // period
            have = got + lost_n[c]
            s.check(want > 0 and want - (2 * n - 1) - lost <= have <= want,
                    f"counter {c}: delivered {got} + its losses {lost_n[c]} = {have} within "
                    f"[{want} - {2 * n - 1} - {lost}, {want}] (total {t} / count {period}, {n} CPUs, "
                    f"buffer losses {lost})")
    else:
        for c in (0, 1):
            s.check(False, f"counter {c}: TOTAL line missing")
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
