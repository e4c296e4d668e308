/* A set of inode numbers: the scans that build the quota ledger count a multiply linked file
 * once, at its first name, and remember its number here. Open addressing with linear probing,
 * grown (and every number placed again) when half full. */
#ifndef SFS_INOSET_H
#define SFS_INOSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_inoset {
	uint64_t *slot;  /* 0: free (no inode has number 0; `zero` keeps it all the same) */
	size_t n, cap;   /* numbers held, slots (a power of two, or 0 before the first add) */
	bool zero;
};

/* Adds ino: 1 if it was not in the set, 0 if it was, -ENOMEM (the set unchanged). */
int sfs_inoset_add(struct sfs_inoset *s, uint64_t ino);
bool sfs_inoset_has(const struct sfs_inoset *s, uint64_t ino);
void sfs_inoset_free(struct sfs_inoset *s);

#endif
