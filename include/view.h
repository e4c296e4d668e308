/* One view: a FUSE session with its own options, served by the daemon's threads. */
#ifndef SFS_VIEW_H
#define SFS_VIEW_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "inode.h"
#include "list.h"
#include "fuse_io.h"
#include "backing.h"
#include "options.h"
#include "view_passthrough.h"

struct sfs_services;

/* A view's profile: everything its options mean, made by sfs_profile_make (profile.h, from
 * the policies) and never changed once in force. */
struct sfs_profile {
	struct sfs_opts opts;
	/* MOUNT_ATTR_* of the view's own mount: ro, nosuid, nodev, noexec, nosymfollow, the
	 * atime rule. Never the superblock's: a remount could not change that. */
	unsigned mount_attrs;
	/* MOUNT_ATTR_* of the view's clone of the backing, which its files are opened through:
	 * ro and the atime rule, applied by the kernel to every access (policy.h, mount_attrs) */
	unsigned backing_attrs;
	/* Why its open files' data must go through the daemon, or NULL where the kernel's
	 * passthrough may carry it (policy.h, no_passthrough) */
	const char *no_passthrough;
	/* It holds requests to quota limits (policy.h, limits) */
	bool limits;
	struct sfs_profile *retired; /* the profile this one replaced, kept until the view ends */
};

struct sfs_view {
	struct sfs_services *svc;       /* what its requests use (services.h) */
	/* Called on the session's thread when its loop returns: the owner then reaps the view. */
	void (*ended_cb)(void *arg);
	void *ended_arg;
	uint32_t slot;
	struct fuse_session *se;
	struct sfs_fuse_io fuse_io;     /* its /dev/fuse transport */
	struct sfs_node *root;          /* pinned; the kernel calls it FUSE_ROOT_ID */
	/* What its options mean (profile.h): replaced whole by a remount, never changed in
	 * place; the ones it replaced stay allocated until the view ends. */
	const struct sfs_profile *_Atomic prof;
	char mountpoint[PATH_MAX];
	char source[PATH_MAX];
	/* Its mount, by the unique id the requesting command read right after making it: the
	 * path may come to lead elsewhere (a directory above it swapped by its owner), the id
	 * never does (mountid.h). */
	uint64_t mnt_id;
	/* The requester's mount namespace, by identity: holding a descriptor of it would keep it
	 * alive after its last process, and with it a view nobody can reach. */
	dev_t ns_dev;
	ino_t ns_ino;
	atomic_ullong dev;              /* its superblock's device number, 0 until found */
	pthread_t thread;
	bool thread_started;
	pthread_t poke;                 /* a successor's wake-up of its io_uring queues */
	bool poke_started;
	atomic_bool ended;              /* the session loop returned (unmounted or aborted) */
	bool failed;                    /* its daemon kept crashing: every request answers EIO */
	atomic_ullong requests;
	atomic_int open_files;
	atomic_int waits;               /* requests waiting for another party (ops/wait.c) */
	double entry_timeout;
	double attr_timeout;
	double negative_timeout;        /* 0 in casefold views: another spelling may appear */
	bool keep_cache;                /* page cache survives open(): others' writes are notified */
	/* The view's own clone of the backing mount, with its flags (atime rule, ro), that its
	 * files and directories are opened through (backing.h): a remount changes its flags in
	 * place, so files already open follow them as on a native mount. */
	struct sfs_clone clone;
	int qroot;                      /* quota root slot of a subdir view with size=/inodes=, or -1 */
	struct sfs_passthrough pt;      /* its backing files for kernel passthrough */
	pthread_mutex_t files_lock;     /* guards files */
	struct sfs_list files;          /* open files, for those whose RELEASE never comes */
};

struct sfs_file;

/* The node a kernel's node id names in this view (its root is FUSE_ROOT_ID), or NULL if the
 * daemon does not know it. Every id a kernel sends is looked up, never trusted as memory. */
struct sfs_node *sfs_node_of(const struct sfs_view *v, fuse_ino_t ino);
fuse_ino_t sfs_ino_of(const struct sfs_view *v, const struct sfs_node *n);

/* A successor's: the node of a predecessor's open file (with stat st), which must be id; it
 * gets the lookups counted for it. NULL if it is not. */
struct sfs_node *sfs_view_adopt_node(struct sfs_view *v, const struct stat *st, uint64_t id);

/* Creates the session for an already-mounted /dev/fuse descriptor and starts serving it.
 * Takes ownership of fuse_fd. A successor passes its predecessor's record of the view (else
 * NULL): the session takes the kernel's INIT request the predecessor read as its own, starts,
 * and asks the kernel for the requests nobody answered. Returns 0 or -errno. */
struct sfs_ho_view;
int sfs_view_start(struct sfs_view *v, int fuse_fd, const struct sfs_ho_view *from);

/* A successor's: waits up to ms for the view's io_uring queues to have been woken
 * (sfs_fuse_uring_poke), and the process that woke them to be gone. */
void sfs_view_poked(struct sfs_view *v, int ms);

/* Writes the view's record for a successor (handover.h): at its start, its INIT, a remount. */
void sfs_view_record(struct sfs_view *v);

/* Cache timeouts and page-cache keeping: long while the daemon is the backing's only writer
 * (every change is then notified), short when others write behind its back. */
void sfs_view_set_caching(struct sfs_view *v, bool sole_writer);

/* Unmounts the view's own mount (by its id, wherever it is now) in its mount namespace;
 * lazily if it is busy, or at once with lazy. A path that leads elsewhere is never
 * unmounted; what happened is logged. */
void sfs_view_unmount(const struct sfs_view *v, bool lazy);

/* Where a view's mount is, for a thread that does not hold the view: its mount namespace by
 * identity, its path there, its unique id. */
struct sfs_view_place {
	dev_t ns_dev;
	ino_t ns_ino;
	uint64_t mnt_id;
	char mountpoint[PATH_MAX];
};

void sfs_view_place_of(const struct sfs_view *v, struct sfs_view_place *p);

/* An O_PATH descriptor of the root of the mount at p, reached through the root of a process
 * that lives in its namespace (/proc/PID/root; each is tried, a chrooted one sees another
 * tree) and checked by the mount's id: -ESTALE when no process of the namespace reaches it
 * at its path (moved, or the namespace is gone). */
int sfs_view_place_open(const struct sfs_view_place *p);

/* The device number of the view's own superblock, which /proc/locks names its inodes by;
 * found once. 0 if it cannot be found. */
dev_t sfs_view_dev(struct sfs_view *v);

/* Waits for the session threads to finish and frees the session. */
void sfs_view_finish(struct sfs_view *v);

extern const struct fuse_lowlevel_ops sfs_ops;

#endif
