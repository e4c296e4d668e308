/* The open-file table (see openfiles.h): slots handed out and taken back under the table's
 * lock, records published and looked up without it (a reader sees a record's live word last
 * written, and the object stored with release order before it). */
#include "openfiles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

static struct sfs_ho_file *record_at(const struct sfs_openfiles *t, uint32_t slot)
{
	return t->mem.records + slot;
}

/* The checksum covers the record but its live word and its twin, which change in place. */
static uint64_t record_check(const struct sfs_ho_file *f)
{
	struct sfs_ho_file c = *f;

	atomic_store(&c.live, 0);
	atomic_store(&c.twin, 0);
	c.check = 0;
	return sfs_hash_record(1, &c, sizeof(c));
}

static int start(struct sfs_openfiles *t, struct sfs_openfiles_mem mem)
{
	memset(t, 0, sizeof(*t));
	t->mem = mem;
	pthread_mutex_init(&t->lock, NULL);
	t->objects = calloc(mem.cap, sizeof(*t->objects));
	return t->objects ? 0 : -ENOMEM;
}

int sfs_openfiles_init(struct sfs_openfiles *t, struct sfs_openfiles_mem mem)
{
	return start(t, mem);
}

int sfs_openfiles_resume(struct sfs_openfiles *t, struct sfs_openfiles_mem mem)
{
	int rc = start(t, mem);

	t->next_slot = atomic_load(mem.used);
	if (t->next_slot > mem.cap)
		t->next_slot = mem.cap;
	return rc;
}

void sfs_openfiles_destroy(struct sfs_openfiles *t)
{
	if (t->mem.records)
		pthread_mutex_destroy(&t->lock);
	free(t->free_slots);
	free(t->objects);
	memset(t, 0, sizeof(*t));
}

/* Under t->lock. */
static bool push_free(struct sfs_openfiles *t, uint32_t slot)
{
	if (t->nfree % 1024 == 0) {
		uint32_t *f = realloc(t->free_slots, (t->nfree + 1024) * sizeof(*f));
		if (!f)
			return false;
		t->free_slots = f;
	}
	t->free_slots[t->nfree++] = slot;
	return true;
}

int sfs_openfiles_alloc(struct sfs_openfiles *t, void *obj)
{
	int slot = -EMFILE;

	pthread_mutex_lock(&t->lock);
	if (t->nfree) {
		slot = t->free_slots[--t->nfree];
	} else if (t->next_slot < t->mem.cap) {
		slot = t->next_slot++;
		atomic_store(t->mem.used, t->next_slot);
	}
	if (slot >= 0)
		__atomic_store_n(&t->objects[slot], obj, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->lock);
	return slot;
}

void sfs_openfiles_publish(struct sfs_openfiles *t, int slot, struct sfs_ho_file *rec)
{
	struct sfs_ho_file *f = record_at(t, slot);
	uint32_t kind = atomic_load(&rec->live);

	rec->check = record_check(rec);
	atomic_store_explicit(&f->live, 0, memory_order_release);
	memcpy((char *)f + sizeof(f->live), (char *)rec + sizeof(rec->live),
	       sizeof(*f) - sizeof(f->live));
	atomic_store_explicit(&f->live, kind, memory_order_release);
}

void sfs_openfiles_set_twin(struct sfs_openfiles *t, int slot, int fd)
{
	atomic_store(&record_at(t, slot)->twin, fd);
}

void sfs_openfiles_free(struct sfs_openfiles *t, int slot)
{
	atomic_store_explicit(&record_at(t, slot)->live, 0, memory_order_release);
	pthread_mutex_lock(&t->lock);
	__atomic_store_n(&t->objects[slot], NULL, __ATOMIC_RELEASE);
	push_free(t, slot); /* on failure the slot is lost to this process, nothing more */
	pthread_mutex_unlock(&t->lock);
}

void sfs_openfiles_releasing(struct sfs_openfiles *t, int slot)
{
	atomic_store_explicit(&record_at(t, slot)->live, SFS_HO_RELEASING, memory_order_release);
	__atomic_store_n(&t->objects[slot], NULL, __ATOMIC_RELEASE);
}

void sfs_openfiles_released(struct sfs_openfiles *t, uint64_t slot)
{
	if (slot < t->next_slot && atomic_load(&record_at(t, slot)->live) == SFS_HO_RELEASING)
		sfs_openfiles_free(t, (int)slot);
}

void *sfs_openfiles_object(struct sfs_openfiles *t, uint64_t slot, enum sfs_ho_kind kind)
{
	if (slot >= t->mem.cap || atomic_load(&record_at(t, slot)->live) != kind)
		return NULL;
	return __atomic_load_n(&t->objects[slot], __ATOMIC_ACQUIRE);
}

bool sfs_openfiles_record(const struct sfs_openfiles *t, uint32_t slot, struct sfs_ho_file *out)
{
	struct sfs_ho_file *f;
	uint32_t live;

	if (slot >= t->next_slot)
		return false;
	f = record_at(t, slot);
	live = atomic_load(&f->live);
	if (live != SFS_HO_FILE && live != SFS_HO_DIR && live != SFS_HO_LOCK)
		return false;
	*out = *f;
	return out->check == record_check(out);
}

void sfs_openfiles_adopt(struct sfs_openfiles *t, uint32_t slot, void *obj)
{
	t->objects[slot] = obj;
}

void sfs_openfiles_settle(struct sfs_openfiles *t)
{
	t->nfree = 0;
	for (uint32_t s = t->next_slot; s-- > 0;) {
		if (t->objects[s] || atomic_load(&record_at(t, s)->live) == SFS_HO_RELEASING)
			continue;
		atomic_store(&record_at(t, s)->live, 0);
		push_free(t, s);
	}
}
