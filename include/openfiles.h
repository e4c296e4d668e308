/* The open-file table: every open file and directory of every view, and every lock owner's
 * description of a file (locks.h), at a slot the kernel names (fuse_file_info.fh). Every
 * read and write finds its file here (sfs_openfiles_object), so a slot is looked up, never
 * trusted as memory.
 *
 * Each slot has a record for a successor daemon (contract §6, "Failover"): the records live
 * in memory the caller hands over (the handover state, handover.h, which keeps them in its
 * memfd), so a successor reads what this process published and serves the same slots. A
 * record is published last (its checksum, then its live word), so a crash before that leaves
 * no record, only a descriptor the successor closes: the kernel had no answer yet and sends
 * the open again (FUSE_NOTIFY_RESEND). The objects behind the slots are this process's. */
#ifndef SFS_OPENFILES_H
#define SFS_OPENFILES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SFS_HO_RELEASING: released, the answer not yet sent: the kernel may send the RELEASE again,
 * so the slot is not handed out before it has had the answer. */
enum sfs_ho_kind { SFS_HO_FILE = 1, SFS_HO_DIR = 2, SFS_HO_RELEASING = 3,
                   SFS_HO_LOCK = 4 /* a lock owner's description of a file (locks.h) */ };

#define SFS_HO_WRITES 1u          /* open for writing */
#define SFS_HO_PT_NOBODY 2u       /* its passthrough backing file was registered as nobody */
#define SFS_HO_PT_ATIME 4u        /* reads through it move the atime */
#define SFS_HO_CACHED 8u          /* the view's kernel may keep pages it read */
#define SFS_HO_FLOCK 16u          /* SFS_HO_LOCK: it holds flock locks, not fcntl ones */

/* A slot's record, as a successor reads it: part of the handover state's layout. */
struct sfs_ho_file {
	_Atomic uint32_t live;        /* 0, or enum sfs_ho_kind once the record is whole */
	uint32_t view;
	int32_t fd;
	_Atomic int32_t twin;         /* see struct sfs_file; -1 for none */
	int32_t backing;              /* passthrough backing id, 0 for none */
	uint32_t flags;               /* SFS_HO_* */
	uint64_t node;                /* node id */
	uint64_t dev, ino;            /* what fd must be */
	uint32_t key_uid, key_gid;    /* whose credentials the backing file has */
	uint64_t key_groups;
	/* SFS_HO_LOCK: the view's lock owner, the fh it came through last, and the process that
	 * set its newest lock */
	uint64_t owner;
	uint32_t fh;
	int32_t pid;
	uint64_t check;
};

/* Where the records are: cap of them, zeroed when new, and the count of slots ever used,
 * which a successor reads no further than (a read of a hole of the memfd would take memory). */
struct sfs_openfiles_mem {
	struct sfs_ho_file *records;
	_Atomic uint32_t *used;
	uint32_t cap;
};

struct sfs_openfiles {
	struct sfs_openfiles_mem mem;
	pthread_mutex_t lock;         /* the free slots and next_slot (a leaf: doc/design.md) */
	void **objects;               /* this process's object of each slot, cap of them */
	uint32_t *free_slots;
	size_t nfree, next_slot;
};

/* A table over new records (a first daemon). 0 or -ENOMEM. */
int sfs_openfiles_init(struct sfs_openfiles *t, struct sfs_openfiles_mem mem);
/* A table over a predecessor's records: its slots stay taken until sfs_openfiles_settle. */
int sfs_openfiles_resume(struct sfs_openfiles *t, struct sfs_openfiles_mem mem);
/* Frees what this process kept; the records stay where they are. */
void sfs_openfiles_destroy(struct sfs_openfiles *t);

/* Slots ever used: the records to read are below. */
static inline uint32_t sfs_openfiles_used(const struct sfs_openfiles *t)
{
	return (uint32_t)t->next_slot;
}

/* A slot for obj (this process's object), or -EMFILE; its record is published with
 * sfs_openfiles_publish before the kernel hears of it, cleared before its descriptor closes. */
int sfs_openfiles_alloc(struct sfs_openfiles *t, void *obj);
void sfs_openfiles_publish(struct sfs_openfiles *t, int slot, struct sfs_ho_file *rec);
void sfs_openfiles_set_twin(struct sfs_openfiles *t, int slot, int fd);
void sfs_openfiles_free(struct sfs_openfiles *t, int slot);
/* Released: the record says so (its object is gone), the slot is not free yet; freed with
 * sfs_openfiles_free once the kernel has the RELEASE's answer. */
void sfs_openfiles_releasing(struct sfs_openfiles *t, int slot);
/* The RELEASE of slot is answered: a slot releasing (this process's, or a predecessor's the
 * kernel sent again) is free now. */
void sfs_openfiles_released(struct sfs_openfiles *t, uint64_t slot);
/* The object of a slot the kernel names, or NULL for one that holds none of kind. */
void *sfs_openfiles_object(struct sfs_openfiles *t, uint64_t slot, enum sfs_ho_kind kind);
/* A live record of an open file, directory or lock owner, checked: true and the record, else
 * false (a successor reads its predecessor's this way). */
bool sfs_openfiles_record(const struct sfs_openfiles *t, uint32_t slot, struct sfs_ho_file *out);
/* Takes over a predecessor's slot for obj. */
void sfs_openfiles_adopt(struct sfs_openfiles *t, uint32_t slot, void *obj);
/* After the predecessor's records were taken: the slots left free are free, but those of
 * releases not answered (they stay reserved until the RELEASE comes again). */
void sfs_openfiles_settle(struct sfs_openfiles *t);

#endif
