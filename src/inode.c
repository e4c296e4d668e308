/* The inode table (see inode.h). The tree's hash table (htab.h) on the inode number (one
 * backing, one dev); nothing here walks the whole table on the request path. */
#include "inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handover.h"
#include "hash.h"

/* A node's hash, by its inode number; a node id's low 32 bits are that number (inode.h),
 * so an id is looked for under the same hash. */
static uint64_t hash_of(ino_t ino)
{
	return sfs_hash_inode(0, ino);
}

static struct sfs_node *node_at(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct sfs_node, hlink);
}

int sfs_itab_init(struct sfs_itab *t, const struct sfs_itab_hooks *hooks)
{
	memset(t, 0, sizeof(*t));
	t->hooks = *hooks;
	pthread_mutex_init(&t->lock, NULL);
	return sfs_htab_init(&t->nodes, 1024);
}

static void free_node(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *n)
{
	t->hooks.fds->remove(c, n);
	if (t->hooks.freed)
		t->hooks.freed(t->hooks.arg, n);
	free(n->refs);
	free(n);
}

void sfs_itab_destroy(struct sfs_itab *t, struct sfs_fdcache *c)
{
	struct sfs_hlink *l, *next;

	sfs_htab_for_each_safe(l, next, &t->nodes)
		free_node(t, c, node_at(l));
	sfs_htab_destroy(&t->nodes);
}

static struct sfs_node *find_locked(struct sfs_itab *t, dev_t dev, ino_t ino)
{
	uint64_t h = hash_of(ino);
	struct sfs_hlink *l;

	sfs_htab_for_each_match(l, &t->nodes, h) {
		struct sfs_node *n = node_at(l);
		if (n->ino == ino && n->dev == dev && !n->stale)
			return n;
	}
	return NULL;
}

/* The node with that id, a stale one included, or NULL. */
static struct sfs_node *find_id_locked(struct sfs_itab *t, uint64_t id)
{
	uint64_t h = hash_of((uint32_t)id);
	struct sfs_hlink *l;

	sfs_htab_for_each_match(l, &t->nodes, h)
		if (node_at(l)->id == id)
			return node_at(l);
	return NULL;
}

struct sfs_node *sfs_itab_find(struct sfs_itab *t, dev_t dev, ino_t ino)
{
	struct sfs_node *n;

	pthread_mutex_lock(&t->lock);
	n = find_locked(t, dev, ino);
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct sfs_node *sfs_itab_find_id(struct sfs_itab *t, uint64_t id)
{
	struct sfs_node *n;

	pthread_mutex_lock(&t->lock);
	n = find_id_locked(t, id);
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* A view's lookup count of a node as a successor will read it (handover.h). */
static void record_ref(struct sfs_itab *t, const struct sfs_node *n, uint32_t view, uint64_t count)
{
	if (t->ho)
		sfs_ho_ref_set(t->ho, n->id, view, count);
}

static int add_ref(struct sfs_itab *t, struct sfs_node *n, uint32_t view)
{
	struct sfs_view_ref *r;

	if (view == SFS_PIN) {
		n->pins++;
		return 0;
	}
	if (view == SFS_ADOPT)
		return 0;
	for (uint32_t i = 0; i < n->nrefs; i++)
		if (n->refs[i].view == view) {
			n->refs[i].count++;
			n->nlookup++;
			record_ref(t, n, view, n->refs[i].count);
			return 0;
		}
	r = realloc(n->refs, (n->nrefs + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	n->refs = r;
	n->refs[n->nrefs++] = (struct sfs_view_ref){view, 1};
	n->nlookup++;
	record_ref(t, n, view, 1);
	return 0;
}

/* A new node takes the lookups a predecessor daemon counted for its id: the kernels still
 * hold them. Nothing for an id no kernel was given. */
static void inherit_refs(struct sfs_itab *t, struct sfs_node *n)
{
	struct sfs_ho_ref few[16], *found = few;
	size_t k;

	if (!t->ho || !t->ho->resumed || !(k = sfs_ho_refs_of(t->ho, n->id, few, 16)))
		return;
	if (k > 16 && (!(found = malloc(k * sizeof(*found))) ||
	               sfs_ho_refs_of(t->ho, n->id, found, k) != k))
		goto out;
	if (!(n->refs = calloc(k, sizeof(*n->refs))))
		goto out;
	for (size_t i = 0; i < k; i++) {
		n->refs[n->nrefs++] = (struct sfs_view_ref){found[i].view, found[i].count};
		n->nlookup += found[i].count;
	}
out:
	if (found != few)
		free(found);
}

int sfs_node_id_at(int dirfd, const char *name, int flags, uint64_t *id)
{
	struct {
		struct file_handle fh;
		uint32_t word[2];
	} h;
	int mnt_id;

	h.fh.handle_bytes = sizeof(h.word);
	if (name_to_handle_at(dirfd, name, &h.fh, &mnt_id, flags) < 0)
		return errno == EOVERFLOW ? -EOPNOTSUPP : -errno;
	if (h.fh.handle_type != SFS_HANDLE_INO32_GEN || h.fh.handle_bytes != sizeof(h.word))
		return -EOPNOTSUPP; /* not ext4's: its ids could not be found again */
	*id = (uint64_t)h.word[1] << 32 | h.word[0];
	return 0;
}

int sfs_node_id_of(int fd, uint64_t *id)
{
	return sfs_node_id_at(fd, "", AT_EMPTY_PATH, id);
}

uint32_t sfs_node_id_ino(uint64_t id)
{
	return (uint32_t)id;
}

static int make_node(struct sfs_itab *t, uint64_t id, const struct stat *st,
                     struct sfs_node **out)
{
	struct sfs_node *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->id = id;
	n->type = st->st_mode & S_IFMT;
	n->dev = st->st_dev;
	n->ino = st->st_ino;
	n->fd = -1;
	if (t->hooks.created)
		t->hooks.created(t->hooks.arg, n, st);
	*out = n;
	return 0;
}

int sfs_node_open(const struct sfs_node *n, int mount_fd, int flags)
{
	return sfs_node_id_open(n->id, mount_fd, flags);
}

int sfs_node_id_open(uint64_t id, int mount_fd, int flags)
{
	struct {
		struct file_handle fh;
		uint32_t word[2];
	} h = {.fh = {.handle_bytes = sizeof(h.word), .handle_type = SFS_HANDLE_INO32_GEN},
	       .word = {(uint32_t)id, (uint32_t)(id >> 32)}};

	return open_by_handle_at(mount_fd, &h.fh, flags);
}

/* The node of the object with stat st, whose id is *known (or, without it, read from fd's
 * handle when the number alone cannot tell), open as fd (or -1 for none); fd is taken. */
static int get_node(struct sfs_itab *t, struct sfs_fdcache *c, int fd, const uint64_t *known,
                    const struct stat *st, uint32_t view, struct sfs_node **out)
{
	struct sfs_node *n, *fresh = NULL;
	uint64_t id;
	bool alive;
	int rc;

	pthread_mutex_lock(&t->lock);
	n = find_locked(t, st->st_dev, st->st_ino);
	/* A node whose descriptor is open, or that a caller holds open, holds its inode, so the
	 * number is still that object's. Without either, the inode may have been freed and its
	 * number reused: only the file handle (number and generation) tells. */
	alive = n && (known ? n->id == *known
	                    : atomic_load(&n->opens) > 0 || t->hooks.fds->cached(c, n));
	pthread_mutex_unlock(&t->lock);
again:
	if (!alive) {
		/* the handle outside the lock: it is a syscall, and a race only means one of two
		 * fresh nodes is thrown away below */
		rc = known ? (id = *known, 0) : sfs_node_id_of(fd, &id);
		if (!rc)
			rc = make_node(t, id, st, &fresh);
		if (rc) {
			if (fd >= 0)
				close(fd);
			return rc;
		}
	}
	pthread_mutex_lock(&t->lock);
	n = find_locked(t, st->st_dev, st->st_ino);
	if (n && fresh && n->id != fresh->id) {
		/* the old object is dead; its node lives on only until the kernels forget it */
		n->stale = true;
		n = NULL;
	}
	if (!n && fresh) {
		inherit_refs(t, fresh);
		sfs_htab_insert(&t->nodes, &fresh->hlink, hash_of(fresh->ino));
		n = fresh;
		fresh = NULL;
	}
	if (!n) {
		/* the live node was forgotten meanwhile: make a new one */
		pthread_mutex_unlock(&t->lock);
		alive = false;
		goto again;
	}
	rc = add_ref(t, n, view);
	if (!rc && fd >= 0)
		t->hooks.fds->offer(c, n, fd);
	pthread_mutex_unlock(&t->lock);
	if (fresh) {
		free(fresh->refs);
		free(fresh);
	}
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*out = n;
	return 0;
}

int sfs_itab_get(struct sfs_itab *t, struct sfs_fdcache *c, int fd, const struct stat *st,
                 uint32_t view, struct sfs_node **out)
{
	return get_node(t, c, fd, NULL, st, view, out);
}

int sfs_itab_get_id(struct sfs_itab *t, uint64_t id, const struct stat *st, uint32_t view,
                    struct sfs_node **out)
{
	return get_node(t, NULL, -1, &id, st, view, out);
}

static void maybe_free_locked(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *n)
{
	if (n->nlookup || n->pins)
		return;
	sfs_htab_remove(&t->nodes, &n->hlink);
	free_node(t, c, n);
}

static void forget_locked(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *node,
                          uint32_t view, uint64_t n)
{
	for (uint32_t i = 0; i < node->nrefs; i++) {
		struct sfs_view_ref *r = &node->refs[i];
		if (r->view != view)
			continue;
		if (n > r->count)
			n = r->count; /* never trust a count beyond what this view was given */
		r->count -= n;
		node->nlookup -= n;
		record_ref(t, node, view, r->count);
		if (!r->count)
			node->refs[i] = node->refs[--node->nrefs];
		break;
	}
	maybe_free_locked(t, c, node);
}

void sfs_itab_forget(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *node,
                     uint32_t view, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	forget_locked(t, c, node, view, n);
	pthread_mutex_unlock(&t->lock);
}

void sfs_itab_forget_id(struct sfs_itab *t, struct sfs_fdcache *c, uint64_t id, uint32_t view,
                        uint64_t n)
{
	struct sfs_node *node;
	uint64_t had;

	pthread_mutex_lock(&t->lock);
	if ((node = find_id_locked(t, id))) {
		forget_locked(t, c, node, view, n);
	} else if (t->ho && (had = sfs_ho_ref_get(t->ho, id, view))) {
		/* a predecessor's count this daemon never needed the node of */
		sfs_ho_ref_set(t->ho, id, view, n >= had ? 0 : had - n);
	}
	pthread_mutex_unlock(&t->lock);
}

bool sfs_itab_inherited(struct sfs_itab *t, uint64_t id, uint32_t view)
{
	bool held;

	if (!t->ho || !t->ho->resumed)
		return false;
	pthread_mutex_lock(&t->lock);
	held = sfs_ho_ref_get(t->ho, id, view) != 0;
	pthread_mutex_unlock(&t->lock);
	return held;
}

void sfs_itab_unpin(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *node)
{
	pthread_mutex_lock(&t->lock);
	if (node->pins)
		node->pins--;
	maybe_free_locked(t, c, node);
	pthread_mutex_unlock(&t->lock);
}

void sfs_itab_drop_view(struct sfs_itab *t, struct sfs_fdcache *c, uint32_t view)
{
	struct sfs_hlink *l, *next;

	pthread_mutex_lock(&t->lock);
	sfs_htab_for_each_safe(l, next, &t->nodes) {
		struct sfs_node *n = node_at(l);
		for (uint32_t i = 0; i < n->nrefs; i++)
			if (n->refs[i].view == view) {
				n->nlookup -= n->refs[i].count;
				n->refs[i] = n->refs[--n->nrefs];
				break;
			}
		maybe_free_locked(t, c, n);
	}
	if (t->ho)
		sfs_ho_refs_drop_view(t->ho, view);
	pthread_mutex_unlock(&t->lock);
}

size_t sfs_itab_views_of(struct sfs_itab *t, struct sfs_node *node, uint32_t *views, size_t max)
{
	size_t k = 0;

	pthread_mutex_lock(&t->lock);
	for (uint32_t i = 0; i < node->nrefs && k < max; i++)
		views[k++] = node->refs[i].view;
	if (node->nrefs > max)
		k = node->nrefs;
	pthread_mutex_unlock(&t->lock);
	return k;
}

bool sfs_itab_id_held_by(struct sfs_itab *t, uint64_t id, uint32_t view)
{
	struct sfs_node *n;
	bool held = false;

	pthread_mutex_lock(&t->lock);
	n = find_id_locked(t, id);
	for (uint32_t i = 0; n && i < n->nrefs && !held; i++)
		held = n->refs[i].view == view;
	pthread_mutex_unlock(&t->lock);
	return held;
}

void sfs_itab_each_open(struct sfs_itab *t, void (*fn)(void *arg, struct sfs_node *n), void *arg)
{
	struct sfs_hlink *l, *next;

	pthread_mutex_lock(&t->lock);
	sfs_htab_for_each_safe(l, next, &t->nodes)
		if (atomic_load(&node_at(l)->opens) > 0)
			fn(arg, node_at(l));
	pthread_mutex_unlock(&t->lock);
}

size_t sfs_itab_count(struct sfs_itab *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = sfs_htab_count(&t->nodes);
	pthread_mutex_unlock(&t->lock);
	return n;
}
