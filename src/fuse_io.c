/* The view's /dev/fuse transport (see fuse_io.h). */
#define FUSE_USE_VERSION 314
#include "fuse_io.h"

#include <fcntl.h>
#include <stddef.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Newer than Debian 12's <linux/fuse.h> (protocol 7.39). */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* What the INIT reply asks for beyond libfuse, where offered (see fuse_io.h). */
static const uint64_t added_flags = FUSE_HANDLE_KILLPRIV_V2 | FUSE_DIRECT_IO_ALLOW_MMAP;

static ssize_t io_read(int fd, void *buf, size_t len, void *view)
{
	struct sfs_fuse_io *io = sfs_view_fuse_io(view);
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags) + 4) &&
	    in->opcode == FUSE_INIT &&
	    !atomic_load(&io->init_unique)) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		uint64_t offered = init->flags;
		if ((init->flags & FUSE_INIT_EXT) &&
		    n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) + 4))
			offered |= (uint64_t)init->flags2 << 32;
		atomic_store(&io->offered, offered);
		atomic_store(&io->init_unique, in->unique);
	}
	return n;
}

/* The INIT reply: header, then fuse_init_out. Only a successful reply of the protocol this
 * kernel speaks (7.x) is changed, and only by adding flags the kernel offered. */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *view)
{
	struct sfs_fuse_io *io = sfs_view_fuse_io(view);
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t unique = atomic_load(&io->init_unique);

	if (unique && count == 2 && iov[0].iov_len == sizeof(*out) && out->unique == unique &&
	    out->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
	    iov[1].iov_len <= sizeof(struct fuse_init_out)) {
		struct fuse_init_out init;
		struct iovec patched[2] = {iov[0], {&init, iov[1].iov_len}};

		uint64_t add = atomic_load(&io->offered) & added_flags;

		atomic_store(&io->init_unique, 0);
		memcpy(&init, iov[1].iov_base, iov[1].iov_len);
		if (add >> 32 && iov[1].iov_len < offsetof(struct fuse_init_out, flags2) + 4)
			add &= 0xffffffffu; /* a reply too short to carry flags2 */
		if (init.major == FUSE_KERNEL_VERSION && add) {
			init.flags |= (uint32_t)add;
			if (add >> 32) {
				init.flags |= FUSE_INIT_EXT;
				init.flags2 |= (uint32_t)(add >> 32);
			}
			return writev(fd, patched, 2);
		}
	}
	return writev(fd, iov, count);
}

static ssize_t io_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                 unsigned int flags, void *view)
{
	(void)view;
	return splice(fdin, offin, fdout, offout, len, flags);
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                              unsigned int flags, void *view)
{
	(void)view;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int sfs_fuse_io_attach(struct fuse_session *se, struct sfs_fuse_io *io, int fd)
{
	static const struct fuse_custom_io ops = {
		.read = io_read,
		.writev = io_writev,
		.splice_receive = io_splice_receive,
		.splice_send = io_splice_send,
	};

	atomic_store(&io->init_unique, 0);
	atomic_store(&io->offered, 0);
	return fuse_session_custom_io(se, &ops, fd);
}
