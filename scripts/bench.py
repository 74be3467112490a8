#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench.py --log BOARD=LOG... [--p4 FILE] --json OUT: the table of `make bench`.

Reads the "BENCH ..." lines of tests/guest/bench.sh in each board's serial log and the P4 lines
scripts/bench.sh measured on the host, prints one table and writes every row, every raw run and
the run's facts (date, tree, host) to OUT (JSON); scripts/bench-table.py turns OUT into the
README's Markdown table. Documentation/performance.rst explains each figure.

Each row: figure, ours and the peer's (perf's) median with [min-max] over the repetitions, their
ratio (ours/perf), the samples each side took or read, the goal and pass/miss. Exits 1, after
printing the table, on any error: a guest that did not finish, a BENCH ERROR line, a P2 run whose
stream does not add up to the module's counters, or a figure with no runs behind it.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

ERRORS = []


def error(msg):
    ERRORS.append(msg)
    print(f"bench: error: {msg}", file=sys.stderr)


def parse_kv(words):
    out = {}
    for w in words:
        if "=" in w:
            k, v = w.split("=", 1)
            for conv in (int, float):
                try:
                    out[k] = conv(v)
                    break
                except ValueError:
                    pass
            else:
                out[k] = v
    return out


def read_log(path):
    runs, errors, info = [], [], {}
    lines = open(path, errors="replace").read().replace("\r", "").splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("BENCH "):
            continue
        w = line.split()
        if w[1] == "ERROR":
            errors.append(" ".join(w[2:]) + ": " + " | ".join(lines[i + 1:i + 4]))
        elif w[1] == "INFO":
            info = parse_kv(w[2:])
        elif w[1] in ("P1", "P2", "P3", "P4"):
            runs.append(dict(part=w[1], **parse_kv(w[2:])))
    done = any(line.startswith("BENCH DONE") for line in lines)
    return runs, errors, info, done


def splats(path, regex):
    """Lines of the log that match regex (base64 blocks left out), as tests/tap.sh's
    splat_lines."""
    pat, b64 = re.compile(regex), re.compile(r"^[A-Za-z0-9+/=]+$")
    lines = open(path, errors="replace").read().replace("\r", "").splitlines()
    return [line for line in lines if not b64.match(line) and pat.search(line)]


def stat(xs):
    """Median and [min, max] of xs, or None."""
    xs = [x for x in xs if x is not None]
    return dict(median=statistics.median(xs), min=min(xs), max=max(xs), n=len(xs)) if xs else None


class Table:
    def __init__(self):
        self.rows = []

    def add(self, part, board, figure, unit, ours=None, peer=None, samples=None, goal=None, ok=None,
            ratio=None, detail=None, need=True):
        """A row; ours/peer are lists of runs (a median and spread) or one value. samples: the
        samples each side took or read, (ours, perf) medians. need: a row without our runs is
        an error."""
        o = ours if isinstance(ours, dict) or ours is None else stat(ours if isinstance(ours, list) else [ours])
        p = peer if isinstance(peer, dict) or peer is None else stat(peer if isinstance(peer, list) else [peer])
        if need and o is None:
            error(f"{part} {board}: no runs for '{figure}'")
        if ratio is None and o and p and p["median"] > 0:
            ratio = o["median"] / p["median"]
        self.rows.append(dict(part=part, board=board, figure=figure, unit=unit, ours=o, peer=p, ratio=ratio,
                              samples=samples, goal=goal, result=None if ok is None else ("pass" if ok else "miss"),
                              detail=detail or {}))


def fmt(s, unit):
    """A median [min–max] cell of a row's stat (see stat) in its unit (also scripts/bench-table.py's)."""
    if s is None:
        return "-"

    def one(x):
        if unit == "%":
            return f"{x:.2f} %"
        if unit in ("ns", "B"):
            return f"{x:.0f} {unit}"
        if unit == "s":
            return f"{x:.2f} s"
        if unit == "MB":
            return f"{x:.0f} MB"
        return f"{x:g}"
    if s["n"] == 1 or s["min"] == s["max"]:
        return one(s["median"])
    return f"{one(s['median'])} [{one(s['min'])}–{one(s['max'])}]"


def render(rows):
    hdr = ("figure", "ours", "perf", "ratio", "samples ours/perf", "goal", "result")
    cells = [hdr]
    for r in rows:
        sm = "-" if not r["samples"] else "/".join("-" if x is None else f"{x:.0f}" for x in r["samples"])
        cells.append((f"{r['part']} {r['board']} {r['figure']}", fmt(r["ours"], r["unit"]), fmt(r["peer"], r["unit"]),
                      "-" if r["ratio"] is None else f"{r['ratio']:.2f}", sm, r["goal"] or "-", r["result"] or "-"))
    width = [max(len(c[i]) for c in cells) for i in range(len(hdr))]
    out = []
    for j, c in enumerate(cells):
        out.append("  ".join(c[i].ljust(width[i]) if i == 0 else c[i].rjust(width[i]) for i in range(len(hdr))).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in width))
    return "\n".join(out)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def sampling_periods(info):
    """The guest's sampling periods in ns: timer mode's and perf's cpu-clock (`hz`), and the
    hardware modes' (`N` cycles at QEMU's 1 cycle per ns)."""
    return dict(timer=1e9 / max(1, info.get("hz", 1000)), cycles=info.get("N", 0))


def cost_per_period(ns, base_ns, period_ns, cpus):
    """A run's slowdown over its bare run, in ns per sampling period that elapsed on every CPU
    during the timed run (every CPU, idle or not, takes an interrupt per period: hrtimers fire
    on idle CPUs, QEMU's cycle counter runs in WFI). Not per sample the session reports: those
    also cover the session's start and end, outside the timed run, longer for some profilers."""
    return (ns - base_ns) / (ns * cpus / period_ns)


def p1(t, board, runs, info):
    """Slowdown of each profiled run against the bare run of the same repetition; cost per
    sampling period by slowdown, and above the bare interrupt at the same rate (floor-*)."""
    p = [r for r in runs if r["part"] == "P1" and r.get("status") == 0 and "ns" in r]
    bare = {(r["wl"], r["rep"]): r["ns"] for r in p if r["mode"] == "bare"}
    pairs = [("timer", "perf-F", "floor-timer", f"timer {info.get('hz')} Hz vs perf -e cpu-clock -F {info.get('hz')}"),
             ("cycles", "perf-c", "floor-cycles", f"CPU_CYCLES:{info.get('N')} vs perf -e cycles -c {info.get('N')}")]
    modes = {r["mode"] for r in p}

    def runs_of(wl, mode, ch):
        return [r for r in p if r["mode"] == mode and r["wl"] == wl and r["chains"] == ch and (wl, r["rep"]) in bare]

    def slow(wl, mode, ch):
        return [100.0 * (r["ns"] / bare[(wl, r["rep"])] - 1) for r in runs_of(wl, mode, ch)]

    periods = sampling_periods(info)
    cpus = max(1, info.get("cpus", 1))

    def per_period(wl, mode, ch):
        per = periods["cycles" if mode in ("cycles", "perf-c", "floor-cycles") else "timer"]
        return {r["rep"]: cost_per_period(r["ns"], bare[(wl, r["rep"])], per, cpus) for r in runs_of(wl, mode, ch)
                if per}

    for wl in ("cpu", "kernel"):
        for ours, peer, floor, what in pairs:
            if ours not in modes:
                continue
            fl = per_period(wl, floor, 0)
            t.add("P1", board, f"{wl}: bare interrupt, {floor} (empty handler): cost per period by slowdown", "ns",
                  list(fl.values()), samples=(med([r["samples"] for r in runs_of(wl, floor, 0)]), None),
                  detail=dict(runs=fl))
            for ch in (0, 1):
                g = " -g 16 / --call-graph fp,16" if ch else ""
                a, b = slow(wl, ours, ch), slow(wl, peer, ch)
                sa = med([r.get("samples") for r in runs_of(wl, ours, ch)])
                sb = med([r.get("samples") for r in runs_of(wl, peer, ch)])
                ratio = med(a) / med(b) if a and b and med(b) > 0 else None
                t.add("P1", board, f"{wl}: {what}{g}: slowdown", "%", a, b or None, (sa, sb), "ours <= 0.5x perf",
                      None if ratio is None else ratio <= 0.5, ratio, dict(ours=a, peer=b), need=bool(b))
                ca, cb = per_period(wl, ours, ch), per_period(wl, peer, ch)
                t.add("P1", board, f"{wl}: {what}{g}: cost per sampling period by slowdown", "ns",
                      list(ca.values()), list(cb.values()) or None, (sa, sb), detail=dict(ours=ca, peer=cb))
                # Above the floor: the same repetition's bare interrupt cost taken off.
                fa = [v - fl[k] for k, v in ca.items() if k in fl]
                fb = [v - fl[k] for k, v in cb.items() if k in fl]
                t.add("P1", board, f"{wl}: {what}{g}: cost per period above the bare interrupt", "ns",
                      fa, fb or None, (sa, sb), detail=dict(ours=fa, peer=fb))


# stats.json keys (global or per CPU, summed) by kind of loss (Documentation/oprofilefs.rst,
# "Accounting"): samples taken and lost (sample_invalid_eip also counts perf overflows without
# registers), and periods the module counted as not sampled (sample_lost_overrun: perf's late
# overflow interrupts and timer mode's late hrtimer ticks, per CPU).
SAMPLES_LOST = ("sample_lost_overflow", "sample_invalid_eip", "sample_lost_nmi_overflow", "sample_lost_nmi_task",
                "sample_lost_no_mm", "sample_lost_no_mapping", "event_lost_overflow")
PERIODS_COUNTED = ("sample_lost_no_irq", "sample_lost_overrun")
CHAIN_LOSSES = ("backtrace_aborted", "bt_lost_no_mapping", "user_stack_no_buffer", "user_stack_fault",
                "user_stack_lost", "user_stack_refused")


def summed(r, name):
    """The global stat `name` when there is one (the module makes it the sum of its cpuN/ and
    N/ files: sample_lost_overrun has both), else the stat summed over CPUs (cpuN/name)."""
    if name in r:
        return r[name]
    return sum(v for k, v in r.items() if re.fullmatch(rf"cpu\d+/{name}", k))


def p2(t, board, runs, info):
    cpus = max(1, info.get("cpus", 1))
    for r in (r for r in runs if r["part"] == "P2"):
        rate, mode = r["rate"], r["mode"]
        received = summed(r, "sample_received")
        lost = {k: summed(r, k) for k in SAMPLES_LOST}
        counted = {k: summed(r, k) for k in PERIODS_COUNTED}
        chains = {k: summed(r, k) for k in CHAIN_LOSSES}
        throttled = r.get("event_throttled", 0)
        secs = r["period_ns"] / 1e9
        # Periods that took no sample and that the module did not count: the rate asked for
        # over the profiling period, on every CPU, less the samples taken and the periods
        # counted (timer mode counts its late hrtimer ticks' skipped periods too). The session's start and stop fall between
        # two periods of each CPU: up to 2 per CPU are edges, not losses.
        expected = rate * secs * cpus
        uncounted = max(0, round(expected - received - sum(counted.values())))
        uncounted = uncounted if uncounted > 2 * cpus else 0
        total = sum(lost.values()) + sum(counted.values()) + uncounted
        # The stream's own count against the module's: every sample taken reached the stream or
        # was counted lost.
        stream = r.get("total_samples")
        if stream is None or stream + sum(lost.values()) != received:
            error(f"P2 {board} {mode} {rate}/s: stream samples {stream} + lost {sum(lost.values())} != "
                  f"received {received}")
        wl = "opwork per CPU" if mode.startswith("timer-") else "dd per CPU"
        goal = "0 lost" if rate >= 20000 else None
        t.add("P2", board, f"{mode} {rate}/s/CPU ({wl}, {secs:.1f} s): samples and periods lost of "
              f"{expected:.0f} periods ({received / secs / cpus:.0f} samples/s/CPU taken)", "", total,
              samples=(stream, None), goal=goal, ok=(total == 0 and throttled == 0) if goal else None,
              detail=dict(received=received, stream=stream, samples_lost=lost, periods_counted=counted,
                          periods_uncounted=uncounted, event_throttled=throttled, chain_losses=chains,
                          expected_periods=expected, seconds=secs))


PARTS = ("sample_resolve", "ring_push", "user_stack_copy", "bt_kernel", "bt_user", "bt_user_frame")


def p3(t, board, runs, info):
    p = [r for r in runs if r["part"] == "P3" and r.get("status") == 0 and "ns" in r]
    none = {(r["wl"], r["rep"]): r["ns"] for r in p if r["mode"] == "none"}
    hw = board == "virt-a15"
    rate = f"CPU_CYCLES:{info.get('N')}" if hw else f"timer {info.get('hz')} Hz"
    t.add("P3", board, f"clock: {info.get('clocksource')}, smallest step of CLOCK_MONOTONIC (what "
          "ktime_get_ns() resolves)", "ns", info.get("clockres_ns"))

    def by(wl, mode):
        return [r for r in p if r["wl"] == wl and r["mode"] == mode and (wl, r["rep"]) in none and r.get("count")]

    period = sampling_periods(info)["cycles" if hw else "timer"]
    cpus = max(1, info.get("cpus", 1))

    def cost(wl, mode):
        return [cost_per_period(r["ns"], none[(wl, r["rep"])], period, cpus) for r in by(wl, mode) if period]

    bare_runs = by("kernel", "bare") + by("cpu", "bare")
    bare = stat(cost("kernel", "bare") + cost("cpu", "bare"))
    self_ns = stat([r["handler_ns"] / r["count"] for r in bare_runs])
    t.add("P3", board, f"bare interrupt ({rate}, empty handler): cost per period by slowdown", "ns", bare)
    t.add("P3", board, "bare interrupt: the empty handler's own timed section", "ns", self_ns)
    for wl, mode, what, goal in (("kernel", "ours", "kernel PC", True), ("cpu", "ours", "user PC", True),
                                 ("cpu", "ours-bt", "user PC + 16-entry frame-pointer chain", False),
                                 ("cpu", "ours-stack", "user PC + user-stack snapshot", False)):
        rs = by(wl, mode)
        share = med([100.0 * r["user_samples"] / (r["user_samples"] + r["kernel_samples"]) for r in rs
                     if r.get("user_samples") is not None and r["user_samples"] + r["kernel_samples"]])
        what = f"{what} ({share:.0f} % user samples)" if share is not None else what
        n = med([r["count"] for r in rs])
        c = stat(cost(wl, mode))
        ratio = c["median"] / bare["median"] if c and bare and bare["median"] > 0 else None
        t.add("P3", board, f"{what}: cost per period by slowdown vs the bare interrupt's", "ns", c, bare, (n, None),
              "<= 2x bare" if goal else None, None if ratio is None or not goal else ratio <= 2, ratio)
        t.add("P3", board, f"{what}: sample_handler's timed section vs the empty handler's", "ns",
              [r.get("sample_handler_ns") for r in rs], self_ns, (n, None))
        t.add("P3", board, f"{what}: stream bytes per sample", "B",
              [r["stream_bytes"] / r["count"] for r in rs], samples=(n, None))
        for point in ("sync_pass", "buffer_read"):
            t.add("P3", board, f"{what}: {point} per sample", "ns",
                  [r[point + "_s"] * 1e9 / r["count"] for r in rs if r.get(point + "_s") is not None],
                  samples=(n, None), need=False)
        # The handler's parts, timed in runs of their own (-parts), per sample taken.
        prs = by(wl, mode + "-parts")
        for part in PARTS:
            v = [r[part + "_s"] * 1e9 / r["count"] for r in prs if r.get(part + "_s") is not None]
            if v:
                t.add("P3", board, f"{what}: part {part}, per sample", "ns", v,
                      samples=(med([r["count"] for r in prs]), None),
                      detail=dict(per_run_ns=[r.get(part + "_ns") for r in prs],
                                  runs_per_sample=[r[part + "_nr"] / r["count"] for r in prs if part + "_nr" in r]))


def p4(t, runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["source"], r["samples"], r["view"]), {}).setdefault(r["tool"], []).append(r)
    if not groups:
        error("P4: no runs")
    for (source, n, view), tools in sorted(groups.items()):
        o, q = tools.get("ours", []), tools.get("perf", [])
        label = (f"{n / 1e6:g}M samples (replicated)" if source == "replicated" else "long recording") + \
            (", flat symbol list" if view == "flat" else ", call graph")
        goal = source == "replicated" and n >= 10_000_000 and view == "graph"
        sm = (med([r["read"] for r in o]), med([r["read"] for r in q]))
        ot, om = stat([r["wall_s"] for r in o]), stat([r["rss_kb"] / 1024 for r in o])
        t.add("P4", "host", f"report {label}: wall time", "s", ot, stat([r["wall_s"] for r in q]), sm,
              "<= 2 s" if goal else None, (ot["median"] <= 2) if goal and ot else None)
        t.add("P4", "host", f"report {label}: peak RSS", "MB", om, stat([r["rss_kb"] / 1024 for r in q]), sm,
              "<= 300 MB" if goal else None, (om["median"] <= 300) if goal and om else None)


def facts():
    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.machine())
    # The tree scripts/bench.sh measured (BENCH_TREE, taken when it started), else this one.
    tree = os.environ.get("BENCH_TREE") or (run("git", "-C", repo, "rev-parse", "--short", "HEAD") or "unknown") + \
        (" with local changes" if run("git", "-C", repo, "status", "--porcelain", "--untracked-files=no") else "")
    return dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), tree=tree,
                host=f"{os.cpu_count()} x {model}",
                qemu=next(iter((run("qemu-system-arm", "--version") or "").splitlines()), None))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", action="append", default=[], help="BOARD=LOG")
    ap.add_argument("--p4")
    ap.add_argument("--json", required=True)
    ap.add_argument("--splat", help="regular expression of kernel reports (tests/tap.sh's SPLAT)")
    a = ap.parse_args()
    t = Table()
    raw = {}
    for spec in a.log:
        board, path = spec.split("=", 1)
        runs, errors, info, done = read_log(path)
        raw[board] = dict(info=info, runs=runs, errors=errors, complete=done)
        for e in errors:
            error(f"{board}: guest error: {e}")
        if not done:
            error(f"{board}: the guest did not finish (see {path})")
        if a.splat:
            for line in splats(path, a.splat):
                error(f"{board}: kernel report in the guest log: {line}")
        parts = {r["part"] for r in runs}
        if "P1" in parts:
            p1(t, board, runs, info)
        if "P2" in parts:
            p2(t, board, runs, info)
        if "P3" in parts:
            p3(t, board, runs, info)
    if a.p4:
        runs = [parse_kv(line.split()[2:]) for line in open(a.p4) if line.startswith("BENCH P4 ")]
        raw["p4"] = runs
        p4(t, runs)
    print(render(t.rows))
    reps = {b: raw[b]["info"].get("reps") for b in raw if b != "p4"}
    with open(a.json, "w") as f:
        json.dump(dict(facts=dict(facts(), reps=reps, errors=ERRORS), rows=t.rows, raw=raw), f, indent=1)
    sys.exit(1 if ERRORS else 0)


if __name__ == "__main__":
    main()
