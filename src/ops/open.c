/* Opening backing objects for a view (see ops.h): through the view's clone of the backing
 * mount, with the cache the view's policies allow, and noting the atime a read moves. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>

#include "coherence.h"
#include "creds.h"
#include "registry.h"
#include "services.h"
#include "view.h"

/* What the kernel passed, less what only the kernel's own open may use, adjusted by the
 * view's policies (writeback caching wants to read around partial writes). */
int open_flags_for_backing(const struct sfs_view *v, int flags)
{
	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW);
	return sfs_policy_backing_flags(v, flags) | O_CLOEXEC;
}

/* Opens the node's backing file or directory for the view, through the view's clone of the
 * backing mount (its atime rule and ro apply to what the descriptor reads), by handle; st gets
 * the object's attributes. Only regular files and directories are opened (contract §4.2): a FIFO
 * would block the worker, a device would bypass the view's nodev. The kernel has checked the
 * caller's access on the view already, MAY_EXEC instead of MAY_READ for an exec (doc/kernel.md
 * §8); CAP_DAC_READ_SEARCH, which the handle needs anyway, lets the backing take that check
 * for reading, while a write is still checked as the caller. Returns the fd or -errno. */
int open_node(struct sfs_req *r, struct held *h, int flags, struct stat *st)
{
	int fd, rc = stat_fd(h->fd, st);

	if (rc)
		return rc;
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return -EINVAL;
	sfs_priv_begin(SFS_PRIV_SEARCH);
	fd = BACKING(r, sfs_node_open(h->node, r->view->clone.fd, flags | O_NOFOLLOW));
	sfs_priv_end();
	return fd;
}

static long long atime_ns(const struct stat *st)
{
	return st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
}

/* The atime an open of st starts from: NO_ATIME where the view's reads never move it. */
long long first_atime(const struct sfs_view *v, const struct stat *st)
{
	if (v->prof->backing_attrs & (MOUNT_ATTR_NOATIME | MOUNT_ATTR_RDONLY))
		return NO_ATIME;
	return atime_ns(st);
}

/* After a read through fd of node's open file or directory: whether the read moved the
 * atime (the view's rule let it). The other views then drop their cached attributes, as every
 * mount of one native inode shows its new atime at once. One fstat per read, and only while
 * other views exist. */
void atime_moved(struct sfs_view *v, struct sfs_node *n, int fd, atomic_llong *seen)
{
	struct stat st;
	long long was = atomic_load(seen);

	if (was == NO_ATIME || sfs_registry_count(v->svc->views) < 2 || !n || fstat(fd, &st) < 0)
		return;
	if (atime_ns(&st) != was && atomic_compare_exchange_strong(seen, &was, atime_ns(&st)))
		sfs_coh_attr(v, n);
}
