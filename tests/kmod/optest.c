// SPDX-License-Identifier: GPL-2.0
/*
 * optest.ko: a kernel module for the oprofile-rs tests. Loading it while profiling must emit
 * MODULE_LOADED, and its init runs `spin_rounds` (default 12000) rounds of 10,000 multiply-adds in
 * optest_spin() (about 0.6 s under QEMU TCG; a fixed amount of work, not of time, so that its
 * share of a busy host's samples does not depend on how long the vCPU was descheduled), so
 * the report must attribute kernel samples to optest.ko's optest_spin symbol through the
 * module's section addresses (/sys/module/optest/sections).
 *
 * `make bench` (P3) also loads it for bare sampling interrupts, the reference for the module's
 * per-sample cost: with bare_period=N, one CPU_CYCLES perf event per online CPU overflows every
 * N cycles into a handler that does nothing but count and time itself; with bare_hz=F, one
 * pinned hrtimer per online CPU fires F times a second (timer mode's interrupt) into the same
 * empty handler. The handler is timed with ktime_get_ns(), the clock of the module's profile
 * points (`sample_handler`). Read-only parameters: bare_count (handler runs), bare_ns (their
 * total time, ns). The events and timers stop at rmmod.
 *
 * With irqoff_ms=M its init also holds local interrupts off for M ms (at most 1000), spinning on
 * ktime_get_ns(), so that every periodic interrupt of that CPU comes late: timer mode's missed
 * ticks (stats/cpuN/sample_lost_overrun, events.sh). Read-only parameter irqoff_ns: the time
 * measured with interrupts off (a lower bound of the span they were held off).
 */
#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/cpu.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/smp.h>
#include <linux/sysfs.h>

static unsigned int spin_rounds = 12000;
module_param(spin_rounds, uint, 0444);
MODULE_PARM_DESC(spin_rounds, "rounds of 10,000 multiply-adds run by optest_spin() at load");

static unsigned int optest_sink;

static noinline void optest_spin(unsigned int rounds)
{
	unsigned int x = READ_ONCE(optest_sink);

	while (rounds--) {
		for (int i = 0; i < 10000; i++)
			x = x * 1103515245u + 12345u;
		cond_resched();
	}
	WRITE_ONCE(optest_sink, x);
}

static unsigned long bare_period;
module_param(bare_period, ulong, 0444);
MODULE_PARM_DESC(bare_period, "CPU_CYCLES sampling period of the bare perf events (0: none)");
static unsigned int bare_hz;
module_param(bare_hz, uint, 0444);
MODULE_PARM_DESC(bare_hz, "rate of the bare per-CPU hrtimers, Hz (0: none; at most 100000)");

static atomic64_t bare_count = ATOMIC64_INIT(0);
static atomic64_t bare_ns = ATOMIC64_INIT(0);

static int bare_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", (long long)atomic64_read(kp->arg));
}

static const struct kernel_param_ops bare_ops = { .get = bare_get };
module_param_cb(bare_count, &bare_ops, &bare_count, 0444);
MODULE_PARM_DESC(bare_count, "bare handler runs");
module_param_cb(bare_ns, &bare_ops, &bare_ns, 0444);
MODULE_PARM_DESC(bare_ns, "total time in the bare handler, ns (ktime_get_ns)");

static unsigned int irqoff_ms;
module_param(irqoff_ms, uint, 0444);
MODULE_PARM_DESC(irqoff_ms, "ms the init spends with local interrupts off (0: none; at most 1000)");
static atomic64_t irqoff_ns = ATOMIC64_INIT(0);
module_param_cb(irqoff_ns, &bare_ops, &irqoff_ns, 0444);
MODULE_PARM_DESC(irqoff_ns, "ns measured with interrupts off at init (ktime_get_ns)");

/* Holds this CPU's interrupts off for irqoff_ms, measured from after they are off to before
 * they are on again. */
static void irqoff_spin(void)
{
	unsigned long flags;
	u64 t0, t;

	local_irq_save(flags);
	t0 = ktime_get_ns();
	do {
		cpu_relax();
		t = ktime_get_ns();
	} while (t - t0 < (u64)irqoff_ms * NSEC_PER_MSEC);
	local_irq_restore(flags);
	atomic64_set(&irqoff_ns, t - t0);
}

/* The whole bare handler: count, timed with the profile points' clock. */
static void bare_tick(void)
{
	u64 t0 = ktime_get_ns();

	atomic64_inc(&bare_count);
	atomic64_add(ktime_get_ns() - t0, &bare_ns);
}

static DEFINE_PER_CPU(struct perf_event *, bare_event);
static DEFINE_PER_CPU(struct hrtimer, bare_timer);
static bool bare_timers_started;

static void bare_overflow(struct perf_event *event, struct perf_sample_data *data, struct pt_regs *regs)
{
	bare_tick();
}

static enum hrtimer_restart bare_timer_fn(struct hrtimer *t)
{
	bare_tick();
	hrtimer_forward_now(t, ns_to_ktime(NSEC_PER_SEC / bare_hz));
	return HRTIMER_RESTART;
}

static void bare_timer_start(void *unused)
{
	hrtimer_start(this_cpu_ptr(&bare_timer), ns_to_ktime(NSEC_PER_SEC / bare_hz), HRTIMER_MODE_REL_PINNED);
}

static void bare_stop(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		struct perf_event **e = per_cpu_ptr(&bare_event, cpu);

		if (*e) {
			perf_event_release_kernel(*e);
			*e = NULL;
		}
		if (bare_timers_started)
			hrtimer_cancel(per_cpu_ptr(&bare_timer, cpu));
	}
	bare_timers_started = false;
}

static int bare_start(void)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.config = PERF_COUNT_HW_CPU_CYCLES,
		.size = sizeof(attr),
		.sample_period = bare_period,
		.pinned = 1,
	};
	int cpu;

	if (bare_hz > 100000)
		return -EINVAL;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct perf_event *e;

		if (!bare_period)
			break;
		e = perf_event_create_kernel_counter(&attr, cpu, NULL, bare_overflow, NULL);
		if (IS_ERR(e)) {
			cpus_read_unlock();
			bare_stop();
			return PTR_ERR(e);
		}
		*per_cpu_ptr(&bare_event, cpu) = e;
	}
	if (bare_hz) {
		/* Cancelled for every possible CPU at stop: set them all up first. */
		for_each_possible_cpu(cpu)
			hrtimer_setup(per_cpu_ptr(&bare_timer, cpu), bare_timer_fn, CLOCK_MONOTONIC,
				      HRTIMER_MODE_REL_PINNED);
		bare_timers_started = true;
		on_each_cpu(bare_timer_start, NULL, 1);
	}
	cpus_read_unlock();
	return 0;
}

static int __init optest_init(void)
{
	if (irqoff_ms > 1000)
		return -EINVAL;
	optest_spin(spin_rounds);
	if (irqoff_ms)
		irqoff_spin();
	return bare_start();
}

static void __exit optest_exit(void)
{
	bare_stop();
}

module_init(optest_init);
module_exit(optest_exit);
MODULE_DESCRIPTION("oprofile-rs test module: MODULE_LOADED, module symbol attribution, bare sampling interrupts, interrupts held off");
MODULE_LICENSE("GPL");
