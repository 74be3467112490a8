// SPDX-License-Identifier: GPL-2.0
/*
 * C bridge of the sample path: what the Rust `kernel` crate cannot reach (inline mm/VMA/file
 * helpers, the ARM unwinder, user frame walks, the module notifier). It decides nothing; the
 * policy lives in cpu_buffer.rs, image_ids.rs and buffer_sync.rs.
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
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/path.h>
#include <linux/ptrace.h>
#include <linux/rcupdate.h>
#include <linux/sizes.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task_stack.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <asm/irq_regs.h>
#ifdef CONFIG_ARM
#include <asm/stacktrace.h>
#endif

#include "sample_shim.h"

/* Interrupted registers of the current interrupt, or NULL outside an interrupt. */
struct pt_regs *oprofile_shim_irq_regs(void)
{
	return get_irq_regs();
}

/* PC of @regs (profile_pc); returns 1 for kernel mode, 0 for user mode, -1 without @regs. */
int oprofile_shim_regs_pc(struct pt_regs *regs, unsigned long *pc)
{
	if (!regs)
		return -1;
	*pc = profile_pc(regs);
	return user_mode(regs) ? 0 : 1;
}

static int lookup_vma(struct vm_area_struct *vma, unsigned long pc, struct file **file,
		      unsigned long *offset, bool *exec, bool irq)
{
	if (!vma)
		return OPROFILE_LOOKUP_NONE;
	*exec = vma->vm_flags & VM_EXEC;
	if (!vma->vm_file) {
		*offset = pc;
		return OPROFILE_LOOKUP_ANON;
	}
	if (irq) {
		/* Files are SLAB_TYPESAFE_BY_RCU: take a reference only if it is still live. */
		*file = get_file_active(&vma->vm_file);
		if (!*file)
			return OPROFILE_LOOKUP_RETRY;
	} else {
		*file = get_file(vma->vm_file);
	}
	*offset = (vma->vm_pgoff << PAGE_SHIFT) + pc - vma->vm_start;
	return OPROFILE_LOOKUP_FILE;
}

/*
 * Resolves user @pc in current->mm from interrupt context, without sleeping or locking.
 * OPROFILE_LOOKUP_FILE gives a referenced *@file (release with oprofile_shim_fput); FILE and
 * ANON set *@exec to whether the mapping is executable (VM_EXEC).
 */
int oprofile_shim_user_lookup_irq(unsigned long pc, struct file **file, unsigned long *offset,
				  bool *exec)
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
	ret = lookup_vma(vma_lookup(mm, pc), pc, file, offset, exec, true);
	/* Whatever was read above is only valid if no writer ran meanwhile. */
	if (mmap_lock_speculate_retry(mm, seq)) {
		if (*file)
			fput(*file);
		*file = NULL;
		return OPROFILE_LOOKUP_RETRY;
	}
	return ret;
}

/* The current task's executable, referenced, or NULL (kernel thread, or being replaced). */
struct file *oprofile_shim_exe_file_irq(void)
{
	struct mm_struct *mm = current->mm;

	if (!mm || (current->flags & PF_KTHREAD))
		return NULL;
	/* One try, no loop: NULL if exe_file changes under us (prctl/exit), never spins in IRQ. */
	return get_file_active((struct file **)&mm->exe_file);
}

/* current->mm with an mm_users reference (release with oprofile_shim_mmput), or NULL. */
struct mm_struct *oprofile_shim_mm_get_irq(void)
{
	struct mm_struct *mm = current->mm;

	return mm && mmget_not_zero(mm) ? mm : NULL;
}

/* Process context: resolves @pc in @mm under mmap_lock (see oprofile_shim_user_lookup_irq). */
int oprofile_shim_user_lookup_mm(struct mm_struct *mm, unsigned long pc, struct file **file,
				 unsigned long *offset, bool *exec)
{
	int ret;

	*file = NULL;
	mmap_read_lock(mm);
	ret = lookup_vma(vma_lookup(mm, pc), pc, file, offset, exec, false);
	mmap_read_unlock(mm);
	return ret;
}

void oprofile_shim_mmput(struct mm_struct *mm)
{
	/* The last reference may tear the address space down: not in the sync pass. */
	mmput_async(mm);
}

/* Identity of @file's path (what a dcookie was): its dentry and vfsmount. */
void oprofile_shim_file_key(struct file *file, unsigned long *dentry, unsigned long *mnt)
{
	*dentry = (unsigned long)file->f_path.dentry;
	*mnt = (unsigned long)file->f_path.mnt;
}

void oprofile_shim_fput(struct file *file)
{
	fput(file);
}

/*
 * Absolute path of @file into @buf (d_path: written at the end of @buf, NUL-terminated).
 * Returns the length without the NUL and sets *@start to its first byte, or a negative errno
 * (-ENAMETOOLONG).
 */
int oprofile_shim_file_path(struct file *file, char *buf, int len, int *start)
{
	char *p = d_path(&file->f_path, buf, len);

	if (IS_ERR(p))
		return PTR_ERR(p);
	*start = p - buf;
	return strlen(p);
}

struct oprofile_bt {
	oprofile_frame_fn fn;
	void *ctx;
	unsigned int left;
	unsigned int n;
	bool skip_first;
	bool stop;
};

static bool bt_emit(struct oprofile_bt *bt, unsigned long pc, bool user)
{
	if (bt->stop || !bt->left)
		return false;
	if (!bt->fn(bt->ctx, pc, user)) {
		bt->stop = true;
		return false;
	}
	bt->left--;
	bt->n++;
	return bt->left != 0;
}

#ifdef CONFIG_ARM
static bool bt_kernel_frame(void *data, unsigned long pc)
{
	struct oprofile_bt *bt = data;

	if (bt->skip_first) {	/* walk_stackframe reports the sampled PC first */
		bt->skip_first = false;
		return true;
	}
	return bt_emit(bt, pc, false);
}

/*
 * User frames of a GCC ARM-mode frame-pointer build (-marm -fno-omit-frame-pointer): a function
 * that calls others starts `push {fp, lr}; add fp, sp, #4`, so fp points at the saved lr with
 * the caller's fp just below; a leaf starts `push {fp}; add fp, sp, #0`, so fp points at the
 * caller's fp and the return address is still in lr. Only the innermost frame (@lr valid) can be
 * a leaf; it is recognised by [fp] holding a stack address just above fp rather than a code
 * address. Frames must move strictly up the stack, and a "return address" on the stack itself
 * (code built without frame pointers left fp pointing elsewhere) ends the walk, as does any
 * fault (nofault: no sleep).
 */
static bool bt_on_stack(unsigned long addr, unsigned long sp)
{
	return addr >= sp && addr - sp < SZ_8M;
}

static void bt_user(struct oprofile_bt *bt, unsigned long fp, unsigned long lr, unsigned long sp)
{
	unsigned long tail, word;

	if (fp < 4 || (fp & 3))
		return;
	if (copy_from_user_nofault(&word, (void __user *)fp, sizeof(word)))
		return;
	if (word > fp && word - fp < SZ_1M) {
		if (!bt_emit(bt, lr, true))
			return;
		fp = word;
	}
	tail = fp - 4;
	while (!bt->stop && bt->left && fp >= 4 && !(fp & 3)) {
		struct { unsigned long fp, lr; } frame;

		if (copy_from_user_nofault(&frame, (void __user *)tail, sizeof(frame)))
			break;
		if (bt_on_stack(frame.lr, sp) || !bt_emit(bt, frame.lr, true))
			break;
		if (frame.fp < 4 || frame.fp - 4 <= tail)
			break;
		fp = frame.fp;
		tail = fp - 4;
	}
}
#endif

/*
 * Walks the call chain of the sample taken at @regs, at most @depth frames, outermost last:
 * for a kernel-mode sample the kernel frames (ARM unwinder) and then, for a user task, the user
 * PC it entered the kernel from and its user frames; for a user-mode sample the user frames.
 * The sampled PC itself is not reported. Returns the number of frames passed to @fn.
 */
unsigned int oprofile_shim_backtrace(struct pt_regs *regs, unsigned int depth,
				     oprofile_frame_fn fn, void *ctx)
{
	struct oprofile_bt bt = { .fn = fn, .ctx = ctx, .left = depth, .skip_first = true };

#ifdef CONFIG_ARM
	if (!regs || !depth)
		return 0;
	if (!user_mode(regs)) {
		struct stackframe frame;
		struct pt_regs *uregs;

		arm_get_current_stackframe(regs, &frame);
		walk_stackframe(&frame, bt_kernel_frame, &bt);
		if (!current->mm || (current->flags & PF_KTHREAD))
			return bt.n;
		uregs = task_pt_regs(current);
		if (!user_mode(uregs) || !bt_emit(&bt, uregs->ARM_pc, true))
			return bt.n;
		bt_user(&bt, uregs->ARM_fp, uregs->ARM_lr, uregs->ARM_sp);
	} else {
		bt_user(&bt, regs->ARM_fp, regs->ARM_lr, regs->ARM_sp);
	}
#endif
	return bt.n;
}

/*
 * Bounds of the area module text is loaded into (MODULES_VADDR..MODULES_END): constants the
 * Rust side cannot name (arch headers). is_module_text_address() is not exported.
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

/* The context and callback of the registered module notifier. */
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
 * time (the notifier_block is static).
 * Return: 0, or the error of register_module_notifier().
 */
int oprofile_shim_module_notifier_register(const void *ctx, void (*coming)(const void *ctx))
{
	oprofile_module_ctx = ctx;
	oprofile_module_coming = coming;
	return register_module_notifier(&oprofile_module_nb);
}

/**
 * oprofile_shim_module_notifier_unregister() - end oprofile_shim_module_notifier_register()
 *
 * After it returns no callback runs.
 */
void oprofile_shim_module_notifier_unregister(void)
{
	unregister_module_notifier(&oprofile_module_nb);
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
