/* The quota ledger (see quota.h): the per-node bookkeeping that keeps usage exact, the
 * barrier and the reservations of modifying requests, and the ledger's start and stop. The
 * view trees are in quota_trees.c, the scans in quota_scan.c, the state file and the control
 * requests in quota_control.c. */
#include "quota.h"

#include <errno.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <syslog.h>

#include "quota_int.h"
#include "util.h"

/* ---- the ledger ------------------------------------------------------------------------ */

static struct sfs_qentry *entry_locked(struct sfs_quota *q, int type, uint32_t id)
{
	return sfs_qtable_get(&q->state.t[type], id);
}

/* Adds sign * nq to the ledger (lock held). */
static void account_locked(struct sfs_quota *q, const struct sfs_nodeq *nq, int sign, time_t now)
{
	const int64_t delta[SFS_QNRES] = {sign * nq->bytes, sign};
	struct sfs_qentry *u = entry_locked(q, SFS_QUSR, nq->uid);
	struct sfs_qentry *g = entry_locked(q, SFS_QGRP, nq->gid);
	time_t before[2][SFS_QNRES];

	if (!u || !g) {
		syslog(LOG_ERR, "%s: quota: out of memory; accounting is no longer exact",
		       q->ctx.source);
		return;
	}
	memcpy(before[0], u->grace_start, sizeof(before[0]));
	memcpy(before[1], g->grace_start, sizeof(before[1]));
	sfs_qentry_apply(u, delta, now);
	sfs_qentry_apply(g, delta, now);
	sfs_qentry_apply(&q->total, delta, now);
	for (uint32_t m = nq->rmask; m; m &= m - 1) {
		struct sfs_qroot *r = &q->roots[__builtin_ctz(m)];
		if (r->views)
			sfs_qentry_apply(&r->e, delta, now);
	}
	if (memcmp(before[0], u->grace_start, sizeof(before[0])) ||
	    memcmp(before[1], g->grace_start, sizeof(before[1])))
		q->dirty = true;
}

void sfs_quota_node_init(struct sfs_nodeq *nq, const struct stat *st)
{
	nq->bytes = (int64_t)st->st_blocks * 512;
	nq->uid = st->st_uid;
	nq->gid = st->st_gid;
	nq->counted = st->st_nlink > 0;
}

static pthread_mutex_t *stripe_of(struct sfs_quota *q, const struct sfs_node *node)
{
	return &q->stripes[((uintptr_t)node >> 6) % SFS_QSTRIPES];
}

/* Moves the ledger from what nq was counted as to st; nq becomes st. An object with no name
 * still exists while node has an open file, and is counted, as ext4 charges it; not while the
 * start-up scan runs, whose count, which cannot see it, then replaces the ledger's: a
 * successor's file that a predecessor left with no name is counted from its first change
 * after the scan. */
static void recount(struct sfs_quota *q, struct sfs_nodeq *nq, const struct stat *st,
                    const struct sfs_node *node)
{
	struct sfs_nodeq now;
	bool dirty;

	sfs_quota_node_init(&now, st);
	now.counted |= node && !S_ISDIR(st->st_mode) && atomic_load(&node->opens) > 0 &&
	               atomic_load(&q->scan) == SFS_SCAN_DONE;
	now.rmask = nq->rmask;
	now.rgen = nq->rgen;
	now.parent = nq->parent;
	if (now.bytes == nq->bytes && now.uid == nq->uid && now.gid == nq->gid &&
	    now.counted == nq->counted)
		return;
	pthread_mutex_lock(&q->lock);
	if (nq->counted)
		account_locked(q, nq, -1, time(NULL));
	if (now.counted)
		account_locked(q, &now, +1, time(NULL));
	dirty = q->dirty;
	pthread_mutex_unlock(&q->lock);
	*nq = now;
	if (dirty)
		q->ctx.wake(q->ctx.wake_arg);
}

long sfs_quota_sync(struct sfs_quota *q, struct sfs_node *node, struct sfs_nodeq *was, int fd)
{
	pthread_mutex_t *m = node ? stripe_of(q, node) : NULL;
	struct stat st;
	long nlink = -1;

	/* a tree's usage came from its scan, which saw the node where it is now */
	uint32_t mask = node ? sfs_quota_mask(q, node, fd) : was->rmask;

	if (m)
		pthread_mutex_lock(m);
	/* the stat is taken under the node's stripe, so two changes to one node are counted
	 * in the order their results were seen */
	if (node)
		node->q.rmask = mask;
	if (fstat(fd, &st) == 0) {
		recount(q, node ? &node->q : was, &st, node);
		nlink = st.st_nlink;
	}
	if (m)
		pthread_mutex_unlock(m);
	return nlink;
}

void sfs_quota_created(struct sfs_quota *q, struct sfs_node *node, const struct stat *st,
                       struct sfs_node *parent, int parent_fd)
{
	pthread_mutex_t *m = stripe_of(q, node);
	struct sfs_nodeq none = {0};
	uint32_t mask = sfs_quota_mask(q, parent, parent_fd);

	/* the node may be older than the object (an inode number used again): whatever it
	 * says, the ledger has not counted this object yet */
	pthread_mutex_lock(m);
	none.parent = parent->ino;
	none.rmask = mask;
	none.rgen = atomic_load(&q->rgen);
	node->q = none;
	recount(q, &node->q, st, node);
	pthread_mutex_unlock(m);
}

void sfs_quota_usage(struct sfs_quota *q, enum sfs_qtype type, uint32_t id,
                     struct sfs_qentry *out)
{
	const struct sfs_qentry *e;

	pthread_mutex_lock(&q->lock);
	e = sfs_qtable_find(&q->state.t[type], id);
	if (e)
		*out = *e;
	else
		memset(out, 0, sizeof(*out));
	pthread_mutex_unlock(&q->lock);
}

/* ---- requests: barrier and reservations ------------------------------------------------ */

void sfs_charge_begin(struct sfs_quota *q, struct sfs_charge *c)
{
	memset(c, 0, sizeof(*c));
	c->q = q;
	c->root = -1;
	if (atomic_load(&q->scan) == SFS_SCAN_RUNNING) {
		/* changes wait for the start-up scan, so it counts a tree nobody changes */
		pthread_mutex_lock(&q->lock);
		while (atomic_load(&q->scan) == SFS_SCAN_RUNNING)
			pthread_cond_wait(&scan_done_cond, &q->lock);
		pthread_mutex_unlock(&q->lock);
	}
	pthread_rwlock_rdlock(&q->barrier);
	c->entered = true;
}

static struct sfs_qentry *charged_entry(struct sfs_quota *q, const struct sfs_charge *c,
                                        unsigned table)
{
	if (table == SFS_CHARGE_TOTAL)
		return c->root >= 0 && c->root < SFS_QROOTS ? &q->roots[c->root].e : &q->total;
	return entry_locked(q, table == SFS_CHARGE_USR ? SFS_QUSR : SFS_QGRP,
	                    c->id[table == SFS_CHARGE_GRP]);
}

static const unsigned charge_tables[] = {SFS_CHARGE_USR, SFS_CHARGE_GRP, SFS_CHARGE_TOTAL};

/* Visits the tables of mask in order, t the table and e its ledger entry for c (NULL when no
 * memory could be had for it). Under the ledger lock. */
#define for_each_charged(q, c, mask, t, e)                                              \
	for (size_t i_ = 0; i_ < ARRAY_SIZE(charge_tables); i_++)                        \
		if (!((mask) & ((t) = charge_tables[i_])) ||                               \
		    ((e) = charged_entry((q), (c), (t)), false)) {                           \
		} else

/* e as the check sees it: for the total, with the view's limits. */
static int admit_locked(struct sfs_quota *q, unsigned table, struct sfs_qentry *e,
                        const struct sfs_qlimits *view_lim, const int64_t amount[SFS_QNRES])
{
	struct sfs_qentry viewed;

	if (table == SFS_CHARGE_TOTAL) {
		viewed = *e;
		viewed.lim = *view_lim;
		viewed.grace_start[SFS_QBYTES] = viewed.grace_start[SFS_QINODES] = 0;
		e = &viewed;
	}
	return sfs_qentry_admit(e, amount, time(NULL), q->state.grace);
}

/* Whether any of tables holds usage the start-up scan failed to count: the user and group
 * tables, and the whole backing's total (a root slot's comes from a scan of its own). A limit
 * on usage nobody knows cannot be kept, and is not waved through either: the request fails
 * with EIO, as ext4 fails one whose quota it cannot read; EDQUOT would tell the caller they
 * were over a limit, which nobody can tell. */
static bool usage_unknown(struct sfs_quota *q, const struct sfs_charge *c, unsigned tables)
{
	if (c->root >= 0)
		tables &= ~SFS_CHARGE_TOTAL;
	return tables && atomic_load(&q->scan) == SFS_SCAN_FAILED;
}

int sfs_quota_reserve(struct sfs_charge *c, unsigned tables, const struct sfs_qlimits *view_lim)
{
	struct sfs_quota *q = c->q;
	struct sfs_qentry *e;
	unsigned t;
	int rc = 0;

	if (!tables || (c->amount[SFS_QBYTES] <= 0 && c->amount[SFS_QINODES] <= 0))
		return 0; /* releases are always admitted */
	if (usage_unknown(q, c, tables))
		return -EIO;
	pthread_mutex_lock(&q->lock);
	/* all or nothing: every table must admit the amounts before any reserves them */
	for_each_charged(q, c, tables, t, e) {
		if (!rc)
			rc = e ? admit_locked(q, t, e, view_lim, c->amount) : -ENOMEM;
	}
	for_each_charged(q, c, rc ? 0 : tables, t, e) {
		for (int r = 0; r < SFS_QNRES; r++)
			e->reserved[r] += c->amount[r];
		c->tables |= t;
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int sfs_quota_within(struct sfs_charge *c, unsigned tables, const struct sfs_qlimits *view_lim)
{
	static const int64_t nothing_more[SFS_QNRES] = {1, 0};
	struct sfs_quota *q = c->q;
	struct sfs_qentry *e;
	unsigned t;
	int rc = 0;

	if (usage_unknown(q, c, tables))
		return -EIO;
	pthread_mutex_lock(&q->lock);
	for_each_charged(q, c, tables, t, e) {
		struct sfs_qentry probe;
		if (rc || !e)
			continue;
		/* over the limit now: what one more byte would meet, minus that byte */
		probe = *e;
		probe.used[SFS_QBYTES] -= 1;
		rc = admit_locked(q, t, &probe, view_lim, nothing_more);
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void sfs_charge_end(struct sfs_charge *c)
{
	struct sfs_quota *q = c->q;
	struct sfs_qentry *e;
	unsigned t;

	if (c->tables) {
		pthread_mutex_lock(&q->lock);
		for_each_charged(q, c, c->tables, t, e) {
			for (int r = 0; e && r < SFS_QNRES; r++)
				e->reserved[r] -= c->amount[r];
		}
		pthread_mutex_unlock(&q->lock);
		c->tables = 0;
	}
	if (c->entered)
		pthread_rwlock_unlock(&q->barrier);
	c->entered = false;
}

int64_t sfs_quota_alloc_bound(const struct sfs_quota *q, off_t off, off_t len)
{
	off_t bs = q->bsize;

	if (len <= 0 || off < 0 || off > INT64_MAX - len - bs)
		return 0;
	return (off + len + bs - 1) / bs * bs - off / bs * bs;
}

int64_t sfs_quota_alloc_bytes(struct sfs_quota *q, int fd, off_t off, off_t len)
{
	enum { N = 32 };
	union {
		struct fiemap fm;
		char buf[sizeof(struct fiemap) + N * sizeof(struct fiemap_extent)];
	} u;
	off_t bs = q->bsize, start, end, pos;
	int64_t mapped = 0;

	if (!sfs_quota_alloc_bound(q, off, len))
		return 0;
	start = off / bs * bs;
	end = (off + len + bs - 1) / bs * bs;
	/* what the range holds already (delayed and unwritten extents included) costs nothing */
	for (pos = start; pos < end;) {
		struct fiemap_extent *last;
		memset(&u.fm, 0, sizeof(u.fm));
		u.fm.fm_start = pos;
		u.fm.fm_length = end - pos;
		u.fm.fm_extent_count = N;
		if (ioctl(fd, FS_IOC_FIEMAP, &u.fm) < 0)
			return end - start; /* cannot tell: assume all of it is new */
		if (!u.fm.fm_mapped_extents)
			break;
		for (unsigned i = 0; i < u.fm.fm_mapped_extents; i++) {
			struct fiemap_extent *x = &u.fm.fm_extents[i];
			off_t a = x->fe_logical > (uint64_t)pos ? (off_t)x->fe_logical : pos;
			off_t b = x->fe_logical + x->fe_length < (uint64_t)end ?
			                  (off_t)(x->fe_logical + x->fe_length) : end;
			if (b > a)
				mapped += b - a;
		}
		last = &u.fm.fm_extents[u.fm.fm_mapped_extents - 1];
		if (last->fe_flags & FIEMAP_EXTENT_LAST || u.fm.fm_mapped_extents < N)
			break;
		pos = last->fe_logical + last->fe_length;
	}
	return end - start - mapped;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

int sfs_quota_start(struct sfs_quota *q, const struct sfs_quota_ctx *ctx, char *err,
                    size_t errlen)
{
	pthread_rwlockattr_t attr;
	struct statvfs sv;

	q->ctx = *ctx;
	sfs_qstate_init(&q->state);
	pthread_mutex_init(&q->lock, NULL);
	for (int i = 0; i < SFS_QSTRIPES; i++)
		pthread_mutex_init(&q->stripes[i], NULL);
	/* a waiting `quota check` must not starve behind a stream of writes */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&q->barrier, &attr);
	pthread_rwlockattr_destroy(&attr);
	q->bsize = fstatvfs(ctx->root_fd, &sv) == 0 && sv.f_bsize ? (long)sv.f_bsize : 4096;
	if (load_state(q, err, errlen))
		return -1;
	atomic_store(&q->scan, SFS_SCAN_RUNNING);
	if (pthread_create(&q->scan_thread, NULL, scan_thread, q)) {
		sfs_errf(err, errlen, ctx->source, "cannot start the quota scan: %s", strerror(errno));
		atomic_store(&q->scan, SFS_SCAN_FAILED);
		return -1;
	}
	q->scan_started = true;
	return 0;
}

void sfs_quota_stop(struct sfs_quota *q)
{
	if (!q->ctx.source)
		return;
	if (q->scan_started)
		pthread_join(q->scan_thread, NULL);
	q->scan_started = false;
	sfs_quota_flush(q);
	sfs_qstate_free(&q->state);
}
