/* Directory change locks: every change of a directory's entries, through any view, casefold
 * or not, happens under that directory's lock together with the notes that report it
 * (names.c), so the changes and notes of one directory come in one order. Each lock has an
 * epoch that moves on at the end of every change (and when a directory is forgotten): a
 * reader that stamped it before reading a directory can tell whether the directory changed
 * while it read (foldcache.h). Striped by (dev, ino); a thread may take its directory's lock
 * again, but a second directory's only through sfs_dirlock_lock2. */
#ifndef SFS_DIRLOCK_H
#define SFS_DIRLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SFS_DIRLOCK_STRIPES 64

struct sfs_dirlock_stripe {
	pthread_mutex_t lock;      /* recursive: an index builder may hold it as the change lock */
	_Atomic uint64_t epoch;
};

struct sfs_dirlock {
	struct sfs_dirlock_stripe stripes[SFS_DIRLOCK_STRIPES];
};

void sfs_dirlock_init(struct sfs_dirlock *l);

/* A change of the directory (dev, ino): lock, change and note, unlock (the epoch moves). */
void sfs_dirlock_lock(struct sfs_dirlock *l, uint64_t dev, uint64_t ino);
void sfs_dirlock_unlock(struct sfs_dirlock *l, uint64_t dev, uint64_t ino);
/* A change of two directories (rename): both locks, in an order two renames agree on. */
void sfs_dirlock_lock2(struct sfs_dirlock *l, uint64_t dev1, uint64_t ino1, uint64_t dev2,
                       uint64_t ino2);
void sfs_dirlock_unlock2(struct sfs_dirlock *l, uint64_t dev1, uint64_t ino1, uint64_t dev2,
                         uint64_t ino2);

/* The epoch of the directory's lock, taken before reading the directory. */
uint64_t sfs_dirlock_stamp(struct sfs_dirlock *l, uint64_t dev, uint64_t ino);
/* Takes the directory's lock if no change ended since stamp (true); else false, not held.
 * The holder then releases it with sfs_dirlock_release: nothing changed. */
bool sfs_dirlock_lock_unchanged(struct sfs_dirlock *l, uint64_t dev, uint64_t ino,
                                uint64_t stamp);
void sfs_dirlock_release(struct sfs_dirlock *l, uint64_t dev, uint64_t ino);
/* The directory is gone (its inode number may come back): stamps taken before are stale. */
void sfs_dirlock_bump(struct sfs_dirlock *l, uint64_t dev, uint64_t ino);

#endif
