#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench.py --log BOARD=LOG... [--p4 FILE] --json OUT: the table of `make bench`.

Reads the "BENCH ..." lines of tests/guest/bench.sh in each board's serial log and the P4 lines
scripts/bench.sh measured on the host, prints one table (figure, ours, peer, ratio, goal,
pass/miss) and writes every row and every raw run to OUT (JSON). Documentation/performance.rst
explains each figure. Exits 1 if a log lacks its figures (a guest error is printed).
"""
import argparse
import json
import statistics
import sys


def parse_kv(words):
    out = {}
    for w in words:
        if "=" in w:
            k, v = w.split("=", 1)
            try:
                out[k] = int(v)
            except ValueError:
                try:
                    out[k] = float(v)
                except ValueError:
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


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return [min(xs), max(xs)] if xs else None


class Table:
    def __init__(self):
        self.rows = []

    def add(self, figure, ours, peer, unit, goal=None, ok=None, ratio=None, detail=None):
        if ratio is None and ours is not None and peer not in (None, 0):
            ratio = ours / peer
        self.rows.append(dict(figure=figure, ours=ours, peer=peer, unit=unit, ratio=ratio, goal=goal,
                              result=None if ok is None else ("pass" if ok else "miss"), detail=detail or {}))

    def render(self):
        def num(x, unit):
            if x is None:
                return "-"
            if isinstance(x, str):
                return x
            if unit == "%":
                return f"{x:.2f}%"
            if unit == "ns":
                return f"{x:.0f} ns"
            if unit == "s":
                return f"{x:.2f} s"
            if unit == "MB":
                return f"{x:.0f} MB"
            if unit == "B":
                return f"{x:.0f} B"
            return f"{x:g}"
        hdr = ("figure", "ours", "peer", "ratio", "goal", "result")
        cells = [hdr] + [(r["figure"], num(r["ours"], r["unit"]), num(r["peer"], r["unit"]),
                          "-" if r["ratio"] is None else f"{r['ratio']:.2f}", r["goal"] or "-", r["result"] or "-")
                         for r in self.rows]
        width = [max(len(c[i]) for c in cells) for i in range(len(hdr))]
        out = []
        for j, c in enumerate(cells):
            out.append("  ".join(c[i].ljust(width[i]) if i == 0 else c[i].rjust(width[i]) for i in range(len(hdr))).rstrip())
            if j == 0:
                out.append("  ".join("-" * w for w in width))
        return "\n".join(out)


def p1(t, board, runs, info):
    """Slowdown of each profiled run against the bare run of the same repetition."""
    p = [r for r in runs if r["part"] == "P1" and r.get("status") == 0 and "ns" in r]
    bare = {(r["wl"], r["rep"]): r["ns"] for r in p if r["mode"] == "bare"}
    pairs = [("timer", "perf-F", f"timer {info.get('hz', 1000)} Hz vs perf -e cpu-clock -F"),
             ("cycles", "perf-c", f"CPU_CYCLES:{info.get('N')} vs perf -e cycles -c")]
    for wl in ("cpu", "kernel"):
        for ours, peer, what in pairs:
            for ch in (0, 1):
                def slow(mode):
                    return [100.0 * (r["ns"] / bare[(wl, r["rep"])] - 1) for r in p
                            if r["mode"] == mode and r["wl"] == wl and r["chains"] == ch and (wl, r["rep"]) in bare]
                a, b = slow(ours), slow(peer)
                if not a and not b:
                    continue
                ma, mb = med(a), med(b)
                ratio = ma / mb if ma is not None and mb not in (None, 0) and mb > 0 else None
                ok = None if ratio is None else ratio <= 0.5
                t.add(f"P1 {board} {wl}: {what}{' -g' if ch else ''} (slowdown)", ma, mb, "%",
                      "ours <= 0.5x perf", ok, ratio,
                      dict(ours=a, peer=b, ours_spread=spread(a), peer_spread=spread(b)))


P2_CAUSES = ("sample_lost_overflow", "sample_invalid_eip", "sample_lost_no_mm", "sample_lost_no_mapping",
             "event_lost_overflow", "sample_lost_no_irq", "sample_lost_overrun", "bt_lost_no_mapping",
             "backtrace_aborted", "user_stack_no_buffer", "user_stack_fault", "user_stack_lost")


def p2(t, board, runs, info):
    for r in (r for r in runs if r["part"] == "P2"):
        received = sum(v for k, v in r.items() if k.startswith("cpu") and k.endswith("/sample_received"))
        causes = {}
        for k, v in r.items():
            name = k.split("/")[-1]
            if name in P2_CAUSES and isinstance(v, int) and v:
                causes[name] = causes.get(name, 0) + v
        # Samples lost; chains cut and snapshots not taken or lost show in the causes.
        lost = sum(v for k, v in causes.items() if k not in ("bt_lost_no_mapping", "backtrace_aborted",
                                                             "sample_lost_no_irq", "sample_lost_overrun",
                                                             "user_stack_no_buffer", "user_stack_fault",
                                                             "user_stack_lost"))
        rate = r["rate"]
        secs = r.get("period_ns", 0) / 1e9 or r.get("seconds", 1)
        cpus = max(1, info.get("cpus", 1))
        per_cpu_s = received / secs / cpus
        # Periods that took no sample at all (a late hrtimer or overflow skips them; timer mode
        # counts them nowhere): the rate asked for over the profiling period, less the samples taken.
        expected = rate * secs * cpus
        missed = max(0, round(expected) - received)
        missed = missed if missed > expected / 1000 else 0  # the period's ends round
        goal = "0 lost" if rate >= 20000 else None
        ok = (lost == 0) if goal else None
        t.add(f"P2 {board} {r['mode']} {rate}/s/CPU: lost of {received} taken ({per_cpu_s:.0f}/s/CPU, "
              f"{missed} periods without a sample)", lost, None, "",
              goal, ok, None, dict(received=received, delivered=r.get("stream_samples"), causes=causes,
                                   missed_periods=missed, rate=rate, seconds=secs))


def p3(t, board, runs, info):
    p = [r for r in runs if r["part"] == "P3" and r.get("status") == 0 and "ns" in r]
    none = {(r["wl"], r["rep"]): r["ns"] for r in p if r["mode"] == "none"}

    # Interrupts during the timed run: every CPU, idle or not, takes one per period (QEMU's cycle
    # counter runs at 1 GHz in WFI too; hrtimers fire on idle CPUs). The runs' own counts cover
    # the whole session or module lifetime, a little longer than the timed run.
    hw = board == "virt-a15"
    period_ns = info.get("N", 0) if hw else 1e9 / max(1, info.get("hz", 1000))

    def per_event(wl, mode):
        return [(r["ns"] - none[(wl, r["rep"])]) / (r["ns"] * info.get("cpus", 1) / period_ns) for r in p
                if r["wl"] == wl and r["mode"] == mode and (wl, r["rep"]) in none and period_ns]

    rate = f"CPU_CYCLES:{info.get('N')}" if hw else f"timer {info.get('hz')} Hz"
    bare_all = per_event("kernel", "bare") + per_event("cpu", "bare")
    bare = med(bare_all)
    handler = [r["handler_ns"] / r["count"] for r in p if r["mode"] == "bare" and r.get("count")]
    t.add(f"P3 {board} bare interrupt ({rate}, empty handler): cost by slowdown", bare, None, "ns", None, None, None,
          dict(runs=bare_all, handler_self_ns=med(handler)))
    for wl, mode, what, goal in (("kernel", "ours", "kernel PC", True), ("cpu", "ours", "user PC", True),
                                 ("cpu", "ours-bt", "user PC + 16-frame backtrace", False),
                                 ("cpu", "ours-stack", "user PC + user-stack snapshot", False)):
        size = [r["stream_bytes"] / r["count"] for r in p
                if r["wl"] == wl and r["mode"] == mode and r.get("count") and r.get("stream_bytes") is not None]
        if size:
            t.add(f"P3 {board} stream bytes per sample, {what}", med(size), None, "B", None, None, None, dict(runs=size))
        sh = [r["avg_ns"] for r in p if r["wl"] == wl and r["mode"] == mode and "avg_ns" in r]
        m = med(sh)
        ratio = m / bare if m is not None and bare and bare > 0 else None
        t.add(f"P3 {board} sample_handler, {what}", m, bare, "ns", "<= 2x bare" if goal else None,
              None if ratio is None or not goal else ratio <= 2, ratio, dict(runs=sh))
        cost = per_event(wl, mode)
        mc = med(cost)
        t.add(f"P3 {board} cost per sample by slowdown, {what}", mc, bare, "ns", None, None,
              mc / bare if mc is not None and bare and bare > 0 else None, dict(runs=cost))
        # The rest of a sample's way, per sample: sync pass (cpu buffer -> event buffer) and
        # the reader's copy (profile points sync_pass, buffer_read).
        for point in ("sync_pass", "buffer_read"):
            v = [r[point + "_s"] * 1e9 / r["nr"] for r in p
                 if r["wl"] == wl and r["mode"] == mode and r.get(point + "_s") is not None and r.get("nr")]
            if v:
                t.add(f"P3 {board} {point} per sample, {what}", med(v), None, "ns", None, None, None, dict(runs=v))


def p4(t, runs):
    rows = {}
    for r in runs:
        rows[(r["tool"], r["samples"], r["chains"])] = r
    for n in sorted({k[1] for k in rows}):
        for ch in (0, 1):
            o, q = rows.get(("ours", n, ch)), rows.get(("perf", n, ch))
            if not o and not q:
                continue
            label = f"{n / 1e6:g}M samples{', call chains' if ch else ''}"
            goal = n >= 10_000_000 and ch
            ot, pt = (o or {}).get("wall_s"), (q or {}).get("wall_s")
            om, pm = (o or {}).get("rss_kb"), (q or {}).get("rss_kb")
            t.add(f"P4 report {label}: wall time", ot, pt, "s", "<= 2 s" if goal else None,
                  (ot is not None and ot <= 2) if goal else None, None, dict(ours=o, peer=q))
            t.add(f"P4 report {label}: peak RSS", om / 1024 if om else None, pm / 1024 if pm else None, "MB",
                  "<= 300 MB" if goal else None, (om is not None and om <= 300 * 1024) if goal else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", action="append", default=[], help="BOARD=LOG")
    ap.add_argument("--p4")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    t = Table()
    raw, bad = {}, False
    for spec in a.log:
        board, path = spec.split("=", 1)
        runs, errors, info, done = read_log(path)
        raw[board] = dict(info=info, runs=runs, errors=errors, complete=done)
        for e in errors:
            print(f"bench: {board}: guest error: {e}", file=sys.stderr)
        if not done:
            print(f"bench: {board}: the guest did not finish (see {path})", file=sys.stderr)
            bad = True
        p1(t, board, runs, info)
        p2(t, board, runs, info)
        p3(t, board, runs, info)
    if a.p4:
        runs = [parse_kv(line.split()[2:]) for line in open(a.p4) if line.startswith("BENCH P4 ")]
        raw["p4"] = runs
        p4(t, runs)
    print(t.render())
    with open(a.json, "w") as f:
        json.dump(dict(rows=t.rows, raw=raw), f, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
