/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The filesystem bridge of oprofile-rs (oprofilefs_shim.c), as declared on the Rust side in
 * oprofilefs.rs.
 */
#ifndef OPROFILEFS_SHIM_H
#define OPROFILEFS_SHIM_H

#include <linux/fs.h>

/* Rust: builds the tree below the new root at mount time, for the registered context. */
typedef int (*oprofilefs_fill_fn)(const void *ctx, struct dentry *root);

int oprofilefs_shim_register(const void *ctx, oprofilefs_fill_fn fill);
void oprofilefs_shim_unregister(void);
struct dentry *oprofilefs_shim_create(struct dentry *parent, const char *name, umode_t mode,
				      const struct file_operations *fops, void *private);

#endif
