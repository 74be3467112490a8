#!/usr/bin/env bash
# Builds the guest initramfs: busybox (armhf, static), optool, oprofile.ko and tests/guest/*.sh.
# Usage: initramfs.sh OUT.cpio.gz MODULE.ko [OPSETUP.sh]
#   OPSETUP.sh (optional): counter set-up lines (`oprof setup`), installed as /tests/opsetup.sh.
# /init mounts proc/sys/devtmpfs/tmpfs, then runs the script named by `opscript=` on the kernel
# command line (a file in /tests) and powers off.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=$1 ko=$2 opsetup=${3:-}
[ -f "$ko" ] || die "module not built: $ko"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"   # mktemp -d makes it 0700: the guest "/" must be traversable by non-root
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,tests,etc,root}
install -m 0755 "$CACHE/busybox/bin/busybox" "$root/bin/busybox"
arm-linux-gnueabihf-gcc -static -O2 -Wall -Werror -o "$root/bin/optool" "$REPO/tests/guest/optool.c"
install -m 0644 "$ko" "$root/oprofile.ko"
install -m 0755 "$REPO"/tests/guest/*.sh "$root/tests/"
[ -z "$opsetup" ] || install -m 0644 "$opsetup" "$root/tests/opsetup.sh"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
script=$(sed -n 's/.*opscript=\([^ ]*\).*/\1/p' /proc/cmdline)
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
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -9) > "$out"
