"""Host checks of tests/guest/record.sh (`oprof record`, issue 12).

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/record.py --log build/tests/virt-a15-record.log [--out build/tests]
        [--kout KERNEL_TREE] [--oprof target/release/oprof]

Unpacks the session directories the guest printed as base64 tar.gz blocks (long.tgz, sigint.tgz,
agree.tgz, full.tgz) into OUT/NAME/ and checks them with the host `oprof`:

- long: a kernel-bound run of at least 30 s at default buffer sizes that read more than ten event
  buffers lost nothing (event_lost_overflow and every cpuN/sample_lost_overflow are 0), and its
  sample count equals the sum of stats/cpu*/sample_received, in session.json and in the host's own
  decode; the top 10 kernel symbols from the session's kallsyms equal those from vmlinux; the dd
  processes' kernel samples fall on the kernel's zeroing routines (logcheck.py zeroing_checks, by
  System.map and the host's `oprof decode` of the session's samples).
- sigint: a session ended by SIGINT decodes, and its samples + losses account for every sample
  taken.
- agree: the guest's `oprof report -l -n 10` of an --archive session equals the host's, which
  reads only the session directory (archived images, kallsyms), and so does its `oprof annotate
  --symbol hot_a --assembly` (its header and instruction rows: the source text is on the host only).
- full: a session whose samples filled its disk is complete, ended by "disk full", counts the bytes
  it could not write, its samples file is its totals.bytes of whole records (the host decodes it
  all), and the samples it holds + losses are no more than were taken (the unwritten ones were).

Plan: 14 checks on a plain kernel (long 7, sigint 2, agree 3, full 2), 11 on a debug kernel,
whose record.sh does not run the --archive session (the tool's own behaviour: the plain kernels'
to check). A session whose block is missing or whose checks crash reports its remaining checks
as failed.
"""
import base64
import io
import json
import os
import re
import subprocess
import tarfile

from logcheck import ARM64, main, not_sampled, received_and_lost, zeroing_checks

CASES = {"long": 7, "sigint": 2, "agree": 3, "full": 2}
# The cases a debug kernel's record.sh leaves out (its PARTS).
PLAIN_ONLY = {"agree"}
S = None  # the logcheck Session of this run


def check(ok, msg):
    S.check(ok, msg)


def block(log, mark):
    """The lines between "== MARK begin" and "== MARK end", or None."""
    m = re.search(rf"^== {re.escape(mark)} begin\n(.*?)^== {re.escape(mark)} end$", log, re.M | re.S)
    return m.group(1) if m else None


def unpack(log, name, outdir):
    """Unpacks the NAME.tgz block into OUTDIR/NAME; returns the directory or None."""
    b64 = block(log, f"{name}.tgz")
    if b64 is None:
        return None
    data = base64.b64decode("".join(l for l in b64.split("\n") if re.fullmatch(r"[A-Za-z0-9+/=]+", l)))
    dest = os.path.join(outdir, name)
    subprocess.run(["rm", "-rf", dest], check=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        t.extractall(outdir, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(outdir)
    return dest


def oprof(*args):
    """Runs the host oprof; (status, stdout, stderr)."""
    p = subprocess.run([S.oprof_path, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def report_json(*args):
    rc, out, err = oprof("report", *args, "--json")
    if rc != 0:
        raise RuntimeError(f"oprof report {' '.join(args)}: {err.strip()[:300]}")
    return json.loads(out)


def load(d, f):
    return json.load(open(os.path.join(d, f)))


def received_lost(stats):
    """Samples taken, samples lost after being taken, and sampling periods never sampled
    (logcheck.py's accounting, which crates/oprof/src/input/session.rs Losses follows)."""
    received, lost = received_and_lost(stats)
    return received, lost, not_sampled(stats)


def check_long(d):
    ses, stats = load(d, "session.json"), load(d, "stats.json")
    st = ses["settings"]
    check((st["buffer_size"], st["buffer_watershed"], st["cpu_buffer_size"]) == (131072, 32768, 8192),
          f"long: default buffer sizes {st}")
    size = os.path.getsize(os.path.join(d, "samples"))
    ten = 10 * st["buffer_size"] * ses["pointer_size"]
    secs = ses["duration_ns"] / 1e9
    # On a debug kernel the run lasts 30 s (record.sh): whether the reader keeps up at default
    # sizes is the plain kernels' question; a debug kernel's sync pass is several times slower
    # (KASAN, lockdep) and may let a CPU ring overflow, counted.
    debug = S.debug_kernel
    check(secs >= 30 and (debug or size > ten) and size == ses["totals"]["bytes"],
          f"long: {secs:.1f} s (>= 30), {size} bytes read" + ("" if debug else f" (> ten event buffers, {ten})"))
    cpu_over = {k: v for k, v in stats.items() if k.endswith("/sample_lost_overflow")}
    received, lost, not_taken = received_lost(stats)
    if debug:
        check(ses["totals"]["lost"] == lost and ses["totals"]["sample_received"] == received
              and ses["totals"]["not_taken"] == not_taken,
              f"long (debug kernel): oprof record's totals say what the stats do: lost {ses['totals']['lost']} == {lost} "
              f"({cpu_over}, event_lost_overflow {stats['event_lost_overflow']}), received "
              f"{ses['totals']['sample_received']} == {received}, not taken {ses['totals']['not_taken']} == {not_taken}")
    else:
        check(stats["event_lost_overflow"] == 0 and cpu_over and all(v == 0 for v in cpu_over.values()),
              f"long: nothing lost (event_lost_overflow {stats['event_lost_overflow']}, {cpu_over})")
    rep = report_json(d)
    check(ses["totals"]["samples"] == rep["total"] == received - lost,
          f"long: samples in session.json {ses['totals']['samples']} == host decode {rep['total']} "
          f"== sum of stats/cpu*/sample_received {received} - lost {lost}")
    vm = report_json(d, "--vmlinux", f"{S.kout}/vmlinux", "-l")
    ks = report_json(d, "-l")
    top = lambda r: [(x["symbol"], x["samples"]) for x in r["rows"] if x["image"] == "vmlinux"][:10]
    check(len(top(vm)) == 10 and top(vm) == top(ks),
          f"long: top 10 kernel symbols from kallsyms == from vmlinux {top(vm)[:4]}...")
    # Where dd's kernel time goes, by System.map and in dd's own samples: the debug kernels'
    # checkers and the other CPU's work do not move it (a ranking of the whole system's kernel
    # symbols did, beside a busy host).
    decode = S.oprof("decode", os.path.join(d, "samples"), out=".long.decode")
    zeroing_checks(S, vm, decode, "long: ")


def check_sigint(d):
    ses, stats = load(d, "session.json"), load(d, "stats.json")
    received, lost, not_taken = received_lost(stats)
    rep = report_json(d)
    # A bare samples file does not say its word size: the session's pointer_size does.
    rc, _, err = oprof("decode", os.path.join(d, "samples"), "--word-size", str(ses["pointer_size"]))
    check(rc == 0 and rep["total"] > 0, f"sigint: the session decodes ({rep['total']} samples){err.strip()[:200]}")
    check(ses["ended_by"] == "SIGINT" and rep["total"] == ses["totals"]["samples"] and received == rep["total"] + lost
          and ses["totals"]["not_taken"] == not_taken,
          f"sigint: {rep['total']} samples + {lost} lost == {received} taken; {not_taken} periods not sampled "
          f"(timer ticks that came late) in session.json ({ses['totals']['not_taken']})")


def check_full(d):
    ses, stats = load(d, "session.json"), load(d, "stats.json")
    t = ses["totals"]
    size = os.path.getsize(os.path.join(d, "samples"))
    check(ses.get("state") == "complete" and ses["ended_by"] == "disk full" and t["unwritten"] > 0
          and size == t["bytes"],
          f"full: state {ses.get('state')}, ended_by {ses['ended_by']!r}, {t['unwritten']} bytes unwritten, "
          f"samples {size} bytes == totals.bytes {t['bytes']}")
    received, lost, _ = received_lost(stats)
    rep = report_json(d)
    check(rep["total"] == t["samples"] > 0 and rep["total"] + lost <= received,
          f"full: the host decodes the whole stream ({rep['total']} == {t['samples']} samples), "
          f"{rep['total']} + {lost} lost <= {received} taken")


def table(text):
    """The report's lines from "Samples:" on (warnings are on stderr)."""
    lines = text.rstrip("\n").split("\n")
    i = next((i for i, l in enumerate(lines) if l.startswith("Samples:")), len(lines))
    return lines[i:]


def check_agree(d, log):
    guest = block(log, "agree_report")
    # The guest sent the archive without oprof itself: the initramfs has the same file.
    rc, out, err = oprof("report", d, "-l", "-n", "10", "--sysroot", S.root)
    host = table(out)
    g = table(guest or "")
    check(rc == 0 and len(host) >= 16 and host == g,
          f"agree: host and guest `oprof report -l -n 10` of one session are equal ({len(host)} lines)"
          + ("" if host == g else f"; first difference: host {next((h for h, x in zip(host, g) if h != x), host[-1:])!r}"
             f" guest {next((x for h, x in zip(host, g) if h != x), g[-1:])!r}"))
    rep = report_json(d, "-l", "--sysroot", S.root)
    hot = [x for x in rep["images"] if x["image"] == "/bin/hot"]
    root = os.path.join(d, "root")
    check(hot and (hot[0]["path_on_host"] or "").startswith(root),
          f"agree: /bin/hot read from the archive {hot[0]['path_on_host'] if hot else None}")
    rc, out, err = oprof("annotate", d, "--symbol", "hot_a", "--assembly", "--sysroot", S.root)
    # The header and the instruction rows (source text and notes differ: the source files are
    # on the host only).
    code = lambda t: [l for l in t.split("\n") if l.startswith("== ") or re.match(r"^[ 0-9.%*]*[0-9a-f]+:  ", l)]
    host, g = code(out), code(block(log, "agree_annotate") or "")
    # hot_a's multiply-accumulate: ARM's mla, AArch64's madd.
    mla = " madd " if S.board in ARM64 else " mla "
    check(rc == 0 and len(host) > 10 and host == g and any(mla in l for l in host),
          f"agree: host and guest `oprof annotate --symbol hot_a --assembly` are equal ({len(host)} lines)"
          + ("" if host == g else f"; first difference: host {next((h for h, x in zip(host, g) if h != x), host[-1:])!r}"
             f" guest {next((x for h, x in zip(host, g) if h != x), g[-1:])!r}"))


def cases(debug):
    """The cases of a debug kernel's log (DEBUG) or a plain kernel's."""
    return [name for name in CASES if not (debug and name in PLAIN_ONLY)]


def plan(board, debug):
    return sum(CASES[name] for name in cases(debug))


def checks(s):
    global S
    S = s
    outdir = s.path("")
    os.makedirs(outdir, exist_ok=True)
    run = {"long": check_long, "sigint": check_sigint, "agree": check_agree, "full": check_full}
    for name in cases(s.debug_kernel):
        fn = run[name]
        before = s.ran
        d = unpack(s.log, name, outdir)
        if d is None:
            s.not_run(CASES[name], f"{name}: no {name}.tgz block in the guest log")
            continue
        try:
            fn(d, s.log) if name == "agree" else fn(d)
        except Exception as e:  # a failing tool or a missing file fails the case's remaining checks
            s.not_run(CASES[name] - (s.ran - before), f"{name}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main(__doc__, plan, checks)
