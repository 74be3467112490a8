/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The perf bridge of oprofile-rs (perf_shim.c), as declared on the Rust side in bridge/perf.rs.
 * Events cross as struct perf_event pointers (Rust: bridge::perf::KernelCounter).
 */
#ifndef OPROFILE_PERF_SHIM_H
#define OPROFILE_PERF_SHIM_H

#include <linux/types.h>

/* What the kernel's perf PMU for CPU cycles is (filled by oprofile_shim_pmu_probe). */
struct oprofile_pmu_info {
	char name[32];		/* perf PMU name, e.g. "armv7_cortex_a8" */
	int num_counters;	/* arm_pmu counters incl. CCNT, or -1 if unknown */
	bool no_exclude;	/* PERF_PMU_CAP_NO_EXCLUDE: cannot filter kernel/user */
	bool no_interrupt;	/* PERF_PMU_CAP_NO_INTERRUPT: no overflow IRQ described */
};

/*
 * Rust: one overflow of the counter whose slot is @context (interrupt context); @regs may be
 * NULL (then @kernel is false); @interrupts is the event's hw.interrupts (Rust tells a
 * throttled event by it).
 */
struct pt_regs;
struct perf_event;
void oprofile_rust_perf_overflow(void *context, struct pt_regs *regs, bool kernel, u64 interrupts);

int oprofile_shim_pmu_probe(struct oprofile_pmu_info *info, u32 type, u64 config,
			    bool (*is_arm_pmu)(const char *name));
struct perf_event *oprofile_shim_perf_create(int cpu, u32 event, u64 period,
					     bool exclude_kernel, bool exclude_user, void *context);
u64 oprofile_shim_perf_read(struct perf_event *event, u64 *enabled, u64 *running);
void oprofile_shim_perf_disable(struct perf_event *event);
void oprofile_shim_perf_release(struct perf_event *event);

#endif
