/* The quota scans (see quota.h): the start-up scan that builds the ledger's usage while
 * changes wait for it, and the counts of a view's tree (for quota_trees.c) and of `quota
 * check` (for quota_control.c). Each walks breadth first over file handles, so a deep tree
 * costs memory, not descriptors. */
#include "quota.h"

#include "fdcache.h"
#include "inode.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>

#include "inoset.h"
#include "quota_int.h"
#include "util.h"

pthread_cond_t scan_done_cond = PTHREAD_COND_INITIALIZER;

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
void progress_start(struct sfs_quota *q)
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
int scan_tree_at(struct sfs_quota *q, struct scan *s, int top)
{
	return walk_tree(q, s, top, count_once);
}

/* Every inode of the backing, for the ledger. */
static int scan_tree(struct sfs_quota *q, struct scan *s)
{
	return scan_tree_at(q, s, q->ctx.root_fd);
}

/* quota check's count of the tree at top: the same objects, hard links told apart its own way. */
int recount_tree_at(struct sfs_quota *q, struct scan *s, int top)
{
	return walk_tree(q, s, top, count_later);
}

struct nameless {
	struct scan *s;
	uint32_t rmask; /* the view trees counted, 0 for the whole backing */
	int rc;
};

static void count_if_nameless(void *arg, struct sfs_node *n)
{
	struct nameless *x = arg;
	struct stat st;
	int fd;

	/* only what the ledger counts: not a file a predecessor left with no name that has not
	 * changed since the start-up scan (quota.c, recount) */
	if (n->type == S_IFDIR || !n->q.counted || (x->rmask && !(n->q.rmask & x->rmask)) ||
	    (fd = sfs_fd_get(x->s->q->ctx.fdc, n)) < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_nlink == 0 && !x->rc)
		x->rc = add_usage(x->s, st.st_uid, st.st_gid, (int64_t)st.st_blocks * 512);
	sfs_fd_put(x->s->q->ctx.fdc, n);
}

int recount_nameless(struct sfs_quota *q, struct scan *s, uint32_t rmask)
{
	struct nameless x = {.s = s, .rmask = rmask};

	sfs_itab_each_open(q->ctx.itab, count_if_nameless, &x);
	return x.rc;
}

void scan_free(struct scan *s)
{
	sfs_qstate_free(&s->usage);
}

void wait_startup_scan(struct sfs_quota *q)
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

void *scan_thread(void *arg)
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
