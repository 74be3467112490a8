#!/usr/bin/env bash
# Build (or reuse) `perf` for the ARMv7 guest, the peer of `make bench`: tools/perf of the Linux
# 7.3 source tree, cross-compiled for armhf, static, minimal features (no python/perl/gtk,
# libtraceevent, libelf, libdw, libunwind, BPF...), as far as `perf record` and `perf report
# --stdio` work (kernel symbols from /proc/kallsyms). Verified recipe: /work/shared/notes/
# perf-armhf.md; only the `perf` target (`all` also links test .so filters, which fail with
# -static).
#
# Cached under $CACHE/perf/<key>, key = kernel version + hash of this script and the cross gcc
# version; a present, complete build is reused, an absent one is rebuilt (about 4 minutes on 2
# cores). Prints the path of the stripped binary on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -f "$KSRC/tools/perf/Makefile.perf" ] || die "kernel source missing at $KSRC: run scripts/setup-host.sh"
CROSS=arm-linux-gnueabihf-
command -v ${CROSS}gcc >/dev/null || die "${CROSS}gcc missing: run scripts/setup-host.sh"
key=$( { echo "$KVER"; cat "$0"; ${CROSS}gcc --version | head -1; } | sha256sum | cut -c1-16)
POUT=$CACHE/perf/$KVER-$key
if [ -f "$POUT/.oprofile-rs-complete" ]; then echo "$POUT/perf"; exit 0; fi

rm -rf "$POUT"; mkdir -p "$POUT/build"
step "perf: building a static armhf perf from $KSRC/tools/perf into $POUT (a few minutes)"
t=$(date +%s)
no=(NO_RUST=1 NO_LIBELF=1 NO_LIBTRACEEVENT=1 NO_JEVENTS=1 NO_LIBPYTHON=1 NO_LIBPERL=1 NO_SLANG=1
    NO_GTK2=1 NO_LIBNUMA=1 NO_LIBUNWIND=1 NO_LIBDW=1 NO_LIBBPF=1 NO_LIBCAP=1 NO_LIBBABELTRACE=1
    NO_LIBZSTD=1 NO_LIBLZMA=1 NO_LIBCRYPTO=1 NO_LIBDEBUGINFOD=1 NO_LIBPFM4=1 NO_SDT=1
    NO_AUXTRACE=1 NO_BPF_SKEL=1 NO_LIBLLVM=1 NO_CAPSTONE=1 NO_DEMANGLE=1)
# tools/perf writes feature-detection files next to its sources unless O= is given; the source
# tree is shared, so everything goes to $POUT/build.
make -C "$KSRC/tools/perf" -j"$(nproc)" -f Makefile.perf ARCH=arm CROSS_COMPILE=$CROSS LDFLAGS=-static \
    O="$POUT/build" "${no[@]}" "$POUT/build/perf" >"$POUT/build.log" 2>&1 ||
    { tail -40 "$POUT/build.log" >&2; die "perf build failed (log: $POUT/build.log)"; }
${CROSS}strip -o "$POUT/perf" "$POUT/build/perf"
file "$POUT/perf" | grep -q 'ARM.*statically linked' || die "perf: $POUT/perf is not a static ARM binary"
rm -rf "$POUT/build"
step "perf: built in $(( $(date +%s) - t ))s"
touch "$POUT/.oprofile-rs-complete"
echo "$POUT/perf"
