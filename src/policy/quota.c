/* quota, usrquota, grpquota, size=, inodes=: the limits a view enforces (contract §5.4). The
 * daemon accounts in every view (quota.c); this module only decides which of the ledger's
 * limits a request of this view is held to, and what df tells its caller. Root is not
 * exempt. */
#include <stdint.h>

#include "creds.h"
#include "services.h"
#include "view.h"
#include "policy.h"
#include "quota.h"

/* The ledger tables this view holds a request to, and the view's own limits. */
static unsigned enforced(const struct sfs_view *v, struct sfs_qlimits *view_lim)
{
	unsigned tables = 0;

	*view_lim = (struct sfs_qlimits){0};
	if (v->prof->opts.usrquota)
		tables |= SFS_CHARGE_USR;
	if (v->prof->opts.grpquota)
		tables |= SFS_CHARGE_GRP;
	if (v->prof->opts.size_limit || v->prof->opts.inode_limit) {
		/* the view's tree: the whole backing, or the root slot of its subdir */
		view_lim->hard[SFS_QBYTES] = v->prof->opts.size_limit;
		view_lim->hard[SFS_QINODES] = v->prof->opts.inode_limit;
		tables |= SFS_CHARGE_TOTAL;
	}
	return tables;
}

static bool quota_limits(const struct sfs_opts *o)
{
	return sfs_opts_enforce_quota(o);
}

static int quota_charge(const struct sfs_req *r, struct sfs_charge *c)
{
	struct sfs_qlimits lim;
	unsigned tables = enforced(r->view, &lim) & ~c->skip;

	c->root = r->view->qroot;
	return tables ? sfs_quota_reserve(c, tables, &lim) : 0;
}

static int quota_within(const struct sfs_req *r, struct sfs_charge *c)
{
	struct sfs_qlimits lim;
	unsigned tables = enforced(r->view, &lim);

	c->root = r->view->qroot;
	return tables ? sfs_quota_within(c, tables, &lim) : 0;
}

/* Shrinks the totals to a tighter limit: blocks and free space in f_frsize units, files. */
static void clamp(struct statvfs *st, uint64_t limit_bytes, int64_t used_bytes,
                  uint64_t limit_inodes, int64_t used_inodes)
{
	unsigned long frsize = st->f_frsize ? st->f_frsize : st->f_bsize;

	if (limit_bytes && frsize) {
		fsblkcnt_t blocks = limit_bytes / frsize;
		fsblkcnt_t used = used_bytes > 0 ? (fsblkcnt_t)((used_bytes + frsize - 1) / frsize) : 0;
		fsblkcnt_t free = used < blocks ? blocks - used : 0;
		if (blocks < st->f_blocks)
			st->f_blocks = blocks;
		if (free < st->f_bfree)
			st->f_bfree = free;
		if (free < st->f_bavail)
			st->f_bavail = free;
	}
	if (limit_inodes) {
		fsfilcnt_t files = limit_inodes;
		fsfilcnt_t free = used_inodes > 0 && (uint64_t)used_inodes < limit_inodes ?
		                          limit_inodes - (uint64_t)used_inodes :
		                          used_inodes > 0 ? 0 : limit_inodes;
		if (files < st->f_files)
			st->f_files = files;
		if (free < st->f_ffree)
			st->f_ffree = free;
		if (free < st->f_favail)
			st->f_favail = free;
	}
}

/* The tighter of the soft and hard limits: what the caller can count on. */
static uint64_t tightest(uint64_t soft, uint64_t hard)
{
	return soft && (!hard || soft < hard) ? soft : hard;
}

static void quota_statfs(const struct sfs_req *r, struct statvfs *st)
{
	struct sfs_quota *q = &r->view->svc->quota;
	const struct sfs_opts *o = &r->view->prof->opts;
	struct sfs_qentry e;

	if (o->size_limit || o->inode_limit) {
		sfs_quota_tree(q, r->view->qroot, &e);
		clamp(st, o->size_limit, e.used[SFS_QBYTES], o->inode_limit, e.used[SFS_QINODES]);
	}
	if (o->usrquota) {
		sfs_quota_usage(q, SFS_QUSR, sfs_creds_uid(), &e);
		clamp(st, tightest(e.lim.soft[SFS_QBYTES], e.lim.hard[SFS_QBYTES]), e.used[SFS_QBYTES],
		      tightest(e.lim.soft[SFS_QINODES], e.lim.hard[SFS_QINODES]), e.used[SFS_QINODES]);
	}
	if (o->grpquota) {
		sfs_quota_usage(q, SFS_QGRP, sfs_creds_gid(), &e);
		clamp(st, tightest(e.lim.soft[SFS_QBYTES], e.lim.hard[SFS_QBYTES]), e.used[SFS_QBYTES],
		      tightest(e.lim.soft[SFS_QINODES], e.lim.hard[SFS_QINODES]), e.used[SFS_QINODES]);
	}
}

/* Every write that can allocate must be priced before it is done: no write may bypass the
 * daemon. */
static const char *quota_no_passthrough(const struct sfs_opts *o)
{
	return quota_limits(o) ? sfs_opts_quota_name(o) : NULL;
}

const struct sfs_policy sfs_policy_quota = {
	.name = "quota",
	.limits = quota_limits,
	.no_passthrough = quota_no_passthrough,
	.charge = quota_charge,
	.within = quota_within,
	.statfs = quota_statfs,
};
