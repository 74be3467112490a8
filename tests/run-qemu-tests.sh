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

# ok, not_ok, tally, check_log, host_check and the pass/fail/planned counts (tests/tap.sh).
. "$REPO/tests/tap.sh"

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
tap_close qemu
