/* The one intrusive hash table (see htab.h): the bucket array, growth by the stored hashes,
 * and the sweeps. */
#include "htab.h"

#include <errno.h>
#include <stdlib.h>

/* The smallest power of two >= n (1 for 0), or 0 if there is none in a size_t. */
static size_t pow2_at_least(size_t n)
{
	size_t p = 1;

	while (p < n) {
		if (p > SIZE_MAX / 2)
			return 0;
		p *= 2;
	}
	return p;
}

int sfs_htab_init(struct sfs_htab *t, size_t buckets)
{
	size_t n = pow2_at_least(buckets);

	*t = (struct sfs_htab){0};
	if (!n || !(t->buckets = calloc(n, sizeof(*t->buckets))))
		return -ENOMEM;
	t->mask = n - 1;
	return 0;
}

void sfs_htab_destroy(struct sfs_htab *t)
{
	free(t->buckets);
	*t = (struct sfs_htab){0};
}

/* Reverses a chain in place. */
static struct sfs_hlink *reversed(struct sfs_hlink *e)
{
	struct sfs_hlink *done = NULL, *next;

	for (; e; e = next) {
		next = e->next;
		e->next = done;
		done = e;
	}
	return done;
}

int sfs_htab_resize(struct sfs_htab *t, size_t buckets)
{
	size_t n = pow2_at_least(buckets);
	struct sfs_hlink **nb, *e, *next;

	if (!n || !(nb = calloc(n, sizeof(*nb))))
		return -ENOMEM; /* the old buckets stay: still a valid table */
	/* By the stored hash, never the key: the entry must sit where a lookup of the hash it was
	 * inserted with looks. Pushed on the front, each chain comes out reversed; reversing it
	 * again keeps the entries of one hash newest first. */
	for (size_t i = 0; i <= t->mask; i++)
		for (e = t->buckets[i]; e; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	for (size_t i = 0; i < n; i++)
		nb[i] = reversed(nb[i]);
	free(t->buckets);
	t->buckets = nb;
	t->mask = n - 1;
	return 0;
}

void sfs_htab_insert(struct sfs_htab *t, struct sfs_hlink *e, uint64_t hash)
{
	struct sfs_hlink **b;

	if (t->count > t->mask && t->mask < SIZE_MAX / 2)
		sfs_htab_resize(t, (t->mask + 1) * 2); /* on failure: longer chains, still correct */
	b = &t->buckets[hash & t->mask];
	e->hash = hash;
	e->next = *b;
	*b = e;
	t->count++;
}

bool sfs_htab_remove(struct sfs_htab *t, struct sfs_hlink *e)
{
	struct sfs_hlink **link = &t->buckets[e->hash & t->mask];

	while (*link && *link != e)
		link = &(*link)->next;
	if (!*link)
		return false;
	*link = e->next;
	e->next = NULL;
	t->count--;
	return true;
}

/* The first entry in bucket i or after it. */
static struct sfs_hlink *first_from(const struct sfs_htab *t, size_t i)
{
	for (; i <= t->mask; i++)
		if (t->buckets[i])
			return t->buckets[i];
	return NULL;
}

struct sfs_hlink *sfs_htab_first(const struct sfs_htab *t)
{
	return t->buckets ? first_from(t, 0) : NULL; /* a table never made holds nothing */
}

struct sfs_hlink *sfs_htab_next(const struct sfs_htab *t, const struct sfs_hlink *e)
{
	return e->next ? e->next : first_from(t, (e->hash & t->mask) + 1);
}
