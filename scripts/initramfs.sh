#!/usr/bin/env bash
# Builds the guest initramfs for $KARCH (arm: armhf, arm64: aarch64; lib.sh): busybox (static,
# $BUSYBOX), optool, opfuzz, oprofile.ko, the static oprof (/usr/bin/oprof, with
# /usr/bin/oprofile.ko beside it: `make target-tools`), tests/guest/*.sh, the guest programs (hot,
# churn + libspin.so: dynamic, with symbols, debug info and frame pointers; hot_t2, callers,
# opwork: built as the distribution builds C, -O2 without frame pointers (Thumb-2 on armhf), the
# last two stripped with their debug files in OUT.debug) and Debian's glibc ($GUEST_LIBC).
# Usage: initramfs.sh OUT.cpio.gz MODULE.ko [OPSETUP.sh]   (KVARIANT: which optest.ko, KARCH: the
# architecture; see lib.sh)
#   OPSETUP.sh (optional): counter set-up lines (`oprof setup`), installed as /tests/opsetup.sh.
# The tree is kept next to OUT as OUT-without-.cpio.gz + ".root": the sysroot `oprof report`
# finds the guest's images in.
# /init mounts proc/sys/devtmpfs/tmpfs, then runs the script named by `opscript=` on the kernel
# command line (a file in /tests) and powers off. Scripts read further `name=value` words of the
# command line (GUEST_ARGS of scripts/qemu.sh) with lib.sh's guest_arg.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=$1 ko=$2 opsetup=${3:-}
[ -f "$ko" ] || die "module not built: $ko (make module testmod KVARIANT=$KVARIANT)"
[ -x "$OPROF_TARGET" ] || die "target oprof not built: $OPROF_TARGET (make target-tools)"
root=${out%.cpio.gz}.root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,tests,etc,root,lib,usr/bin}
chmod 0755 "$root"   # the guest "/" must be traversable by non-root
[ -x "$BUSYBOX" ] || die "busybox for $KARCH missing: $BUSYBOX (scripts/setup-host.sh)"
install -m 0755 "$BUSYBOX" "$root/bin/busybox"
"${CROSS}gcc" -static -O2 -Wall -Werror -o "$root/bin/optool" "$REPO/tests/guest/optool.c"
"${CROSS}gcc" -static -O2 -Wall -Werror -pthread -o "$root/bin/opfuzz" "$REPO/tests/guest/opfuzz.c"
# lookup_dcookie as OProfile 0.9.9 calls it (tests/guest/legacy.sh, under `oprof legacy`).
"${CROSS}gcc" -static -O2 -Wall -Werror -o "$root/bin/dcookie" "$REPO/tests/guest/dcookie.c"
# Profiled programs: frame pointers are what the user backtrace walker follows (armhf: ARM code,
# -marm, whose frames are {fp, lr}; AArch64, which has no Thumb: frame records {x29, x30}).
case "$KARCH" in
arm)   cflags=(-O1 -g -marm -fno-omit-frame-pointer -Wall -Werror) ldso=ld-linux-armhf.so.3 ;;
arm64) cflags=(-O1 -g -fno-omit-frame-pointer -Wall -Werror) ldso=ld-linux-aarch64.so.1 ;;
esac
for p in hot churn; do
    "${CROSS}gcc" "${cflags[@]}" -o "$root/bin/$p" "$REPO/tests/guest/$p.c"
done
"${CROSS}gcc" "${cflags[@]}" -shared -fPIC -o "$root/lib/libspin.so" "$REPO/tests/guest/libspin.c"
# hot, callers and opwork (make run's program) as distributions build C (Debian's defaults: -O2,
# no frame pointer; Thumb-2 on armhf: hot_t2's name). callers and opwork are stripped as a
# package would ship them; their debug files (found by build-id) go to the host-only
# OUT.debug/.build-id/ (the report's --debug-dir), as a -dbgsym package would.
"${CROSS}gcc" -O2 -g -Wall -Werror -o "$root/bin/hot_t2" "$REPO/tests/guest/hot.c"
debug=${out%.cpio.gz}.debug
rm -rf "$debug"
for p in callers opwork; do
    "${CROSS}gcc" -O2 -g -Wall -Werror -Wl,--build-id -o "$root/bin/$p" "$REPO/tests/guest/$p.c"
    id=$("${CROSS}readelf" -n "$root/bin/$p" | sed -n 's/.*Build ID: \([0-9a-f]*\)/\1/p')
    mkdir -p "$debug/.build-id/${id:0:2}"
    "${CROSS}objcopy" --only-keep-debug "$root/bin/$p" "$debug/.build-id/${id:0:2}/${id:2}.debug"
    "${CROSS}strip" --strip-all "$root/bin/$p"
done
# Debian's glibc (libc6:DEB_ARCH), whose debug files libc6-dbg:DEB_ARCH has (GUEST_LIBC). The
# programs' interpreter is /lib/ld-linux-armhf.so.3 or /lib/ld-linux-aarch64.so.1: both in /lib.
install -m 0755 "$GUEST_LIBDIR/$ldso" "$GUEST_LIBDIR/libc.so.6" "$root/lib/"
install -m 0644 "$ko" "$root/oprofile.ko"
# oprof record loads the module from beside its binary when modprobe cannot.
install -m 0755 "$OPROF_TARGET" "$root/usr/bin/oprof"
ln -s ../../oprofile.ko "$root/usr/bin/oprofile.ko"
# PERF (env): a static perf of $KARCH (scripts/build-perf.sh) for `make bench`, as /usr/bin/perf.
[ -z "${PERF:-}" ] || install -m 0755 "$PERF" "$root/usr/bin/perf"
# The test module (make testmod) built for the same kernel variant ($KVARIANT), for
# MODULE_LOADED and module attribution checks.
read -r _ kmoddir < <(mod_dirs "$KVARIANT")
[ ! -f "$kmoddir/optest.ko" ] || install -m 0644 "$kmoddir/optest.ko" "$root/optest.ko"
install -m 0755 "$REPO"/tests/guest/*.sh "$root/tests/"
[ -z "$opsetup" ] || install -m 0644 "$opsetup" "$root/tests/opsetup.sh"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
# Without `opscript=` (a board booted by scripts/image.sh's boot.scr), /init runs a shell on the
# console instead.
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
script=$(sed -n 's/.*opscript=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -z "$script" ]; then
    # A board (make image): no test script, a shell on the console. mount -t oprofilefs loads
    # the module by its alias fs-oprofilefs through modprobe.
    echo /bin/modprobe > /proc/sys/kernel/modprobe
    echo "== oprofile-rs $(uname -r), $(nproc) CPU(s): shell on the console (modprobe oprofile)"
    while :; do setsid cttyhack sh; done
fi
echo "== oprofile-rs guest: $(uname -r), $(nproc) CPU(s), script '$script'"
if [ -n "$script" ] && [ -f "/tests/$script" ]; then
    sh "/tests/$script"
    echo "== script exit status $?"
else
    echo "== no such script: '$script'"
fi
echo "== guest done"
reboot -f
INIT
chmod 0755 "$root/init"
pack_cpio "$root" "$out"
