/* File locks (see locks.h): GETLK, SETLK, SETLKW and flock through any view meet the locks
 * taken through every other, as on one ext4 mount; FLUSH and RELEASE end them as close(2)
 * does natively. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fuse_io.h"
#include "locks.h"
#include "services.h"
#include "view.h"

/* A carrier is a new description of the open file's backing file, opened with the daemon's
 * rights to read and write (the kernel checked the caller's when the file was opened). */
static int reopen_privileged(int fd, int flags)
{
	char path[40];
	int nfd;

	fd_path(path, fd);
	sfs_priv_begin(SFS_PRIV_DAC);
	nfd = open(path, flags);
	nfd = nfd < 0 ? -errno : nfd;
	sfs_priv_end();
	return nfd;
}

/* The backing inode of open file f, which keys its locks: 0 or -errno. */
static int file_ino(const struct sfs_file *f, uint64_t *ino)
{
	struct stat st;

	if (f == &sfs_no_file)
		return -EBADF;
	if (f->node) {
		*ino = f->node->ino;
		return 0;
	}
	if (fstat(f->fd, &st) < 0)
		return -errno;
	*ino = st.st_ino;
	return 0;
}

/* The owner and open file of a lock request; -EBADF for an fh the daemon does not know. */
static int lock_of(fuse_req_t req, const struct fuse_file_info *fi, bool flock,
                   struct sfs_lock_key *k, struct sfs_lock_via *via)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct sfs_file *f = file_of(req, fi);
	uint64_t ino;
	int rc = file_ino(f, &ino);

	if (rc)
		return rc;
	*k = (struct sfs_lock_key){.view = v->slot, .ino = ino, .owner = fi->lock_owner,
	                           .flock = flock};
	*via = (struct sfs_lock_via){.fd = f->fd, .fh = (uint32_t)fi->fh,
	                             .reopen = reopen_privileged};
	return 0;
}

void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock)
{
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct req q;
	int rc;

	(void)ino;
	req_start(&q, req);
	rc = lock_of(req, fi, false, &k, &via);
	if (!rc)
		rc = sfs_locks_test(q.r.view->svc->locks, &k, &via, lock);
	if (rc) {
		req_reply_err(&q, rc);
		return;
	}
	req_reply_lock(&q, lock);
}

/* A lock request that may wait (wait.c): what it asks. */
struct lock_waiter {
	struct req_wait base;
	struct req q;
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct flock fl;
	int how; /* flock: LOCK_SH or LOCK_EX; fcntl: -1 */
};

/* Waits for the lock and answers. The kernel's FUSE_INTERRUPT ends the wait with EINTR,
 * which it turns into the restart or EINTR the caller would get natively. */
static void wait_and_answer(struct req_wait *b)
{
	struct lock_waiter *x = (struct lock_waiter *)b;
	struct sfs_locks *L = b->view->svc->locks;
	int rc;

	req_wait_interruptible(b, true);
	rc = x->how < 0 ? sfs_locks_set(L, &x->k, &x->via, &x->fl, x->fl.l_pid, &b->w)
	                : sfs_locks_flock(L, &x->k, &x->via, x->how, &b->w);
	req_wait_interruptible(b, false);
	req_reply_err(&x->q, rc);
}

/* A request that found the lock held and may wait. Answers it either way. */
static void wait_for_lock(struct req *q, const struct sfs_lock_key *k,
                          const struct sfs_lock_via *via, const struct flock *fl, int how)
{
	struct lock_waiter *x = calloc(1, sizeof(*x));
	int rc = -ENOMEM;

	if (x) {
		*x = (struct lock_waiter){.base = {.req = q->r.req, .view = q->r.view,
		                                   .run = wait_and_answer},
		                          .q = *q, .k = *k, .via = *via, .how = how};
		if (fl)
			x->fl = *fl;
		if (!(rc = req_wait_start(&x->base)))
			return;
		free(x);
	}
	req_reply_err(q, rc);
}

void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
              int sleep)
{
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct req q;
	int rc;

	(void)ino;
	req_start(&q, req);
	rc = lock_of(req, fi, false, &k, &via);
	if (!rc)
		rc = sfs_locks_set(q.r.view->svc->locks, &k, &via, lock, lock->l_pid, NULL);
	if (rc == -EAGAIN && sleep) {
		wait_for_lock(&q, &k, &via, lock, -1);
		return;
	}
	req_reply_err(&q, rc);
}

void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	int how = op & (LOCK_SH | LOCK_EX | LOCK_UN);
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct req q;
	int rc;

	(void)ino;
	req_start(&q, req);
	rc = lock_of(req, fi, true, &k, &via);
	if (!rc)
		rc = sfs_locks_flock(q.r.view->svc->locks, &k, &via, how, NULL);
	if (rc == -EAGAIN && !(op & LOCK_NB)) {
		wait_for_lock(&q, &k, &via, NULL, how);
		return;
	}
	req_reply_err(&q, rc);
}

/* close(2): the closing process's POSIX locks on the file go, as natively. Writes reach the
 * backing before they are answered, so there is nothing else to flush. */
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct req q;

	(void)ino;
	req_start(&q, req);
	if (!lock_of(req, fi, false, &k, &via))
		sfs_locks_flush(q.r.view->svc->locks, k.view, k.ino, k.owner);
	req_reply_err(&q, 0);
}

void sfs_view_release_locks(struct sfs_view *v, const struct sfs_file *f, uint32_t fh)
{
	uint64_t ino;

	if (!file_ino(f, &ino))
		sfs_locks_release(v->svc->locks, v->slot, ino, fh);
}

void sfs_view_end_locks(struct sfs_view *v)
{
	struct timespec tick = {0, 1000000};

	sfs_locks_view_ended(v->svc->locks, v->slot);
	while (atomic_load(&v->waits))
		nanosleep(&tick, NULL);
}
