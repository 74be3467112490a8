// SPDX-License-Identifier: GPL-2.0
/*
 * C bridge of the sample path: what the Rust `kernel` crate cannot reach (inline mm/VMA/file
 * helpers, the ARM and arm64 unwinders and the user registers, the module notifier, the workqueue). It
 * decides nothing; its Rust faces are bridge/regs.rs, bridge/user.rs and bridge.rs, and the
 * policy (file offsets, the user frame walk, what counts as code) lives in cpu_buffer.rs,
 * buffer_sync.rs and common/sync.rs.
 *
 * User PCs are resolved to (file, offset) at sampling time, in the interrupt, the way uprobes'
 * find_active_uprobe_speculative() looks a VMA up: under RCU inside an mm_lock_seq read section
 * (CONFIG_PER_VMA_LOCK), confirmed afterwards. The sample then holds a file reference, so a later
 * munmap, exec or exit cannot change what it points at (legacy synced on PROFILE_MUNMAP and
 * PROFILE_TASK_EXIT instead; those hooks are gone). When the mm is being changed at that instant
 * the sample holds an mm reference and is resolved under mmap_lock at sync time.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hardirq.h>
#include <linux/irq_work.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/path.h>
#include <linux/ptrace.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <asm/irq_regs.h>
#ifdef CONFIG_ARM
#include <asm/stacktrace.h>
#endif
#include <linux/stacktrace.h>

#include "sample_shim.h"

/**
 * oprofile_shim_irq_regs() - the registers the current interrupt interrupted
 *
 * Missing binding: get_irq_regs() is an arch inline (asm/irq_regs.h).
 * Context: any; meaningful in a hard interrupt.
 * Return: the interrupted registers, or NULL outside an interrupt.
 */
struct pt_regs *oprofile_shim_irq_regs(void)
{
	return get_irq_regs();
}

/**
 * oprofile_shim_regs_pc() - the sampled PC of interrupted registers
 * @regs: interrupted registers, or NULL
 * @pc: out: profile_pc(@regs) (in a lock function: its caller)
 *
 * Missing binding: profile_pc() and user_mode() are arch code on the pt_regs layout.
 * Return: 1 for kernel mode, 0 for user mode, -1 without @regs.
 */
int oprofile_shim_regs_pc(struct pt_regs *regs, unsigned long *pc)
{
	if (!regs)
		return -1;
	*pc = profile_pc(regs);
	return user_mode(regs) ? 0 : 1;
}

static int lookup_vma(struct vm_area_struct *vma, struct file **file, struct oprofile_vma *where,
		      bool irq)
{
	if (!vma)
		return OPROFILE_LOOKUP_NONE;
	where->exec = vma->vm_flags & VM_EXEC;
	/*
	 * Memory a read may touch without side effects: readable, and no device memory (VM_IO,
	 * raw PFNs of a driver's remap_pfn_range/vmf_insert_pfn/mixed map: MMIO of UIO, DRM,
	 * fbdev), which a load could change or, on arm64, answer with a fatal external abort.
	 */
	where->plain = (vma->vm_flags & VM_READ) &&
		       !(vma->vm_flags & (VM_IO | VM_PFNMAP | VM_MIXEDMAP));
	where->end = vma->vm_end;
	if (!vma->vm_file)
		return OPROFILE_LOOKUP_ANON;
	if (irq) {
		/* Files are SLAB_TYPESAFE_BY_RCU: take a reference only if it is still live. */
		*file = get_file_active(&vma->vm_file);
		if (!*file)
			return OPROFILE_LOOKUP_RETRY;
	} else {
		*file = get_file(vma->vm_file);
	}
	where->start = vma->vm_start;
	where->pgoff = vma->vm_pgoff;
	return OPROFILE_LOOKUP_FILE;
}

/**
 * oprofile_shim_user_lookup_irq() - find the mapping of user @pc in current->mm
 * @pc: a user address
 * @file: out: for OPROFILE_LOOKUP_FILE the mapped file with a reference the caller owns (Rust:
 *        an ARef<File>, bridge/user.rs); else NULL
 * @where: out: for FILE the mapping's start and file page (Rust computes the offset); for FILE
 *         and ANON its end, whether it is executable (VM_EXEC) and whether it may be read
 *         (VM_READ and no device memory: @where->plain)
 *
 * Missing binding: the speculative mmap_lock section and get_file_active() are not in the
 * kernel crate. Context: interrupt; takes no lock and does not sleep.
 * Return: an OPROFILE_LOOKUP_* value.
 */
int oprofile_shim_user_lookup_irq(unsigned long pc, struct file **file, struct oprofile_vma *where)
{
	struct mm_struct *mm = current->mm;
	unsigned int seq;
	int ret;

	*file = NULL;
	if (!mm)
		return OPROFILE_LOOKUP_NO_MM;
	guard(rcu)();
	if (!mmap_lock_speculate_try_begin(mm, &seq))
		return OPROFILE_LOOKUP_RETRY;
	ret = lookup_vma(vma_lookup(mm, pc), file, where, true);
	/* Whatever was read above is only valid if no writer ran meanwhile. */
	if (mmap_lock_speculate_retry(mm, seq)) {
		if (*file)
			fput(*file);
		*file = NULL;
		return OPROFILE_LOOKUP_RETRY;
	}
	return ret;
}

/**
 * oprofile_shim_exe_file_irq() - the current task's executable
 *
 * Missing binding: get_file_active() and mm->exe_file are not in the kernel crate.
 * Context: any (interrupt); one try, never spins.
 * Return: the executable with a reference the caller owns (Rust: an ARef<File>), or NULL for
 * a kernel thread or while exe_file is being replaced.
 */
struct file *oprofile_shim_exe_file_irq(void)
{
	struct mm_struct *mm = current->mm;

	if (!mm || (current->flags & PF_KTHREAD))
		return NULL;
	/* One try, no loop: NULL if exe_file changes under us (prctl/exit), never spins in IRQ. */
	return get_file_active((struct file **)&mm->exe_file);
}

/**
 * oprofile_shim_user_lookup_mm() - find the mapping of @pc in @mm under mmap_lock
 * @mm: an mm the caller holds an mm_users reference on
 * @pc: a user address
 * @file: out: as for oprofile_shim_user_lookup_irq()
 * @where: out: as for oprofile_shim_user_lookup_irq()
 *
 * Context: process context (sleeps on mmap_lock).
 * Return: an OPROFILE_LOOKUP_* value.
 */
int oprofile_shim_user_lookup_mm(struct mm_struct *mm, unsigned long pc, struct file **file,
				 struct oprofile_vma *where)
{
	int ret;

	*file = NULL;
	mmap_read_lock(mm);
	ret = lookup_vma(vma_lookup(mm, pc), file, where, false);
	mmap_read_unlock(mm);
	return ret;
}

/**
 * oprofile_shim_file_key() - identity of a file's path (what a dcookie was)
 * @file: a file the caller holds a reference on
 * @dentry: out: the address of its dentry
 * @mnt: out: the address of its vfsmount
 *
 * Missing binding: struct file's f_path is not reachable from the kernel crate's File.
 */
void oprofile_shim_file_key(struct file *file, unsigned long *dentry, unsigned long *mnt)
{
	*dentry = (unsigned long)file->f_path.dentry;
	*mnt = (unsigned long)file->f_path.mnt;
}


/**
 * oprofile_shim_file_path() - the absolute path of a file (d_path)
 * @file: a file the caller holds a reference on
 * @buf: where d_path() writes the path (at its end, NUL-terminated)
 * @len: the size of @buf in bytes
 * @start: out: the offset of the path's first byte in @buf
 *
 * Missing binding: d_path() and f_path are not in the kernel crate.
 * Context: process context (relative to the current task's root).
 * Return: the length of the path without the NUL, or a negative errno (-ENAMETOOLONG).
 */
int oprofile_shim_file_path(struct file *file, char *buf, int len, int *start)
{
	char *p = d_path(&file->f_path, buf, len);

	if (IS_ERR(p))
		return PTR_ERR(p);
	*start = p - buf;
	return strlen(p);
}

#ifdef CONFIG_ARM
struct oprofile_trace {
	unsigned long *entries;
	unsigned int max;
	unsigned int n;
};

static bool trace_entry(void *data, unsigned long pc)
{
	struct oprofile_trace *t = data;

	if (t->n >= t->max)
		return false;
	t->entries[t->n++] = pc;
	return true;
}

/* walk_stackframe() from @regs: the sampled PC first, then each caller. */
static unsigned int kernel_trace(struct pt_regs *regs, unsigned long *entries, unsigned int max)
{
	struct oprofile_trace t = { .entries = entries, .max = max };
	struct stackframe frame;

	arm_get_current_stackframe(regs, &frame);
	walk_stackframe(&frame, trace_entry, &t);
	return t.n;
}

/* Where the user part of the chain starts: ARM's fp (r11), lr, sp and CPSR. */
static void user_frame_regs(struct pt_regs *regs, struct oprofile_user_regs *user)
{
	user->fp = regs->ARM_fp;
	user->lr = regs->ARM_lr;
	user->sp = regs->ARM_sp;
	user->cpsr = regs->ARM_cpsr;
}
#endif

#ifdef CONFIG_ARM64
/*
 * stack_trace_save(): arch_stack_walk() of the current task from the handler itself, which
 * crosses the IRQ and overflow stacks and exception boundaries, reporting each exception's
 * pt_regs PC; the unwinder is not exported with a pt_regs start (stack_trace_save_regs()).
 */
static unsigned int kernel_trace(struct pt_regs *regs, unsigned long *entries, unsigned int max)
{
	return stack_trace_save(entries, max, 0);
}

/* Where the user part of the chain starts: the frame record pointer x29, x30 (lr), sp, PSTATE. */
static void user_frame_regs(struct pt_regs *regs, struct oprofile_user_regs *user)
{
	user->fp = regs->regs[29];
	user->lr = regs->regs[30];
	user->sp = regs->sp;
	user->cpsr = regs->pstate;
}
#endif

/**
 * oprofile_shim_kernel_trace() - the arch unwinder's return addresses for a kernel-mode sample
 * @regs: the sampled (kernel-mode) registers
 * @entries: out: up to @max addresses, innermost first; on ARM the first is @regs' PC
 *           (walk_stackframe() from @regs), on arm64 the handler's own frames come first and
 *           @regs' PC is among the entries (stack_trace_save() from here)
 * @max: room in @entries
 * @pc: out: @regs' PC (instruction_pointer(), not profile_pc()'s)
 *
 * common::sync::sampled_kernel_chain() picks the sample's callers out of them.
 * Missing binding: the arch unwinders (ARM's walk_stackframe, arm64's stack_trace_save with the
 * pt_regs layout).
 * Context: the sampling interrupt or NMI (both unwinders are NMI-safe).
 * Return: the number of entries written, 0 where there is no unwinder.
 */
unsigned int oprofile_shim_kernel_trace(struct pt_regs *regs, unsigned long *entries,
					unsigned int max, unsigned long *pc)
{
	*pc = instruction_pointer(regs);
#if defined(CONFIG_ARM) || defined(CONFIG_ARM64)
	return kernel_trace(regs, entries, max);
#else
	return 0;
#endif
}

/**
 * oprofile_shim_frame_regs() - the registers a user frame walk starts from
 * @regs: user-mode registers (the sampled ones, or those the task entered the kernel with)
 * @user: out: @regs' PC (instruction_pointer()) and fp, lr, sp, cpsr (PSTATE on arm64); the
 *        entry and walk flags are left to the caller
 *
 * Which registers those are (the sample's, or task_pt_regs() of a kernel-mode sample's task:
 * where the kernel part of a call chain ends) is Rust's decision (bridge/regs.rs), as is the
 * walk (common::sync::walk_user_frames).
 * Missing binding: the pt_regs layout.
 * Context: any.
 * Return: false where there is no user frame walk (neither ARM nor arm64).
 */
bool oprofile_shim_frame_regs(struct pt_regs *regs, struct oprofile_user_regs *user)
{
#if defined(CONFIG_ARM) || defined(CONFIG_ARM64)
	user->pc = instruction_pointer(regs);
	user_frame_regs(regs, user);
	return true;
#else
	return false;
#endif
}

/**
 * oprofile_shim_user_regs() - the user registers of a sample
 * @regs: the sampled registers
 * @out: out: OPROFILE_USER_REGS words of the user context (ARM: r0..r15, cpsr, pt_regs
 *       uregs[0..17]; arm64: x0..x30, sp, pc, pstate, struct user_pt_regs): @regs for a
 *       user-mode sample, else the registers the current user task entered the kernel with
 *
 * Missing binding: task_pt_regs(), user_mode() and the pt_regs layout.
 * Context: the sampling interrupt.
 * Return: false when there is no user context (a kernel thread, or no user registers).
 */
bool oprofile_shim_user_regs(struct pt_regs *regs, unsigned long *out)
{
#if defined(CONFIG_ARM) || defined(CONFIG_ARM64)
	if (!regs)
		return false;
	if (!user_mode(regs)) {
		if (!current->mm || (current->flags & PF_KTHREAD))
			return false;
		regs = task_pt_regs(current);
		if (!user_mode(regs))
			return false;
	}
#ifdef CONFIG_ARM
	BUILD_BUG_ON(OPROFILE_USER_REGS != 17 || sizeof(regs->uregs) < 17 * sizeof(unsigned long));
	memcpy(out, regs->uregs, 17 * sizeof(unsigned long));
#else
	BUILD_BUG_ON(OPROFILE_USER_REGS != 34 || sizeof(regs->user_regs) != 34 * sizeof(u64));
	memcpy(out, &regs->user_regs, sizeof(regs->user_regs));
#endif
	return true;
#else
	return false;
#endif
}

/**
 * oprofile_shim_exec_maps() - the executable file mappings of an mm
 * @mm: an mm the caller holds an mm_users reference on
 * @fn: called under mmap_lock (read) for each VM_EXEC mapping of a file, in address order,
 *      with its start, end, the file offset of start in pages (vm_pgoff) and the file
 *      (borrowed: valid for the call); returning false ends the walk
 * @ctx: passed to @fn
 *
 * Missing binding: the kernel crate has no VMA iterator, no vm_file and no vm_pgoff.
 * Context: process; takes mmap_lock for reading (sleeps).
 * Return: 0, or -EINTR when a fatal signal interrupted the wait for mmap_lock.
 */
int oprofile_shim_exec_maps(struct mm_struct *mm, oprofile_map_fn fn, void *ctx)
{
	struct vm_area_struct *vma;
	VMA_ITERATOR(vmi, mm, 0);

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	for_each_vma(vmi, vma) {
		if (!(vma->vm_flags & VM_EXEC) || !vma->vm_file)
			continue;
		if (!fn(ctx, vma->vm_start, vma->vm_end, vma->vm_pgoff, vma->vm_file))
			break;
	}
	mmap_read_unlock(mm);
	return 0;
}

/**
 * oprofile_shim_module_area() - where module text is loaded
 * @start: out: MODULES_VADDR, or 0 where the architecture has no module area
 * @end: out: MODULES_END, or 0
 *
 * Missing binding: the constants are arch macros bindgen cannot evaluate, and
 * is_module_text_address() is not exported.
 */
void oprofile_shim_module_area(unsigned long *start, unsigned long *end)
{
#ifdef MODULES_VADDR
	*start = MODULES_VADDR;
	*end = MODULES_END;
#else
	*start = 0;
	*end = 0;
#endif
}

/*
 * The context and callback of the registered module notifier: one slot, claimed by cmpxchg on
 * oprofile_module_ctx. Its Rust owner is bridge::ModuleNotifier (one at a time), which claims
 * it at initialisation and releases it on drop.
 */
static const void *oprofile_module_ctx;
static void (*oprofile_module_coming)(const void *ctx);

static int oprofile_module_notify(struct notifier_block *nb, unsigned long state, void *data)
{
	if (state == MODULE_STATE_COMING)
		oprofile_module_coming(oprofile_module_ctx);
	return NOTIFY_DONE;
}

static struct notifier_block oprofile_module_nb = {
	.notifier_call = oprofile_module_notify,
};

/**
 * oprofile_shim_module_notifier_register() - call @coming for every module that loads
 * @ctx: passed to @coming; must stay valid until oprofile_shim_module_notifier_unregister()
 * @coming: called on MODULE_STATE_COMING (process context)
 *
 * Missing binding: the kernel crate has no notifier-chain abstraction. One registration at a
 * time (the notifier_block is static): a second one is refused before it touches the first
 * one's context.
 * Return: 0, -EBUSY while registered, or the error of register_module_notifier().
 */
int oprofile_shim_module_notifier_register(const void *ctx, void (*coming)(const void *ctx))
{
	int ret;

	if (cmpxchg(&oprofile_module_ctx, NULL, ctx))
		return -EBUSY;
	oprofile_module_coming = coming;
	ret = register_module_notifier(&oprofile_module_nb);
	if (ret)
		WRITE_ONCE(oprofile_module_ctx, NULL);
	return ret;
}

/**
 * oprofile_shim_module_notifier_unregister() - end oprofile_shim_module_notifier_register()
 *
 * After it returns no callback runs.
 */
void oprofile_shim_module_notifier_unregister(void)
{
	unregister_module_notifier(&oprofile_module_nb);
	WRITE_ONCE(oprofile_module_ctx, NULL);
}

/**
 * oprofile_shim_alloc_wq() - allocate the module's workqueue for buffer_sync
 *
 * Missing binding: alloc_workqueue() is a variadic macro, and the kernel crate has no owned
 * workqueue (only the system queues). bridge.rs destroys it with destroy_workqueue() at unload,
 * which waits for a running sync work item to return.
 * Return: the workqueue, or NULL.
 */
struct workqueue_struct *oprofile_shim_alloc_wq(void)
{
	return alloc_workqueue("oprofile_sync", WQ_UNBOUND, 0);
}

/**
 * oprofile_shim_in_nmi() - whether this runs in NMI context
 *
 * Missing binding: in_nmi() is a preempt-count macro. With pseudo-NMIs (arm64,
 * irqchip.gicv3_pseudo_nmi=1) perf's PMU overflow handler runs in NMI context.
 * Return: true in NMI context.
 */
bool oprofile_shim_in_nmi(void)
{
	return in_nmi();
}

/**
 * oprofile_shim_task_user_regs() - the registers the current user task entered the kernel with
 *
 * Missing binding: task_pt_regs() and user_mode() are arch code.
 * Context: any; the registers stay valid until the task returns to user space.
 * Return: task_pt_regs(current) when they are user-mode registers of a user task, else NULL.
 */
struct pt_regs *oprofile_shim_task_user_regs(void)
{
	struct pt_regs *regs;

	if (!current->mm || (current->flags & PF_KTHREAD))
		return NULL;
	regs = task_pt_regs(current);
	return user_mode(regs) ? regs : NULL;
}

struct oprofile_irq_work {
	struct irq_work work;
	void (*fn)(const void *ctx);
	const void *ctx;
};

static void oprofile_irq_work_run(struct irq_work *work)
{
	struct oprofile_irq_work *w = container_of(work, struct oprofile_irq_work, work);

	w->fn(w->ctx);
}

/**
 * oprofile_shim_irq_work_new() - an irq_work that calls @fn(@ctx) in hard interrupt context
 * @fn: the callback (Rust)
 * @ctx: passed to @fn; must stay valid until oprofile_shim_irq_work_free()
 *
 * Missing binding: the kernel crate has no irq_work (init_irq_work() is an inline). Not
 * IRQ_WORK_LAZY: it runs at the next interrupt-enabled point, on arm64 through a self-IPI.
 * Context: process (allocates).
 * Return: the irq_work, or NULL.
 */
struct oprofile_irq_work *oprofile_shim_irq_work_new(void (*fn)(const void *ctx), const void *ctx)
{
	struct oprofile_irq_work *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return NULL;
	init_irq_work(&w->work, oprofile_irq_work_run);
	w->fn = fn;
	w->ctx = ctx;
	return w;
}

/**
 * oprofile_shim_irq_work_queue() - run @w on this CPU at its next interrupt-enabled point
 * @w: an irq_work of oprofile_shim_irq_work_new()
 *
 * Context: any, NMI included (irq_work_queue() is NMI-safe).
 * Return: false when it was already queued (it will run once for both).
 */
bool oprofile_shim_irq_work_queue(struct oprofile_irq_work *w)
{
	return irq_work_queue(&w->work);
}

/**
 * oprofile_shim_irq_work_sync() - wait for @w to be idle
 * @w: an irq_work of oprofile_shim_irq_work_new()
 *
 * Missing binding: struct oprofile_irq_work is opaque to Rust (irq_work_sync() needs its
 * struct irq_work).
 * Context: process, interrupts on (irq_work_sync() may sleep).
 */
void oprofile_shim_irq_work_sync(struct oprofile_irq_work *w)
{
	irq_work_sync(&w->work);
}

/**
 * oprofile_shim_irq_work_free() - wait for @w to be idle and free it
 * @w: an irq_work of oprofile_shim_irq_work_new(), queued no more
 *
 * Context: process (irq_work_sync() may sleep).
 */
void oprofile_shim_irq_work_free(struct oprofile_irq_work *w)
{
	irq_work_sync(&w->work);
	kfree(w);
}
