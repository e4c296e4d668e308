/* The tree's one LRU list (issue 30), over list.h: the entries embed a struct sfs_list, the
 * most recently used first, with their count. What to evict, and when, stays the user's:
 * it walks from the oldest end (sfs_lru_for_each_oldest_first) and skips what is in use.
 * No locking: the list is its user's, under the user's own lock. */
#ifndef SFS_LRU_H
#define SFS_LRU_H

#include <stddef.h>

#include "list.h"

struct sfs_lru {
	struct sfs_list head;  /* most recently used first */
	size_t count;
};

static inline void sfs_lru_init(struct sfs_lru *l)
{
	sfs_list_init(&l->head);
	l->count = 0;
}

/* e, on no list, as the most recently used. */
static inline void sfs_lru_add(struct sfs_lru *l, struct sfs_list *e)
{
	sfs_list_add(e, &l->head);
	l->count++;
}

/* e, on l, is used: it becomes the most recently used (no write when it is already). */
static inline void sfs_lru_touch(struct sfs_lru *l, struct sfs_list *e)
{
	if (l->head.next != e)
		sfs_list_move(e, &l->head);
}

/* e, on l, leaves it. */
static inline void sfs_lru_remove(struct sfs_lru *l, struct sfs_list *e)
{
	sfs_list_del(e);
	l->count--;
}

/* The least recently used entry, or NULL when l is empty. */
static inline struct sfs_list *sfs_lru_oldest(const struct sfs_lru *l)
{
	return sfs_list_empty(&l->head) ? NULL : l->head.prev;
}

static inline size_t sfs_lru_count(const struct sfs_lru *l)
{
	return l->count;
}

/* pos from the least recently used to the most; the body may remove pos (tmp holds the
 * next). */
#define sfs_lru_for_each_oldest_first(pos, tmp, l) sfs_list_for_each_prev_safe(pos, tmp, &(l)->head)

#endif
