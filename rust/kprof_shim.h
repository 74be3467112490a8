/* SPDX-License-Identifier: GPL-2.0 */
/* The kprof bridge (kprof_shim.c), as declared on the Rust side in kprof.rs. */
#ifndef OPROFILE_KPROF_SHIM_H
#define OPROFILE_KPROF_SHIM_H

/*
 * Kernel text [*start, *end) of the running kernel: _stext and _etext. Returns 0, or -ENODEV
 * when the module was built without the kernel's System.map or against another build.
 */
int oprofile_shim_kprof_text(unsigned long *start, unsigned long *end);

#endif
