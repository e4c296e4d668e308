/* The set of inode numbers of the quota scans (see inoset.h). */
#include "inoset.h"

#include <errno.h>
#include <stdlib.h>

#include "hash.h"

/* The table's first size, and the numbers one block keeps: a scan that meets few hard links
 * makes one of each. */
#define FIRST 1024

struct member {
	struct sfs_hlink link;
	uint64_t ino;
};

struct sfs_inoset_block {
	struct sfs_inoset_block *next;
	size_t used;
	struct member m[FIRST];
};

static bool holds(const struct sfs_inoset *s, uint64_t ino)
{
	uint64_t h = sfs_hash_inode(0, ino);
	struct sfs_hlink *pos;

	if (!sfs_htab_ready(&s->tab))
		return false;
	sfs_htab_for_each_match(pos, &s->tab, h)
		if (sfs_htab_entry(pos, struct member, link)->ino == ino)
			return true;
	return false;
}

/* Room for one more number: the next of the filling block, or the first of a new one. */
static struct member *new_member(struct sfs_inoset *s)
{
	struct sfs_inoset_block *b = s->blocks;

	if (!b || b->used == FIRST) {
		if (!(b = malloc(sizeof(*b))))
			return NULL;
		b->used = 0;
		b->next = s->blocks;
		s->blocks = b;
	}
	return &b->m[b->used++];
}

int sfs_inoset_add(struct sfs_inoset *s, uint64_t ino)
{
	struct member *m;
	int rc;

	if (!ino) {
		rc = !s->zero;
		s->zero = true;
		s->n += rc;
		return rc;
	}
	if (holds(s, ino))
		return 0;
	if (!sfs_htab_ready(&s->tab) && (rc = sfs_htab_init(&s->tab, FIRST)))
		return rc;
	if (!(m = new_member(s)))
		return -ENOMEM;
	m->ino = ino;
	sfs_htab_insert(&s->tab, &m->link, sfs_hash_inode(0, ino));
	s->n++;
	return 1;
}

bool sfs_inoset_has(const struct sfs_inoset *s, uint64_t ino)
{
	return ino ? holds(s, ino) : s->zero;
}

void sfs_inoset_free(struct sfs_inoset *s)
{
	while (s->blocks) {
		struct sfs_inoset_block *next = s->blocks->next;
		free(s->blocks);
		s->blocks = next;
	}
	sfs_htab_destroy(&s->tab);
	*s = (struct sfs_inoset){0};
}
