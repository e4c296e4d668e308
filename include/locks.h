/* File locks shared by every view of the backing (contract §4.6; doc/kernel.md §4.12).
 *
 * Each view's kernel names a lock owner (a process for POSIX locks, an open file for OFD and
 * flock locks) by a number of its own. For every owner that locks a file the daemon keeps a
 * carrier: an open file description of the backing file, on which the owner's fcntl locks
 * are OFD locks, and its flock locks flock locks (a separate carrier: the two kinds never
 * meet, as on ext4). So the backing's own lock manager arbitrates between views as it does
 * between processes of one mount: ranges split and merge per owner, conflicts, waits and
 * wake-ups are the kernel's. A carrier ends with its owner's locks: at the FLUSH of the owner
 * (POSIX locks go when the process closes the file), at the RELEASE of the open file it came
 * through (OFD and flock locks go with the open file), when the view ends. */
#ifndef SFS_LOCKS_H
#define SFS_LOCKS_H

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "list.h"

struct sfs_locks;

/* One owner of one backing file, as one view's kernel names it. */
struct sfs_lock_key {
	uint32_t view;  /* the view's slot: the owner number is its kernel's */
	uint64_t ino;   /* the backing inode */
	uint64_t owner; /* the kernel's lock owner */
	bool flock;     /* flock(2) locks; else fcntl (POSIX and OFD) locks */
};

/* The open file a lock request came through: its backing descriptor and its fh. A new
 * carrier is a new description of fd's file, opened by reopen(fd, flags) (the request layer
 * knows with which rights). */
struct sfs_lock_via {
	int fd;
	uint32_t fh;
	int (*reopen)(int fd, int flags); /* a descriptor or -errno */
};

/* A lock request that waits (F_SETLKW, flock without LOCK_NB), as another thread sees it:
 * sfs_lock_wait_interrupt ends the wait with -EINTR. Zeroed, its lock initialised, before
 * use. */
struct sfs_lock_wait {
	pthread_mutex_t lock;
	pthread_t thread;
	bool in_wait, interrupted;
	uint32_t view;        /* while it waits, on the table's list (sfs_locks_view_ended) */
	struct sfs_list link;
};

struct sfs_openfiles;
struct sfs_ho_file;

/* The table, whose carriers have slots of the open-file table, recorded for a successor. */
int sfs_locks_init(struct sfs_locks **out, struct sfs_openfiles *files);

/* A predecessor's carrier, from its record at slot (a successor, before serving): 0, or
 * -ESTALE if the descriptor is not the one recorded. */
int sfs_locks_adopt(struct sfs_locks *L, uint32_t slot, const struct sfs_ho_file *rec);
void sfs_locks_destroy(struct sfs_locks *L);

/* F_GETLK for the owner: fl becomes the first lock of another owner, in any view, that
 * conflicts (l_pid: the process that set it), or F_UNLCK. Returns 0 or -errno. */
int sfs_locks_test(struct sfs_locks *L, const struct sfs_lock_key *k,
                   const struct sfs_lock_via *via, struct flock *fl);

/* F_SETLK (fl) or flock (how: LOCK_SH, LOCK_EX or LOCK_UN) for the owner, pid the process
 * asking. Without w: 0, -EAGAIN if another owner holds a conflicting lock, or -errno. With
 * w: waits until granted, or -EINTR once sfs_lock_wait_interrupt is called. */
int sfs_locks_set(struct sfs_locks *L, const struct sfs_lock_key *k,
                  const struct sfs_lock_via *via, const struct flock *fl, pid_t pid,
                  struct sfs_lock_wait *w);
int sfs_locks_flock(struct sfs_locks *L, const struct sfs_lock_key *k,
                    const struct sfs_lock_via *via, int how, struct sfs_lock_wait *w);

/* Any call that may wait long for another party on behalf of a request of view (a lease's
 * break, ops/lease.c): call(fd, arg) again until it returns anything but -EINTR, or the wait
 * is interrupted (-EINTR) by sfs_lock_wait_interrupt or the end of the view. */
int sfs_locks_wait_call(struct sfs_locks *L, uint32_t view, int (*call)(int fd, void *arg),
                        int fd, void *arg, struct sfs_lock_wait *w);

/* Ends a wait from another thread (FUSE_INTERRUPT). */
void sfs_lock_wait_interrupt(struct sfs_lock_wait *w);

/* FLUSH: the POSIX locks of owner (view, ino, owner) go (the fcntl carrier of that owner). */
void sfs_locks_flush(struct sfs_locks *L, uint32_t view, uint64_t ino, uint64_t owner);

/* RELEASE of open file fh: the carriers that came through it go (OFD and flock owners). */
void sfs_locks_release(struct sfs_locks *L, uint32_t view, uint64_t ino, uint32_t fh);

/* The view ended: its waits end (-EINTR) and every carrier of its owners goes. */
void sfs_locks_view_ended(struct sfs_locks *L, uint32_t view);

/* Carriers open now, over all views (status, and the tests' descriptor bound). */
size_t sfs_locks_count(struct sfs_locks *L);

#endif
