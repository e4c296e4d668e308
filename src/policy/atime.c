/* Access times per view (noatime, relatime, strictatime, nodiratime; ro updates none). FUSE
 * keeps no atime of its own (its inodes are S_NOATIME), so atime is what the backing does
 * when the daemon reads. The view's rule is applied by the kernel itself: the view opens its
 * files and directories through a clone of the backing mount carrying the view's flags
 * (backing.h, sfs_backing_clone), so every read that reaches the backing counts exactly as
 * on a native mount with those flags. What is left is the view's own cache: a read the
 * kernel answers from it never reaches the backing. So where an access would update atime
 * now, the cache must not answer it: a strictatime view caches nothing it reads, a relatime
 * view drops its pages at an open when the update is due (relatime_need_update, fs/inode.c:
 * atime not newer than mtime or ctime, or a day old); after that first read it is not due
 * until the object changes. */
#include <sys/mount.h>
#include <time.h>

#include "policy.h"
#include "view.h"

static bool ts_le(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec <= b->tv_nsec);
}

static bool relatime_wants_update(const struct stat *st)
{
	if (ts_le(&st->st_atim, &st->st_mtim) || ts_le(&st->st_atim, &st->st_ctim))
		return true;
	return time(NULL) - st->st_atim.tv_sec >= 24 * 60 * 60;
}

/* One set of flags per behaviour, so that views which behave alike have equal profiles: a ro
 * mount updates no atime whatever its rule, and noatime covers nodiratime. */
static unsigned atime_mount_attrs(const struct sfs_opts *o)
{
	unsigned attrs = o->nodiratime ? MOUNT_ATTR_NODIRATIME : 0;

	if (o->ro || o->atime == SFS_ATIME_NOATIME)
		return MOUNT_ATTR_NOATIME;
	switch (o->atime) {
	case SFS_ATIME_STRICT:
		return attrs | MOUNT_ATTR_STRICTATIME;
	default:
		return attrs | MOUNT_ATTR_RELATIME;
	}
}

static enum sfs_cache_use atime_open_cache(const struct sfs_view *v, const struct stat *st)
{
	if (v->prof->opts.ro || v->prof->opts.atime == SFS_ATIME_NOATIME ||
	    (S_ISDIR(st->st_mode) && v->prof->opts.nodiratime))
		return SFS_CACHE_KEEP;
	if (v->prof->opts.atime == SFS_ATIME_STRICT)
		return SFS_CACHE_NONE;
	return relatime_wants_update(st) ? SFS_CACHE_DROP : SFS_CACHE_KEEP;
}

const struct sfs_policy sfs_policy_atime = {
	.name = "atime",
	.mount_attrs = atime_mount_attrs,
	.open_cache = atime_open_cache,
};
