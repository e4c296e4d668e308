/* Requests the kernel sends that libfuse 3.14 has no handler for, handed over as ones it has
 * (the transport calls this on every request before libfuse sees it):
 * - FUSE_TMPFILE (open(dir, O_TMPFILE)) carries what FUSE_CREATE carries, with the name "/"
 *   that the VFS gives every O_TMPFILE dentry and that no CREATE can carry (a name holds no
 *   '/'); its reply is CREATE's (entry and open file). It becomes a CREATE of "/", which the
 *   create handler serves as a file with no name (src/ops/file.c). Unanswered, the kernel
 *   would take the ENOSYS libfuse gives it as "no O_TMPFILE here", for good (EOPNOTSUPP).
 * - FUSE_STATX (protocol 7.39: a statx asking for more than stat's fields, birth time) has
 *   no counterpart, so it travels as a FUSE_IOCTL whose flags carry SFS_IOCTL_STATX, a bit
 *   the kernel never sets: the ioctl handler hands it to the statx handler, which answers
 *   with struct sfs_fuse_statx_out (fuse_reply_buf). Unanswered, ENOSYS would make the
 *   kernel stop asking and report no birth time on the connection, for good.
 * A libfuse with these operations (3.16: tmpfile, 3.18: statx) makes each rewrite moot. */
#ifndef SFS_FUSE_ADAPT_H
#define SFS_FUSE_ADAPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* buf holds one request of len bytes as read (header first), in a buffer of cap bytes.
 * Returns the request's length after the rewrite (len when untouched). */
size_t sfs_fuse_adapt(void *buf, size_t len, size_t cap);

/* The FUSE_IOCTL a FUSE_STATX became: its flags have SFS_IOCTL_STATX, and SFS_IOCTL_STATX_FH
 * when the kernel named an open file (its fh is the ioctl's); its arg packs statx's flags
 * (low 32 bits) and the mask asked for (high 32 bits). */
#define SFS_IOCTL_STATX (1u << 30)
#define SFS_IOCTL_STATX_FH (1u << 29)
#define SFS_STATX_ARG_FLAGS(arg) ((uint32_t)(arg))
#define SFS_STATX_ARG_MASK(arg) ((uint32_t)((arg) >> 32))

/* The reply to FUSE_STATX (<linux/fuse.h> 7.39, newer than Debian 12's header): the attribute
 * timeout, then the fields of struct statx up to the device numbers, with room after them. */
struct sfs_fuse_sx_time {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};
struct sfs_fuse_statx {
	uint32_t mask;
	uint32_t blksize;
	uint64_t attributes;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint16_t mode;
	uint16_t spare0;
	uint64_t ino;
	uint64_t size;
	uint64_t blocks;
	uint64_t attributes_mask;
	struct sfs_fuse_sx_time atime, btime, ctime, mtime;
	uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
	uint64_t spare2[14];
};
struct sfs_fuse_statx_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec;
	uint32_t flags;
	uint64_t spare[2];
	struct sfs_fuse_statx stat;
};

/* The reply to a FUSE_STATX from the backing's statx and the attribute timeout (seconds). */
void sfs_fuse_statx_out_fill(struct sfs_fuse_statx_out *out, const struct statx *stx,
                             double timeout);

/* Replies libfuse 3.14 cannot make (protocol 7.40, newer than Debian 12's header): an OPEN or
 * CREATE reply that hands the kernel backing file backing_id (FUSE_DEV_IOC_BACKING_OPEN), so
 * that it reads, writes and maps the backing file itself. The open flags are libfuse's for
 * fi, but FOPEN_PASSTHROUGH instead of the page-cache ones the kernel refuses beside it
 * (FOPEN_KEEP_CACHE fails the open EIO). With backing_id 0 the bytes are exactly
 * fuse_reply_open's and fuse_reply_create's. Sent with fuse_reply_buf; libfuse 3.17 has this
 * as fuse_file_info.backing_id. */
struct fuse_file_info;
struct fuse_entry_param;
struct sfs_fuse_open_reply {
	unsigned char bytes[144]; /* fuse_entry_out (128), then fuse_open_out (16) */
	size_t len;
};
void sfs_fuse_open_reply(struct sfs_fuse_open_reply *out, const struct fuse_file_info *fi,
                         int backing_id);
void sfs_fuse_create_reply(struct sfs_fuse_open_reply *out, const struct fuse_entry_param *e,
                           const struct fuse_file_info *fi, int backing_id);

#endif
