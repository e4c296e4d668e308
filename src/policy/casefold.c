/* casefold, casefold=strict, nocasefold (contract §5.3). Names are matched case-insensitively by
 * the kernel-equivalent fold (fold.c) and kept as first given: a lookup that misses the exact
 * spelling goes through the directory's fold index (names.c), readdir lists each class once,
 * and strict views refuse to create names that are not UTF-8. Directories report
 * FS_CASEFOLD_FL, which Wine checks before it trusts a directory to be case-insensitive. */
#include <errno.h>
#include <linux/fs.h>
#include <string.h>

#include "services.h"
#include "view.h"
#include "fold.h"
#include "names.h"
#include "policy.h"

#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000
#endif

static bool folds(const struct sfs_view *v)
{
	return v->prof->opts.casefold != SFS_CASEFOLD_OFF;
}

/* A spelling of the admin state /.strictfs: in a casefold view every name that folds to it is
 * that name, so all are reserved alike (contract §3.5); confine refuses the exact bytes in
 * every view. Otherwise `.STRICTFS` could be made beside it, and would stand for it. */
static bool spells_admin(const struct sfs_view *v, const struct sfs_node *dir, const char *name)
{
	return folds(v) && sfs_is_backing_root(v->svc, dir) &&
	       sfs_fold_equal(name, strlen(name), SFS_ADMIN_NAME, strlen(SFS_ADMIN_NAME));
}

static int casefold_name_check(const struct sfs_view *v, const struct sfs_node *parent,
                               const char *name, bool create)
{
	if (spells_admin(v, parent, name))
		return create ? -EPERM : -ENOENT;
	if (create && v->prof->opts.casefold == SFS_CASEFOLD_STRICT &&
	    !sfs_fold_valid_utf8(name, strlen(name)))
		return -EINVAL;
	return 0;
}

static bool casefold_dirent_visible(const struct sfs_view *v, const struct sfs_node *dir,
                                    const char *name)
{
	if (!folds(v) || !strcmp(name, ".") || !strcmp(name, ".."))
		return true;
	return !spells_admin(v, dir, name) && sfs_names_fold_listed(v->svc, dir, name);
}

static int casefold_resolve(const struct sfs_view *v, const struct sfs_node *dir, int dirfd,
                            const char *name, char *out, size_t outlen)
{
	if (!folds(v))
		return -ENOENT;
	return sfs_names_fold_lookup(v->svc, dir, dirfd, name, out, outlen);
}

static int casefold_peek(const struct sfs_view *v, const struct sfs_node *dir, const char *name,
                         char *out, size_t outlen, bool *exact)
{
	if (!folds(v))
		return -ENODATA;
	return sfs_names_fold_peek(v->svc, dir, name, out, outlen, exact);
}

static unsigned casefold_inode_flags(const struct sfs_view *v, mode_t type)
{
	return folds(v) && S_ISDIR(type) ? FS_CASEFOLD_FL : 0;
}

const struct sfs_policy sfs_policy_casefold = {
	.name = "casefold",
	.name_check = casefold_name_check,
	.dirent_visible = casefold_dirent_visible,
	.resolve = casefold_resolve,
	.peek = casefold_peek,
	.inode_flags = casefold_inode_flags,
};
