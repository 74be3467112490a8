#!/usr/bin/env bash
# Build (or reuse) `perf` from the Linux 7.3 source tree, the peer of `make bench`.
# Usage: build-perf.sh [arm|host]
#   arm (default): for the ARMv7 guest, cross-compiled for armhf, static, minimal features (no
#     python/perl/gtk, libtraceevent, libelf, libdw, libunwind, BPF...), as far as `perf record`
#     and `perf report --stdio` work (kernel symbols from /proc/kallsyms). Verified recipe:
#     /work/shared/notes/perf-armhf.md; only the `perf` target (`all` also links test .so
#     filters, which fail with -static); stripped.
#   host: the same features for the host, plus libelf (user symbols from the guest's ELF files),
#     for `perf report` on perf.data recorded in the guest (P4 of make bench).
# Cached under $CACHE/perf/<arch>-<key>, key = kernel version + hash of this script and the
# compiler version; a present, complete build is reused, an absent one is rebuilt (about 3-4
# minutes on 2 cores). Prints the path of the binary on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
arch=${1:-arm}
case $arch in
arm)  CROSS=arm-linux-gnueabihf- ;;
host) CROSS= ;;
*) die "build-perf.sh: unknown arch '$arch' (arm or host)" ;;
esac
[ -f "$KSRC/tools/perf/Makefile.perf" ] || die "kernel source missing at $KSRC: run scripts/setup-host.sh"
command -v ${CROSS}gcc >/dev/null || die "${CROSS}gcc missing: run scripts/setup-host.sh"
key=$( { echo "$KVER $arch"; cat "$0"; ${CROSS}gcc --version | head -1; } | sha256sum | cut -c1-16)
POUT=$CACHE/perf/$arch-$KVER-$key
if [ -f "$POUT/.oprofile-rs-complete" ]; then echo "$POUT/perf"; exit 0; fi

rm -rf "$POUT"; mkdir -p "$POUT/build"
step "perf: building perf ($arch) from $KSRC/tools/perf into $POUT (a few minutes)"
t=$(date +%s)
no=(NO_RUST=1 NO_LIBTRACEEVENT=1 NO_JEVENTS=1 NO_LIBPYTHON=1 NO_LIBPERL=1 NO_SLANG=1
    NO_GTK2=1 NO_LIBNUMA=1 NO_LIBUNWIND=1 NO_LIBDW=1 NO_LIBBPF=1 NO_LIBCAP=1 NO_LIBBABELTRACE=1
    NO_LIBZSTD=1 NO_LIBLZMA=1 NO_LIBCRYPTO=1 NO_LIBDEBUGINFOD=1 NO_LIBPFM4=1 NO_SDT=1
    NO_AUXTRACE=1 NO_BPF_SKEL=1 NO_LIBLLVM=1 NO_CAPSTONE=1 NO_DEMANGLE=1)
if [ "$arch" = arm ]; then
    no+=(NO_LIBELF=1 ARCH=arm CROSS_COMPILE=$CROSS LDFLAGS=-static)
fi
# tools/perf writes feature-detection files next to its sources unless O= is given; the source
# tree is shared, so everything goes to $POUT/build.
make -C "$KSRC/tools/perf" -j"$(nproc)" -f Makefile.perf O="$POUT/build" "${no[@]}" "$POUT/build/perf" \
    >"$POUT/build.log" 2>&1 || { tail -40 "$POUT/build.log" >&2; die "perf build failed (log: $POUT/build.log)"; }
if [ "$arch" = arm ]; then
    ${CROSS}strip -o "$POUT/perf" "$POUT/build/perf"
    ${CROSS}readelf -h "$POUT/perf" | grep -q 'Machine:.*ARM' || die "perf: $POUT/perf is not an ARM binary"
    ! ${CROSS}readelf -l "$POUT/perf" | grep -q INTERP || die "perf: $POUT/perf is not static"
else
    cp "$POUT/build/perf" "$POUT/perf"
fi
[ "$arch" = arm ] || "$POUT/perf" --version >/dev/null || die "perf: $POUT/perf does not run"
rm -rf "$POUT/build"
step "perf: built in $(( $(date +%s) - t ))s"
touch "$POUT/.oprofile-rs-complete"
echo "$POUT/perf"
