"""Host check of tests/guest/hotplug.sh: in each run during which CPU 1 went offline and online
(timer mode, CPU_CYCLES sampling), every sample taken reached the stream or a loss counter, per
CPU and in all (the run's one counter: per counter and CPU), through `oprof report --json`.

Per CPU, the stream's samples of that CPU plus its own loss counters (stats/cpuN/) must equal
its stats/cpuN/sample_received, up to the global losses (sample_lost_no_mm,
sample_lost_no_mapping, event_lost_overflow), which the module does not split by CPU: a CPU's
received samples lie between delivered + its losses and that plus the global losses. The sums
must be exact.

Plan: per run, one check per CPU and one for the sums: 6 on virt-a15 and virt-a53, 10 on
imx8mp-evk; none on realview-pb-a8 (one CPU: no hotplug runs).

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/hotplug.py --log build/tests/virt-a15-debug-hotplug.log --board virt-a15
Writes NAME-timer.buf, NAME-perf.buf (the streams, un-gzipped) and their .json next to the log.
"""
import json

from logcheck import BOARDS, LOST_GLOBAL, LOST_PER_CPU, main, received_and_lost, stats as read_stats

RUNS = ("timer", "perf")


def plan(board, debug):
    cpus = BOARDS[board]
    return 0 if cpus == 1 else len(RUNS) * (cpus + 1)


def checks(s):
    if plan(s.board, s.debug_kernel) == 0:
        return
    every = read_stats(s.log)
    for run in RUNS:
        st = {k[len(run) + 1:]: v for k, v in every.items() if k.startswith(run + ":")}
        buf = s.stream(f"hotplug-{run}.buf", f"-{run}.buf", gz=True)
        rep = json.loads(s.oprof("report", buf, "--json", out=f"-{run}.json"))
        per_cpu = {int(c): n for c, n in rep["per_cpu"].items()}
        glob = sum(st.get(k, 0) for k in LOST_GLOBAL)
        for cpu in range(s.cpus):
            rcv = st.get(f"cpu{cpu}/sample_received")
            if rcv is None:
                s.check(False, f"{run}: no STAT {run}:cpu{cpu}/sample_received in the log")
                continue
            lost = sum(st.get(f"cpu{cpu}/{k}", 0) for k in LOST_PER_CPU)
            got = per_cpu.get(cpu, 0)
            s.check(got + lost <= rcv <= got + lost + glob,
                    f"{run}: CPU {cpu}: sample_received {rcv} == delivered {got} + its losses {lost}"
                    f" (+ up to {glob} global losses)")
        received, lost = received_and_lost(st)
        extra = sorted(c for c in per_cpu if c >= s.cpus)
        s.check(received == rep["total"] + lost and not extra and received > 0,
                f"{run}: sample_received {received} == delivered {rep['total']} + lost {lost}"
                + (f"; samples of CPUs {extra} the board does not have" if extra else ""))


if __name__ == "__main__":
    main(__doc__, plan, checks)
