/* The cache of fold indexes of warm directories (contract §5.3), kept exact by the notes of every
 * change, made under the directory change lock (dirlock.h). */
#ifndef SFS_FOLDCACHE_H
#define SFS_FOLDCACHE_H

#include "dirlock.h"
#include "foldidx.h"


/* Indexes of directories keyed by the backing's (dev, ino), within a memory budget: the coldest
 * unpinned indexes are dropped when it is passed. An index larger than the budget is still
 * handed out, and dropped when its last user unpins it.
 *
 * Locks (lock order: doc/design.md, "Locks"):
 *   - the directory change locks (dirlock.h): held across a change of a directory's entries
 *     and the sfs_foldcache_note_* call that reports it; insert takes one too;
 *   - an index's read/write lock (writer-preferring): readers under sfs_folddir_rdlock (take
 *     one at a time, and call no insert meanwhile), the writer in note_*;
 *   - the cache mutex: the table, the LRU list, pins and the byte count; held briefly and
 *     never while waiting for anything else.
 *
 * Protocol for the request path:
 *   - Changing a directory's entries, through any view (the daemon is the only writer, so the
 *     indexes stay exact): sfs_dirlock_lock(dir); the syscall; note_add / note_remove / note_rename
 *     on success; forget(dev, ino) of a directory removed or replaced; sfs_dirlock_unlock(dir). A
 *     rename between two directories takes sfs_dirlock_lock2. RENAME_EXCHANGE changes no names
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

/* A cache whose indexes follow the changes made under locks. Returns 0 or -ENOMEM. */
int sfs_foldcache_new(struct sfs_foldcache **out, size_t budget, struct sfs_dirlock *locks);

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
