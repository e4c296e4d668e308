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

/* entry_from_fd for a descriptor already stat'ed; takes ownership of fd. */
static int entry_from_stat(struct sfs_view *v, struct sfs_node *parent, int fd,
                           const struct stat *st, struct fuse_entry_param *e)
{
	struct sfs_node *n;
	int rc;

	if (st->st_dev != v->svc->backing->fs_dev) {
		close(fd); /* nothing is mounted inside a detached backing; refuse if it were */
		return -EXDEV;
	}
	rc = sfs_itab_get(&v->svc->itab, &v->svc->fdc, fd, st, v->slot, &n);
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
	return entry_from_stat(v, parent, fd, &st, e);
}

static int lookup_at(struct req *q, struct sfs_node *dir, int dirfd, const char *name,
                     struct fuse_entry_param *e)
{
	int fd = BACKING(&q->r, openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));

	if (fd < 0)
		return fd;
	return entry_from_fd(q->r.view, dir, fd, e);
}

void dir_lock(struct sfs_view *v, const struct sfs_node *dir)
{
	sfs_dirlock_lock(&v->svc->dirlock, dir->dev, dir->ino);
}

void dir_unlock(struct sfs_view *v, const struct sfs_node *dir)
{
	sfs_dirlock_unlock(&v->svc->dirlock, dir->dev, dir->ino);
}

void dir_lock2(struct sfs_view *v, const struct sfs_node *a, const struct sfs_node *b)
{
	sfs_dirlock_lock2(&v->svc->dirlock, a->dev, a->ino, b->dev, b->ino);
}

void dir_unlock2(struct sfs_view *v, const struct sfs_node *a, const struct sfs_node *b)
{
	sfs_dirlock_unlock2(&v->svc->dirlock, a->dev, a->ino, b->dev, b->ino);
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
	if ((rc = entry_from_stat(v, NULL, fd, &st, e)))
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

/* The common tail of every call that makes a name: policies, the new node, the other
 * views told. */
static int finish_create(struct req *q, struct held *p, const char *name, mode_t mode,
                         struct fuse_entry_param *e)
{
	int rc = sfs_policy_created(&q->r, p->fd, name, mode);

	if (!rc)
		rc = lookup_at(q, p->node, p->fd, name, e);
	/* a change a predecessor made was counted by the successor's scan */
	if (!rc && !q->replayed)
		sfs_quota_created(req_ledger(q), sfs_node_of(q->r.view, e->ino), &e->attr, p->node,
		                  p->fd);
	sfs_quota_sync(req_ledger(q), p->node, NULL, p->fd); /* the directory may have grown */
	sfs_coh_name(q->r.view, p->node, name);
	sfs_coh_attr(q->r.view, p->node);
	return rc;
}

int begin_dir_change(struct req *q, fuse_req_t req, fuse_ino_t parent, const char *name,
                     bool create, struct held **p)
{
	int rc;

	if ((rc = req_begin_change(q, req)))
		return rc;
	if (!valid_name(name))
		return create ? -EINVAL : -ENOENT;
	if ((rc = req_hold(q, parent, p)))
		return rc;
	return sfs_policy_name(q->r.view, (*p)->node, name, create);
}

/* The backing's spelling of a name the kernel sent: in casefold views the caller may have
 * used another one (the kernel keeps the dentry it looked up). Returns name or buf. */
const char *backing_spelling(struct req *q, struct held *p, const char *name, char *buf,
                             size_t len)
{
	return sfs_policy_resolve(q->r.view, p->node, p->fd, name, buf, len) == 0 ? buf : name;
}

/* A new name must not join a class that already has a member under another spelling. */
static int check_new_name(struct req *q, struct held *p, const char *name)
{
	char other[NAME_MAX + 1];

	if (sfs_policy_resolve(q->r.view, p->node, p->fd, name, other, sizeof(other)) == 0 &&
	    strcmp(other, name))
		return -EEXIST;
	return 0;
}

/* A new object costs an inode, charged to the caller and to the group it will get (the
 * directory's, under a set-group-ID directory), and the blocks ext4 gives it at birth: one
 * for a directory and for a symlink too long to live in the inode. */
int reserve_new(struct req *q, struct held *p, enum make_kind kind, const char *target)
{
	int64_t bytes = 0;
	gid_t gid = q->r.ctx->gid;
	struct stat st;

	if (!q->r.view->prof->limits)
		return 0;
	if (stat_fd(p->fd, &st) == 0 && (st.st_mode & S_ISGID))
		gid = st.st_gid;
	if (kind == MAKE_DIR || (kind == MAKE_SYMLINK && strlen(target) >= 60))
		bytes = req_ledger(q)->bsize;
	return req_reserve(q, q->r.ctx->uid, gid, bytes, 1);
}

static int make_at(struct req *q, struct held *p, const char *name, enum make_kind kind,
                   mode_t mode, dev_t rdev, const char *target)
{
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
	struct sfs_view *v;
	struct fuse_entry_param e;
	struct held *p;
	struct req q;
	int rc;

	if ((rc = begin_dir_change(&q, req, parent, name, true, &p)) ||
	    (rc = check_new_name(&q, p, name)) || (rc = reserve_new(&q, p, kind, target)))
		goto out;
	v = q.r.view;
	dir_lock(v, p->node);
	if (!intent_start(&q, SFS_HO_MAKE, p, name, NULL, NULL, 0, 0, &rc)) {
		rc = make_at(&q, p, name, kind, mode, rdev, target);
		intent_done(&q, rc);
		if (!rc)
			sfs_names_added(v, p->node, name);
	}
	dir_unlock(v, p->node);
	if (!rc)
		rc = finish_create(&q, p, name, mode, &e);
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
	vi->node = sfs_itab_find(&v->svc->itab, vi->st.st_dev, vi->st.st_ino);
	sfs_quota_node_init(&vi->was, &vi->st);
	vi->was.rmask = sfs_quota_mask(&v->svc->quota, dir->node, dirfd);
}

/* After the change: the victim's node if its last link went with it (the other views are then
 * told it is deleted, coherence.h), else NULL. Before victim_close. */
static struct sfs_node *victim_gone(const struct victim *vi)
{
	struct stat st;

	return vi->fd >= 0 && vi->node && fstat(vi->fd, &st) == 0 && st.st_nlink == 0 ? vi->node
	                                                                               : NULL;
}

/* After the change (done or not): the ledger follows, the descriptor goes. */
static void victim_close(struct sfs_view *v, struct victim *vi)
{
	if (vi->fd < 0)
		return;
	sfs_quota_sync(&v->svc->quota, vi->node, &vi->was, vi->fd);
	close(vi->fd);
	vi->fd = -1;
}

/* After a change made under another spelling than the backing's, the caller's own view may
 * still hold the backing spelling's dentry; it is dropped from another thread, as a handler
 * must not invalidate entries of its own directory. */
static void drop_own_spelling(struct req *q, struct held *p, const char *asked,
                              const char *actual)
{
	if (asked != actual)
		sfs_coh_own_entry(q->r.view, p->node, actual);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct victim vi = {.fd = -1};
	char buf[NAME_MAX + 1];
	struct sfs_node *gone;
	const char *actual;
	struct sfs_view *v;
	struct held *p;
	struct req q;
	int rc;

	if ((rc = begin_dir_change(&q, req, parent, name, false, &p)))
		goto out;
	v = q.r.view;
	actual = backing_spelling(&q, p, name, buf, sizeof(buf));
	dir_lock(v, p->node);
	victim_open(v, p, actual, &vi);
	if (!intent_start(&q, SFS_HO_REMOVE, p, actual, NULL, NULL, vi.st.st_mode ? vi.st.st_ino : 0,
	                  0, &rc)) {
		rc = BACKING(&q.r, unlinkat(p->fd, actual, flags));
		intent_done(&q, rc);
		if (!rc) {
			sfs_names_removed(v, p->node, actual);
			if (S_ISDIR(vi.st.st_mode))
				sfs_names_dir_gone(v->svc, vi.st.st_dev, vi.st.st_ino);
		}
	}
	dir_unlock(v, p->node);
	gone = rc ? NULL : victim_gone(&vi);
	victim_close(v, &vi);
	if (!rc) {
		sfs_coh_removed(v, p->node, actual, gone);
		sfs_coh_attr(v, p->node);
		if (vi.node)
			sfs_coh_attr(v, vi.node);
		drop_own_spelling(&q, p, name, actual);
	}
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
static int rename_as_caller(struct req *q, struct held *p, const char *from,
                            const struct victim *moved, struct held *np, const char *to,
                            const struct victim *victim, unsigned int flags)
{
	int rc = renameat2(p->fd, from, np->fd, to, flags) < 0 ? -errno : 0;
	bool same;

	if (rc != -EACCES || !sfs_policy_dac_retry(q->r.view) || !moved->st.st_mode ||
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
	    (rc = sfs_policy_name(q->r.view, (*p)->node, name, false)) ||
	    (rc = sfs_policy_name(q->r.view, (*np)->node, newname, true)))
		return rc;
	return sfs_quota_may_move(req_ledger(q), (*p)->node, (*p)->fd, (*np)->node, (*np)->fd);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
	struct victim moved = {.fd = -1}, victim = {.fd = -1};
	char buf[NAME_MAX + 1], nbuf[NAME_MAX + 1];
	struct sfs_node *gone;
	struct held *p, *np;
	const char *from, *to;
	struct sfs_view *v;
	struct req q;
	int rc;

	if ((rc = begin_rename(&q, req, parent, name, newparent, newname, &p, &np)))
		goto out;
	v = q.r.view;
	/* the source in the backing's spelling; a target whose class has a member under another
	 * spelling replaces that member, as on casefold ext4 */
	from = backing_spelling(&q, p, name, buf, sizeof(buf));
	to = backing_spelling(&q, np, newname, nbuf, sizeof(nbuf));
	dir_lock2(v, p->node, np->node);
	victim_open(v, p, from, &moved);
	victim_open(v, np, to, &victim);
	if (!intent_start(&q, flags & RENAME_EXCHANGE ? SFS_HO_EXCHANGE : SFS_HO_RENAME, p, from, np,
	                  to, moved.st.st_mode ? moved.st.st_ino : 0,
	                  victim.st.st_mode ? victim.st.st_ino : 0, &rc)) {
		rc = rename_as_caller(&q, p, from, &moved, np, to, &victim, flags);
		intent_done(&q, rc);
	}
	if (!rc && !(flags & RENAME_EXCHANGE) && !q.replayed) {
		if (S_ISDIR(victim.st.st_mode) && !(flags & RENAME_NOREPLACE))
			sfs_names_dir_gone(v->svc, victim.st.st_dev, victim.st.st_ino);
		sfs_names_renamed(v, p->node, from, np->node, to);
		if (flags & RENAME_WHITEOUT)
			sfs_names_added(v, p->node, from);
	}
	dir_unlock2(v, p->node, np->node);
	gone = rc || (flags & RENAME_EXCHANGE) ? NULL : victim_gone(&victim);
	victim_close(v, &moved);
	victim_close(v, &victim);
	if (!rc) {
		sfs_quota_sync(req_ledger(&q), np->node, NULL, np->fd); /* it may have grown */
		sfs_coh_name(v, p->node, from);
		sfs_coh_removed(v, np->node, to, gone);
		drop_own_spelling(&q, p, name, from);
		drop_own_spelling(&q, np, newname, to);
		sfs_coh_attr(v, p->node);
		if (np->node != p->node)
			sfs_coh_attr(v, np->node);
		if (moved.node)
			sfs_coh_attr(v, moved.node);
		if (victim.node)
			sfs_coh_attr(v, victim.node);
	}
out:
	req_reply_err(&q, rc);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	struct sfs_view *v;
	struct held *h, *np;
	struct req q;
	char path[40];
	int rc;

	if ((rc = req_begin_change(&q, req)))
		goto out;
	v = q.r.view;
	rc = -EINVAL;
	if (!valid_name(newname))
		goto out;
	if ((rc = req_hold(&q, ino, &h)) || (rc = req_hold(&q, newparent, &np)) ||
	    (rc = sfs_policy_name(v, np->node, newname, true)) ||
	    (rc = check_new_name(&q, np, newname)) ||
	    (rc = sfs_quota_may_move(req_ledger(&q), h->node, h->fd, np->node, np->fd)))
		goto out;
	fd_path(path, h->fd);
	/* The magic link lands on the node itself, symlinks included, and never follows on. */
	dir_lock(v, np->node);
	if (!intent_start(&q, SFS_HO_MAKE, np, newname, NULL, NULL, 0, 0, &rc)) {
		rc = BACKING(&q.r, linkat(AT_FDCWD, path, np->fd, newname, AT_SYMLINK_FOLLOW));
		intent_done(&q, rc);
		if (!rc)
			sfs_names_added(v, np->node, newname);
	}
	dir_unlock(v, np->node);
	if (!rc) {
		rc = lookup_at(&q, np->node, np->fd, newname, &e);
		sfs_quota_sync(req_ledger(&q), np->node, NULL, np->fd); /* it may have grown */
		sfs_coh_name(v, np->node, newname);
		sfs_coh_attr(v, np->node);
		sfs_coh_attr(v, h->node);
	}
out:
	req_reply_entry(&q, rc, &e);
}
