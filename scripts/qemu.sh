#!/usr/bin/env bash
# Boots the guest kernel with an initramfs and runs one guest script.
# Usage: qemu.sh BOARD INITRD SCRIPT LOG [TIMEOUT_S]
#   BOARD: realview-pb-a8 (Cortex-A8, 1 CPU, no PMU IRQ) or virt-a15 (Cortex-A15, -smp 2, PMU
#   node with PPI 7 added to QEMU's DTB).
#   KVARIANT=debug (environment): the debug kernel (scripts/build-kernel.sh debug); on virt-a15
#   with 512 MiB of guest memory for kmemleak's, KFENCE's and SLUB debugging's bookkeeping
#   (realview-pb-a8 keeps the 256 MiB of its DTB). KOUT overrides the kernel tree.
# GUEST_ARGS (env): extra kernel command line words for the guest script (guest_arg in
# tests/guest/lib.sh), e.g. GUEST_ARGS=opseed=123 to replay a fuzz run.
# An oops panics and ends the boot at once (oops=panic panic=-1 -no-reboot) instead of hanging
# until the timeout. The serial console goes to LOG; returns QEMU's status (124 on timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=$1 initrd=$2 script=$3 log=$4 tmo=${5:-600}
KOUT=${KOUT:-$(bash "$REPO/scripts/build-kernel.sh")}
append="console=ttyAMA0 loglevel=4 oops=panic panic=-1 opscript=$script${GUEST_ARGS:+ $GUEST_ARGS}"
case "$board" in
realview-pb-a8)
    machine=(-M realview-pb-a8 -m 256)
    dtb=$KOUT/arch/arm/boot/dts/arm/arm-realview-pba8.dtb ;;
virt-a15)
    mem=256; [ "$KVARIANT" = plain ] || mem=512
    machine=(-M virt -cpu cortex-a15 -smp 2 -m $mem)
    dtb=$CACHE/virt-a15-smp2-pmu.dtb; [ $mem = 256 ] || dtb=$CACHE/virt-a15-smp2-pmu-${mem}m.dtb
    if [ ! -f "$dtb" ]; then
        t=$(mktemp -d)
        qemu-system-arm -M virt,dumpdtb="$t/virt.dtb" -cpu cortex-a15 -smp 2 -m $mem -display none -nic none
        dtc -q -I dtb -O dts "$t/virt.dtb" > "$t/virt.dts"
        # Fill QEMU's empty pmu node: the A15 PMU's overflow interrupt is PPI 7.
        python3 - "$t/virt.dts" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
node = 'pmu {\n\t\tcompatible = "arm,cortex-a15-pmu";\n\t\tinterrupts = <0x01 0x07 0x104>;\n\t};'
s, n = re.subn(r'pmu \{[^}]*\};', node, s, count=1)
if n != 1:
    sys.exit("no pmu node in QEMU's virt DTB")
open(p, 'w').write(s)
PY
        dtc -q -I dts -O dtb -o "$dtb" "$t/virt.dts"
        rm -rf "$t"
    fi ;;
*) die "unknown board '$board' (realview-pb-a8 or virt-a15)" ;;
esac
# QEMU_KERNEL (env): the zImage to boot instead of the cached tree's (tests/image.sh boots the SD
# image's). QEMU_TYPE (env), with SCRIPT "": a command line typed at the board shell that the
# initramfs' /init starts without opscript= (scripts/initramfs.sh), once its banner is out.
# QEMU_ARGS (env): more QEMU options (make bench: -icount).
# shellcheck disable=SC2206
args=("${machine[@]}" ${QEMU_ARGS:-} -kernel "${QEMU_KERNEL:-$KOUT/arch/arm/boot/zImage}" -dtb "$dtb" -initrd "$initrd"
      -append "$append" -display none -monitor none -audio none -nic none -no-reboot)
rc=0
if [ -z "${QEMU_TYPE:-}" ]; then
    timeout "$tmo" qemu-system-arm "${args[@]}" -serial "file:$log" </dev/null || rc=$?
else
    # Type QEMU_TYPE at the board shell: once /init's banner is in the log the console is open,
    # and its tty buffers the line until the shell reads it.
    fifo=$(mktemp -u); mkfifo "$fifo"
    timeout "$tmo" qemu-system-arm "${args[@]}" -serial stdio <"$fifo" >"$log" &
    qpid=$!
    exec 3>"$fifo"; rm -f "$fifo"
    while kill -0 $qpid 2>/dev/null && ! grep -aq '^== oprofile-rs .*: shell on the console' "$log"; do sleep 0.2; done
    ! kill -0 $qpid 2>/dev/null || printf '%s\n' "$QEMU_TYPE" >&3
    wait $qpid || rc=$?
    exec 3>&-
fi
exit $rc
