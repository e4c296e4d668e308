/* The quota ledger: the scan that builds usage at start, the per-node bookkeeping that keeps
 * it exact, reservations for enforcing views, and the crash-safe state file in /.strictfs/. */
#include "quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>

#include "creds.h"
#include "fdcache.h"
#include "inoset.h"
#include "util.h"

#define STATE_DIR ".strictfs"
#define STATE_FILE "quota"
#define STATE_NEW "quota.new"

static pthread_cond_t scan_done_cond = PTHREAD_COND_INITIALIZER;

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

/* ---- view trees ------------------------------------------------------------------------- */

static uint32_t root_bit(struct sfs_quota *q, ino_t ino)
{
	for (int i = 0; i < SFS_QROOTS; i++)
		if (q->roots[i].views && q->roots[i].ino == ino)
			return 1u << i;
	return 0;
}

/* The roots a directory is inside: itself and its ancestors, up to the backing's root. */
static uint32_t dir_mask(struct sfs_quota *q, int fd)
{
	uint32_t mask = 0;
	struct stat st;
	int cur, up;

	sfs_priv_begin(SFS_PRIV_SEARCH); /* the walk is the daemon's, not the caller's */
	cur = openat(fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (int depth = 0; cur >= 0 && depth < PATH_MAX; depth++) {
		if (fstat(cur, &st) < 0)
			break;
		mask |= root_bit(q, st.st_ino);
		if (st.st_ino == q->ctx.root_ino)
			break;
		up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = up;
	}
	if (cur >= 0)
		close(cur);
	sfs_priv_end();
	return mask;
}

void sfs_quota_placed(struct sfs_node *node, const struct sfs_node *parent)
{
	if (parent && !S_ISDIR(node->type))
		node->q.parent = parent->ino;
}

uint32_t sfs_quota_mask(struct sfs_quota *q, struct sfs_node *node, int fd)
{
	unsigned gen = atomic_load(&q->rgen);
	struct sfs_node *parent;
	uint32_t mask = 0;

	if (!atomic_load(&q->nroots))
		return 0;
	if (node->q.rgen == gen)
		return node->q.rmask;
	if (S_ISDIR(node->type)) {
		mask = dir_mask(q, fd);
	} else if ((parent = sfs_itab_find(q->ctx.itab, node->dev, node->q.parent)) &&
	           S_ISDIR(parent->type)) {
		/* the kernel holds the parent's dentry while it holds the child's, so the parent
		 * stays in the table */
		int pfd = sfs_fd_get(q->ctx.fdc, parent);
		if (pfd >= 0) {
			mask = sfs_quota_mask(q, parent, pfd);
			sfs_fd_put(q->ctx.fdc, parent);
		}
	}
	node->q.rmask = mask;
	node->q.rgen = gen;
	return mask;
}

int sfs_quota_may_move(struct sfs_quota *q, struct sfs_node *a, int afd, struct sfs_node *b,
                       int bfd)
{
	if (!atomic_load(&q->nroots) || a == b)
		return 0;
	return sfs_quota_mask(q, a, afd) == sfs_quota_mask(q, b, bfd) ? 0 : -EXDEV;
}

static pthread_mutex_t *stripe_of(struct sfs_quota *q, const struct sfs_node *node)
{
	return &q->stripes[((uintptr_t)node >> 6) % SFS_QSTRIPES];
}

/* Moves the ledger from what nq was counted as to st; nq becomes st. */
static void recount(struct sfs_quota *q, struct sfs_nodeq *nq, const struct stat *st)
{
	struct sfs_nodeq now;
	bool dirty;

	sfs_quota_node_init(&now, st);
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

void sfs_quota_sync(struct sfs_quota *q, struct sfs_node *node, struct sfs_nodeq *was, int fd)
{
	pthread_mutex_t *m = node ? stripe_of(q, node) : NULL;
	struct stat st;

	/* a tree's usage came from its scan, which saw the node where it is now */
	uint32_t mask = node ? sfs_quota_mask(q, node, fd) : was->rmask;

	if (m)
		pthread_mutex_lock(m);
	/* the stat is taken under the node's stripe, so two changes to one node are counted
	 * in the order their results were seen */
	if (node)
		node->q.rmask = mask;
	if (fstat(fd, &st) == 0)
		recount(q, node ? &node->q : was, &st);
	if (m)
		pthread_mutex_unlock(m);
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
	recount(q, &node->q, st);
	pthread_mutex_unlock(m);
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

/* ---- the scan ---------------------------------------------------------------------------- */

struct handle {
	struct file_handle fh;
	unsigned char bytes[MAX_HANDLE_SZ];
};

/* Directories still to read, as handles: a deep tree costs memory, not descriptors. */
struct dirqueue {
	struct handle *h;
	size_t head, n, cap;
};

static int dirqueue_push(struct dirqueue *q, int dirfd, const char *name)
{
	int mount_id;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 256;
		struct handle *h = realloc(q->h, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		q->h = h;
		q->cap = cap;
	}
	q->h[q->n].fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, &q->h[q->n].fh, &mount_id, 0) < 0)
		return -errno;
	q->n++;
	return 0;
}

struct scan;
/* How a walk counts each object it finds (count_once, count_later). */
typedef int count_fn(struct scan *s, const struct stat *st);

struct scan {
	struct sfs_quota *q;
	count_fn *count;
	struct sfs_qstate usage;
	struct sfs_qentry total;
	struct sfs_inoset links;     /* count_once: multiply linked files already counted */
	struct sfs_qlink *names;     /* count_later: every name of a multiply linked file */
	size_t nnames, capnames;
	dev_t dev;
	time_t last_report;
	char where[PATH_MAX];        /* where the walk failed: a path in the backing */
};

/* A large tree takes a while: one progress line every 5 seconds. */
static void scan_progress(struct scan *s)
{
	unsigned long long done = atomic_load(&s->q->scanned), all = atomic_load(&s->q->expected);
	time_t now;

	if (done % 4096)
		return;
	now = time(NULL);
	if (!s->last_report)
		s->last_report = now;
	if (now - s->last_report < 5)
		return;
	s->last_report = now;
	syslog(LOG_INFO, "%s: quota scan: %llu of about %llu inodes counted", s->q->ctx.source, done,
	       all);
}

/* The scans of the start and of a view's tree show their progress in status. */
static void progress_start(struct sfs_quota *q)
{
	struct statvfs sv;

	atomic_store(&q->scanned, 0);
	if (fstatvfs(q->ctx.root_fd, &sv) == 0)
		atomic_store(&q->expected, sv.f_files - sv.f_ffree);
}

static int add_usage(struct scan *s, uint32_t uid, uint32_t gid, int64_t bytes)
{
	struct sfs_qentry *u = sfs_qtable_get(&s->usage.t[SFS_QUSR], uid);
	struct sfs_qentry *g = sfs_qtable_get(&s->usage.t[SFS_QGRP], gid);
	const int64_t delta[SFS_QNRES] = {bytes, 1};

	if (!u || !g)
		return -ENOMEM;
	for (int r = 0; r < SFS_QNRES; r++) {
		u->used[r] += delta[r];
		g->used[r] += delta[r];
		s->total.used[r] += delta[r];
	}
	return 0;
}

static bool multiply_linked(const struct stat *st)
{
	return !S_ISDIR(st->st_mode) && st->st_nlink > 1;
}

/* The ledger's count: a hard link counts at its first name, or not at all when no memory can
 * tell. */
static int count_once(struct scan *s, const struct stat *st)
{
	int rc;

	if (multiply_linked(st) && (rc = sfs_inoset_add(&s->links, st->st_ino)) <= 0)
		return rc;
	if ((rc = add_usage(s, st->st_uid, st->st_gid, (int64_t)st->st_blocks * 512)))
		return rc;
	atomic_fetch_add(&s->q->scanned, 1);
	scan_progress(s);
	return 0;
}

/* quota check's count, apart from the ledger's: every name of a multiply linked file is kept,
 * and each inode counted once when the walk is over (count_names). */
static int count_later(struct scan *s, const struct stat *st)
{
	if (!multiply_linked(st))
		return add_usage(s, st->st_uid, st->st_gid, (int64_t)st->st_blocks * 512);
	if (s->nnames == s->capnames) {
		size_t cap = s->capnames ? s->capnames * 2 : 1024;
		struct sfs_qlink *a = realloc(s->names, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->names = a;
		s->capnames = cap;
	}
	s->names[s->nnames++] = (struct sfs_qlink){.ino = st->st_ino, .uid = st->st_uid,
	                                           .gid = st->st_gid,
	                                           .bytes = (int64_t)st->st_blocks * 512};
	return 0;
}

static int count_names(struct scan *s)
{
	size_t n = sfs_qlinks_unique(s->names, s->nnames);
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++)
		rc = add_usage(s, s->names[i].uid, s->names[i].gid, s->names[i].bytes);
	return rc;
}

/* Where a walk stopped, for the one line that refuses what it leaves unknown: the path in the
 * backing of the directory open as dirfd, and name in it (NULL: the directory itself). */
static void note_where(struct scan *s, int dirfd, const char *name)
{
	char link[32];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, s->where, sizeof(s->where) - 1);
	s->where[n > 0 ? n : 0] = '\0';
	if (n <= 0)
		snprintf(s->where, sizeof(s->where), "(a directory of the backing)");
	if (name) {
		size_t len = strlen(s->where);
		snprintf(s->where + len, sizeof(s->where) - len, "%s%s", strcmp(s->where, "/") ? "/" : "",
		         name);
	}
}

/* A queued directory that would not open: its path if the kernel can still give one, else its
 * inode number (ext4's handles begin with it), as debugfs and e2fsck name inodes. */
static void note_handle(struct scan *s, struct file_handle *fh)
{
	int fd = open_by_handle_at(s->q->ctx.handle_fd, fh, O_PATH | O_CLOEXEC);
	uint32_t ino = 0;

	if (fd >= 0) {
		note_where(s, fd, NULL);
		close(fd);
		return;
	}
	if (fh->handle_bytes >= sizeof(ino))
		memcpy(&ino, fh->f_handle, sizeof(ino));
	snprintf(s->where, sizeof(s->where), "inode %u", ino);
}

/* One entry of a directory: counted, and queued if it is a directory. */
static int scan_entry(struct scan *s, struct dirqueue *dq, int dirfd, const char *name)
{
	struct stat st;
	int rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (st.st_dev != s->dev)
		return 0;
	rc = s->count(s, &st);
	if (!rc && S_ISDIR(st.st_mode))
		rc = dirqueue_push(dq, dirfd, name);
	return rc;
}

static int scan_dir(struct scan *s, struct dirqueue *dq, int fd, bool is_root)
{
	DIR *dp = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!dp) {
		rc = -errno;
		note_where(s, fd, NULL);
		close(fd);
		return rc;
	}
	while (!rc && (errno = 0, de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (is_root && !strcmp(de->d_name, STATE_DIR))
			continue; /* the daemon's own state is nobody's usage */
		if ((rc = scan_entry(s, dq, dirfd(dp), de->d_name)))
			note_where(s, dirfd(dp), de->d_name);
	}
	if (!rc && errno) {
		rc = -errno; /* the directory could not be read (a damaged block: EBADMSG, EUCLEAN) */
		note_where(s, dirfd(dp), NULL);
	}
	closedir(dp);
	return rc;
}

/* Counts every inode of the tree at top (any descriptor of a directory) into s, each as count
 * says (hard links once, /.strictfs left out). */
static int walk_tree(struct sfs_quota *q, struct scan *s, int top, count_fn *count)
{
	const struct sfs_quota_ctx *ctx = &q->ctx;
	struct dirqueue dq = {0};
	struct stat st;
	int rc, fd;

	memset(s, 0, sizeof(*s));
	s->q = q;
	s->count = count;
	sfs_qstate_init(&s->usage);
	note_where(s, top, NULL);
	if (fstat(top, &st) < 0)
		return -errno;
	s->dev = st.st_dev;
	if ((rc = count(s, &st)))
		goto out;
	fd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? -errno : scan_dir(s, &dq, fd, st.st_ino == ctx->root_ino);
	while (!rc && dq.head < dq.n) {
		struct file_handle *fh = &dq.h[dq.head++].fh;
		fd = open_by_handle_at(ctx->handle_fd, fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			rc = errno == ESTALE || errno == ENOENT ? 0 : -errno;
			if (rc)
				note_handle(s, fh);
			continue;
		}
		rc = scan_dir(s, &dq, fd, false);
		if (dq.head > 4096 && dq.head * 2 > dq.n) {
			memmove(dq.h, dq.h + dq.head, (dq.n - dq.head) * sizeof(*dq.h));
			dq.n -= dq.head;
			dq.head = 0;
		}
	}
	if (!rc)
		rc = count_names(s);
out:
	free(dq.h);
	sfs_inoset_free(&s->links);
	free(s->names);
	s->names = NULL;
	return rc;
}

/* The ledger's scans: the tree at top counted as the ledger counts. */
static int scan_tree_at(struct sfs_quota *q, struct scan *s, int top)
{
	return walk_tree(q, s, top, count_once);
}

/* Every inode of the backing, for the ledger. */
static int scan_tree(struct sfs_quota *q, struct scan *s)
{
	return scan_tree_at(q, s, q->ctx.root_fd);
}

/* quota check's count of the tree at top: the same objects, hard links told apart its own way. */
static int recount_tree_at(struct sfs_quota *q, struct scan *s, int top)
{
	return walk_tree(q, s, top, count_later);
}

static void scan_free(struct scan *s)
{
	sfs_qstate_free(&s->usage);
}

static void wait_startup_scan(struct sfs_quota *q)
{
	pthread_mutex_lock(&q->lock);
	while (atomic_load(&q->scan) == SFS_SCAN_RUNNING)
		pthread_cond_wait(&scan_done_cond, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

void sfs_quota_wait_scan(struct sfs_quota *q, int ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&q->lock);
	while (atomic_load(&q->scan) == SFS_SCAN_RUNNING &&
	       pthread_cond_timedwait(&scan_done_cond, &q->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&q->lock);
}

/* Whether o enforces limits on usage the start-up scan counts: the user and group tables and
 * the whole backing's total (a subdir= tree with size= or inodes= is counted by a scan of its
 * own, sfs_quota_add_root). */
static bool rests_on_scan(const struct sfs_opts *o)
{
	return o->usrquota || o->grpquota ||
	       ((o->size_limit || o->inode_limit) && !strcmp(o->subdir, "/"));
}

static const char *limits_named(const struct sfs_opts *o)
{
	if (o->usrquota && o->grpquota)
		return "quota";
	if (o->usrquota || o->grpquota)
		return o->usrquota ? "usrquota" : "grpquota";
	return o->size_limit ? "size=" : "inodes=";
}

int sfs_quota_enforceable(struct sfs_quota *q, const struct sfs_opts *o, const struct sfs_opts *was,
                          char *err, size_t errlen)
{
	if (atomic_load(&q->scan) != SFS_SCAN_FAILED || !rests_on_scan(o) ||
	    (was && rests_on_scan(was)))
		return 0;
	sfs_errf(err, errlen, q->scan_where, "quota scan failed: %s (on %s: the usage %s would "
	         "limit is not known)", strerror(q->scan_errno), q->ctx.source, limits_named(o));
	return -EIO;
}

int sfs_quota_add_root(struct sfs_quota *q, struct sfs_node *root, int fd, char *err,
                       size_t errlen)
{
	int slot = -1, rc;
	struct scan s;

	wait_startup_scan(q);
	/* nothing changes while the tree is counted, and the masks are recomputed after */
	pthread_rwlock_wrlock(&q->barrier);
	for (int i = 0; i < SFS_QROOTS && slot < 0; i++)
		if (q->roots[i].views && q->roots[i].ino == root->ino)
			slot = i;
	if (slot >= 0) {
		q->roots[slot].views++;
		goto out;
	}
	for (int i = 0; i < SFS_QROOTS && slot < 0; i++)
		if (!q->roots[i].views)
			slot = i;
	if (slot < 0) {
		sfs_errf(err, errlen, "size", "at most %d view trees with size= or inodes= per backing",
		         SFS_QROOTS);
		goto out;
	}
	progress_start(q);
	if ((rc = scan_tree_at(q, &s, fd))) {
		sfs_errf(err, errlen, s.where, "quota scan failed: %s (the usage of the view's tree is "
		         "not known)", strerror(-rc));
		scan_free(&s);
		slot = -1;
		goto out;
	}
	pthread_mutex_lock(&q->lock);
	memset(&q->roots[slot], 0, sizeof(q->roots[slot]));
	q->roots[slot].views = 1;
	q->roots[slot].ino = root->ino;
	q->roots[slot].node = root;
	memcpy(q->roots[slot].e.used, s.total.used, sizeof(s.total.used));
	pthread_mutex_unlock(&q->lock);
	scan_free(&s);
	atomic_fetch_add(&q->nroots, 1);
	atomic_fetch_add(&q->rgen, 1);
out:
	pthread_rwlock_unlock(&q->barrier);
	return slot;
}

void sfs_quota_drop_root(struct sfs_quota *q, int slot)
{
	if (slot < 0 || slot >= SFS_QROOTS)
		return;
	pthread_rwlock_wrlock(&q->barrier);
	if (q->roots[slot].views && --q->roots[slot].views == 0) {
		pthread_mutex_lock(&q->lock);
		memset(&q->roots[slot], 0, sizeof(q->roots[slot]));
		pthread_mutex_unlock(&q->lock);
		atomic_fetch_sub(&q->nroots, 1);
		atomic_fetch_add(&q->rgen, 1);
	}
	pthread_rwlock_unlock(&q->barrier);
}

void sfs_quota_tree(struct sfs_quota *q, int slot, struct sfs_qentry *out)
{
	pthread_mutex_lock(&q->lock);
	*out = slot >= 0 && slot < SFS_QROOTS ? q->roots[slot].e : q->total;
	pthread_mutex_unlock(&q->lock);
}

/* The ledger's usage becomes the scan's (lock held); limits and grace timers stay. */
static void adopt_usage_locked(struct sfs_quota *q, struct scan *s)
{
	time_t now = time(NULL);

	for (int t = 0; t < SFS_QNTYPES; t++) {
		for (size_t i = 0; i < q->state.t[t].n; i++)
			memset(q->state.t[t].e[i].used, 0, sizeof(q->state.t[t].e[i].used));
		for (size_t i = 0; i < s->usage.t[t].n; i++) {
			struct sfs_qentry *e = sfs_qtable_get(&q->state.t[t], s->usage.t[t].e[i].id);
			if (e)
				memcpy(e->used, s->usage.t[t].e[i].used, sizeof(e->used));
		}
		for (size_t i = 0; i < q->state.t[t].n; i++) {
			struct sfs_qentry *e = &q->state.t[t].e[i];
			const int64_t none[SFS_QNRES] = {0, 0};
			time_t before[SFS_QNRES];
			memcpy(before, e->grace_start, sizeof(before));
			sfs_qentry_apply(e, none, now);
			if (memcmp(before, e->grace_start, sizeof(before)))
				q->dirty = true;
		}
	}
	memcpy(q->total.used, s->total.used, sizeof(q->total.used));
}

static void *scan_thread(void *arg)
{
	struct sfs_quota *q = arg;
	struct timespec t0, t1;
	struct scan s;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	progress_start(q);
	rc = scan_tree(q, &s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_mutex_lock(&q->lock);
	if (!rc)
		adopt_usage_locked(q, &s);
	if (rc) { /* where and why first: whoever sees the scan failed reads them */
		sfs_strlcpy(q->scan_where, s.where, sizeof(q->scan_where));
		q->scan_errno = -rc;
	}
	atomic_store(&q->scan, rc ? SFS_SCAN_FAILED : SFS_SCAN_DONE);
	pthread_cond_broadcast(&scan_done_cond);
	pthread_mutex_unlock(&q->lock);
	if (rc)
		syslog(LOG_ERR, "%s: quota scan failed at %s: %s; usage is not known, so views that "
		       "would enforce limits on it are refused", q->ctx.source, s.where, strerror(-rc));
	else
		syslog(LOG_INFO, "%s: quota scan done: %llu inodes, %lld KiB in %.1f s", q->ctx.source,
		       (unsigned long long)atomic_load(&q->scanned),
		       (long long)(s.total.used[SFS_QBYTES] / 1024),
		       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	scan_free(&s);
	q->ctx.wake(q->ctx.wake_arg);
	return NULL;
}

/* ---- the state file ---------------------------------------------------------------------- */

static int load_state(struct sfs_quota *q, char *err, size_t errlen)
{
	int root = q->ctx.root_fd, dir, fd;
	char perr[128], *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int rc = 0;

	dir = openat(root, STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 && errno == ENOENT)
		return 0;
	fd = dir < 0 ? -1 : openat(dir, STATE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		if (rc)
			sfs_errf(err, errlen, "/" STATE_DIR "/" STATE_FILE, "cannot read it on %s: %s",
			         q->ctx.device, strerror(errno));
		goto out;
	}
	do {
		if (len == cap) {
			char *b = cap > SFS_QSTATE_MAX ? NULL : realloc(buf, cap = cap * 2 + 4096);
			if (!b) {
				n = -1;
				errno = EFBIG;
				break;
			}
			buf = b;
		}
		n = read(fd, buf + len, cap - len);
		if (n > 0)
			len += n;
	} while (n > 0);
	if (n < 0) {
		rc = -errno;
		sfs_errf(err, errlen, "/" STATE_DIR "/" STATE_FILE, "cannot read it on %s: %s",
		         q->ctx.device, strerror(errno));
	} else if (sfs_qstate_parse(buf, len, &q->state, perr, sizeof(perr))) {
		rc = -EINVAL;
		sfs_errf(err, errlen, "/" STATE_DIR "/" STATE_FILE, "%s (on %s; fix or remove it)",
		         perr, q->ctx.device);
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	return rc;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* New file, fsync, rename, fsync of the directory (contract §3.5). Ledger lock held. */
static int save_state_locked(struct sfs_quota *q)
{
	int root = q->ctx.root_fd, dir = -1, fd = -1, rc;
	bool made = false;
	size_t len;
	char *buf;

	if ((rc = sfs_qstate_format(&q->state, &buf, &len)))
		return rc;
	if (mkdirat(root, STATE_DIR, 0700) == 0)
		made = true;
	else if (errno != EEXIST) {
		rc = -errno;
		goto out;
	}
	dir = openat(root, STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0) {
		rc = -errno;
		goto out;
	}
	fd = openat(dir, STATE_NEW, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if ((rc = write_all(fd, buf, len)) || (rc = fsync(fd) < 0 ? -errno : 0))
		goto out;
	if (renameat(dir, STATE_NEW, dir, STATE_FILE) < 0 || fsync(dir) < 0) {
		rc = -errno;
		goto out;
	}
	if (made) {
		int r = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (r >= 0) {
			fsync(r);
			close(r);
		}
	}
	q->dirty = false;
out:
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	free(buf);
	return rc;
}

void sfs_quota_flush(struct sfs_quota *q)
{
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (q->dirty && !q->ctx.read_only)
		rc = save_state_locked(q);
	pthread_mutex_unlock(&q->lock);
	if (rc)
		syslog(LOG_ERR, "%s: /" STATE_DIR "/" STATE_FILE ": %s", q->ctx.source, strerror(-rc));
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

/* ---- control requests ---------------------------------------------------------------------- */

/* A control request that changes the state: the backing must keep it; takes the ledger lock. */
static int lock_writable(struct sfs_quota *q, const char *what, char *err, size_t errlen)
{
	if (q->ctx.read_only) {
		sfs_errf(err, errlen, q->ctx.source, "the backing is read-only; %s cannot be kept", what);
		return -1;
	}
	pthread_mutex_lock(&q->lock);
	return 0;
}

/* Writes the state (ledger lock held) and lets go of the lock: 0, or -1 with the reason. */
static int save_and_unlock(struct sfs_quota *q, char *err, size_t errlen)
{
	int rc = save_state_locked(q);

	pthread_mutex_unlock(&q->lock);
	if (rc) {
		sfs_errf(err, errlen, "/" STATE_DIR "/" STATE_FILE, "cannot write it: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

int sfs_quota_set(struct sfs_quota *q, enum sfs_qtype type, uint32_t id,
                  const uint64_t soft[SFS_QNRES], const uint64_t hard[SFS_QNRES],
                  unsigned which, char *err, size_t errlen)
{
	struct sfs_qentry *e;

	if (lock_writable(q, "limits", err, errlen))
		return -1;
	e = sfs_qtable_get(&q->state.t[type], id);
	if (!e) {
		pthread_mutex_unlock(&q->lock);
		sfs_errf(err, errlen, q->ctx.source, "out of memory");
		return -1;
	}
	if (which & SFS_QSET_BSOFT)
		e->lim.soft[SFS_QBYTES] = soft[SFS_QBYTES];
	if (which & SFS_QSET_BHARD)
		e->lim.hard[SFS_QBYTES] = hard[SFS_QBYTES];
	if (which & SFS_QSET_ISOFT)
		e->lim.soft[SFS_QINODES] = soft[SFS_QINODES];
	if (which & SFS_QSET_IHARD)
		e->lim.hard[SFS_QINODES] = hard[SFS_QINODES];
	{
		/* a soft limit set below the usage starts its grace time now */
		const int64_t none[SFS_QNRES] = {0, 0};
		sfs_qentry_apply(e, none, time(NULL));
	}
	return save_and_unlock(q, err, errlen);
}

int sfs_quota_set_grace(struct sfs_quota *q, const time_t grace[SFS_QNRES], unsigned which,
                        char *err, size_t errlen)
{
	if (lock_writable(q, "grace times", err, errlen))
		return -1;
	if (which & SFS_QSET_BGRACE)
		q->state.grace[SFS_QBYTES] = grace[SFS_QBYTES];
	if (which & SFS_QSET_IGRACE)
		q->state.grace[SFS_QINODES] = grace[SFS_QINODES];
	return save_and_unlock(q, err, errlen);
}

static json_object *entry_json(const struct sfs_qentry *e, const time_t grace[SFS_QNRES],
                               bool with_id)
{
	static const char *const res[SFS_QNRES] = {"bytes", "inodes"};
	json_object *o = json_object_new_object();

	if (with_id)
		json_object_object_add(o, "id", json_object_new_int64(e->id));
	for (int r = 0; r < SFS_QNRES; r++) {
		json_object *x = json_object_new_object();
		json_object_object_add(x, "used", json_object_new_int64(e->used[r]));
		json_object_object_add(x, "soft", json_object_new_int64((int64_t)e->lim.soft[r]));
		json_object_object_add(x, "hard", json_object_new_int64((int64_t)e->lim.hard[r]));
		if (e->grace_start[r] && grace)
			json_object_object_add(x, "grace_ends",
			                       json_object_new_int64(e->grace_start[r] + grace[r]));
		json_object_object_add(o, res[r], x);
	}
	return o;
}

json_object *sfs_quota_status(struct sfs_quota *q)
{
	static const char *const names[] = {"running", "done", "failed"};
	json_object *o = json_object_new_object();
	int s = atomic_load(&q->scan);
	unsigned long long done = atomic_load(&q->scanned), all = atomic_load(&q->expected);
	double p = s == SFS_SCAN_DONE ? 1.0 : all ? (double)done / (double)all : 0.0;

	char text[32];

	/* spelled by us, not by json-c, whose way of writing doubles differs between releases
	 * (0.16 writes 1, 0.18 1.0): the schema's number, the same everywhere */
	snprintf(text, sizeof(text), "%.4g", p > 1.0 ? 1.0 : p);
	json_object_object_add(o, "scan", json_object_new_string(names[s]));
	json_object_object_add(o, "progress", json_object_new_double_s(p > 1.0 ? 1.0 : p, text));
	json_object_object_add(o, "inodes_scanned", json_object_new_int64((int64_t)done));
	if (s == SFS_SCAN_FAILED) {
		json_object_object_add(o, "failed_at", json_object_new_string(q->scan_where));
		json_object_object_add(o, "error", json_object_new_string(strerror(q->scan_errno)));
	}
	return o;
}

json_object *sfs_quota_report(struct sfs_quota *q)
{
	static const char *const tables[SFS_QNTYPES] = {"users", "groups"};
	json_object *o = json_object_new_object(), *g = json_object_new_object();

	pthread_mutex_lock(&q->lock);
	json_object_object_add(g, "blocks", json_object_new_int64(q->state.grace[SFS_QBYTES]));
	json_object_object_add(g, "inodes", json_object_new_int64(q->state.grace[SFS_QINODES]));
	json_object_object_add(o, "grace", g);
	for (int t = 0; t < SFS_QNTYPES; t++) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < q->state.t[t].n; i++) {
			const struct sfs_qentry *e = &q->state.t[t].e[i];
			if (e->used[SFS_QINODES] || sfs_qentry_persistent(e))
				json_object_array_add(a, entry_json(e, q->state.grace, true));
		}
		json_object_object_add(o, tables[t], a);
	}
	json_object_object_add(o, "total", entry_json(&q->total, NULL, false));
	pthread_mutex_unlock(&q->lock);
	json_object_object_add(o, "scan", sfs_quota_status(q));
	return o;
}

static void add_difference(json_object *diffs, const char *what, uint32_t id, const char *res,
                           int64_t live, int64_t scanned)
{
	json_object *x = json_object_new_object();

	json_object_object_add(x, "table", json_object_new_string(what));
	json_object_object_add(x, "id", json_object_new_int64(id));
	json_object_object_add(x, "resource", json_object_new_string(res));
	json_object_object_add(x, "live", json_object_new_int64(live));
	json_object_object_add(x, "scan", json_object_new_int64(scanned));
	json_object_array_add(diffs, x);
}

/* Every id either table knows: live usage against the scan's. */
static void compare_tables(const struct sfs_qtable *live, const struct sfs_qtable *scan,
                           const char *what, json_object *diffs)
{
	static const char *const res[SFS_QNRES] = {"bytes", "inodes"};
	const struct sfs_qtable *both[2] = {live, scan};

	for (int side = 0; side < 2; side++) {
		for (size_t i = 0; i < both[side]->n; i++) {
			uint32_t id = both[side]->e[i].id;
			const struct sfs_qentry *l = sfs_qtable_find(live, id), *s = sfs_qtable_find(scan, id);
			if (side == 1 && l)
				continue; /* compared from the live side */
			for (int r = 0; r < SFS_QNRES; r++) {
				int64_t a = l ? l->used[r] : 0, b = s ? s->used[r] : 0;
				if (a != b)
					add_difference(diffs, what, id, res[r], a, b);
			}
		}
	}
}

/* A view tree's live usage against a fresh count of it (barrier held). */
static int compare_root(struct sfs_quota *q, int slot, json_object *diffs)
{
	struct sfs_qroot *r = &q->roots[slot];
	int fd = sfs_fd_get(q->ctx.fdc, r->node), rc;
	struct scan s;

	if (fd < 0)
		return fd;
	rc = recount_tree_at(q, &s, fd);
	sfs_fd_put(q->ctx.fdc, r->node);
	for (int k = 0; !rc && k < SFS_QNRES; k++)
		if (r->e.used[k] != s.total.used[k])
			add_difference(diffs, "tree", (uint32_t)r->ino, k ? "inodes" : "bytes", r->e.used[k],
			               s.total.used[k]);
	scan_free(&s);
	return rc;
}

json_object *sfs_quota_check(struct sfs_quota *q, bool *same)
{
	json_object *o = json_object_new_object(), *diffs = json_object_new_array();
	struct scan s;
	int rc;

	if (atomic_load(&q->scan) != SFS_SCAN_DONE) {
		char why[PATH_MAX + 128] = "the start-up scan has not finished";
		if (atomic_load(&q->scan) == SFS_SCAN_FAILED)
			snprintf(why, sizeof(why), "the start-up scan failed at %s: %s; usage is not known",
			         q->scan_where, strerror(q->scan_errno));
		*same = false;
		json_object_object_add(o, "error", json_object_new_string(why));
		json_object_put(diffs);
		return o;
	}
	/* no change runs while the tree is counted again; writes still in the page cache are
	 * allocated first, so both sides see the same blocks */
	pthread_rwlock_wrlock(&q->barrier);
	syncfs(q->ctx.root_fd);
	rc = recount_tree_at(q, &s, q->ctx.root_fd);
	pthread_mutex_lock(&q->lock);
	if (!rc) {
		compare_tables(&q->state.t[SFS_QUSR], &s.usage.t[SFS_QUSR], "user", diffs);
		compare_tables(&q->state.t[SFS_QGRP], &s.usage.t[SFS_QGRP], "group", diffs);
		for (int r = 0; r < SFS_QNRES; r++)
			if (q->total.used[r] != s.total.used[r])
				add_difference(diffs, "total", 0, r ? "inodes" : "bytes", q->total.used[r],
				               s.total.used[r]);
	}
	json_object_object_add(o, "inodes", json_object_new_int64(s.total.used[SFS_QINODES]));
	json_object_object_add(o, "bytes", json_object_new_int64(s.total.used[SFS_QBYTES]));
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; !rc && i < SFS_QROOTS; i++)
		if (q->roots[i].views)
			rc = compare_root(q, i, diffs);
	pthread_rwlock_unlock(&q->barrier);
	scan_free(&s);
	if (rc)
		json_object_object_add(o, "error", json_object_new_string(strerror(-rc)));
	*same = !rc && json_object_array_length(diffs) == 0;
	json_object_object_add(o, "differences", diffs);
	return o;
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

