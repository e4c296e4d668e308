/* Coherence between views (see coherence.h): one notifier thread delivers invalidations in
 * order; a request waits for its own, bounded, before it answers. */
#include "coherence.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "services.h"
#include "util.h"
#include "view.h"

/* A request waits for its notifications while the notifier makes progress, and gives up
 * only when it has delivered nothing for this long (it is then blocked on a lock a request of
 * the target view holds): the wait grows with the number of views, never the staleness. */
#define STALL_BOUND_MS 200
/* A delivery to a view that has a request waiting here, still not done after this long, waits
 * for a lock that request holds in its kernel (its directory, during a create or unlink):
 * both give up waiting, or each would wait out the stall bound on every such change. */
#define CYCLE_MS 2
/* Targets fit on the stack up to this many views; more are allocated. */
#define STACK_TARGETS 64

/* DELETE_ENTRY: an entry whose object went with it (FUSE_NOTIFY_DELETE), its node in off */
enum kind { INVAL_INODE, INVAL_ENTRY, DELETE_ENTRY };

#define NONE UINT32_MAX

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
	struct sfs_services *svc;
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t done;
	struct item *head, *tail;
	uint64_t next_seq, done_seq;
	uint32_t delivering;          /* the view the notifier is delivering to, or NONE */
	struct timespec since;        /* when that delivery began */
	uint32_t waiting[SFS_MAX_VIEWS]; /* requests of each view waiting in sfs_coh_flush */
	bool stop;
	pthread_t thread;
};

static __thread uint64_t last_queued;

static void deliver(struct sfs_services *svc, const struct item *it)
{
	struct sfs_view *w;

	sfs_registry_read_lock(&svc->views);
	w = sfs_registry_at(&svc->views, it->slot);
	if (w && w->se && !atomic_load(&w->ended)) {
		if (it->kind == INVAL_ENTRY)
			fuse_lowlevel_notify_inval_entry(w->se, it->ino, it->name, strlen(it->name));
		else if (it->kind == DELETE_ENTRY)
			fuse_lowlevel_notify_delete(w->se, it->ino, (fuse_ino_t)it->off, it->name,
			                            strlen(it->name));
		else
			fuse_lowlevel_notify_inval_inode(w->se, it->ino, it->off, it->len);
	}
	sfs_registry_read_unlock(&svc->views);
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
		c->delivering = it->slot;
		clock_gettime(CLOCK_MONOTONIC, &c->since);
		pthread_mutex_unlock(&c->lock);
		deliver(c->svc, it);
		pthread_mutex_lock(&c->lock);
		c->delivering = NONE;
		c->done_seq = it->seq;
		pthread_cond_broadcast(&c->done);
		free(it);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int sfs_coh_start(struct sfs_services *svc)
{
	struct sfs_coherence *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->svc = svc;
	c->delivering = NONE;
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
	svc->coh = c;
	return 0;
}

void sfs_coh_stop(struct sfs_services *svc)
{
	struct sfs_coherence *c = svc->coh;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	free(c);
	svc->coh = NULL;
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

/* The views other than origin that may cache node: those holding a lookup on it (with the
 * node's id), and those whose root it is (with FUSE_ROOT_ID). */
struct targets {
	size_t n, cap;
	uint32_t *slots;
	fuse_ino_t *inos;
	uint32_t stack_slots[STACK_TARGETS];
	fuse_ino_t stack_inos[STACK_TARGETS];
};

static bool targets_reserve(struct targets *t, size_t cap)
{
	uint32_t *slots;
	fuse_ino_t *inos;

	if (cap <= t->cap)
		return true;
	slots = malloc(cap * sizeof(*slots));
	inos = malloc(cap * sizeof(*inos));
	if (!slots || !inos) {
		free(slots);
		free(inos);
		return false;
	}
	memcpy(slots, t->slots, t->n * sizeof(*slots));
	memcpy(inos, t->inos, t->n * sizeof(*inos));
	if (t->slots != t->stack_slots) {
		free(t->slots);
		free(t->inos);
	}
	t->slots = slots;
	t->inos = inos;
	t->cap = cap;
	return true;
}

static void targets_free(struct targets *t)
{
	if (t->slots != t->stack_slots) {
		free(t->slots);
		free(t->inos);
	}
}

/* Fills t; false when memory ran out (the views then see the change when their timeouts end). */
static bool find_targets(struct sfs_view *origin, struct sfs_node *n, struct targets *t)
{
	struct sfs_services *svc = origin->svc;
	struct sfs_view *w;
	size_t m, k = 0;

	t->n = 0;
	t->cap = STACK_TARGETS;
	t->slots = t->stack_slots;
	t->inos = t->stack_inos;
	while ((m = sfs_itab_views_of(&svc->itab, n, t->slots, t->cap)) > t->cap)
		if (!targets_reserve(t, m))
			return false;
	for (size_t i = 0; i < m; i++)
		if (t->slots[i] != origin->slot) {
			t->slots[k] = t->slots[i];
			t->inos[k++] = n->id;
		}
	t->n = k;
	if (!n->pins)
		return true;
	sfs_registry_read_lock(&svc->views);
	sfs_for_each_view(&svc->views, w) {
		if (w == origin || w->root != n)
			continue;
		if (t->n == t->cap && !targets_reserve(t, 2 * t->cap))
			break;
		t->slots[t->n] = w->slot;
		t->inos[t->n++] = FUSE_ROOT_ID;
	}
	sfs_registry_read_unlock(&svc->views);
	return true;
}

/* kind for every view other than origin that may cache n; with gone (an entry removed
 * with its object's last link), DELETE_ENTRY instead to the views that know that object. */
static void queue_to_targets_gone(struct sfs_view *origin, struct sfs_node *n, enum kind kind,
                                  off_t off, off_t len, const char *name,
                                  const struct sfs_node *gone)
{
	struct sfs_services *svc = origin->svc;
	struct targets t;

	if (sfs_registry_count(&svc->views) < 2 || !svc->coh)
		return;
	if (find_targets(origin, n, &t))
		for (size_t i = 0; i < t.n; i++) {
			bool deleted = gone && sfs_itab_id_held_by(&svc->itab, gone->id, t.slots[i]);
			enqueue(svc->coh, t.slots[i], deleted ? DELETE_ENTRY : kind, t.inos[i],
			        deleted ? (off_t)gone->id : off, len, name, true);
		}
	targets_free(&t);
}

static void queue_to_targets(struct sfs_view *origin, struct sfs_node *n, enum kind kind,
                             off_t off, off_t len, const char *name)
{
	queue_to_targets_gone(origin, n, kind, off, len, name, NULL);
}

static void queue_inode(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	queue_to_targets(origin, n, INVAL_INODE, off, len, NULL);
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

void sfs_coh_own_data_later(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	if (origin->svc->coh)
		enqueue(origin->svc->coh, origin->slot, INVAL_INODE, sfs_ino_of(origin, n), off, len,
		        NULL, false);
}

void sfs_coh_name(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	sfs_coh_removed(origin, parent, name, NULL);
}

void sfs_coh_removed(struct sfs_view *origin, struct sfs_node *parent, const char *name,
                     struct sfs_node *gone)
{
	queue_to_targets_gone(origin, parent, INVAL_ENTRY, 0, 0, name, gone);
	/* and the listing the other views' kernels may keep of the directory (cache_readdir) */
	queue_inode(origin, parent, 0, 0);
}

void sfs_coh_own_entry(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	if (origin->svc->coh)
		enqueue(origin->svc->coh, origin->slot, INVAL_ENTRY, sfs_ino_of(origin, parent), 0, 0,
		        name, false);
}

void sfs_coh_spelling(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	sfs_coh_own_entry(origin, parent, name);
	queue_to_targets(origin, parent, INVAL_ENTRY, 0, 0, name);
}

/* Under c->lock: whether the delivery in progress waits on a request waiting here (CYCLE_MS).
 * Giving up is safe for that view: the notifier is queued on its lock, and takes it as soon
 * as the request lets it go, before anything else of that view can look. */
static bool waits_on_a_waiter(struct sfs_coherence *c)
{
	struct timespec now;

	if (c->delivering == NONE || !c->waiting[c->delivering])
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - c->since.tv_sec) * 1000 + (now.tv_nsec - c->since.tv_nsec) / 1000000 >=
	       CYCLE_MS;
}

void sfs_coh_flush(struct sfs_view *origin)
{
	struct sfs_coherence *c = origin->svc->coh;
	struct timespec deadline, tick;
	uint64_t seen;

	if (!c || !last_queued)
		return;
	sfs_deadline_in(CLOCK_MONOTONIC, STALL_BOUND_MS, &deadline);
	pthread_mutex_lock(&c->lock);
	seen = c->done_seq;
	c->waiting[origin->slot]++;
	while (c->done_seq < last_queued && !waits_on_a_waiter(c)) {
		sfs_deadline_in(CLOCK_MONOTONIC, CYCLE_MS, &tick);
		if (pthread_cond_timedwait(&c->done, &c->lock, &tick) != ETIMEDOUT)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &tick);
		if (tick.tv_sec < deadline.tv_sec ||
		    (tick.tv_sec == deadline.tv_sec && tick.tv_nsec < deadline.tv_nsec))
			continue;
		if (c->done_seq == seen)
			break; /* stalled: see STALL_BOUND_MS */
		seen = c->done_seq;
		sfs_deadline_in(CLOCK_MONOTONIC, STALL_BOUND_MS, &deadline);
	}
	c->waiting[origin->slot]--;
	pthread_mutex_unlock(&c->lock);
	last_queued = 0;
}
