/* The tables and ledgers that one daemon's views share, as the request path reaches them
 * (v->svc): the daemon owns and starts them, and none of them knows the daemon. Each service
 * sees only what it is handed here or in its own context (quota.h) and hooks (inode.h). */
#ifndef SFS_SERVICES_H
#define SFS_SERVICES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include "backing.h"
#include "dirlock.h"
#include "fdcache.h"
#include "hash.h"
#include "inode.h"
#include "quota.h"

struct sfs_coherence;
struct sfs_registry;
struct sfs_handover;
struct sfs_openfiles;
struct sfs_locks;
struct sfs_foldcache;

/* The spellings casefold views let the kernel cache that are no backing name (names.c). */
struct sfs_spellings {
	pthread_mutex_t lock;              /* every directory's records, and total */
	size_t total;                      /* records over all directories, bounded */
	struct sfs_hash_key key;
};

struct sfs_services {
	const struct sfs_backing *backing; /* the one superblock (backing.h) */
	ino_t root_ino;                    /* its root inode: the admin state /.strictfs is there */
	struct sfs_registry *views;        /* the views served (registry.h), the daemon's */
	struct sfs_itab itab;              /* nodes (inode.h) */
	struct sfs_fdcache fdc;            /* their O_PATH descriptors (fdcache.h) */
	struct sfs_quota quota;            /* usage and limits (quota.h) */
	struct sfs_dirlock dirlock;        /* directory change locks (dirlock.h) */
	struct sfs_foldcache *folds;       /* fold indexes of directories (names.h) */
	struct sfs_spellings spellings;    /* casefold spellings kernels may cache (names.h) */
	struct sfs_coherence *coh;         /* notices to the other views (coherence.h) */
	struct sfs_handover *ho;           /* what a successor takes over (handover.h) */
	struct sfs_openfiles *files;       /* open files, by the kernel's fh (openfiles.h) */
	struct sfs_locks *locks;           /* file locks, shared by the views (locks.h) */
	/* A native mount of the device writes behind the daemon's back: no cache of the
	 * backing's names is exact then (contract §3.2). */
	atomic_bool shared;
};

/* The admin state's name in the backing root (contract §3.5). */
#define SFS_ADMIN_NAME ".strictfs"

/* Whether dir is the backing's root, where the admin state is. */
static inline bool sfs_is_backing_root(const struct sfs_services *s, const struct sfs_node *dir)
{
	return dir->ino == s->root_ino && dir->dev == s->backing->fs_dev;
}

/* Whether name in dir is the admin state /.strictfs at the backing root (contract §3.5), byte
 * for byte: the name on the backing. A casefold view also reserves every spelling of it
 * (policy/casefold.c). */
static inline bool sfs_is_admin_entry(const struct sfs_services *s, const struct sfs_node *dir,
                                      const char *name)
{
	return sfs_is_backing_root(s, dir) && !strcmp(name, SFS_ADMIN_NAME);
}

#endif
