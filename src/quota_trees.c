/* The view trees of the quota ledger (see quota.h): the tree of a subdir= view with size= or
 * inodes= has its usage kept apart, counted once by a scan of its own when its first view
 * comes, and every node knows which of these trees it is inside (its mask), so that a change
 * is charged to them and a move across their edge is refused. */
#include "quota.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "priv.h"
#include "fdcache.h"
#include "quota_int.h"
#include "util.h"

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
