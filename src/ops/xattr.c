/* Extended attributes (see ops.h). They go through the magic link, which lands on the node
 * without opening it, so they work for every file type and need no read permission, as the
 * xattr syscalls on a path. Each namespace's gate is the view's policies' (policy/xattr.c,
 * policy/acl.c). */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/xattr.h>
#include <unistd.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "coherence.h"
#include "services.h"
#include "view.h"

static bool valid_xattr_name(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= XATTR_NAME_MAX;
}

/* The frame of an xattr call: the name valid and allowed by the view, the node held, its
 * magic link in path. */
static int begin_xattr(struct req *q, fuse_req_t req, fuse_ino_t ino, const char *name,
                       enum sfs_xattr_op op, struct held **h, char path[40])
{
	int rc = op == SFS_XATTR_GET ? req_begin(q, req) : req_begin_change(q, req);

	if (rc)
		return rc;
	if (!valid_xattr_name(name))
		return -EINVAL;
	/* an object an idmapped mount does not map refuses a change before the name is looked at
	 * (xattr_permission) */
	if ((rc = req_hold(q, ino, h)) ||
	    (op != SFS_XATTR_GET && (rc = req_refuse_unmapped(q, *h, -EPERM))) ||
	    (rc = sfs_policy_xattr_gate(&q->r, name, op)) ||
	    (op == SFS_XATTR_SET && (rc = req_room_above_reserve(q))))
		return rc;
	fd_path(path, (*h)->fd);
	return 0;
}

/* Whether an xattr lands in the inode or needs a block of its own is ext4's to know: in a
 * view that enforces limits the change is made, the limits checked, and undone if passed. */
static int set_xattr_within(struct req *q, struct held *h, const char *path, const char *name,
                            const char *value, size_t size, int flags)
{
	bool limits = q->r.view->prof->limits;
	ssize_t oldlen = -1;
	char *old = NULL;
	int rc;

	if (limits) {
		oldlen = BACKING(&q->r, getxattr(path, name, NULL, 0));
		if (oldlen >= 0 && (old = malloc(oldlen ? oldlen : 1)))
			oldlen = BACKING(&q->r, getxattr(path, name, old, oldlen));
		else
			oldlen = -1;
	}
	rc = BACKING(&q->r, setxattr(path, name, value, size, flags));
	sfs_quota_sync(req_ledger(q), h->node, NULL, h->fd);
	if (!rc && limits) {
		q->charge.id[SFS_QUSR] = h->node->q.uid;
		q->charge.id[SFS_QGRP] = h->node->q.gid;
		if ((rc = sfs_policy_within(&q->r, &q->charge))) { /* EDQUOT, or EIO: usage unknown */
			if (oldlen >= 0)
				BACKING(&q->r, setxattr(path, name, old, oldlen, 0));
			else
				BACKING(&q->r, removexattr(path, name));
			sfs_quota_sync(req_ledger(q), h->node, NULL, h->fd);
		}
	}
	free(old);
	return rc;
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                 size_t size, int flags)
{
	struct held *h;
	struct req q;
	char path[40];
	int rc;

	if (!(rc = begin_xattr(&q, req, ino, name, SFS_XATTR_SET, &h, path)) &&
	    !(rc = size > XATTR_SIZE_MAX ? -EINVAL : 0)) {
		rc = set_xattr_within(&q, h, path, name, value, size, flags);
		sfs_coh_attr(q.r.view, h->node);
	}
	req_reply_err(&q, rc);
}

/* Keeps the names this view shows to this caller; returns the new length. */
static size_t filter_xattr_list(struct sfs_req *r, char *list, size_t len)
{
	size_t out = 0;

	for (size_t off = 0; off < len;) {
		size_t n = strnlen(list + off, len - off);
		if (sfs_policy_xattr_visible(r, list + off)) {
			memmove(list + out, list + off, n);
			out += n;
			list[out++] = '\0';
		}
		off += n + 1;
	}
	return out;
}

/* Filtered, so the list is always read whole: size 0 must report the filtered length. */
static ssize_t list_xattrs(struct sfs_req *r, const char *path, char **buf)
{
	ssize_t n = listxattr(path, NULL, 0);

	if (n < 0)
		return -errno;
	if (!(*buf = malloc(n + 1)))
		return -ENOMEM;
	if ((n = listxattr(path, *buf, n)) < 0)
		return -errno;
	return filter_xattr_list(r, *buf, n);
}

/* The value of name, read into a new *buf of size bytes (none for 0: only its length). */
static ssize_t get_xattr(struct sfs_req *r, const char *path, const char *name, size_t size,
                         char **buf)
{
	if (size && !(*buf = malloc(size)))
		return -ENOMEM;
	return BACKING(r, getxattr(path, name, *buf, size));
}

/* getxattr (name) and listxattr (name NULL): the data, or its length when size is 0. */
static void read_xattrs(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct held *h;
	struct req q;
	char *buf = NULL;
	char path[40];
	ssize_t n = 0;
	int rc;

	if (name) {
		size = size > XATTR_SIZE_MAX ? XATTR_SIZE_MAX : size;
		rc = begin_xattr(&q, req, ino, name, SFS_XATTR_GET, &h, path);
	} else if (!(rc = req_begin(&q, req)) && !(rc = req_hold(&q, ino, &h))) {
		fd_path(path, h->fd);
	}
	if (!rc && (n = name ? get_xattr(&q.r, path, name, size, &buf)
	                     : list_xattrs(&q.r, path, &buf)) < 0)
		rc = n;
	else if (!rc && !name && size && (size_t)n > size)
		rc = -ERANGE;
	req_reply_xattr(&q, rc, buf, size, n);
	free(buf);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	read_xattrs(req, ino, name, size);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	read_xattrs(req, ino, NULL, size);
}

/* Whether the caller may write the file, as its view decides (noacl: by the mode bits). */
static bool caller_may_write(const struct req *q, const struct held *h)
{
	struct stat st;

	if (sfs_policy_dac_retry(q->r.view))
		return !stat_fd(h->fd, &st) && sfs_mode_allows(&st, W_OK);
	return !faccessat(h->fd, "", W_OK, AT_EMPTY_PATH | AT_EACCESS);
}

/* A removal of security.capability the backing refused to the caller, which the kernel had
 * allowed: the VFS lets no caller without CAP_SETFCAP ask for it, but itself asks, as the
 * writer, before a change of data it makes (file_modified: fallocate, copy_file_range into
 * the file), where ext4 removes it for any writer (doc/kernel.md §4.2). So one asked by a
 * caller holding CAP_SETFCAP, or by one who may write the file, is done with CAP_SETFCAP. */
static int remove_capability(struct req *q, const struct held *h, const char *path)
{
	int rc;

	if (!sfs_pid_has_cap(q->r.ctx->pid, CAP_SETFCAP) && !caller_may_write(q, h))
		return -EPERM;
	sfs_priv_begin(SFS_PRIV_SETFCAP);
	rc = removexattr(path, XATTR_NAME_CAPS) < 0 ? -errno : 0;
	sfs_priv_end();
	return rc;
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct held *h;
	struct req q;
	char path[40];
	int rc;

	if (!(rc = begin_xattr(&q, req, ino, name, SFS_XATTR_REMOVE, &h, path))) {
		rc = BACKING(&q.r, removexattr(path, name));
		if (rc == -EPERM && !strcmp(name, XATTR_NAME_CAPS))
			rc = remove_capability(&q, h, path);
		sfs_quota_sync(req_ledger(&q), h->node, NULL, h->fd);
		sfs_coh_attr(q.r.view, h->node);
	}
	req_reply_err(&q, rc);
}
