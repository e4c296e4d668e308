/* The daemon's quota ledger (contract §5.4): usage per user, per group and in total, built by a
 * scan of the backing at start and kept exact after every change, because the daemon is the
 * backing's only writer. Each node remembers what it was last counted as (its blocks and
 * owner); after a change the request path re-reads the node and the ledger moves the
 * difference. Limits are enforced by the quota policy (policy/quota.c) of the views that ask.
 *
 * Locks (lock order: doc/design.md, "Locks"): the barrier, whose read side one modifying
 * request holds and whose write side a view tree's scan and `quota check` take, so that they
 * see a tree nobody changes; a node's stripe; the ledger lock. */
#ifndef SFS_QUOTA_H
#define SFS_QUOTA_H

#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "inode.h"
#include "options.h"
#include "quota_state.h"

struct sfs_fdcache;

/* What the ledger needs of the daemon that keeps it, and nothing more. */
struct sfs_quota_ctx {
	const char *source;              /* names the ledger in log lines and errors */
	const char *device;              /* the backing device, in errors about the state */
	int root_fd;                     /* the backing's root: scans, the state directory */
	int handle_fd;                   /* a mount fd of the backing for open_by_handle_at */
	ino_t root_ino;                  /* the backing's root inode (/.strictfs is not counted) */
	bool read_only;                  /* the backing cannot keep the state */
	struct sfs_itab *itab;           /* a node's parent, for its tree membership */
	struct sfs_fdcache *fdc;
	void (*wake)(void *arg);         /* state to write: the owner then calls sfs_quota_flush */
	void *wake_arg;
};

enum sfs_scan_state { SFS_SCAN_RUNNING, SFS_SCAN_DONE, SFS_SCAN_FAILED };

#define SFS_QSTRIPES 64
#define SFS_QROOTS 32

/* The tree of a subdir= view that has size= or inodes=: its usage is kept apart. Objects
 * never move into or out of such a tree (rename and link across its edge fail with EXDEV, as
 * ext4 does across project quota boundaries), so a node's membership is its parent's. */
struct sfs_qroot {
	unsigned views;                  /* 0: the slot is free */
	ino_t ino;                       /* the tree's top directory */
	struct sfs_node *node;           /* its node, pinned by the views rooted there */
	struct sfs_qentry e;             /* usage and reservations (limits are the views') */
};

struct sfs_quota {
	struct sfs_quota_ctx ctx;
	pthread_rwlock_t barrier;
	pthread_mutex_t lock;            /* the ledger: state, total, dirty */
	pthread_mutex_t stripes[SFS_QSTRIPES];
	struct sfs_qstate state;
	struct sfs_qentry total;         /* the whole backing: what a view rooted at / holds */
	bool dirty;                      /* limits or grace timers not yet written */
	atomic_int scan;                 /* enum sfs_scan_state */
	atomic_ullong scanned, expected; /* inodes, for the progress in status */
	long bsize;                      /* the backing's block size */
	struct sfs_qroot roots[SFS_QROOTS]; /* ledger lock; slots change under the barrier */
	atomic_uint nroots;
	atomic_uint rgen;                /* bumped when the set of roots changes */
	pthread_t scan_thread;
	bool scan_started;
	char scan_where[PATH_MAX];       /* a failed start-up scan: where (a path in the backing) */
	int scan_errno;                  /* and why; both set before scan says failed */
};

/* The amounts one modifying request has reserved, and whom they charge. */
struct sfs_charge {
	struct sfs_quota *q;
	bool entered;
	unsigned tables;                 /* SFS_CHARGE_* that hold a reservation */
	unsigned skip;                   /* SFS_CHARGE_* the request does not charge (a chown
	                                    that keeps the group) */
	uint32_t id[SFS_QNTYPES];
	int64_t amount[SFS_QNRES];
	int root;                        /* SFS_CHARGE_TOTAL: a root slot, or -1 for the backing */
};

#define SFS_CHARGE_USR 1u
#define SFS_CHARGE_GRP 2u
#define SFS_CHARGE_TOTAL 4u

/* Loads /.strictfs/quota from the backing and starts the scan. Returns 0, or -1 with the
 * one-line reason in err (a state file that cannot be read is never overwritten). */
int sfs_quota_start(struct sfs_quota *q, const struct sfs_quota_ctx *ctx, char *err,
                    size_t errlen);
void sfs_quota_stop(struct sfs_quota *q);

/* A modifying request begins and ends: the barrier, and any reservation made between. */
void sfs_charge_begin(struct sfs_quota *q, struct sfs_charge *c);
void sfs_charge_end(struct sfs_charge *c);

/* Reserves amount[] for the ids and tables named (the quota policy decides which), against
 * the ids' limits and, for SFS_CHARGE_TOTAL, against view_lim. 0, -EDQUOT, or -EIO when a
 * table's usage is not known (the start-up scan failed; releases are still admitted). */
int sfs_quota_reserve(struct sfs_charge *c, unsigned tables, const struct sfs_qlimits *view_lim);

/* Whether the ids of c are within the limits now (after a change that could not be bounded
 * beforehand, e.g. an xattr): 0, -EDQUOT, or -EIO as for sfs_quota_reserve. */
int sfs_quota_within(struct sfs_charge *c, unsigned tables, const struct sfs_qlimits *view_lim);

/* A node entering the table starts out counted as its stat says. */
void sfs_quota_node_init(struct sfs_nodeq *nq, const struct stat *st);

/* A node was looked up in directory parent: where it lives, for its tree membership. */
void sfs_quota_placed(struct sfs_node *node, const struct sfs_node *parent);

/* The view trees (root slots) a node is inside; fd is any descriptor of the node. */
uint32_t sfs_quota_mask(struct sfs_quota *q, struct sfs_node *node, int fd);

/* Whether an object may move or be linked from directory a to directory b: 0, or -EXDEV
 * when that would cross the edge of a view tree whose usage is kept apart. */
int sfs_quota_may_move(struct sfs_quota *q, struct sfs_node *a, int afd, struct sfs_node *b,
                       int bfd);

/* Waits up to ms for the start-up scan to end (done or failed). */
void sfs_quota_wait_scan(struct sfs_quota *q, int ms);

/* Whether a view with options o (was: its options before a remount, or NULL) can have its
 * limits enforced: 0, or -EIO with the one-line refusal in err, naming where the start-up scan
 * failed, when they rest on usage that scan could not count. Limits a view already had are
 * not refused again. */
int sfs_quota_enforceable(struct sfs_quota *q, const struct sfs_opts *o, const struct sfs_opts *was,
                          char *err, size_t errlen);

/* Keeps the usage of the tree at root (a directory node, fd its descriptor) apart: scans it
 * once. Returns the root slot, or -1 with the reason in err. */
int sfs_quota_add_root(struct sfs_quota *q, struct sfs_node *root, int fd, char *err,
                       size_t errlen);
void sfs_quota_drop_root(struct sfs_quota *q, int slot);
/* Usage of a root slot, or of the whole backing for -1. */
void sfs_quota_tree(struct sfs_quota *q, int slot, struct sfs_qentry *out);

/* After a change to the object open as fd (any descriptor, O_PATH too): moves the difference
 * between what node was counted as and what it is now. node may be NULL for an object not in
 * the table, with *was its state before the change. Returns the object's link count as it
 * was counted (a change that took its last name sees 0), or -1 if it could not be read. */
long sfs_quota_sync(struct sfs_quota *q, struct sfs_node *node, struct sfs_nodeq *was, int fd);

/* A new object made by a request: counted from its stat. */
void sfs_quota_created(struct sfs_quota *q, struct sfs_node *node, const struct stat *st,
                       struct sfs_node *parent, int parent_fd);

/* The most an allocation in [off, off+len) can add: the blocks the range touches, in bytes. */
int64_t sfs_quota_alloc_bound(const struct sfs_quota *q, off_t off, off_t len);
/* Blocks an allocation in [off, off+len) of the file open as fd would add, in bytes. */
int64_t sfs_quota_alloc_bytes(struct sfs_quota *q, int fd, off_t off, off_t len);

/* Control requests: set limits, grace periods; report; check against a fresh scan. Each
 * returns 0 or -1 with the one-line reason in err. */
int sfs_quota_set(struct sfs_quota *q, enum sfs_qtype type, uint32_t id,
                  const uint64_t soft[SFS_QNRES], const uint64_t hard[SFS_QNRES],
                  unsigned which, char *err, size_t errlen);
int sfs_quota_set_grace(struct sfs_quota *q, const time_t grace[SFS_QNRES], unsigned which,
                        char *err, size_t errlen);
json_object *sfs_quota_report(struct sfs_quota *q);
json_object *sfs_quota_check(struct sfs_quota *q, bool *same);
/* {"scan": "running|done|failed", "progress": 0..1} for status. */
json_object *sfs_quota_status(struct sfs_quota *q);
/* Writes the state if limits or grace timers changed since the last write (control loop). */
void sfs_quota_flush(struct sfs_quota *q);
/* The caller's user and group limits with their usage, for statfs in enforcing views. */
void sfs_quota_usage(struct sfs_quota *q, enum sfs_qtype type, uint32_t id,
                     struct sfs_qentry *out);

/* Bits of `which` for sfs_quota_set / sfs_quota_set_grace: which fields were given. */
#define SFS_QSET_BSOFT 1u
#define SFS_QSET_BHARD 2u
#define SFS_QSET_ISOFT 4u
#define SFS_QSET_IHARD 8u
#define SFS_QSET_BGRACE 1u
#define SFS_QSET_IGRACE 2u

#endif
