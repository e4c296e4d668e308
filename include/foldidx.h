/* The per-directory fold index (contract §5.3): finds a name of one directory under any spelling. */
#ifndef SFS_FOLDIDX_H
#define SFS_FOLDIDX_H

#include "fold.h"


/* Maps each folded name to its class: the exact names of one directory that fold to it (more
 * than one only for names made through a nocasefold view). Not synchronised: one writer or any
 * number of readers at a time (the cache below provides the locking). */
struct sfs_foldidx;

struct sfs_foldidx_hit {
	char name[SFS_FOLD_NAME_MAX + 1]; /* the class's representative, NUL-terminated */
	size_t len;
	bool exact;                       /* it is the spelling asked for */
	bool collided;                    /* the class has more than one member */
};

struct sfs_foldidx_stats {
	size_t names;       /* exact names held */
	size_t classes;     /* distinct folded names: what readdir lists */
	size_t collisions;  /* names - classes: names hidden behind another spelling */
	size_t bytes;       /* memory held, as the cache's budget counts it */
};

/* An empty index sized for about expect names. Returns 0 or -ENOMEM. */
int sfs_foldidx_new(struct sfs_foldidx **out, size_t expect);

/* An index of n NUL-terminated names as readdir returns them: "." and ".." are skipped, and so
 * are repeats (readdir of a directory that changes may return a name twice). Returns 0,
 * -EINVAL or -ENAMETOOLONG (a name the directory cannot hold) or -ENOMEM. */
int sfs_foldidx_from_names(struct sfs_foldidx **out, const char *const *names, size_t n);

void sfs_foldidx_free(struct sfs_foldidx *idx);

/* Name arguments below: len bytes, no NUL or '/', not "." or "..", at most SFS_FOLD_NAME_MAX;
 * otherwise -EINVAL or -ENAMETOOLONG. O(1) expected, except removing the smallest member of a
 * class, which finds the next smallest (O(class size)). */

/* Returns 0, -EEXIST if this exact name is present, or -ENOMEM (the index is unchanged). */
int sfs_foldidx_add(struct sfs_foldidx *idx, const char *name, size_t len);

/* Returns 0 or -ENOENT. */
int sfs_foldidx_remove(struct sfs_foldidx *idx, const char *name, size_t len);

/* from is renamed to (which may already exist: rename replaces it). Returns 0, -ENOENT (from is
 * absent) or -ENOMEM; on error the index is unchanged. */
int sfs_foldidx_rename(struct sfs_foldidx *idx, const char *from, size_t fromlen, const char *to,
                       size_t tolen);

/* The name a lookup of name resolves to (contract §5.3): name itself if present, otherwise the
 * bytewise-smallest member of its class. Returns 0 and fills hit, or -ENOENT. */
int sfs_foldidx_lookup(const struct sfs_foldidx *idx, const char *name, size_t len,
                       struct sfs_foldidx_hit *hit);

/* Whether readdir lists name: true for the bytewise-smallest member of its class only. A name
 * the index does not hold is judged as if it were added (listed unless a smaller member
 * exists). False for names the index refuses. */
bool sfs_foldidx_listed(const struct sfs_foldidx *idx, const char *name, size_t len);

void sfs_foldidx_stats(const struct sfs_foldidx *idx, struct sfs_foldidx_stats *st);

/* What malloc adds to each block (glibc: an 8-byte header, 16-byte granules), for budgets. */
#define SFS_FOLD_ALLOC_OVERHEAD 16

/* Whether name can be a directory entry the index holds: 0, -EINVAL, or -ENAMETOOLONG. */
int sfs_foldidx_check_name(const char *name, size_t len);

#endif
