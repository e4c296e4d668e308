/* The set of inode numbers of the quota scans (see inoset.h). */
#include "inoset.h"

#include <errno.h>
#include <stdlib.h>

#include "hash.h"

/* Where ino is, or the free slot where it would go. Placing and finding must take the same
 * hash: a number placed by one and looked for with another is not found, and is then counted
 * again at each further name (cap > 0). */
static size_t probe(const struct sfs_inoset *s, uint64_t ino)
{
	size_t mask = s->cap - 1, h = sfs_hash_inode(0, ino) & mask;

	while (s->slot[h] && s->slot[h] != ino)
		h = (h + 1) & mask;
	return h;
}

static int grow(struct sfs_inoset *s)
{
	struct sfs_inoset bigger = {.cap = s->cap ? s->cap * 2 : 1024, .zero = s->zero};

	if (!(bigger.slot = calloc(bigger.cap, sizeof(*bigger.slot))))
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			bigger.slot[probe(&bigger, s->slot[i])] = s->slot[i];
	bigger.n = s->n;
	free(s->slot);
	*s = bigger;
	return 0;
}

int sfs_inoset_add(struct sfs_inoset *s, uint64_t ino)
{
	size_t h;
	int rc;

	if (!ino) {
		rc = !s->zero;
		s->zero = true;
		s->n += rc;
		return rc;
	}
	if ((s->n + 1) * 2 > s->cap && (rc = grow(s)))
		return rc;
	h = probe(s, ino);
	if (s->slot[h])
		return 0;
	s->slot[h] = ino;
	s->n++;
	return 1;
}

bool sfs_inoset_has(const struct sfs_inoset *s, uint64_t ino)
{
	if (!ino)
		return s->zero;
	return s->cap && s->slot[probe(s, ino)] == ino;
}

void sfs_inoset_free(struct sfs_inoset *s)
{
	free(s->slot);
	*s = (struct sfs_inoset){0};
}
