# SPDX-License-Identifier: GPL-2.0
# oprofile-rs. `make` builds oprofile.ko against the cached Linux 7.3 ARMv7 tree (set up and built
# on first use); `make run` profiles a workload in QEMU; `make check` runs every test.
#
# Variables: KDIR (kernel build tree; default: the cached tree from scripts/build-kernel.sh),
# ARCH=arm LLVM=1 RUSTC=/usr/bin/rustc (the kernel's toolchain), BOARD, EVENT (see README).

ARCH  ?= arm
LLVM  ?= 1
RUSTC ?= /usr/bin/rustc
KMAKE  = $(MAKE) -C "$$kdir" M=$(CURDIR) ARCH=$(ARCH) LLVM=$(LLVM) RUSTC=$(RUSTC) \
         HOSTRUSTC=$(RUSTC) BINDGEN=$$(bash scripts/lib.sh --bindgen)
KDIR_SH = kdir=$${KDIR:-$$(bash scripts/kdir.sh)} && export PATH=/usr/lib/llvm-19/bin:$$PATH &&

.PHONY: all module testmod modules_install rust-analyzer setup kernel host target-tools run check soak test-host test-qemu clean

all: module

module:
	@$(KDIR_SH) $(KMAKE) modules

# tests/kmod/optest.ko: a module the tests load while profiling.
testmod:
	@$(KDIR_SH) $(KMAKE) M=$(CURDIR)/tests/kmod modules

modules_install: module
	@$(KDIR_SH) $(KMAKE) modules_install

rust-analyzer:
	@$(KDIR_SH) $(KMAKE) rust-analyzer

setup:
	@bash scripts/setup-host.sh

kernel: setup
	@bash scripts/build-kernel.sh >/dev/null

host:
	@cargo build --release --locked -q

# oprof for the board: armv7-unknown-linux-gnueabihf, static (crt-static), built by Debian's rustc
# with its armhf std (libstd-rust-web-dev:armhf) and linked by arm-linux-gnueabihf-gcc. Output:
# target/armv7-unknown-linux-gnueabihf/release/oprof (the guest's /usr/bin/oprof).
TARGET_TRIPLE = armv7-unknown-linux-gnueabihf
target-tools:
	@CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc \
	 RUSTFLAGS="-C target-feature=+crt-static" RUSTC=$(RUSTC) \
	 nice cargo build --release --locked -q --target $(TARGET_TRIPLE) -p oprof

run: module testmod host target-tools
	@bash scripts/run.sh

check:
	@bash scripts/check.sh

# 1,000 load/mount/open/enable/disable/close/umount/unload cycles with kprof and every profile
# point on, on both boards (tests/guest/cycles.sh; make check runs 200).
soak: module testmod host
	@GUEST_ARGS="opcycles=1000 opsoak=1" SCRIPTS=cycles QEMU_TIMEOUT=3600 bash tests/run-qemu-tests.sh

test-host:
	@cargo test --locked

test-qemu: module testmod host target-tools
	@bash tests/run-qemu-tests.sh

clean:
	@$(KDIR_SH) $(KMAKE) clean || true
	@$(KDIR_SH) $(KMAKE) M=$(CURDIR)/tests/kmod clean || true
	@rm -rf build
