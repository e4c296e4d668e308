/* Attributes (see ops.h): getattr, setattr, statfs, and the inode flags ioctl. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "coherence.h"
#include "creds.h"
#include "services.h"
#include "view.h"

#define SETATTR_SUID_BITS (S_ISUID | S_ISGID)

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_node *node = NULL;
	struct held *h;
	struct stat st;
	struct req q;
	int fd = -1, rc;

	req_start(&q, req);
	if (fi) {
		fd = file_of(req, fi)->fd;
		node = file_of(req, fi)->node;
		rc = fstat(fd, &st) < 0 ? -errno : 0;
	} else if (!(rc = req_hold(&q, ino, &h))) {
		fd = h->fd;
		node = h->node;
		rc = stat_fd(fd, &st);
	}
	/* a passthrough writer's allocations reach the ledger when the daemon sees them */
	if (!rc && node && atomic_load(&node->pt_writers))
		sfs_quota_sync(req_ledger(&q), node, NULL, fd);
	req_reply_attr(&q, rc, &st, attr_timeout_of(q.r.view, node));
}

/* A mode change whose only effect is clearing set-id bits is what a kernel that did not take
 * FUSE_HANDLE_KILLPRIV_V2 (fuse_io.h) sends before a write, truncate or chown by a
 * non-owner; it must succeed, so it is done with CAP_FOWNER. Any other chmod runs as the
 * caller. */
static bool only_clears_setid(mode_t old, mode_t new)
{
	old &= 07777;
	new &= 07777;
	return old != new && (old & ~new & 07777) == (old & ~new & SETATTR_SUID_BITS) &&
	       !(new & ~old);
}

static int set_mode(struct req *q, struct held *h, mode_t mode)
{
	char path[40];
	struct stat st;
	int rc = stat_fd(h->fd, &st);

	if (rc)
		return rc;
	if (S_ISLNK(st.st_mode))
		return -EOPNOTSUPP;
	fd_path(path, h->fd);
	if (only_clears_setid(st.st_mode, mode)) {
		sfs_priv_begin(SFS_PRIV_FOWNER);
		rc = chmod(path, mode & 07777) < 0 ? -errno : 0;
		sfs_priv_end();
		return rc;
	}
	return BACKING(&q->r, chmod(path, mode & 07777));
}

static int set_size(struct req *q, struct held *h, struct fuse_file_info *fi, off_t size)
{
	char path[40];
	int fd, rc;

	if (fi)
		return ftruncate(file_of(q->r.req, fi)->fd, size) < 0 ? -errno : 0;
	if (!S_ISREG(h->node->type))
		return S_ISDIR(h->node->type) ? -EISDIR : -EINVAL;
	fd_path(path, h->fd);
	fd = BACKING(&q->r, open(path, O_WRONLY | O_CLOEXEC));
	if (fd < 0)
		return fd;
	rc = ftruncate(fd, size) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int set_times(struct req *q, struct held *h, const struct stat *attr, int valid)
{
	struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};

	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_ATIME)
		ts[0] = attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_MTIME)
		ts[1] = attr->st_mtim;
	return BACKING(&q->r, utimensat(h->fd, "", ts, AT_EMPTY_PATH));
}

/* A chown moves the node's blocks and inode to the new owner: charged to the ids that change. */
static int reserve_chown(struct req *q, struct held *h, const struct stat *attr, int valid)
{
	uint32_t uid = h->node->q.uid, gid = h->node->q.gid;
	struct sfs_charge *c = &q->charge;

	if ((valid & FUSE_SET_ATTR_UID) && attr->st_uid != uid)
		uid = attr->st_uid;
	else
		c->skip |= SFS_CHARGE_USR;
	if ((valid & FUSE_SET_ATTR_GID) && attr->st_gid != gid)
		gid = attr->st_gid;
	else
		c->skip |= SFS_CHARGE_GRP;
	c->skip |= SFS_CHARGE_TOTAL; /* the backing's total does not change */
	return req_reserve(q, uid, gid, h->node->q.bytes, h->node->q.counted);
}

/* A SETATTR with nothing to set is either chown(f, -1, -1), for which ext4 stamps ctime,
 * or, under FUSE_HANDLE_KILLPRIV_V2 (fuse_io.h), the kernel's notice before a write to a
 * set-id file; the write itself then clears the bits on the backing, as the caller. Only
 * the owner may stamp a set-id file (ext4 makes the chown a mode change): anyone else's
 * EPERM is the notice's, and nothing is changed. Either way the bits may be gone a moment
 * later, so the kernel is not let keep the attributes this reply carries. */
static bool is_write_notice(int valid, int fd)
{
	struct stat st;

	return !valid && stat_fd(fd, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
}

static int set_owner(struct req *q, struct held *h, const struct stat *attr, int valid,
                     bool notice)
{
	uid_t uid = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
	gid_t gid = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
	int rc = BACKING(&q->r, fchownat(h->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));

	return rc == -EPERM && notice ? 0 : rc;
}

/* The changes of one SETATTR, in the order ext4's setattr makes them. */
static int set_attributes(struct req *q, struct held *h, struct stat *attr, int valid,
                          struct fuse_file_info *fi, bool notice)
{
	int rc;

	if ((valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    (rc = reserve_chown(q, h, attr, valid)))
		return rc;
	if ((valid & FUSE_SET_ATTR_MODE) && (rc = set_mode(q, h, attr->st_mode)))
		return rc;
	if ((!valid || (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_CTIME))) &&
	    (rc = set_owner(q, h, attr, valid, notice)))
		return rc;
	if ((valid & FUSE_SET_ATTR_SIZE) && (rc = set_size(q, h, fi, attr->st_size)))
		return rc;
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
	             FUSE_SET_ATTR_MTIME_NOW))
		return set_times(q, h, attr, valid);
	return 0;
}

static void setattr_now(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                        struct fuse_file_info *fi)
{
	struct held *h = NULL;
	bool notice = false;
	struct stat st;
	struct req q;
	int rc;

	if (!(rc = req_begin_change(&q, req)) && !(rc = req_hold(&q, ino, &h))) {
		notice = is_write_notice(valid, h->fd);
		if (!(rc = set_attributes(&q, h, attr, valid, fi, notice)))
			rc = stat_fd(h->fd, &st);
	}
	if (h) {
		/* what was done before a refusal counts too */
		if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE))
			sfs_quota_sync(req_ledger(&q), h->node, NULL, h->fd);
		if (valid & FUSE_SET_ATTR_SIZE)
			sfs_coh_data(q.r.view, h->node, 0, 0);
		else
			sfs_coh_attr(q.r.view, h->node);
	}
	req_reply_attr(&q, rc, &st, notice ? 0 : attr_timeout_of(q.r.view, h ? h->node : NULL));
}

/* truncate(2) by name breaks the leases an open for writing would (natively vfs_truncate);
 * ftruncate comes with its open file, whose open broke them. */
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                struct fuse_file_info *fi)
{
	if (!(valid & FUSE_SET_ATTR_SIZE) || fi ||
	    !lease_break_first(req, ino, O_WRONLY, &(struct lease_then){.setattr = setattr_now,
	                                                               .attr = *attr,
	                                                               .valid = valid}))
		setattr_now(req, ino, attr, valid, fi);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;
	struct held *h;
	struct req q;
	int rc;

	if (!(rc = req_begin(&q, req)) && !(rc = req_hold(&q, ino, &h)) &&
	    !(rc = fstatvfs(h->fd, &st) < 0 ? -errno : 0))
		sfs_policy_statfs(&q.r, &st);
	req_reply_statfs(&q, rc, &st);
}

/* FS_IOC_GETFLAGS only (lsattr; Wine's casefold probe): the backing's flags plus what the
 * view adds (FS_CASEFOLD_FL on a casefold view's directories). ext4 answers an int. */
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
              struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
              size_t out_bufsz)
{
	struct sfs_node *n;
	int fd, attr = 0, rc = 0;
	struct req q;

	(void)arg, (void)in_buf, (void)in_bufsz;
	req_start(&q, req);
	n = sfs_node_of(q.r.view, ino);
	if (cmd != FS_IOC_GETFLAGS || !n || (flags & FUSE_IOCTL_COMPAT))
		rc = -ENOTTY;
	else if (out_bufsz < sizeof(attr))
		rc = -EINVAL;
	if (!rc) {
		struct sfs_dir *d = flags & FUSE_IOCTL_DIR ? dir_of(req, fi) : NULL;
		fd = flags & FUSE_IOCTL_DIR ? (d ? d->fd : -1) : file_of(req, fi)->fd;
		rc = ioctl(fd, FS_IOC_GETFLAGS, &attr) < 0 ? -errno : 0;
		attr |= sfs_policy_inode_flags(q.r.view, n->type);
	}
	req_reply_ioctl(&q, rc, &attr, sizeof(attr));
}
