// SPDX-License-Identifier: GPL-2.0
/*
 * C bridge for the perf-counter model (model/perf.rs, through bridge/perf.rs): the kernel crate's bindings lack
 * <linux/perf_event.h>, so this file builds perf_event_attr, creates/reads/releases in-kernel
 * counters and forwards overflows to Rust. It decides nothing.
 *
 * Follows legacy drivers/oprofile/oprofile_perf.c (pinned per-CPU PERF_TYPE_RAW counters,
 * config = event, sample_period = count, overflow -> sample with event = counter index).
 */
#include <linux/bitmap.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/string.h>
#ifdef CONFIG_ARM_PMU
#include <linux/perf/arm_pmu.h>
#endif

#include "perf_shim.h"

/**
 * oprofile_shim_pmu_probe() - describe the perf PMU that counts an event
 * @info: out: its name and capabilities; num_counters -1 unless @is_arm_pmu said yes
 * @type: perf_event_attr.type of the probe event (Rust's choice: PERF_TYPE_HARDWARE)
 * @config: perf_event_attr.config of the probe event (Rust's choice: PERF_COUNT_HW_CPU_CYCLES)
 * @is_arm_pmu: Rust's decision whether a PMU of this name is an arm_pmu (whose counter mask
 *              may be read): the PMUs it has models for
 *
 * Creates the event (pinned, disabled) on the first online CPU and describes the PMU perf
 * gave it to.
 * Missing binding: <linux/perf_event.h> and struct arm_pmu are not in the kernel crate.
 * Context: process context (creates and releases a probe event).
 * Return: 0, or the error of perf_event_create_kernel_counter().
 */
int oprofile_shim_pmu_probe(struct oprofile_pmu_info *info, u32 type, u64 config,
			    bool (*is_arm_pmu)(const char *name))
{
	struct perf_event_attr attr = {
		.type		= type,
		.config		= config,
		.size		= sizeof(attr),
		.pinned		= 1,
		.disabled	= 1,
	};
	struct perf_event *event;
	struct pmu *pmu;

	memset(info, 0, sizeof(*info));
	info->num_counters = -1;
	event = perf_event_create_kernel_counter(&attr, cpumask_first(cpu_online_mask), NULL,
						 NULL, NULL);
	if (IS_ERR(event))
		return PTR_ERR(event);
	pmu = event->pmu;
	strscpy(info->name, pmu->name ? pmu->name : "", sizeof(info->name));
	info->no_exclude = !!(pmu->capabilities & PERF_PMU_CAP_NO_EXCLUDE);
	info->no_interrupt = !!(pmu->capabilities & PERF_PMU_CAP_NO_INTERRUPT);
#ifdef CONFIG_ARM_PMU
	if (is_arm_pmu(info->name))
		info->num_counters = bitmap_weight(to_arm_pmu(pmu)->cntr_mask, ARMPMU_MAX_HWEVENTS);
#endif
	perf_event_release_kernel(event);
	return 0;
}

/*
 * Every overflow goes to Rust, with NULL registers too (which Rust counts as a sample without a
 * valid PC): @regs are the PMU driver's get_irq_regs() (drivers/perf/arm_v7_pmu.c,
 * arm_pmuv3.c), NULL only for an overflow handled outside an interrupt entry. Whether perf has
 * just throttled the event is Rust's reading of hw.interrupts (perf core tells a handler no
 * other way; bridge/perf.rs).
 */
static void oprofile_shim_overflow(struct perf_event *event, struct perf_sample_data *data,
				   struct pt_regs *regs)
{
	oprofile_rust_perf_overflow(event->overflow_handler_context, regs,
				    regs && !user_mode(regs), event->hw.interrupts);
}

/**
 * oprofile_shim_perf_create() - a pinned PERF_TYPE_RAW counter on one CPU
 * @cpu: the CPU
 * @event: perf_event_attr.config, the PMU's event number
 * @period: sample_period in events; 0 counts only (no overflow handler)
 * @exclude_kernel: perf_event_attr.exclude_kernel
 * @exclude_user: perf_event_attr.exclude_user
 * @context: passed to oprofile_rust_perf_overflow() on each overflow; must stay valid until
 *           oprofile_shim_perf_release()
 *
 * Missing binding: perf_event_attr and perf_event_create_kernel_counter().
 * Context: process context.
 * Return: the event, or an ERR_PTR (-ENODEV for an offline CPU; perf's errors).
 */
struct perf_event *oprofile_shim_perf_create(int cpu, u32 event, u64 period,
					     bool exclude_kernel, bool exclude_user, void *context)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_RAW,
		.size		= sizeof(attr),
		.config		= event,
		.sample_period	= period,
		.pinned		= 1,
		.exclude_kernel	= exclude_kernel,
		.exclude_user	= exclude_user,
	};

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return ERR_PTR(-ENODEV);
	return perf_event_create_kernel_counter(&attr, cpu, NULL,
						period ? oprofile_shim_overflow : NULL,
						period ? context : NULL);
}

/**
 * oprofile_shim_perf_read() - the count of a counter
 * @event: a live event of oprofile_shim_perf_create()
 * @enabled: out: ns the event was enabled
 * @running: out: ns it was on the PMU
 *
 * Context: process context (an IPI to the event's CPU).
 * Return: events counted since creation.
 */
u64 oprofile_shim_perf_read(struct perf_event *event, u64 *enabled, u64 *running)
{
	return perf_event_read_value(event, enabled, running);
}

/**
 * oprofile_shim_perf_disable() - stop a counter counting (it stays readable)
 * @event: a live event of oprofile_shim_perf_create()
 */
void oprofile_shim_perf_disable(struct perf_event *event)
{
	perf_event_disable(event);
}

/**
 * oprofile_shim_perf_release() - release a counter
 * @event: a live event of oprofile_shim_perf_create(), not used afterwards
 *
 * Waits for a running overflow handler; after it returns none runs with its context.
 */
void oprofile_shim_perf_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}
