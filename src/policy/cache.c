/* cache=strict | cache=writeback (contract §4.3): whether the view's kernel caches writes; and
 * passthrough | nopassthrough (contract §4.4): whether its open files' data goes by the
 * kernel's passthrough to the backing file instead of through the daemon. With
 * writeback caching the kernel reads around partial writes and handles O_APPEND itself, so
 * the backing file is opened for reading too and without O_APPEND. Whether a view may have
 * it at all (only as the sole view of its source) is the daemon's to decide when the view
 * is added. */
#include <fcntl.h>

#include "policy.h"
#include "view.h"

static void cache_init(const struct sfs_view *v, struct fuse_conn_info *conn)
{
	if (v->prof->opts.cache == SFS_CACHE_WRITEBACK && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static int cache_backing_flags(const struct sfs_view *v, int flags)
{
	if (v->prof->opts.cache != SFS_CACHE_WRITEBACK)
		return flags;
	if ((flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	return flags & ~O_APPEND;
}

/* The kernel ignores passthrough where writeback caching is on. */
static const char *cache_no_passthrough(const struct sfs_opts *o)
{
	if (o->no_passthrough)
		return "nopassthrough";
	return o->cache == SFS_CACHE_WRITEBACK ? "cache=writeback" : NULL;
}

const struct sfs_policy sfs_policy_cache = {
	.name = "cache",
	.init = cache_init,
	.backing_flags = cache_backing_flags,
	.no_passthrough = cache_no_passthrough,
};
