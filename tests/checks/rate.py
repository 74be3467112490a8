"""Host checks of tests/guest/rate.sh: sessions hold the samples their asked rate and their
length call for, a figure the module does not compute. The guest runs under QEMU's -icount, so
its clock and its cycle counter (QEMU's PMU: 1 cycle per ns of the guest's clock) follow the
instructions it runs, and a busy host cannot make it miss ticks.

Per session (timer mode at `timer_hz`; CPU_CYCLES every `count` cycles where the PMU raises its
interrupt), with EXPECTED = the session's length (CAPTURE_NS, CLOCK_MONOTONIC around enable) x
the rate x the CPUs, the rate being hz, or 1e9 cycles/s / count:
  - the samples taken, as the stream shows them (`oprof report`: delivered) plus those counted
    lost after being taken (buffer overflows), are within [0.9, 1.05] x EXPECTED: a module
    sampling at half the rate, or twice the period, fails, and so does one that doubles;
  - the periods the module booked as not sampled (sample_lost_overrun, sample_lost_no_irq) are at
    most 5 % of EXPECTED: its own estimate of missed ticks stays small where none should be missed.

Plan: 2 checks, + 2 on the boards whose PMU raises its interrupt.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/rate.py --log build/tests/virt-a15-rate.log [--out build/tests]
Writes NAME-SESSION.buf and NAME-SESSION.json next to the log.
"""
import json
import re

from logcheck import PMU_IRQ, main, not_sampled, received_and_lost, stats as read_stats

# The share of EXPECTED the samples taken must reach, and may not pass.
FLOOR, CEILING = 0.9, 1.05
# The share of EXPECTED the module may book as not sampled.
NOT_SAMPLED_MAX = 0.05


def plan(board, debug):
    return 2 + 2 * (board in PMU_IRQ)


def session_stats(st, name):
    """The stats of session NAME (the guest's `STAT NAME:file value` lines), without the prefix."""
    return {k[len(name) + 1:]: v for k, v in st.items() if k.startswith(name + ":")}


def rate_line(log, pattern):
    """The integers of the first line of LOG matching PATTERN, or None."""
    m = re.search(pattern, log, re.M)
    return tuple(int(g) for g in m.groups()) if m else None


def check_session(s, name, per_second):
    """Checks of session NAME whose rate per CPU is per_second(asked) samples a second."""
    asked = rate_line(s.log, rf"^RATE {name} asked \w+ (\d+)$")
    length = rate_line(s.log, rf"^RATE {name} ns (\d+) cpus (\d+)$")
    if not asked or not length or length[0] == 0:
        s.not_run(2, f"{name}: no 'RATE {name} asked' or 'RATE {name} ns N cpus C' line (capture failed?)")
        return
    ns, cpus = length
    expected = ns / 1e9 * per_second(asked[0]) * cpus
    buf = s.stream(name, f"-{name}.buf", gz=True)
    rep = json.loads(s.oprof("report", buf, "--json", out=f"-{name}.json"))
    st = session_stats(read_stats(s.log), name)
    _, lost = received_and_lost(st)
    taken = rep["total"] + lost
    s.check(FLOOR * expected <= taken <= CEILING * expected,
            f"{name}: {taken} samples taken (delivered {rep['total']} + lost {lost}) in {ns / 1e6:.0f} ms on "
            f"{cpus} CPU(s) = {taken / expected:.3f} x the {expected:.0f} the asked rate calls for "
            f"(want {FLOOR}..{CEILING})")
    missed = not_sampled(st)
    s.check(missed <= NOT_SAMPLED_MAX * expected,
            f"{name}: {missed} periods booked as not sampled (sample_lost_overrun, sample_lost_no_irq) "
            f"<= {NOT_SAMPLED_MAX:.0%} of {expected:.0f}")


def checks(s):
    check_session(s, "timer", lambda hz: hz)
    if s.board in PMU_IRQ:
        check_session(s, "cycles", lambda count: 1e9 / count)


if __name__ == "__main__":
    main(__doc__, plan, checks)
