/* Leases between views (see ops.h, "lease.c"; contract §4.6). The kernel grants F_SETLEASE on
 * a view's own inode without asking the daemon, and breaks it only for an open or a truncate
 * through that view. So before an open (or a truncate by name) through one view goes on,
 * every lease that another view's kernel holds on the file and the open conflicts with is
 * broken the one way a kernel breaks it: the daemon opens the file through that view's mount,
 * by its handle. That kernel breaks the lease, signals its holder and makes the daemon wait
 * until the holder gives it up or the lease-break time passes; the request waits with it, as
 * the opener waits natively (doc/kernel.md §4.13). The daemon's own open then reaches it as
 * an OPEN request in the holder's view, which is answered ECANCELED at once: it was only ever
 * the break. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "locks.h"
#include "registry.h"
#include "services.h"

/* Views whose leases on one file one open breaks at most; more are not looked for. */
#define TARGETS_MAX 8

/* A view holding a lease to break, as a thread without the registry's lock reaches it. */
struct target {
	struct sfs_view_place place;
	uint64_t nodeid;
};

struct lease_break {
	struct req_wait base;
	fuse_ino_t ino;
	int flags;                /* the access the open asks, and its O_NONBLOCK */
	struct lease_then then;
	size_t n;
	struct target t[TARGETS_MAX];
};

bool lease_breaker(fuse_req_t req)
{
	static pid_t self;

	if (!self)
		self = getpid();
	return fuse_req_ctx(req)->pid == self;
}

/* A line of /proc/locks that is a lease (or an NFS delegation) which an open (for writing
 * or not) of inode number ino conflicts with: its superblock's device in *dev. A lease shows
 * the type it is being broken to while it breaks, which may still conflict: only an active
 * read lease lets a reader by. */
static bool conflicting_lease(const char *line, ino_t ino, bool writes, dev_t *dev)
{
	char kind[8], state[12], type[8];
	unsigned maj, min;
	unsigned long i;

	if (sscanf(line, "%*d: %7s %11s %7s %*d %x:%x:%lu", kind, state, type, &maj, &min, &i) != 6 &&
	    sscanf(line, "%*d: -> %7s %11s %7s %*d %x:%x:%lu", kind, state, type, &maj, &min, &i) != 6)
		return false;
	if ((strcmp(kind, "LEASE") && strcmp(kind, "DELEG")) || i != ino)
		return false;
	if (!writes && !strcmp(state, "ACTIVE") && !strcmp(type, "READ"))
		return false;
	*dev = makedev(maj, min);
	return true;
}

/* The superblocks (by device) that hold a lease on inode number ino which the open
 * conflicts with, at most max. */
static size_t leased_on(ino_t ino, bool writes, dev_t *devs, size_t max)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	size_t n = 0;
	dev_t dev;

	while (f && n < max && fgets(line, sizeof(line), f))
		if (conflicting_lease(line, ino, writes, &dev))
			devs[n++] = dev;
	if (f)
		fclose(f);
	return n;
}

static bool among(dev_t dev, const dev_t *devs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (devs[i] == dev)
			return true;
	return false;
}

/* The other views of node n that hold a lease the open conflicts with, into x. Views hold a
 * lease only on a file their kernel knows, so only the views holding a lookup of it are
 * looked at, and /proc/locks is read only when there are such. */
static size_t targets_of(struct sfs_view *v, struct sfs_node *n, bool writes,
                         struct lease_break *x)
{
	uint32_t views[TARGETS_MAX + 1];
	dev_t devs[TARGETS_MAX];
	size_t nv, nd;

	nv = sfs_itab_views_of(&v->svc->itab, n, views, TARGETS_MAX + 1);
	if (nv > TARGETS_MAX + 1)
		nv = TARGETS_MAX + 1;
	if (nv < 2 || !(nd = leased_on(n->ino, writes, devs, TARGETS_MAX)))
		return 0;
	sfs_registry_read_lock(v->svc->views);
	for (size_t i = 0; i < nv && x->n < TARGETS_MAX; i++) {
		struct sfs_view *w = sfs_registry_at(v->svc->views, views[i]);
		if (!w || w == v || atomic_load(&w->ended) || !among(sfs_view_dev(w), devs, nd))
			continue;
		sfs_view_place_of(w, &x->t[x->n].place);
		x->t[x->n++].nodeid = sfs_ino_of(w, n);
	}
	sfs_registry_read_unlock(v->svc->views);
	return x->n;
}

/* FUSE's file handle of a node (fs/fuse/inode.c, fuse_encode_fh): FILEID_INO64_GEN, the
 * node id's two halves and the generation the daemon gave the kernel with it. */
#define FUSE_FILEID_INO64_GEN 0x81

struct fuse_handle {
	struct file_handle fh;
	uint32_t words[3];
};

struct opening {
	struct fuse_handle h;
	int flags;
};

static int open_by_fuse_handle(int dir, void *arg)
{
	struct opening *o = arg;
	int fd = open_by_handle_at(dir, &o->h.fh, o->flags);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* A directory descriptor of the view's mount, or of a clone of it that writes (a ro view's
 * kernel refuses an open for writing before it looks at leases). */
static int mount_dir(const struct target *t, bool writable)
{
	struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY};
	int root = sfs_view_place_open(&t->place), clone, dir;

	if (root < 0 || !writable) {
		dir = root < 0 ? root : openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		goto out;
	}
	clone = (int)open_tree(root, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | OPEN_TREE_CLOEXEC);
	if (clone < 0 || mount_setattr(clone, "", AT_EMPTY_PATH, &rw, sizeof(rw)) < 0)
		dir = -errno;
	else
		dir = openat(clone, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (clone >= 0)
		close(clone);
out:
	if (dir == -1)
		dir = -errno;
	if (root >= 0)
		close(root);
	return dir;
}

/* Breaks the target's lease: 0 once broken (or gone), -EWOULDBLOCK for an open that asked
 * not to wait (the break has begun, as natively), -EINTR when the wait was interrupted. */
static int break_one(struct lease_break *x, const struct target *t)
{
	struct opening o = {.flags = (x->flags & (O_ACCMODE | O_NONBLOCK)) | O_CLOEXEC | O_NOCTTY};
	bool writes = (x->flags & O_ACCMODE) != O_RDONLY;
	struct sfs_locks *L = x->base.view->svc->locks;
	int dir = mount_dir(t, false), rc;

	o.h.fh = (struct file_handle){.handle_bytes = sizeof(o.h.words),
	                              .handle_type = FUSE_FILEID_INO64_GEN};
	o.h.words[0] = (uint32_t)(t->nodeid >> 32);
	o.h.words[1] = (uint32_t)t->nodeid;
	o.h.words[2] = (uint32_t)(t->nodeid >> 32); /* the generation (ops/dir.c) */
	rc = dir < 0 ? dir : sfs_locks_wait_call(L, x->base.view->slot, open_by_fuse_handle, dir,
	                                         &o, &x->base.w);
	if (rc == -EROFS && writes) {
		close(dir);
		dir = mount_dir(t, true);
		rc = dir < 0 ? dir : sfs_locks_wait_call(L, x->base.view->slot, open_by_fuse_handle,
		                                         dir, &o, &x->base.w);
	}
	if (dir >= 0)
		close(dir);
	if (rc == -EINTR || rc == -EWOULDBLOCK || !rc || rc == -ECANCELED)
		return rc == -ECANCELED ? 0 : rc;
	/* the view or its file is gone, and its leases with it */
	if (rc != -ENOENT && rc != -ESTALE && rc != -ENOTCONN)
		syslog(LOG_WARNING, "%s: a lease on inode %llu through it could not be broken: %s",
		       t->place.mountpoint, (unsigned long long)t->nodeid & 0xffffffffULL,
		       strerror(-rc));
	return 0;
}

/* On the waiting thread: the breaks, then the rest of the request, or the error. */
static void break_then_go_on(struct req_wait *b)
{
	struct lease_break *x = (struct lease_break *)b;
	int rc = 0;

	req_wait_interruptible(b, true);
	for (size_t i = 0; i < x->n && !rc; i++)
		rc = break_one(x, &x->t[i]);
	req_wait_interruptible(b, false);
	if (rc) {
		req_fail(b->req, rc);
		return;
	}
	if (x->then.open)
		x->then.open(b->req, x->ino, &x->then.fi);
	else
		x->then.setattr(b->req, x->ino, &x->then.attr, x->then.valid, NULL);
}

bool lease_break_first(fuse_req_t req, fuse_ino_t ino, int flags, const struct lease_then *then)
{
	struct sfs_view *v = fuse_req_userdata(req);
	bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	struct sfs_node *n;
	struct lease_break *x;
	int rc;

	if (sfs_registry_count(v->svc->views) < 2 || !(n = sfs_node_of(v, ino)) ||
	    !S_ISREG(n->type) || !(x = calloc(1, sizeof(*x))))
		return false;
	*x = (struct lease_break){.base = {.req = req, .view = v, .run = break_then_go_on},
	                          .ino = ino, .flags = writes ? O_WRONLY | (flags & O_NONBLOCK)
	                                                      : O_RDONLY | (flags & O_NONBLOCK),
	                          .then = *then};
	if (!targets_of(v, n, writes, x)) {
		free(x);
		return false;
	}
	if ((rc = req_wait_start(&x->base)) < 0) {
		/* no thread may wait: the opener is told to come back, as one that asked not to
		 * wait (the break is not begun) */
		free(x);
		req_fail(req, rc == -ENOLCK ? -EWOULDBLOCK : rc);
	}
	return true;
}
