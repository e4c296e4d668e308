/* Bounded O_PATH descriptor cache (see fdcache.h). An LRU list of nodes that hold a
 * descriptor; the least recently used unheld one is closed when the bound is passed. */
#include "fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "creds.h"
#include "inode.h"

void sfs_fdcache_init(struct sfs_fdcache *c, int mount_fd, size_t limit)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->mount_fd = mount_fd;
	c->limit = limit < 16 ? 16 : limit;
}

static void lru_unlink(struct sfs_fdcache *c, struct sfs_node *n)
{
	if (n->lru_prev)
		n->lru_prev->lru_next = n->lru_next;
	else if (c->head == n)
		c->head = n->lru_next;
	if (n->lru_next)
		n->lru_next->lru_prev = n->lru_prev;
	else if (c->tail == n)
		c->tail = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
}

static void lru_push_front(struct sfs_fdcache *c, struct sfs_node *n)
{
	n->lru_prev = NULL;
	n->lru_next = c->head;
	if (c->head)
		c->head->lru_prev = n;
	c->head = n;
	if (!c->tail)
		c->tail = n;
}

/* Closes descriptors from the cold end until under the bound; returns those to close
 * outside the lock through fds (at most max). */
static size_t evict_locked(struct sfs_fdcache *c, int *fds, size_t max)
{
	size_t k = 0;
	struct sfs_node *n = c->tail;

	while (c->open > c->limit && n && k < max) {
		struct sfs_node *prev = n->lru_prev;
		if (!n->fd_users) {
			fds[k++] = n->fd;
			n->fd = -1;
			lru_unlink(c, n);
			c->open--;
		}
		n = prev;
	}
	return k;
}

static void install_locked(struct sfs_fdcache *c, struct sfs_node *n, int fd)
{
	n->fd = fd;
	c->open++;
	lru_push_front(c, n);
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

static int open_handle(struct sfs_fdcache *c, struct sfs_node *n)
{
	int fd;

	/* open_by_handle_at needs CAP_DAC_READ_SEARCH, which the caller's fsuid dropped. */
	sfs_priv_begin(SFS_PRIV_SEARCH);
	fd = sfs_node_open(n, c->mount_fd, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
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
		if (c->head != n) {
			lru_unlink(c, n);
			lru_push_front(c, n);
		}
		fd = n->fd;
		pthread_mutex_unlock(&c->lock);
		return fd;
	}
	pthread_mutex_unlock(&c->lock);

	fd = open_handle(c, n);
	if (fd < 0)
		return fd == -ENOENT ? -ESTALE : fd;

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

void sfs_fd_put(struct sfs_fdcache *c, struct sfs_node *n)
{
	pthread_mutex_lock(&c->lock);
	n->fd_users--;
	pthread_mutex_unlock(&c->lock);
}

void sfs_fdcache_remove(struct sfs_fdcache *c, struct sfs_node *n)
{
	int fd = -1;

	pthread_mutex_lock(&c->lock);
	if (n->fd >= 0) {
		fd = n->fd;
		n->fd = -1;
		lru_unlink(c, n);
		c->open--;
	}
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0)
		close(fd);
}
