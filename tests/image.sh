#!/usr/bin/env bash
# Shipping to the board (issue 16), the "image" part of `make check`. Needs `make module host`.
#   image    (host) `make image BOARD=imx51-evk`: the SD card layout (MBR, bootable FAT32 at
#            4 MiB), the FAT's files equal to the build's, boot.scr (a mkimage script wrapping
#            boot.cmd: console, fatload, bootz) and uEnv.txt running it, the DTB (Cortex-A8 PMU
#            node, its interrupt 77 on the TZIC, the console UART), the kernel config the board
#            needs, the initramfs (board shell, installed module tree with depmod's files, the
#            target tool)
#   image-imx8mp-evk (host) the same for `make image BOARD=imx8mp-evk` (arm64: Image, booti,
#            no uEnv.txt; the DTB's Cortex-A53 PMU on GIC PPI 7, the console UART2)
#   install  (host) `make install` with DESTDIR, and with INSTALL_MOD_PATH apart from DESTDIR
#   dkms     (host) Debian's dkms in private trees (--dkmstree/--sourcetree/--installtree; the
#            host's /var/lib/dkms untouched): dkms.conf's version, add, build and install for
#            the cached tree, a tree without CONFIG_RUST skipped (exit 77)
#   QEMU realview-pb-a8 (QEMU has no i.MX51) booting the zImage and initramfs copied out of the
#            SD image's FAT: tests/guest/profile.sh (+ tests/checks/profile.py), then
#            tests/guest/install.sh typed at the board shell, with the DKMS-built module appended
#            to the initramfs as /dkms/oprofile.ko
#   QEMU imx8mp-evk booting the Image and initramfs copied out of the i.MX 8M Plus EVK image's
#            FAT: tests/guest/profile.sh (+ tests/checks/profile.py)
# Every part reports TAP against its plan (tests/tap.sh); the host parts print their plans
# first, so a part that stops early has its missing checks counted as failed. The last line is
# "image: N passed, M failed"; exits non-zero on failure. Files: build/tests/image/.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
OUT=$REPO/build/tests/image
rm -rf "$OUT"; mkdir -p "$OUT"
OPROF=$REPO/target/release/oprof
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"
. "$REPO/tests/tap.sh"

# use_image BOARD: the board's settings (its KARCH's kernel tree and module, the image's files).
use_image() {
    BOARD=$1
    use_board "$BOARD"
    KOUT=$(bash "$REPO/scripts/build-kernel.sh") || die "kernel build failed ($KARCH)"
    export KOUT
    IMG=$REPO/build/image/$BOARD
    read -r KO _ < <(mod_dirs plain); KO=$KO/oprofile.ko
    rel=$(cat "$KOUT/include/config/kernel.release")
    FATDIR=$OUT/$BOARD/fat      # the files copied out of the SD image's FAT partition
    INITRD=$OUT/$BOARD/initrd   # the FAT's initramfs, unpacked
    KIMG=${KIMAGE##*/}
    case $BOARD in
    imx51-evk)
        DTB=arch/arm/boot/dts/nxp/imx/imx51-babbage.dtb
        FILES="boot.scr imx51-babbage.dtb initramfs.cpio.gz uEnv.txt zImage"
        SCRIPT_TYPE="ARM Linux Script (uncompressed)"
        CONSOLE=ttymxc0 KADDR=0x92000000 DTBADDR=0x91000000 RDADDR=0x94000000 BOOT=bootz
        # The kernel options the board needs to boot to a shell from the initramfs and to profile.
        KCONFIG=(ARCH_MULTI_V7 SOC_IMX51 MXC_TZIC CLK_IMX5 PINCTRL_IMX51 CLKSRC_IMX_GPT SERIAL_IMX
                 SERIAL_IMX_CONSOLE USE_OF AUTO_ZRELADDR ARM_PATCH_PHYS_VIRT BLK_DEV_INITRD RD_GZIP DEVTMPFS
                 TMPFS PROC_FS SYSFS MODULES MODULE_UNLOAD RUST PERF_EVENTS HW_PERF_EVENTS ARM_PMU)
        # ... and the one it must not have: the module is ARM code.
        KCONFIG_NOT=THUMB2_KERNEL NOT_WHY="the module is ARM code" ;;
    imx8mp-evk)
        DTB=arch/arm64/boot/dts/freescale/imx8mp-evk.dtb
        FILES="Image boot.scr imx8mp-evk.dtb initramfs.cpio.gz"
        SCRIPT_TYPE="AArch64 Linux Script (uncompressed)"
        CONSOLE=ttymxc1 KADDR=0x40480000 DTBADDR=0x43000000 RDADDR=0x43800000 BOOT=booti
        KCONFIG=(ARM64 ARCH_MXC SOC_IMX8M CLK_IMX8MP PINCTRL_IMX8MP ARM_GIC_V3 ARM_ARCH_TIMER SERIAL_IMX
                 SERIAL_IMX_CONSOLE OF BLK_DEV_INITRD RD_GZIP DEVTMPFS TMPFS PROC_FS SYSFS MODULES
                 MODULE_UNLOAD RUST PERF_EVENTS HW_PERF_EVENTS ARM_PMU ARM_PMUV3)
        KCONFIG_NOT=ARM64_BTI_KERNEL NOT_WHY="the module's Rust has no BTI landing pads" ;;
    esac
    DTBNAME=${DTB##*/}
}

# t DESC CMD...: a host part's TAP line, "ok - DESC" when CMD succeeds.
t() { local d=$1; shift; if "$@" >/dev/null 2>&1; then echo "ok - $d"; else echo "not ok - $d"; fi; }
# same DESC WANT GOT: "ok - DESC" when GOT equals WANT.
same() { if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: got '$3', want '$2'"; fi; }
# part NAME FUNCTION: runs a host part into $OUT/NAME.tap and counts it against its plan.
part() {
    local rc=0 why=
    ("$2") > "$OUT/$1.tap" 2> "$OUT/$1.err" || rc=$?   # a subshell: a crash ends the part only
    [ $rc = 0 ] || why="exited with status $rc: $(tail -1 "$OUT/$1.err")"
    tally "$1" "$OUT/$1.tap" "$why"
}

image_checks() {
    local uenv=0; [ "$BOARD" != imx51-evk ] || uenv=1
    echo "1..$((27 + uenv + ${#KCONFIG[@]}))"
    step "image: make image BOARD=$BOARD" >&2
    t "make image BOARD=$BOARD (log: $OUT/make-image-$BOARD.log)" \
        sh -c "make -C '$REPO' --no-print-directory image BOARD=$BOARD > '$OUT/make-image-$BOARD.log' 2>&1"
    local img=$IMG/sdcard.img fat="$IMG/sdcard.img@@$((8192 * 512))" f
    same "partition table: one bootable FAT32 (type c) partition at 4 MiB, 64 MiB" \
        "sdcard.img1 : start=8192, size=131072, type=c, bootable" \
        "$(sfdisk -d "$img" 2>&1 | grep '^/\|sdcard.img[0-9]' | sed 's|^.*/||; s/= */=/g')"
    same "FAT32 with 8192 hidden sectors (the partition's offset)" '8192 FAT32' \
        "$(minfo -i "$fat" :: 2>&1 | sed -n 's/^disk type="\([A-Z0-9]*\) *"/\1/p; s/^hidden sectors: //p' | xargs)"
    same "FAT files" "$FILES" "$(mdir -b -i "$fat" :: 2>&1 | sed 's|^::/||' | LC_ALL=C sort | xargs)"
    mkdir -p "$FATDIR"
    for f in $FILES; do mcopy -n -i "$fat" "::$f" "$FATDIR/$f"; done
    t "FAT $KIMG is the kernel tree's" cmp "$FATDIR/$KIMG" "$KOUT/$KIMAGE"
    t "FAT $DTBNAME is the kernel tree's" cmp "$FATDIR/$DTBNAME" "$KOUT/$DTB"
    t "FAT initramfs.cpio.gz is the build's" cmp "$FATDIR/initramfs.cpio.gz" "$IMG/initramfs.cpio.gz"
    t "FAT boot.scr is the build's" cmp "$FATDIR/boot.scr" "$IMG/boot.scr"
    same "boot.scr is a U-Boot script image (mkimage -T script)" "$SCRIPT_TYPE" \
        "$(dumpimage -l "$FATDIR/boot.scr" 2>&1 | sed -n 's/^Image Type: *//p')"
    dumpimage -T script -p 0 -o "$OUT/$BOARD/boot.scr.txt" "$FATDIR/boot.scr" >/dev/null 2>&1
    # dumpimage keeps the script image's length table (one 4-byte length, a 0 word) before it.
    t "boot.scr holds boot.cmd" sh -c "tail -c +9 '$OUT/$BOARD/boot.scr.txt' | cmp - '$IMG/boot.cmd'"
    [ $uenv = 0 ] || same "FAT uEnv.txt: uenvcmd runs boot.scr (U-Boot's mx51evk mmcboot)" \
        'uenvcmd=fatload mmc ${bootpart} 0x90800000 boot.scr; source 0x90800000' "$(cat "$FATDIR/uEnv.txt" 2>&1)"
    local cmd=$IMG/boot.cmd
    t "boot.cmd: console at 115200 ($CONSOLE)" grep -qx "setenv bootargs console=$CONSOLE,115200 loglevel=7" "$cmd"
    t "boot.cmd: fatload of $KIMG, the DTB and the initramfs" sh -c "
        grep -q '^fatload .* $KADDR $KIMG\$' '$cmd' && grep -q '^fatload .* $DTBADDR $DTBNAME\$' '$cmd' &&
        grep -q '^fatload .* $RDADDR initramfs.cpio.gz\$' '$cmd'"
    t "boot.cmd: $BOOT $KIMG initramfs:size DTB, after the initramfs' fatload" \
        sh -c "tail -n 2 '$cmd' | head -1 | grep -q initramfs && tail -n 1 '$cmd' | grep -qx '$BOOT $KADDR $RDADDR:\${filesize} $DTBADDR'"

    local dtb=$FATDIR/$DTBNAME
    t "DTB decompiles (dtc -I dtb) with a pmu node" sh -c "dtc -q -I dtb -O dts '$dtb' | grep -q '^	pmu {'"
    local uart; uart=$(fdtget -t s "$dtb" /chosen stdout-path 2>&1)
    if [ "$BOARD" = imx51-evk ]; then
        same "DTB /pmu compatible" "arm,cortex-a8-pmu" "$(fdtget -t s "$dtb" /pmu compatible 2>&1)"
        same "DTB /pmu interrupts (TZIC interrupt 77)" 77 "$(fdtget -t u "$dtb" /pmu interrupts 2>&1)"
        same "DTB /pmu interrupt-parent is the TZIC (phandle, compatible, one interrupt cell)" \
            "$(fdtget -t u "$dtb" /pmu interrupt-parent 2>&1) fsl,imx51-tzic fsl,tzic 1" \
            "$(fdtget -t u "$dtb" /tz-interrupt-controller@e0000000 phandle 2>&1) $(fdtget -t s "$dtb" /tz-interrupt-controller@e0000000 compatible 2>&1) $(fdtget -t u "$dtb" /tz-interrupt-controller@e0000000 '#interrupt-cells' 2>&1)"
        same "DTB console: stdout-path is alias serial0 (ttymxc0), an enabled i.MX51 UART" \
            "$uart fsl,imx51-uart fsl,imx21-uart okay" \
            "$(fdtget -t s "$dtb" /aliases serial0 2>&1) $(fdtget -t s "$dtb" "$uart" compatible 2>&1) $(fdtget -t s "$dtb" "$uart" status 2>&1)"
    else
        local gic=/soc@0/interrupt-controller@38800000
        same "DTB /pmu compatible" "arm,cortex-a53-pmu" "$(fdtget -t s "$dtb" /pmu compatible 2>&1)"
        same "DTB /pmu interrupts (GIC PPI 7, level high)" "1 7 4" "$(fdtget -t u "$dtb" /pmu interrupts 2>&1)"
        same "DTB /pmu's interrupt parent (the root's) is the GICv3 (phandle, compatible, three interrupt cells)" \
            "$(fdtget -t u "$dtb" / interrupt-parent 2>&1) arm,gic-v3 3" \
            "$(fdtget -t u "$dtb" $gic phandle 2>&1) $(fdtget -t s "$dtb" $gic compatible 2>&1) $(fdtget -t u "$dtb" $gic '#interrupt-cells' 2>&1)"
        same "DTB console: stdout-path is alias serial1 (ttymxc1), an enabled i.MX 8M Plus UART" \
            "$uart fsl,imx8mp-uart fsl,imx6q-uart okay" \
            "$(fdtget -t s "$dtb" /aliases serial1 2>&1) $(fdtget -t s "$dtb" "$uart" compatible 2>&1) $(fdtget -t s "$dtb" "$uart" status 2>&1)"
    fi

    t "config-$rel is the kernel tree's .config" cmp "$IMG/config-$rel" "$KOUT/.config"
    for f in "${KCONFIG[@]}"; do t "kernel config: CONFIG_$f=y" grep -qx "CONFIG_$f=y" "$IMG/config-$rel"; done
    t "kernel config: CONFIG_$KCONFIG_NOT is not set ($NOT_WHY)" grep -qx "# CONFIG_$KCONFIG_NOT is not set" "$IMG/config-$rel"

    mkdir -p "$INITRD"
    (cd "$INITRD" && gzip -dc "$FATDIR/initramfs.cpio.gz" | cpio -id --quiet) 2>/dev/null
    local mods=$INITRD/lib/modules/$rel
    t "initramfs: /init starts a shell on the console without opscript=" grep -q 'setsid cttyhack sh' "$INITRD/init"
    t "initramfs: busybox and optool" test -x "$INITRD/bin/busybox" -a -x "$INITRD/bin/optool"
    t "initramfs: lib/modules/$rel/extra/oprofile.ko is the build's" cmp "$mods/extra/oprofile.ko" "$KO"
    t "initramfs: modules.dep lists extra/oprofile.ko" grep -qx 'extra/oprofile.ko:' "$mods/modules.dep"
    t "initramfs: modules.alias maps fs-oprofilefs to oprofile" grep -qx 'alias fs-oprofilefs oprofile' "$mods/modules.alias"
    t "initramfs: no lib/modules/$rel/build link to the host's tree" test ! -e "$mods/build" -a ! -L "$mods/build"
    if [ -x "$OPROF_TARGET" ]; then
        t "initramfs: /usr/bin/oprof is the target oprof" cmp "$INITRD/usr/bin/oprof" "$OPROF_TARGET"
    else
        t "initramfs: no /usr/bin/oprof (target oprof not built; optool is the helper)" test ! -e "$INITRD/usr/bin/oprof"
    fi
}

install_checks() {
    echo "1..6"
    step "install: make install DESTDIR=, INSTALL_MOD_PATH=" >&2
    local d=$OUT/destdir m=$OUT/modpath d2=$OUT/destdir2
    t "make install DESTDIR=$d (log: $OUT/make-install.log)" \
        sh -c "make -C '$REPO' --no-print-directory KDIR='$KOUT' DESTDIR='$d' install > '$OUT/make-install.log' 2>&1"
    t "DESTDIR: lib/modules/$rel/extra/oprofile.ko is the build's" cmp "$d/lib/modules/$rel/extra/oprofile.ko" "$KO"
    t "DESTDIR: depmod ran (modules.dep lists extra/oprofile.ko)" grep -qx 'extra/oprofile.ko:' "$d/lib/modules/$rel/modules.dep"
    if [ -x "$OPROF_TARGET" ]; then
        t "DESTDIR: usr/bin/oprof is the target oprof" cmp "$d/usr/bin/oprof" "$OPROF_TARGET"
    else
        t "DESTDIR: no usr/bin/oprof (target oprof not built)" test ! -e "$d/usr/bin/oprof"
    fi
    t "DESTDIR: man pages (oprof.1, oprof-record.1, ...) and the bash completion" sh -c "
        grep -q '^.TH oprof-record' '$d/usr/share/man/man1/oprof-record.1' && test -s '$d/usr/share/man/man1/oprof.1' &&
        grep -q '_oprof()' '$d/usr/share/bash-completion/completions/oprof'"
    t "make install DESTDIR=$d2 INSTALL_MOD_PATH=$m: the module under INSTALL_MOD_PATH only" sh -c "
        make -C '$REPO' --no-print-directory KDIR='$KOUT' DESTDIR='$d2' INSTALL_MOD_PATH='$m' install > '$OUT/make-install2.log' 2>&1 &&
        cmp '$m/lib/modules/$rel/extra/oprofile.ko' '$KO' && test ! -e '$d2/lib'"
}

dkms_checks() {
    echo "1..9"
    step "dkms: add, build, install for $rel in private trees" >&2
    local d=$OUT/dkms ver cver
    ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$REPO/dkms.conf")
    cver=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$REPO/Cargo.toml")
    same "dkms.conf PACKAGE_VERSION is the Cargo workspace version" "$cver" "$ver"
    mkdir -p "$d/tree" "$d/norust/include"
    t "make dkms-source DESTDIR=$d/src" sh -c "make -C '$REPO' --no-print-directory DESTDIR='$d/src' dkms-source && test -f '$d/src/usr/src/oprofile-$ver/dkms.conf'"
    # An installed kernel: its module tree (dkms install wants lib/modules/<release>).
    make -s -C "$KOUT" "${KMAKE_VARS[@]}" INSTALL_MOD_PATH="$d/root" modules_install >/dev/null 2>&1
    local dk=(dkms --dkmstree "$d/tree" --sourcetree "$d/src/usr/src" --installtree "$d/root/lib/modules" -m oprofile -v "$ver")
    t "dkms add" "${dk[@]}" add
    t "dkms build -k $rel --kernelsourcedir KOUT (log: $OUT/dkms-build.log)" \
        sh -c '"$@" > "'"$OUT"'/dkms-build.log" 2>&1' _ "${dk[@]}" build -k "$rel" -a armv7l --kernelsourcedir "$KOUT" -j 2
    cp "$d/tree/oprofile/$ver/$rel/armv7l/log/make.log" "$OUT/dkms-make.log" 2>/dev/null
    t "dkms install: updates/dkms/oprofile.ko in the install tree" sh -c '"$@" && test -f "'"$d/root/lib/modules/$rel/updates/dkms/oprofile.ko"'"' _ \
        "${dk[@]}" install -k "$rel" -a armv7l --kernelsourcedir "$KOUT" --no-depmod
    t "depmod -b: modules.dep lists updates/dkms/oprofile.ko" \
        sh -c "depmod -b '$d/root' '$rel' && grep -qx 'updates/dkms/oprofile.ko:' '$d/root/lib/modules/$rel/modules.dep'"
    same "dkms status" "oprofile/$ver, $rel, armv7l: installed" "$("${dk[@]}" status 2>&1)"
    # BUILD_EXCLUSIVE_CONFIG: a tree without CONFIG_RUST is skipped (dkms exits 77), not failed.
    grep -v '^CONFIG_RUST=' "$KOUT/.config" > "$d/norust/.config"
    local rc=0; "${dk[@]}" build -k "$rel-norust" -a armv7l --kernelsourcedir "$d/norust" >"$OUT/dkms-norust.log" 2>&1 || rc=$?
    same "dkms build for a tree without CONFIG_RUST is skipped (exit status)" 77 $rc
    t "the host's /var/lib/dkms has no oprofile" test ! -e /var/lib/dkms/oprofile
    install -D -m 0644 "$d/root/lib/modules/$rel/updates/dkms/oprofile.ko" "$OUT/overlay/dkms/oprofile.ko" 2>/dev/null
}

use_image imx51-evk
part image image_checks
part install install_checks
part dkms dkms_checks

# QEMU: the SD image's own zImage and initramfs on realview-pb-a8 (multi-platform ARMv7).
export QEMU_KERNEL=$FATDIR/zImage
SYSROOT=$IMG/initramfs.root
log=$OUT/realview-pb-a8-profile.log
step "qemu realview-pb-a8: the $BOARD image's zImage + initramfs, profile.sh"
rc=0; bash "$REPO/scripts/qemu.sh" realview-pb-a8 "$FATDIR/initramfs.cpio.gz" profile.sh "$log" 300 || rc=$?
check_log "$BOARD image on realview-pb-a8: profile" "$log" $rc
host_check "$BOARD image on realview-pb-a8: profile" profile "$log" realview-pb-a8

# The board shell: install.sh typed at the prompt; the DKMS module appended as a second archive.
mkdir -p "$OUT/overlay"
pack_cpio "$OUT/overlay" "$OUT/overlay.cpio.gz"
cat "$FATDIR/initramfs.cpio.gz" "$OUT/overlay.cpio.gz" > "$OUT/initramfs-dkms.cpio.gz"
log=$OUT/realview-pb-a8-install.log
step "qemu realview-pb-a8: the $BOARD image's board shell, install.sh"
rc=0; QEMU_TYPE="sh /tests/run.sh install.sh" bash "$REPO/scripts/qemu.sh" realview-pb-a8 \
    "$OUT/initramfs-dkms.cpio.gz" "" "$log" 300 || rc=$?
check_log "$BOARD image on realview-pb-a8: install" "$log" $rc

# The i.MX 8M Plus EVK's image (arm64): host checks, then its own Image and initramfs on QEMU's
# imx8mp-evk (scripts/qemu.sh: the same DTB without the CPUs' idle states).
use_image imx8mp-evk
part image-$BOARD image_checks
export QEMU_KERNEL=$FATDIR/Image
SYSROOT=$IMG/initramfs.root
log=$OUT/imx8mp-evk-profile.log
step "qemu imx8mp-evk: the $BOARD image's Image + initramfs, profile.sh"
rc=0; bash "$REPO/scripts/qemu.sh" imx8mp-evk "$FATDIR/initramfs.cpio.gz" profile.sh "$log" 300 || rc=$?
check_log "$BOARD image on imx8mp-evk: profile" "$log" $rc
host_check "$BOARD image on imx8mp-evk: profile" profile "$log" imx8mp-evk

tap_close image
