#!/usr/bin/env bash
# `make run`: boot QEMU, profile a real workload with `oprof record` on the guest, copy its session
# directory out and print the report (and the guest's own `oprof report`).
#   BOARD=realview-pb-a8 (default: Cortex-A8, 1 CPU, no PMU interrupt in QEMU), virt-a15
#         (Cortex-A15, 2 CPUs, PMU interrupt); arm64: virt-a53 (Cortex-A53, 2 CPUs, GICv3, PMU
#         interrupt) or imx8mp-evk (NXP i.MX 8M Plus EVK: 4 Cortex-A53, PMU interrupt). The
#         module, testmod and target oprof must be built for the board (make run BOARD=...).
#   EVENT=timer (default: timer mode) or NAME[:COUNT],... hardware events (`oprof events
#         --cpu-type arm/armv7` lists them), e.g. EVENT=CPU_CYCLES:1000000, given to
#         `oprof record -e`; COUNT 0 counts without sampling (the report prints the totals).
#   KVARIANT=plain (default) or debug: the kernel (modules from `make module testmod KVARIANT=...`).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=${BOARD:-realview-pb-a8}
use_board "$board"
event=${EVENT:-timer}
out=$REPO/build/run
oprof=$REPO/target/release/oprof
mkdir -p "$out"
case "$board" in
realview-pb-a8) cpu_type=arm/armv7 ;;
virt-a15) cpu_type=arm/armv7-ca15 ;;
# Both arm64 boards' DTBs name the PMU "arm,cortex-a53-pmu" (the kernel's armv8_cortex_a53).
virt-a53|imx8mp-evk) cpu_type=arm/armv8-ca53 ;;
*) die "unknown BOARD '$board' (realview-pb-a8, virt-a15, virt-a53 or imx8mp-evk)" ;;
esac
rm -f "$out/opsetup.sh"
if [ "$event" != timer ]; then
    # Checked on the host first (`oprof setup` places them as `oprof record -e` will).
    "$oprof" setup --cpu-type "$cpu_type" "$event" > /dev/null || die "EVENT='$event' does not fit $cpu_type ($board)"
    eargs=$(echo "$event" | tr ',' '\n' | sed 's/^/-e /' | tr '\n' ' ')
    echo "EVENTS='${eargs% }'" > "$out/opsetup.sh"
    [ "$board" != realview-pb-a8 ] || echo "note: QEMU's realview-pb-a8 raises no PMU interrupt: sampling counters lose their samples (stats/sample_lost_no_irq); totals still count. Use BOARD=virt-a15 to sample." >&2
fi
KOUT=$(bash "$REPO/scripts/build-kernel.sh"); export KOUT
read -r moddir kmoddir < <(mod_dirs "$KVARIANT")
opsetup=; [ ! -f "$out/opsetup.sh" ] || opsetup=$out/opsetup.sh
bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$moddir/oprofile.ko" $opsetup
# The guest's clock counts instructions (-icount shift=1: 2 ns each, a 500 MIPS core, about an
# i.MX51's Cortex-A8 at 800 MHz; sleep=off: idle time passes at once), not the host's wall clock:
# the workload is fixed work, so its samples and the session's size do not grow on a slower or
# busier host (without it a slow host's run once took 27,213 samples where another took 23,953).
# MAKE_RUN_QEMU_ARGS replaces it (e.g. empty, for real time).
step "booting QEMU $board, EVENT=$event (guest log: $out/guest.log)"
QEMU_ARGS=${MAKE_RUN_QEMU_ARGS--icount shift=1,sleep=off} bash "$REPO/scripts/qemu.sh" "$board" "$out/initramfs.cpio.gz" workload.sh "$out/guest.log" 600 ||
    die "QEMU failed (see $out/guest.log)"
# The guest's flow: its commands, oprof's lines, the workload's output, the guest-side report.
sed -n '/^# oprof record/,/^== session begin/p; /^# oprof report/,/^== guest done/p' "$out/guest.log" | tr -d '\r' |
    grep -av '^== \|^\[' | sed 's/^/  guest| /'
rm -rf "$out/session" "$out/session.tgz" "$out/profile.pb.gz"
log_stream "$out/guest.log" session "$out/session.tgz" && tar -C "$out" -xzf "$out/session.tgz" ||
    die "no session directory came back from the guest (see $out/guest.log)"
# The guest's files: the initramfs tree is the sysroot, libraries by name, modules' .ko files.
# Debug files: opwork's (built -O2 without frame pointers, Thumb-2 on armhf, and stripped, as a
# distribution ships it; initramfs.sh) and Debian's libc6-dbg:DEB_ARCH for the guest's libc (setup-host.sh), found by build-id.
host=(--vmlinux "$KOUT/vmlinux" --sysroot "$out/initramfs.root" --image-path "$out/initramfs.root/lib"
      --image-path "$moddir" --image-path "$kmoddir" --debug-dir "$out/initramfs.debug"
      --debug-dir "$GUEST_LIBC/usr/lib/debug")
step "report of the session directory $out/session (oprof report $out/session ...)"
echo
"$oprof" report "$out/session" "${host[@]}" -n 12
echo
flame=
if grep -q '^ *"samples": 0,' "$out/session/session.json"; then
    step "no samples (counting only, or no PMU interrupt): the counters' totals are above"
else
    "$oprof" report "$out/session" "${host[@]}" -l -n 30 --flame "$out/flame.svg" --pprof "$out/profile.pb.gz"
    flame="flame graph: $out/flame.svg; pprof: go tool pprof -top $out/profile.pb.gz; "
    echo
    # The hottest function of the workload's program (opwork; its source is in tests/guest), else
    # of any user image with symbols, annotated.
    hottest=$("$oprof" report "$out/session" "${host[@]}" -l --json 2>/dev/null | python3 -c '
import json, sys
rows = json.load(sys.stdin)["rows"]
named = [r for r in rows if r["image"].startswith("/") and not r["symbol"].startswith("(")]
r = next((r for r in named if r["image"] == "/bin/opwork"), named[0] if named else None)
print(r["image"] + "\t" + r["symbol"] if r else "")')
    if [ -n "$hottest" ]; then
        img=${hottest%%$'\t'*} sym=${hottest#*$'\t'}
        step "the hottest user function: oprof annotate $out/session --image $img --symbol $sym"
        "$oprof" annotate "$out/session" "${host[@]}" --image "$img" --symbol "$sym" | awk 'NR <= 60'
        echo
    fi
fi
if grep -q cmp_u32 <("$oprof" report "$out/session" "${host[@]}" --folded 2>/dev/null); then
    step "opwork's qsort callback cmp_u32, unwound through libc back to main (the heaviest stacks, oprof report --folded)"
    "$oprof" report "$out/session" "${host[@]}" --folded 2>/dev/null | grep cmp_u32 |
        awk '{ n = $NF; $NF = ""; print n "\t" $0 }' | sort -rn | awk 'NR <= 3'
    echo
fi
if [ -f "$out/session/profile_points" ]; then
    step "profile points of oprofile.ko during the run (session/profile_points)"
    "$oprof" points "$out/session/profile_points"
    echo
fi
if [ -f "$out/session/kpdata" ]; then
    step "kprof: kernel PC histogram of the run (session/kpdata)"
    "$oprof" kprof "$KOUT/vmlinux" "$out/session/kpdata" -n 12
    echo
fi
step "${flame}call graph: $oprof report $out/session ${host[*]} -l -c"
