// SPDX-License-Identifier: GPL-2.0
/*
 * kprof's kernel text bounds: the values Kbuild baked from the build tree's System.map into
 * kprof_text.h (scripts/kprof-text.sh). Missing binding: the header is generated C, which only C
 * can include; modules cannot name _stext/_etext (not exported) and have no
 * kallsyms_lookup_name. bridge.rs and common/kprof.rs decide whether the running kernel is that
 * build and relocate the bounds.
 */
#include <linux/errno.h>

#include "kprof_shim.h"
#include "kprof_text.h"

/**
 * oprofile_shim_kprof_map() - the System.map addresses baked in at build time
 * @map: out: _stext, _etext, _printk and init_task of the build's System.map, in that order
 *
 * Return: 0, or -ENODEV when the module was built without a usable System.map.
 */
int oprofile_shim_kprof_map(unsigned long map[4])
{
#if KPROF_MAP_AVAILABLE
	map[0] = KPROF_MAP_STEXT;
	map[1] = KPROF_MAP_ETEXT;
	map[2] = KPROF_MAP_PRINTK;
	map[3] = KPROF_MAP_INIT_TASK;
	return 0;
#else
	return -ENODEV;
#endif
}
