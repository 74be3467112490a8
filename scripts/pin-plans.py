#!/usr/bin/env python3
"""Writes tests/plans.txt, the pinned plan of every part make check's QEMU tests run (tests/tap.sh
check_pin), from the logs of a full run: each guest log build/tests/LABEL-SCRIPT.log gives
"LABEL SCRIPT.sh N" (its "1..N" line) and each host check's TAP build/tests/LABEL-SCRIPT.tap
"LABEL SCRIPT.py N". LABEL is a board, or board-variant for the debug kernels; the scripts and
host checks are the runner's (ALL_SCRIPTS, HOST_CHECKS in tests/run-qemu-tests.sh).

Usage: python3 scripts/pin-plans.py [build/tests] > tests/plans.txt
Run it after a full `make check`, and read the diff: a pin changes only with a change of the
cases a script or host check plans. Exits 1 if a log has no plan or two.
"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABELS = ("realview-pb-a8", "virt-a15", "virt-a53", "virt-a15-debug", "virt-a53-debug")


def runner_list(name):
    """The words of NAME="..." in tests/run-qemu-tests.sh."""
    with open(os.path.join(REPO, "tests/run-qemu-tests.sh")) as f:
        m = re.search(rf'^{name}="([^"]*)"', f.read(), re.M)
    return m.group(1).split() if m else []


def plan_of(path):
    """N of the one "1..N" line of PATH (CR-safe); None when there is not exactly one."""
    with open(path, errors="replace") as f:
        plans = re.findall(r"^1\.\.(\d+)", f.read().replace("\r", ""), re.M)
    return int(plans[0]) if len(plans) == 1 else None


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build/tests")
    parts, bad = [], []
    for label in LABELS:
        for script in runner_list("ALL_SCRIPTS"):
            for kind, ext in ((".sh", ".log"), (".py", ".tap")):
                if kind == ".py" and script not in runner_list("HOST_CHECKS"):
                    continue
                path = os.path.join(out, f"{label}-{script}{ext}")
                if not os.path.exists(path):
                    continue
                n = plan_of(path)
                if n is None:
                    bad.append(path)
                else:
                    parts.append(f"{label} {script}{kind} {n}")
    for p in bad:
        print(f"pin-plans: {p}: no plan line, or two", file=sys.stderr)
    print("\n".join(parts))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
