#!/usr/bin/env bash
# Shipping to the board (issue 16), the "image" part of `make check`. Needs `make module host`.
#   image    (host) `make image BOARD=imx51-evk`: the SD card layout (MBR, bootable FAT32 at
#            4 MiB), the FAT's files equal to the build's, boot.scr (a mkimage script wrapping
#            boot.cmd: console, fatload, bootz) and uEnv.txt running it, the DTB (Cortex-A8 PMU
#            node, its interrupt 77 on the TZIC, the console UART), the kernel config the board
#            needs, the initramfs (board shell, installed module tree with depmod's files, the
#            target tool)
#   install  (host) `make install` with DESTDIR, and with INSTALL_MOD_PATH apart from DESTDIR
#   dkms     (host) Debian's dkms in private trees (--dkmstree/--sourcetree/--installtree; the
#            host's /var/lib/dkms untouched): dkms.conf's version, add, build and install for
#            the cached tree, a tree without CONFIG_RUST skipped (exit 77)
#   QEMU realview-pb-a8 (QEMU has no i.MX51) booting the zImage and initramfs copied out of the
#            SD image's FAT: tests/guest/profile.sh (+ tests/checks/profile.py), then
#            tests/guest/install.sh typed at the board shell, with the DKMS-built module appended
#            to the initramfs as /dkms/oprofile.ko
# Every part reports TAP against its plan (tests/tap.sh); the host parts print their plans
# first, so a part that stops early has its missing checks counted as failed. The last line is
# "image: N passed, M failed"; exits non-zero on failure. Files: build/tests/image/.
set -uo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
BOARD=imx51-evk
DTB=arch/arm/boot/dts/nxp/imx/imx51-babbage.dtb
OUT=$REPO/build/tests/image
rm -rf "$OUT"; mkdir -p "$OUT"
KOUT=$(bash "$REPO/scripts/build-kernel.sh") || die "kernel build failed"
export KOUT
OPROF=$REPO/target/release/oprof
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"
. "$REPO/tests/tap.sh"
IMG=$REPO/build/image/$BOARD
read -r KO _ < <(mod_dirs plain); KO=$KO/oprofile.ko
rel=$(cat "$KOUT/include/config/kernel.release")
FATDIR=$OUT/fat      # the files copied out of the SD image's FAT partition
INITRD=$OUT/initrd   # the FAT's initramfs, unpacked
# The kernel options the board needs to boot to a shell from the initramfs and to profile.
KCONFIG=(ARCH_MULTI_V7 SOC_IMX51 MXC_TZIC CLK_IMX5 PINCTRL_IMX51 CLKSRC_IMX_GPT SERIAL_IMX
         SERIAL_IMX_CONSOLE USE_OF AUTO_ZRELADDR ARM_PATCH_PHYS_VIRT BLK_DEV_INITRD RD_GZIP DEVTMPFS
         TMPFS PROC_FS SYSFS MODULES MODULE_UNLOAD RUST PERF_EVENTS HW_PERF_EVENTS ARM_PMU)

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
    echo "1..$((28 + ${#KCONFIG[@]}))"
    step "image: make image BOARD=$BOARD" >&2
    t "make image BOARD=$BOARD (log: $OUT/make-image.log)" \
        sh -c "make -C '$REPO' --no-print-directory image BOARD=$BOARD > '$OUT/make-image.log' 2>&1"
    local img=$IMG/sdcard.img fat="$IMG/sdcard.img@@$((8192 * 512))" f
    same "partition table: one bootable FAT32 (type c) partition at 4 MiB, 64 MiB" \
        "sdcard.img1 : start=8192, size=131072, type=c, bootable" \
        "$(sfdisk -d "$img" 2>&1 | grep '^/\|sdcard.img[0-9]' | sed 's|^.*/||; s/= */=/g')"
    same "FAT32 with 8192 hidden sectors (the partition's offset)" '8192 FAT32' \
        "$(minfo -i "$fat" :: 2>&1 | sed -n 's/^disk type="\([A-Z0-9]*\) *"/\1/p; s/^hidden sectors: //p' | xargs)"
    same "FAT files" "boot.scr imx51-babbage.dtb initramfs.cpio.gz uEnv.txt zImage" \
        "$(mdir -b -i "$fat" :: 2>&1 | sed 's|^::/||' | LC_ALL=C sort | xargs)"
    mkdir -p "$FATDIR"
    for f in zImage imx51-babbage.dtb initramfs.cpio.gz boot.scr uEnv.txt; do mcopy -n -i "$fat" "::$f" "$FATDIR/$f"; done
    t "FAT zImage is the kernel tree's" cmp "$FATDIR/zImage" "$KOUT/arch/arm/boot/zImage"
    t "FAT imx51-babbage.dtb is the kernel tree's" cmp "$FATDIR/imx51-babbage.dtb" "$KOUT/$DTB"
    t "FAT initramfs.cpio.gz is the build's" cmp "$FATDIR/initramfs.cpio.gz" "$IMG/initramfs.cpio.gz"
    t "FAT boot.scr is the build's" cmp "$FATDIR/boot.scr" "$IMG/boot.scr"
    same "boot.scr is a U-Boot script image (mkimage -T script)" "ARM Linux Script (uncompressed)" \
        "$(dumpimage -l "$FATDIR/boot.scr" 2>&1 | sed -n 's/^Image Type: *//p')"
    dumpimage -T script -p 0 -o "$OUT/boot.scr.txt" "$FATDIR/boot.scr" >/dev/null 2>&1
    # dumpimage keeps the script image's length table (one 4-byte length, a 0 word) before it.
    t "boot.scr holds boot.cmd" sh -c "tail -c +9 '$OUT/boot.scr.txt' | cmp - '$IMG/boot.cmd'"
    same "FAT uEnv.txt: uenvcmd runs boot.scr (U-Boot's mx51evk mmcboot)" \
        'uenvcmd=fatload mmc ${bootpart} 0x90800000 boot.scr; source 0x90800000' "$(cat "$FATDIR/uEnv.txt" 2>&1)"
    local cmd=$IMG/boot.cmd
    t "boot.cmd: console on UART1 at 115200 (ttymxc0)" grep -qx 'setenv bootargs console=ttymxc0,115200 loglevel=7' "$cmd"
    t "boot.cmd: fatload of zImage, the DTB and the initramfs" sh -c "
        grep -q '^fatload .* 0x92000000 zImage\$' '$cmd' && grep -q '^fatload .* 0x91000000 imx51-babbage.dtb\$' '$cmd' &&
        grep -q '^fatload .* 0x94000000 initramfs.cpio.gz\$' '$cmd'"
    t "boot.cmd: bootz zImage initramfs:size DTB, after the initramfs' fatload" \
        sh -c "tail -n 2 '$cmd' | head -1 | grep -q initramfs && tail -n 1 '$cmd' | grep -qx 'bootz 0x92000000 0x94000000:\${filesize} 0x91000000'"

    local dtb=$FATDIR/imx51-babbage.dtb
    t "DTB decompiles (dtc -I dtb) with a pmu node" sh -c "dtc -q -I dtb -O dts '$dtb' | grep -q '^	pmu {'"
    same "DTB /pmu compatible" "arm,cortex-a8-pmu" "$(fdtget -t s "$dtb" /pmu compatible 2>&1)"
    same "DTB /pmu interrupts (TZIC interrupt 77)" 77 "$(fdtget -t u "$dtb" /pmu interrupts 2>&1)"
    same "DTB /pmu interrupt-parent is the TZIC (phandle, compatible, one interrupt cell)" \
        "$(fdtget -t u "$dtb" /pmu interrupt-parent 2>&1) fsl,imx51-tzic fsl,tzic 1" \
        "$(fdtget -t u "$dtb" /tz-interrupt-controller@e0000000 phandle 2>&1) $(fdtget -t s "$dtb" /tz-interrupt-controller@e0000000 compatible 2>&1) $(fdtget -t u "$dtb" /tz-interrupt-controller@e0000000 '#interrupt-cells' 2>&1)"
    local uart; uart=$(fdtget -t s "$dtb" /chosen stdout-path 2>&1)
    same "DTB console: stdout-path is alias serial0 (ttymxc0), an enabled i.MX51 UART" \
        "$uart fsl,imx51-uart fsl,imx21-uart okay" \
        "$(fdtget -t s "$dtb" /aliases serial0 2>&1) $(fdtget -t s "$dtb" "$uart" compatible 2>&1) $(fdtget -t s "$dtb" "$uart" status 2>&1)"

    t "config-$rel is the kernel tree's .config" cmp "$IMG/config-$rel" "$KOUT/.config"
    for f in "${KCONFIG[@]}"; do t "kernel config: CONFIG_$f=y" grep -qx "CONFIG_$f=y" "$IMG/config-$rel"; done
    t "kernel config: CONFIG_THUMB2_KERNEL is not set (the module is ARM code)" grep -qx '# CONFIG_THUMB2_KERNEL is not set' "$IMG/config-$rel"

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

tap_close image
