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
KMAKE_VARS=(ARCH=arm LLVM=1 RUSTC=/usr/bin/rustc HOSTRUSTC=/usr/bin/rustc
            RUSTDOC=/usr/bin/rustdoc BINDGEN="$BINDGEN")

_T0=${_T0:-$(date +%s)}
step() { printf '[oprofile-rs %4ss] %s\n' "$(( $(date +%s) - _T0 ))" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# `bash scripts/lib.sh --bindgen` prints the bindgen path (for the Makefile).
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = --bindgen ]; then echo "$BINDGEN"; fi
