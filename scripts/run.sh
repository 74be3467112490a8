#!/usr/bin/env bash
# `make run`: boot QEMU with oprofile.ko, profile a real workload, print the report.
#   BOARD=realview-pb-a8 (default: Cortex-A8, 1 CPU, no PMU interrupt in QEMU) or virt-a15
#         (Cortex-A15, 2 CPUs, PMU interrupt).
#   EVENT=timer (default: timer mode) or NAME[:COUNT],... hardware events (`oprof events
#         --cpu-type arm/armv7` lists them), e.g. EVENT=CPU_CYCLES:1000000; COUNT 0 counts
#         without sampling and prints the totals.
#   KVARIANT=plain (default) or debug: the kernel (modules from `make module testmod KVARIANT=...`).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=${BOARD:-realview-pb-a8}
event=${EVENT:-timer}
out=$REPO/build/run
oprof=$REPO/target/release/oprof
mkdir -p "$out"
case "$board" in
realview-pb-a8) cpu_type=arm/armv7 ;;
virt-a15) cpu_type=arm/armv7-ca15 ;;
*) die "unknown BOARD '$board' (realview-pb-a8 or virt-a15)" ;;
esac
report_args=()
rm -f "$out/opsetup.sh"
if [ "$event" != timer ]; then
    "$oprof" setup --cpu-type "$cpu_type" "$event" > "$out/opsetup.sh" || die "EVENT='$event' does not fit $cpu_type ($board)"
    read -ra report_args < <("$oprof" setup --cpu-type "$cpu_type" --report-args "$event")
    [ "$board" != realview-pb-a8 ] || echo "note: QEMU's realview-pb-a8 raises no PMU interrupt: sampling counters lose their samples (stats/sample_lost_no_irq); totals still count. Use BOARD=virt-a15 to sample." >&2
fi
KOUT=$(bash "$REPO/scripts/build-kernel.sh"); export KOUT
read -r moddir kmoddir < <(mod_dirs "$KVARIANT")
opsetup=; [ ! -f "$out/opsetup.sh" ] || opsetup=$out/opsetup.sh
bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$moddir/oprofile.ko" $opsetup
step "booting QEMU $board, EVENT=$event (guest log: $out/guest.log)"
bash "$REPO/scripts/qemu.sh" "$board" "$out/initramfs.cpio.gz" workload.sh "$out/guest.log" 600 ||
    die "QEMU failed (see $out/guest.log)"
grep -a '^# \|^echo \|^ok \|^ERR\|STAT\|TOTAL\|sha256\|data.gz\|oprofile:' "$out/guest.log" | tr -d '\r' | sed 's/^/  guest| /'
log_stream "$out/guest.log" opbuf "$out/buffer.bin" || true   # empty when nothing was sampled
if [ ! -s "$out/buffer.bin" ]; then
    [ "$event" != timer ] || die "no samples came back from the guest (see $out/guest.log)"
    step "no samples (counting only, or no PMU interrupt): see the TOTAL and STAT lines above"
    exit 0
fi
for b in images proc_modules module_sections; do log_block "$out/guest.log" $b "$out/$b" || true; done
# The guest's files: the initramfs tree is the sysroot, libraries by name, modules' .ko files.
session=(--images "$out/images" --proc-modules "$out/proc_modules" --module-sections "$out/module_sections"
         --vmlinux "$KOUT/vmlinux" --sysroot "$out/initramfs.root" --image-path "$out/initramfs.root/lib"
         --image-path "$moddir" --image-path "$kmoddir")
step "report ($(stat -c %s "$out/buffer.bin") bytes of samples: $out/buffer.bin)"
echo
"$oprof" report "$out/buffer.bin" "${session[@]}" -n 12 "${report_args[@]}"
echo
"$oprof" report "$out/buffer.bin" "${session[@]}" -l -n 30 --flame "$out/flame.svg" "${report_args[@]}"
echo
if log_block "$out/guest.log" profile_points "$out/profile_points"; then
    step "profile points of oprofile.ko during the run (/dev/oprofile/profile_points)"
    "$oprof" points "$out/profile_points"
    echo
fi
if log_stream "$out/guest.log" kpdata "$out/kpdata.gz" && gunzip -f "$out/kpdata.gz"; then
    step "kprof: kernel PC histogram of the run (/dev/oprofile/kprof/kpdata)"
    "$oprof" kprof "$KOUT/vmlinux" "$out/kpdata" -n 12
    echo
fi
step "flame graph: $out/flame.svg; call graph: $oprof report $out/buffer.bin ${session[*]} -l -c"
