/* Requests libfuse 3.14 cannot dispatch, as ones it can (see fuse_adapt.h). */
#include "fuse_adapt.h"

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>

#define TMPFILE_NAME "/"

/* FUSE_STATX and its request (<linux/fuse.h> 7.39) */
#define OP_STATX 52
struct statx_in {
	uint32_t getattr_flags;
	uint32_t reserved;
	uint64_t fh;
	uint32_t sx_flags;
	uint32_t sx_mask;
};

_Static_assert(sizeof(struct sfs_fuse_statx) == 256, "struct fuse_statx is 256 bytes");
_Static_assert(sizeof(struct sfs_fuse_statx_out) == 288, "struct fuse_statx_out");

static size_t adapt_tmpfile(struct fuse_in_header *in, size_t len)
{
	const size_t name_at = sizeof(*in) + sizeof(struct fuse_create_in);

	if (len == name_at + sizeof(TMPFILE_NAME) &&
	    !memcmp((const char *)in + name_at, TMPFILE_NAME, sizeof(TMPFILE_NAME)))
		in->opcode = FUSE_CREATE;
	return len;
}

static size_t adapt_statx(struct fuse_in_header *in, size_t len, size_t cap)
{
	const size_t ioctl_len = sizeof(*in) + sizeof(struct fuse_ioctl_in);
	struct statx_in sx;
	struct fuse_ioctl_in io = {0};

	if (len != sizeof(*in) + sizeof(sx) || cap < ioctl_len)
		return len;
	memcpy(&sx, in + 1, sizeof(sx));
	io.fh = sx.fh;
	io.flags = SFS_IOCTL_STATX | (sx.getattr_flags & FUSE_GETATTR_FH ? SFS_IOCTL_STATX_FH : 0);
	io.arg = (uint64_t)sx.sx_mask << 32 | sx.sx_flags;
	memcpy(in + 1, &io, sizeof(io));
	in->opcode = FUSE_IOCTL;
	in->len = ioctl_len;
	return ioctl_len;
}

size_t sfs_fuse_adapt(void *buf, size_t len, size_t cap)
{
	struct fuse_in_header *in = buf;

	if (len < sizeof(*in) || in->len != len || cap < len)
		return len;
	if (in->opcode == FUSE_TMPFILE)
		return adapt_tmpfile(in, len);
	if (in->opcode == OP_STATX)
		return adapt_statx(in, len, cap);
	if (in->opcode == FUSE_IOCTL && len >= sizeof(*in) + sizeof(struct fuse_ioctl_in))
		/* only a rewritten STATX has these bits, so the handler may believe them */
		((struct fuse_ioctl_in *)(in + 1))->flags &= ~(SFS_IOCTL_STATX | SFS_IOCTL_STATX_FH);
	return len;
}

/* libfuse 3.14's timeouts: whole seconds, then nanoseconds, clamped as it does. */
static uint64_t timeout_sec(double t)
{
	return t > (double)ULONG_MAX ? ULONG_MAX : t < 0.0 ? 0 : (uint64_t)t;
}

static uint32_t timeout_nsec(double t)
{
	double f = t - (double)timeout_sec(t);

	return f < 0.0 ? 0 : f >= 0.999999999 ? 999999999 : (uint32_t)(f * 1.0e9);
}

static struct sfs_fuse_sx_time sx_time(struct statx_timestamp t)
{
	return (struct sfs_fuse_sx_time){.tv_sec = t.tv_sec, .tv_nsec = t.tv_nsec};
}

void sfs_fuse_statx_out_fill(struct sfs_fuse_statx_out *out, const struct statx *stx,
                             double timeout)
{
	struct sfs_fuse_statx *sx = &out->stat;

	memset(out, 0, sizeof(*out));
	out->attr_valid = timeout_sec(timeout);
	out->attr_valid_nsec = timeout_nsec(timeout);
	sx->mask = stx->stx_mask;
	sx->blksize = stx->stx_blksize;
	sx->attributes = stx->stx_attributes;
	sx->attributes_mask = stx->stx_attributes_mask;
	sx->nlink = stx->stx_nlink;
	sx->uid = stx->stx_uid;
	sx->gid = stx->stx_gid;
	sx->mode = stx->stx_mode;
	sx->ino = stx->stx_ino;
	sx->size = stx->stx_size;
	sx->blocks = stx->stx_blocks;
	sx->atime = sx_time(stx->stx_atime);
	sx->btime = sx_time(stx->stx_btime);
	sx->ctime = sx_time(stx->stx_ctime);
	sx->mtime = sx_time(stx->stx_mtime);
	sx->rdev_major = stx->stx_rdev_major;
	sx->rdev_minor = stx->stx_rdev_minor;
	sx->dev_major = stx->stx_dev_major;
	sx->dev_minor = stx->stx_dev_minor;
}

static void fill_attr(struct fuse_attr *a, const struct stat *st)
{
	a->ino = st->st_ino;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = st->st_rdev;
	a->size = st->st_size;
	a->blksize = st->st_blksize;
	a->blocks = st->st_blocks;
	a->atime = st->st_atim.tv_sec;
	a->mtime = st->st_mtim.tv_sec;
	a->ctime = st->st_ctim.tv_sec;
	a->atimensec = st->st_atim.tv_nsec;
	a->mtimensec = st->st_mtim.tv_nsec;
	a->ctimensec = st->st_ctim.tv_nsec;
}

/* In 7.40 the u32 after open_flags is backing_id: Debian 12's header (7.38) calls it padding,
 * Debian 13's (7.41) by name, so it is named by the field before it. */
#define OPEN_OUT_BACKING_ID (offsetof(struct fuse_open_out, open_flags) + sizeof(uint32_t))
#define SFS_FOPEN_PASSTHROUGH (1u << 7)

_Static_assert(sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out) ==
               sizeof(((struct sfs_fuse_open_reply *)0)->bytes), "CREATE's reply");

static void fill_open(unsigned char *at, const struct fuse_file_info *fi, int backing_id)
{
	struct fuse_open_out o = {.fh = fi->fh};

	if (fi->direct_io)
		o.open_flags |= FOPEN_DIRECT_IO;
	if (fi->keep_cache)
		o.open_flags |= FOPEN_KEEP_CACHE;
	if (fi->cache_readdir)
		o.open_flags |= FOPEN_CACHE_DIR;
	if (fi->nonseekable)
		o.open_flags |= FOPEN_NONSEEKABLE;
	if (fi->noflush)
		o.open_flags |= FOPEN_NOFLUSH;
	if (backing_id > 0) {
		o.open_flags &= ~(FOPEN_KEEP_CACHE | FOPEN_DIRECT_IO | FOPEN_CACHE_DIR);
		o.open_flags |= SFS_FOPEN_PASSTHROUGH;
		memcpy((unsigned char *)&o + OPEN_OUT_BACKING_ID, &backing_id, sizeof(backing_id));
	}
	memcpy(at, &o, sizeof(o));
}

void sfs_fuse_open_reply(struct sfs_fuse_open_reply *out, const struct fuse_file_info *fi,
                         int backing_id)
{
	memset(out, 0, sizeof(*out));
	fill_open(out->bytes, fi, backing_id);
	out->len = sizeof(struct fuse_open_out);
}

void sfs_fuse_create_reply(struct sfs_fuse_open_reply *out, const struct fuse_entry_param *e,
                           const struct fuse_file_info *fi, int backing_id)
{
	struct fuse_entry_out entry = {
		.nodeid = e->ino,
		.generation = e->generation,
		.entry_valid = timeout_sec(e->entry_timeout),
		.entry_valid_nsec = timeout_nsec(e->entry_timeout),
		.attr_valid = timeout_sec(e->attr_timeout),
		.attr_valid_nsec = timeout_nsec(e->attr_timeout),
	};

	memset(out, 0, sizeof(*out));
	fill_attr(&entry.attr, &e->attr);
	memcpy(out->bytes, &entry, sizeof(entry));
	fill_open(out->bytes + sizeof(entry), fi, backing_id);
	out->len = sizeof(entry) + sizeof(struct fuse_open_out);
}
