/* File locks shared by every view (see locks.h): carriers, one open file description of the
 * backing file per lock owner, in a table keyed by backing inode. */
#include "locks.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "htab.h"
#include "list.h"
#include "openfiles.h"

#define BUCKETS 1024 /* the carriers' table at first; it grows */
/* The signal that ends a wait in fcntl or flock (EINTR); its handler does nothing. */
#define WAKE_SIGNAL (SIGRTMIN + 2)

struct carrier {
	struct sfs_hlink link;    /* in the table, by its inode's hash */
	struct sfs_lock_key key;
	int fd;
	bool writable;            /* opened for writing: may hold write locks */
	uint32_t fh;              /* the open file it came through last */
	pid_t pid;                /* the process that set its newest lock (F_GETLK's l_pid) */
	unsigned users;           /* calls in progress on fd; closed when 0 once gone */
	bool gone;                /* out of the table */
	int slot;                 /* its record for a successor (openfiles.h) */
	uint64_t dev;             /* what fd is, for the record */
};

struct sfs_locks {
	struct sfs_openfiles *files; /* the carriers' slots (openfiles.h) */
	pthread_mutex_t lock;
	struct sfs_list waits;    /* struct sfs_lock_wait, while they wait */
	struct sfs_htab carriers; /* by sfs_hash_inode of the backing inode */
};

static void on_wake(int sig)
{
	(void)sig;
}

int sfs_locks_init(struct sfs_locks **out, struct sfs_openfiles *files)
{
	struct sigaction sa = {.sa_handler = on_wake}; /* no SA_RESTART: the wait must end */
	struct sfs_locks *L = calloc(1, sizeof(*L));

	if (!L)
		return -ENOMEM;
	if (sfs_htab_init(&L->carriers, BUCKETS)) {
		free(L);
		return -ENOMEM;
	}
	if (sigaction(WAKE_SIGNAL, &sa, NULL) < 0) {
		int rc = -errno;
		sfs_htab_destroy(&L->carriers);
		free(L);
		return rc;
	}
	L->files = files;
	pthread_mutex_init(&L->lock, NULL);
	sfs_list_init(&L->waits);
	*out = L;
	return 0;
}

static uint64_t hash_of(uint64_t ino)
{
	return sfs_hash_inode(0, ino);
}

static struct carrier *carrier_of(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct carrier, link);
}

static bool same_key(const struct sfs_lock_key *a, const struct sfs_lock_key *b)
{
	return a->view == b->view && a->ino == b->ino && a->owner == b->owner &&
	       a->flock == b->flock;
}

/* The carrier's record for a successor, written again whole (under L->lock): a daemon that
 * dies leaves its descriptors to the keeper, and the successor keeps what is recorded, so the
 * locks on it stay held (contract §6, "Failover"). */
static void record(struct sfs_locks *L, const struct carrier *c)
{
	struct sfs_ho_file rec = {.view = c->key.view, .fd = c->fd, .dev = c->dev, .ino = c->key.ino,
	                          .flags = (c->key.flock ? SFS_HO_FLOCK : 0) |
	                                   (c->writable ? SFS_HO_WRITES : 0),
	                          .owner = c->key.owner, .fh = c->fh, .pid = c->pid};

	atomic_init(&rec.live, SFS_HO_LOCK);
	atomic_init(&rec.twin, -1);
	sfs_openfiles_publish(L->files, c->slot, &rec);
}

/* Out of the table, under L->lock; closed now if nobody uses it, else by its last user. */
static void retire(struct sfs_locks *L, struct carrier *c)
{
	sfs_openfiles_free(L->files, c->slot);
	sfs_htab_remove(&L->carriers, &c->link);
	c->gone = true;
	if (!c->users) {
		close(c->fd);
		free(c);
	}
}

void sfs_locks_destroy(struct sfs_locks *L)
{
	struct sfs_hlink *e, *n;

	if (!L)
		return;
	sfs_htab_for_each_safe(e, n, &L->carriers)
		retire(L, carrier_of(e));
	sfs_htab_destroy(&L->carriers);
	pthread_mutex_destroy(&L->lock);
	free(L);
}

static struct carrier *find(struct sfs_locks *L, const struct sfs_lock_key *k)
{
	uint64_t h = hash_of(k->ino);
	struct sfs_hlink *e;

	sfs_htab_for_each_match(e, &L->carriers, h) {
		struct carrier *c = carrier_of(e);

		if (same_key(&c->key, k))
			return c;
	}
	return NULL;
}

/* A new description of the file via->fd is open on: for writing (as via->fd is, O_APPEND
 * kept, which an append-only file needs) if writable, else for reading where via->fd reads.
 * Reading only where it can, since a description open for writing would keep the file from
 * being executed (ETXTBSY). With the rights via->reopen raises: the kernel has checked the
 * caller's on the view already (fcntl refuses a write lock on a file not open for writing). */
static int reopen(const struct sfs_lock_via *via, bool writable)
{
	int flags = fcntl(via->fd, F_GETFL), acc = flags & O_ACCMODE;

	if (flags < 0)
		return -errno;
	if (!writable && acc != O_WRONLY)
		flags = O_RDONLY;
	else
		flags &= O_ACCMODE | O_APPEND;
	return via->reopen(via->fd, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}

/* The locks a description holds, from /proc/self/fdinfo: each as a struct flock, to fn. */
static int each_lock(int fd, void (*fn)(const struct flock *, void *), void *arg)
{
	char path[48], line[256], type[16], rw[16], end[32];
	long long start;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		/* "lock:\t1: OFDLCK  ADVISORY  READ  PID MAJ:MIN:INO START END" */
		if (strncmp(line, "lock:", 5) ||
		    sscanf(line, "lock: %*d: %15s %*s %15s %*s %*s %lld %31s", type, rw, &start, end) != 4)
			continue;
		struct flock fl = {.l_type = !strcmp(rw, "WRITE") ? F_WRLCK : F_RDLCK,
		                   .l_whence = SEEK_SET, .l_start = start};
		fl.l_len = !strcmp(end, "EOF") ? 0 : strtoll(end, NULL, 10) - start + 1;
		fn(&fl, arg);
	}
	fclose(f);
	return 0;
}

static void copy_lock(const struct flock *fl, void *arg)
{
	struct flock f = *fl;

	fcntl(*(int *)arg, F_OFD_SETLK, &f);
}

/* A read-only carrier asked for a write lock (its owner's first locks came through a file
 * open for reading): a read-write description takes over its locks, all read locks, which
 * conflict with nothing the old one did not. Under L->lock, with no other user. */
static int make_writable(struct carrier *c, const struct sfs_lock_via *via)
{
	int fd = reopen(via, true), rc;

	if (fd < 0)
		return fd;
	if ((rc = each_lock(c->fd, copy_lock, &fd))) {
		close(fd);
		return rc;
	}
	close(c->fd);
	c->fd = fd;
	c->writable = true;
	return 0; /* recorded by the caller */
}

/* A new carrier for owner k, into the table and the handover state. Under L->lock. */
static int open_carrier(struct sfs_locks *L, const struct sfs_lock_key *k,
                        const struct sfs_lock_via *via, bool writable, struct carrier **out)
{
	struct carrier *c = calloc(1, sizeof(*c));
	struct stat st;
	int fd;

	if (!c)
		return -ENOMEM;
	writable = writable && !k->flock;
	if ((fd = reopen(via, writable)) < 0 || fstat(fd, &st) < 0 ||
	    (c->slot = sfs_openfiles_alloc(L->files, c)) < 0) {
		int rc = fd < 0 ? fd : c->slot < 0 ? c->slot : -errno;
		if (fd >= 0)
			close(fd);
		free(c);
		return rc;
	}
	c->key = *k;
	c->fd = fd;
	c->dev = st.st_dev;
	c->writable = writable;
	c->fh = via->fh;
	record(L, c);
	sfs_htab_insert(&L->carriers, &c->link, hash_of(k->ino));
	*out = c;
	return 0;
}

/* The owner's carrier, in use by the caller (put it back with put), opened if create. NULL
 * with *err: none, and create was false (err 0), or it could not be had. */
static struct carrier *get(struct sfs_locks *L, const struct sfs_lock_key *k,
                           const struct sfs_lock_via *via, bool create, bool writable, int *err)
{
	struct carrier *c;

	*err = 0;
	pthread_mutex_lock(&L->lock);
	c = find(L, k);
	if (c && writable && !c->writable && !k->flock) {
		*err = c->users ? -ENOLCK : make_writable(c, via);
		if (*err) {
			pthread_mutex_unlock(&L->lock);
			return NULL;
		}
		record(L, c);
	}
	if (!c && create && (*err = open_carrier(L, k, via, writable, &c))) {
		pthread_mutex_unlock(&L->lock);
		return NULL;
	}
	if (c) {
		c->users++;
		if (c->fh != via->fh) {
			c->fh = via->fh;
			record(L, c);
		}
	}
	pthread_mutex_unlock(&L->lock);
	return c;
}

static void put(struct sfs_locks *L, struct carrier *c)
{
	pthread_mutex_lock(&L->lock);
	if (!--c->users && c->gone) {
		close(c->fd);
		free(c);
	}
	pthread_mutex_unlock(&L->lock);
}

/* The thread takes the wake signal only while it waits, and the wait is on the table's list
 * meanwhile, for the end of its view. */
int sfs_locks_wait_call(struct sfs_locks *L, uint32_t view, int (*call)(int fd, void *arg),
                        int fd, void *arg, struct sfs_lock_wait *w)
{
	sigset_t wake, old;
	int rc;

	sigemptyset(&wake);
	sigaddset(&wake, WAKE_SIGNAL);
	pthread_mutex_lock(&L->lock);
	pthread_mutex_lock(&w->lock);
	if (w->interrupted) {
		pthread_mutex_unlock(&w->lock);
		pthread_mutex_unlock(&L->lock);
		return -EINTR;
	}
	w->thread = pthread_self();
	w->in_wait = true;
	w->view = view;
	sfs_list_add(&w->link, &L->waits);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_unlock(&L->lock);
	pthread_sigmask(SIG_UNBLOCK, &wake, &old);
	for (;;) {
		rc = call(fd, arg);
		if (rc != -EINTR)
			break;
		pthread_mutex_lock(&w->lock);
		bool stop = w->interrupted;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
	}
	pthread_mutex_lock(&w->lock);
	w->in_wait = false;
	pthread_mutex_unlock(&w->lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&L->lock);
	sfs_list_del(&w->link);
	pthread_mutex_unlock(&L->lock);
	return rc;
}

void sfs_lock_wait_interrupt(struct sfs_lock_wait *w)
{
	struct timespec tick = {0, 1000000};

	pthread_mutex_lock(&w->lock);
	w->interrupted = true;
	/* again until the waiter leaves: a signal that came just before it entered the call
	 * ended nothing */
	while (w->in_wait) {
		pthread_kill(w->thread, WAKE_SIGNAL);
		pthread_mutex_unlock(&w->lock);
		nanosleep(&tick, NULL);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
}

static int setlk_wait(int fd, void *arg)
{
	return fcntl(fd, F_OFD_SETLKW, (struct flock *)arg) < 0 ? -errno : 0;
}

static int flock_wait(int fd, void *arg)
{
	return flock(fd, *(int *)arg) < 0 ? -errno : 0;
}

/* F_OFD_SETLK's "held by another" is EAGAIN (or EACCES, which POSIX also allows). */
static int held_elsewhere(int err)
{
	return err == EACCES ? -EAGAIN : -err;
}

int sfs_locks_set(struct sfs_locks *L, const struct sfs_lock_key *k,
                  const struct sfs_lock_via *via, const struct flock *fl, pid_t pid,
                  struct sfs_lock_wait *w)
{
	bool unlock = fl->l_type == F_UNLCK;
	struct flock f = *fl;
	struct carrier *c;
	int rc;

	f.l_pid = 0;
	c = get(L, k, via, !unlock, fl->l_type == F_WRLCK, &rc);
	if (!c)
		return rc; /* an unlock by an owner that holds nothing: done */
	if (w && !unlock)
		rc = sfs_locks_wait_call(L, k->view, setlk_wait, c->fd, &f, w);
	else
		rc = fcntl(c->fd, F_OFD_SETLK, &f) < 0 ? held_elsewhere(errno) : 0;
	if (!rc && !unlock && c->pid != pid) {
		pthread_mutex_lock(&L->lock);
		c->pid = pid;
		if (!c->gone)
			record(L, c);
		pthread_mutex_unlock(&L->lock);
	}
	put(L, c);
	return rc;
}

int sfs_locks_flock(struct sfs_locks *L, const struct sfs_lock_key *k,
                    const struct sfs_lock_via *via, int how, struct sfs_lock_wait *w)
{
	bool unlock = how == LOCK_UN;
	struct carrier *c;
	int rc;

	c = get(L, k, via, !unlock, false, &rc);
	if (!c)
		return rc;
	if (w && !unlock)
		rc = sfs_locks_wait_call(L, k->view, flock_wait, c->fd, &how, w);
	else
		rc = flock(c->fd, how | LOCK_NB) < 0 ? held_elsewhere(errno) : 0;
	put(L, c);
	return rc;
}

struct overlap {
	const struct flock *want; /* the conflict F_OFD_GETLK found */
	bool found;
};

static void find_overlap(const struct flock *fl, void *arg)
{
	struct overlap *o = arg;
	off_t a = o->want->l_start, b = o->want->l_len ? a + o->want->l_len : INT64_MAX;
	off_t x = fl->l_start, y = fl->l_len ? x + fl->l_len : INT64_MAX;

	if (fl->l_type == o->want->l_type && x < b && a < y)
		o->found = true;
}

/* The process that set the conflicting lock fl: the carrier of another owner holding it. */
static pid_t holder_of(struct sfs_locks *L, const struct sfs_lock_key *k, const struct flock *fl)
{
	uint64_t h = hash_of(k->ino);
	struct sfs_hlink *e;
	pid_t pid = 0;

	pthread_mutex_lock(&L->lock);
	sfs_htab_for_each_match(e, &L->carriers, h) {
		struct carrier *c = carrier_of(e);
		struct overlap o = {.want = fl};

		if (c->key.ino != k->ino || c->key.flock || same_key(&c->key, k))
			continue;
		if (!each_lock(c->fd, find_overlap, &o) && o.found) {
			pid = c->pid;
			break;
		}
	}
	pthread_mutex_unlock(&L->lock);
	return pid;
}

int sfs_locks_test(struct sfs_locks *L, const struct sfs_lock_key *k,
                   const struct sfs_lock_via *via, struct flock *fl)
{
	struct carrier *c;
	int rc;

	/* the owner's own locks never conflict: ask through its carrier if it has one, else
	 * through the open file's description, which holds no lock */
	c = get(L, k, via, false, false, &rc);
	fl->l_pid = 0;
	rc = fcntl(c ? c->fd : via->fd, F_OFD_GETLK, fl) < 0 ? -errno : 0;
	if (c)
		put(L, c);
	if (!rc && fl->l_type != F_UNLCK)
		fl->l_pid = holder_of(L, k, fl);
	return rc;
}

void sfs_locks_flush(struct sfs_locks *L, uint32_t view, uint64_t ino, uint64_t owner)
{
	struct sfs_lock_key k = {.view = view, .ino = ino, .owner = owner};
	struct flock all = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
	struct carrier *c;

	pthread_mutex_lock(&L->lock);
	if ((c = find(L, &k))) {
		/* a waiter of the same process may still be granted on it: nothing it gets
		 * outlives the description */
		fcntl(c->fd, F_OFD_SETLK, &all);
		retire(L, c);
	}
	pthread_mutex_unlock(&L->lock);
}

typedef bool match_fn(const struct carrier *c, uint32_t arg);

/* c goes if it is the view's and match says so. Under L->lock. */
static void retire_if(struct sfs_locks *L, struct carrier *c, uint32_t view, match_fn *match,
                      uint32_t arg)
{
	if (c->key.view == view && match(c, arg))
		retire(L, c);
}

/* Every carrier of the view (of ino only, unless any_ino) that match says goes. */
static void retire_where(struct sfs_locks *L, uint32_t view, uint64_t ino, bool any_ino,
                         match_fn *match, uint32_t arg)
{
	uint64_t h = hash_of(ino);
	struct sfs_hlink *e, *n;

	pthread_mutex_lock(&L->lock);
	if (any_ino) {
		sfs_htab_for_each_safe(e, n, &L->carriers)
			retire_if(L, carrier_of(e), view, match, arg);
	} else {
		sfs_htab_for_each_match_safe(e, n, &L->carriers, h)
			if (carrier_of(e)->key.ino == ino)
				retire_if(L, carrier_of(e), view, match, arg);
	}
	pthread_mutex_unlock(&L->lock);
}

static bool came_through(const struct carrier *c, uint32_t fh)
{
	return c->fh == fh;
}

static bool any(const struct carrier *c, uint32_t unused)
{
	(void)c;
	(void)unused;
	return true;
}

void sfs_locks_release(struct sfs_locks *L, uint32_t view, uint64_t ino, uint32_t fh)
{
	retire_where(L, view, ino, false, came_through, fh);
}

void sfs_locks_view_ended(struct sfs_locks *L, uint32_t view)
{
	struct sfs_list *e, *n;

	/* a wait leaves the list only under L->lock, so none is freed while this holds it;
	 * the interrupt returns once the waiter is out of its call */
	pthread_mutex_lock(&L->lock);
	sfs_list_for_each_safe(e, n, &L->waits) {
		struct sfs_lock_wait *w = sfs_list_entry(e, struct sfs_lock_wait, link);

		if (w->view == view)
			sfs_lock_wait_interrupt(w);
	}
	pthread_mutex_unlock(&L->lock);
	retire_where(L, view, 0, true, any, 0);
}

int sfs_locks_adopt(struct sfs_locks *L, uint32_t slot, const struct sfs_ho_file *rec)
{
	struct carrier *c;
	struct stat st;

	if (fstat(rec->fd, &st) < 0 || st.st_dev != rec->dev || st.st_ino != rec->ino)
		return -ESTALE; /* not the descriptor the record names: never close it */
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->key = (struct sfs_lock_key){.view = rec->view, .ino = rec->ino, .owner = rec->owner,
	                               .flock = rec->flags & SFS_HO_FLOCK};
	c->fd = rec->fd;
	c->dev = rec->dev;
	c->writable = rec->flags & SFS_HO_WRITES;
	c->fh = rec->fh;
	c->pid = rec->pid;
	c->slot = (int)slot;
	pthread_mutex_lock(&L->lock);
	sfs_openfiles_adopt(L->files, slot, c);
	sfs_htab_insert(&L->carriers, &c->link, hash_of(c->key.ino));
	pthread_mutex_unlock(&L->lock);
	return 0;
}

size_t sfs_locks_count(struct sfs_locks *L)
{
	size_t n;

	pthread_mutex_lock(&L->lock);
	n = sfs_htab_count(&L->carriers);
	pthread_mutex_unlock(&L->lock);
	return n;
}
