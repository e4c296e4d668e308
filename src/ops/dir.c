/* Names (see ops.h): lookup and forget, making, removing, renaming and linking entries, and
 * reading symlinks. Every change of a directory's entries happens under that directory's
 * change lock and is noted (names.c), then told to the other views. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "coherence.h"
#include "creds.h"
#include "services.h"
#include "view.h"
#include "fdcache.h"
#include "names.h"

static void fill_entry(struct sfs_view *v, struct sfs_node *n, const struct stat *st,
                       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = sfs_ino_of(v, n);
	e->generation = n == v->root ? 0 : n->id >> 32; /* the kernel puts it in its file handles */
	e->attr = *st;
	e->attr_timeout = attr_timeout_of(v, n);
	e->entry_timeout = v->entry_timeout;
}

/* The entry of the object with stat st, open as fd (taken; -1 for none) or known by *id. */
static int enter(struct sfs_view *v, struct sfs_node *parent, int fd, const uint64_t *id,
                 const struct stat *st, struct fuse_entry_param *e)
{
	struct sfs_node *n;
	int rc;

	if (st->st_dev != v->svc->backing->fs_dev) {
		if (fd >= 0)
			close(fd); /* nothing is mounted inside a detached backing; refuse if it were */
		return -EXDEV;
	}
	rc = id ? sfs_itab_get_id(&v->svc->itab, *id, st, v->slot, &n)
	        : sfs_itab_get(&v->svc->itab, &v->svc->fdc, fd, st, v->slot, &n);
	if (rc)
		return rc;
	sfs_quota_placed(n, parent);
	fill_entry(v, n, st, e);
	return 0;
}

int entry_from_fd(struct sfs_view *v, struct sfs_node *parent, int fd, struct fuse_entry_param *e)
{
	struct stat st;
	int rc = stat_fd(fd, &st);

	if (rc) {
		close(fd);
		return rc;
	}
	return enter(v, parent, fd, NULL, &st, e);
}

/* The handle of name in dirfd, then its attributes; -1 with errno set on failure. Read in
 * this order, a name replaced between the two gives the attributes of the object the name
 * holds now beside the id of one that is gone, which the backing then refuses (ESTALE): no
 * object is ever served with another's attributes. */
static int id_and_stat_at(int dirfd, const char *name, uint64_t *id, struct stat *st)
{
	int rc = sfs_node_id_at(dirfd, name, 0, id);

	if (rc) {
		errno = -rc;
		return -1;
	}
	return fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
}

int entry_by_name(struct sfs_req *r, struct sfs_node *dir, int dirfd, const char *name,
                  bool dac_retry, struct fuse_entry_param *e)
{
	struct stat st;
	uint64_t id;
	int rc = dac_retry ? BACKING(r, id_and_stat_at(dirfd, name, &id, &st))
	                   : (id_and_stat_at(dirfd, name, &id, &st) < 0 ? -errno : 0);

	if (rc < 0)
		return rc;
	if (sfs_node_id_ino(id) == (uint32_t)st.st_ino)
		return enter(r->view, dir, -1, &id, &st, e);
	/* replaced between the two calls: what is there now, held open while it is read */
	rc = dac_retry ? BACKING(r, openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC))
	               : (openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
	if (rc < 0)
		return dac_retry ? rc : -errno;
	return entry_from_fd(r->view, dir, rc, e);
}

/* A lookup opens nothing: a node's descriptor is opened by handle when a request first needs
 * it (fdcache.h), and a stat, ls -l or find never does. */
static int lookup_at(struct req *q, struct sfs_node *dir, int dirfd, const char *name,
                     struct fuse_entry_param *e)
{
	return entry_by_name(&q->r, dir, dirfd, name, true, e);
}

/* The backing's spelling of name in p (a casefold view whose directory index is warm knows
 * it, or that there is none, without asking the backing for the exact one first), entered.
 * *exact says whether it was name itself. */
static int lookup_spelling(struct req *q, struct held *p, const char *name,
                           struct fuse_entry_param *e, bool *exact)
{
	char alias[NAME_MAX + 1];
	int rc;

	*exact = true;
	rc = sfs_policy_peek(q->r.view, p->node, name, alias, sizeof(alias), exact);
	if (rc == 0)
		return lookup_at(q, p->node, p->fd, *exact ? name : alias, e);
	if (rc == -ENOENT)
		return rc;
	*exact = true;
	rc = lookup_at(q, p->node, p->fd, name, e);
	if (rc == -ENOENT) {
		*exact = false;
		if (sfs_policy_resolve(q->r.view, p->node, p->fd, name, alias, sizeof(alias)) == 0)
			rc = lookup_at(q, p->node, p->fd, alias, e);
	}
	return rc;
}

/* A descriptor of what "." or ".." of node id ino is, or -errno. */
static int open_export(struct req *q, fuse_ino_t ino, bool dot)
{
	struct sfs_view *v = q->r.view;
	struct sfs_node *n = sfs_node_of(v, ino);
	int nfd, fd;

	if (!n) /* a node the daemon forgot: its id is its file handle (inode.h) */
		return dot ? sfs_fd_open_id(&v->svc->fdc, ino) : -ESTALE;
	if ((nfd = sfs_fd_get(&v->svc->fdc, n)) < 0)
		return nfd;
	if (dot || n == v->root) { /* and ".." of the root is the root, as in the VFS */
		fd = fcntl(nfd, F_DUPFD_CLOEXEC, 0);
		fd = fd < 0 ? -errno : fd;
	} else
		fd = BACKING(&q->r, openat(nfd, "..", O_PATH | O_NOFOLLOW | O_CLOEXEC));
	sfs_fd_put(&v->svc->fdc, n);
	return fd;
}

/* LOOKUP of "." and "..", which only the kernel's export operations send: "." when it decodes
 * a file handle whose inode it has dropped, ".." when it connects a decoded directory to its
 * parent. What a handle may reach is the view's policy (confine: not outside a subdir view's
 * tree, never the admin state). */
static int lookup_export(struct req *q, fuse_ino_t ino, const char *name, struct fuse_entry_param *e)
{
	struct sfs_view *v = q->r.view;
	bool dot = strcmp(name, ".") == 0;
	struct stat st;
	int fd = open_export(q, ino, dot), rc;

	if (fd < 0)
		return fd == -ENOENT ? -ESTALE : fd;
	if ((rc = stat_fd(fd, &st))) {
		close(fd);
		return rc;
	}
	if ((rc = sfs_policy_reach(v, fd, &st))) {
		close(fd);
		return rc;
	}
	if ((rc = enter(v, NULL, fd, NULL, &st, e)))
		return rc;
	if (dot && e->ino != ino) { /* another object under that number now */
		forget_one(v, e->ino);
		return -ESTALE;
	}
	return 0;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	bool tracked = false, exact;
	struct held *p;
	struct req q;
	int rc;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		if (!(rc = req_begin(&q, req)))
			rc = lookup_export(&q, parent, name, &e);
		req_reply_entry(&q, rc, &e);
		return;
	}
	if (!(rc = req_begin(&q, req)) && !(rc = valid_name(name) ? 0 : -ENOENT) &&
	    !(rc = req_hold(&q, parent, &p)) &&
	    !(rc = sfs_policy_name(q.r.view, p->node, name, false))) {
		rc = lookup_spelling(&q, p, name, &e, &exact);
		/* another spelling of the name (casefold views): the kernel may keep this
		 * spelling's dentry, positive or negative, only while names.c tracks it for
		 * invalidation */
		if (rc == -ENOENT || (rc == 0 && !exact)) {
			tracked = sfs_names_track_spelling(q.r.view, p->node, name);
			if (rc == 0 && !tracked)
				e.entry_timeout = 0;
		}
	}
	if (rc == -ENOENT) {
		/* a negative entry the kernel may cache: a create in another view invalidates it */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = tracked ? q.r.view->entry_timeout : q.r.view->negative_timeout;
		rc = 0;
	}
	req_reply_entry(&q, rc, &e);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct req q;
	struct sfs_view *v;

	req_start(&q, req);
	v = q.r.view;
	if (ino != FUSE_ROOT_ID)
		sfs_itab_forget_id(&v->svc->itab, &v->svc->fdc, ino, v->slot, nlookup);
	req_reply_none(&q);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct req q;
	struct sfs_view *v;

	req_start(&q, req);
	v = q.r.view;
	for (size_t i = 0; i < count; i++)
		if (forgets[i].ino != FUSE_ROOT_ID)
			sfs_itab_forget_id(&v->svc->itab, &v->svc->fdc, forgets[i].ino, v->slot,
			                   forgets[i].nlookup);
	req_reply_none(&q);
}

/* Through the view's clone of the backing: reading a symlink touches its atime by the view's
 * rule (the node's own descriptor, held meanwhile so that the inode stays, is on the
 * backing's noatime mount). */
static ssize_t read_link(struct sfs_view *v, struct held *h, char *buf, size_t len)
{
	struct stat st;
	atomic_llong seen;
	ssize_t n;
	int fd;

	sfs_priv_begin(SFS_PRIV_SEARCH);
	fd = sfs_node_open(h->node, v->clone.fd, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	n = fd < 0 ? -errno : 0;
	sfs_priv_end();
	if (n)
		return n;
	atomic_init(&seen, stat_fd(fd, &st) ? NO_ATIME : first_atime(v, &st));
	n = readlinkat(fd, "", buf, len);
	n = n < 0 ? -errno : n >= (ssize_t)len ? -ENAMETOOLONG : n;
	atime_moved(v, h->node, fd, &seen);
	close(fd);
	return n;
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	struct held *h;
	struct req q;
	ssize_t n;

	req_start(&q, req);
	if ((n = req_hold(&q, ino, &h)) == 0 && (n = read_link(q.r.view, h, buf, sizeof(buf))) >= 0)
		buf[n] = '\0';
	req_reply_readlink(&q, n < 0 ? n : 0, buf);
}

int begin_dir_change(struct req *q, fuse_req_t req, fuse_ino_t parent, const char *name,
                     bool create, struct held **p)
{
	int rc;

	if ((rc = req_begin_change(q, req)))
		return rc;
	if (!valid_name(name))
		return create ? -EINVAL : -ENOENT;
	if ((rc = req_hold(q, parent, p)) || (rc = req_refuse_unmapped(q, *p, -EACCES)))
		return rc;
	return sfs_policy_name(q->r.view, (*p)->node, name, create);
}

/* A new object costs an inode, charged to the caller and to the group it will get (the
 * directory's, under a set-group-ID directory), and the blocks ext4 gives it at birth: one
 * for a directory and for a symlink too long to live in the inode. */
int reserve_new(struct req *q, struct held *p, enum make_kind kind, const char *target)
{
	int64_t bytes = 0;
	gid_t gid = sfs_creds_gid(); /* on disk: an idmapped view's header may hold others */
	struct stat st;
	int rc;

	if ((rc = req_room_above_reserve(q)) || !q->r.view->prof->limits)
		return rc;
	if (stat_fd(p->fd, &st) == 0 && (st.st_mode & S_ISGID))
		gid = st.st_gid;
	if (kind == MAKE_DIR || (kind == MAKE_SYMLINK && strlen(target) >= 60))
		bytes = req_ledger(q)->bsize;
	return req_reserve(q, sfs_creds_uid(), gid, bytes, 1);
}

static int make_at(struct req *q, struct held *p, const char *name, enum make_kind kind,
                   mode_t mode, dev_t rdev, const char *target)
{
	sfs_creds_umask(q->r.ctx->umask);
	switch (kind) {
	case MAKE_DIR:
		return BACKING(&q->r, mkdirat(p->fd, name, mode));
	case MAKE_SYMLINK:
		return BACKING(&q->r, symlinkat(target, p->fd, name));
	default:
		return BACKING(&q->r, mknodat(p->fd, name, mode, rdev));
	}
}

static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name, enum make_kind kind,
                       mode_t mode, dev_t rdev, const char *target)
{
	struct fuse_entry_param e;
	struct change c = {.kind = CHANGE_MAKE, .asked = name};
	struct req q;
	int rc;

	if ((rc = begin_dir_change(&q, req, parent, name, true, &c.dir)) ||
	    (rc = reserve_new(&q, c.dir, kind, target)))
		goto out;
	if (change_begin(&q, &c, &rc))
		rc = make_at(&q, c.dir, c.name, kind, mode, rdev, target);
	change_done(&q, &c, rc);
	if (!rc)
		rc = change_entry(&q, &c, -1, mode, &e);
out:
	req_reply_entry(&q, rc, &e);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make_entry(req, parent, name, MAKE_NODE, mode, rdev, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_entry(req, parent, name, MAKE_DIR, mode | S_IFDIR, 0, NULL);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_entry(req, parent, name, MAKE_SYMLINK, S_IFLNK | 0777, 0, link);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct change c = {.kind = CHANGE_REMOVE, .asked = name};
	struct req q;
	int rc;

	if ((rc = begin_dir_change(&q, req, parent, name, false, &c.dir)))
		goto out;
	if (change_begin(&q, &c, &rc))
		rc = BACKING(&q.r, unlinkat(c.dir->fd, c.name, flags));
	change_done(&q, &c, rc);
out:
	req_reply_err(&q, rc);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, AT_REMOVEDIR);
}

/* What the kernel checked before a rename on a noacl view, by mode bits, redone on the
 * objects under the names now: the kernel saw them through its caches, and another view may
 * have put something else there since. */
static bool rename_allowed_by_modes(const struct change *c)
{
	struct stat ps, nps;

	if (fstat(c->dir->fd, &ps) < 0 || fstat(c->dir2->fd, &nps) < 0)
		return false;
	if (!sfs_mode_allows(&ps, W_OK | X_OK) || !sfs_mode_allows(&nps, W_OK | X_OK))
		return false;
	if (c->dir->node == c->dir2->node)
		return true;
	/* a directory changing parent has its ".." rewritten */
	if (S_ISDIR(c->obj.st.st_mode) && !sfs_mode_allows(&c->obj.st, W_OK))
		return false;
	return !(c->flags & RENAME_EXCHANGE) || !S_ISDIR(c->obj2.st.st_mode) ||
	       sfs_mode_allows(&c->obj2.st, W_OK);
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
static int rename_as_caller(struct req *q, const struct change *c)
{
	int from = c->dir->fd, to = c->dir2->fd;
	int rc = renameat2(from, c->name, to, c->name2, c->flags) < 0 ? -errno : 0;
	bool same;

	if (rc != -EACCES || !sfs_policy_dac_retry(q->r.view) || !c->obj.st.st_mode ||
	    !rename_allowed_by_modes(c))
		return rc;
	sfs_priv_begin(SFS_PRIV_DAC);
	rc = renameat2(from, c->name, to, c->name2, c->flags) < 0 ? -errno : 0;
	same = rc || (same_object_at(to, c->name2, &c->obj.st) &&
	              (!(c->flags & RENAME_EXCHANGE) || !c->obj2.st.st_mode ||
	               same_object_at(from, c->name, &c->obj2.st)));
	if (!same) {
		unsigned int back = c->flags & RENAME_EXCHANGE ? RENAME_EXCHANGE : RENAME_NOREPLACE;
		if (renameat2(to, c->name2, from, c->name, back) < 0)
			syslog(LOG_WARNING, "%s: a rename raced with another view and could not be "
			       "undone: %m", q->r.view->mountpoint);
		rc = -EACCES;
	}
	sfs_priv_end();
	return rc;
}

/* The prologue of a rename: both parents held, both names allowed, and nothing moving across
 * the edge of a view tree whose usage is kept apart. */
static int begin_rename(struct req *q, fuse_req_t req, fuse_ino_t parent, const char *name,
                        fuse_ino_t newparent, const char *newname, struct held **p,
                        struct held **np)
{
	int rc;

	if ((rc = req_begin_change(q, req)))
		return rc;
	if (!valid_name(name) || !valid_name(newname))
		return -EINVAL;
	if ((rc = req_hold(q, parent, p)) || (rc = req_hold(q, newparent, np)) ||
	    (rc = req_refuse_unmapped(q, *p, -EACCES)) || (rc = req_refuse_unmapped(q, *np, -EACCES)) ||
	    (rc = sfs_policy_name(q->r.view, (*p)->node, name, false)) ||
	    (rc = sfs_policy_name(q->r.view, (*np)->node, newname, true)))
		return rc;
	if ((rc = req_room_above_reserve(q)))
		return rc;
	return sfs_quota_may_move(req_ledger(q), (*p)->node, (*p)->fd, (*np)->node, (*np)->fd);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
	struct change c = {.kind = CHANGE_RENAME, .flags = flags, .asked = name, .asked2 = newname};
	struct req q;
	int rc;

	if ((rc = begin_rename(&q, req, parent, name, newparent, newname, &c.dir, &c.dir2)))
		goto out;
	/* the source in the backing's spelling; a target whose class has a member under another
	 * spelling replaces that member, as on casefold ext4 */
	if (change_begin(&q, &c, &rc))
		rc = rename_as_caller(&q, &c);
	change_done(&q, &c, rc);
out:
	req_reply_err(&q, rc);
}

/* A name for an existing object, an O_TMPFILE file's first one included (the ledger has
 * counted it since its birth, as ext4 does). */
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	struct change c = {.kind = CHANGE_LINK, .asked = newname};
	struct req q;
	char path[40];
	int rc;

	if ((rc = req_begin_change(&q, req)))
		goto out;
	rc = -EINVAL;
	if (!valid_name(newname))
		goto out;
	if ((rc = req_hold(&q, ino, &c.linked)) || (rc = req_hold(&q, newparent, &c.dir)) ||
	    (rc = req_refuse_unmapped(&q, c.linked, -EOVERFLOW)) ||
	    (rc = req_refuse_unmapped(&q, c.dir, -EACCES)) ||
	    (rc = sfs_policy_name(q.r.view, c.dir->node, newname, true)) ||
	    (rc = req_room_above_reserve(&q)) ||
	    (rc = sfs_quota_may_move(req_ledger(&q), c.linked->node, c.linked->fd, c.dir->node,
	                             c.dir->fd)))
		goto out;
	fd_path(path, c.linked->fd);
	/* The magic link lands on the node itself, symlinks included, and never follows on. */
	if (change_begin(&q, &c, &rc))
		rc = BACKING(&q.r, linkat(AT_FDCWD, path, c.dir->fd, c.name, AT_SYMLINK_FOLLOW));
	change_done(&q, &c, rc);
	if (!rc)
		rc = change_entry(&q, &c, -1, 0, &e);
out:
	req_reply_entry(&q, rc, &e);
}
