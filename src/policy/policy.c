/* Dispatch from the request path to every view policy (see policy.h). */
#include "policy.h"

#include <errno.h>
#include <stddef.h>

const struct sfs_policy *const sfs_policies[] = {
	&sfs_policy_confine, &sfs_policy_acl, &sfs_policy_xattr, &sfs_policy_df,
	&sfs_policy_atime, &sfs_policy_casefold, &sfs_policy_quota, &sfs_policy_cache, NULL,
};

#define EACH(p) for (const struct sfs_policy *const *p = sfs_policies; *p; p++)

void sfs_policy_init(const struct sfs_view *v, struct fuse_conn_info *conn)
{
	EACH(p) if ((*p)->init) (*p)->init(v, conn);
}

int sfs_policy_modify(const struct sfs_view *v)
{
	EACH(p) {
		int rc = (*p)->modify ? (*p)->modify(v) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

int sfs_policy_name(const struct sfs_view *v, const struct sfs_node *parent, const char *name,
                    bool create)
{
	EACH(p) {
		int rc = (*p)->name_check ? (*p)->name_check(v, parent, name, create) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

bool sfs_policy_dirent_visible(const struct sfs_view *v, const struct sfs_node *dir,
                               const char *name)
{
	EACH(p) if ((*p)->dirent_visible && !(*p)->dirent_visible(v, dir, name)) return false;
	return true;
}

int sfs_policy_xattr_gate(const struct sfs_req *r, const char *name, enum sfs_xattr_op op)
{
	EACH(p) {
		int rc = (*p)->xattr ? (*p)->xattr(r, name, op) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

bool sfs_policy_xattr_visible(const struct sfs_req *r, const char *name)
{
	EACH(p) if ((*p)->xattr_visible && !(*p)->xattr_visible(r, name)) return false;
	return true;
}

int sfs_policy_created(const struct sfs_req *r, int dirfd, int fd, mode_t mode)
{
	EACH(p) {
		int rc = (*p)->created ? (*p)->created(r, dirfd, fd, mode) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

bool sfs_policy_dac_retry(const struct sfs_view *v)
{
	EACH(p) if ((*p)->dac_retry && (*p)->dac_retry(v)) return true;
	return false;
}

void sfs_policy_statfs(const struct sfs_req *r, struct statvfs *st)
{
	EACH(p) if ((*p)->statfs) (*p)->statfs(r, st);
}

unsigned sfs_policy_mount_attrs(const struct sfs_opts *o)
{
	unsigned attrs = 0;

	EACH(p) if ((*p)->mount_attrs) attrs |= (*p)->mount_attrs(o);
	return attrs;
}

enum sfs_cache_use sfs_policy_open_cache(const struct sfs_view *v, const struct stat *st)
{
	enum sfs_cache_use use = SFS_CACHE_KEEP;

	EACH(p) if ((*p)->open_cache) {
		enum sfs_cache_use u = (*p)->open_cache(v, st);
		if (u > use)
			use = u;
	}
	return use;
}

int sfs_policy_backing_flags(const struct sfs_view *v, int flags)
{
	EACH(p) if ((*p)->backing_flags) flags = (*p)->backing_flags(v, flags);
	return flags;
}

bool sfs_policy_limits(const struct sfs_opts *o)
{
	EACH(p) if ((*p)->limits && (*p)->limits(o)) return true;
	return false;
}

int sfs_policy_reach(const struct sfs_view *v, int fd, const struct stat *st)
{
	EACH(p) {
		int rc = (*p)->reach ? (*p)->reach(v, fd, st) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

const char *sfs_policy_no_passthrough(const struct sfs_opts *o)
{
	EACH(p) if ((*p)->no_passthrough && (*p)->no_passthrough(o)) return (*p)->no_passthrough(o);
	return NULL;
}

int sfs_policy_resolve(const struct sfs_view *v, const struct sfs_node *dir, int dirfd,
                       const char *name, char *out, size_t outlen)
{
	EACH(p) {
		int rc = (*p)->resolve ? (*p)->resolve(v, dir, dirfd, name, out, outlen) : -ENOENT;
		if (rc != -ENOENT)
			return rc;
	}
	return -ENOENT;
}

unsigned sfs_policy_inode_flags(const struct sfs_view *v, mode_t type)
{
	unsigned flags = 0;

	EACH(p) if ((*p)->inode_flags) flags |= (*p)->inode_flags(v, type);
	return flags;
}

int sfs_policy_charge(const struct sfs_req *r, struct sfs_charge *c)
{
	EACH(p) {
		int rc = (*p)->charge ? (*p)->charge(r, c) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

int sfs_policy_within(const struct sfs_req *r, struct sfs_charge *c)
{
	EACH(p) {
		int rc = (*p)->within ? (*p)->within(r, c) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

int sfs_policy_peek(const struct sfs_view *v, const struct sfs_node *dir, const char *name,
                    char *out, size_t outlen, bool *exact)
{
	EACH(p) {
		int rc = (*p)->peek ? (*p)->peek(v, dir, name, out, outlen, exact) : -ENODATA;
		if (rc != -ENODATA)
			return rc;
	}
	return -ENODATA;
}
