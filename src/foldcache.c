/* The bounded cache of fold indexes of warm directories (see foldcache.h). */
#include "foldcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "htab.h"
#include "lru.h"

#define MIN_DIR_BUCKETS 64

struct sfs_folddir {
	struct sfs_hlink link;                   /* in the cache's table; once dropped, the victims */
	struct sfs_list lru;                     /* on the cache's list while in the table */
	uint64_t dev, ino;
	struct sfs_foldidx *idx;
	pthread_rwlock_t lock;                   /* readers: rdlock; the one writer: note_* */
	/* Under the cache mutex: */
	unsigned pins;
	bool dead;                               /* out of table and list; freed by the last put */
	struct sfs_foldidx_stats acct;           /* what the totals count for this index */
};

struct sfs_foldcache {
	pthread_mutex_t lock;                    /* the cache mutex: everything below */
	struct sfs_htab tab;                     /* by sfs_hash_inode(dev, ino) */
	struct sfs_lru lru;                      /* the indexes in the table */
	size_t bytes, budget, names, collisions;
	uint64_t hits, misses, evictions;
	struct sfs_dirlock *locks;               /* the directories' change locks (not owned) */
};

int sfs_foldcache_new(struct sfs_foldcache **out, size_t budget, struct sfs_dirlock *locks)
{
	struct sfs_foldcache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (sfs_htab_init(&c->tab, MIN_DIR_BUCKETS)) {
		free(c);
		return -ENOMEM;
	}
	c->budget = budget;
	c->locks = locks;
	pthread_mutex_init(&c->lock, NULL);
	sfs_lru_init(&c->lru);
	*out = c;
	return 0;
}

static void dir_free(struct sfs_folddir *d)
{
	pthread_rwlock_destroy(&d->lock);
	sfs_foldidx_free(d->idx);
	free(d);
}

static struct sfs_folddir *dir_at(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct sfs_folddir, link);
}

/* Frees a chain of dropped indexes, linked through their links (out of the table). */
static void free_victims(struct sfs_hlink *l)
{
	struct sfs_hlink *next;

	for (; l; l = next) {
		next = l->next;
		dir_free(dir_at(l));
	}
}

void sfs_foldcache_free(struct sfs_foldcache *c)
{
	struct sfs_hlink *l, *next;

	if (!c)
		return;
	sfs_htab_for_each_safe(l, next, &c->tab)
		dir_free(dir_at(l));
	sfs_htab_destroy(&c->tab);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The cached index of (dev, ino), or NULL. */
static struct sfs_folddir *table_find(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	uint64_t h = sfs_hash_inode(dev, ino);
	struct sfs_hlink *l;

	sfs_htab_for_each_match(l, &c->tab, h)
		if (dir_at(l)->dev == dev && dir_at(l)->ino == ino)
			return dir_at(l);
	return NULL;
}

static size_t dir_bytes(const struct sfs_foldidx_stats *st)
{
	return st->bytes + sizeof(struct sfs_folddir) + SFS_FOLD_ALLOC_OVERHEAD;
}

/* Replaces d's share of the totals with st. */
static void account_locked(struct sfs_foldcache *c, struct sfs_folddir *d,
                           const struct sfs_foldidx_stats *st)
{
	c->bytes = c->bytes - (d->acct.bytes ? dir_bytes(&d->acct) : 0) + dir_bytes(st);
	c->names = c->names - d->acct.names + st->names;
	c->collisions = c->collisions - d->acct.collisions + st->collisions;
	d->acct = *st;
}

/* Takes d out of the table, the LRU list and the totals; the caller frees it once unpinned. */
static void drop_locked(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	sfs_htab_remove(&c->tab, &d->link);
	sfs_lru_remove(&c->lru, &d->lru);
	c->bytes -= dir_bytes(&d->acct);
	c->names -= d->acct.names;
	c->collisions -= d->acct.collisions;
	d->dead = true;
}

/* Drops unpinned indexes from the cold end while over budget; returns them, to be freed
 * outside the cache mutex. */
static struct sfs_hlink *evict_locked(struct sfs_foldcache *c)
{
	struct sfs_hlink *victims = NULL;
	struct sfs_list *pos, *prev;

	sfs_lru_for_each_oldest_first(pos, prev, &c->lru) {
		struct sfs_folddir *d = sfs_list_entry(pos, struct sfs_folddir, lru);
		if (c->bytes <= c->budget)
			break;
		if (!d->pins) {
			drop_locked(c, d);
			d->link.next = victims;
			victims = &d->link;
			c->evictions++;
		}
	}
	return victims;
}

static struct sfs_folddir *pin_locked(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d = table_find(c, dev, ino);

	if (d) {
		d->pins++;
		sfs_lru_touch(&c->lru, &d->lru);
	}
	return d;
}

struct sfs_folddir *sfs_foldcache_get(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d;

	pthread_mutex_lock(&c->lock);
	d = pin_locked(c, dev, ino);
	if (d)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	return d;
}

void sfs_foldcache_put(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	struct sfs_hlink *victims;
	bool last;

	pthread_mutex_lock(&c->lock);
	last = !--d->pins && d->dead;
	victims = evict_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (last)
		dir_free(d);
	free_victims(victims);
}

const struct sfs_foldidx *sfs_folddir_rdlock(struct sfs_folddir *d)
{
	pthread_rwlock_rdlock(&d->lock);
	return d->idx;
}

void sfs_folddir_unlock(struct sfs_folddir *d)
{
	pthread_rwlock_unlock(&d->lock);
}

uint64_t sfs_foldcache_stamp(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	return sfs_dirlock_stamp(c->locks, dev, ino);
}

static struct sfs_folddir *dir_new(uint64_t dev, uint64_t ino, struct sfs_foldidx *idx)
{
	struct sfs_folddir *d = calloc(1, sizeof(*d));
	pthread_rwlockattr_t attr;
	int rc;

	if (!d)
		return NULL;
	/* glibc prefers readers by default: a stream of lookups would starve note_*, which holds
	 * the change lock meanwhile. Readers never take the read lock twice, so this is safe. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&d->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc) {
		free(d);
		return NULL;
	}
	d->dev = dev;
	d->ino = ino;
	d->idx = idx;
	return d;
}

/* Under the directory's lock no change of it is half done, so an unchanged epoch means every
 * change either preceded the stamp (and the read saw it) or has not begun (dirlock.h). */
int sfs_foldcache_insert(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, uint64_t stamp,
                         struct sfs_foldidx *idx, struct sfs_folddir **out)
{
	struct sfs_folddir *d = dir_new(dev, ino, idx), *won;
	struct sfs_hlink *victims;
	struct sfs_foldidx_stats st;

	if (!d) {
		sfs_foldidx_free(idx);
		return -ENOMEM;
	}
	sfs_foldidx_stats(idx, &st);
	if (!sfs_dirlock_lock_unchanged(c->locks, dev, ino, stamp)) {
		dir_free(d);
		return -EAGAIN;
	}
	pthread_mutex_lock(&c->lock);
	won = pin_locked(c, dev, ino);
	if (!won) {
		sfs_htab_insert(&c->tab, &d->link, sfs_hash_inode(dev, ino));
		sfs_lru_add(&c->lru, &d->lru);
		d->pins = 1;
		account_locked(c, d, &st);
	}
	victims = evict_locked(c);
	pthread_mutex_unlock(&c->lock);
	sfs_dirlock_release(c->locks, dev, ino);
	if (won)
		dir_free(d);
	free_victims(victims);
	*out = won ? won : d;
	return 0;
}

int sfs_foldcache_lookup(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                         size_t len, struct sfs_foldidx_hit *hit)
{
	struct sfs_folddir *d = sfs_foldcache_get(c, dev, ino);
	int rc;

	if (!d)
		return -ENODATA;
	rc = sfs_foldidx_lookup(sfs_folddir_rdlock(d), name, len, hit);
	sfs_folddir_unlock(d);
	sfs_foldcache_put(c, d);
	return rc;
}

enum note_op { NOTE_ADD, NOTE_REMOVE, NOTE_RENAME };

static int apply(struct sfs_foldidx *idx, enum note_op op, const char *a, size_t alen,
                 const char *b, size_t blen)
{
	int rc;

	switch (op) {
	case NOTE_ADD:
		rc = sfs_foldidx_add(idx, a, alen);
		return rc == -EEXIST ? 0 : rc;
	case NOTE_REMOVE:
		rc = sfs_foldidx_remove(idx, a, alen);
		return rc == -ENOENT ? 0 : rc;
	case NOTE_RENAME:
		rc = sfs_foldidx_rename(idx, a, alen, b, blen);
		if (rc == -ENOENT) /* from was never seen: the directory still gained to */
			rc = apply(idx, NOTE_ADD, b, blen, NULL, 0);
		return rc;
	}
	return -EINVAL;
}

/* Applies one change to the cached index of (dev, ino), if any. An index that cannot follow
 * is dropped rather than left stale. */
static int note(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, enum note_op op,
                const char *a, size_t alen, const char *b, size_t blen)
{
	struct sfs_foldidx_stats st;
	struct sfs_folddir *d;
	int rc = sfs_foldidx_check_name(a, alen);

	if (!rc && op == NOTE_RENAME)
		rc = sfs_foldidx_check_name(b, blen);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	d = pin_locked(c, dev, ino);
	pthread_mutex_unlock(&c->lock);
	if (!d)
		return 0;
	pthread_rwlock_wrlock(&d->lock);
	rc = apply(d->idx, op, a, alen, b, blen);
	sfs_foldidx_stats(d->idx, &st);
	pthread_rwlock_unlock(&d->lock);
	pthread_mutex_lock(&c->lock);
	if (!d->dead && rc) /* (a forgotten d has nothing left to count) */
		drop_locked(c, d);
	else if (!d->dead)
		account_locked(c, d, &st);
	pthread_mutex_unlock(&c->lock);
	sfs_foldcache_put(c, d);
	return 0;
}

int sfs_foldcache_note_add(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                           size_t len)
{
	return note(c, dev, ino, NOTE_ADD, name, len, NULL, 0);
}

int sfs_foldcache_note_remove(struct sfs_foldcache *c, uint64_t dev, uint64_t ino,
                              const char *name, size_t len)
{
	return note(c, dev, ino, NOTE_REMOVE, name, len, NULL, 0);
}

int sfs_foldcache_note_rename(struct sfs_foldcache *c, uint64_t fdev, uint64_t fino,
                              const char *from, size_t fromlen, uint64_t tdev, uint64_t tino,
                              const char *to, size_t tolen)
{
	int rc;

	if (fdev == tdev && fino == tino)
		return note(c, fdev, fino, NOTE_RENAME, from, fromlen, to, tolen);
	rc = sfs_foldidx_check_name(to, tolen);
	if (!rc)
		rc = note(c, fdev, fino, NOTE_REMOVE, from, fromlen, NULL, 0);
	if (!rc)
		rc = note(c, tdev, tino, NOTE_ADD, to, tolen, NULL, 0);
	return rc;
}

/* The epoch moves first, so a build that started before the directory went is refused. */
void sfs_foldcache_forget(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d, *gone = NULL;

	sfs_dirlock_bump(c->locks, dev, ino);
	pthread_mutex_lock(&c->lock);
	d = table_find(c, dev, ino);
	if (d) {
		drop_locked(c, d);
		if (!d->pins)
			gone = d;
	}
	pthread_mutex_unlock(&c->lock);
	if (gone)
		dir_free(gone);
}

void sfs_foldcache_stats(struct sfs_foldcache *c, struct sfs_foldcache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->dirs = sfs_htab_count(&c->tab);
	st->bytes = c->bytes;
	st->budget = c->budget;
	st->names = c->names;
	st->collisions = c->collisions;
	st->hits = c->hits;
	st->misses = c->misses;
	st->evictions = c->evictions;
	pthread_mutex_unlock(&c->lock);
}
