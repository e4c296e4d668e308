/* The request frame (see ops.h): one start, one reply, and between them what the request
 * holds, reserves and owes the other views, settled in one place before it answers. */
#include "ops.h"

#include "fuse_adapt.h"

#include "fuse_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "coherence.h"
#include "creds.h"
#include "services.h"
#include "view.h"
#include "fdcache.h"

void req_start(struct req *q, fuse_req_t req)
{
	q->r.req = req;
	q->r.view = fuse_req_userdata(req);
	q->r.ctx = fuse_req_ctx(req);
	q->charging = false;
	q->nheld = 0;
	q->intent = -1;
	q->replayed = false;
	atomic_fetch_add_explicit(&q->r.view->requests, 1, memory_order_relaxed);
}

int req_begin(struct req *q, fuse_req_t req)
{
	req_start(q, req);
	return sfs_creds_enter(req, &q->r.view->prof->opts.idmap, q->r.view->svc->backing->resuid);
}

struct sfs_quota *req_ledger(const struct req *q)
{
	return &q->r.view->svc->quota;
}

void req_charge(struct req *q)
{
	sfs_charge_begin(req_ledger(q), &q->charge);
	q->charging = true;
}

int req_begin_change(struct req *q, fuse_req_t req)
{
	int rc = req_begin(q, req);

	req_charge(q);
	return rc ? rc : sfs_policy_modify(q->r.view);
}

static int unmapped_ids(const struct sfs_idmap *m, const struct stat *st)
{
	return (sfs_idmap_uid_to_host(m, st->st_uid) == SFS_IDMAP_NONE ? HELD_UID_UNMAPPED : 0) |
	       (sfs_idmap_gid_to_host(m, st->st_gid) == SFS_IDMAP_NONE ? HELD_GID_UNMAPPED : 0);
}

bool req_ids_unmapped(const struct req *q, const struct stat *st)
{
	const struct sfs_idmap *m = &q->r.view->prof->opts.idmap;

	return sfs_idmap_active(m) && unmapped_ids(m, st);
}

int req_held_unmapped(const struct req *q, struct held *h)
{
	const struct sfs_idmap *m = &q->r.view->prof->opts.idmap;
	struct stat st;

	if (h->unmapped < 0)
		h->unmapped = sfs_idmap_active(m) && !stat_fd(h->fd, &st) ? unmapped_ids(m, &st) : 0;
	return h->unmapped;
}

int req_refuse_unmapped(const struct req *q, struct held *h, int err)
{
	return req_held_unmapped(q, h) ? err : 0;
}

/* The most blocks one creation takes from ext4: a directory's first block or the new block
 * of the one it is named in, an index block its htree splits into, an extent block, and an
 * xattr block for an inherited default ACL. */
#define CREATION_BLOCKS 8

int req_room_above_reserve(struct req *q)
{
	struct statvfs s;

	if (!sfs_creds_borrows_reserve())
		return 0;
	if (fstatvfs(q->r.view->svc->backing->root_fd, &s) < 0)
		return -errno;
	/* f_bavail: the free blocks above the reserve, less those delayed allocation holds */
	return s.f_bavail >= CREATION_BLOCKS ? 0 : -ENOSPC;
}

int req_hold(struct req *q, fuse_ino_t ino, struct held **out)
{
	struct sfs_view *v = q->r.view;
	struct held *h;

	if (q->nheld == REQ_HELD_MAX)
		return -EINVAL;
	h = &q->held[q->nheld];
	h->node = sfs_node_of(v, ino);
	if (!h->node)
		return -EINVAL;
	h->fd = sfs_fd_get(&v->svc->fdc, h->node);
	if (h->fd < 0)
		return h->fd;
	q->nheld++;
	h->unmapped = -1;
	if (sfs_creds_ns_caps() && req_held_unmapped(q, h))
		sfs_creds_end_ns_caps();
	*out = h;
	return 0;
}

int req_reserve(struct req *q, uint32_t uid, uint32_t gid, int64_t bytes, int64_t inodes)
{
	struct sfs_charge *c = &q->charge;

	c->id[SFS_QUSR] = uid;
	c->id[SFS_QGRP] = gid;
	c->amount[SFS_QBYTES] = bytes;
	c->amount[SFS_QINODES] = inodes;
	return sfs_policy_charge(&q->r, c);
}

/* The whole range when that fits the limits, else exactly what the range lacks (a FIEMAP,
 * paid only near a limit). */
int req_reserve_alloc(struct req *q, struct sfs_node *n, int fd, off_t off, off_t len)
{
	int rc = req_reserve(q, n->q.uid, n->q.gid, sfs_quota_alloc_bound(req_ledger(q), off, len), 0);

	if (rc == -EDQUOT)
		rc = req_reserve(q, n->q.uid, n->q.gid, sfs_quota_alloc_bytes(req_ledger(q), fd, off, len),
		                 0);
	return rc;
}

void forget_one(struct sfs_view *v, fuse_ino_t ino)
{
	struct sfs_node *n = sfs_node_of(v, ino);

	if (n && n != v->root)
		sfs_itab_forget(&v->svc->itab, &v->svc->fdc, n, v->slot, 1);
}

/* Notices first (the other views must not see the old state once the caller has the
 * answer), then the charge, then the nodes. */
static void settle(struct req *q)
{
	struct sfs_view *v = q->r.view;

	sfs_coh_flush(v);
	if (q->charging)
		sfs_charge_end(&q->charge);
	q->charging = false;
	while (q->nheld)
		sfs_fd_put(&v->svc->fdc, q->held[--q->nheld].node);
}

void req_reply_err(struct req *q, int rc)
{
	settle(q);
	fuse_reply_err(q->r.req, rc < 0 ? -rc : rc);
	intent_end(q);
}

void req_fail(fuse_req_t req, int rc)
{
	struct req q;

	req_start(&q, req);
	req_reply_err(&q, rc);
}

void req_reply_none(struct req *q)
{
	settle(q);
	fuse_reply_none(q->r.req);
}

void req_reply_entry(struct req *q, int rc, const struct fuse_entry_param *e)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	if (fuse_reply_entry(q->r.req, e) < 0 && e->ino)
		forget_one(q->r.view, e->ino);
	intent_end(q);
}

int req_reply_create(struct req *q, int rc, const struct fuse_entry_param *e,
                     const struct fuse_file_info *fi)
{
	struct sfs_fuse_open_reply out;

	if (rc < 0) {
		req_reply_err(q, rc);
		return rc;
	}
	settle(q);
	sfs_fuse_create_reply(&out, e, fi, file_of(q->r.req, fi)->backing);
	rc = fuse_reply_buf(q->r.req, (const char *)out.bytes, out.len);
	intent_end(q);
	return rc;
}

int req_reply_open(struct req *q, int rc, const struct fuse_file_info *fi)
{
	struct sfs_fuse_open_reply out;

	if (rc < 0) {
		req_reply_err(q, rc);
		return rc;
	}
	settle(q);
	sfs_fuse_open_reply(&out, fi, file_of(q->r.req, fi)->backing);
	return fuse_reply_buf(q->r.req, (const char *)out.bytes, out.len);
}

void req_reply_attr(struct req *q, int rc, const struct stat *st, double timeout)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	fuse_reply_attr(q->r.req, st, timeout);
}

void req_reply_statx(struct req *q, int rc, const struct statx *stx, double timeout)
{
	struct sfs_fuse_statx_out out;

	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	sfs_fuse_statx_out_fill(&out, stx, timeout);
	fuse_reply_buf(q->r.req, (const char *)&out, sizeof(out));
}

void req_reply_readlink(struct req *q, int rc, const char *link)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	fuse_reply_readlink(q->r.req, link);
}

void req_reply_write(struct req *q, ssize_t n)
{
	if (n < 0) {
		req_reply_err(q, n);
		return;
	}
	settle(q);
	fuse_reply_write(q->r.req, n);
	intent_end(q);
}

void req_reply_buf(struct req *q, int rc, const void *buf, size_t n)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	fuse_reply_buf(q->r.req, buf, n);
}

void req_reply_xattr(struct req *q, int rc, const void *buf, size_t size, size_t n)
{
	if (rc < 0 || size) {
		req_reply_buf(q, rc, buf, n);
		return;
	}
	settle(q);
	fuse_reply_xattr(q->r.req, n);
}

void req_reply_statfs(struct req *q, int rc, const struct statvfs *st)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	fuse_reply_statfs(q->r.req, st);
}

void req_reply_ioctl(struct req *q, int rc, const void *buf, size_t n)
{
	if (rc < 0) {
		req_reply_err(q, rc);
		return;
	}
	settle(q);
	fuse_reply_ioctl(q->r.req, 0, buf, n);
}

void req_reply_lock(struct req *q, const struct flock *fl)
{
	settle(q);
	fuse_reply_lock(q->r.req, fl);
}

void req_reply_lseek(struct req *q, off_t off)
{
	if (off < 0) {
		req_reply_err(q, off);
		return;
	}
	settle(q);
	fuse_reply_lseek(q->r.req, off);
}

void fd_path(char buf[40], int fd)
{
	snprintf(buf, 40, "/proc/self/fd/%d", fd);
}

int stat_fd(int fd, struct stat *st)
{
	return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* The kernel only sends such names, and the daemon relies on it to stay beneath the view's
 * root. Length is the backing's to judge (ENAMETOOLONG). */
bool valid_name(const char *name)
{
	return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}
