/* SPDX-License-Identifier: GPL-2.0 */
/* The kprof bridge (kprof_shim.c), as declared on the Rust side in bridge.rs. */
#ifndef OPROFILE_KPROF_SHIM_H
#define OPROFILE_KPROF_SHIM_H

int oprofile_shim_kprof_map(unsigned long map[4]);

#endif
