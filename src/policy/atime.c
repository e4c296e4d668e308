/* Access times per view (noatime, relatime, strictatime, nodiratime). FUSE sends no atime
 * updates, so atime is what the backing does when the daemon reads. The backing is mounted
 * strictatime, and each open of a backing file or directory for a view whose rule says
 * "no update now" adds O_NOATIME: relatime's rule is that of fs/inode.c
 * (relatime_need_update): update when atime is not newer than mtime or ctime, or a day old. */
#include <fcntl.h>
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

static int atime_open_flags(const struct sfs_view *v, const struct stat *st)
{
	if (S_ISDIR(st->st_mode) && v->opts.nodiratime)
		return O_NOATIME;
	switch (v->opts.atime) {
	case SFS_ATIME_NOATIME:
		return O_NOATIME;
	case SFS_ATIME_STRICT:
		return 0;
	default:
		return relatime_wants_update(st) ? 0 : O_NOATIME;
	}
}

const struct sfs_policy sfs_policy_atime = {
	.name = "atime",
	.open_flags = atime_open_flags,
};
