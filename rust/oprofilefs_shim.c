// SPDX-License-Identifier: GPL-2.0
/*
 * C bridge for oprofilefs: only what the Rust `kernel` crate cannot reach.
 *
 * Missing bindings: the kernel crate has no filesystem-type abstraction and its bindings lack
 * <linux/fs_context.h> (fs_context_operations, get_tree_single), so this file registers the
 * filesystem type and builds inodes/dentries on request. Every decision (which files exist,
 * what they do) is made in Rust (oprofilefs.rs): fill_super calls the fill function registered
 * with the context, each superblock's s_fs_info is that context, and each file's i_private is
 * an opaque word (the file's id) that the Rust file operations interpret.
 *
 * Follows legacy drivers/oprofile/oprofilefs.c and, for the current VFS API, fs/fuse/control.c.
 */
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/module.h>
#include <linux/dcache.h>
#include <linux/sched.h>

#include "oprofilefs_shim.h"

#define OPROFILEFS_MAGIC 0x6f70726f

static const struct super_operations oprofilefs_s_ops = {
	.statfs		= simple_statfs,
	.drop_inode	= inode_just_drop,
};

static struct inode *oprofilefs_get_inode(struct super_block *sb, umode_t mode)
{
	struct inode *inode = new_inode(sb);

	if (inode) {
		inode->i_ino = get_next_ino();
		inode->i_mode = mode;
		simple_inode_init_ts(inode);
	}
	return inode;
}

/*
 * The context and fill function of the registered filesystem: one slot, claimed by cmpxchg in
 * oprofilefs_shim_register() and released by oprofilefs_shim_unregister(). Its one owner is
 * Rust's oprofilefs::Registration (rust/oprofilefs.rs), which claims it at initialisation and
 * releases it in its drop; a second Registration gets -EBUSY and leaves the slot alone.
 */
static const void *oprofilefs_ctx;
static oprofilefs_fill_fn oprofilefs_fill;

/**
 * oprofilefs_shim_create() - create a file or directory below @parent
 * @parent: a live directory dentry of a superblock being filled
 * @name: the entry's name (copied)
 * @mode: permission bits
 * @fops: the file's operations, or NULL for a directory
 * @private: the file's i_private, an opaque word (unused for a directory)
 *
 * Context: fill_super, process context.
 * Return: the new dentry, borrowed (valid while the superblock lives), or an ERR_PTR
 * (-ENOMEM).
 */
struct dentry *oprofilefs_shim_create(struct dentry *parent, const char *name, umode_t mode,
				      const struct file_operations *fops, void *private)
{
	struct dentry *dentry;
	struct inode *inode;
	bool dir = fops == NULL;

	dentry = d_alloc_name(parent, name);
	if (!dentry)
		return ERR_PTR(-ENOMEM);
	inode = oprofilefs_get_inode(parent->d_sb, (dir ? S_IFDIR : S_IFREG) | mode);
	if (!inode) {
		dput(dentry);
		return ERR_PTR(-ENOMEM);
	}
	if (dir) {
		inode->i_op = &simple_dir_inode_operations;
		inode->i_fop = &simple_dir_operations;
		inc_nlink(inode);
		inc_nlink(d_inode(parent));
	} else {
		inode->i_fop = fops;
		inode->i_private = private;
	}
	d_make_persistent(dentry, inode);
	dput(dentry);
	return dentry;
}

static int oprofilefs_fill_super(struct super_block *sb, struct fs_context *fc)
{
	struct inode *root_inode;

	sb->s_blocksize = PAGE_SIZE;
	sb->s_blocksize_bits = PAGE_SHIFT;
	sb->s_magic = OPROFILEFS_MAGIC;
	sb->s_op = &oprofilefs_s_ops;
	sb->s_time_gran = 1;

	root_inode = oprofilefs_get_inode(sb, S_IFDIR | 0755);
	if (!root_inode)
		return -ENOMEM;
	root_inode->i_op = &simple_dir_inode_operations;
	root_inode->i_fop = &simple_dir_operations;
	set_nlink(root_inode, 2);
	sb->s_root = d_make_root(root_inode);
	if (!sb->s_root)
		return -ENOMEM;
	sb->s_fs_info = (void *)oprofilefs_ctx;
	return oprofilefs_fill(oprofilefs_ctx, sb->s_root);
}

static int oprofilefs_get_tree(struct fs_context *fc)
{
	return get_tree_single(fc, oprofilefs_fill_super);
}

static const struct fs_context_operations oprofilefs_context_ops = {
	.get_tree	= oprofilefs_get_tree,
};

static int oprofilefs_init_fs_context(struct fs_context *fc)
{
	fc->ops = &oprofilefs_context_ops;
	return 0;
}

static struct file_system_type oprofilefs_type = {
	.owner		= THIS_MODULE,
	.name		= "oprofilefs",
	.init_fs_context = oprofilefs_init_fs_context,
	.kill_sb	= kill_anon_super,
};

/**
 * oprofilefs_shim_register() - register the oprofilefs filesystem type
 * @ctx: the context every superblock gets as s_fs_info; must stay valid until
 *       oprofilefs_shim_unregister()
 * @fill: builds the tree below a new superblock's root (called by fill_super with @ctx)
 *
 * One registration at a time (the file_system_type is static): a second one is refused before
 * it touches the first one's context.
 * Return: 0, -EBUSY while registered, or the error of register_filesystem() (-EBUSY if the name
 * is taken).
 */
int oprofilefs_shim_register(const void *ctx, oprofilefs_fill_fn fill)
{
	int ret;

	if (cmpxchg(&oprofilefs_ctx, NULL, ctx))
		return -EBUSY;
	oprofilefs_fill = fill;
	ret = register_filesystem(&oprofilefs_type);
	if (ret)
		WRITE_ONCE(oprofilefs_ctx, NULL);
	return ret;
}

/**
 * oprofilefs_shim_unregister() - unregister the filesystem type
 *
 * No superblock may exist (a mount pins the module).
 */
void oprofilefs_shim_unregister(void)
{
	unregister_filesystem(&oprofilefs_type);
	WRITE_ONCE(oprofilefs_ctx, NULL);
}
