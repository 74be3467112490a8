/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C shims' interface as Rust sees it: scripts/shim-bindings.sh runs the kernel's bindgen on
 * this header (with the kernel build's own bindgen flags) and writes rust/bridge/shim_bindings.rs,
 * the shims' declarations the bridge modules use; make module LINT=1 (make check) checks the committed
 * file is what bindgen makes of these headers now.
 */
#include "sample_shim.h"
#include "perf_shim.h"
#include "kprof_shim.h"
