#!/usr/bin/env bash
# QEMU integration tests: boots each board with each guest script and checks the results.
#
# Boards: realview-pb-a8 (Cortex-A8, 1 CPU, no PMU interrupt) and virt-a15 (Cortex-A15, 2 CPUs,
# PMU interrupt), ARMv7; virt-a53 (Cortex-A53, 2 CPUs, GICv3, PMU interrupt), arm64 (imx8mp-evk
# runs too when named in BOARDS; make check does not). Guest scripts (tests/guest/), with their host checks (tests/checks/): abi.sh
# (tree, modes, errnos; timer mode), profile.sh (timer-mode profile of a real workload; stream
# checked by profile.py), events.sh (hardware events: model, counter files, validation errors,
# counting mode, no-IRQ losses on the A8, two-counter sampling on the A15, checked by events.py),
# user.sh (user images and symbols: hot 70/30 split in timer mode and, on the A15, with
# CPU_CYCLES; backtraces; munmap/exec/exit churn with exact accounting; a module loaded while
# profiling; `oprof annotate` of hot_a and `oprof diff` against the reversed split; user.py), kprof.sh (Plan 9 kprof files, kpdata header/byte order/startclr, a
# kernel-bound workload alongside sampling; kprof.py with `oprof kprof`), points.sh (profile
# point table, commands, exact counts; points.py with `oprof points`), death.sh (a profiling
# process exits or is killed with buffer open), cycles.sh (load/unload cycles; 200, or
# GUEST_ARGS=opcycles=N), fuzz.sh (seeded writes/reads of every file against the documented
# errnos), stress.sh (30 s of concurrent enable/settings/reader, kills, umount/rmmod/second
# mount), storm.sh (minimum-count overflow storm; storm.py checks the stream's accounting),
# priv.sh (uid 1000 and missing capabilities), record.sh (`oprof record` on the guest: errors, a
# long run losing nothing, signals, SIGKILL (the next record takes over), a full disk, archive, the
# --max-size flight recorder and its SIGUSR1 snapshot, the guest's report and
# annotate; session directories checked by record.py),
# hotplug.sh (CPU 1 offline and online while profiling in timer mode and with CPU_CYCLES: sampled
# in every online period, never offline, totals kept; start/stop and unload racing hotplug;
# hotplug.py checks the accounting per CPU), rate.sh (timer mode at 1000 Hz and CPU_CYCLES every
# 1M cycles under QEMU's -icount: the samples a session holds against its length, checked by
# rate.py). Every log must end cleanly, without "not ok" lines and without a kernel
# splat (WARNING/BUG/Oops/panic/lockup, lockdep, KFENCE, UBSAN, SLUB, list and object debugging
# reports) in the console or dmesg.
# Kernels: the plain one on every board, and the debug one (scripts/kconfig/debug.config:
# lockdep, KFENCE, kmemleak, UBSAN, ...; on arm64 also KASAN and pseudo-NMIs,
# debug-arm64.config) on virt-a15 and virt-a53, with checks named "virt-a15-debug ...",
# "virt-a53-debug ..."; there lockdep must still be on at the end, KFENCE must count no bug and
# kmemleak must report no object leaked after the script started (check_debug, 3 more checks per
# script; on arm64 2 more: the boot log says KASAN is initialized and pseudo-NMIs are enabled,
# so the checks ran with them). Each architecture has its own kernel trees, modules (lib.sh
# mod_dirs) and initramfs.
#
# The convention (DEVELOPERS.md, "Tests: plans, and adding a guest script with a host check"):
# every part reports TAP, a plan line "1..N" and exactly N "ok - ..." / "not ok - ..." lines.
#   - tests/guest/NAME.sh sources /tests/lib.sh, declares `plan N` right after (computed up
#     front when it depends on the board or the CPUs), reports N checks (check/expect) and ends
#     with `summary`. Add NAME to SCRIPTS below.
#   - tests/checks/NAME.py, for NAME in HOST_CHECKS, runs on the host after the guest, on its log:
#     `python3 tests/checks/NAME.py --log LOG --board BOARD --out DIR --kout KOUT --oprof OPROF
#     --root SYSROOT`; it prints its own plan (from the board alone) and its checks
#     (tests/checks/logcheck.py: main, Session). It runs by hand on a saved log too.
# For each board and script this runner reports 3 checks of its own (the guest ran to the end,
# no kernel splat, the final kernel log dump starts at boot: nothing wrapped out of the scan), then every guest check ("BOARD NAME.sh: ...") and every host check
# ("BOARD NAME.py: ..."), each counted. A part that reports fewer checks than its plan (the
# guest stopped early or did not finish, the host check crashed, bailed out or exited non-zero)
# fails, with its missing checks counted as failed; a missing plan or more checks than planned
# fail too; a missing or empty guest log fails (nothing to scan is no proof of no splat). A TAP
# "ok - ... # SKIP" line is counted as skipped, not passed. The inventory is pinned below
# (ALL_SCRIPTS, HOST_CHECKS, OTHER_GUEST): 2 checks that tests/guest/*.sh and tests/checks/*.py
# are exactly those, and a script pinned with a host check whose .py is missing fails, so
# deleting or adding a file cannot drop or add checks silently. At the end the sum of all plans
# must equal passed + failed + skipped (an explicit check), then a "# qemu: T checks, D
# distinct" line and the last line "qemu: N passed, M failed, K skipped"; exits non-zero on
# failure.
# BOARDS="...", SCRIPTS="..." and KVARIANT=plain|debug select a subset (developers; make check
# runs everything; KVARIANT=debug runs the debug kernel on every board in BOARDS; SCRIPTS must be
# among ALL_SCRIPTS). The modules
# must be built for each kernel run: make module testmod [KVARIANT=debug];
# QEMU_TIMEOUT (s, default 900) bounds each boot; GUEST_ARGS passes words to the guest scripts.
set -uo pipefail
VARIANTS=${KVARIANT:-}   # before lib.sh, which defaults KVARIANT to plain
. "$(dirname "$0")/../scripts/lib.sh"
BOARDS=${BOARDS:-realview-pb-a8 virt-a15 virt-a53}
# The suite's inventory, pinned: the guest scripts it runs, those with a host check
# tests/checks/NAME.py, and the other tests/guest/*.sh (the library, the board shell's runner,
# `make run`'s workload, `make bench`'s script, tests/image.sh's install script). Adding or
# removing a test changes these lists (DEVELOPERS.md, "Tests: plans, ...").
ALL_SCRIPTS="abi profile events user death kprof points cycles fuzz stress storm priv record hotplug legacy rate"
# Scripts for the ARMv7 kernels only: legacy needs CONFIG_SECCOMP_FILTER, which only armv7.config
# has (Documentation/legacy-client.rst); arm64 runs skip them.
ARMV7_ONLY="legacy"
HOST_CHECKS="profile events user kprof points storm record hotplug rate"
OTHER_GUEST="lib run workload bench install"
# make check's debug kernels share the scripts (neither SCRIPTS nor KVARIANT given; the time budget,
# Documentation/testing.rst): arm64's (KASAN, pseudo-NMIs: the NMI sample path) runs the sampling,
# accounting, abuse and oprof record scripts the issue asks for there; virt-a15's ARMv7 one the
# file-tree, kprof, profile-point, load-cycle and privilege scripts, plus user and death (the
# ARMv7 sample and release paths under lockdep and KFENCE) and hotplug (the hotplug callbacks
# under lockdep). Every script runs on the plain
# kernels of realview-pb-a8 (the i.MX51's Cortex-A8) and virt-a53; virt-a15's plain kernel runs
# the scripts its debug kernel does not (PLAIN_SCRIPTS_A15), so every script runs on virt-a15
# under one of its kernels.
DEBUG_SCRIPTS_ARM64="profile events user death fuzz stress storm record"
DEBUG_SCRIPTS_ARM="abi user death kprof points cycles priv hotplug legacy"
# Scripts for the plain kernels only: rate measures the sampling rate against the guest's clock
# under -icount, not a code path the debug checkers would add to (profile and events run the
# same sampling paths under them); a debug boot of it would cost some 3 minutes of make check.
PLAIN_ONLY="rate"
[ -n "${SCRIPTS:-}" ] || [ -n "$VARIANTS" ] || DEBUG_SPLIT=1
SCRIPTS=${SCRIPTS:-$ALL_SCRIPTS}
PLAIN_SCRIPTS_A15=$(for s in $ALL_SCRIPTS; do case " $DEBUG_SCRIPTS_ARM " in *" $s "*) ;; *) echo "$s" ;; esac; done | xargs)
# ... and legacy on both of virt-a15's kernels (the ARMv7 plain boards both run it; it is short).
PLAIN_SCRIPTS_A15+=" legacy"
DEBUG_BOARDS="virt-a15 virt-a53"   # the debug kernel's boards when KVARIANT is not given
KNOWN_BOARDS="realview-pb-a8 virt-a15 virt-a53 imx8mp-evk"
OUT=$REPO/build/tests
mkdir -p "$OUT"
OPROF=$REPO/target/release/oprof
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"

# ok, not_ok, tally, check_log, host_check and the pass/fail/planned counts (tests/tap.sh).
. "$REPO/tests/tap.sh"
# Every part's plan, pinned (tests/tap.sh check_pin): "BOARD[-VARIANT] SCRIPT.sh N" and
# "... SCRIPT.py N" for make check's matrix. Plans may follow GUEST_ARGS (cycles.sh's
# opcycles=), so a run given GUEST_ARGS (make soak) is not held to them.
PLAN_PINS=$REPO/tests/plans.txt
[ -z "${GUEST_ARGS:-}" ] || PLAN_PINS=
[ -z "${DEBUG_SPLIT:-}" ] || PLAN_PINS_STRICT=1

# inventory: 2 checks, tests/guest/*.sh = ALL_SCRIPTS + OTHER_GUEST and tests/checks/*.py =
# HOST_CHECKS + logcheck (the library), each listing what is missing and what is unexpected; and
# one failure per name in SCRIPTS that is not a pinned script.
# same_set DESC WANT HAVE: one check that the word lists WANT and HAVE hold the same names.
same_set() {
    local missing extra
    missing=$(comm -23 <(tr ' ' '\n' <<< "$2" | sed '/^$/d' | sort) <(tr ' ' '\n' <<< "$3" | sed '/^$/d' | sort) | xargs)
    extra=$(comm -13 <(tr ' ' '\n' <<< "$2" | sed '/^$/d' | sort) <(tr ' ' '\n' <<< "$3" | sed '/^$/d' | sort) | xargs)
    if [ -z "$missing$extra" ]; then ok "$1"; else not_ok "$1: missing '$missing', unexpected '$extra'"; fi
}
inventory() {
    local f s have=
    if [ -n "$PLAN_PINS" ] && [ ! -r "$PLAN_PINS" ]; then
        planned=$((planned + 1)); not_ok "inventory: the pinned plans ${PLAN_PINS#"$REPO"/} are missing"
    fi
    planned=$((planned + 2))
    for f in "$REPO"/tests/guest/*.sh; do f=${f##*/}; have+=" ${f%.sh}"; done
    same_set "inventory: tests/guest/*.sh are the pinned scripts ($ALL_SCRIPTS; $OTHER_GUEST)" "$ALL_SCRIPTS $OTHER_GUEST" "$have"
    have=
    for f in "$REPO"/tests/checks/*.py; do f=${f##*/}; have+=" ${f%.py}"; done
    same_set "inventory: tests/checks/*.py are the pinned host checks ($HOST_CHECKS; logcheck)" "$HOST_CHECKS logcheck" "$have"
    for s in $SCRIPTS; do
        case " $ALL_SCRIPTS " in *" $s "*) ;; *) planned=$((planned + 1)); not_ok "SCRIPTS: $s is not a pinned script (ALL_SCRIPTS)" ;; esac
    done
    if [ -n "${DEBUG_SPLIT:-}" ]; then
        planned=$((planned + 1))
        same_set "inventory: every pinned script but PLAIN_ONLY ($PLAIN_ONLY) runs under a debug kernel (arm64: $DEBUG_SCRIPTS_ARM64; ARMv7: $DEBUG_SCRIPTS_ARM)" \
            "$ALL_SCRIPTS" "$(tr ' ' '\n' <<< "$DEBUG_SCRIPTS_ARM64 $DEBUG_SCRIPTS_ARM $PLAIN_ONLY" | sort -u | xargs)"
    fi
}

# The debug kernel's reports: lockdep, KFENCE, SLUB debugging ("BUG kmalloc-64 (Not tainted):
# Redzone overwritten"), DEBUG_OBJECTS, and the checkers switching themselves off; KASAN's ("BUG:
# KASAN: slab-use-after-free in ...", "KASAN: maybe wild-memory-access", "... KASAN:
# null-ptr-deref"; tap.sh's SPLAT has BUG: and KASAN), and what the kernel says about NMIs going
# wrong: an NMI backtrace (hung task, lockup, RCU stall: "Sending NMI from CPU", "NMI backtrace
# for cpu"), an unknown NMI ("Uhhuh. NMI received"), the hard lockup detector, and a function
# that must not run in NMI context ("... in NMI context", lockdep_assert_in_nmi's WARNING).
SPLAT+='|list_[a-z_]* corruption|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|INFO: |BUG: KFENCE|BUG [^ ]+ \((Not tainted|Tainted)|ODEBUG:|turning off the locking correctness validator|Kernel memory leak detector disabled|Memory pool empty'
SPLAT+='|BUG: KASAN|KASAN:|Sending NMI|NMI backtrace|Uhhuh|NMI received for unknown reason|[Hh]ard LOCKUP|NMI watchdog|in NMI context|in_nmi\(\)'

# check_debug NAME LOG: the debug kernel's end-of-script report (tests/guest/lib.sh
# debug_report), 3 checks: lockdep still on, KFENCE on with no bug counted, no kmemleak
# "unreferenced object" (the first one is printed).
check_debug() {
    local name=$1 log=$2 base=$OUT/${1// /-} f
    planned=$((planned + 3))
    if [ "$KARCH" = arm64 ]; then
        # The checkers the arm64 debug kernel adds must really be on (dmesg at the script's end).
        planned=$((planned + 2))
        if grep -aq 'KernelAddressSanitizer initialized (generic)' "$log"; then ok "$name: KASAN initialized (generic)"
        else not_ok "$name: no 'KernelAddressSanitizer initialized (generic)' in the guest log"; fi
        # ... and the PMU's overflow interrupt is one of them (perf's "using NMIs").
        if grep -aq 'GICv3: Pseudo-NMIs enabled' "$log" && grep -aqE 'hw perfevents: enabled with .* PMU driver, .*using NMIs' "$log"
        then ok "$name: GICv3 pseudo-NMIs enabled, the PMU interrupt an NMI"
        else not_ok "$name: no 'GICv3: Pseudo-NMIs enabled' or no PMU 'using NMIs' in the guest log (irqchip.gicv3_pseudo_nmi=1, ARM64_PSEUDO_NMI)"; fi
    fi
    if grep -aq '^== lockdep debug_locks 1' "$log"; then ok "$name: lockdep still on at the end (debug_locks 1)"
    else not_ok "$name: lockdep off or missing at the end: $(grep -a '^== lockdep' "$log" | tr -d '\r')"; fi
    log_block "$log" kfence "$base.kfence" || true
    if grep -qx 'enabled: 1' "$base.kfence" && grep -qx 'total bugs: 0' "$base.kfence"; then ok "$name: KFENCE on, no bug"
    else not_ok "$name: KFENCE state: $(tr '\n' ' ' < "$base.kfence")"; fi
    # The block ends with "kmemleak_before_baseline N": the boot's own objects, left out by the
    # guest (tests/guest/lib.sh kmemleak_since); anything else in it is a leak of the script's.
    f=$base.kmemleak
    if ! log_block "$log" kmemleak "$f"; then not_ok "$name: no kmemleak report in log"
    elif ! tail -n 1 "$f" | grep -qE '^kmemleak_before_baseline [0-9]+$'; then
        not_ok "$name: kmemleak block without its 'kmemleak_before_baseline N' line: $(tail -n 3 "$f" | tr '\n' ' ')"
    elif sed -i '$d' "$f" && [ -s "$f" ]; then
        not_ok "$name: kmemleak: $(grep -c 'unreferenced object' "$f") leaked objects (see $log), the first:"
        if grep -q 'unreferenced object' "$f"; then awk '/unreferenced object/ { n++ } n == 1' "$f"; else cat "$f"; fi |
            head -30 | sed 's/^/    /'
    else ok "$name: kmemleak: no leak"; fi
}

# run_board BOARD: every script of $SCRIPTS on BOARD with the kernel $KVARIANT ($KOUT, initramfs
# $INITRD): boot, guest checks, debug-kernel checks, host check. Logs and check names are
# "BOARD" (plain) or "BOARD-VARIANT".
run_board() {
    local board=$1 s log rc label=$1 scripts=$SCRIPTS
    [ "$KVARIANT" = plain ] || label=$1-$KVARIANT
    if [ "$KVARIANT" = debug ] && [ -n "${DEBUG_SPLIT:-}" ]; then
        if [ "$KARCH" = arm64 ]; then scripts=$DEBUG_SCRIPTS_ARM64; else scripts=$DEBUG_SCRIPTS_ARM; fi
    elif [ "$board" = virt-a15 ] && [ -n "${DEBUG_SPLIT:-}" ]; then
        scripts=$PLAIN_SCRIPTS_A15
    fi
    for s in $scripts; do
        case " $ALL_SCRIPTS " in *" $s "*) ;; *) continue ;; esac   # failed in inventory
        if [ "$KARCH" != arm ] && case " $ARMV7_ONLY " in *" $s "*) true ;; *) false ;; esac; then
            # A matrix exclusion is said, not silent.
            planned=$((planned + 1))
            skipped "$label $s: not run # SKIP ARMv7 kernels only (ARMV7_ONLY: needs CONFIG_SECCOMP_FILTER)"
            continue
        fi
        log=$OUT/$label-$s.log
        step "qemu $label: $s.sh"
        # rate.sh's expectations come from the guest's clock: -icount ties it (and QEMU's cycle
        # counter) to the instructions run, so host load cannot make the guest miss ticks. With
        # -icount QEMU runs the vCPUs in turn on one thread, and the ARMv7 boot's
        # stop_machine (mark_rodata_ro) then spun 16 s of guest time on virt-a15, an RCU stall
        # report each boot (the same timestamps every time); rodata=off skips that call.
        qargs=${QEMU_ARGS:-} gargs=${GUEST_ARGS:-}
        [ "$s" != rate ] || { qargs+=" -icount shift=1,sleep=off"; gargs+="${gargs:+ }rodata=off"; }
        rc=0; QEMU_ARGS=$qargs GUEST_ARGS=$gargs bash "$REPO/scripts/qemu.sh" "$board" "$INITRD" "$s.sh" "$log" "$TIMEOUT" || rc=$?
        check_log "$label $s" "$log" $rc
        [ "$KVARIANT" = plain ] || check_debug "$label $s" "$log"
        case " $HOST_CHECKS " in
        *" $s "*)
            if [ -f "$REPO/tests/checks/$s.py" ]; then SYSROOT=${INITRD%.cpio.gz}.root host_check "$label $s" "$s" "$log" "$board"
            else planned=$((planned + 1)); not_ok "$label $s.py: tests/checks/$s.py missing (pinned in HOST_CHECKS)"; fi ;;
        esac
    done
}

# run_variant VARIANT BOARDS...: per architecture of the boards (arm, then arm64), the kernel
# variant's tree, modules (lib.sh mod_dirs) and initramfs, then every script on each board.
run_variant() {
    local a b boards
    KVARIANT=$1; shift; export KVARIANT
    for b in "$@"; do
        case " $KNOWN_BOARDS " in *" $b "*) ;; *) planned=$((planned + 1)); not_ok "unknown board $b" ;; esac
    done
    for a in arm arm64; do
        boards=$(for b in "$@"; do case " $KNOWN_BOARDS " in *" $b "*) [ "$(board_arch "$b")" != $a ] || echo "$b" ;; esac; done)
        [ -n "$boards" ] || continue
        KARCH=$a; export KARCH; karch_vars
        KOUT=$(bash "$REPO/scripts/build-kernel.sh") || { planned=$((planned + 1)); not_ok "$KARCH $KVARIANT kernel: build failed"; continue; }
        export KOUT
        read -r MODDIR KMODDIR < <(mod_dirs "$KVARIANT")
        export MODDIR KMODDIR   # the host checks find the .ko files there (user.py)
        INITRD=$OUT/initramfs; [ $a = arm ] || INITRD+=-$a; [ "$KVARIANT" = plain ] || INITRD+=-$KVARIANT
        INITRD+=.cpio.gz
        bash "$REPO/scripts/initramfs.sh" "$INITRD" "$MODDIR/oprofile.ko" ||
            { planned=$((planned + 1)); not_ok "$KARCH $KVARIANT kernel: initramfs build failed"; continue; }
        # A guest script takes a few minutes at most, under the debug kernel's checkers too
        # (virt-a53-debug record.sh ran over 800 s of wall time beside a hog and builds).
        TIMEOUT=${QEMU_TIMEOUT:-900}; [ "$KVARIANT" = plain ] || TIMEOUT=${QEMU_TIMEOUT:-1500}
        for b in $boards; do run_board "$b"; done
    done
}

inventory
if [ -n "$VARIANTS" ]; then
    run_variant "$VARIANTS" $BOARDS
else
    run_variant plain $BOARDS
    debug_boards=$(for b in $BOARDS; do case " $DEBUG_BOARDS " in *" $b "*) echo "$b" ;; esac; done)
    [ -z "$debug_boards" ] || run_variant debug $debug_boards
fi
tap_close qemu
