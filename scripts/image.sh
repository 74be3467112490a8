#!/usr/bin/env bash
# `make image BOARD=imx51-evk`: the SD card image a user flashes to the board, built without root
# or loop mounts (sfdisk on a file, mtools on the partition's offset, mkimage for the U-Boot
# script). Usage: image.sh BOARD (imx51-evk: the i.MX51 EVK, "Babbage", ARMv7; imx8mp-evk: the
# NXP i.MX 8M Plus EVK, arm64).
#
# Output in build/image/BOARD/ (Documentation/imx51-evk.rst, Documentation/imx8mp-evk.rst):
#   sdcard.img         MBR; the first 4 MiB free for U-Boot (i.MX51: u-boot.imx at 1 KiB; i.MX 8M
#                      Plus: flash.bin at 32 KiB); partition 1 (bootable, type c): FAT32
#                      "OPROFILE", 64 MiB, holding the kernel (zImage or Image), the DTB,
#                      initramfs.cpio.gz, boot.scr (and uEnv.txt on the i.MX51)
#   boot.cmd, boot.scr the U-Boot script (mkimage -T script): fatload the three files, `bootz`
#                      (i.MX51) or `booti` (i.MX 8M Plus)
#   uEnv.txt           (i.MX51) runs boot.scr from U-Boot's stock mx51evk environment (`run
#                      mmcboot`); the i.MX 8M Plus EVK's U-Boot runs boot.scr by itself
#   initramfs.cpio.gz  scripts/initramfs.sh's tree (busybox, optool, oprofile.ko, tests/guest and
#                      its programs) plus the installed module tree, /lib/modules/<release>/ (the
#                      kernel's modules, extra/oprofile.ko, depmod's files: `modprobe oprofile`)
#                      and /usr/bin/oprof when the target oprof is built (make target-tools);
#                      initramfs.root is that tree (the sysroot for `oprof report`)
#   zImage or Image, DTB, config-<release>   copies of the kernel tree's
# The kernel is the cached multi-platform tree of the board's architecture (scripts/build-kernel.sh;
# its fragment has SOC_IMX51 or the i.MX 8M platform, and the i.MX UART console). U-Boot loads everything from the FAT partition and the
# root filesystem is the initramfs, so the kernel needs no MMC driver. Without `opscript=` on the
# command line the initramfs' /init starts a shell on the console.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
board=${1:-imx51-evk}
case "$board" in
imx51-evk) dtb=arch/arm/boot/dts/nxp/imx/imx51-babbage.dtb console=ttymxc0,115200 ;;
imx8mp-evk) dtb=arch/arm64/boot/dts/freescale/imx8mp-evk.dtb console=ttymxc1,115200 ;;
*) die "unknown board '$board' (imx51-evk or imx8mp-evk)" ;;
esac
use_board "$board"
for t in sfdisk mformat mcopy mkimage; do
    command -v $t >/dev/null || die "$t missing: run scripts/setup-host.sh"
done
KOUT=${KOUT:-$(bash "$REPO/scripts/build-kernel.sh")}
read -r ko _ < <(mod_dirs plain); ko=$ko/oprofile.ko
[ -f "$ko" ] || die "module not built: $ko (make module)"
rel=$(cat "$KOUT/include/config/kernel.release")
out=$REPO/build/image/$board
rm -rf "$out"; mkdir -p "$out"

step "image $board: initramfs with the installed module tree (lib/modules/$rel)"
bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$ko"
root=$out/initramfs.root
make -s -C "$KOUT" "${KMAKE_VARS[@]}" INSTALL_MOD_PATH="$root" modules_install
make -s -C "$REPO" --no-print-directory KDIR="$KOUT" DESTDIR="$root" INSTALL_MOD_PATH="$root" INSTALL_MOD_DIR=extra install
rm -f "$root/lib/modules/$rel/build"   # the host's tree
pack_cpio "$root" "$out/initramfs.cpio.gz"

cp "$KOUT/$KIMAGE" "$KOUT/$dtb" "$out/"
cp "$KOUT/.config" "$out/config-$rel"
dtbname=${dtb##*/}
kimage=${KIMAGE##*/}
files=("$out/$kimage" "$out/$dtbname" "$out/initramfs.cpio.gz" "$out/boot.scr")
# Per board: where U-Boot loads the kernel image, DTB and initramfs, how it boots them, the SD
# card's mmc device when the environment names none, and how the board's own environment runs
# boot.scr.
case $board in
imx51-evk)
    # RAM is 512 MiB at 0x90000000: the kernel decompresses to 0x90008000 (about 10 MiB), the
    # DTB goes 16 MiB in, the zImage 32 MiB in, the initramfs 64 MiB in.
    desc="the i.MX51 EVK" mkarch=arm kaddr=0x92000000 faddr=0x91000000 iaddr=0x94000000 boot=bootz dev=0
    env_note="# Distro boot sets devtype/devnum/distro_bootpart; from uEnv.txt (U-Boot's mx51evk environment)
# or by hand (source) it uses mmc \${mmcdev} or 0, partition \${mmcpart} or 1." ;;
*)
    # RAM starts at 0x40000000 (6 GiB on the EVK). U-Boot's imx8mp_evk addresses: the Image
    # (about 6 MiB; booti moves it to a 2 MiB-aligned base if it needs to) at
    # kernel_addr_r/loadaddr 0x40480000, the DTB at fdt_addr_r 0x43000000, the initramfs at
    # initrd_addr 0x43800000.
    desc="the i.MX 8M Plus EVK" mkarch=arm64 kaddr=0x40480000 faddr=0x43000000 iaddr=0x43800000 boot=booti dev=1
    env_note="# Distro boot/bootstd set devtype/devnum/distro_bootpart; NXP's environment (loadbootscript) runs
# it with mmcdev (the SD slot is mmc 1) and mmcpart; by hand (source) it uses mmc 1, partition 1." ;;
esac
cat > "$out/boot.cmd" <<CMD
# oprofile-rs on $desc: $kimage + DTB + initramfs from the SD card's FAT partition.
# boot.scr is this file wrapped by: mkimage -A $mkarch -O linux -T script -C none -d boot.cmd boot.scr
$env_note
if test -z "\${devtype}"; then setenv devtype mmc; fi
if test -z "\${devnum}"; then if test -n "\${mmcdev}"; then setenv devnum \${mmcdev}; else setenv devnum $dev; fi; fi
if test -z "\${distro_bootpart}"; then if test -n "\${mmcpart}"; then setenv distro_bootpart \${mmcpart}; else setenv distro_bootpart 1; fi; fi
setenv bootargs console=$console loglevel=7
fatload \${devtype} \${devnum}:\${distro_bootpart} $kaddr $kimage
fatload \${devtype} \${devnum}:\${distro_bootpart} $faddr $dtbname
fatload \${devtype} \${devnum}:\${distro_bootpart} $iaddr initramfs.cpio.gz
$boot $kaddr $iaddr:\${filesize} $faddr
CMD
mkimage -A $mkarch -O linux -T script -C none -n "oprofile-rs $board" -d "$out/boot.cmd" "$out/boot.scr" >/dev/null
if [ "$board" = imx51-evk ]; then
    # U-Boot's own mx51evk environment boots by `run mmcboot`, which imports /uEnv.txt from the
    # first partition and runs its uenvcmd (bootpart = mmcdev:1): that loads and runs boot.scr.
    echo 'uenvcmd=fatload mmc ${bootpart} 0x90800000 boot.scr; source 0x90800000' > "$out/uEnv.txt"
    files+=("$out/uEnv.txt")
fi
step "image $board: sdcard.img"
img=$out/sdcard.img
start=8192 sectors=131072   # 512-byte sectors: the partition starts at 4 MiB and is 64 MiB
truncate -s $(( (start + sectors) * 512 )) "$img"
printf 'label: dos\nlabel-id: 0x6f70726f\nstart=%d, size=%d, type=c, bootable\n' $start $sectors |
    sfdisk -q "$img"
fat="$img@@$((start * 512))"
mformat -i "$fat" -F -T $sectors -H $start -N 6f70726f -v OPROFILE ::
mcopy -i "$fat" "${files[@]}" ::
step "image $board: $img ($(du -h --apparent-size "$img" | cut -f1)); flash with: dd if=$img of=/dev/sdX bs=1M conv=fsync (Documentation/$board.rst)"
