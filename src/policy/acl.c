/* acl / noacl (contract §5.1). acl views let the kernel enforce POSIX ACLs (FUSE_CAP_POSIX_ACL
 * with default_permissions) and leave the umask to the backing, which applies it only where
 * the parent has no default ACL (FUSE_CAP_DONT_MASK). noacl views check mode bits only, as
 * ext4 mounted noacl did: the ACL xattrs are refused and hidden, new entries under a
 * default-ACL directory get no ACL, and an access the kernel allowed by the mode is performed
 * even where the backing's ACL would refuse it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "creds.h"
#include "policy.h"
#include "view.h"

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

static bool is_acl_name(const char *name)
{
	return !strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT);
}

static void acl_init(const struct sfs_view *v, struct fuse_conn_info *conn)
{
	if (v->prof->opts.acl) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	} else {
		/* the kernel then applies the umask itself and checks mode bits only */
		conn->want &= ~(FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK);
	}
}

static int acl_xattr(const struct sfs_req *r, const char *name, enum sfs_xattr_op op)
{
	(void)op;
	if (!r->view->prof->opts.acl && is_acl_name(name))
		return -EOPNOTSUPP;
	return 0;
}

static bool acl_xattr_visible(const struct sfs_req *r, const char *name)
{
	return r->view->prof->opts.acl || !is_acl_name(name);
}

static bool dir_has_default_acl(int dirfd)
{
	char path[40];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd);
	return getxattr(path, ACL_DEFAULT, NULL, 0) > 0;
}

/* The backing inherited the parent's default ACL (ext4 always has ACLs on); a noacl view
 * gives the new entry no ACL and mode & ~umask, as ext4 mounted noacl would. */
static int acl_created(const struct sfs_req *r, int dirfd, int fd, mode_t mode)
{
	char path[40];
	struct stat st;
	int rc = 0;

	if (r->view->prof->opts.acl || !dir_has_default_acl(dirfd))
		return 0;
	if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode))
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (removexattr(path, ACL_ACCESS) < 0 && errno != ENODATA)
		rc = -errno;
	if (!rc && S_ISDIR(st.st_mode) && removexattr(path, ACL_DEFAULT) < 0 && errno != ENODATA)
		rc = -errno;
	/* the set-id and sticky bits as the backing's create decided them (a subdirectory of a
	 * setgid directory keeps S_ISGID, a non-member's file loses it); a chmod by a non-member
	 * would drop that S_ISGID, hence CAP_FSETID for this one call, which adds no bit */
	mode = (mode & ~r->ctx->umask & 0777) | (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX));
	if (!rc) {
		sfs_priv_begin(SFS_PRIV_FOWNER);
		if (chmod(path, mode) < 0)
			rc = -errno;
		sfs_priv_end();
	}
	return rc;
}

static bool acl_dac_retry(const struct sfs_view *v)
{
	return !v->prof->opts.acl;
}

const struct sfs_policy sfs_policy_acl = {
	.name = "acl",
	.init = acl_init,
	.xattr = acl_xattr,
	.xattr_visible = acl_xattr_visible,
	.created = acl_created,
	.dac_retry = acl_dac_retry,
};
