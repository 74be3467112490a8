# SPDX-License-Identifier: GPL-2.0
# oprofile-rs. `make` builds build/plain/oprofile.ko against the cached Linux 7.3 ARMv7 tree (set
# up and built on first use); `make run` profiles a workload in QEMU; `make check` runs every test.
#
# Variables: KDIR (kernel build tree; default: the cached tree from scripts/build-kernel.sh),
# KVARIANT (plain, default, or debug: the kernel variant; `make module testmod KVARIANT=debug`
# builds build/debug/oprofile.ko and build/debug/kmod/optest.ko against the debug tree),
# BOARD (the guest board: realview-pb-a8, virt-a15, imx51-evk: ARMv7; virt-a53, imx8mp-evk:
# arm64), KARCH (arm or arm64: the guest architecture when no BOARD is given; default arm),
# LLVM=1 RUSTC=/usr/bin/rustc (the kernel's toolchain), EVENT (see README), DESTDIR, PREFIX,
# INSTALL_MOD_PATH, INSTALL_MOD_DIR (install).
#
# Everything built for the guest follows BOARD: `make module testmod target-tools run
# BOARD=virt-a53` builds build/arm64-plain/oprofile.ko against the arm64 tree and the aarch64
# oprof, and boots virt-a53. The kernel's ARCH is KARCH.

ifneq ($(BOARD),)
KARCH := $(shell bash scripts/lib.sh --board-arch $(BOARD))
endif
KARCH ?= arm
export KARCH BOARD
ARCH  := $(KARCH)
LLVM  ?= 1
RUSTC ?= /usr/bin/rustc
# make CLIPPY=1: the kernel runs clippy on the module with the clippy of its rustc (rust-web-clippy).
CLIPPY_DRIVER ?= /usr/bin/clippy-driver
KVARIANT ?= plain
export KVARIANT
# A module must be built against the tree it is loaded into, so each variant's modules have their
# own Kbuild output directories (MO=, scripts/lib.sh mod_dirs): build/$(KVARIANT) and
# build/$(KVARIANT)/kmod. Kbuild refuses MO= while the source directory holds an in-place build
# (its modules.order): INPLACE_CLEAN removes one left by an older checkout.
MOD_DIRS := $(shell KARCH=$(KARCH) bash scripts/lib.sh --mod-dirs $(KVARIANT))
MO_MAIN := MO=$(word 1,$(MOD_DIRS))
MO_KMOD := MO=$(word 2,$(MOD_DIRS))
KMAKE  = $(MAKE) -C "$$kdir" M=$(CURDIR) ARCH=$(ARCH) LLVM=$(LLVM) RUSTC=$(RUSTC) \
         HOSTRUSTC=$(RUSTC) CLIPPY_DRIVER=$(CLIPPY_DRIVER) BINDGEN=$$(bash scripts/lib.sh --bindgen)
KDIR_SH = kdir=$${KDIR:-$$(bash scripts/kdir.sh)} && export PATH=/usr/lib/llvm-19/bin:$$PATH &&
INPLACE_CLEAN = if [ -f $(1)/modules.order ]; then $(KMAKE) M=$(1) clean; fi &&

# The modules and target oprof of both architectures for kernel variant $(1) (the QEMU suite's
# boards: ARMv7 realview-pb-a8, virt-a15; arm64 virt-a53).
QEMU_ARCH_BUILD = $(MAKE) --no-print-directory module testmod target-tools KARCH=arm KVARIANT=$(1) && \
                  $(MAKE) --no-print-directory module testmod target-tools KARCH=arm64 KVARIANT=$(1)

.PHONY: all module shim-bindings testmod modules_install rust-analyzer setup kernel host target-tools run check soak test-host test-qemu clean

all: module

# make module LINT=1 (make check): the module through the kernel's clippy, warnings as errors.
# Not CLIPPY=1 on make's command line: that would reach a kernel tree built on first use too.
MODULE_LINT = $(if $(filter 1,$(LINT)),CLIPPY=1 KRUSTFLAGS=-Dwarnings)

# With LINT=1 it also checks that rust/bridge/shim_bindings.rs is what bindgen makes of the
# shims' headers with this kernel tree's flags (scripts/shim-bindings.sh --check).
SHIM_BINDINGS_CHECK = $(if $(filter 1,$(LINT)),bash scripts/shim-bindings.sh --check "$$kdir" &&)

module:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)) $(KMAKE) $(MO_MAIN) $(MODULE_LINT) modules && \
	 $(SHIM_BINDINGS_CHECK) true

# Regenerates rust/bridge/shim_bindings.rs after a change to a shim header (rust/*_shim.h).
shim-bindings:
	@$(KDIR_SH) bash scripts/shim-bindings.sh "$$kdir"

# tests/kmod/optest.ko: a module the tests load while profiling.
testmod:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)/tests/kmod) $(KMAKE) M=$(CURDIR)/tests/kmod $(MO_KMOD) modules

.PHONY: install dkms-source image test-image

# Installation: the module goes to $(INSTALL_MOD_PATH)/lib/modules/<release>/$(INSTALL_MOD_DIR)/
# (INSTALL_MOD_PATH defaults to DESTDIR, INSTALL_MOD_DIR to extra) and Kbuild runs depmod there,
# so `modprobe oprofile` finds it; `install` adds the target oprof (make target-tools) as
# $(DESTDIR)$(PREFIX)/bin/oprof when it is built, its man pages (share/man/man1/oprof*.1) and
# its bash completion (share/bash-completion/completions/oprof), written by the host oprof.
PREFIX ?= /usr
INSTALL_MOD_PATH ?= $(DESTDIR)
INSTALL_MOD_DIR ?= extra
# The target oprof of KARCH (make target-tools).
TARGET_TRIPLE := $(shell KARCH=$(KARCH) bash scripts/lib.sh --target-triple)
CROSS := $(shell KARCH=$(KARCH) bash scripts/lib.sh --cross)
OPROF_TARGET = target/$(TARGET_TRIPLE)/release/oprof

modules_install: module
	@$(KDIR_SH) $(KMAKE) $(MO_MAIN) INSTALL_MOD_PATH=$(INSTALL_MOD_PATH) INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) modules_install

install: modules_install
	@if [ -x $(OPROF_TARGET) ]; then install -D -m 0755 $(OPROF_TARGET) "$(DESTDIR)$(PREFIX)/bin/oprof"; \
	 else echo "install: $(OPROF_TARGET) not built (make target-tools): oprof not installed"; fi
	@$(MAKE) --no-print-directory host
	@target/release/oprof generate man "$(DESTDIR)$(PREFIX)/share/man/man1"
	@mkdir -p "$(DESTDIR)$(PREFIX)/share/bash-completion/completions"
	@target/release/oprof generate completions bash > "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/oprof"

# The module's source for DKMS (dkms.conf): $(DESTDIR)/usr/src/oprofile-<version>/.
DKMS_VERSION = $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"$$/\1/p' dkms.conf)
DKMS_SRC = $(DESTDIR)/usr/src/oprofile-$(DKMS_VERSION)
dkms-source:
	@rm -rf "$(DKMS_SRC)" && mkdir -p "$(DKMS_SRC)/scripts"
	@cp Makefile Kbuild dkms.conf "$(DKMS_SRC)/"
	@cp scripts/lib.sh scripts/kdir.sh scripts/kprof-text.sh "$(DKMS_SRC)/scripts/"
	@find rust \( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name '*.lds' \) ! -name kprof_text.h | \
	 cpio -pdm --quiet "$(DKMS_SRC)"

# The SD card image for a board (BOARD=imx51-evk, the default, or imx8mp-evk):
# build/image/BOARD/sdcard.img. The module and the target oprof are built for the board's KARCH.
image:
	@$(MAKE) --no-print-directory module target-tools BOARD=$(or $(BOARD),imx51-evk)
	@bash scripts/image.sh $(or $(BOARD),imx51-evk)

rust-analyzer:
	@$(KDIR_SH) $(KMAKE) rust-analyzer

setup:
	@bash scripts/setup-host.sh

kernel: setup
	@bash scripts/build-kernel.sh >/dev/null

host:
	@cargo build --release --locked -q

# oprof for the board: TARGET_TRIPLE of KARCH (armv7-unknown-linux-gnueabihf or
# aarch64-unknown-linux-gnu), static (crt-static), built by Debian's rustc with its std of the
# architecture (libstd-rust-web-dev:armhf, :arm64) and linked by $(CROSS)gcc. Output:
# target/TARGET_TRIPLE/release/oprof (the guest's /usr/bin/oprof).
TARGET_LINKER_VAR := CARGO_TARGET_$(shell echo $(TARGET_TRIPLE) | tr a-z- A-Z_)_LINKER
target-tools:
	@$(TARGET_LINKER_VAR)=$(CROSS)gcc \
	 RUSTFLAGS="-C target-feature=+crt-static" RUSTC=$(RUSTC) \
	 nice cargo build --release --locked -q --target $(TARGET_TRIPLE) -p oprof

run: module testmod host target-tools
	@bash scripts/run.sh

check:
	@CHECK_KVARIANT_ORIGIN="$(origin KVARIANT)" bash scripts/check.sh

# 1,000 load/mount/open/enable/disable/close/umount/unload cycles with kprof and every profile
# point on, on both boards (tests/guest/cycles.sh; make check runs 200); and CPU hotplug while
# profiling: 20 offline periods of CPU 1 per mode and 150 s per mode of captures racing CPU 1
# going offline and online (tests/guest/hotplug.sh; make check: 3 periods, 3 s).
soak: host
	@$(call QEMU_ARCH_BUILD,plain) && $(call QEMU_ARCH_BUILD,debug)
	@GUEST_ARGS="opcycles=1000 opsoak=1" SCRIPTS="cycles hotplug" QEMU_TIMEOUT=3600 bash tests/run-qemu-tests.sh

# Overhead, losses, per-sample cost and report speed measured against perf, on both boards (not
# part of make check; Documentation/performance.rst). BOARDS, REPS, PARTS: see scripts/bench.sh.
.PHONY: bench
bench: module testmod host target-tools
	@bash scripts/bench.sh

test-host:
	@cargo test --locked

# Without KVARIANT on the command line: plain on every board and debug on virt-a15 and virt-a53,
# so the modules are built for both kernels of both architectures.
test-qemu: host
ifeq ($(origin KVARIANT),file)
	@$(call QEMU_ARCH_BUILD,plain) && $(call QEMU_ARCH_BUILD,debug)
	@KVARIANT= bash tests/run-qemu-tests.sh
else
	@$(call QEMU_ARCH_BUILD,$(KVARIANT))
	@bash tests/run-qemu-tests.sh
endif

# The board image, installation and DKMS (tests/image.sh; part of make check).
test-image: module host target-tools
	@bash tests/image.sh

clean:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)) $(call INPLACE_CLEAN,$(CURDIR)/tests/kmod) true
	@rm -rf build
