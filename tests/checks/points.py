"""Host checks of tests/guest/points.sh: the profile point tables it printed (initial, after a
sampling session, after kprof ticks, and the one `print` logged), parsed with `oprof points`,
against the counts the guest measured (EXPECT lines).

Plan: 8 checks.

Usage (see tests/checks/logcheck.py for every option):
    python3 tests/checks/points.py --log build/tests/virt-a15-points.log [--board virt-a15]
        [--out build/tests] [--oprof target/release/oprof]
Writes NAME-TABLE.txt and NAME-TABLE.json for each table next to the log.
"""
import json

from logcheck import expects, main

TABLES = ("pp_initial", "pp_session", "pp_kprof", "pp_dmesg")


def plan(board, debug):
    return 8


def checks(s):
    tables = {}
    for t in TABLES:
        table = s.block(t, f"-{t}.txt")
        tables[t] = {r["name"]: r for r in json.loads(s.oprof("points", table, "--json", out=f"-{t}.json",
                                                              what=f"points {t}"))}
    want = expects(s.log)
    names = {"sample_handler", "sample_resolve", "ring_push", "user_stack_copy", "bt_kernel", "bt_user",
             "bt_user_frame", "sync_pass", "buffer_read", "kprof_tick"}
    init = tables["pp_initial"]
    s.check(set(init) == names, f"every instrumented point registered itself {sorted(init)}")
    s.check(all(not r["enabled"] and r["nr"] == 0 and r["total_ns"] == 0 for r in init.values()),
            "all start disabled and zero")
    ses = tables["pp_session"]
    s.check(ses["sample_handler"]["nr"] == want["sample_handler"],
            f"sample_handler nr {ses['sample_handler']['nr']} == samples taken {want['sample_handler']}")
    s.check(ses["buffer_read"]["nr"] == want["buffer_read"], f"buffer_read nr {ses['buffer_read']['nr']} == 3 reads")
    s.check(all(r["nr"] == 0 or r["avg_ns"] == -(-r["total_ns"] // r["nr"]) for r in ses.values()),
            "avg.ns = total / nr, rounded up")
    s.check(ses["sample_handler"]["total_ns"] > 0 and ses["sync_pass"]["nr"] > 0, "handler and sync times recorded")
    kp = tables["pp_kprof"]
    s.check(kp["kprof_tick"]["nr"] == want["kprof_tick"],
            f"kprof_tick nr {kp['kprof_tick']['nr']} == kpdata ticks {want['kprof_tick']}")
    s.check(tables["pp_dmesg"] == kp, "the table logged by 'print' equals the file")


if __name__ == "__main__":
    main(__doc__, plan, checks)
