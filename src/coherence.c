/* Coherence between views (see coherence.h): which views a change concerns, and what each is
 * told. The queue, its notifier thread and the bounded wait are notice_queue.c's. */
#include "coherence.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "notice_queue.h"
#include "registry.h"
#include "services.h"
#include "view.h"

/* Targets fit on the stack up to this many views; more are allocated. */
#define STACK_TARGETS 64

/* The notices' queue and its notifier (notice_queue.h), delivering to these services' views. */
struct sfs_coherence {
	struct sfs_services *svc;
	struct sfs_noticeq *queue;
};

/* On the notifier thread: one notice to its view, if that view still serves. */
static void deliver(void *arg, const struct sfs_notice *it)
{
	struct sfs_services *svc = ((struct sfs_coherence *)arg)->svc;
	struct sfs_view *w;

	sfs_registry_read_lock(svc->views);
	w = sfs_registry_at(svc->views, it->slot);
	if (w && w->se && !atomic_load(&w->ended)) {
		if (it->kind == SFS_NOTICE_ENTRY)
			fuse_lowlevel_notify_inval_entry(w->se, it->ino, it->name, strlen(it->name));
		else if (it->kind == SFS_NOTICE_DELETE)
			fuse_lowlevel_notify_delete(w->se, it->ino, (fuse_ino_t)it->off, it->name,
			                            strlen(it->name));
		else
			fuse_lowlevel_notify_inval_inode(w->se, it->ino, it->off, it->len);
	}
	sfs_registry_read_unlock(svc->views);
}

int sfs_coh_start(struct sfs_services *svc)
{
	struct sfs_coherence *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->svc = svc;
	if ((rc = sfs_noticeq_start(&c->queue, SFS_MAX_VIEWS, deliver, c))) {
		free(c);
		return rc;
	}
	svc->coh = c;
	return 0;
}

void sfs_coh_stop(struct sfs_services *svc)
{
	struct sfs_coherence *c = svc->coh;

	if (!c)
		return;
	sfs_noticeq_stop(c->queue);
	free(c);
	svc->coh = NULL;
}

static void enqueue(struct sfs_coherence *c, uint32_t slot, enum sfs_notice_kind kind,
                    fuse_ino_t ino, off_t off, off_t len, const char *name, bool wait)
{
	struct sfs_notice n = {.slot = slot, .kind = kind, .ino = ino, .off = off, .len = len,
	                       .name = name};

	sfs_noticeq_push(c->queue, &n, wait);
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
	sfs_registry_read_lock(svc->views);
	sfs_for_each_view(svc->views, w) {
		if (w == origin || w->root != n)
			continue;
		if (t->n == t->cap && !targets_reserve(t, 2 * t->cap))
			break;
		t->slots[t->n] = w->slot;
		t->inos[t->n++] = FUSE_ROOT_ID;
	}
	sfs_registry_read_unlock(svc->views);
	return true;
}

/* kind for every view other than origin that may cache n; with gone (an entry removed
 * with its object's last link), SFS_NOTICE_DELETE instead to the views that know that object. */
static void queue_to_targets_gone(struct sfs_view *origin, struct sfs_node *n, enum sfs_notice_kind kind,
                                  off_t off, off_t len, const char *name,
                                  const struct sfs_node *gone)
{
	struct sfs_services *svc = origin->svc;
	struct targets t;

	if (sfs_registry_count(svc->views) < 2 || !svc->coh)
		return;
	if (find_targets(origin, n, &t))
		for (size_t i = 0; i < t.n; i++) {
			bool deleted = gone && sfs_itab_id_held_by(&svc->itab, gone->id, t.slots[i]);
			enqueue(svc->coh, t.slots[i], deleted ? SFS_NOTICE_DELETE : kind, t.inos[i],
			        deleted ? (off_t)gone->id : off, len, name, true);
		}
	targets_free(&t);
}

static void queue_to_targets(struct sfs_view *origin, struct sfs_node *n, enum sfs_notice_kind kind,
                             off_t off, off_t len, const char *name)
{
	queue_to_targets_gone(origin, n, kind, off, len, name, NULL);
}

static void queue_inode(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len)
{
	queue_to_targets(origin, n, SFS_NOTICE_INODE, off, len, NULL);
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
		enqueue(origin->svc->coh, origin->slot, SFS_NOTICE_INODE, sfs_ino_of(origin, n), off, len,
		        NULL, false);
}

void sfs_coh_name(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	sfs_coh_removed(origin, parent, name, NULL);
}

void sfs_coh_removed(struct sfs_view *origin, struct sfs_node *parent, const char *name,
                     struct sfs_node *gone)
{
	queue_to_targets_gone(origin, parent, SFS_NOTICE_ENTRY, 0, 0, name, gone);
	/* and the listing the other views' kernels may keep of the directory (cache_readdir) */
	queue_inode(origin, parent, 0, 0);
}

void sfs_coh_own_entry(struct sfs_view *origin, struct sfs_node *parent, const char *name)
{
	if (origin->svc->coh)
		enqueue(origin->svc->coh, origin->slot, SFS_NOTICE_ENTRY, sfs_ino_of(origin, parent), 0, 0,
		        name, false);
}

void sfs_coh_spelling(struct sfs_view *origin, struct sfs_node *parent, const char *name,
                      bool origin_settled)
{
	if (!origin_settled)
		sfs_coh_own_entry(origin, parent, name);
	queue_to_targets(origin, parent, SFS_NOTICE_ENTRY, 0, 0, name);
}

void sfs_coh_flush(struct sfs_view *origin)
{
	if (origin->svc->coh)
		sfs_noticeq_flush(origin->svc->coh->queue, origin->slot);
}
