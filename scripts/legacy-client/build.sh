#!/usr/bin/env bash
# Builds OProfile 0.9.9's legacy client (opcontrol, oprofiled, opreport, ophelp,
# op-check-perfevents and the ARM event files) static for armhf and packs it with the by-hand
# guest script (legacy-client.sh) as a cpio overlay for the guest initramfs
# (Documentation/legacy-client.rst, "Running the real 0.9.9 client"). By hand: not part of make
# check.
# Usage: [VMLINUX=FILE] build.sh SOURCE OUT
#   SOURCE: OProfile's git repository (a clone or mirror with the tag RELEASE_0_9_9, e.g.
#           github.com/marcusmueller/oprofile) or the release tarball oprofile-0.9.9.tar.gz.
#   OUT:    a work directory (created): OUT/src (the build), OUT/sysroot (Debian bookworm's armhf
#           popt, binutils-dev, libiberty-dev, zlib and zstd, unpacked), OUT/root (the files for
#           the guest) and OUT/overlay.cpio.gz (OUT/root packed).
#   VMLINUX: the guest kernel's vmlinux, for opcontrol --vmlinux: OUT/vmlinux.cpio.gz too.
# Needs (Debian bookworm, host amd64 with `dpkg --add-architecture armhf`): gcc-arm-linux-gnueabihf,
# g++-arm-linux-gnueabihf, autoconf, automake, libtool (for a git SOURCE), cpio.
# 0.9.9 predates binutils 2.34's section accessor changes (bfd_section_size(abfd, sec) ->
# (sec), bfd_get_section_flags removed, bfd_octets_per_byte's section argument):
# oprofile-0.9.9-bfd.patch. Its C++ is C++98 (dynamic exception specifications, `bool b = cverb
# << ...` through operator void*): -std=gnu++98. Bookworm's libbfd.a also needs libsframe, zstd
# and zlib.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$1 out=$2
CROSS=arm-linux-gnueabihf-
mkdir -p "$out"
out=$(cd "$out" && pwd)
sr=$out/sysroot lib=$out/sysroot/usr/lib/arm-linux-gnueabihf

# Debian bookworm's armhf libraries, unpacked (never installed: they are another architecture's).
pkgs=(libpopt-dev libpopt0 binutils-dev libiberty-dev zlib1g-dev libzstd-dev)
if [ ! -f "$sr/.done" ]; then
    rm -rf "$sr" "$out/debs"; mkdir -p "$out/debs"
    (cd "$out/debs" && apt-get download "${pkgs[@]/%/:armhf}")
    for d in "$out"/debs/*.deb; do dpkg -x "$d" "$sr"; done
    touch "$sr/.done"
fi

# The source, checked to be 0.9.9, patched.
rm -rf "$out/src"; mkdir -p "$out/src"
if [ -d "$src" ]; then
    git -C "$src" archive RELEASE_0_9_9 | tar x -C "$out/src"
else
    tar xf "$src" -C "$out/src" --strip-components=1
fi
cd "$out/src"
grep -q 'AC_INIT(\[OProfile\], \[0.9.9\])' configure.ac ||
    { echo "not OProfile 0.9.9: $(grep AC_INIT configure.ac)" >&2; exit 1; }
patch -p1 < "$here/oprofile-0.9.9-bfd.patch"
[ -x configure ] || ./autogen.sh > "$out/autogen.log" 2>&1 ||
    { echo "autogen.sh failed: $out/autogen.log" >&2; exit 1; }
./configure --host=arm-linux-gnueabihf --prefix=/usr --disable-gui --without-x \
    CPPFLAGS="-I$sr/usr/include -I$sr/usr/include/arm-linux-gnueabihf" \
    LDFLAGS="-L$lib" LIBS="-lsframe -lzstd -lz" CXXFLAGS="-g -O2 -std=gnu++98" \
    > "$out/configure.log" 2>&1 || { echo "configure failed: $out/configure.log" >&2; exit 1; }
# Static programs: libtool's -all-static (its -static keeps glibc shared), plain -static for
# oprofiled (daemon/Makefile.am links it with $(CC)). LIBS: configure's with bfd's own needs.
for d in libutil libop libdb libutil++ libopt++ libabi daemon utils libregex libpp pp; do
    static=-all-static; [ $d != daemon ] || static=-static
    nice -n 19 make -j1 -C "$d" LDFLAGS="-L$lib $static" \
        LIBS="-lpopt -lbfd -liberty -lsframe -lzstd -lz -ldl" > "$out/make-$d.log" 2>&1 ||
        { echo "make -C $d failed: $out/make-$d.log" >&2; exit 1; }
done

# The guest's files: /usr/bin (opcontrol finds its programs beside itself), the event files of
# /usr/share/oprofile/arm (OP_DATADIR), opcontrol's /usr/bin/which and /usr/bin/dirname (busybox),
# the guest script as /tests/legacy-client.sh. opcontrol (#!/bin/sh) runs under busybox sh.
root=$out/root
rm -rf "$root"; mkdir -p "$root"/{usr/bin,usr/share/oprofile,tests}
install -m 0755 utils/opcontrol "$root/usr/bin/"
for p in daemon/oprofiled pp/opreport utils/ophelp utils/op-check-perfevents; do
    file -b "$p" | grep -q 'statically linked' || { echo "$p is not static" >&2; exit 1; }
    "${CROSS}strip" -o "$root/usr/bin/${p#*/}" "$p"
done
cp -r events/arm "$root/usr/share/oprofile/"
ln -s ../../bin/busybox "$root/usr/bin/which"
ln -s ../../bin/busybox "$root/usr/bin/dirname"
install -m 0755 "$here/legacy-client.sh" "$root/tests/"
pack() { (cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -9n) > "$2"; }
pack "$root" "$out/overlay.cpio.gz"
# VMLINUX (env, optional): the guest kernel's vmlinux without its debug info as /vmlinux, for
# `opcontrol --setup --vmlinux`, with the range opcontrol would take from `objdump -h` and
# `objdump -t` (start of .text, _etext; the guest has no objdump) in /tests/kernel-range: a
# second overlay, OUT/vmlinux.cpio.gz.
if [ -n "${VMLINUX:-}" ]; then
    rm -rf "$out/vmlinux-root"; mkdir -p "$out/vmlinux-root/tests"
    "${CROSS}strip" --strip-debug -o "$out/vmlinux-root/vmlinux" "$VMLINUX"
    start=$("${CROSS}objdump" -h "$VMLINUX" | awk '$2 == ".text" { print $4 }')
    end=$("${CROSS}objdump" -t "$VMLINUX" | awk '$NF == "_etext" { print $1 }')
    [ -n "$start" ] && [ -n "$end" ] || { echo "no .text or _etext in $VMLINUX" >&2; exit 1; }
    echo "$start,$end" > "$out/vmlinux-root/tests/kernel-range"
    pack "$out/vmlinux-root" "$out/vmlinux.cpio.gz"
    echo "$out/vmlinux.cpio.gz"
fi
echo "$out/overlay.cpio.gz"
