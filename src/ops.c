/* The request path: the one fuse_lowlevel_ops table shared by every view. Each handler
 * resolves its nodes (inode.c, fdcache.c), asks the view's policies (policy.h), acts on the
 * backing as the caller (creds.c) relative to backing descriptors only, tells the other views
 * (coherence.c), and replies exactly once. Workers return 0 or -errno. */
#include "view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include "coherence.h"
#include "creds.h"
#include "daemon.h"
#include "fdcache.h"
#include "names.h"
#include "policy.h"
#include "quota.h"

#define SETATTR_SUID_BITS (S_ISUID | S_ISGID)

struct sfs_file {
	int fd;
	/* The node's O_PATH descriptor stays held while the file is open: the kernel's fstat
	 * carries no file handle, and an open file unlinked elsewhere can no longer be reopened
	 * by its handle (ESTALE where ext4 answers). NULL when it could not be had. */
	struct sfs_node *pinned;
	bool direct; /* O_DIRECT: the backing wants aligned buffers, libfuse's are not */
	/* The kernel's writeback of a mapped file's pages writes whole pages and a short tail at
	 * the offsets they belong to, which an O_DIRECT descriptor refuses (EINVAL: the data is
	 * lost) and an O_APPEND one puts at the end: those go through a twin descriptor without
	 * either flag, opened at the first such write. -1 until then. */
	bool needs_twin;
	atomic_int twin;
	atomic_llong atime; /* see atime_moved */
	struct sfs_file *prev, *next; /* the view's open files, under files_lock */
};

struct sfs_dir {
	struct sfs_node *node; /* the kernel holds the directory open, and so its node */
	int fd;
	DIR *dp;
	off_t offset;
	struct dirent *entry;
	atomic_llong atime; /* see atime_moved */
};

/* The atime an open file or directory last showed, in ns, or NO_ATIME where the view's reads
 * never move it (noatime, ro). */
#define NO_ATIME LLONG_MIN

/* A node and its backing descriptor, held for one request. */
struct held {
	struct sfs_node *node;
	int fd;
};

/* Runs a backing call as the caller; where the view's rules say the kernel has already
 * allowed the access (noacl views over an ACL-enforcing backing), an EACCES is retried with
 * the DAC capabilities for that one call (kernel-facts §8). Evaluates to the result or
 * -errno. */
#define BACKING(r, call)                                                            \
	({                                                                          \
		long rc_ = (call);                                                  \
		if (rc_ < 0 && errno == EACCES && sfs_policy_dac_retry((r)->view)) { \
			sfs_priv_begin(SFS_PRIV_DAC);                               \
			rc_ = (call);                                               \
			int e_ = errno;                                             \
			sfs_priv_end();                                             \
			errno = e_;                                                 \
		}                                                                   \
		rc_ < 0 ? -errno : rc_;                                             \
	})

static void proc_path(char buf[40], int fd)
{
	snprintf(buf, 40, "/proc/self/fd/%d", fd);
}

static int begin(fuse_req_t req, struct sfs_req *r)
{
	r->req = req;
	r->view = fuse_req_userdata(req);
	r->ctx = fuse_req_ctx(req);
	atomic_fetch_add_explicit(&r->view->requests, 1, memory_order_relaxed);
	return sfs_creds_enter(req);
}

static struct sfs_quota *ledger(const struct sfs_req *r)
{
	return &r->view->d->quota;
}

static struct sfs_quota *req_ledger(fuse_req_t req)
{
	return &((struct sfs_view *)fuse_req_userdata(req))->d->quota;
}

/* Reserves what a request will add for objects of uid:gid against the view's limits: 0, or
 * -EDQUOT. c was begun by sfs_charge_begin. */
static int charge(struct sfs_req *r, struct sfs_charge *c, uint32_t uid, uint32_t gid,
                  int64_t bytes, int64_t inodes)
{
	c->id[SFS_QUSR] = uid;
	c->id[SFS_QGRP] = gid;
	c->amount[SFS_QBYTES] = bytes;
	c->amount[SFS_QINODES] = inodes;
	return sfs_policy_charge(r, c);
}

/* Reserves the blocks an allocation of [off, off+len) in a file may need: the whole range
 * when that fits the limits, else exactly what the range lacks (a FIEMAP, paid only near a
 * limit). */
static int charge_alloc(struct sfs_req *r, struct sfs_charge *c, struct sfs_node *n, int fd,
                        off_t off, off_t len)
{
	int rc = charge(r, c, n->q.uid, n->q.gid, sfs_quota_alloc_bound(ledger(r), off, len), 0);

	if (rc == -EDQUOT)
		rc = charge(r, c, n->q.uid, n->q.gid, sfs_quota_alloc_bytes(ledger(r), fd, off, len), 0);
	return rc;
}

static void reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc < 0 ? -rc : rc);
}

static int hold(struct sfs_view *v, fuse_ino_t ino, struct held *h)
{
	h->node = sfs_node_of(v, ino);
	if (!h->node)
		return -EINVAL;
	h->fd = sfs_fd_get(&v->d->fdc, h->node);
	return h->fd < 0 ? h->fd : 0;
}

static void unhold(struct sfs_view *v, struct held *h)
{
	if (h->node && h->fd >= 0)
		sfs_fd_put(&v->d->fdc, h->node);
	h->node = NULL;
	h->fd = -1;
}

/* One path component, never "." or "..": the kernel only sends such names, and the daemon
 * relies on it to stay beneath the view's root. Length is the backing's to judge
 * (ENAMETOOLONG). */
static bool valid_name(const char *name)
{
	return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

static int stat_fd(int fd, struct stat *st)
{
	return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static void fill_entry(struct sfs_view *v, struct sfs_node *n, const struct stat *st,
                       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = sfs_ino_of(v, n);
	e->attr = *st;
	e->attr_timeout = v->attr_timeout;
	e->entry_timeout = v->entry_timeout;
}

/* Enters an O_PATH descriptor of a backing object into the table, counting a lookup by the
 * view. Takes ownership of fd. */
static int entry_from_fd(struct sfs_view *v, struct sfs_node *parent, int fd,
                         struct fuse_entry_param *e)
{
	struct sfs_node *n;
	struct stat st;
	int rc = stat_fd(fd, &st);

	if (rc) {
		close(fd);
		return rc;
	}
	if (st.st_dev != v->d->backing.fs_dev) {
		close(fd); /* nothing is mounted inside a detached backing; refuse if it were */
		return -EXDEV;
	}
	rc = sfs_itab_get(&v->d->itab, &v->d->fdc, fd, &st, v->slot, &n);
	if (rc)
		return rc;
	sfs_quota_placed(n, parent);
	fill_entry(v, n, &st, e);
	return 0;
}

static int lookup_at(struct sfs_req *r, struct sfs_node *dir, int dirfd, const char *name,
                     struct fuse_entry_param *e)
{
	int fd = BACKING(r, openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));

	if (fd < 0)
		return fd;
	return entry_from_fd(r->view, dir, fd, e);
}

/* readdirplus looks entries up without the kernel having checked search permission on the
 * directory, so it never takes the noacl retry: strictly as the caller. */
static int lookup_for_listing(struct sfs_req *r, struct sfs_node *dir, int dirfd,
                              const char *name, struct fuse_entry_param *e)
{
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return entry_from_fd(r->view, dir, fd, e);
}

static void forget_one(struct sfs_view *v, fuse_ino_t ino)
{
	struct sfs_node *n = sfs_node_of(v, ino);

	if (n && n != v->root)
		sfs_itab_forget(&v->d->itab, &v->d->fdc, n, v->slot, 1);
}

static void reply_entry(struct sfs_view *v, fuse_req_t req, struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) < 0 && e->ino)
		forget_one(v, e->ino);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	bool tracked = false;
	struct held p = {0};
	struct sfs_req r;
	int rc;

	if ((rc = begin(req, &r)))
		goto out;
	rc = -ENOENT;
	if (!valid_name(name))
		goto out;
	if ((rc = hold(r.view, parent, &p)))
		goto out;
	if ((rc = sfs_policy_name(r.view, p.node, name, false)))
		goto out;
	{
		char alias[NAME_MAX + 1];
		bool exact = true;
		/* a casefold view whose directory index is warm knows the backing's spelling (or
		 * that there is none) without asking the backing for the exact one first */
		rc = sfs_policy_peek(r.view, p.node, name, alias, sizeof(alias), &exact);
		if (rc == 0)
			rc = lookup_at(&r, p.node, p.fd, exact ? name : alias, &e);
		else if (rc != -ENOENT) {
			exact = true;
			rc = lookup_at(&r, p.node, p.fd, name, &e);
			if (rc == -ENOENT) {
				exact = false;
				if (sfs_policy_resolve(r.view, p.node, p.fd, name, alias, sizeof(alias)) == 0)
					rc = lookup_at(&r, p.node, p.fd, alias, &e);
			}
		}
		/* another spelling of the name (casefold views): the kernel may keep this
		 * spelling's dentry, positive or negative, only while names.c tracks it for
		 * invalidation */
		if (rc == -ENOENT || (rc == 0 && !exact)) {
			tracked = sfs_names_track_spelling(r.view, p.node, name);
			if (rc == 0 && !tracked)
				e.entry_timeout = 0;
		}
	}
out:
	unhold(r.view, &p);
	if (rc == -ENOENT) {
		/* a negative entry the kernel may cache: a create in another view invalidates it */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = tracked ? r.view->entry_timeout : r.view->negative_timeout;
		fuse_reply_entry(req, &e);
	} else if (rc) {
		reply_err(req, rc);
	} else {
		reply_entry(r.view, req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct sfs_node *n = sfs_node_of(v, ino);

	if (n && n != v->root)
		sfs_itab_forget(&v->d->itab, &v->d->fdc, n, v->slot, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct sfs_view *v = fuse_req_userdata(req);

	for (size_t i = 0; i < count; i++) {
		struct sfs_node *n = sfs_node_of(v, forgets[i].ino);
		if (n && n != v->root)
			sfs_itab_forget(&v->d->itab, &v->d->fdc, n, v->slot, forgets[i].nlookup);
	}
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct held h = {0};
	struct stat st;
	int rc;

	atomic_fetch_add_explicit(&v->requests, 1, memory_order_relaxed);
	if (fi) {
		struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
		rc = fstat(f->fd, &st) < 0 ? -errno : 0;
	} else if (!(rc = hold(v, ino, &h))) {
		rc = stat_fd(h.fd, &st);
	}
	unhold(v, &h);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, v->attr_timeout);
}

/* A mode change whose only effect is clearing set-id bits is what a kernel that did not take
 * FUSE_HANDLE_KILLPRIV_V2 (fuse_io.h) sends before a write, truncate or chown by a
 * non-owner; it must succeed, so it is done with CAP_FOWNER. Any other chmod runs as the
 * caller. */
static bool only_clears_setid(mode_t old, mode_t new)
{
	old &= 07777;
	new &= 07777;
	return old != new && (old & ~new & 07777) == (old & ~new & SETATTR_SUID_BITS) &&
	       !(new & ~old);
}

static int set_mode(struct sfs_req *r, struct held *h, mode_t mode)
{
	char path[40];
	struct stat st;
	int rc = stat_fd(h->fd, &st);

	if (rc)
		return rc;
	if (S_ISLNK(st.st_mode))
		return -EOPNOTSUPP;
	proc_path(path, h->fd);
	if (only_clears_setid(st.st_mode, mode)) {
		sfs_priv_begin(SFS_PRIV_FOWNER);
		rc = chmod(path, mode & 07777) < 0 ? -errno : 0;
		sfs_priv_end();
		return rc;
	}
	return BACKING(r, chmod(path, mode & 07777));
}

static int set_size(struct sfs_req *r, struct held *h, struct fuse_file_info *fi, off_t size)
{
	char path[40];
	int fd, rc;

	if (fi)
		return ftruncate(((struct sfs_file *)(uintptr_t)fi->fh)->fd, size) < 0 ? -errno : 0;
	if (!S_ISREG(h->node->type))
		return S_ISDIR(h->node->type) ? -EISDIR : -EINVAL;
	proc_path(path, h->fd);
	fd = BACKING(r, open(path, O_WRONLY | O_CLOEXEC));
	if (fd < 0)
		return fd;
	rc = ftruncate(fd, size) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int set_times(struct sfs_req *r, struct held *h, const struct stat *attr, int valid)
{
	struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};

	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_ATIME)
		ts[0] = attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_MTIME)
		ts[1] = attr->st_mtim;
	return BACKING(r, utimensat(h->fd, "", ts, AT_EMPTY_PATH));
}

/* A chown moves the node's blocks and inode to the new owner: charged to the ids that change. */
static int charge_chown(struct sfs_req *r, struct sfs_charge *c, struct held *h,
                        const struct stat *attr, int valid)
{
	uint32_t uid = h->node->q.uid, gid = h->node->q.gid;

	if ((valid & FUSE_SET_ATTR_UID) && attr->st_uid != uid)
		uid = attr->st_uid;
	else
		c->skip |= SFS_CHARGE_USR;
	if ((valid & FUSE_SET_ATTR_GID) && attr->st_gid != gid)
		gid = attr->st_gid;
	else
		c->skip |= SFS_CHARGE_GRP;
	c->skip |= SFS_CHARGE_TOTAL; /* the backing's total does not change */
	return charge(r, c, uid, gid, h->node->q.bytes, h->node->q.counted);
}

/* A SETATTR with nothing to set is either chown(f, -1, -1), for which ext4 stamps ctime,
 * or, under FUSE_HANDLE_KILLPRIV_V2 (fuse_io.h), the kernel's notice before a write to a
 * set-id file; the write itself then clears the bits on the backing, as the caller. Only
 * the owner may stamp a set-id file (ext4 makes the chown a mode change): anyone else's
 * EPERM is the notice's, and nothing is changed. Either way the bits may be gone a moment
 * later, so the kernel is not let keep the attributes this reply carries. */
static bool is_write_notice(int valid, int fd)
{
	struct stat st;

	return !valid && stat_fd(fd, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                       struct fuse_file_info *fi)
{
	struct held h = {0};
	struct sfs_charge c;
	struct sfs_req r;
	struct stat st;
	bool notice = false;
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)) || (rc = hold(r.view, ino, &h)))
		goto out;
	notice = is_write_notice(valid, h.fd);
	if ((valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && (rc = charge_chown(&r, &c, &h, attr, valid)))
		goto out;
	if ((valid & FUSE_SET_ATTR_MODE) && (rc = set_mode(&r, &h, attr->st_mode)))
		goto out;
	if (!valid || (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_CTIME))) {
		uid_t uid = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gid = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
		rc = BACKING(&r, fchownat(h.fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
		if (rc && !(rc == -EPERM && notice))
			goto out;
		rc = 0;
	}
	if ((valid & FUSE_SET_ATTR_SIZE) && (rc = set_size(&r, &h, fi, attr->st_size)))
		goto out;
	if ((valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
	              FUSE_SET_ATTR_MTIME_NOW)) &&
	    (rc = set_times(&r, &h, attr, valid)))
		goto out;
	rc = stat_fd(h.fd, &st);
out:
	if (h.node && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)))
		sfs_quota_sync(ledger(&r), h.node, NULL, h.fd);
	sfs_charge_end(&c);
	if (h.node) {
		if (valid & FUSE_SET_ATTR_SIZE)
			sfs_coh_data(r.view, h.node, 0, 0);
		else
			sfs_coh_attr(r.view, h.node);
		sfs_coh_flush(r.view);
	}
	unhold(r.view, &h);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, notice ? 0 : r.view->attr_timeout);
}

static long long atime_ns(const struct stat *st)
{
	return st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
}

/* The atime an open of st starts from: NO_ATIME where the view's reads never move it. */
static long long first_atime(const struct sfs_view *v, const struct stat *st)
{
	if (sfs_policy_mount_attrs(&v->opts) & (MOUNT_ATTR_NOATIME | MOUNT_ATTR_RDONLY))
		return NO_ATIME;
	return atime_ns(st);
}

/* After a read through fd of node's open file or directory: whether the read moved the
 * atime (the view's rule let it). The other views then drop their cached attributes, as every
 * mount of one native inode shows its new atime at once. One fstat per read, and only while
 * other views exist. */
static void atime_moved(struct sfs_view *v, struct sfs_node *n, int fd, atomic_llong *seen)
{
	struct stat st;
	long long was = atomic_load(seen);

	if (was == NO_ATIME || v->d->nviews < 2 || !n || fstat(fd, &st) < 0)
		return;
	if (atime_ns(&st) != was && atomic_compare_exchange_strong(seen, &was, atime_ns(&st)))
		sfs_coh_attr(v, n);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct sfs_view *v = fuse_req_userdata(req);
	char buf[PATH_MAX + 1];
	struct held h = {0};
	ssize_t n = -1;
	int rc, fd = -1;

	/* through the view's clone of the backing: reading a symlink touches its atime by the
	 * view's rule (the node's own descriptor, held meanwhile so that the inode stays, is on
	 * the backing's noatime mount) */
	if (!(rc = hold(v, ino, &h))) {
		sfs_priv_begin(SFS_PRIV_SEARCH);
		fd = sfs_node_open(h.node, atomic_load(&v->open_mnt), O_PATH | O_NOFOLLOW | O_CLOEXEC);
		rc = fd < 0 ? -errno : 0;
		sfs_priv_end();
	}
	if (!rc) {
		struct stat st;
		atomic_llong seen = stat_fd(fd, &st) ? NO_ATIME : first_atime(v, &st);
		n = readlinkat(fd, "", buf, sizeof(buf));
		rc = n < 0 ? -errno : n >= (ssize_t)sizeof(buf) ? -ENAMETOOLONG : 0;
		atime_moved(v, h.node, fd, &seen);
		sfs_coh_flush(v);
		close(fd);
	}
	unhold(v, &h);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

/* The common tail of every call that makes a name: policies, the new node, the other
 * views told. */
static int finish_create(struct sfs_req *r, struct held *p, const char *name, mode_t mode,
                         struct fuse_entry_param *e)
{
	int rc = sfs_policy_created(r, p->fd, name, mode);

	if (!rc)
		rc = lookup_at(r, p->node, p->fd, name, e);
	if (!rc)
		sfs_quota_created(ledger(r), sfs_node_of(r->view, e->ino), &e->attr, p->node, p->fd);
	sfs_quota_sync(ledger(r), p->node, NULL, p->fd); /* the directory may have grown */
	sfs_coh_name(r->view, p->node, name);
	sfs_coh_attr(r->view, p->node);
	sfs_coh_flush(r->view);
	return rc;
}

/* The prologue of every call that makes or removes a name in a directory: the view may
 * modify, the name is one component, the parent is held, the policies allow the name. */
static int begin_dir_change(fuse_req_t req, struct sfs_req *r, fuse_ino_t parent,
                            const char *name, bool create, struct held *p)
{
	int rc;

	if ((rc = begin(req, r)) || (rc = sfs_policy_modify(r->view)))
		return rc;
	if (!valid_name(name))
		return create ? -EINVAL : -ENOENT;
	if ((rc = hold(r->view, parent, p)))
		return rc;
	return sfs_policy_name(r->view, p->node, name, create);
}

/* The backing's spelling of a name the kernel sent: in casefold views the caller may have
 * used another one (the kernel keeps the dentry it looked up). Returns name or buf. */
static const char *backing_spelling(struct sfs_req *r, struct held *p, const char *name,
                                    char *buf, size_t len)
{
	return sfs_policy_resolve(r->view, p->node, p->fd, name, buf, len) == 0 ? buf : name;
}

/* A new name must not join a class that already has a member under another spelling. */
static int check_new_name(struct sfs_req *r, struct held *p, const char *name)
{
	char other[NAME_MAX + 1];

	if (sfs_policy_resolve(r->view, p->node, p->fd, name, other, sizeof(other)) == 0 &&
	    strcmp(other, name))
		return -EEXIST;
	return 0;
}

enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

/* A new object costs an inode, charged to the caller and to the group it will get (the
 * directory's, under a set-group-ID directory), and the blocks ext4 gives it at birth: one
 * for a directory and for a symlink too long to live in the inode. */
static int charge_new(struct sfs_req *r, struct sfs_charge *c, struct held *p,
                      enum make_kind kind, const char *target)
{
	int64_t bytes = 0;
	gid_t gid = r->ctx->gid;
	struct stat st;

	if (!sfs_opts_enforce_quota(&r->view->opts))
		return 0;
	if (stat_fd(p->fd, &st) == 0 && (st.st_mode & S_ISGID))
		gid = st.st_gid;
	if (kind == MAKE_DIR || (kind == MAKE_SYMLINK && strlen(target) >= 60))
		bytes = ledger(r)->bsize;
	return charge(r, c, r->ctx->uid, gid, bytes, 1);
}

static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name, enum make_kind kind,
                       mode_t mode, dev_t rdev, const char *target)
{
	struct fuse_entry_param e;
	struct sfs_charge c;
	struct held p = {0};
	struct sfs_req r;
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin_dir_change(req, &r, parent, name, true, &p)) ||
	    (rc = check_new_name(&r, &p, name)) || (rc = charge_new(&r, &c, &p, kind, target)))
		goto out;
	sfs_names_lock(r.view->d, p.node);
	switch (kind) {
	case MAKE_DIR:
		rc = BACKING(&r, mkdirat(p.fd, name, mode));
		break;
	case MAKE_SYMLINK:
		rc = BACKING(&r, symlinkat(target, p.fd, name));
		break;
	default:
		rc = BACKING(&r, mknodat(p.fd, name, mode, rdev));
		break;
	}
	if (!rc)
		sfs_names_added(r.view, p.node, name);
	sfs_names_unlock(r.view->d, p.node);
	if (!rc)
		rc = finish_create(&r, &p, name, mode, &e);
out:
	sfs_charge_end(&c);
	unhold(r.view, &p);
	if (rc)
		reply_err(req, rc);
	else
		reply_entry(r.view, req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make_entry(req, parent, name, MAKE_NODE, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_entry(req, parent, name, MAKE_DIR, mode | S_IFDIR, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_entry(req, parent, name, MAKE_SYMLINK, S_IFLNK | 0777, 0, link);
}

/* An object a request may unlink or replace: held open (O_PATH) across the change, so that
 * the ledger learns afterwards whether its last link went. */
struct victim {
	int fd;
	struct sfs_node *node; /* if the table knows it; the caller's view holds a lookup on it
	                          while the kernel is inside unlink/rename of it */
	struct sfs_nodeq was;
	struct stat st;
};

static void victim_open(struct sfs_view *v, struct held *dir, const char *name, struct victim *vi)
{
	int dirfd = dir->fd;

	vi->fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (vi->fd < 0 || fstat(vi->fd, &vi->st) < 0) {
		vi->st.st_mode = 0;
		vi->node = NULL;
		return;
	}
	vi->node = sfs_itab_find(&v->d->itab, vi->st.st_dev, vi->st.st_ino);
	sfs_quota_node_init(&vi->was, &vi->st);
	vi->was.rmask = sfs_quota_mask(&v->d->quota, dir->node, dirfd);
}

/* After the change (done or not): the ledger follows, the descriptor goes. */
static void victim_close(struct sfs_view *v, struct victim *vi)
{
	if (vi->fd < 0)
		return;
	sfs_quota_sync(&v->d->quota, vi->node, &vi->was, vi->fd);
	close(vi->fd);
	vi->fd = -1;
}

/* After a change made under another spelling than the backing's, the caller's own view may
 * still hold the backing spelling's dentry; it is dropped from another thread, as a handler
 * must not invalidate entries of its own directory. */
static void drop_own_spelling(struct sfs_req *r, struct held *p, const char *asked,
                              const char *actual)
{
	if (asked != actual)
		sfs_coh_own_entry(r->view, p->node, actual);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct victim vi = {.fd = -1};
	char buf[NAME_MAX + 1];
	const char *actual;
	struct sfs_charge c;
	struct held p = {0};
	struct sfs_req r;
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin_dir_change(req, &r, parent, name, false, &p)))
		goto out;
	actual = backing_spelling(&r, &p, name, buf, sizeof(buf));
	sfs_names_lock(r.view->d, p.node);
	victim_open(r.view, &p, actual, &vi);
	rc = BACKING(&r, unlinkat(p.fd, actual, flags));
	if (!rc) {
		sfs_names_removed(r.view, p.node, actual);
		if (S_ISDIR(vi.st.st_mode))
			sfs_names_dir_gone(r.view->d, vi.st.st_dev, vi.st.st_ino);
	}
	sfs_names_unlock(r.view->d, p.node);
	victim_close(r.view, &vi);
	if (!rc) {
		sfs_coh_name(r.view, p.node, actual);
		sfs_coh_attr(r.view, p.node);
		if (vi.node)
			sfs_coh_attr(r.view, vi.node);
		drop_own_spelling(&r, &p, name, actual);
		sfs_coh_flush(r.view);
	}
out:
	sfs_charge_end(&c);
	unhold(r.view, &p);
	reply_err(req, rc);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, AT_REMOVEDIR);
}

/* What the kernel checked before a rename on a noacl view, by mode bits, redone on the
 * objects under the names now: the kernel saw them through its caches, and another view may
 * have put something else there since. */
static bool rename_allowed_by_modes(struct held *p, const struct victim *moved, struct held *np,
                                    const struct victim *victim, unsigned int flags)
{
	struct stat ps, nps;

	if (fstat(p->fd, &ps) < 0 || fstat(np->fd, &nps) < 0)
		return false;
	if (!sfs_mode_allows(&ps, W_OK | X_OK) || !sfs_mode_allows(&nps, W_OK | X_OK))
		return false;
	if (p->node == np->node)
		return true;
	/* a directory changing parent has its ".." rewritten */
	if (S_ISDIR(moved->st.st_mode) && !sfs_mode_allows(&moved->st, W_OK))
		return false;
	return !(flags & RENAME_EXCHANGE) || !S_ISDIR(victim->st.st_mode) ||
	       sfs_mode_allows(&victim->st, W_OK);
}

static bool same_object_at(int dirfd, const char *name, const struct stat *was)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == was->st_dev &&
	       st.st_ino == was->st_ino;
}

/* The rename as the caller; on a noacl view an EACCES from the backing's ACLs is repeated
 * with DAC capabilities only if the mode bits allow it on what is there now (not only on
 * what the kernel saw). Should another swap have slipped in between that check and the
 * call, the checked objects are not the ones moved: the move is undone and refused. */
static int rename_as_caller(struct sfs_req *r, struct held *p, const char *from,
                            const struct victim *moved, struct held *np, const char *to,
                            const struct victim *victim, unsigned int flags)
{
	int rc = renameat2(p->fd, from, np->fd, to, flags) < 0 ? -errno : 0;
	bool same;

	if (rc != -EACCES || !sfs_policy_dac_retry(r->view) || !moved->st.st_mode ||
	    !rename_allowed_by_modes(p, moved, np, victim, flags))
		return rc;
	sfs_priv_begin(SFS_PRIV_DAC);
	rc = renameat2(p->fd, from, np->fd, to, flags) < 0 ? -errno : 0;
	same = rc || (same_object_at(np->fd, to, &moved->st) &&
	              (!(flags & RENAME_EXCHANGE) || !victim->st.st_mode ||
	               same_object_at(p->fd, from, &victim->st)));
	if (!same) {
		unsigned int back = flags & RENAME_EXCHANGE ? RENAME_EXCHANGE : RENAME_NOREPLACE;
		if (renameat2(np->fd, to, p->fd, from, back) < 0)
			syslog(LOG_WARNING, "%s: a rename raced with another view and could not be "
			       "undone: %m", r->view->mountpoint);
		rc = -EACCES;
	}
	sfs_priv_end();
	return rc;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
	struct victim moved = {.fd = -1}, victim = {.fd = -1};
	char buf[NAME_MAX + 1], nbuf[NAME_MAX + 1];
	struct held p = {0}, np = {0};
	const char *from, *to;
	struct sfs_charge c;
	struct sfs_req r;
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)))
		goto out;
	rc = -EINVAL;
	if (!valid_name(name) || !valid_name(newname))
		goto out;
	if ((rc = hold(r.view, parent, &p)) || (rc = hold(r.view, newparent, &np)))
		goto out;
	if ((rc = sfs_policy_name(r.view, p.node, name, false)) ||
	    (rc = sfs_policy_name(r.view, np.node, newname, true)))
		goto out;
	/* the source in the backing's spelling; a target whose class has a member under another
	 * spelling replaces that member, as on casefold ext4 */
	/* nothing moves across the edge of a view tree whose usage is kept apart */
	if ((rc = sfs_quota_may_move(ledger(&r), p.node, p.fd, np.node, np.fd)))
		goto out;
	from = backing_spelling(&r, &p, name, buf, sizeof(buf));
	to = backing_spelling(&r, &np, newname, nbuf, sizeof(nbuf));
	sfs_names_lock2(r.view->d, p.node, np.node);
	victim_open(r.view, &p, from, &moved);
	victim_open(r.view, &np, to, &victim);
	rc = rename_as_caller(&r, &p, from, &moved, &np, to, &victim, flags);
	if (!rc && !(flags & RENAME_EXCHANGE)) {
		if (S_ISDIR(victim.st.st_mode) && !(flags & RENAME_NOREPLACE))
			sfs_names_dir_gone(r.view->d, victim.st.st_dev, victim.st.st_ino);
		sfs_names_renamed(r.view, p.node, from, np.node, to);
		if (flags & RENAME_WHITEOUT)
			sfs_names_added(r.view, p.node, from);
	}
	sfs_names_unlock2(r.view->d, p.node, np.node);
	victim_close(r.view, &moved);
	victim_close(r.view, &victim);
	if (!rc)
		sfs_quota_sync(ledger(&r), np.node, NULL, np.fd); /* the directory may have grown */
	if (!rc) {
		sfs_coh_name(r.view, p.node, from);
		sfs_coh_name(r.view, np.node, to);
		drop_own_spelling(&r, &p, name, from);
		drop_own_spelling(&r, &np, newname, to);
		sfs_coh_attr(r.view, p.node);
		if (np.node != p.node)
			sfs_coh_attr(r.view, np.node);
		if (moved.node)
			sfs_coh_attr(r.view, moved.node);
		if (victim.node)
			sfs_coh_attr(r.view, victim.node);
		sfs_coh_flush(r.view);
	}
out:
	sfs_charge_end(&c);
	unhold(r.view, &np);
	unhold(r.view, &p);
	reply_err(req, rc);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	struct held h = {0}, np = {0};
	struct sfs_charge c;
	struct sfs_req r;
	char path[40];
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)))
		goto out;
	rc = -EINVAL;
	if (!valid_name(newname))
		goto out;
	if ((rc = hold(r.view, ino, &h)) || (rc = hold(r.view, newparent, &np)) ||
	    (rc = sfs_policy_name(r.view, np.node, newname, true)) ||
	    (rc = check_new_name(&r, &np, newname)) ||
	    (rc = sfs_quota_may_move(ledger(&r), h.node, h.fd, np.node, np.fd)))
		goto out;
	proc_path(path, h.fd);
	/* The magic link lands on the node itself, symlinks included, and never follows on. */
	sfs_names_lock(r.view->d, np.node);
	rc = BACKING(&r, linkat(AT_FDCWD, path, np.fd, newname, AT_SYMLINK_FOLLOW));
	if (!rc)
		sfs_names_added(r.view, np.node, newname);
	sfs_names_unlock(r.view->d, np.node);
	if (!rc) {
		rc = lookup_at(&r, np.node, np.fd, newname, &e);
		sfs_quota_sync(ledger(&r), np.node, NULL, np.fd); /* the directory may have grown */
		sfs_coh_name(r.view, np.node, newname);
		sfs_coh_attr(r.view, np.node);
		sfs_coh_attr(r.view, h.node);
		sfs_coh_flush(r.view);
	}
out:
	sfs_charge_end(&c);
	unhold(r.view, &np);
	unhold(r.view, &h);
	if (rc)
		reply_err(req, rc);
	else
		reply_entry(r.view, req, &e);
}

/* Open flags for the backing: what the kernel passed, adjusted for a reopen through
 * /proc/self/fd and for writeback caching (the kernel then reads around partial writes and
 * handles O_APPEND itself). */
static int backing_open_flags(const struct sfs_view *v, int flags)
{
	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW);
	if (v->opts.cache == SFS_CACHE_WRITEBACK) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags | O_CLOEXEC;
}

/* Opens the node's backing file or directory for the view, through the view's clone of the
 * backing mount (its atime rule and ro apply to what the descriptor reads), by handle; st gets
 * the object's attributes. Only regular files and directories are opened (SPEC §4.2): a FIFO
 * would block the worker, a device would bypass the view's nodev. The kernel has checked the
 * caller's access on the view already, MAY_EXEC instead of MAY_READ for an exec (kernel-facts
 * §8); CAP_DAC_READ_SEARCH, which the handle needs anyway, lets the backing take that check
 * for reading, while a write is still checked as the caller. Returns the fd or -errno. */
static int open_node(struct sfs_req *r, struct held *h, int flags, struct stat *st)
{
	int fd, rc = stat_fd(h->fd, st);

	if (rc)
		return rc;
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return -EINVAL;
	sfs_priv_begin(SFS_PRIV_SEARCH);
	fd = BACKING(r, sfs_node_open(h->node, atomic_load(&r->view->open_mnt), flags | O_NOFOLLOW));
	sfs_priv_end();
	return fd;
}

/* Holds the node's O_PATH descriptor for the life of an open file; when the cache let it go
 * and the object has lost its last name meanwhile, the open file itself gives a new one. */
static bool pin_node(struct sfs_view *v, struct sfs_node *node, int fd)
{
	char path[40];
	int pfd;

	if (!node)
		return false;
	if (sfs_fd_get(&v->d->fdc, node) >= 0)
		return true;
	proc_path(path, fd);
	if ((pfd = open(path, O_PATH | O_CLOEXEC)) < 0)
		return false;
	sfs_fdcache_offer(&v->d->fdc, node, pfd);
	return sfs_fd_get(&v->d->fdc, node) >= 0;
}

/* How the view's kernel caches what the open file reads (policy.h, open_cache). */
static void set_file_cache(struct sfs_view *v, const struct stat *st, struct fuse_file_info *fi)
{
	enum sfs_cache_use use = sfs_policy_open_cache(v, st);

	fi->keep_cache = v->keep_cache && use == SFS_CACHE_KEEP;
	fi->direct_io = use == SFS_CACHE_NONE && (fi->flags & O_ACCMODE) != O_WRONLY;
}

static int new_file(struct sfs_view *v, struct sfs_node *node, int fd, const struct stat *st,
                    struct fuse_file_info *fi)
{
	struct sfs_file *f = malloc(sizeof(*f));
	int flags = fcntl(fd, F_GETFL);

	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	f->fd = fd;
	f->pinned = pin_node(v, node, fd) ? node : NULL;
	f->direct = flags & O_DIRECT;
	f->needs_twin = (flags & (O_DIRECT | O_APPEND)) && (flags & O_ACCMODE) != O_RDONLY;
	atomic_init(&f->twin, -1);
	atomic_init(&f->atime, first_atime(v, st));
	pthread_mutex_lock(&v->files_lock);
	f->prev = NULL;
	f->next = v->files;
	if (v->files)
		v->files->prev = f;
	v->files = f;
	pthread_mutex_unlock(&v->files_lock);
	fi->fh = (uintptr_t)f;
	set_file_cache(v, st, fi);
	atomic_fetch_add(&v->open_files, 1);
	return 0;
}

/* The end of an open file: released, or its open could not be answered. */
static void drop_file(struct sfs_view *v, struct sfs_file *f)
{
	pthread_mutex_lock(&v->files_lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		v->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	pthread_mutex_unlock(&v->files_lock);
	if (f->pinned)
		sfs_fd_put(&v->d->fdc, f->pinned);
	if (atomic_load(&f->twin) >= 0)
		close(atomic_load(&f->twin));
	close(f->fd);
	free(f);
	atomic_fetch_sub(&v->open_files, 1);
}

void sfs_view_close_files(struct sfs_view *v)
{
	while (v->files)
		drop_file(v, v->files);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct held h = {0};
	struct sfs_charge c = {0};
	struct sfs_req r;
	struct stat st;
	int fd = -1, rc;

	if (fi->flags & O_TRUNC)
		sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = hold(r.view, ino, &h)))
		goto out;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		if ((rc = sfs_policy_modify(r.view)))
			goto out;
	fd = open_node(&r, &h, backing_open_flags(r.view, fi->flags), &st);
	rc = fd < 0 ? fd : new_file(r.view, h.node, fd, &st, fi);
	if (!rc && (fi->flags & O_TRUNC)) {
		sfs_quota_sync(ledger(&r), h.node, NULL, h.fd);
		sfs_coh_data(r.view, h.node, 0, 0);
		sfs_coh_flush(r.view);
	}
out:
	if (c.entered)
		sfs_charge_end(&c);
	unhold(r.view, &h);
	if (rc)
		reply_err(req, rc);
	else if (fuse_reply_open(req, fi) < 0)
		drop_file(r.view, (struct sfs_file *)(uintptr_t)fi->fh);
}

/* A name that appeared between the kernel's lookup and its create: the kernel has checked no
 * permission on what is there now, so it is opened strictly as the caller (never with the
 * noacl view's retry), and only if it is a regular file: opening a FIFO would block the worker
 * for good, a device would bypass the view's nodev. Returns the descriptor or -errno. */
static int open_raced(int dirfd, const char *name, int flags)
{
	int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;
	char path[40];
	struct stat st;

	if (pfd < 0)
		return -errno;
	if ((fd = stat_fd(pfd, &st)) == 0 && !S_ISREG(st.st_mode))
		fd = S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST;
	if (fd == 0) {
		proc_path(path, pfd);
		fd = open(path, flags & ~O_NOFOLLOW);
		fd = fd < 0 ? -errno : fd;
	}
	close(pfd);
	return fd;
}

/* A file made by create is open on the backing's own mount, which updates no atime; where
 * the view's reads through it would (its clone is not noatime), the open file moves to the
 * view's clone. A file created write-only is never read through, and stays. Returns the
 * descriptor to keep (fd is closed if another replaces it). */
static int reopen_in_view(struct sfs_req *r, struct sfs_node *node, int fd, int flags)
{
	int nfd;

	if ((flags & O_ACCMODE) == O_WRONLY ||
	    (sfs_policy_mount_attrs(&r->view->opts) & (MOUNT_ATTR_NOATIME | MOUNT_ATTR_RDONLY)))
		return fd;
	flags = backing_open_flags(r->view, flags) & ~O_TRUNC;
	sfs_priv_begin(SFS_PRIV_SEARCH);
	nfd = sfs_node_open(node, atomic_load(&r->view->open_mnt), flags | O_NOFOLLOW);
	nfd = nfd < 0 ? -errno : nfd;
	sfs_priv_end();
	if (nfd < 0)
		return fd; /* the first descriptor still serves, only without atime */
	close(fd);
	return nfd;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	char buf[NAME_MAX + 1];
	struct sfs_node *node = NULL;
	struct sfs_charge c;
	struct held p = {0};
	struct sfs_req r;
	bool made = true;
	char path[40];
	int fd = -1, rc;
	int flags;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin_dir_change(req, &r, parent, name, true, &p)) ||
	    (rc = charge_new(&r, &c, &p, MAKE_NODE, NULL)))
		goto out;
	flags = backing_open_flags(r.view, fi->flags) | O_NOFOLLOW;
	/* the name, or the member of its class that exists under another spelling */
	name = backing_spelling(&r, &p, name, buf, sizeof(buf));
	sfs_names_lock(r.view->d, p.node);
	fd = BACKING(&r, openat(p.fd, name, flags | O_CREAT | O_EXCL, mode));
	if (fd >= 0)
		sfs_names_added(r.view, p.node, name);
	sfs_names_unlock(r.view->d, p.node);
	if (fd == -EEXIST && !(fi->flags & O_EXCL)) {
		/* made since the kernel's lookup, by another view: open it as open(2) would */
		made = false;
		fd = open_raced(p.fd, name, flags);
	}
	if ((rc = fd < 0 ? fd : 0))
		goto out;
	if (made && (rc = sfs_policy_created(&r, p.fd, name, mode)))
		goto out;
	proc_path(path, fd);
	rc = open(path, O_PATH | O_CLOEXEC);
	rc = rc < 0 ? -errno : entry_from_fd(r.view, p.node, rc, &e);
	node = rc ? NULL : sfs_node_of(r.view, e.ino);
	if (node && made)
		sfs_quota_created(ledger(&r), node, &e.attr, p.node, p.fd);
	else if (node)
		sfs_quota_sync(ledger(&r), node, NULL, fd); /* O_TRUNC */
	sfs_quota_sync(ledger(&r), p.node, NULL, p.fd); /* the directory may have grown */
	sfs_coh_name(r.view, p.node, name);
	sfs_coh_attr(r.view, p.node);
	sfs_coh_flush(r.view);
	if (!rc)
		fd = reopen_in_view(&r, node, fd, fi->flags);
	if (!rc && (rc = new_file(r.view, node, fd, &e.attr, fi)))
		fd = -1;
out:
	sfs_charge_end(&c);
	unhold(r.view, &p);
	if (rc) {
		if (fd >= 0)
			close(fd);
		reply_err(req, rc);
		return;
	}
	if (fuse_reply_create(req, &e, fi) < 0) {
		drop_file(r.view, (struct sfs_file *)(uintptr_t)fi->fh); /* unpins before the forget */
		forget_one(r.view, e.ino);
	}
}

/* The data is read into memory (page-aligned, as an O_DIRECT backing descriptor wants), then
 * the other views are told if the read moved the atime, then the reply goes: after it the file
 * may be released at any moment. (libfuse 3.14 copies through memory here too: the daemon does
 * not ask for FUSE_CAP_SPLICE_WRITE.) */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
	struct sfs_view *v = fuse_req_userdata(req);
	void *buf;
	ssize_t n;

	if (posix_memalign(&buf, 4096, size ? size : 1)) {
		reply_err(req, -ENOMEM);
		return;
	}
	n = pread(f->fd, buf, size, off);
	if (n < 0) {
		reply_err(req, -errno);
	} else {
		atime_moved(v, sfs_node_of(v, ino), f->fd, &f->atime);
		sfs_coh_flush(v);
		fuse_reply_buf(req, buf, n);
	}
	free(buf);
}

/* An O_DIRECT backing file takes only page-aligned memory: the request is gathered into an
 * aligned bounce buffer first (the kernel has checked the caller's own alignment). */
static ssize_t write_direct(int fd, struct fuse_bufvec *in, off_t off)
{
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(size);
	void *buf;
	ssize_t n;

	if (posix_memalign(&buf, 4096, size ? size : 1))
		return -ENOMEM;
	mem.buf[0].mem = buf;
	n = fuse_buf_copy(&mem, in, 0);
	if (n > 0 && (n = pwrite(fd, buf, n, off)) < 0)
		n = -errno;
	free(buf);
	return n;
}

/* The descriptor a write of the kernel's page cache goes to (see struct sfs_file): the
 * file's own, or its twin without O_DIRECT and O_APPEND, reopened from it. The file is open
 * for writing already, so the twin is opened with the DAC capabilities: it may be read-only
 * by its mode by now, as an open file still writes. Returns the fd or -errno. */
static int writeback_fd(struct sfs_file *f, bool writepage)
{
	int fd, none = -1;
	char path[40];

	if (!writepage || !f->needs_twin)
		return f->fd;
	if ((fd = atomic_load(&f->twin)) >= 0)
		return fd;
	proc_path(path, f->fd);
	sfs_priv_begin(SFS_PRIV_DAC);
	fd = open(path, (fcntl(f->fd, F_GETFL) & ~(O_DIRECT | O_APPEND | O_NOFOLLOW)) | O_CLOEXEC);
	fd = fd < 0 ? -errno : fd;
	sfs_priv_end();
	if (fd >= 0 && !atomic_compare_exchange_strong(&f->twin, &none, fd)) {
		close(fd); /* another writer's twin won */
		fd = none;
	}
	return fd;
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                         struct fuse_file_info *fi)
{
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
	struct sfs_node *node;
	struct sfs_charge c;
	struct sfs_req r;
	ssize_t n;
	int rc, fd;

	sfs_charge_begin(req_ledger(req), &c);
	/* as the caller: the backing clears set-id bits on write unless the writer may keep them */
	if ((rc = begin(req, &r)) || !(node = sfs_node_of(r.view, ino)) ||
	    (rc = charge_alloc(&r, &c, node, f->fd, off, size)) ||
	    (rc = fd = writeback_fd(f, fi->writepage)) < 0) {
		sfs_charge_end(&c);
		reply_err(req, rc ? rc : -EINVAL);
		return;
	}
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fd;
	out.buf[0].pos = off;
	n = fd == f->fd && f->direct ? write_direct(fd, in, off) : fuse_buf_copy(&out, in, 0);
	if (n > 0) {
		sfs_quota_sync(ledger(&r), node, NULL, f->fd);
		/* an O_DIRECT write the kernel completes asynchronously (AIO) leaves the writer's
		 * own cached pages of the range as they were: they go now, before the answer */
		if (f->direct && !fi->writepage)
			sfs_coh_own_data(r.view, node, off, n);
		sfs_coh_data(r.view, node, off, n);
		sfs_coh_flush(r.view);
	}
	sfs_charge_end(&c);
	if (n < 0)
		reply_err(req, n);
	else
		fuse_reply_write(req, n);
}

/* No flush: the daemon never takes POSIX locks on backing descriptors (the kernel keeps each
 * view's locks itself) and writes reach the backing before they return, so a flush would have
 * nothing to do. Without the handler the kernel stops sending FLUSH after the first ENOSYS,
 * which saves every close(2) a round trip. */
static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;

	(void)ino;
	drop_file(v, f);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
	int rc = datasync ? fdatasync(f->fd) : fsync(f->fd);
	struct sfs_node *node = sfs_node_of(v, ino);

	rc = rc < 0 ? -errno : 0;
	/* writeback may have allocated extent blocks the last write could not see */
	if (node)
		sfs_quota_sync(&v->d->quota, node, NULL, f->fd);
	reply_err(req, rc);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	enum sfs_cache_use use = SFS_CACHE_KEEP;
	struct sfs_dir *d = NULL;
	struct held h = {0};
	struct sfs_req r;
	struct stat st;
	int fd = -1, rc;

	if ((rc = begin(req, &r)) || (rc = hold(r.view, ino, &h)))
		goto out;
	fd = open_node(&r, &h, O_RDONLY | O_DIRECTORY | O_CLOEXEC, &st);
	if (fd >= 0)
		use = sfs_policy_open_cache(r.view, &st);
	if ((rc = fd < 0 ? fd : 0))
		goto out;
	rc = -ENOMEM;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	d->dp = fdopendir(fd);
	if (!d->dp) {
		rc = -errno;
		goto out;
	}
	d->fd = fd;
	d->node = h.node;
	atomic_init(&d->atime, first_atime(r.view, &st));
	fd = -1;
	rc = 0;
	fi->fh = (uintptr_t)d;
	fi->keep_cache = r.view->keep_cache && use == SFS_CACHE_KEEP;
	/* the kernel keeps the listing while the daemon is the only writer: every change of the
	 * directory's names through any view invalidates it in the others (coherence.c), and
	 * the kernel drops it itself on its own view's changes and when the mtime moves */
	fi->cache_readdir = r.view->keep_cache && use != SFS_CACHE_NONE;
out:
	unhold(r.view, &h);
	if (fd >= 0)
		close(fd);
	if (rc) {
		free(d);
		reply_err(req, rc);
	} else if (fuse_reply_open(req, fi) < 0) {
		closedir(d->dp);
		free(d);
	}
}

/* One directory entry into the reply buffer; with plus, looked up as LOOKUP would (an entry
 * whose lookup fails is still listed, without attributes, as ls expects). Returns the bytes
 * used, or 0 when the buffer is full. */
static size_t add_dirent(struct sfs_req *r, struct sfs_dir *d, bool plus, char *p, size_t rem,
                         off_t nextoff)
{
	struct dirent *de = d->entry;
	struct fuse_entry_param e;
	size_t used;

	memset(&e, 0, sizeof(e));
	e.attr.st_ino = de->d_ino;
	e.attr.st_mode = de->d_type << 12;
	if (!plus)
		return fuse_add_direntry(r->req, p, rem, de->d_name, &e.attr, nextoff);
	if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
	    lookup_for_listing(r, d->node, dirfd(d->dp), de->d_name, &e) < 0) {
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = de->d_ino;
		e.attr.st_mode = de->d_type << 12;
	}
	used = fuse_add_direntry_plus(r->req, p, rem, de->d_name, &e, nextoff);
	if (used > rem && e.ino)
		forget_one(r->view, e.ino);
	return used;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                       struct fuse_file_info *fi, bool plus)
{
	struct sfs_dir *d = (struct sfs_dir *)(uintptr_t)fi->fh;
	struct sfs_node *dir;
	char *buf = NULL, *p;
	struct sfs_req r;
	size_t rem;
	int rc;

	if ((rc = begin(req, &r)))
		goto out;
	rc = -EINVAL;
	if (!(dir = sfs_node_of(r.view, ino)))
		goto out;
	rc = -ENOMEM;
	if (!(buf = malloc(size)))
		goto out;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	rc = 0;
	for (p = buf, rem = size;;) {
		off_t nextoff;
		size_t used;
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				rc = errno ? -errno : 0;
				break;
			}
		}
		nextoff = d->entry->d_off;
		if (sfs_policy_dirent_visible(r.view, dir, d->entry->d_name)) {
			used = add_dirent(&r, d, plus, p, rem, nextoff);
			if (used > rem)
				break;
			p += used;
			rem -= used;
		}
		d->entry = NULL;
		d->offset = nextoff;
	}
	/* an error after some entries is reported on the next call, as getdents does */
	if (rc && rem < size)
		rc = 0;
	atime_moved(r.view, dir, d->fd, &d->atime);
	sfs_coh_flush(r.view);
out:
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_dir *d = (struct sfs_dir *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct sfs_dir *d = (struct sfs_dir *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dp);

	(void)ino;
	reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;
	struct held h = {0};
	struct sfs_req r;
	int rc;

	if (!(rc = begin(req, &r)) && !(rc = hold(r.view, ino, &h)))
		rc = fstatvfs(h.fd, &st) < 0 ? -errno : 0;
	unhold(r.view, &h);
	if (rc) {
		reply_err(req, rc);
		return;
	}
	sfs_policy_statfs(&r, &st);
	fuse_reply_statfs(req, &st);
}

/* xattrs go through the magic link, which lands on the node without opening it, so they work
 * for every file type and need no read permission, as the xattr syscalls on a path. */
static bool valid_xattr_name(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= XATTR_NAME_MAX;
}

/* Whether an xattr lands in the inode or needs a block of its own is ext4's to know: in a
 * view that enforces limits the change is made, the limits checked, and undone if passed. */
static int set_xattr_within(struct sfs_req *r, struct sfs_charge *c, struct held *h,
                            const char *path, const char *name, const char *value, size_t size,
                            int flags)
{
	ssize_t oldlen = -1;
	char *old = NULL;
	int rc;

	if (sfs_opts_enforce_quota(&r->view->opts)) {
		oldlen = BACKING(r, getxattr(path, name, NULL, 0));
		if (oldlen >= 0 && (old = malloc(oldlen ? oldlen : 1)))
			oldlen = BACKING(r, getxattr(path, name, old, oldlen));
		else
			oldlen = -1;
	}
	rc = BACKING(r, setxattr(path, name, value, size, flags));
	sfs_quota_sync(ledger(r), h->node, NULL, h->fd);
	if (!rc && sfs_opts_enforce_quota(&r->view->opts)) {
		c->id[SFS_QUSR] = h->node->q.uid;
		c->id[SFS_QGRP] = h->node->q.gid;
		if (sfs_policy_within(r, c)) {
			if (oldlen >= 0)
				BACKING(r, setxattr(path, name, old, oldlen, 0));
			else
				BACKING(r, removexattr(path, name));
			sfs_quota_sync(ledger(r), h->node, NULL, h->fd);
			rc = -EDQUOT;
		}
	}
	free(old);
	return rc;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	struct held h = {0};
	struct sfs_charge c;
	struct sfs_req r;
	char path[40];
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)))
		goto out;
	rc = -EINVAL;
	if (!valid_xattr_name(name) || size > XATTR_SIZE_MAX)
		goto out;
	if ((rc = sfs_policy_xattr_gate(&r, name, SFS_XATTR_SET)) || (rc = hold(r.view, ino, &h)))
		goto out;
	proc_path(path, h.fd);
	rc = set_xattr_within(&r, &c, &h, path, name, value, size, flags);
	sfs_coh_attr(r.view, h.node);
	sfs_coh_flush(r.view);
out:
	sfs_charge_end(&c);
	unhold(r.view, &h);
	reply_err(req, rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct held h = {0};
	struct sfs_req r;
	char *buf = NULL;
	char path[40];
	ssize_t n = 0;
	int rc;

	if ((rc = begin(req, &r)))
		goto out;
	rc = -EINVAL;
	if (!valid_xattr_name(name))
		goto out;
	if ((rc = sfs_policy_xattr_gate(&r, name, SFS_XATTR_GET)) || (rc = hold(r.view, ino, &h)))
		goto out;
	if (size > XATTR_SIZE_MAX)
		size = XATTR_SIZE_MAX;
	rc = -ENOMEM;
	if (size && !(buf = malloc(size)))
		goto out;
	proc_path(path, h.fd);
	n = BACKING(&r, getxattr(path, name, buf, size));
	rc = n < 0 ? n : 0;
out:
	unhold(r.view, &h);
	if (rc)
		reply_err(req, rc);
	else if (size)
		fuse_reply_buf(req, buf, n);
	else
		fuse_reply_xattr(req, n);
	free(buf);
}

/* Keeps the names this view shows to this caller; returns the new length. */
static size_t filter_xattr_list(struct sfs_req *r, char *list, size_t len)
{
	size_t out = 0;

	for (size_t off = 0; off < len;) {
		size_t n = strnlen(list + off, len - off);
		if (sfs_policy_xattr_visible(r, list + off)) {
			memmove(list + out, list + off, n);
			out += n;
			list[out++] = '\0';
		}
		off += n + 1;
	}
	return out;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct held h = {0};
	struct sfs_req r;
	char *buf = NULL;
	char path[40];
	ssize_t n = 0;
	int rc;

	if ((rc = begin(req, &r)) || (rc = hold(r.view, ino, &h)))
		goto out;
	proc_path(path, h.fd);
	/* filtered, so the list is always read whole: size 0 must report the filtered length */
	n = listxattr(path, NULL, 0);
	rc = -ENOMEM;
	if (n >= 0 && !(buf = malloc(n + 1)))
		goto out;
	if (n >= 0)
		n = listxattr(path, buf, n);
	rc = n < 0 ? -errno : 0;
	if (rc)
		goto out;
	n = filter_xattr_list(&r, buf, n);
	if (size && (size_t)n > size)
		rc = -ERANGE;
out:
	unhold(r.view, &h);
	if (rc)
		reply_err(req, rc);
	else if (size)
		fuse_reply_buf(req, buf, n);
	else
		fuse_reply_xattr(req, n);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct held h = {0};
	struct sfs_charge c;
	struct sfs_req r;
	char path[40];
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)))
		goto out;
	rc = -EINVAL;
	if (!valid_xattr_name(name))
		goto out;
	if ((rc = sfs_policy_xattr_gate(&r, name, SFS_XATTR_REMOVE)) || (rc = hold(r.view, ino, &h)))
		goto out;
	proc_path(path, h.fd);
	rc = BACKING(&r, removexattr(path, name));
	sfs_quota_sync(ledger(&r), h.node, NULL, h.fd);
	sfs_coh_attr(r.view, h.node);
	sfs_coh_flush(r.view);
out:
	sfs_charge_end(&c);
	unhold(r.view, &h);
	reply_err(req, rc);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
	struct sfs_node *n = NULL;
	struct sfs_charge c;
	struct sfs_req r;
	int rc;

	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)))
		goto out;
	if (!(n = sfs_node_of(r.view, ino))) {
		rc = -EINVAL;
		goto out;
	}
	/* punching and collapsing free blocks; every other mode may allocate the range */
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)) &&
	    (rc = charge_alloc(&r, &c, n, f->fd, off, len)))
		goto out;
	rc = fallocate(f->fd, mode, off, len) < 0 ? -errno : 0;
	sfs_quota_sync(ledger(&r), n, NULL, f->fd);
	if (!rc) {
		sfs_coh_data(r.view, n, off, len);
		sfs_coh_flush(r.view);
	}
out:
	sfs_charge_end(&c);
	reply_err(req, rc);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
	struct sfs_file *f = (struct sfs_file *)(uintptr_t)fi->fh;
	off_t res = lseek(f->fd, off, whence);

	(void)ino;
	if (res < 0)
		reply_err(req, -errno);
	else
		fuse_reply_lseek(req, res);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                               struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                               struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct sfs_file *in = (struct sfs_file *)(uintptr_t)fi_in->fh;
	struct sfs_file *out = (struct sfs_file *)(uintptr_t)fi_out->fh;
	off_t start = off_out;
	struct sfs_node *node;
	struct sfs_charge c;
	struct sfs_req r;
	ssize_t n;
	int rc;

	(void)ino_in;
	sfs_charge_begin(req_ledger(req), &c);
	if ((rc = begin(req, &r)) || (rc = sfs_policy_modify(r.view)) ||
	    (rc = (node = sfs_node_of(r.view, ino_out)) ? 0 : -EINVAL) ||
	    (rc = charge_alloc(&r, &c, node, out->fd, off_out, len))) {
		sfs_charge_end(&c);
		reply_err(req, rc);
		return;
	}
	n = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, flags);
	rc = n < 0 ? -errno : 0;
	if (n > 0) {
		sfs_quota_sync(ledger(&r), node, NULL, out->fd);
		sfs_coh_data(r.view, node, start, n);
		sfs_coh_flush(r.view);
	}
	sfs_charge_end(&c);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_write(req, n);
}

/* FS_IOC_GETFLAGS only (lsattr; Wine's casefold probe): the backing's flags plus what the
 * view adds (FS_CASEFOLD_FL on a casefold view's directories). ext4 answers an int. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                     size_t in_bufsz, size_t out_bufsz)
{
	struct sfs_view *v = fuse_req_userdata(req);
	struct sfs_node *n = sfs_node_of(v, ino);
	int fd, attr = 0;

	(void)arg, (void)in_buf, (void)in_bufsz;
	if (cmd != FS_IOC_GETFLAGS || !n || (flags & FUSE_IOCTL_COMPAT)) {
		reply_err(req, -ENOTTY);
		return;
	}
	if (out_bufsz < sizeof(attr)) {
		reply_err(req, -EINVAL);
		return;
	}
	fd = flags & FUSE_IOCTL_DIR ? dirfd(((struct sfs_dir *)(uintptr_t)fi->fh)->dp)
	                            : ((struct sfs_file *)(uintptr_t)fi->fh)->fd;
	if (ioctl(fd, FS_IOC_GETFLAGS, &attr) < 0) {
		reply_err(req, -errno);
		return;
	}
	attr |= sfs_policy_inode_flags(v, n->type);
	fuse_reply_ioctl(req, 0, &attr, sizeof(attr));
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfs_view *v = userdata;

	/* 1 MiB is the most libfuse 3.14 can take: above it the session dies (kernel-facts §4.1) */
	conn->max_write = 1u << 20;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	if (v->opts.cache == SFS_CACHE_WRITEBACK && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
	sfs_policy_init(v, conn);
}

const struct fuse_lowlevel_ops sfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
	.ioctl = op_ioctl,
};
