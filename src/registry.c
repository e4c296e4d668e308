/* The registry of views (see registry.h). */
#include "registry.h"

#include <string.h>
#include <sys/stat.h>

#include "view.h"

void sfs_registry_init(struct sfs_registry *r)
{
	pthread_rwlock_init(&r->lock, NULL);
	atomic_init(&r->count, 0);
	memset(r->slots, 0, sizeof(r->slots));
}

int sfs_registry_free_slot(const struct sfs_registry *r)
{
	for (int s = 0; s < SFS_MAX_VIEWS; s++)
		if (!r->slots[s])
			return s;
	return -1;
}

void sfs_registry_add(struct sfs_registry *r, struct sfs_view *v)
{
	pthread_rwlock_wrlock(&r->lock);
	r->slots[v->slot] = v;
	atomic_fetch_add(&r->count, 1);
	pthread_rwlock_unlock(&r->lock);
}

void sfs_registry_remove(struct sfs_registry *r, struct sfs_view *v)
{
	pthread_rwlock_wrlock(&r->lock);
	r->slots[v->slot] = NULL;
	atomic_fetch_sub(&r->count, 1);
	pthread_rwlock_unlock(&r->lock);
}

void sfs_registry_read_lock(struct sfs_registry *r)
{
	pthread_rwlock_rdlock(&r->lock);
}

void sfs_registry_read_unlock(struct sfs_registry *r)
{
	pthread_rwlock_unlock(&r->lock);
}

/* A view's namespace is kept by identity only (view.h). */
static bool in_namespace(const struct sfs_view *v, int nsfd)
{
	struct stat st;

	return fstat(nsfd, &st) == 0 && st.st_ino == v->ns_ino && st.st_dev == v->ns_dev;
}

struct sfs_view *sfs_registry_find(struct sfs_registry *r, const char *mountpoint, int nsfd)
{
	struct sfs_view *v;

	sfs_for_each_view(r, v)
		if (!strcmp(v->mountpoint, mountpoint) && in_namespace(v, nsfd))
			return v;
	return NULL;
}
