# SPDX-License-Identifier: GPL-2.0
# oprofile-rs. `make` builds build/plain/oprofile.ko against the cached Linux 7.3 ARMv7 tree (set
# up and built on first use); `make run` profiles a workload in QEMU; `make check` runs every test.
#
# Variables: KDIR (kernel build tree; default: the cached tree from scripts/build-kernel.sh),
# KVARIANT (plain, default, or debug: the kernel variant; `make module testmod KVARIANT=debug`
# builds build/debug/oprofile.ko and build/debug/kmod/optest.ko against the debug tree),
# ARCH=arm LLVM=1 RUSTC=/usr/bin/rustc (the kernel's toolchain), BOARD, EVENT (see README).

ARCH  ?= arm
LLVM  ?= 1
RUSTC ?= /usr/bin/rustc
KVARIANT ?= plain
export KVARIANT
# A module must be built against the tree it is loaded into, so each variant's modules have their
# own Kbuild output directories (MO=, scripts/lib.sh mod_dirs): build/$(KVARIANT) and
# build/$(KVARIANT)/kmod. Kbuild refuses MO= while the source directory holds an in-place build
# (its modules.order): INPLACE_CLEAN removes one left by an older checkout.
MOD_DIRS := $(shell bash scripts/lib.sh --mod-dirs $(KVARIANT))
MO_MAIN := MO=$(word 1,$(MOD_DIRS))
MO_KMOD := MO=$(word 2,$(MOD_DIRS))
KMAKE  = $(MAKE) -C "$$kdir" M=$(CURDIR) ARCH=$(ARCH) LLVM=$(LLVM) RUSTC=$(RUSTC) \
         HOSTRUSTC=$(RUSTC) BINDGEN=$$(bash scripts/lib.sh --bindgen)
KDIR_SH = kdir=$${KDIR:-$$(bash scripts/kdir.sh)} && export PATH=/usr/lib/llvm-19/bin:$$PATH &&
INPLACE_CLEAN = if [ -f $(1)/modules.order ]; then $(KMAKE) M=$(1) clean; fi &&

.PHONY: all module testmod modules_install rust-analyzer setup kernel host run check test-host test-qemu clean

all: module

module:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)) $(KMAKE) $(MO_MAIN) modules

# tests/kmod/optest.ko: a module the tests load while profiling.
testmod:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)/tests/kmod) $(KMAKE) M=$(CURDIR)/tests/kmod $(MO_KMOD) modules

modules_install: module
	@$(KDIR_SH) $(KMAKE) $(MO_MAIN) modules_install

rust-analyzer:
	@$(KDIR_SH) $(KMAKE) rust-analyzer

setup:
	@bash scripts/setup-host.sh

kernel: setup
	@bash scripts/build-kernel.sh >/dev/null

host:
	@cargo build --release --locked -q

run: module testmod host
	@bash scripts/run.sh

check:
	@bash scripts/check.sh

test-host:
	@cargo test --locked

# Without KVARIANT on the command line: plain on both boards and debug on virt-a15, so the
# modules are built for both kernels.
test-qemu: module testmod host
ifeq ($(origin KVARIANT),file)
	@$(MAKE) --no-print-directory module testmod KVARIANT=debug
	@KVARIANT= bash tests/run-qemu-tests.sh
else
	@bash tests/run-qemu-tests.sh
endif

clean:
	@$(KDIR_SH) $(call INPLACE_CLEAN,$(CURDIR)) $(call INPLACE_CLEAN,$(CURDIR)/tests/kmod) true
	@rm -rf build
