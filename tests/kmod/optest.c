// SPDX-License-Identifier: GPL-2.0
/*
 * optest.ko: a kernel module for the oprofile-rs tests. Loading it while profiling must emit
 * MODULE_LOADED, and its init spends `spin_ms` (default 300) milliseconds in optest_spin(), so
 * the report must attribute kernel samples to optest.ko's optest_spin symbol through the
 * module's section addresses (/sys/module/optest/sections).
 */
#include <linux/compiler.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static unsigned int spin_ms = 300;
module_param(spin_ms, uint, 0444);
MODULE_PARM_DESC(spin_ms, "milliseconds spent in optest_spin() at load");

static unsigned int optest_sink;

static noinline void optest_spin(unsigned int ms)
{
	ktime_t end = ktime_add_ms(ktime_get(), ms);
	unsigned int x = READ_ONCE(optest_sink);

	while (ktime_before(ktime_get(), end)) {
		for (int i = 0; i < 10000; i++)
			x = x * 1103515245u + 12345u;
	}
	WRITE_ONCE(optest_sink, x);
}

static int __init optest_init(void)
{
	optest_spin(spin_ms);
	return 0;
}

static void __exit optest_exit(void)
{
}

module_init(optest_init);
module_exit(optest_exit);
MODULE_DESCRIPTION("oprofile-rs test module: MODULE_LOADED and module symbol attribution");
MODULE_LICENSE("GPL");
