"""Helpers for the host-side checks of tests/run-qemu-tests.sh (imported by its inline Python)."""
import re

res = []


def check(ok, msg):
    """Records one TAP-like result line."""
    res.append(("ok - " if ok else "not ok - ") + msg)


def read_log(path):
    """A guest serial log as text, CRLF-safe."""
    return open(path, errors="replace").read().replace("\r", "")


def stats(log):
    """The `STAT name value` lines a guest script printed, as a dict."""
    return {m[0]: int(m[1]) for m in re.findall(r"^STAT (\S+) (\d+)$", log, re.M)}


def received_and_lost(st):
    """Samples taken (sum of cpuN/sample_received) and samples lost after being taken."""
    received = sum(v for k, v in st.items() if k.endswith("/sample_received"))
    lost = sum(v for k, v in st.items() if re.search(r"/(sample_lost_overflow|sample_invalid_eip)$", k))
    lost += sum(st.get(k, 0) for k in ("sample_lost_no_mm", "sample_lost_no_mapping", "event_lost_overflow"))
    return received, lost


def expects(log):
    """The `EXPECT name value` lines a guest script printed (values it measured), as a dict."""
    return {m[0]: int(m[1]) for m in re.findall(r"^EXPECT (\w+) (\d+)$", log, re.M)}
