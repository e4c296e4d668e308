/* The quota ledger's control side (see quota.h): the crash-safe state file in /.strictfs/
 * that keeps limits and grace timers across starts, the control requests that set them, and
 * the reports of `status` and `strictfs quota report|check`. */
#include "quota.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fdcache.h"
#include "quota_int.h"
#include "util.h"

#define STATE_FILE "quota"
#define STATE_NEW "quota.new"

/* ---- the state file ---------------------------------------------------------------------- */

int load_state(struct sfs_quota *q, char *err, size_t errlen)
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
	if (!rc)
		rc = recount_nameless(q, &s, 1u << slot);
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
	if (!rc)
		rc = recount_nameless(q, &s, 0);
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
