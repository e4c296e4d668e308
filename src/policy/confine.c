/* What a view may reach and change: ro views refuse every modification with EROFS (the
 * kernel does too, on the read-only view mount; this is the daemon's own guard, and a ro
 * view opens the backing through a read-only clone of its mount, so nothing a read does
 * reaches the disk either: no atime), the
 * admin state /.strictfs at the backing root is invisible and cannot be created (contract §3.5).
 * subdir= is the view's root node, chosen when the view is added (daemon_views.c): the kernel
 * resolves ".." and symlinks itself and never asks the daemon to leave the root by a name.
 * A file handle can name anything on the backing, so what a handle reaches is checked here
 * (contract §4.2). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <string.h>
#include <unistd.h>

#include "backing.h"
#include "creds.h"
#include "services.h"
#include "view.h"
#include "policy.h"

static int confine_modify(const struct sfs_view *v)
{
	return v->prof->opts.ro ? -EROFS : 0;
}

static unsigned confine_mount_attrs(const struct sfs_opts *o)
{
	return o->ro ? MOUNT_ATTR_RDONLY : 0;
}

static int confine_name(const struct sfs_view *v, const struct sfs_node *parent, const char *name,
                        bool create)
{
	if (!sfs_is_admin_entry(v->svc, parent, name))
		return 0;
	return create ? -EPERM : -ENOENT;
}

static bool confine_dirent_visible(const struct sfs_view *v, const struct sfs_node *dir,
                                   const char *name)
{
	return !sfs_is_admin_entry(v->svc, dir, name);
}

static bool same_object(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether a directory, or one of its ancestors, is adm. Bounded: a tree deeper than that is
 * treated as inside. */
static bool below(int fd, const struct stat *adm, ino_t root_ino)
{
	struct stat cur;
	int cfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	for (int depth = 0; cfd >= 0 && depth < 4096; depth++) {
		int up;
		if (fstat(cfd, &cur) < 0 || same_object(&cur, adm))
			break;
		if (cur.st_ino == root_ino) {
			close(cfd);
			return false;
		}
		up = openat(cfd, "..", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		close(cfd);
		cfd = up;
	}
	if (cfd >= 0)
		close(cfd);
	return true;
}

/* Whether the object is the admin state /.strictfs, an entry of it, or a directory below it
 * (strictfs puts only files there, so that is all there can be). */
static bool in_admin_state(const struct sfs_view *v, int fd, const struct stat *st)
{
	struct stat adm;
	bool inside = false;
	struct dirent *de;
	DIR *d;
	int dfd;

	sfs_priv_begin(SFS_PRIV_SEARCH);
	dfd = openat(v->svc->backing->root_fd, ".strictfs",
	             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		sfs_priv_end();
		return errno != ENOENT; /* none yet; or unknowable, and then refused */
	}
	if (fstat(dfd, &adm) < 0) {
		inside = true;
	} else if (S_ISDIR(st->st_mode)) {
		inside = below(fd, &adm, v->svc->root_ino);
	} else if ((d = fdopendir(dfd))) {
		while (!inside && (de = readdir(d)))
			inside = de->d_ino == st->st_ino;
		closedir(d);
		dfd = -1;
	} else {
		inside = true;
	}
	if (dfd >= 0)
		close(dfd);
	sfs_priv_end();
	return inside;
}

static int confine_reach(const struct sfs_view *v, int fd, const struct stat *st)
{
	uint64_t id;

	/* a subdir view cannot tell where a file it does not hold lies: only its root and what
	 * its kernel holds, which it reached by names within the tree. Matched by id, number
	 * and generation: a number ext4 freed and gave to an object outside the tree (one made
	 * natively, which the table has not seen) must not pass for the node the view holds. */
	if (strcmp(v->prof->opts.subdir, "/") &&
	    (sfs_node_id_of(fd, &id) ||
	     (id != v->root->id && !sfs_itab_id_held_by(&v->svc->itab, id, v->slot))))
		return -ESTALE;
	return in_admin_state(v, fd, st) ? -ESTALE : 0;
}

const struct sfs_policy sfs_policy_confine = {
	.name = "confine",
	.modify = confine_modify,
	.mount_attrs = confine_mount_attrs,
	.name_check = confine_name,
	.dirent_visible = confine_dirent_visible,
	.reach = confine_reach,
};
