/* The inode table: one per daemon, keyed by the backing's (dev, ino), shared by every view.
 * A node carries the backing's file handle, so the daemon can reopen it at any time, and a
 * slot in the bounded descriptor cache (fdcache.h). The node id the kernel knows it by is that
 * handle (ext4's inode number and generation), so an id can be found again by anyone, at any
 * time: after the daemon forgot the node, and by another daemon. Each view's lookups are
 * counted apart, so a vanished view can be dropped. */
#ifndef SFS_INODE_H
#define SFS_INODE_H

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "htab.h"
#include "list.h"

/* ext4's file handles (its export operations use generic_encode_ino32_fh): FILEID_INO32_GEN,
 * a 32-bit inode number, then a 32-bit generation */
#define SFS_HANDLE_INO32_GEN 1

/* What one node was last counted as in the quota ledger (quota.h). */
struct sfs_nodeq {
	int64_t bytes;   /* st_blocks * 512 */
	uint32_t uid, gid;
	bool counted;    /* it exists: it has a name, or (not a directory) an open file */
	uint32_t rmask;  /* the view trees (quota roots) it is inside, valid for generation rgen */
	uint32_t rgen;
	ino_t parent;    /* a directory holding it (not for directories: they know "..") */
};

struct sfs_view_ref {
	uint32_t view;   /* view slot */
	uint64_t count;  /* that view's lookup count */
};

struct sfs_node {
	/* Immutable after creation: */
	uint64_t id;                 /* generation << 32 | ino: the file handle, as a node id */
	mode_t type;                 /* S_IFMT bits; a backing inode never changes type */
	dev_t dev;
	ino_t ino;
	/* Protected by the table lock: */
	struct sfs_hlink hlink;      /* in the table, by sfs_hash_inode of ino */
	uint64_t nlookup;            /* sum over views */
	uint32_t pins;               /* view roots and the backing root */
	uint32_t nrefs;
	struct sfs_view_ref *refs;
	bool stale;                  /* its inode is gone and the number reused: never found again */
	/* Protected by the fd cache lock: */
	int fd;                      /* cached O_PATH descriptor or -1 */
	uint32_t fd_users;
	struct sfs_list lru;         /* on the cache's list while fd >= 0 */
	/* Protected by the spellings lock of names.c: */
	struct sfs_spellset *spellings;  /* casefold spellings kernels may cache under this dir */
	/* Protected by the node's quota stripe (quota.h): */
	struct sfs_nodeq q;
	/* Files open by kernel passthrough, over all views, that change the node unseen by the
	 * daemon: open for writing, or for reading in a view whose reads move the atime. While
	 * another view has one, a view may not cache the node's attributes
	 * (src/ops/passthrough.c). */
	atomic_int pt_writers;
	atomic_int pt_atime_opens;
	/* The view (slot + 1) whose kernel keeps the attributes of this file, made and open by
	 * passthrough, for a tick (attr_timeout_of_made); the next writer open in another view
	 * drops them there and sets this back to 0. */
	atomic_uint attrs_lent;
	/* Files open on it, over all views. An object whose last name went lives until its last
	 * close, and ext4 charges it meanwhile: the quota ledger counts it while this is not 0
	 * (quota.h), an O_TMPFILE file from its birth. */
	atomic_int opens;
};

struct sfs_fdcache;

/* What the table does with a node's descriptor, which the descriptor cache keeps (in the
 * node's fd, fd_users and lru, under its lock): fdcache.h gives these as sfs_fdcache_fds. The
 * cache knows nodes, and reopens them by id; the table reaches the cache only through these,
 * with the cache each of its calls is given. */
struct sfs_itab_fds {
	/* whether the node's descriptor is open now (it keeps the inode, and its number, alive) */
	bool (*cached)(struct sfs_fdcache *c, const struct sfs_node *n);
	/* hands a freshly opened descriptor of the node to the cache, which owns it from then */
	void (*offer)(struct sfs_fdcache *c, struct sfs_node *n, int fd);
	/* closes the node's descriptor: the node is being freed and no one holds it */
	void (*remove)(struct sfs_fdcache *c, struct sfs_node *n);
};

/* What must happen to every node as it enters the table and as it leaves (the daemon's
 * services register it: the quota ledger counts a node from its stat, the fold indexes drop
 * the spellings recorded under it), and the descriptor cache's part (never NULL). */
struct sfs_itab_hooks {
	void (*created)(void *arg, struct sfs_node *n, const struct stat *st);
	void (*freed)(void *arg, struct sfs_node *n);
	void *arg;
	const struct sfs_itab_fds *fds;
};

struct sfs_handover;

struct sfs_itab {
	struct sfs_itab_hooks hooks;
	struct sfs_handover *ho;     /* where lookup counts are kept for a successor, or NULL */
	pthread_mutex_t lock;        /* the table lock (lock order: doc/design.md, "Locks") */
	struct sfs_htab nodes;       /* struct sfs_node, stale ones included */
};

struct sfs_spellset;

int sfs_itab_init(struct sfs_itab *t, const struct sfs_itab_hooks *hooks);
void sfs_itab_destroy(struct sfs_itab *t, struct sfs_fdcache *c);

/* Finds or creates the node of the backing object open as fd (O_PATH) with stat st, and
 * counts one lookup by view (or pins it when view is SFS_PIN). Takes ownership of fd. */
#define SFS_PIN UINT32_MAX
/* view for a node a successor takes over: it gets the lookups its predecessor counted, and
 * none more (a kernel's request named it by id; see sfs_itab_inherited) */
#define SFS_ADOPT (UINT32_MAX - 1)
int sfs_itab_get(struct sfs_itab *t, struct sfs_fdcache *c, int fd, const struct stat *st,
                 uint32_t view, struct sfs_node **out);

/* sfs_itab_get for an object known by its id (sfs_node_id_at) and stat, without a descriptor:
 * the node opens one by handle when a request first needs it (fdcache.h). */
int sfs_itab_get_id(struct sfs_itab *t, uint64_t id, const struct stat *st, uint32_t view,
                    struct sfs_node **out);

/* The node of (dev, ino) if the table has it; no reference is taken. */
struct sfs_node *sfs_itab_find(struct sfs_itab *t, dev_t dev, ino_t ino);

/* The node with that id if the table has it, one that is stale included; no reference is
 * taken (a kernel's lookup on it keeps it). */
struct sfs_node *sfs_itab_find_id(struct sfs_itab *t, uint64_t id);

/* Drops n lookups of view (FORGET); frees the node when no view and no pin holds it. */
void sfs_itab_forget(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *node,
                     uint32_t view, uint64_t n);
/* The same for a node id the table may not have: a predecessor's count of it is dropped. */
void sfs_itab_forget_id(struct sfs_itab *t, struct sfs_fdcache *c, uint64_t id, uint32_t view,
                        uint64_t n);

/* Whether a predecessor daemon counted a lookup of id by view that no node holds yet: the
 * view's kernel knows the id, so a request naming it may have the node made again. */
bool sfs_itab_inherited(struct sfs_itab *t, uint64_t id, uint32_t view);

void sfs_itab_unpin(struct sfs_itab *t, struct sfs_fdcache *c, struct sfs_node *node);

/* Drops every lookup a view held (the view is gone and will send no FORGET). */
void sfs_itab_drop_view(struct sfs_itab *t, struct sfs_fdcache *c, uint32_t view);

/* Copies into views[] the slots of the views that hold a lookup on node, at most max;
 * returns how many hold one (more than max: call again with room for them). */
size_t sfs_itab_views_of(struct sfs_itab *t, struct sfs_node *node, uint32_t *views, size_t max);

/* Whether view holds a lookup on the node with that id (a stale one included: an id names
 * one object for ever), looked up and checked under one hold of the table lock. */
bool sfs_itab_id_held_by(struct sfs_itab *t, uint64_t id, uint32_t view);

size_t sfs_itab_count(struct sfs_itab *t);
/* Calls fn for every node with an open file, under the table lock (fn may take the fd cache,
 * nothing above it). */
void sfs_itab_each_open(struct sfs_itab *t, void (*fn)(void *arg, struct sfs_node *n), void *arg);

/* open_by_handle_at of the node's backing object relative to mount_fd (the backing or a
 * clone of it: the new descriptor belongs to that mount). Needs CAP_DAC_READ_SEARCH, which
 * the caller raises. Returns the descriptor, or -1 with errno set. */
int sfs_node_open(const struct sfs_node *n, int mount_fd, int flags);

/* The node id of name in dirfd (flags as name_to_handle_at's: without AT_SYMLINK_FOLLOW a
 * symlink is not followed): its file handle, ext4's inode number and generation. Returns 0,
 * or -errno (-EOPNOTSUPP for a handle that is not ext4's). */
int sfs_node_id_at(int dirfd, const char *name, int flags, uint64_t *id);

/* sfs_node_id_at of the object open as fd (O_PATH will do). */
int sfs_node_id_of(int fd, uint64_t *id);

/* The inode number an id holds (its low 32 bits: ext4's numbers are 32-bit). */
uint32_t sfs_node_id_ino(uint64_t id);

/* The same for the object a node id names, whether the table has it or not (its inode may
 * have been freed since: ESTALE). */
int sfs_node_id_open(uint64_t id, int mount_fd, int flags);

#endif
