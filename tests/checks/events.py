"""Host checks of tests/guest/events.sh: event-based sampling on the A15 with CCNT (counter 0,
CPU_CYCLES every 2M cycles) and counter 1 (CLOCK_CYCLES, event 0x11, every 1M cycles), on the
arm64 boards' Cortex-A53 with PMCCNTR_EL0 (counter 0, CPU_CYCLES every 2M cycles) and counter 1
(event 0x11, CPU_CYCLES too on ARMv8, every 1M cycles), over a kernel-bound dd per CPU, and a
kernel-only (user=0) stream, through `oprof report`. Counter 2 (event 0x11 every 2e9 cycles) is
the canary counting QEMU's PMU races (CANARY_PERIOD below).

Plan: 12 checks on the boards with a PMU interrupt (virt-a15, virt-a53, imx8mp-evk; one more
on the arm64 ones); none on realview-pb-a8 (no PMU interrupt: the guest script checks the lost
samples itself).

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/events.py --log build/tests/virt-a15-events.log [--board virt-a15]
        [--out build/tests] [--kout KERNEL_TREE] [--oprof target/release/oprof]
Writes NAME.buf, NAME.kbuf (the streams), NAME.json, NAME.txt, NAME.decode, NAME-k.json next to
the log.
"""
import json
import re

from logcheck import ARM64, PMU_IRQ, main, not_sampled, received_and_lost, stats as read_stats, zeroing_checks

# A sampling counter loses, on its own CPU, the cycles between perf's read of it and its rewrite
# in the overflow path (armpmu_event_update, then armpmu_event_set_period writing -left: the
# counter runs on in between on ARMv7), and more when the host preempts the vCPU there: measured
# down to -11.2 us per sample beside a `yes` hog. Allowed per sample (ns) below the time running.
PMU_DRIFT_NS = 50_000
# QEMU's PMU race (DEVELOPERS.md, Documentation/events.rst "Counts under QEMU"): QEMU 10.0 may run
# its PMU overflow timer (arm_pmu_timer_cb, in the main loop under the BQL) between the pre- and
# post-EL-change hooks of an exception return, which take the BQL one after the other. The
# counters' delta fields then hold the raw clock, so every enabled counter of that CPU restarts
# from the few cycles since the pre hook, and those whose top bit was set are flagged as
# overflowed: a sampling counter's count jumps by what was left of its period (less than one
# period, and one sample early), so totals and samples exceed the time running by up to a period
# per race. events.sh counts the races with a canary: counter 2 counts cycles every
# CANARY_PERIOD, so each race gives it a sample (two races before its handler runs: a jump
# the module counts as periods lost), and only a CPU counting longer than CANARY_PERIOD gives
# it a sample without a race. Its delivered samples and losses bound the races from above.
CANARY_PERIOD = 2_000_000_000
# events.sh's sampling periods (cycles) of counters 0 and 1.
PERIODS = (2_000_000, 1_000_000)
# What the counters count beyond their time running at the edges of the session, per CPU (ns):
# as the counting check in events.sh.
EDGE_NS = 100_000
# On ARMv8 the driver stops the whole PMU while it handles an overflow interrupt
# (armv8pmu_handle_irq), so each counter misses the handling of every overflow, its own and the
# other counter's: our part is timed (the sample_handler point, HANDLER_NS), the driver's own
# part around it (reading and reprogramming the counters, perf's overflow bookkeeping) is not.
# Measured 18-20 us per overflow on the arm64 debug kernel beside a `yes` hog and three builds
# (both counters 33-36 us per overflow short of their time running, 15 us of it ours): allowed
# per overflow of either counter below the time running.
ARMV8_DRIVER_STOP_NS = 50_000
# The counters events.sh set, by the model's names of counter 1's event 0x11.
COUNTER1 = {False: "CLOCK_CYCLES", True: "CPU_CYCLES"}


def counters(board):
    """`oprof report` options naming the model and events.sh's counters on BOARD."""
    arm64 = board in ARM64
    return ["--cpu-type", "arm/armv8-ca53" if arm64 else "arm/armv7-ca15", "--counter", f"0:CPU_CYCLES:{PERIODS[0]}",
            "--counter", f"1:{COUNTER1[arm64]}:{PERIODS[1]}", "--counter", f"2:{COUNTER1[arm64]}:{CANARY_PERIOD}"]


def plan(board, debug):
    if board not in PMU_IRQ:
        return 0
    return 13 if board in ARM64 else 12


def checks(s):
    if plan(s.board, s.debug_kernel) == 0:
        return
    buf, kbuf = s.stream("opbuf", ".buf", gz=True), s.stream("kbuf", ".kbuf", gz=True)
    vmlinux = ["--vmlinux", f"{s.kout}/vmlinux"]
    rep = json.loads(s.oprof("report", buf, *vmlinux, *counters(s.board), "--json", out=".json"))
    text = s.oprof("report", buf, *vmlinux, *counters(s.board), "-n", "8", out=".txt", what="report (text)")
    krep = json.loads(s.oprof("report", kbuf, "--json", out="-k.json", what="report of the kernel-only stream"))
    log = s.log
    stats = read_stats(log)
    pe = {int(k): v for k, v in rep["per_event"].items()}
    s0, s1, s2 = pe.get(0, 0), pe.get(1, 0), pe.get(2, 0)
    s.check(s0 >= 200 and s1 >= 200, f"both counters sampled (counter 0: {s0}, counter 1: {s1})")
    # Samples each counter accounts for: delivered + its own losses (stats/N/; periods perf
    # skipped when an interrupt came late, overflows without interrupt).
    lost_n = [stats.get(f"{c}/sample_lost_overrun", 0) + stats.get(f"{c}/sample_lost_no_irq", 0) for c in (0, 1, 2)]
    acc0, acc1 = s0 + lost_n[0], s1 + lost_n[1]
    ratio = acc1 / acc0 if acc0 else 0
    s.check(1.6 <= ratio <= 2.4,
            f"accounted samples ratio counter1/counter0 = {ratio:.3f} ({acc1}/{acc0}), periods say 2.0 (+-20%)")
    received, lost = received_and_lost(stats)
    # QEMU's PMU races in the run (at most; CANARY_PERIOD above): the canary's samples, delivered
    # or lost in the buffers (all counters' buffer losses, as the canary's may be among them), and
    # the periods the module counted lost on it.
    races = s2 + lost_n[2] + lost
    m = re.search(r"^TOTAL counter0 (\d+) counter1 (\d+) session_ns (\d+) cpus (\d+) running0 (\d+) running1 (\d+)$",
                  log, re.M)
    if m:
        # The module computes its losses from its own totals (total / count periods less the
        # samples taken, common/counter.rs losses), so both are held to the time each counter
        # ran instead: N/time_running (perf's time_running, summed over the n CPUs; inside the
        # session, optool capture's CLOCK_MONOTONIC interval around enable=1 .. enable=0) x 1
        # cycle per ns (QEMU's cycle counter, both counters count cycles; events.sh checks the
        # rate in counting mode). Nothing throttles 1000 samples/s per CPU (event_throttled 0).
        ns, n = int(m[3]), int(m[4])
        running = (int(m[5]), int(m[6]))
        # On ARMv8 the PMU stops while an overflow is handled (armv8pmu_handle_irq), on its CPU:
        # the handler's time (our part, timed by the sample_handler point: HANDLER_NS, all CPUs,
        # the canary's overflows too) is missing from all totals, and the driver's own part:
        # ARMV8_DRIVER_STOP_NS per overflow.
        h = re.search(r"^HANDLER_NS (\d+) nr (\d+)$", log, re.M)
        stopped = int(h[1]) if h else 0
        if s.board in ARM64:
            s.check(h is not None and int(h[2]) > 0, f"the PMU's stopped time measured: sample_handler {h[0] if h else 'missing'}")
        throttled = stats.get("event_throttled", -1)
        drift = (PMU_DRIFT_NS * s0, PMU_DRIFT_NS * s1)
        if s.board in ARM64:
            stopped += ARMV8_DRIVER_STOP_NS * (s0 + s1 + s2)
        edge = EDGE_NS * n
        for c, t in ((0, int(m[1])), (1, int(m[2]))):
            r, period = running[c], PERIODS[c]
            lo, hi = r - stopped - drift[c], r + edge + races * period
            s.check(0 < r <= ns * n and throttled == 0 and lo <= t <= hi,
                    f"counter {c}: total {t} cycles = its time running at 1 cycle/ns within [{lo}, {hi}] ({c}/time_running "
                    f"{r} ns <= session {ns} ns x {n} CPUs; less {stopped} ns of handlers (ARMv8: ours timed + "
                    f"{ARMV8_DRIVER_STOP_NS} ns per overflow) and {PMU_DRIFT_NS} ns per sample; plus {EDGE_NS} ns per CPU "
                    f"and a period for each of at most {races} QEMU PMU races: {t - r:+d} now; throttled {throttled})")
        # Bound proved in Documentation/events.rst ("Lost samples are never silent"): per
        # counter over n CPUs, periods - (2n - 1) <= received + lost <= periods, the periods
        # here from the time running as above, and one more per QEMU PMU race (an early sample).
        # The buffers' own losses (`lost`, all counters together) can only lower the delivered
        # count further, so they widen the lower bound by exactly their number.
        for c, got in ((0, s0), (1, s1)):
            r, period = running[c], PERIODS[c]
            hi, lo = (r + edge) // period + races, (r - stopped - drift[c]) // period
            # Rejected readings' intervals are out of the time running; their samples are not.
            unmetered = stats.get(f"{c}/event_read_rejected_overflows", 0)
            have = got - unmetered + lost_n[c]
            s.check(ns > 0 and lo - (2 * n - 1) - lost <= have <= hi,
                    f"counter {c}: delivered {got} - {unmetered} in rejected intervals + its losses {lost_n[c]} = {have} within "
                    f"[{lo} - {2 * n - 1} - {lost}, {hi}] (its time running's periods of {period} cycles and {races} QEMU "
                    f"PMU races at most, {n} CPUs, buffer losses {lost})")
    else:
        for c in range(4):
            s.check(False, f"check {c + 1} of 4 on the counters' totals: TOTAL line missing")
    s.check(received == rep["total"] + lost, f"sample_received {received} == delivered {rep['total']} + lost {lost}")
    # Periods skipped by late overflow interrupts, estimated per event (one counter on one CPU):
    # the global file is their sum, and so are the per-CPU and the per-counter files. Readings
    # the module rejected (stats/N/event_read_rejected) left their intervals out of all three.
    by_cpu = sum(v for k, v in stats.items() if re.fullmatch(r"cpu\d+/sample_lost_overrun", k))
    by_counter = sum(v for k, v in stats.items() if re.fullmatch(r"\d+/sample_lost_overrun", k))
    overrun, no_irq = stats.get("sample_lost_overrun", -1), stats.get("sample_lost_no_irq", -1)
    rejected = {k: v for k, v in stats.items() if k.endswith("event_read_rejected") and v}
    s.check(overrun == by_cpu == by_counter and not_sampled(stats) == overrun + no_irq,
            f"sample_lost_overrun {overrun} == sum over CPUs {by_cpu} == sum over counters {by_counter} "
            f"(periods not sampled {not_sampled(stats)}; rejected readings {rejected or 'none'})")
    zeroing_checks(s, rep, s.oprof("decode", buf, out=".decode"))
    c1 = COUNTER1[s.board in ARM64]
    s.check("CPU_CYCLES" in text and c1 in text and "Counter 1:" in text,
            f"text report has a column per counter, named by event (CPU_CYCLES, {c1})")
    s.check(krep["total"] >= 50 and krep["user"] == 0,
            f"user=0 gives kernel samples only ({krep['kernel']} kernel, {krep['user']} user)")


if __name__ == "__main__":
    main(__doc__, plan, checks)
