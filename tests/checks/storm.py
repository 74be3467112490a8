"""Host check of tests/guest/storm.sh: every sample the overflow storm took reached the stream
or a loss counter (sample_received == delivered + lost), through `oprof report`.

Plan: 1 check on every board.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/storm.py --log build/tests/virt-a15-storm.log [--out build/tests]
        [--oprof target/release/oprof]
Writes NAME.buf (the stream, un-gzipped) and NAME.json next to the log.
"""
import json

from logcheck import main, received_and_lost, stats as read_stats


def plan(board, debug):
    return 1


def checks(s):
    buf = s.stream("storm.buf", ".buf", gz=True)
    rep = json.loads(s.oprof("report", buf, "--json", out=".json"))
    received, lost = received_and_lost(read_stats(s.log))
    s.check(received == rep["total"] + lost, f"sample_received {received} == delivered {rep['total']} + lost {lost}")


if __name__ == "__main__":
    main(__doc__, plan, checks)
