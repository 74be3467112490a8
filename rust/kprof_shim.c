// SPDX-License-Identifier: GPL-2.0
/*
 * kprof's kernel text bounds. Modules cannot name _stext/_etext (not exported) and have no
 * kallsyms_lookup_name, so Kbuild bakes them from the build tree's System.map into
 * kprof_text.h (scripts/kprof-text.sh). The running kernel must be that build: the load offset
 * of the exported _printk (text) and init_task (data) must agree, and it relocates the bounds
 * (non-zero only with a randomized base).
 */
#include <linux/errno.h>
#include <linux/printk.h>
#include <linux/sched/task.h>

#include "kprof_shim.h"
#include "kprof_text.h"

int oprofile_shim_kprof_text(unsigned long *start, unsigned long *end)
{
#if KPROF_MAP_AVAILABLE
	unsigned long printk_addr = (unsigned long)&_printk;
	unsigned long text_off, data_off;

	if (IS_ENABLED(CONFIG_THUMB2_KERNEL))
		printk_addr &= ~1UL;
	text_off = printk_addr - KPROF_MAP_PRINTK;
	data_off = (unsigned long)&init_task - KPROF_MAP_INIT_TASK;
	if (text_off != data_off) {
		pr_err("oprofile: kprof: System.map of the build does not match this kernel (_printk offset %#lx, init_task offset %#lx)\n",
		       text_off, data_off);
		return -ENODEV;
	}
	*start = KPROF_MAP_STEXT + text_off;
	*end = KPROF_MAP_ETEXT + text_off;
	return 0;
#else
	pr_err("oprofile: kprof: module built without the kernel's System.map: no kernel text bounds\n");
	return -ENODEV;
#endif
}
