/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sample-path bridge of oprofile-rs (sample_shim.c), as declared on the Rust side in
 * bridge/regs.rs, bridge/user.rs and bridge.rs. Registers, tasks, mms and files
 * cross as opaque pointers; every decision is made in Rust.
 */
#ifndef OPROFILE_SAMPLE_SHIM_H
#define OPROFILE_SAMPLE_SHIM_H

#include <linux/types.h>

struct file;
struct mm_struct;
struct pt_regs;
struct workqueue_struct;

/* The mapping a user PC was found in (oprofile_shim_user_lookup_*()). */
struct oprofile_vma {
	unsigned long start;	/* vm_start (FILE) */
	unsigned long end;	/* vm_end (FILE, ANON) */
	unsigned long pgoff;	/* vm_pgoff: file page mapped at start (FILE) */
	bool exec;		/* VM_EXEC (FILE, ANON) */
	bool plain;		/* VM_READ, none of VM_IO|VM_PFNMAP|VM_MIXEDMAP (FILE, ANON) */
};

/* Results of oprofile_shim_user_lookup_*() */
#define OPROFILE_LOOKUP_FILE	0	/* *file referenced, where->start/pgoff set */
#define OPROFILE_LOOKUP_ANON	1	/* anonymous mapping */
#define OPROFILE_LOOKUP_NONE	2	/* no mapping contains pc */
#define OPROFILE_LOOKUP_NO_MM	3	/* the task has no mm */
#define OPROFILE_LOOKUP_RETRY	4	/* mm was being changed: retry under mmap_lock */

struct pt_regs *oprofile_shim_irq_regs(void);
int oprofile_shim_regs_pc(struct pt_regs *regs, unsigned long *pc);

int oprofile_shim_user_lookup_irq(unsigned long pc, struct file **file, struct oprofile_vma *where);
struct file *oprofile_shim_exe_file_irq(void);
int oprofile_shim_user_lookup_mm(struct mm_struct *mm, unsigned long pc, struct file **file,
				 struct oprofile_vma *where);
void oprofile_shim_module_area(unsigned long *start, unsigned long *end);

void oprofile_shim_file_key(struct file *file, unsigned long *dentry, unsigned long *mnt);
int oprofile_shim_file_path(struct file *file, char *buf, int len, int *start);

/* Where the user part of a call chain starts (oprofile_shim_frame_regs() fills pc, fp..cpsr). */
struct oprofile_user_regs {
	unsigned long pc;	/* the user PC the kernel was entered from (entry) */
	unsigned long fp, lr, sp;
	unsigned long cpsr;	/* the user CPSR (its T bit: Thumb state); arm64: PSTATE */
	bool entry;		/* pc is the first user frame */
	bool walk;		/* walk the user frames from fp, lr, sp, cpsr */
};

/* Rust: one executable file mapping (oprofile_shim_exec_maps()); returns false to stop. */
typedef bool (*oprofile_map_fn)(void *ctx, unsigned long start, unsigned long end,
				unsigned long pgoff, struct file *file);

/* Words oprofile_shim_user_regs() writes (common::event::USER_REGS of the native word). */
#ifdef CONFIG_64BIT
#define OPROFILE_USER_REGS	34
#else
#define OPROFILE_USER_REGS	17
#endif
bool oprofile_shim_user_regs(struct pt_regs *regs, unsigned long *out);
int oprofile_shim_exec_maps(struct mm_struct *mm, oprofile_map_fn fn, void *ctx);

unsigned int oprofile_shim_kernel_trace(struct pt_regs *regs, unsigned long *entries,
					unsigned int max, unsigned long *pc);
bool oprofile_shim_frame_regs(struct pt_regs *regs, struct oprofile_user_regs *user);

bool oprofile_shim_in_nmi(void);
struct pt_regs *oprofile_shim_task_user_regs(void);

struct oprofile_irq_work;
struct oprofile_irq_work *oprofile_shim_irq_work_new(void (*fn)(const void *ctx), const void *ctx);
bool oprofile_shim_irq_work_queue(struct oprofile_irq_work *w);
void oprofile_shim_irq_work_sync(struct oprofile_irq_work *w);
void oprofile_shim_irq_work_free(struct oprofile_irq_work *w);

int oprofile_shim_module_notifier_register(const void *ctx, void (*coming)(const void *ctx));
void oprofile_shim_module_notifier_unregister(void);
struct workqueue_struct *oprofile_shim_alloc_wq(void);

#endif
