/* Coherence between views (see coherence.h): one notifier thread delivers invalidations in
 * order; a request waits for its own, bounded, before it answers. */
#include "coherence.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "view.h"

#define FLUSH_BOUND_MS 200
#define MAX_TARGETS 64

enum kind { INVAL_INODE, INVAL_ENTRY };

struct item {
	struct item *next;
	uint64_t seq;
	uint32_t slot;
	enum kind kind;
	fuse_ino_t ino;      /* the inode, or the parent of the entry */
	off_t off, len;      /* INVAL_INODE: off < 0 means attributes only */
	char name[];
};

struct sfs_coherence {
	struct sfs_daemon *d;
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t done;
	struct item *head, *tail;
	uint64_t next_seq, done_seq;
	bool stop;
	pthread_t thread;
};

static __thread uint64_t last_queued;

static void deliver(struct sfs_daemon *d, const struct item *it)
{
	struct sfs_view *w;

	pthread_rwlock_rdlock(&d->views_lock);
	w = it->slot < SFS_MAX_VIEWS ? d->views[it->slot] : NULL;
	if (w && w->se && !atomic_load(&w->ended)) {
		if (it->kind == INVAL_ENTRY)
			fuse_lowlevel_notify_inval_entry(w->se, it->ino, it->name, strlen(it->name));
		else
			fuse_lowlevel_notify_inval_inode(w->se, it->ino, it->off, it->len);
	}
	pthread_rwlock_unlock(&d->views_lock);
}

static void *notifier(void *arg)
{
	struct sfs_coherence *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct item *it;
		while (!c->head && !c->stop)
			pthread_cond_wait(&c->work, &c->lock);
		if (!c->head)
			break;
		it = c->head;
		c->head = it->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&c->lock);
		deliver(c->d, it);
		pthread_mutex_lock(&c->lock);
		c->done_seq = it->seq;
		pthread_cond_broadcast(&c->done);
		free(it);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int sfs_coh_start(struct sfs_daemon *d)
{
	struct sfs_coherence *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->d = d;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->done, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&c->thread, NULL, notifier, c);
	if (rc) {
		free(c);
		return -rc;
	}
	d->coh = c;
	return 0;
}

void sfs_coh_stop(struct sfs_daemon *d)
{
	struct sfs_coherence *c = d->coh;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	free(c);
	d->coh = NULL;
}

static void enqueue(struct sfs_coherence *c, uint32_t slot, enum kind kind, fuse_ino_t ino,
                    off_t off, off_t len, const char *name, bool wait)
{
	size_t nlen = name ? strlen(name) + 1 : 1;
	struct item *it = malloc(sizeof(*it) + nlen);

	if (!it)
		return; /* the other view then sees the change when its timeouts expire */
	*it = (struct item){NULL, 0, slot, kind, ino, off, len};
	memcpy(it->name, name ? name : "", nlen);
	pthread_mutex_lock(&c->lock);
	it->seq = ++c->next_seq;
	if (wait)
		last_queued = it->seq;
	if (c->tail)
		c->tail->next = it;
	else
		c->head = it;
	c->tail = it;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
}

/* The views other than origin that may cache node: those holding a lookup on it, and those
 * whose root it is. Returns how many were written to slots[] with the node's id in each. */
static size_t targets(struct sfs_view *origin, struct sfs_node *n, uint32_t *slots,
                      fuse_ino_t *inos)
{
	struct sfs_daemon *d = origin->d;
	size_t k = 0, m;

	m = sfs_itab_views_of(&d->itab, n, slots, MAX_TARGETS);
	for (size_t i = 0; i < m; i++)
		if (slots[i] != origin->slot) {
			slots[k] = slots[i];
			inos[k++] = (fuse_ino_t)(uintptr_t)n;
		}
	if (!n->pins)
		return k;
	pthread_rwlock_rdlock(&d->views_lock);
	for (size_t s = 0; s < SFS_MAX_VIEWS && k < MAX_TARGETS; s++) {
		struct sfs_view *w = d->views[s];
		if (w && w != origin && w->root == n) {
			slots[k] = s;
			inos[k++] = FUSE_ROOT_ID;
		}
	}
	pthread_rwlock_unlock(&d->views_lock);
	return k;
}

static void queue_inode(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	uint32_t slots[MAX_TARGETS];
	fuse_ino_t inos[MAX_TARGETS];
	size_t k;

	if (origin->d->nviews < 2 || !origin->d->coh)
		return;
	k = targets(origin, n, slots, inos);
	for (size_t i = 0; i < k; i++)
		enqueue(origin->d->coh, slots[i], INVAL_INODE, inos[i], off, len, NULL, true);
}

void sfs_coh_attr(struct sfs_view *origin, struct sfs_node *n)
{
	queue_inode(origin, n, -1, 0);
}

void sfs_coh_data(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	queue_inode(origin, n, off, len);
}

void sfs_coh_own_data(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	fuse_lowlevel_notify_inval_inode(origin->se, sfs_ino_of(origin, n), off, len);
}

void sfs_coh_name(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	uint32_t slots[MAX_TARGETS];
	fuse_ino_t inos[MAX_TARGETS];
	size_t k;

	if (origin->d->nviews < 2 || !origin->d->coh)
		return;
	k = targets(origin, parent, slots, inos);
	for (size_t i = 0; i < k; i++)
		enqueue(origin->d->coh, slots[i], INVAL_ENTRY, inos[i], 0, 0, name, true);
	/* and the listing the other views' kernels may keep of the directory (cache_readdir) */
	queue_inode(origin, parent, 0, 0);
}

void sfs_coh_own_entry(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	if (origin->d->coh)
		enqueue(origin->d->coh, origin->slot, INVAL_ENTRY, sfs_ino_of(origin, parent), 0, 0,
		        name, false);
}

void sfs_coh_spelling(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	uint32_t slots[MAX_TARGETS];
	fuse_ino_t inos[MAX_TARGETS];
	size_t k;

	if (!origin->d->coh)
		return;
	sfs_coh_own_entry(origin, parent, name);
	k = targets(origin, parent, slots, inos);
	for (size_t i = 0; i < k; i++)
		enqueue(origin->d->coh, slots[i], INVAL_ENTRY, inos[i], 0, 0, name, true);
}

void sfs_coh_flush(struct sfs_view *origin)
{
	struct sfs_coherence *c = origin->d->coh;
	struct timespec deadline;

	if (!c || !last_queued)
		return;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += FLUSH_BOUND_MS * 1000000l;
	deadline.tv_sec += deadline.tv_nsec / 1000000000l;
	deadline.tv_nsec %= 1000000000l;
	pthread_mutex_lock(&c->lock);
	while (c->done_seq < last_queued)
		if (pthread_cond_timedwait(&c->done, &c->lock, &deadline) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&c->lock);
	last_queued = 0;
}
