/* Changes of names that a successor daemon may be asked to make again (see ops.h): the kernel
 * resends every request a dead daemon had read and not answered (FUSE_NOTIFY_RESEND, with bit
 * 63 of its id set), whether or not that daemon had already made the change. Made twice, a
 * mkdir would answer EEXIST and an unlink ENOENT where the first attempt succeeded. So each
 * change is recorded before it touches the backing and marked done with its result after
 * (handover.h); a resent request whose change was done gets that result. One that was begun
 * and not marked done is judged by the backing as it is now: the names show whether the
 * change happened (contract §6, "Failover"). */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse_gate.h"
#include "handover.h"
#include "services.h"

#define UNIQUE_RESEND (1ULL << 63)

/* The inode number under name in dirfd, 0 for none. */
static uint64_t ino_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

/* Whether the names (or the file's size) show the recorded change as made. */
static bool change_made(const struct sfs_ho_intent *was, const struct held *p,
                        const struct held *np, int fd)
{
	struct stat st;

	switch (was->op) {
	case SFS_HO_APPEND:
		return fstat(fd, &st) == 0 && (uint64_t)st.st_size >= was->obj + was->obj2;
	case SFS_HO_MAKE:
		return ino_at(p->fd, was->name) != 0;
	case SFS_HO_REMOVE:
		return ino_at(p->fd, was->name) != was->obj;
	case SFS_HO_RENAME:
		return np && ino_at(np->fd, was->name2) == was->obj && ino_at(p->fd, was->name) != was->obj;
	case SFS_HO_EXCHANGE:
		return np && ino_at(np->fd, was->name2) == was->obj && ino_at(p->fd, was->name) == was->obj2;
	}
	return false;
}

/* The common part: a resent request's record (true, *rc its result, when the change was
 * made), or a new record for this one. */
static bool start(struct req *q, struct sfs_ho_intent *rec, const struct held *p,
                  const struct held *np, int fd, int made_rc, int *rc)
{
	struct sfs_handover *ho = q->r.view->svc->ho;
	uint64_t unique = sfs_fuse_gate_unique();
	int slot;

	rec->view = q->r.view->slot;
	rec->unique = unique & ~UNIQUE_RESEND;
	if ((unique & UNIQUE_RESEND) &&
	    (slot = sfs_ho_intent_find(ho, rec->view, rec->unique, rec)) >= 0) {
		q->intent = slot;
		if (atomic_load(&rec->state) == SFS_HO_DONE) {
			*rc = rec->rc;
			return q->replayed = true;
		}
		if (change_made(rec, p, np, fd)) {
			sfs_ho_intent_done(ho, slot, made_rc);
			*rc = made_rc;
			return q->replayed = true;
		}
		return false; /* begun, not made: made now, under the same record */
	}
	q->intent = sfs_ho_intent_begin(ho, rec);
	return false;
}

bool intent_start(struct req *q, enum sfs_ho_intent_op op, const struct held *p, const char *name,
                  const struct held *np, const char *name2, uint64_t obj, uint64_t obj2, int *rc)
{
	struct sfs_ho_intent rec = {.op = op, .dir = p->node->id, .dir2 = np ? np->node->id : 0,
	                            .obj = obj, .obj2 = obj2};

	if (!q->r.view->svc->ho || strlen(name) >= sizeof(rec.name) ||
	    (name2 && strlen(name2) >= sizeof(rec.name2)))
		return false;
	strcpy(rec.name, name);
	if (name2)
		strcpy(rec.name2, name2);
	return start(q, &rec, p, np, -1, 0, rc);
}

bool intent_start_append(struct req *q, int fd, size_t len, ssize_t *n)
{
	struct sfs_ho_intent rec = {.op = SFS_HO_APPEND, .obj2 = len};
	struct stat st;
	int rc;

	if (!q->r.view->svc->ho || fstat(fd, &st) < 0)
		return false;
	rec.obj = st.st_size;
	if (!start(q, &rec, NULL, NULL, fd, (int)len, &rc))
		return false;
	*n = rc;
	return true;
}

void intent_done(struct req *q, int rc)
{
	if (q->intent >= 0)
		sfs_ho_intent_done(q->r.view->svc->ho, q->intent, rc);
}

void intent_end(struct req *q)
{
	if (q->intent >= 0)
		sfs_ho_intent_end(q->r.view->svc->ho, q->intent);
	q->intent = -1;
}
