#!/usr/bin/env bash
# QEMU integration tests: boots each board with each guest script and checks the results.
#
# Boards: realview-pb-a8 (Cortex-A8, 1 CPU, no PMU interrupt) and virt-a15 (Cortex-A15, 2 CPUs,
# PMU interrupt). Guest scripts (tests/guest/), with their host checks (tests/checks/): abi.sh
# (tree, modes, errnos; timer mode), profile.sh (timer-mode profile of a real workload; stream
# checked by profile.py), events.sh (hardware events: model, counter files, validation errors,
# counting mode, no-IRQ losses on the A8, two-counter sampling on the A15, checked by events.py),
# user.sh (user images and symbols: hot 70/30 split in timer mode and, on the A15, with
# CPU_CYCLES; backtraces; munmap/exec/exit churn with exact accounting; a module loaded while
# profiling; user.py), kprof.sh (Plan 9 kprof files, kpdata header/byte order/startclr, a
# kernel-bound workload alongside sampling; kprof.py with `oprof kprof`), points.sh (profile
# point table, commands, exact counts; points.py with `oprof points`), death.sh (a profiling
# process exits or is killed with buffer open), cycles.sh (load/unload cycles; 200, or
# GUEST_ARGS=opcycles=N), fuzz.sh (seeded writes/reads of every file against the documented
# errnos), stress.sh (30 s of concurrent enable/settings/reader, kills, umount/rmmod/second
# mount), storm.sh (minimum-count overflow storm; storm.py checks the stream's accounting),
# priv.sh (uid 1000 and missing capabilities), record.sh (`oprof record` on the guest: errors, a
# long run losing nothing, signals, archive; session directories checked by record.py). Every log must end cleanly, without "not ok" lines and without a kernel
# splat (WARNING/BUG/Oops/panic/lockup) in the console or dmesg.
#
# The convention (DEVELOPERS.md, "Tests: plans, and adding a guest script with a host check"):
# every part reports TAP, a plan line "1..N" and exactly N "ok - ..." / "not ok - ..." lines.
#   - tests/guest/NAME.sh sources /tests/lib.sh, declares `plan N` right after (computed up
#     front when it depends on the board or the CPUs), reports N checks (check/expect) and ends
#     with `summary`. Add NAME to SCRIPTS below.
#   - tests/checks/NAME.py, when present, runs on the host after the guest, on its log:
#     `python3 tests/checks/NAME.py --log LOG --board BOARD --out DIR --kout KOUT --oprof OPROF
#     --root SYSROOT`; it prints its own plan (from the board alone) and its checks
#     (tests/checks/logcheck.py: main, Session). It runs by hand on a saved log too.
# For each board and script this runner reports 2 checks of its own (the guest ran to the end,
# no kernel splat), then every guest check ("BOARD NAME.sh: ...") and every host check
# ("BOARD NAME.py: ..."), each counted. A part that reports fewer checks than its plan (the
# guest stopped early or did not finish, the host check crashed, bailed out or exited non-zero)
# fails, with its missing checks counted as failed; a missing plan or more checks than planned
# fail too. At the end the sum of all plans must equal passed + failed (an explicit check), then
# the last line is "qemu: N passed, M failed"; exits non-zero on failure.
# BOARDS="..." and SCRIPTS="..." select a subset (developers; make check runs everything);
# QEMU_TIMEOUT (s, default 900) bounds each boot; GUEST_ARGS passes words to the guest scripts.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
BOARDS=${BOARDS:-realview-pb-a8 virt-a15}
SCRIPTS=${SCRIPTS:-abi profile events user death kprof points cycles fuzz stress storm priv record}
OUT=$REPO/build/tests
mkdir -p "$OUT"
KOUT=$(bash "$REPO/scripts/build-kernel.sh") || die "kernel build failed"
export KOUT
KO=$REPO/oprofile.ko
OPROF=$REPO/target/release/oprof
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"
bash "$REPO/scripts/initramfs.sh" "$OUT/initramfs.cpio.gz" "$KO" || die "initramfs build failed"

# pass/fail: checks reported so far; planned: the sum of the plans of every part run so far.
pass=0 fail=0 planned=0
ok()     { pass=$((pass + 1)); echo "ok - $*"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; }

SPLAT='WARNING:|BUG:|Oops|Internal error|Kernel panic|Unable to handle|soft lockup|hung_task|blocked for more than|rcu.*stall|UBSAN|KASAN|kernel BUG|list_del corruption|refcount_t:|sleeping function called from invalid context|scheduling while atomic|Rust panic|panicked at'

# tally PART FILE WHY: reports the TAP of one part (a guest script's serial log, a host check's
# stdout): each "ok - "/"not ok - " line as a check named "PART: ...", then holds it to its plan
# line "1..N". Fewer than N checks is a failure with the missing ones counted as failed (WHY
# says why, if known; a "Bail out! REASON" line in FILE replaces it); no plan, two plans or
# more than N checks is one failure more.
tally() {
    local part=$1 file=$2 why=$3 plan=0 plans=0 n=0 line
    while IFS= read -r line; do
        case $line in
        "ok - "*)     n=$((n + 1)); ok "$part: ${line#ok - }" ;;
        "not ok - "*) n=$((n + 1)); not_ok "$part: ${line#not ok - }" ;;
        "Bail out!"*) why="bailed out:${line#Bail out!}" ;;
        1..*)         plans=$((plans + 1)); plan=${line#1..}; plan=${plan%%[!0-9]*} ;;
        esac
    done < <(tr -d '\r' < "$file" | grep -aE '^(1\.\.[0-9]+|ok - |not ok - |Bail out!)')
    planned=$((planned + plan))
    if [ $plans != 1 ]; then
        not_ok "$part: $plans plan lines (1..N), want one${why:+ ($why)}"
    elif [ $n -lt $plan ]; then
        fail=$((fail + plan - n - 1))
        not_ok "$part: $n of $plan planned checks reported${why:+ ($why)}: $((plan - n)) missing, counted as failed"
    elif [ $n -gt $plan ]; then
        not_ok "$part: $n checks reported, more than its plan of $plan"
    elif [ -n "$why" ]; then
        not_ok "$part: every planned check reported, but $why"
    fi
}

# check_log NAME LOG QEMU_STATUS: the runner's 2 checks of one boot (the guest ran to the end,
# no kernel splat), then the guest script's checks against its plan.
check_log() {
    local name=$1 log=$2 qrc=$3 status why=
    planned=$((planned + 2))
    status=$(tr -d '\r' < "$log" | sed -n 's/^== script exit status //p' | tail -1)
    if [ "$qrc" != 0 ]; then why="qemu exited with $qrc"
    elif ! grep -aq '^== guest done' "$log"; then why="guest did not finish"
    elif [ "$status" != 0 ]; then why="guest script exited with status ${status:-unknown}"
    fi
    if [ -z "$why" ]; then ok "$name: guest ran to the end"; else not_ok "$name: $why (see $log)"; fi
    if grep -aEq "$SPLAT" "$log"; then
        not_ok "$name: kernel splat in guest log:"; grep -aE "$SPLAT" "$log" | head -5 | sed 's/^/    /'
    else
        ok "$name: no kernel splat"
    fi
    tally "$name.sh" "$log" "$why"
}

# host_check NAME CHECK LOG BOARD: runs the host check tests/checks/CHECK.py on LOG, counts its
# checks against its plan; a non-zero exit is a failure with the reason (the "Bail out!" line or
# the last stderr line, e.g. a traceback's exception).
host_check() {
    local name=$1 py=$REPO/tests/checks/$2.py log=$3 board=$4 rc=0 why=
    local tap=${log%.log}.tap err=${log%.log}.err
    python3 "$py" --log "$log" --board "$board" --out "$OUT" --kout "$KOUT" --oprof "$OPROF" \
        --root "$OUT/initramfs.root" > "$tap" 2> "$err" || rc=$?
    [ $rc = 0 ] || why="tests/checks/$2.py exited with status $rc: $(grep -v '^\s*$' "$err" | tail -1)"
    tally "$name.py" "$tap" "$why"
}

# run_board BOARD: every script of $SCRIPTS on BOARD: boot, guest checks, host check.
run_board() {
    local board=$1 s log rc
    for s in $SCRIPTS; do
        log=$OUT/$board-$s.log
        step "qemu $board: $s.sh"
        rc=0; bash "$REPO/scripts/qemu.sh" "$board" "$OUT/initramfs.cpio.gz" "$s.sh" "$log" "${QEMU_TIMEOUT:-900}" || rc=$?
        check_log "$board $s" "$log" $rc
        [ ! -f "$REPO/tests/checks/$s.py" ] || host_check "$board $s" "$s" "$log" "$board"
    done
}

for b in $BOARDS; do
    case $b in realview-pb-a8|virt-a15) run_board $b ;; *) planned=$((planned + 1)); not_ok "unknown board $b" ;; esac
done
# The plan of the whole run: every part's plan, each reported check counted once.
planned=$((planned + 1))
if [ $((pass + fail + 1)) = $planned ]; then
    ok "qemu plan: $((pass + fail + 1)) checks reported, as planned"
else
    not_ok "qemu plan: $((pass + fail + 1)) checks reported, the plans say $planned"
fi
echo "qemu: $pass passed, $fail failed"
[ $fail = 0 ]
