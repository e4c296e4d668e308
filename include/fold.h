/* Casefold views (SPEC §5.3): the fold that makes two names one, the per-directory index that
 * finds a name under any spelling, and a bounded cache of the indexes of warm directories.
 * Pure logic over names: the request path reads directories and feeds names in. */
#ifndef SFS_FOLD_H
#define SFS_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest name ext4 stores (EXT4_NAME_LEN); the index refuses longer ones. */
#define SFS_FOLD_NAME_MAX 255
/* Folding never makes a name more than three times longer (U+0390: 2 bytes -> 6), checked over
 * every code point by test_fold; sfs_fold reports -ENAMETOOLONG rather than overflow. */
#define SFS_FOLD_MAXLEN(len) (3 * (size_t)(len))
#define SFS_FOLD_KEY_MAX SFS_FOLD_MAXLEN(SFS_FOLD_NAME_MAX)

/* ---- The fold --------------------------------------------------------------------------- */

/* True if s[0..len) is well-formed UTF-8 (RFC 3629: shortest form, no surrogates, at most
 * U+10FFFF). Unassigned code points and noncharacters are valid, as for the kernel. */
bool sfs_fold_valid_utf8(const char *s, size_t len);

/* Folds name[0..len) into out: NFD + full case folding (C+F) + removal of default-ignorable code
 * points, as a casefold ext4 directory compares names. A name that is not valid UTF-8 folds to
 * itself byte for byte and *invalid is set (such names match only exactly; casefold=strict
 * refuses to create them). out need not be terminated. Returns 0, -ENAMETOOLONG if out is
 * shorter than the fold (SFS_FOLD_MAXLEN(len) always suffices) or -ENOMEM. */
int sfs_fold(const char *name, size_t len, char *out, size_t outsize, size_t *outlen,
             bool *invalid);

/* True if the two names fold equal. Names past SFS_FOLD_NAME_MAX need memory; without it they
 * are compared byte for byte. */
bool sfs_fold_equal(const char *a, size_t alen, const char *b, size_t blen);

/* The Unicode version of the tables in use ("15.0.0" with utf8proc 2.8; the kernel's are 12.1). */
const char *sfs_fold_unicode_version(void);

/* ---- The per-directory fold index -------------------------------------------------------- */

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

/* The name a lookup of name resolves to (SPEC §5.3): name itself if present, otherwise the
 * bytewise-smallest member of its class. Returns 0 and fills hit, or -ENOENT. */
int sfs_foldidx_lookup(const struct sfs_foldidx *idx, const char *name, size_t len,
                       struct sfs_foldidx_hit *hit);

/* Whether readdir lists name: true for the bytewise-smallest member of its class only. A name
 * the index does not hold is judged as if it were added (listed unless a smaller member
 * exists). False for names the index refuses. */
bool sfs_foldidx_listed(const struct sfs_foldidx *idx, const char *name, size_t len);

void sfs_foldidx_stats(const struct sfs_foldidx *idx, struct sfs_foldidx_stats *st);

/* ---- The cache of indexes ------------------------------------------------------------------ */

/* Indexes of directories keyed by the backing's (dev, ino), within a memory budget: the coldest
 * unpinned indexes are dropped when it is passed. An index larger than the budget is still
 * handed out, and dropped when its last user unpins it.
 *
 * Locks, outermost first (never take an outer lock while holding an inner one):
 *   1. change locks: striped by (dev, ino); held across a change of a directory's entries and
 *      the sfs_foldcache_note_* call that reports it, so changes and notes of one directory come
 *      in the same order; they may be taken again by the thread that holds them, but a second
 *      directory's only through change_lock2; insert takes one too;
 *   2. an index's read/write lock (writer-preferring): readers under sfs_folddir_rdlock (take
 *      one at a time, and call no insert meanwhile), the writer in note_*;
 *   3. the cache mutex: the table, the LRU list, pins and the byte count; held briefly and never
 *      while waiting for anything else.
 *
 * Protocol for the request path:
 *   - Changing a directory's entries, through any view (the daemon is the only writer, so the
 *     indexes stay exact): change_lock(dir); the syscall; note_add / note_remove / note_rename
 *     on success; forget(dev, ino) of a directory removed or replaced; change_unlock(dir). A
 *     rename between two directories takes change_lock2. RENAME_EXCHANGE changes no names
 *     (nothing to note); RENAME_WHITEOUT keeps from (note_add of to only).
 *   - A lookup that misses the exact spelling: sfs_foldcache_lookup; on -ENODATA (not cached),
 *     stamp = sfs_foldcache_stamp(dir), read the directory into a new index, then
 *     sfs_foldcache_insert(..., stamp, ...); -EAGAIN there means the directory changed while
 *     it was read (read it again). Build only an index of a directory whose change lock you
 *     hold, or while holding no change lock; do not insert the index of a directory found
 *     removed (nlink 0 after reading): its inode number may come back.
 *   - readdir: d = sfs_foldcache_get (or insert); idx = sfs_folddir_rdlock(d);
 *     sfs_foldidx_listed per entry; sfs_folddir_unlock(d); sfs_foldcache_put(c, d). */
struct sfs_foldcache;
struct sfs_folddir;

struct sfs_foldcache_stats {
	size_t dirs;        /* indexes cached */
	size_t bytes;       /* their memory, against budget */
	size_t budget;
	size_t names;       /* names indexed */
	size_t collisions;  /* sum of sfs_foldidx_stats.collisions over cached indexes */
	uint64_t hits, misses, evictions;
};

/* Returns 0 or -ENOMEM. */
int sfs_foldcache_new(struct sfs_foldcache **out, size_t budget);

/* Frees the cache and every index; none may be pinned. */
void sfs_foldcache_free(struct sfs_foldcache *c);

/* The pinned index of (dev, ino), most recently used now; NULL if not cached. */
struct sfs_folddir *sfs_foldcache_get(struct sfs_foldcache *c, uint64_t dev, uint64_t ino);

/* Unpins d; a forgotten d is freed by its last put, and the budget is enforced. */
void sfs_foldcache_put(struct sfs_foldcache *c, struct sfs_folddir *d);

/* Read access to a pinned d's index until sfs_folddir_unlock. */
const struct sfs_foldidx *sfs_folddir_rdlock(struct sfs_folddir *d);
void sfs_folddir_unlock(struct sfs_folddir *d);

/* Taken before reading a directory to build its index; see insert. */
uint64_t sfs_foldcache_stamp(struct sfs_foldcache *c, uint64_t dev, uint64_t ino);

/* Caches idx as (dev, ino)'s index and returns it pinned in *out. The cache owns idx from here
 * on, whatever the result. If another thread cached one first, idx is freed and that one is
 * returned. Returns 0, -EAGAIN (the directory changed or was forgotten since stamp: idx may be
 * stale and is freed) or -ENOMEM (idx freed). */
int sfs_foldcache_insert(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, uint64_t stamp,
                         struct sfs_foldidx *idx, struct sfs_folddir **out);

/* sfs_foldidx_lookup on the cached index of (dev, ino); -ENODATA if none is cached. */
int sfs_foldcache_lookup(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                         size_t len, struct sfs_foldidx_hit *hit);

void sfs_foldcache_change_lock(struct sfs_foldcache *c, uint64_t dev, uint64_t ino);
void sfs_foldcache_change_unlock(struct sfs_foldcache *c, uint64_t dev, uint64_t ino);
void sfs_foldcache_change_lock2(struct sfs_foldcache *c, uint64_t dev1, uint64_t ino1,
                                uint64_t dev2, uint64_t ino2);
void sfs_foldcache_change_unlock2(struct sfs_foldcache *c, uint64_t dev1, uint64_t ino1,
                                  uint64_t dev2, uint64_t ino2);

/* Report a change made under the directory's change lock. Idempotent (adding a present name or
 * removing an absent one is no error); an index that cannot follow (no memory) is dropped, so
 * a cached index is never stale. Return 0, or -EINVAL / -ENAMETOOLONG for a refused name. */
int sfs_foldcache_note_add(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                           size_t len);
int sfs_foldcache_note_remove(struct sfs_foldcache *c, uint64_t dev, uint64_t ino,
                              const char *name, size_t len);
int sfs_foldcache_note_rename(struct sfs_foldcache *c, uint64_t fdev, uint64_t fino,
                              const char *from, size_t fromlen, uint64_t tdev, uint64_t tino,
                              const char *to, size_t tolen);

/* Drops the index of (dev, ino): the directory is gone, and its inode number may come back as
 * another directory. Pinned users keep theirs until put. */
void sfs_foldcache_forget(struct sfs_foldcache *c, uint64_t dev, uint64_t ino);

void sfs_foldcache_stats(struct sfs_foldcache *c, struct sfs_foldcache_stats *st);

#endif
