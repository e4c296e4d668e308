/* Bounded O_PATH descriptor cache (see fdcache.h). The tree's LRU list (lru.h) of nodes that
 * hold a descriptor; the least recently used unheld one is closed when the bound is passed. */
#include "fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "inode.h"
#include "priv.h"

void sfs_fdcache_init(struct sfs_fdcache *c, int mount_fd, size_t limit)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	sfs_lru_init(&c->lru);
	c->mount_fd = mount_fd;
	c->limit = limit < 16 ? 16 : limit;
}

/* Closes descriptors from the cold end until under the bound; returns those to close
 * outside the lock through fds (at most max). */
static size_t evict_locked(struct sfs_fdcache *c, int *fds, size_t max)
{
	struct sfs_list *pos, *prev;
	size_t k = 0;

	sfs_lru_for_each_oldest_first(pos, prev, &c->lru) {
		struct sfs_node *n = sfs_list_entry(pos, struct sfs_node, lru);
		if (sfs_lru_count(&c->lru) <= c->limit || k == max)
			break;
		if (!n->fd_users) {
			fds[k++] = n->fd;
			n->fd = -1;
			sfs_lru_remove(&c->lru, &n->lru);
		}
	}
	return k;
}

static void install_locked(struct sfs_fdcache *c, struct sfs_node *n, int fd)
{
	n->fd = fd;
	sfs_lru_add(&c->lru, &n->lru);
}

void sfs_fdcache_offer(struct sfs_fdcache *c, struct sfs_node *n, int fd)
{
	int victims[8];
	size_t k;

	pthread_mutex_lock(&c->lock);
	if (n->fd >= 0) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return;
	}
	install_locked(c, n, fd);
	k = evict_locked(c, victims, 8);
	pthread_mutex_unlock(&c->lock);
	while (k)
		close(victims[--k]);
}

int sfs_fd_open_id(struct sfs_fdcache *c, uint64_t id)
{
	int fd;

	/* open_by_handle_at needs CAP_DAC_READ_SEARCH, which the caller's fsuid dropped. */
	sfs_priv_begin(SFS_PRIV_SEARCH);
	fd = sfs_node_id_open(id, c->mount_fd, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fd = errno == ENOENT ? -ESTALE : -errno;
	sfs_priv_end();
	return fd;
}

int sfs_fd_get(struct sfs_fdcache *c, struct sfs_node *n)
{
	int fd, victims[8];
	size_t k;

	pthread_mutex_lock(&c->lock);
	if (n->fd >= 0) {
		n->fd_users++;
		sfs_lru_touch(&c->lru, &n->lru);
		fd = n->fd;
		pthread_mutex_unlock(&c->lock);
		return fd;
	}
	pthread_mutex_unlock(&c->lock);

	fd = sfs_fd_open_id(c, n->id);
	if (fd < 0)
		return fd;

	pthread_mutex_lock(&c->lock);
	if (n->fd >= 0) {
		close(fd); /* another thread won the race; use its descriptor */
	} else {
		install_locked(c, n, fd);
	}
	n->fd_users++;
	fd = n->fd;
	k = evict_locked(c, victims, 8);
	pthread_mutex_unlock(&c->lock);
	while (k)
		close(victims[--k]);
	return fd;
}

bool sfs_fd_cached(struct sfs_fdcache *c, const struct sfs_node *n)
{
	bool cached;

	pthread_mutex_lock(&c->lock);
	cached = n->fd >= 0;
	pthread_mutex_unlock(&c->lock);
	return cached;
}

/* A descriptor let go may be the one the bound was waiting for: after many were held at
 * once, the cache comes back under its bound as they are let go, not at the next lookups. */
void sfs_fd_put(struct sfs_fdcache *c, struct sfs_node *n)
{
	int victims[8];
	size_t k;

	pthread_mutex_lock(&c->lock);
	n->fd_users--;
	k = evict_locked(c, victims, 8);
	pthread_mutex_unlock(&c->lock);
	while (k)
		close(victims[--k]);
}

void sfs_fdcache_remove(struct sfs_fdcache *c, struct sfs_node *n)
{
	int fd = -1;

	pthread_mutex_lock(&c->lock);
	if (n->fd >= 0) {
		fd = n->fd;
		n->fd = -1;
		sfs_lru_remove(&c->lru, &n->lru);
	}
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0)
		close(fd);
}

const struct sfs_itab_fds sfs_fdcache_fds = {
	.cached = sfs_fd_cached,
	.offer = sfs_fdcache_offer,
	.remove = sfs_fdcache_remove,
};
