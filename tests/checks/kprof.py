"""Host checks of tests/guest/kprof.sh: the raw kpdata copies it printed (byte order, header,
size, startclr) and `oprof kprof` on them against the kernel's System.map.

Plan: 12 checks.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/kprof.py --log build/tests/virt-a15-kprof.log [--board virt-a15]
        [--out build/tests] [--kout KERNEL_TREE] [--oprof target/release/oprof]
Writes NAME-run.kpdata, NAME-clr.kpdata, their NAME-*.json and NAME-run.txt next to the log.
"""
import json
import re
import struct

from logcheck import expects, main


def plan(board):
    return 12


def checks(s):
    vmlinux = f"{s.kout}/vmlinux"
    for f in ("run", "clr"):
        kp = s.stream(f"kpdata_{f}", f"-{f}.kpdata", gz=True)
        s.oprof("kprof", vmlinux, kp, "--json", out=f"-{f}.json")
    txt = s.oprof("kprof", vmlinux, s.path("-run.kpdata"), "-n", "10", out="-run.txt", what="kprof (text)")
    with open(f"{s.kout}/System.map") as f:
        sysmap = {l.split()[2]: int(l.split()[0], 16) for l in f if len(l.split()) == 3}
    want = expects(s.log)
    with open(s.path("-run.kpdata"), "rb") as f:
        raw = f.read()
    be = struct.unpack(">2I", raw[:8]); le = struct.unpack("<2I", raw[:8])
    s.check(be == (want["total"], want["kernel"]),
            f"raw header words, big-endian, are the guest's total/kernel {be} == {(want['total'], want['kernel'])}")
    s.check(le != be and max(le) > 1 << 20, f"little-endian reading of the header is implausible {le}")
    text = sysmap["_etext"] - sysmap["_stext"]
    s.check(len(raw) == 8 + 4 * (text // 4), f"kpdata is 8 + 4 * (_etext - _stext) / 4 bytes ({len(raw)})")
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
    top = [x["name"] for x in rep["symbols"][:5]]
    hot = re.compile(r"clear_user|memzero|memset|copy_to_user|read_zero|iov_iter|zero")
    s.check(any(hot.search(x) for x in top), f"dd's zero/copy routines among the hottest kernel functions {top}")
    with open(s.path("-clr.kpdata"), "rb") as f:
        clr = f.read()
    cw = struct.unpack(f">{len(clr) // 4}I", clr)
    s.check(cw[0] == want["clr_total"] and sum(cw[2:]) <= cw[1] <= cw[0],
            f"after startclr only the new ticks remain (total {cw[0]}, kernel {cw[1]}, slots {sum(cw[2:])})")
    s.check(sum(cw[2:]) < sum(slots) // 10, "startclr dropped the earlier slot counts")
    s.check(re.search(r"ticks", txt) is not None and top[0] in txt, "text output names the hottest function")


if __name__ == "__main__":
    main(__doc__, plan, checks)
