/* A set of inode numbers: the scans that build the quota ledger count a multiply linked file
 * once, at its first name, and remember its number here. The tree's hash table (htab.h) by
 * sfs_hash_inode; the numbers are kept in blocks, so that adding one allocates nothing most
 * of the time. A zeroed set is empty. */
#ifndef SFS_INOSET_H
#define SFS_INOSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "htab.h"

struct sfs_inoset_block;

struct sfs_inoset {
	struct sfs_htab tab;              /* the numbers but 0; made at the first add */
	struct sfs_inoset_block *blocks;  /* where they are kept, the one filling first */
	size_t n;                         /* numbers held, 0 included */
	bool zero;                        /* 0 is held (no inode has number 0: kept all the same) */
};

/* Adds ino: 1 if it was not in the set, 0 if it was, -ENOMEM (the set unchanged). */
int sfs_inoset_add(struct sfs_inoset *s, uint64_t ino);
bool sfs_inoset_has(const struct sfs_inoset *s, uint64_t ino);
void sfs_inoset_free(struct sfs_inoset *s);

#endif
