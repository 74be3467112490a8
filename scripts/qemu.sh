#!/usr/bin/env bash
# Boots the guest kernel with an initramfs and runs one guest script.
# Usage: qemu.sh BOARD INITRD SCRIPT LOG [TIMEOUT_S]
#   BOARD: ARMv7 (KARCH=arm, qemu-system-arm, zImage): realview-pb-a8 (Cortex-A8, 1 CPU, no PMU
#   IRQ) or virt-a15 (Cortex-A15, -smp 2, PMU node with PPI 7 added to QEMU's DTB); arm64
#   (KARCH=arm64, qemu-system-aarch64, Image): virt-a53 (Cortex-A53, -smp 2, GICv3; QEMU's DTB
#   has the PMUv3 node with PPI 7, made "arm,cortex-a53-pmu" as on an A53 SoC's DTB) or
#   imx8mp-evk (NXP i.MX 8M Plus EVK: 4 Cortex-A53, GICv3; the kernel tree's imx8mp-evk.dtb
#   without the CPUs' cpu-idle-states, console on UART2 = ttymxc1; Documentation/imx8mp-evk.rst).
#   The board picks KARCH (lib.sh use_board), hence the kernel tree built for it.
#   KVARIANT=debug (environment): the debug kernel (scripts/build-kernel.sh debug); on virt-a15
#   with 512 MiB of guest memory for kmemleak's, KFENCE's and SLUB debugging's bookkeeping
#   (realview-pb-a8 keeps the 256 MiB of its DTB); on virt-a53 1 GiB (KASAN's shadow is an eighth
#   of memory, and its quarantine holds freed objects) and pseudo-NMIs on
#   (irqchip.gicv3_pseudo_nmi=1: the PMU overflow interrupt is an NMI). KOUT overrides the tree.
# GUEST_ARGS (env): extra kernel command line words for the guest script (guest_arg in
# tests/guest/lib.sh), e.g. GUEST_ARGS=opseed=123 to replay a fuzz run.
# An oops panics and ends the boot at once (oops=panic panic=-1 -no-reboot) instead of hanging
# until the timeout. The serial console goes to LOG; returns QEMU's status (124 on timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=$1 initrd=$2 script=$3 log=$4 tmo=${5:-600}
use_board "$board"
KOUT=${KOUT:-$(bash "$REPO/scripts/build-kernel.sh")}
console=ttyAMA0 extra=
serial=(-serial "file:$log") serial_stdio=(-serial stdio)
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
virt-a53)
    mem=256; [ "$KVARIANT" = plain ] || { mem=1024; extra=irqchip.gicv3_pseudo_nmi=1; }
    machine=(-M virt,gic-version=3 -cpu cortex-a53 -smp 2 -m $mem)
    dtb=$CACHE/virt-a53-smp2-${mem}m.dtb
    if [ ! -f "$dtb" ]; then
        t=$(mktemp -d)
        qemu-system-aarch64 -M virt,gic-version=3,dumpdtb="$t/virt.dtb" -cpu cortex-a53 -smp 2 -m $mem -display none -nic none
        # QEMU's pmu node is the generic "arm,armv8-pmuv3" (the kernel names that PMU
        # armv8_pmuv3 and maps the generic events only); an A53 SoC's DTB says which core it is,
        # as imx8mp.dtsi does: "arm,cortex-a53-pmu" (armv8_cortex_a53, the A53's event map). Its
        # interrupt stays QEMU's: PPI 7, level high.
        [ "$(fdtget -t s "$t/virt.dtb" /pmu compatible)" = arm,armv8-pmuv3 ] &&
            [ "$(fdtget -t u "$t/virt.dtb" /pmu interrupts)" = "1 7 4" ] ||
            die "QEMU's virt DTB has no PMUv3 node with PPI 7: $(fdtget -t u "$t/virt.dtb" /pmu interrupts 2>&1)"
        fdtput -t s "$t/virt.dtb" /pmu compatible arm,cortex-a53-pmu
        mv "$t/virt.dtb" "$dtb"; rm -rf "$t"
    fi ;;
imx8mp-evk)
    # QEMU's model: 4 Cortex-A53 (the DTB lists 4), RAM at 0x40000000 (QEMU rewrites the DTB's
    # memory node for -m). Its console is UART2: QEMU connects the first -serial to UART1.
    machine=(-M imx8mp-evk -smp 4 -m 1024)
    console=ttymxc1 serial=(-serial null -serial "file:$log") serial_stdio=(-serial null -serial stdio)
    dtb=$CACHE/imx8mp-evk-qemu-$(sha256sum "$KOUT/arch/arm64/boot/dts/freescale/imx8mp-evk.dtb" | cut -c1-12).dtb
    if [ ! -f "$dtb" ]; then
        # QEMU does not emulate the CPUs' idle states (PSCI CPU_SUSPEND to the SoC's "cpu-pd-wait"
        # state): docs/system/arm/imx8mp-evk.rst boots the DTB without them.
        t=$(mktemp -d); cp "$KOUT/arch/arm64/boot/dts/freescale/imx8mp-evk.dtb" "$t/evk.dtb"
        for c in $(fdtget -l "$t/evk.dtb" /cpus | grep '^cpu@'); do
            fdtput -d "$t/evk.dtb" "/cpus/$c" cpu-idle-states
        done
        mv "$t/evk.dtb" "$dtb"; rm -rf "$t"
    fi ;;
*) die "unknown board '$board' (realview-pb-a8, virt-a15, virt-a53 or imx8mp-evk)" ;;
esac
# log_buf_len=8M: the final dmesg dump must still hold the boot line (tests/tap.sh check_log),
# so no kernel report can have wrapped out of the 128 KiB default ring before the splat scan.
append="console=$console loglevel=4 log_buf_len=8M oops=panic panic=-1${extra:+ $extra} opscript=$script${GUEST_ARGS:+ $GUEST_ARGS}"
# QEMU_KERNEL (env): the zImage (arm64: Image) to boot instead of the cached tree's (tests/image.sh boots the SD
# image's). QEMU_TYPE (env), with SCRIPT "": a command line typed at the board shell that the
# initramfs' /init starts without opscript= (scripts/initramfs.sh), once its banner is out.
# QEMU_ARGS (env): more QEMU options (make bench: -icount).
# shellcheck disable=SC2206
args=("${machine[@]}" ${QEMU_ARGS:-} -kernel "${QEMU_KERNEL:-$KOUT/$KIMAGE}" -dtb "$dtb" -initrd "$initrd"
      -append "$append" -display none -monitor none -audio none -nic none -no-reboot)
rc=0
if [ -z "${QEMU_TYPE:-}" ]; then
    timeout "$tmo" "$QEMU_SYSTEM" "${args[@]}" "${serial[@]}" </dev/null || rc=$?
else
    # Type QEMU_TYPE at the board shell: once /init's banner is in the log the console is open,
    # and its tty buffers the line until the shell reads it.
    fifo=$(mktemp -u); mkfifo "$fifo"
    timeout "$tmo" "$QEMU_SYSTEM" "${args[@]}" "${serial_stdio[@]}" <"$fifo" >"$log" &
    qpid=$!
    exec 3>"$fifo"; rm -f "$fifo"
    while kill -0 $qpid 2>/dev/null && ! grep -aq '^== oprofile-rs .*: shell on the console' "$log"; do sleep 0.2; done
    ! kill -0 $qpid 2>/dev/null || printf '%s\n' "$QEMU_TYPE" >&3
    wait $qpid || rc=$?
    exec 3>&-
fi
exit $rc
