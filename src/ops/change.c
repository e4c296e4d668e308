/* The change frame (see ops.h): every change of a directory's names runs the same sequence, so
 * that no handler can leave a step out or take two in the wrong order. Before the backing
 * call: the names in the backing's spelling, the directory change locks (both directories in
 * their one order), the objects under the names held open, the intent recorded for a
 * successor. After it: the intent's result, the fold indexes (names.c) while the locks still
 * hold, the locks let go, the ledger told what the objects and directories are now, and the
 * notices queued for the other views (the request frame delivers them with the reply). */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "coherence.h"
#include "names.h"
#include "services.h"
#include "view.h"

void dir_lock(struct sfs_view *v, const struct sfs_node *dir)
{
	sfs_dirlock_lock(&v->svc->dirlock, dir->dev, dir->ino);
}

void dir_unlock(struct sfs_view *v, const struct sfs_node *dir)
{
	sfs_dirlock_unlock(&v->svc->dirlock, dir->dev, dir->ino);
}

static void lock_dirs(struct sfs_view *v, const struct change *c)
{
	if (c->dir2)
		sfs_dirlock_lock2(&v->svc->dirlock, c->dir->node->dev, c->dir->node->ino,
		                  c->dir2->node->dev, c->dir2->node->ino);
	else
		dir_lock(v, c->dir->node);
}

static void unlock_dirs(struct sfs_view *v, const struct change *c)
{
	if (c->dir2)
		sfs_dirlock_unlock2(&v->svc->dirlock, c->dir->node->dev, c->dir->node->ino,
		                    c->dir2->node->dev, c->dir2->node->ino);
	else
		dir_unlock(v, c->dir->node);
}

const char *backing_spelling(struct req *q, struct held *p, const char *name, char *buf,
                             size_t len)
{
	return sfs_policy_resolve(q->r.view, p->node, p->fd, name, buf, len) == 0 ? buf : name;
}

/* What is under name in dir now, held open until the change is settled. */
static void obj_open(struct sfs_view *v, struct held *dir, const char *name, struct change_obj *o)
{
	o->fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (o->fd < 0 || fstat(o->fd, &o->st) < 0) {
		o->st.st_mode = 0;
		o->node = NULL;
		return;
	}
	o->node = sfs_itab_find(&v->svc->itab, o->st.st_dev, o->st.st_ino);
	sfs_quota_node_init(&o->was, &o->st);
	o->was.rmask = sfs_quota_mask(&v->svc->quota, dir->node, dir->fd);
}

/* The ledger follows the object, done or not; the descriptor goes. Returns the object's node
 * if it has no name left (the other views are then told it is deleted, coherence.h), else
 * NULL. */
static struct sfs_node *obj_close(struct sfs_view *v, struct change_obj *o)
{
	long nlink;

	if (o->fd < 0)
		return NULL;
	nlink = sfs_quota_sync(&v->svc->quota, o->node, &o->was, o->fd);
	close(o->fd);
	o->fd = -1;
	return nlink == 0 ? o->node : NULL;
}

static enum sfs_ho_intent_op intent_op(const struct change *c)
{
	switch (c->kind) {
	case CHANGE_REMOVE:
		return SFS_HO_REMOVE;
	case CHANGE_RENAME:
		return c->flags & RENAME_EXCHANGE ? SFS_HO_EXCHANGE : SFS_HO_RENAME;
	default:
		return SFS_HO_MAKE;
	}
}

static uint64_t ino_of(const struct change_obj *o)
{
	return o->st.st_mode ? o->st.st_ino : 0;
}

static bool unmapped(const struct req *q, const struct change_obj *o)
{
	return o->st.st_mode && req_ids_unmapped(q, &o->st);
}

/* An idmapped mount refuses to remove, replace or move an object whose ids it does not map,
 * whoever asks (may_delete: EOVERFLOW, before any permission or sticky check). The kernel
 * checked the objects its names held when it looked; under the directory locks they may be
 * others now, or the same given away (a native writer under share=existing), and a namespace's
 * root would remove them by capabilities the kernel weighed against the old ids. */
static int refuse_unmapped_victims(struct req *q, const struct change *c)
{
	if (c->kind != CHANGE_REMOVE && c->kind != CHANGE_RENAME)
		return 0;
	return unmapped(q, &c->obj) || unmapped(q, &c->obj2) ? -EOVERFLOW : 0;
}

bool change_begin(struct req *q, struct change *c, int *rc)
{
	struct sfs_view *v = q->r.view;

	c->obj.fd = c->obj2.fd = -1;
	c->obj.st.st_mode = c->obj2.st.st_mode = 0;
	c->obj.node = c->obj2.node = NULL;
	/* the kernel may have sent another spelling of a name (casefold views): the change is
	 * made on the member of its class the backing has, and a new name that joins a class
	 * under another spelling meets that member (EEXIST, or a rename that replaces it) */
	c->name = backing_spelling(q, c->dir, c->asked, c->buf, sizeof(c->buf));
	c->name2 = c->dir2 ? backing_spelling(q, c->dir2, c->asked2, c->buf2, sizeof(c->buf2)) : NULL;
	lock_dirs(v, c);
	if (c->kind == CHANGE_REMOVE || c->kind == CHANGE_RENAME)
		obj_open(v, c->dir, c->name, &c->obj);
	if (c->kind == CHANGE_RENAME)
		obj_open(v, c->dir2, c->name2, &c->obj2);
	if (intent_start(q, intent_op(c), c->dir, c->name, c->dir2, c->name2, ino_of(&c->obj),
	                 ino_of(&c->obj2), rc))
		return false; /* answered with the predecessor's result */
	return !(*rc = refuse_unmapped_victims(q, c));
}

/* Whether the caller's kernel settled the backing name's dentry by the change itself (made it
 * positive, negative, or moved it away): it asked for that name, not for an alias (which stays
 * the notes' to invalidate). */
static bool settled(const char *asked, const char *actual)
{
	return asked == actual || !strcmp(asked, actual);
}

/* The fold indexes follow the backing, under the directory locks; a change a predecessor
 * made is in the successor's indexes already (they were built after it). */
static void note_names(struct sfs_view *v, const struct change *c)
{
	struct sfs_node *dir = c->dir->node;
	bool own = settled(c->asked, c->name);

	switch (c->kind) {
	case CHANGE_MAKE:
	case CHANGE_LINK:
		sfs_names_added(v, dir, c->name, own);
		break;
	case CHANGE_REMOVE:
		sfs_names_removed(v, dir, c->name, own);
		if (S_ISDIR(c->obj.st.st_mode))
			sfs_names_dir_gone(v->svc, c->obj.st.st_dev, c->obj.st.st_ino);
		break;
	case CHANGE_RENAME:
		if (c->flags & RENAME_EXCHANGE)
			break;
		if (S_ISDIR(c->obj2.st.st_mode) && !(c->flags & RENAME_NOREPLACE))
			sfs_names_dir_gone(v->svc, c->obj2.st.st_dev, c->obj2.st.st_ino);
		sfs_names_renamed(v, dir, c->name, own, c->dir2->node, c->name2,
		                  settled(c->asked2, c->name2));
		if (c->flags & RENAME_WHITEOUT)
			sfs_names_added(v, dir, c->name, own);
		break;
	case CHANGE_TMPFILE:
		break;
	}
}

/* After a change made under another spelling than the backing's, the caller's own view may
 * still hold the backing spelling's dentry; it is dropped from another thread, as a handler
 * must not invalidate entries of its own directory. */
static void drop_own_spelling(struct sfs_view *v, struct held *p, const char *asked,
                              const char *actual)
{
	if (asked != actual && strcmp(asked, actual))
		sfs_coh_own_entry(v, p->node, actual);
}

static void attr_changed(struct sfs_view *v, struct sfs_node *n)
{
	if (n)
		sfs_coh_attr(v, n);
}

/* What the other views must learn: the names (the one whose object's last link went, as a
 * deletion), and the attributes of the directories and objects (times, link counts). */
static void tell_views(struct req *q, struct change *c, struct sfs_node *gone)
{
	struct sfs_view *v = q->r.view;
	struct sfs_node *dir = c->dir->node, *dir2 = c->dir2 ? c->dir2->node : NULL;

	if (c->kind == CHANGE_REMOVE)
		sfs_coh_removed(v, dir, c->name, gone);
	else
		sfs_coh_name(v, dir, c->name);
	if (dir2)
		sfs_coh_removed(v, dir2, c->name2, gone);
	drop_own_spelling(v, c->dir, c->asked, c->name);
	if (dir2)
		drop_own_spelling(v, c->dir2, c->asked2, c->name2);
	attr_changed(v, dir);
	if (dir2 && dir2 != dir)
		attr_changed(v, dir2);
	attr_changed(v, c->obj.node);
	attr_changed(v, c->obj2.node);
	if (c->kind == CHANGE_LINK)
		attr_changed(v, c->linked->node);
}

void change_done(struct req *q, struct change *c, int rc)
{
	struct sfs_view *v = q->r.view;
	struct sfs_node *gone, *gone2;

	if (!q->replayed)
		intent_done(q, rc);
	if (!rc && !q->replayed)
		note_names(v, c);
	unlock_dirs(v, c);
	gone = obj_close(v, &c->obj);
	gone2 = obj_close(v, &c->obj2);
	/* what the change took the last name of: a removed object, or one a rename replaced */
	if (c->kind == CHANGE_RENAME)
		gone = c->flags & RENAME_EXCHANGE ? NULL : gone2;
	else if (c->kind != CHANGE_REMOVE)
		gone = NULL;
	c->made = !rc;
	if (rc)
		return;
	/* a directory grows by a block as names join it (an object given a name was counted
	 * already: one with no name is counted while it is open) */
	sfs_quota_sync(req_ledger(q), (c->dir2 ? c->dir2 : c->dir)->node, NULL,
	               (c->dir2 ? c->dir2 : c->dir)->fd);
	tell_views(q, c, gone);
}

/* The new object's descriptor: fd's object (O_PATH), or what name is in dir now. */
static int new_object(struct req *q, struct held *dir, const char *name, int fd)
{
	char path[40];
	int nfd;

	if (fd < 0)
		return BACKING(&q->r, openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
	fd_path(path, fd);
	nfd = open(path, O_PATH | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

int change_entry(struct req *q, struct change *c, int fd, mode_t mode,
                 struct fuse_entry_param *e)
{
	struct held *dir = c->dir;
	struct sfs_node *node;
	int ofd = new_object(q, dir, c->name, fd), rc;

	if (ofd < 0)
		return ofd;
	/* the policies settle what the backing gave a new object (an ACL a noacl view must not
	 * have inherited) before any caller can see it */
	if (c->made && c->kind != CHANGE_LINK && (rc = sfs_policy_created(&q->r, dir->fd, ofd, mode))) {
		close(ofd);
		return rc;
	}
	if ((rc = entry_from_fd(q->r.view, dir->node, ofd, e)))
		return rc;
	node = sfs_node_of(q->r.view, e->ino);
	/* a change a predecessor made was counted by the successor's scan */
	if (node && c->made && c->kind != CHANGE_LINK && !q->replayed)
		sfs_quota_created(req_ledger(q), node, &e->attr, dir->node, dir->fd);
	else if (node && fd >= 0)
		sfs_quota_sync(req_ledger(q), node, NULL, fd); /* an existing file, truncated */
	return 0;
}
