#!/usr/bin/env bash
# Build (or reuse) a Linux 7.3 guest kernel: tinyconfig + scripts/kconfig/armv7.config (KARCH=arm,
# the default) or arm64.config (KARCH=arm64), plus debug.config (and debug-arm64.config: KASAN,
# pseudo-NMIs) for the debug variant (lockdep, KFENCE, kmemleak, UBSAN, ...).
# Usage: build-kernel.sh [plain|debug]   (default: $KVARIANT, else plain)
#
# The build tree is cached under $CACHE/kernel/<ver>-<key> (plain) or <ver>-debug-<key> (arm64's:
# <ver>-arm64-<key>, <ver>-arm64-debug-<key>), where
# key = hash of the kernel version, the variant's fragments and this script (without their
# comment lines) and the toolchain versions. A present, complete tree is reused; an absent one is
# rebuilt (plain about 14 CPU-minutes, debug about 16). Prints the tree's path on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

variant=${1:-$KVARIANT}
KC=$REPO/scripts/kconfig
case "$KARCH" in
arm)   FRAGS=("$KC/armv7.config"); DEBUG_FRAGS=("$KC/debug.config"); tag=
       PRODUCTS=(arch/arm/boot/dts/arm/arm-realview-pba8.dtb arch/arm/boot/dts/nxp/imx/imx51-babbage.dtb) ;;
arm64) FRAGS=("$KC/arm64.config"); DEBUG_FRAGS=("$KC/debug.config" "$KC/debug-arm64.config"); tag=arm64-
       PRODUCTS=(arch/arm64/boot/dts/freescale/imx8mp-evk.dtb) ;;
esac
case "$variant" in
plain) ;;
debug) FRAGS+=("${DEBUG_FRAGS[@]}"); tag=${tag}debug- ;;
*) die "unknown kernel variant '$variant' (plain or debug)" ;;
esac
[ -f "$KSRC/Makefile" ] || die "kernel source missing at $KSRC: run scripts/setup-host.sh"
key=$( { echo "$KVER"; grep -hv '^[[:space:]]*#' "${FRAGS[@]}" "$0"; /usr/bin/rustc --version;
         clang --version | head -1; "$BINDGEN" --version; } | sha256sum | cut -c1-16)
KOUT=$CACHE/kernel/$KVER-$tag$key
if [ -f "$KOUT/.oprofile-rs-complete" ]; then echo "$KOUT"; exit 0; fi
# One build per tree: a second caller (another make, a parallel test) waits for the first
# instead of wiping its half-built tree, then reuses it.
mkdir -p "$CACHE/kernel"
exec 9>"$KOUT.lock"
flock 9
if [ -f "$KOUT/.oprofile-rs-complete" ]; then echo "$KOUT"; exit 0; fi

jobs=$(nproc)
step "kernel ($variant): configuring $KOUT"
rm -rf "$KOUT"; mkdir -p "$KOUT"
make -s -C "$KSRC" O="$KOUT" "${KMAKE_VARS[@]}" tinyconfig >&2
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$KOUT" "$KOUT/.config" "${FRAGS[@]}" >&2
make -s -C "$KSRC" O="$KOUT" "${KMAKE_VARS[@]}" olddefconfig >&2
# Every fragment line must survive olddefconfig (a silently dropped symbol breaks the guest); a
# later fragment's line for a symbol replaces an earlier one's, as in merge_config.sh.
bad=0
while IFS= read -r line; do
    case "$line" in CONFIG_*=n) sym=${line%%=*}; grep -q "^$sym=" "$KOUT/.config" && { echo "kconfig: $sym not disabled" >&2; bad=1; } ;;
                    CONFIG_*) grep -qx "$line" "$KOUT/.config" || { echo "kconfig: '$line' did not stick" >&2; bad=1; } ;; esac
done < <(grep -h '^CONFIG_' "${FRAGS[@]}" | awk -F= '{ last[$1] = $0; order[NR] = $1 }
         END { for (i = 1; i <= NR; i++) if (!seen[order[i]]++) print last[order[i]] }')
[ $bad = 0 ] || die "kernel config fragment not satisfied (see above); run 'make -C $KSRC O=$KOUT ARCH=$KARCH menuconfig' to see why"
step "kernel ($variant): building ${KIMAGE##*/}, modules, dtbs with $jobs jobs (a few minutes)"
t=$(date +%s)
make -C "$KSRC" O="$KOUT" "${KMAKE_VARS[@]}" -j"$jobs" "${KIMAGE##*/}" modules dtbs >"$KOUT/build.log" 2>&1 ||
    { tail -40 "$KOUT/build.log" >&2; die "kernel build failed (log: $KOUT/build.log)"; }
step "kernel ($variant): built in $(( $(date +%s) - t ))s"
for f in "$KIMAGE" vmlinux Module.symvers "${PRODUCTS[@]}"; do
    [ -f "$KOUT/$f" ] || die "kernel build did not produce $f"
done
touch "$KOUT/.oprofile-rs-complete"
echo "$KOUT"
