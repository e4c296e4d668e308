/* user_xattr / nouser_xattr (contract §5.2), and what every view hides: trusted.* is listed only
 * to callers with CAP_SYS_ADMIN, as ext4 does (the kernel does not filter listxattr). */
#include <errno.h>
#include <string.h>

#include "creds.h"
#include "policy.h"
#include "view.h"

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static int xattr_gate(const struct sfs_req *r, const char *name, enum sfs_xattr_op op)
{
	(void)op;
	if (!r->view->prof->opts.user_xattr && has_prefix(name, "user."))
		return -EOPNOTSUPP;
	return 0;
}

static bool xattr_visible(const struct sfs_req *r, const char *name)
{
	if (has_prefix(name, "user."))
		return r->view->prof->opts.user_xattr;
	if (has_prefix(name, "trusted."))
		return sfs_pid_has_cap(r->ctx->pid, CAP_SYS_ADMIN);
	return true;
}

const struct sfs_policy sfs_policy_xattr = {
	.name = "xattr",
	.xattr = xattr_gate,
	.xattr_visible = xattr_visible,
};
