/* Directory change locks (see dirlock.h). */
#include "dirlock.h"

#include "hash.h"

void sfs_dirlock_init(struct sfs_dirlock *l)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	for (int i = 0; i < SFS_DIRLOCK_STRIPES; i++) {
		pthread_mutex_init(&l->stripes[i].lock, &attr);
		atomic_init(&l->stripes[i].epoch, 0);
	}
	pthread_mutexattr_destroy(&attr);
}

static struct sfs_dirlock_stripe *stripe_of(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	return &l->stripes[sfs_hash_inode(dev, ino) >> 58];
}

void sfs_dirlock_lock(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	pthread_mutex_lock(&stripe_of(l, dev, ino)->lock);
}

/* The epoch moves on at the end of the change, under the lock: an unchanged epoch under the
 * lock means every change either preceded the stamp or has not begun. */
void sfs_dirlock_unlock(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	struct sfs_dirlock_stripe *s = stripe_of(l, dev, ino);

	atomic_fetch_add(&s->epoch, 1);
	pthread_mutex_unlock(&s->lock);
}

/* Stripes are taken in address order, so two renames between the same pair cannot deadlock. */
void sfs_dirlock_lock2(struct sfs_dirlock *l, uint64_t dev1, uint64_t ino1, uint64_t dev2,
                       uint64_t ino2)
{
	struct sfs_dirlock_stripe *a = stripe_of(l, dev1, ino1), *b = stripe_of(l, dev2, ino2), *t;

	if (a > b)
		t = a, a = b, b = t;
	pthread_mutex_lock(&a->lock);
	if (b != a)
		pthread_mutex_lock(&b->lock);
}

void sfs_dirlock_unlock2(struct sfs_dirlock *l, uint64_t dev1, uint64_t ino1, uint64_t dev2,
                         uint64_t ino2)
{
	if (stripe_of(l, dev1, ino1) != stripe_of(l, dev2, ino2))
		sfs_dirlock_unlock(l, dev2, ino2);
	sfs_dirlock_unlock(l, dev1, ino1);
}

uint64_t sfs_dirlock_stamp(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	return atomic_load(&stripe_of(l, dev, ino)->epoch);
}

bool sfs_dirlock_lock_unchanged(struct sfs_dirlock *l, uint64_t dev, uint64_t ino,
                                uint64_t stamp)
{
	struct sfs_dirlock_stripe *s = stripe_of(l, dev, ino);

	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->epoch) == stamp)
		return true;
	pthread_mutex_unlock(&s->lock);
	return false;
}

void sfs_dirlock_release(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	pthread_mutex_unlock(&stripe_of(l, dev, ino)->lock);
}

void sfs_dirlock_bump(struct sfs_dirlock *l, uint64_t dev, uint64_t ino)
{
	atomic_fetch_add(&stripe_of(l, dev, ino)->epoch, 1);
}
