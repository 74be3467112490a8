#!/usr/bin/env bash
# `make run`: boot QEMU with oprofile.ko, profile a real workload, print the report.
# BOARD=realview-pb-a8 (default, Cortex-A8) or virt-a15 (Cortex-A15, 2 CPUs).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=${BOARD:-realview-pb-a8}
out=$REPO/build/run
mkdir -p "$out"
KOUT=$(bash "$REPO/scripts/build-kernel.sh"); export KOUT
bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$REPO/oprofile.ko"
step "booting QEMU $board (guest log: $out/guest.log)"
bash "$REPO/scripts/qemu.sh" "$board" "$out/initramfs.cpio.gz" workload.sh "$out/guest.log" 600 ||
    die "QEMU failed (see $out/guest.log)"
grep -a '^# \|^ok \|^ERR\|STAT\|sha256\|data.gz' "$out/guest.log" | sed 's/^/  guest| /'
sed -n '/^== opbuf begin/,/^== opbuf end/p' "$out/guest.log" | tr -d '\r' | grep -aE '^[A-Za-z0-9+/=]+$' |
    base64 -d > "$out/buffer.bin"
[ -s "$out/buffer.bin" ] || die "no samples came back from the guest (see $out/guest.log)"
step "report ($(stat -c %s "$out/buffer.bin") bytes of samples: $out/buffer.bin)"
echo
"$REPO/target/release/oprof" report "$out/buffer.bin" --vmlinux "$KOUT/vmlinux" -n 25
