/* The state a successor daemon takes over (contract §6, "Failover"; doc/design.md,
 * "Failover"): what the kernels were told, kept where a dead daemon's memory cannot take it
 * along. It lives in one memfd in the daemon's descriptor table, which the keeper shares
 * (keeper.h); a successor maps it, checks it and serves on. Nothing in it is trusted
 * unchecked:
 * - the daemon's record and each view's are written twice over (the older copy first), each
 *   copy with a sequence number and a checksum, so a crash in the middle of a write leaves the
 *   previous copy whole;
 * - the open-file table's records (openfiles.h) are kept here, and published by that table;
 * - a lookup count is one 64-bit store, made before the answer is sent.
 * The layout is this binary's; a successor refuses a state of another version. */
#ifndef SFS_HANDOVER_H
#define SFS_HANDOVER_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openfiles.h"
#include "options.h"

#define SFS_HO_VERSION 1
#define SFS_HO_VIEWS 4096        /* registry slots (SFS_MAX_VIEWS) */
#define SFS_HO_FILES (1u << 20)   /* open files and directories over all views */
#define SFS_HO_INIT_MAX 256       /* the kernel's INIT request: header and fuse_init_in */

enum sfs_ho_state {
	SFS_HO_SERVING = 1,           /* a daemon serves; if it goes, it crashed */
	SFS_HO_HANDING_OVER = 2,      /* it stopped at a request boundary for a successor */
};

struct sfs_ho_backing {
	int32_t root_fd, loop_fd, dev_fd;
	uint32_t loop_attached, mode, read_only, has_acl, has_user_xattr;
	uint64_t rdev, fs_dev;
	uint64_t root_dev, root_ino;  /* what root_fd must be */
	char device[PATH_MAX];
	char options[1024];
	char uuid[64];
	char existing_at[PATH_MAX];
};

/* The daemon's record. */
struct sfs_ho_daemon {
	uint64_t generation;          /* 1 for the daemon that mounted the backing */
	int64_t started_ms;           /* CLOCK_REALTIME, the first generation's start */
	int64_t took_over_ms;         /* when this generation took over; 0 for the first */
	uint32_t state;               /* enum sfs_ho_state */
	uint32_t crash_limit;         /* crashes within a minute that end the failover */
	uint32_t crashes;             /* since window_ms */
	uint64_t crashes_total;
	int64_t window_ms;            /* when the first crash of the current minute came */
	uint32_t source_is_file;
	int32_t listen_fd, lock_fd;
	char failed[256];             /* why the views answer EIO, or "" */
	char key[64];
	char source[PATH_MAX];
	char options[SFS_OPTSTR_MAX]; /* the first view's, in force on the backing */
	char binary[PATH_MAX];        /* what the keeper starts */
	struct sfs_ho_backing backing;
};

/* A view's record, under its registry slot. */
struct sfs_ho_view {
	uint32_t slot;
	int32_t fuse_fd;
	uint64_t ns_dev, ns_ino;
	uint32_t init_len;            /* 0 until the kernel's INIT was read */
	uint8_t init[SFS_HO_INIT_MAX];
	uint32_t qroot_tracked;       /* a subdir view with size=/inodes= */
	int32_t uring_fd;             /* its io_uring entries' buffers (fuse_uring.h), or -1 */
	int32_t clone_tree_fd, clone_fd; /* its clone of the backing (backing.h), whose flags a
	                                 * remount changes for the files open through it */
	uint32_t uring_entries;
	uint64_t uring_base, uring_region;
	char mountpoint[PATH_MAX];
	char source[PATH_MAX];
	uint64_t mnt_id;              /* the view's mount, by its unique id (mountid.h) */
	uint32_t opts_size;           /* sizeof(struct sfs_opts) of the writer */
	struct sfs_opts opts;
};

#define SFS_HO_INTENTS 4096      /* namespace changes in progress at once */

enum sfs_ho_intent_state { SFS_HO_BEGUN = 1, SFS_HO_DONE = 2 };
enum sfs_ho_intent_op {
	SFS_HO_MAKE = 1, SFS_HO_REMOVE = 2, SFS_HO_RENAME = 3, SFS_HO_EXCHANGE = 4,
	SFS_HO_APPEND = 5,            /* a write to an O_APPEND descriptor: obj the size before */
};

/* A change of names (or an append) a request is making (ops/intent.c): recorded before the backing call,
 * marked done with its result after, ended once the answer is sent. A successor asked again
 * (FUSE_NOTIFY_RESEND) answers what the first attempt did. */
struct sfs_ho_intent {
	_Atomic uint32_t state;       /* 0 free, enum sfs_ho_intent_state */
	uint32_t view;
	uint64_t unique;              /* the request's, without the resend bit */
	uint32_t op;                  /* enum sfs_ho_intent_op */
	int32_t rc;                   /* SFS_HO_DONE: the backing call's result, 0 or -errno */
	uint64_t dir, dir2;           /* node ids of the directories */
	uint64_t obj, obj2;           /* inode numbers the names held before (0: none) */
	char name[256], name2[256];
};

/* One view's lookups of one node id, as read back (sfs_ho_refs_of). */
struct sfs_ho_ref {
	uint32_t view;
	uint64_t count;
};

struct sfs_ho_lookup;

struct sfs_handover {
	int fd;                       /* the memfd */
	unsigned char *map;
	size_t size;
	bool resumed;                 /* taken over from a predecessor */
	struct sfs_ho_daemon daemon;  /* the current record, as last written */
	pthread_mutex_t records_lock; /* the daemon's and the views' records */
	/* lookups: under the inode table's lock (inode.c is the only user) */
	struct sfs_ho_lookup *lk;     /* the active half */
	uint32_t lk_half, lk_bits;
	size_t lk_used, lk_dead;
	pthread_mutex_t intents_lock;
	uint32_t *free_intents;
	size_t nfree_intents, next_intent;
};

/* A new, empty state (a first daemon). Returns 0 or -errno. */
int sfs_ho_create(struct sfs_handover *h);
/* Unmaps the state and frees what this process kept of it (a state that was mapped: its
 * descriptor is closed too). The state itself lives on in any other process's descriptor. */
void sfs_ho_close(struct sfs_handover *h);

/* The state in memfd fd, left by a predecessor, checked: 0, or -EINVAL with why in err. */
int sfs_ho_adopt(struct sfs_handover *h, int fd, char *err, size_t errlen);

/* The daemon's record, rewritten whole. */
void sfs_ho_write_daemon(struct sfs_handover *h);

/* A view's record (written whole), or NULL after sfs_ho_drop_view. */
void sfs_ho_write_view(struct sfs_handover *h, const struct sfs_ho_view *v);
void sfs_ho_drop_view(struct sfs_handover *h, uint32_t slot);
/* Copies the valid record of slot into out: true, or false when it has none. */
bool sfs_ho_read_view(struct sfs_handover *h, uint32_t slot, struct sfs_ho_view *out);

/* Where the open-file table keeps its records (openfiles.h): the table is the daemon's, its
 * records are part of the state, so it is made over them with sfs_openfiles_init after
 * sfs_ho_create, or sfs_openfiles_resume after sfs_ho_adopt. */
struct sfs_openfiles_mem sfs_ho_files_memory(struct sfs_handover *h);

/* Intents: a slot (or -1 when all are taken: the change is then not recorded), marked done,
 * ended. sfs_ho_intent_find gives a predecessor's intent for a request, or -1. */
int sfs_ho_intent_begin(struct sfs_handover *h, const struct sfs_ho_intent *rec);
void sfs_ho_intent_done(struct sfs_handover *h, int slot, int rc);
void sfs_ho_intent_end(struct sfs_handover *h, int slot);
int sfs_ho_intent_find(struct sfs_handover *h, uint32_t view, uint64_t unique,
                       struct sfs_ho_intent *out);

/* Lookup counts, under the inode table's lock. */
void sfs_ho_ref_set(struct sfs_handover *h, uint64_t id, uint32_t view, uint64_t count);
size_t sfs_ho_refs_of(struct sfs_handover *h, uint64_t id, struct sfs_ho_ref *out, size_t max);
uint64_t sfs_ho_ref_get(struct sfs_handover *h, uint64_t id, uint32_t view);
/* Every count of a view that ended. */
void sfs_ho_refs_drop_view(struct sfs_handover *h, uint32_t view);

/* Closes every descriptor above stderr that the state does not name (its records, and those
 * of files, a predecessor's resumed), nor keep: a successor inherits its predecessor's whole
 * table, caches and half-done work included. */
void sfs_ho_close_unnamed(struct sfs_handover *h, const struct sfs_openfiles *files, int keep);

int64_t sfs_ho_now_ms(void);

/* "VERSION LAYOUT" of the state this binary writes and reads. */
void sfs_ho_format_version(char *buf, size_t len);

#endif
