/* The one fuse_lowlevel_ops table shared by every view (view.h), and what a view asks the
 * kernel for at INIT. The handlers are in the files of the objects they serve (ops.h). */
#include "ops.h"

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfs_view *v = userdata;

	/* 1 MiB is the most libfuse 3.14 can take: above it the session dies (doc/kernel.md §4.1) */
	conn->max_write = 1u << 20;
	/* no FUSE_CAP_SPLICE_READ: the transport must see each request's header as it reads it
	 * (its id for a resent request's intent, the handover gate: fuse_io.h), which a splice
	 * into a pipe hides; data is written by kernel passthrough where it matters */
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	/* node ids are file handles, found again after the daemon forgot them (inode.h) */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	sfs_policy_init(v, conn);
}

const struct fuse_lowlevel_ops sfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.release = op_release,
	.flush = op_flush,
	.getlk = op_getlk,
	.setlk = op_setlk,
	.flock = op_flock,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
	.ioctl = op_ioctl,
};
