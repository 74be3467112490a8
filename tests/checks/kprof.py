"""Host checks of tests/guest/kprof.sh: the raw kpdata copies it printed (byte order, header,
size, startclr) and `oprof kprof` on them against the kernel's System.map. The expectations come
from the kernel's facts (System.map's _stext/_etext), the format (Documentation/oprofilefs.rst,
"kprof": big-endian words, total, kernel, then one count per 4-byte slot of the text) and the
elapsed time the guest measured (KPROF lines), never from the same kpdata bytes read again.

Plan: 14 checks.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/kprof.py --log build/tests/virt-a15-kprof.log [--board virt-a15]
        [--out build/tests] [--kout KERNEL_TREE] [--oprof target/release/oprof]
Writes NAME-run.kpdata, NAME-clr.kpdata, their NAME-*.json and NAME-run.txt, the oprofilefs
stream of the same interval NAME.buf, its NAME-op.json and NAME.decode next to the log.
"""
import json
import re
import struct

from logcheck import ZEROING, Bail, main, zeroing_checks


def plan(board, debug):
    return 14


def checks(s):
    vmlinux = f"{s.kout}/vmlinux"
    for f in ("run", "clr"):
        kp = s.stream(f"kpdata_{f}", f"-{f}.kpdata", gz=True)
        s.oprof("kprof", vmlinux, kp, "--json", out=f"-{f}.json")
    txt = s.oprof("kprof", vmlinux, s.path("-run.kpdata"), "-n", "10", out="-run.txt", what="kprof (text)")
    with open(f"{s.kout}/System.map") as f:
        sysmap = {l.split()[2]: int(l.split()[0], 16) for l in f if len(l.split()) == 3}
    m = re.search(r"^KPROF text (0x[0-9a-f]+) (0x[0-9a-f]+) slots (\d+) bytes (\d+)$", s.log, re.M)
    t = re.search(r"^KPROF total \d+ kernel \d+ centiseconds (\d+) cpus (\d+)$", s.log, re.M)
    if not m or not t:
        raise Bail("KPROF text/total lines missing")
    stext, etext = sysmap["_stext"], sysmap["_etext"]
    slots_want = -(-(etext - stext) // 4)
    s.check((int(m[1], 16), int(m[2], 16), int(m[3]), int(m[4])) == (stext, etext, slots_want, 8 + 4 * slots_want),
            f"kpctl text {m[1]}..{m[2]}, slots {m[3]}, bytes {m[4]} are System.map's _stext {stext:#x}.._etext "
            f"{etext:#x}: {slots_want} 4-byte slots, {8 + 4 * slots_want} bytes")
    with open(s.path("-run.kpdata"), "rb") as f:
        raw = f.read()
    be = struct.unpack(">2I", raw[:8]); le = struct.unpack("<2I", raw[:8])
    # Word 0 counts ticks at kprof_hz (1000 Hz) on every CPU while started: at most the ticks of
    # the capture's elapsed time plus 0.5 s (the startclr and stop writes around it, and the
    # guest's uptime read in centiseconds). Word 1 (kernel ticks) lies between the slots' sum
    # and word 0 (checked below); read little-endian the words would be multiples of 2^24 or huge.
    cs, n = int(t[1]), int(t[2])
    s.check(0 < be[0] <= 10 * (cs + 50) * n and be[1] <= be[0] and le != be and max(le) > 1 << 20,
            f"header big-endian: total {be[0]} ticks within 1000 Hz x ({cs} + 50) cs x {n} CPUs, kernel {be[1]} "
            f"<= total (little-endian {le} implausible)")
    s.check(len(raw) == 8 + 4 * slots_want, f"kpdata is 8 + 4 * ceil((_etext - _stext) / 4) bytes ({len(raw)})")
    slots = struct.unpack(f">{len(raw) // 4}I", raw)[2:]
    s.check(sum(slots) <= be[1], f"slot ticks {sum(slots)} <= kernel ticks {be[1]}")
    s.check(sum(slots) > be[1] // 2, f"most kernel ticks in kernel text ({sum(slots)} of {be[1]})")
    with open(s.path("-run.json")) as f:
        rep = json.load(f)
    s.check((rep["total"], rep["kernel"], rep["text"]) == (be[0], be[1], sum(slots)),
            f"oprof kprof header total/kernel/text {rep['total']}/{rep['kernel']}/{rep['text']}")
    s.check(rep["base"] == sysmap["_stext"] and rep["granularity"] == 4,
            f"base _stext {rep['base']:#x}, 4-byte slots ({rep['granularity']})")
    s.check(sum(x["ticks"] for x in rep["symbols"]) == rep["text"], "per-symbol ticks add up to the text ticks")
    # kprof has no tasks, so its attribution is held to the oprofilefs stream of the same
    # interval, whose dd samples zeroing_checks holds to the workload: both sample time on the
    # same CPUs, so dd's zeroing routines take the same share of the kernel's text in both
    # (binomial noise on thousands of samples is a point or two; the tolerance is wider).
    buf = s.stream("opbuf", ".buf", gz=True)
    orep = json.loads(s.oprof("report", buf, "--vmlinux", vmlinux, "--json", out="-op.json", what="report of the stream"))
    decode = s.oprof("decode", buf, out=".decode")
    zeroing_checks(s, orep, decode)
    zero_ticks = sum(x["ticks"] for x in rep["symbols"] if ZEROING.search(x["name"]))
    kshare = zero_ticks / rep["text"] if rep["text"] else 0
    vml = sum(r["samples"] for r in orep["rows"] if r["image"] == "vmlinux")
    ozero = sum(r["samples"] for r in orep["rows"] if r["image"] == "vmlinux" and ZEROING.search(r["symbol"]))
    oshare = ozero / vml if vml else 0
    s.check(zero_ticks > 0 and abs(kshare - oshare) <= 0.05 + 0.25 * oshare,
            f"kprof puts {zero_ticks} of {rep['text']} text ticks ({kshare:.1%}) on dd's zeroing routines, the "
            f"stream of the same interval {ozero} of {vml} vmlinux samples ({oshare:.1%}; want within 5 points + 25%)")
    top = [x["name"] for x in rep["symbols"][:5]]
    with open(s.path("-clr.kpdata"), "rb") as f:
        clr = f.read()
    cw = struct.unpack(f">{len(clr) // 4}I", clr)
    # startclr then stop at once (two optool writes, well under 1 s): at most 1 s of ticks.
    s.check(sum(cw[2:]) <= cw[1] <= cw[0] <= 1000 * n,
            f"after startclr only the new ticks remain (total {cw[0]} <= 1000 Hz x 1 s x {n} CPUs, kernel {cw[1]}, "
            f"slots {sum(cw[2:])})")
    s.check(sum(cw[2:]) < sum(slots) // 10, "startclr dropped the earlier slot counts")
    s.check(re.search(r"ticks", txt) is not None and top[0] in txt, "text output names the hottest function")


if __name__ == "__main__":
    main(__doc__, plan, checks)
