#!/usr/bin/env bash
# Install every host package oprofile-rs needs, from Debian bookworm only.
#
# Idempotent: each step checks whether its result is already present.
# Rules (see DEVELOPERS.md): bookworm + bookworm-backports for qemu; trixie-backports is added with
# an apt pin of priority 1 and used ONLY for `apt-get download linux-source-7.3` (never install from
# it: that once replaced libc on a test machine).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root() { [ "$(id -u)" = 0 ] || die "run as root (apt-get install)"; }

APT_PKGS=(rustc-web rust-web-src rust-web-clippy clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc cpio
          libelf-dev libssl-dev kmod gcc-arm-linux-gnueabihf libc6-dev-armhf-cross gcc-aarch64-linux-gnu libc6-dev-arm64-cross device-tree-compiler xz-utils
          python3 pyflakes3 ca-certificates
          mtools u-boot-tools fdisk dkms   # make image (FAT, boot.scr, sfdisk), the DKMS test
          time                             # make bench: /usr/bin/time (wall time, peak RSS)
          golang-go                        # `go tool pprof`: the pprof output test (src/tests/pprof.rs)
          debuginfod)                      # a real debuginfod server: crates/oprof/tests/debuginfod.rs

sources_ok() {
    grep -rqs 'bookworm-backports' /etc/apt/sources.list.d/ &&
    grep -rqs 'trixie-backports' /etc/apt/sources.list.d/ &&
    [ -f /etc/apt/preferences.d/oprofile-rs-trixie ] &&
    dpkg --print-foreign-architectures | grep -qx armhf &&
    dpkg --print-foreign-architectures | grep -qx arm64
}

add_sources() {
    need_root
    step "apt sources: bookworm-backports, trixie-backports (pin 1), armhf, arm64"
    cat > /etc/apt/sources.list.d/oprofile-rs.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie-backports
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    # Priority 1: never chosen for installs, only reachable by explicit `apt-get download`.
    cat > /etc/apt/preferences.d/oprofile-rs-trixie <<'PIN'
Package: *
Pin: release n=trixie-backports
Pin-Priority: 1

Package: *
Pin: release n=trixie
Pin-Priority: 1
PIN
    dpkg --add-architecture armhf
    dpkg --add-architecture arm64
    APT_UPDATED=0
}

APT_UPDATED=0
# A mirror mid-sync makes single index files fail ("File has unexpected size"); retry, then go on
# with what was fetched: a package that is really missing fails loudly at install/download time.
apt_update() {
    [ "$APT_UPDATED" = 1 ] && return 0
    local i
    for i in 1 2 3; do
        step "apt-get update (try $i)"
        if apt-get update -qq; then APT_UPDATED=1; return 0; fi
        sleep 10
    done
    step "warning: apt-get update reported errors; continuing with the lists it fetched"
    APT_UPDATED=1
}

missing_pkgs() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
    done
}

main() {
    sources_ok || add_sources
    local miss
    miss=$(missing_pkgs "${APT_PKGS[@]}")
    if [ -n "$miss" ]; then
        need_root; apt_update
        step "apt-get install $(echo $miss)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $miss
    fi
    # Debian's armhf and arm64 Rust std (same version as rustc-web) for the static target oprof
    # (make target-tools); needs the architectures added above.
    miss=$(missing_pkgs libstd-rust-web-dev:armhf libstd-rust-web-dev:arm64)
    if [ -n "$miss" ]; then
        need_root; apt_update
        step "apt-get install $miss"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $miss
    fi
    if [ -z "$(missing_pkgs qemu-system-arm)" ] && qemu-system-arm --version | grep -q 'version 10'; then :; else
        need_root; apt_update
        step "apt-get install -t bookworm-backports qemu-system-arm"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -t bookworm-backports qemu-system-arm
    fi
    # qemu-user (qemu-arm): runs armhf test programs on the host; the unwinder's tests
    # (crates/oprof/src/resolve/unwind/tests.rs) capture real stacks with it. Same version as above.
    if [ -z "$(missing_pkgs qemu-user)" ] && qemu-arm --version | grep -q 'version 10'; then :; else
        need_root; apt_update
        step "apt-get install -t bookworm-backports qemu-user"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -t bookworm-backports qemu-user
    fi
    # bindgen-cli: the kernel needs >= 0.71.1; bookworm ships 0.60.
    if ! "$BINDGEN" --version 2>/dev/null | grep -q '0\.72\.1'; then
        step "cargo install bindgen-cli 0.72.1"
        cargo install --locked --root "$CACHE/bindgen" bindgen-cli@0.72.1
    fi
    # Guest userland of each architecture (armhf: ARMv7 boards, arm64: virt-a53, imx8mp-evk),
    # downloaded and unpacked (not installed) into the cache: busybox-static, and Debian's glibc
    # (libc6) with its debug files (libc6-dbg, the same version: found by build-id). The cross
    # toolchains' libc6-*-cross have no debug package.
    local a bb libc
    for a in armhf arm64; do
        bb=$CACHE/busybox; libc=$CACHE/$a-libc
        [ "$a" = armhf ] || bb=$CACHE/busybox-$a
        if [ ! -x "$bb/bin/busybox" ]; then
            apt_update
            step "apt-get download busybox-static:$a"
            local d; d=$(mktemp -d)
            (cd "$d" && apt-get download -qq "busybox-static:$a")
            dpkg-deb -x "$d"/busybox-static_*_"$a".deb "$d/x"
            rm -rf "$bb"; install -D -m 0755 "$d/x/bin/busybox" "$bb/bin/busybox"
            rm -rf "$d"
        fi
        if [ ! -f "$libc/.complete" ]; then
            apt_update
            step "apt-get download libc6:$a libc6-dbg:$a"
            local d; d=$(mktemp -d)
            (cd "$d" && apt-get download -qq "libc6:$a" "libc6-dbg:$a")
            rm -rf "$libc"; mkdir -p "$libc"
            dpkg-deb -x "$d"/libc6_*_"$a".deb "$libc"
            dpkg-deb -x "$d"/libc6-dbg_*_"$a".deb "$libc"
            touch "$libc/.complete"
            rm -rf "$d"
        fi
    done
    # Kernel source: linux-source-7.3 from trixie-backports, downloaded only.
    if [ ! -f "$KSRC/Makefile" ]; then
        apt_update
        step "apt-get download linux-source-$KVER (trixie-backports, pinned 1)"
        local d; d=$(mktemp -d)
        (cd "$d" && apt-get download -qq -t trixie-backports "linux-source-$KVER")
        dpkg-deb -x "$d"/linux-source-"$KVER"_*.deb "$d/x"
        step "extracting linux-source-$KVER"
        mkdir -p "$CACHE/src"; rm -rf "$KSRC.tmp"; mkdir -p "$KSRC.tmp"
        tar -C "$KSRC.tmp" --strip-components=1 -xf "$d"/x/usr/src/linux-source-"$KVER".tar.*
        mv "$KSRC.tmp" "$KSRC"
        rm -rf "$d"
    fi
    step "host setup complete"
}
main "$@"
