/* Attributes (see ops.h): getattr, statx, setattr, statfs, and the inode flags ioctls. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "coherence.h"
#include "fuse_adapt.h"
#include "creds.h"
#include "services.h"
#include "view.h"

#define SETATTR_SUID_BITS (S_ISUID | S_ISGID)

/* What attributes are asked of: the open file fi when the kernel names one, else the node. */
static int attr_source(struct req *q, fuse_ino_t ino, struct fuse_file_info *fi, int *fd,
                       struct sfs_node **node)
{
	struct held *h;
	int rc;

	if (fi) {
		*fd = file_of(q->r.req, fi)->fd;
		*node = file_of(q->r.req, fi)->node;
		return *fd < 0 ? -EBADF : 0;
	}
	if ((rc = req_hold(q, ino, &h)))
		return rc;
	*fd = h->fd;
	*node = h->node;
	return 0;
}

/* A passthrough writer's allocations reach the ledger when the daemon sees them. */
static void attr_seen(struct req *q, struct sfs_node *node, int fd)
{
	if (node && atomic_load(&node->pt_writers))
		sfs_quota_sync(req_ledger(q), node, NULL, fd);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_node *node = NULL;
	struct stat st;
	struct req q;
	int fd = -1, rc;

	req_start(&q, req);
	if (!(rc = attr_source(&q, ino, fi, &fd, &node)) && !(rc = stat_fd(fd, &st)))
		attr_seen(&q, node, fd);
	req_reply_attr(&q, rc, &st, attr_timeout_of(q.r.view, node));
}

/* A statx asking for more than stat's fields (birth time), carried by the transport
 * (fuse_adapt.h): the backing's own answer for what was asked, with stat's fields always,
 * which the kernel keeps as the inode's attributes. */
void op_statx(fuse_req_t req, fuse_ino_t ino, uint32_t flags, uint32_t mask,
              struct fuse_file_info *fi)
{
	struct sfs_node *node = NULL;
	struct statx stx;
	struct req q;
	int fd = -1, rc;

	req_start(&q, req);
	if (!(rc = attr_source(&q, ino, fi, &fd, &node)) &&
	    !(rc = statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | (flags & AT_STATX_SYNC_TYPE),
	                 mask | STATX_BASIC_STATS, &stx) < 0 ? -errno : 0))
		attr_seen(&q, node, fd);
	req_reply_statx(&q, rc, &stx, attr_timeout_of(q.r.view, node));
}

/* A mode change whose only effect is clearing set-id bits is what a kernel that did not take
 * FUSE_HANDLE_KILLPRIV_V2 (fuse_io.h) sends before a write, truncate or chown by a
 * non-owner; it must succeed, so it is done with CAP_FOWNER. So is the chmod of an idmapped
 * view's namespace root holding CAP_FSETID, whose set-group-ID bit the kernel has weighed
 * (sfs_creds_ns_fsetid). Any other chmod runs as the caller. */
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
	if (only_clears_setid(st.st_mode, mode) || sfs_creds_ns_fsetid()) {
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

/* An idmapped mount changes no attribute of an object whose owner or group it does not map,
 * but to give it one it does (notify_change: EOVERFLOW). The kernel checked the ids it held;
 * another writer may have changed them since, so the object's ids of now decide. */
static int ids_still_mapped(const struct req *q, struct held *h, int valid)
{
	int given = (valid & FUSE_SET_ATTR_UID ? HELD_UID_UNMAPPED : 0) |
	            (valid & FUSE_SET_ATTR_GID ? HELD_GID_UNMAPPED : 0);

	return req_held_unmapped(q, h) & ~given ? -EOVERFLOW : 0;
}

/* The changes of one SETATTR, in the order ext4's setattr makes them. */
static int set_attributes(struct req *q, struct held *h, struct stat *attr, int valid,
                          struct fuse_file_info *fi, bool notice)
{
	int rc;

	if (!notice && (rc = ids_still_mapped(q, h, valid)))
		return rc;
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

/* ---- ioctl: inode flags and extended attributes (lsattr, chattr, xfs_io), carried statx ---- */

/* The backing descriptor of the kernel's open file or directory fh. The kernel opens one for
 * every flags ioctl (fs/fuse/ioctl.c, as the caller, for reading) and closes it after. */
static int ioctl_fd(fuse_req_t req, struct fuse_file_info *fi, unsigned flags)
{
	int fd;

	if (flags & FUSE_IOCTL_DIR) {
		struct sfs_dir *d = dir_of(req, fi);
		fd = d ? d->fd : -1;
	} else {
		fd = file_of(req, fi)->fd;
	}
	return fd < 0 ? -EBADF : fd;
}

/* ext4's own rules (fs/ext4/ioctl.c) ask a capability for some changes; the kernel checked
 * the caller's before it sent the request. A root caller acts with all its capabilities
 * (creds.h); another holding the one a change asks for (CapEff of its process) has it
 * raised for the one backing call, so a view grants what ext4 grants and no more. */
static unsigned caps_for_change(const struct req *q, unsigned changed_flags)
{
	unsigned priv = 0;

	if (changed_flags & (FS_APPEND_FL | FS_IMMUTABLE_FL) &&
	    sfs_pid_has_cap(q->r.ctx->pid, CAP_LINUX_IMMUTABLE))
		priv |= SFS_PRIV_IMMUTABLE;
	if (changed_flags & FS_JOURNAL_DATA_FL && sfs_pid_has_cap(q->r.ctx->pid, CAP_SYS_RESOURCE))
		priv |= SFS_PRIV_RESOURCE;
	return priv;
}

static int backing_ioctl(unsigned priv, int fd, unsigned long cmd, void *arg)
{
	int rc;

	if (priv)
		sfs_priv_begin(priv);
	rc = ioctl(fd, cmd, arg) < 0 ? -errno : 0;
	if (priv)
		sfs_priv_end();
	return rc;
}

static int get_flags(const struct req *q, const struct sfs_node *n, int fd, unsigned *flags)
{
	if (ioctl(fd, FS_IOC_GETFLAGS, flags) < 0)
		return -errno;
	*flags |= sfs_policy_inode_flags(q->r.view, n->type);
	return 0;
}

/* The kernel sends the whole new word (the old one with chattr's change). The view's own
 * flags may only be sent back as shown: turning casefold on or off is a mount option. */
static int set_flags(struct req *q, const struct sfs_node *n, int fd, unsigned want)
{
	unsigned old, shown;

	if (ioctl(fd, FS_IOC_GETFLAGS, &old) < 0)
		return -errno;
	shown = old | sfs_policy_inode_flags(q->r.view, n->type);
	if ((want ^ shown) & SFS_POLICY_VIEW_FLAGS)
		return -EOPNOTSUPP;
	want = (want & ~SFS_POLICY_VIEW_FLAGS) | (old & SFS_POLICY_VIEW_FLAGS);
	return backing_ioctl(caps_for_change(q, old ^ want), fd, FS_IOC_SETFLAGS, &want);
}

static int set_xattr_flags(struct req *q, int fd, struct fsxattr *want)
{
	struct fsxattr old;
	unsigned changed = 0;

	if (ioctl(fd, FS_IOC_FSGETXATTR, &old) < 0)
		return -errno;
	if ((old.fsx_xflags ^ want->fsx_xflags) & FS_XFLAG_APPEND)
		changed |= FS_APPEND_FL;
	if ((old.fsx_xflags ^ want->fsx_xflags) & FS_XFLAG_IMMUTABLE)
		changed |= FS_IMMUTABLE_FL;
	return backing_ioctl(caps_for_change(q, changed), fd, FS_IOC_FSSETXATTR, want);
}

/* FITRIM (fstrim) trims the backing's free blocks, as ext4 does for a capable caller on any
 * of its files, ro mounts included. */
static int trim(struct req *q, int fd, const void *in, void *out)
{
	struct fstrim_range range;
	int rc;

	if (!sfs_pid_has_cap(q->r.ctx->pid, CAP_SYS_ADMIN))
		return -EPERM;
	memcpy(&range, in, sizeof(range));
	if (!(rc = backing_ioctl(SFS_PRIV_ADMIN, fd, FITRIM, &range)))
		memcpy(out, &range, sizeof(range));
	return rc;
}

/* The label is the backing's, as every mount of an ext4 device shows the device's; ext4
 * lets a capable caller change it on a writable mount. */
static int set_label(struct req *q, int fd, const void *in)
{
	char label[FSLABEL_MAX];

	if (!sfs_pid_has_cap(q->r.ctx->pid, CAP_SYS_ADMIN))
		return -EPERM;
	memcpy(label, in, sizeof(label));
	return backing_ioctl(SFS_PRIV_ADMIN, fd, FS_IOC_SETFSLABEL, label);
}

/* The ioctls served, with the fixed sizes the kernel sends and expects for them. */
static const struct served_ioctl {
	unsigned int cmd;
	size_t in, out;
	bool changes;     /* as the caller, and refused by a ro view */
	bool moves_ctime; /* of the inode: the views' cached attributes are dropped */
} served_ioctls[] = {
	{FS_IOC_GETFLAGS, 0, sizeof(unsigned), false, false},
	{FS_IOC_SETFLAGS, sizeof(unsigned), 0, true, true},
	{FS_IOC_FSGETXATTR, 0, sizeof(struct fsxattr), false, false},
	{FS_IOC_FSSETXATTR, sizeof(struct fsxattr), 0, true, true},
	{FITRIM, sizeof(struct fstrim_range), sizeof(struct fstrim_range), false, false},
	{FS_IOC_GETFSLABEL, 0, FSLABEL_MAX, false, false},
	{FS_IOC_GETVERSION, 0, sizeof(int), false, false}, /* lsattr -v: ext4 writes an int */
	{FS_IOC_SETFSLABEL, FSLABEL_MAX, 0, true, false},  /* the superblock's, no inode's */
};

static const struct served_ioctl *served(unsigned int cmd)
{
	for (size_t i = 0; i < sizeof(served_ioctls) / sizeof(served_ioctls[0]); i++)
		if (served_ioctls[i].cmd == cmd)
			return &served_ioctls[i];
	return NULL;
}

static int serve_ioctl(struct req *q, struct sfs_node *n, int fd, unsigned int cmd,
                       const void *in, void *out)
{
	switch (cmd) {
	case FS_IOC_GETFLAGS:
		return get_flags(q, n, fd, out);
	case FS_IOC_SETFLAGS: {
		unsigned want;
		memcpy(&want, in, sizeof(want));
		return set_flags(q, n, fd, want);
	}
	case FS_IOC_FSGETXATTR:
	case FS_IOC_GETFSLABEL:
	case FS_IOC_GETVERSION: /* the backing's answer as it is */
		return ioctl(fd, cmd, out) < 0 ? -errno : 0;
	case FS_IOC_FSSETXATTR: {
		struct fsxattr want;
		memcpy(&want, in, sizeof(want));
		return set_xattr_flags(q, fd, &want);
	}
	case FITRIM:
		return trim(q, fd, in, out);
	case FS_IOC_SETFSLABEL:
		return set_label(q, fd, in);
	}
	return -ENOTTY;
}

static void serve_known_ioctl(fuse_req_t req, fuse_ino_t ino, const struct served_ioctl *io,
                              struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                              size_t in_bufsz, size_t out_bufsz)
{
	union {
		unsigned flags;
		struct fsxattr fsx;
		struct fstrim_range range;
		char label[FSLABEL_MAX];
	} out = {0};
	struct sfs_node *n;
	struct req q;
	int fd, rc = 0;

	if (io->changes)
		rc = req_begin_change(&q, req);
	else
		req_start(&q, req); /* what the ioctl asks is the backing's to check */
	n = sfs_node_of(q.r.view, ino);
	if (!rc && (!n || (flags & FUSE_IOCTL_COMPAT) || in_bufsz < io->in || out_bufsz < io->out))
		rc = -ENOTTY;
	if (!rc && (fd = ioctl_fd(req, fi, flags)) < 0)
		rc = fd;
	if (!rc)
		rc = serve_ioctl(&q, n, fd, io->cmd, in_buf, &out);
	if (!rc && io->moves_ctime) { /* and the kernel keeps no flags to update */
		sfs_coh_own_data(q.r.view, n, -1, 0);
		sfs_coh_attr(q.r.view, n);
	}
	req_reply_ioctl(&q, rc, &out, io->out);
}

/* The kernel forwards the file-attribute ioctls (its fileattr requests) and any other a
 * caller makes on an open file of the view; those strictfs does not serve answer ENOTTY,
 * as on a file system without them (contract §4.7). */
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
              struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
              size_t out_bufsz)
{
	if (flags & SFS_IOCTL_STATX) {
		uint64_t packed = (uintptr_t)arg;
		op_statx(req, ino, SFS_STATX_ARG_FLAGS(packed), SFS_STATX_ARG_MASK(packed),
		         flags & SFS_IOCTL_STATX_FH ? fi : NULL);
		return;
	}
	const struct served_ioctl *io = served(cmd);

	if (io) {
		serve_known_ioctl(req, ino, io, fi, flags, in_buf, in_bufsz, out_bufsz);
	} else {
		struct req q;
		req_start(&q, req);
		req_reply_err(&q, -ENOTTY);
	}
}
