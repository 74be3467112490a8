# Shared settings for scripts/ (sourced, not run).
# Everything built outside the repo lives under $CACHE so a fresh clone reuses it.
KVER=${KVER:-7.3}
CACHE=${OPROFILE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oprofile-rs}
KSRC=${KSRC:-$CACHE/src/linux-source-$KVER}
BINDGEN=${BINDGEN:-$CACHE/bindgen/bin/bindgen}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The kernel's Rust must be Debian's rustc-web (1.96), not rustup's; clang/lld from llvm-19.
export PATH=/usr/lib/llvm-19/bin:$PATH
export LIBCLANG_PATH=/usr/lib/llvm-19/lib
# The guest kernel variant (scripts/build-kernel.sh): plain, or debug (lockdep, KFENCE, kmemleak,
# UBSAN, ...). A module must be built against the tree it is loaded into: see mod_dirs.
KVARIANT=${KVARIANT:-plain}
# The guest architecture: arm (ARMv7: realview-pb-a8, virt-a15, imx51-evk) or arm64 (virt-a53,
# imx8mp-evk); board_arch names a board's. Everything below that differs between the two follows
# KARCH: the kernel's ARCH, the cross toolchain, Debian's multiarch name and the oprof target.
KARCH=${KARCH:-arm}
board_arch() {
    case "$1" in virt-a53|imx8mp-evk) echo arm64 ;; *) echo arm ;; esac
}
# karch_vars: the settings of $KARCH (run here, and again by use_board).
karch_vars() {
    case "$KARCH" in
    arm)   CROSS=arm-linux-gnueabihf- DEB_ARCH=armhf TARGET_TRIPLE=armv7-unknown-linux-gnueabihf
           KIMAGE=arch/arm/boot/zImage QEMU_SYSTEM=qemu-system-arm ;;
    arm64) CROSS=aarch64-linux-gnu- DEB_ARCH=arm64 TARGET_TRIPLE=aarch64-unknown-linux-gnu
           KIMAGE=arch/arm64/boot/Image QEMU_SYSTEM=qemu-system-aarch64 ;;
    *) echo "error: unknown KARCH '$KARCH' (arm or arm64)" >&2; exit 1 ;;
    esac
    # Debian's glibc for the guest and its debug files (libc6:DEB_ARCH + libc6-dbg:DEB_ARCH,
    # unpacked by scripts/setup-host.sh): GUEST_LIBC/usr/lib/debug is the host's --debug-dir for
    # it; GUEST_LIBDIR its multiarch directory. The guest's busybox (busybox-static:DEB_ARCH).
    GUEST_LIBC=$CACHE/$DEB_ARCH-libc
    GUEST_LIBDIR=$GUEST_LIBC/lib/${CROSS%-}
    BUSYBOX=$CACHE/busybox/bin/busybox
    [ "$KARCH" = arm ] || BUSYBOX=$CACHE/busybox-$KARCH/bin/busybox
    KMAKE_VARS=(ARCH="$KARCH" LLVM=1 RUSTC=/usr/bin/rustc HOSTRUSTC=/usr/bin/rustc
                RUSTDOC=/usr/bin/rustdoc BINDGEN="$BINDGEN")
    # `make target-tools`: the static oprof the guest runs as /usr/bin/oprof.
    OPROF_TARGET=$REPO/target/$TARGET_TRIPLE/release/oprof
}
karch_vars
# use_board BOARD: KARCH (exported, for scripts/build-kernel.sh and the other scripts run from
# here) and its settings from the board's architecture.
use_board() {
    KARCH=$(board_arch "$1"); export KARCH
    karch_vars
}

_T0=${_T0:-$(date +%s)}
step() { printf '[oprofile-rs %4ss] %s\n' "$(( $(date +%s) - _T0 ))" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# log_stream LOG MARK OUT: decodes the base64 block a guest script printed between "== MARK begin"
# and "== MARK end" in its serial LOG (CRLF-safe) into OUT. Fails if there is none or it does not
# decode (OUT is then empty or partial).
log_stream() {
    local b64
    b64=$(sed -n "/^== $2 begin/,/^== $2 end/p" "$1" | tr -d '\r' | grep -aE '^[A-Za-z0-9+/=]+$') || { : > "$3"; return 1; }
    printf '%s\n' "$b64" | base64 -d > "$3"
}

# log_block LOG MARK OUT: the text lines a guest script printed between "== MARK begin" and
# "== MARK end" (CR stripped) into OUT. Fails if the block is missing.
log_block() {
    grep -aq "^== $2 begin" "$1" || { : > "$3"; return 1; }
    sed -n "/^== $2 begin/,/^== $2 end/{/^== $2 /d;p}" "$1" | tr -d '\r' > "$3"
}

# pack_cpio ROOT OUT: the tree ROOT as a gzip'd newc cpio archive OUT (an initramfs).
pack_cpio() {
    (cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -9n) > "$2"
}

# mod_dirs VARIANT: the directories oprofile.ko and tests/kmod/optest.ko for VARIANT's kernel are
# built in (Kbuild's MO=, so the variants' objects do not overwrite each other; the Makefile).
# arm64's are build/arm64-VARIANT.
mod_dirs() {
    local d=$1; [ "$KARCH" = arm ] || d=$KARCH-$1
    echo "$REPO/build/$d $REPO/build/$d/kmod"
}

# For the Makefile: `bash scripts/lib.sh --bindgen` prints the bindgen path,
# `bash scripts/lib.sh --mod-dirs VARIANT` the two module directories (for $KARCH),
# `--board-arch BOARD` the board's KARCH, `--target-triple` the target oprof's Rust target and
# `--cross` the cross toolchain's prefix.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case "${1:-}" in
    --bindgen) echo "$BINDGEN" ;; --mod-dirs) mod_dirs "$2" ;; --board-arch) board_arch "$2" ;;
    --target-triple) echo "$TARGET_TRIPLE" ;; --cross) echo "$CROSS" ;;
    esac
fi
