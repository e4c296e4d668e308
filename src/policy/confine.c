/* What a view may reach and change: ro views refuse every modification with EROFS (the
 * kernel does too, on the read-only view mount; this is the daemon's own guard, and a ro
 * view opens the backing through a read-only clone of its mount, so nothing a read does
 * reaches the disk either: no atime), the
 * admin state /.strictfs at the backing root is invisible and cannot be created (contract §3.5).
 * subdir= is the view's root node, chosen when the view is added (daemon.c): the kernel
 * resolves ".." and symlinks itself and never asks the daemon to leave the root. */
#include <errno.h>
#include <sys/mount.h>
#include <string.h>

#include "services.h"
#include "view.h"
#include "policy.h"

static int confine_modify(const struct sfs_view *v)
{
	return v->opts.ro ? -EROFS : 0;
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

const struct sfs_policy sfs_policy_confine = {
	.name = "confine",
	.modify = confine_modify,
	.mount_attrs = confine_mount_attrs,
	.name_check = confine_name,
	.dirent_visible = confine_dirent_visible,
};
