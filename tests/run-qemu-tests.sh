#!/usr/bin/env bash
# QEMU integration tests: boots each board with each guest script and checks the results.
#
# Boards: realview-pb-a8 (Cortex-A8, 1 CPU, no PMU interrupt) and virt-a15 (Cortex-A15, 2 CPUs,
# PMU interrupt). Guest scripts: abi.sh (tree, modes, errnos; timer mode), profile.sh (timer-mode
# profile of a real workload, stream checked on the host), events.sh (hardware events: model,
# counter files, validation errors, counting mode, no-IRQ losses on the A8, two-counter
# sampling on the A15, checked on the host too), cycles.sh (50 load/unload cycles). Every log must end cleanly, without "not ok" lines and
# without a kernel splat (WARNING/BUG/Oops/panic/lockup) in the console or dmesg.
# Prints one line per check and "N passed, M failed" at the end; exits non-zero on failure.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
OUT=$REPO/build/tests
mkdir -p "$OUT"
KOUT=$(bash "$REPO/scripts/build-kernel.sh") || die "kernel build failed"
export KOUT
KO=$REPO/oprofile.ko
OPROF=$REPO/target/release/oprof
export PYTHONPATH=$REPO/tests${PYTHONPATH:+:$PYTHONPATH}   # logcheck.py for the inline checks
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"
bash "$REPO/scripts/initramfs.sh" "$OUT/initramfs.cpio.gz" "$KO" || die "initramfs build failed"

pass=0 fail=0
ok()     { pass=$((pass + 1)); echo "ok - $*"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; }

SPLAT='WARNING:|BUG:|Oops|Internal error|Kernel panic|Unable to handle|soft lockup|hung_task|blocked for more than|rcu.*stall|UBSAN|KASAN|kernel BUG|list_del corruption|refcount_t:|sleeping function called from invalid context|scheduling while atomic|Rust panic|panicked at'

check_log() { # NAME LOG
    local name=$1 log=$2
    grep -q '^== guest done' "$log" || { not_ok "$name: guest did not finish (see $log)"; return; }
    local summary; summary=$(grep -a '^guest: ' "$log" | tail -1)
    if grep -aq '^not ok' "$log"; then
        not_ok "$name: $(grep -ac '^not ok' "$log") guest checks failed (see $log):"
        grep -a '^not ok' "$log" | sed 's/^/    /' | head -20
    else
        ok "$name: guest checks ($summary)"
    fi
    if grep -aEq "$SPLAT" "$log"; then
        not_ok "$name: kernel splat in guest log:"; grep -aE "$SPLAT" "$log" | head -5 | sed 's/^/    /'
    else
        ok "$name: no kernel splat"
    fi
}

check_profile() { # NAME LOG CPUS
    local name=$1 log=$2 cpus=$3 buf=$OUT/$1.buf
    log_stream "$log" opbuf "$buf" || { not_ok "$name: no sample stream in log"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --json > "$OUT/$name.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report failed: $(cat "$OUT/$name.err")"; return; }
    "$OPROF" decode "$buf" > "$OUT/$name.decode" || { not_ok "$name: oprof decode failed"; return; }
    python3 - "$OUT/$name.json" "$log" "$OUT/$name.decode" "$cpus" <<'PY'
import json, re, sys
from logcheck import check, read_log, received_and_lost, res, stats as read_stats
rep = json.load(open(sys.argv[1])); log = read_log(sys.argv[2])
decode = open(sys.argv[3]).read(); cpus = int(sys.argv[4])
stats = read_stats(log)
received, lost = received_and_lost(stats)
check(rep["total"] >= 200, f"profile: {rep['total']} samples delivered (>= 200)")
check(received == rep["total"] + lost,
      f"profile: sample_received {received} == delivered {rep['total']} + lost {lost}")
check(rep["no_context"] == 0, f"profile: every sample has a mode/context ({rep['no_context']} without)")
kernel_rows = [r for r in rep["rows"] if r["image"] == "vmlinux"]
top = [r["symbol"] for r in kernel_rows[:5]]
hot = re.compile(r"clear_user|memzero|memset|copy_to_user|copy_from_user|memcpy|read_zero|iov_iter|zero")
check(any(hot.search(s) for s in top), f"profile: a zero/copy routine among the hottest kernel symbols {top}")
check(rep["kernel"] > rep["total"] // 4, f"profile: kernel-bound workload gives kernel samples ({rep['kernel']}/{rep['total']})")
check(rep["user"] > 0, f"profile: user-mode samples present ({rep['user']})")
seen = {int(c, 16) for c in re.findall(r"CpuSwitch \{ cpu: (?:0x)?([0-9a-f]+)", decode)}
check(seen >= set(range(cpus)), f"profile: CPU_SWITCH records for CPUs {sorted(seen)} (want 0..{cpus - 1})")
for c in range(cpus):
    v = stats.get(f"cpu{c}/sample_received", 0)
    check(v > 0, f"profile: stats/cpu{c}/sample_received = {v} > 0")
print("\n".join(res))
PY
}

# Event-based sampling on the A15: CCNT (counter 0) every 2M cycles, CLOCK_CYCLES (counter 1)
# every 1M cycles, a kernel-bound dd per CPU.
check_events() { # NAME LOG
    local name=$1 log=$2 buf=$OUT/$1.buf kbuf=$OUT/$1.kbuf
    log_stream "$log" opbuf "$buf" || { not_ok "$name: no sample stream in log"; return; }
    log_stream "$log" kbuf "$kbuf" || { not_ok "$name: no kernel-only sample stream in log"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --cpu-type arm/armv7-ca15 \
        --counter 0:CPU_CYCLES:2000000 --counter 1:CLOCK_CYCLES:1000000 --json > "$OUT/$name.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report failed: $(cat "$OUT/$name.err")"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --cpu-type arm/armv7-ca15 \
        --counter 0:CPU_CYCLES:2000000 --counter 1:CLOCK_CYCLES:1000000 -n 8 > "$OUT/$name.txt" 2>&1 ||
        { not_ok "$name: oprof report (text) failed"; return; }
    "$OPROF" report "$kbuf" --json > "$OUT/$name-k.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report of the kernel-only stream failed: $(cat "$OUT/$name.err")"; return; }
    python3 - "$OUT/$name.json" "$log" "$OUT/$name-k.json" "$OUT/$name.txt" <<'PY'
import json, re, sys
from logcheck import check, read_log, received_and_lost, res, stats as read_stats
rep = json.load(open(sys.argv[1])); log = read_log(sys.argv[2])
krep = json.load(open(sys.argv[3])); text = open(sys.argv[4]).read()
stats = read_stats(log)
pe = {int(k): v for k, v in rep["per_event"].items()}
s0, s1 = pe.get(0, 0), pe.get(1, 0)
check(s0 >= 200 and s1 >= 200, f"events: both counters sampled (counter 0: {s0}, counter 1: {s1})")
ratio = s1 / s0 if s0 else 0
check(1.6 <= ratio <= 2.4, f"events: sample ratio counter1/counter0 = {ratio:.3f}, periods say 2.0 (+-20%)")
m = re.search(r"^TOTAL counter0 (\d+) counter1 (\d+)$", log, re.M)
if m:
    t0, t1 = int(m[1]), int(m[2])
    for c, t, period, got in ((0, t0, 2_000_000, s0), (1, t1, 1_000_000, s1)):
        want = t / period
        check(want > 0 and abs(got - want) <= 0.2 * want,
              f"events: counter {c} samples {got} match total {t} / count {period} = {want:.0f} (+-20%)")
else:
    check(False, "events: TOTAL line missing")
received, lost = received_and_lost(stats)
check(received == rep["total"] + lost, f"events: sample_received {received} == delivered {rep['total']} + lost {lost}")
top = [r["symbol"] for r in rep["rows"] if r["image"] == "vmlinux"][:5]
hot = re.compile(r"clear_user|memzero|memset|copy_to_user|read_zero|iov_iter|zero")
check(any(hot.search(s) for s in top), f"events: cycles put dd's zero/copy routines among the hottest kernel symbols {top}")
check("CPU_CYCLES" in text and "CLOCK_CYCLES" in text and "Counter 1:" in text,
      "events: text report has a column per counter, named by event")
check(krep["total"] >= 50 and krep["user"] == 0,
      f"events: user=0 gives kernel samples only ({krep['kernel']} kernel, {krep['user']} user)")
print("\n".join(res))
PY
}

run_board() { # BOARD CPUS
    local board=$1 cpus=$2 s log rc
    for s in abi profile events cycles; do
        log=$OUT/$board-$s.log
        step "qemu $board: $s.sh"
        rc=0; bash "$REPO/scripts/qemu.sh" "$board" "$OUT/initramfs.cpio.gz" "$s.sh" "$log" 900 || rc=$?
        [ $rc = 0 ] || not_ok "$board $s: qemu exited with $rc"
        check_log "$board $s" "$log"
        if [ $s = profile ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$board ${line#ok - }" ;; *) not_ok "$board ${line#not ok - }" ;; esac
            done < <(check_profile "$board-profile" "$log" "$cpus")
        fi
        if [ $s = events ] && [ $board = virt-a15 ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$board ${line#ok - }" ;; *) not_ok "$board ${line#not ok - }" ;; esac
            done < <(check_events "$board-events" "$log")
        fi
    done
}

run_board realview-pb-a8 1
run_board virt-a15 2
echo "qemu: $pass passed, $fail failed"
[ $fail = 0 ]
