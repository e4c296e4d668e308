/* A bounded cache of O_PATH descriptors for nodes: the daemon's descriptor count stays
 * bounded however many inodes the kernel remembers (contract §4.2). A miss reopens the node from
 * its file handle with open_by_handle_at. */
#ifndef SFS_FDCACHE_H
#define SFS_FDCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inode.h"
#include "lru.h"

struct sfs_fdcache {
	pthread_mutex_t lock;
	struct sfs_lru lru;           /* nodes holding a descriptor (their count: how many) */
	size_t limit;
	int mount_fd;                 /* any fd of the backing, for open_by_handle_at */
};

void sfs_fdcache_init(struct sfs_fdcache *c, int mount_fd, size_t limit);

/* Returns the node's O_PATH descriptor, held until sfs_fd_put, or -errno (-ESTALE when the
 * backing object is gone). */
int sfs_fd_get(struct sfs_fdcache *c, struct sfs_node *n);
void sfs_fd_put(struct sfs_fdcache *c, struct sfs_node *n);

/* A new O_PATH descriptor of the object node id names (inode.h), opened by handle relative to
 * the cache's mount with CAP_DAC_READ_SEARCH raised for the call; or -errno (-ESTALE when the
 * object is gone). */
int sfs_fd_open_id(struct sfs_fdcache *c, uint64_t id);

/* Whether the node's descriptor is open now (it keeps the backing inode, and so its
 * number, alive). */
bool sfs_fd_cached(struct sfs_fdcache *c, const struct sfs_node *n);

/* Offers a freshly opened descriptor to the cache; takes ownership. */
void sfs_fdcache_offer(struct sfs_fdcache *c, struct sfs_node *n, int fd);

/* Closes the node's descriptor (the node is being freed; no user may hold it). */
void sfs_fdcache_remove(struct sfs_fdcache *c, struct sfs_node *n);

/* The three above, as the inode table takes them (sfs_itab_hooks.fds). */
extern const struct sfs_itab_fds sfs_fdcache_fds;

#endif
