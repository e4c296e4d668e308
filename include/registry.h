/* The registry of a daemon's views: a view is found by its slot (what node lookup counts and
 * coherence notices name), by mountpoint in a namespace, or visited one by one. The control
 * loop is its only writer (add, remove); other threads read under the read lock. */
#ifndef SFS_REGISTRY_H
#define SFS_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SFS_MAX_VIEWS 4096

struct sfs_view;

struct sfs_registry {
	pthread_rwlock_t lock;         /* readers: notifier, status; writer: add, remove */
	atomic_size_t count;           /* views published; read without the lock */
	struct sfs_view *slots[SFS_MAX_VIEWS];
};

void sfs_registry_init(struct sfs_registry *r);

/* A free slot for a view about to start (by the control loop), or -1 when full. */
int sfs_registry_free_slot(const struct sfs_registry *r);

/* Publishes v at v->slot, and takes it out again. */
void sfs_registry_add(struct sfs_registry *r, struct sfs_view *v);
void sfs_registry_remove(struct sfs_registry *r, struct sfs_view *v);

static inline size_t sfs_registry_count(const struct sfs_registry *r)
{
	return atomic_load(&r->count);
}

/* The view in slot, or NULL; under the read lock unless the caller is the control loop. */
static inline struct sfs_view *sfs_registry_at(const struct sfs_registry *r, uint32_t slot)
{
	return slot < SFS_MAX_VIEWS ? r->slots[slot] : NULL;
}

void sfs_registry_read_lock(struct sfs_registry *r);
void sfs_registry_read_unlock(struct sfs_registry *r);

/* Visits every view, as v (under the read lock unless the caller is the control loop). */
#define sfs_for_each_view(r, v)                                                   \
	for (size_t slot_ = 0; slot_ < SFS_MAX_VIEWS; slot_++)                      \
		if (!((v) = (r)->slots[slot_])) {                                   \
		} else

/* The view at mountpoint in the mount namespace that nsfd is a descriptor of, or NULL. */
struct sfs_view *sfs_registry_find(struct sfs_registry *r, const char *mountpoint, int nsfd);

#endif
