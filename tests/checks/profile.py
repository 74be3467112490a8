"""Host checks of tests/guest/profile.sh: the timer-mode sample stream of a kernel-bound and a
user-bound workload, through `oprof report` and `oprof decode`.

Plan: 8 checks + 1 per CPU of the board (stats/cpuN/sample_received).

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/profile.py --log build/tests/virt-a15-profile.log [--board virt-a15]
        [--out build/tests] [--kout KERNEL_TREE] [--oprof target/release/oprof]
Writes NAME.buf (the stream), NAME.json, NAME.decode next to the log (NAME: the log's name).
"""
import json
import re

from logcheck import BOARDS, main, received_and_lost, stats as read_stats, zeroing_checks


def plan(board, debug):
    return 8 + BOARDS[board]


def checks(s):
    buf = s.stream("opbuf", ".buf", gz=True)
    rep = json.loads(s.oprof("report", buf, "--vmlinux", f"{s.kout}/vmlinux", "--json", out=".json"))
    decode = s.oprof("decode", buf, out=".decode")
    stats = read_stats(s.log)
    received, lost = received_and_lost(stats)
    s.check(rep["total"] >= 200, f"{rep['total']} samples delivered (>= 200)")
    s.check(received == rep["total"] + lost,
            f"sample_received {received} == delivered {rep['total']} + lost {lost}")
    s.check(rep["no_context"] == 0, f"every sample has a mode/context ({rep['no_context']} without)")
    zeroing_checks(s, rep, decode)
    s.check(rep["kernel"] > rep["total"] // 4,
            f"kernel-bound workload gives kernel samples ({rep['kernel']}/{rep['total']})")
    s.check(rep["user"] > 0, f"user-mode samples present ({rep['user']})")
    seen = {int(c, 16) for c in re.findall(r"CpuSwitch \{ cpu: (?:0x)?([0-9a-f]+)", decode)}
    s.check(seen >= set(range(s.cpus)), f"CPU_SWITCH records for CPUs {sorted(seen)} (want 0..{s.cpus - 1})")
    for c in range(s.cpus):
        v = stats.get(f"cpu{c}/sample_received", 0)
        s.check(v > 0, f"stats/cpu{c}/sample_received = {v} > 0")


if __name__ == "__main__":
    main(__doc__, plan, checks)
