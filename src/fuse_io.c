/* The view's /dev/fuse transport (see fuse_io.h). */
#define FUSE_USE_VERSION 314
#include "fuse_io.h"
#include "fuse_gate.h"
#include "fuse_uring.h"
#include "fuse_adapt.h"

#include <fcntl.h>
#include <stddef.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* Newer than Debian 12's <linux/fuse.h> (protocol 7.38): 7.39 and 7.40. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#ifndef FUSE_PASSTHROUGH
#define FUSE_PASSTHROUGH (1ULL << 37)
struct fuse_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(FUSE_DEV_IOC_MAGIC, 1, struct fuse_backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(FUSE_DEV_IOC_MAGIC, 2, uint32_t)
#endif
/* In 7.40 the u32 after flags2 is max_stack_depth. Named by the field before it, which every
 * release's header has: Debian 12's (7.38) calls it unused[0], Debian 13's (7.41) by name. */
#define INIT_OUT_MAX_STACK_DEPTH (offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t))

#ifndef FUSE_ALLOW_IDMAP
#define FUSE_ALLOW_IDMAP (1ULL << 40) /* 7.40; Debian 12's header is 7.38 */
#endif

/* What the INIT reply asks for beyond libfuse, where offered (see fuse_io.h). */
static const uint64_t added_flags = FUSE_HANDLE_KILLPRIV_V2 | FUSE_DIRECT_IO_ALLOW_MMAP;

/* A view of a daemon that kept crashing (contract §6, "Failover"): the transport answers every
 * request EIO itself, before any handler could crash again; forgets and interrupts want no
 * answer. */
static bool answered_failed(struct sfs_fuse_io *io, int fd, const void *buf, ssize_t n)
{
	const struct fuse_in_header *in = buf;
	struct fuse_out_header out;

	if (!atomic_load(&io->failed) || n < (ssize_t)sizeof(*in))
		return false;
	if (in->opcode != FUSE_FORGET && in->opcode != FUSE_BATCH_FORGET &&
	    in->opcode != FUSE_INTERRUPT) {
		out = (struct fuse_out_header){.len = sizeof(out), .error = -EIO, .unique = in->unique};
		if (write(fd, &out, sizeof(out)) < 0) {
			/* the caller is gone, or the connection: nothing to do either way */
		}
	}
	return true;
}

void sfs_fuse_io_expect_writes(struct sfs_fuse_io *io)
{
	atomic_store(&io->writes, true);
}

/* A daemon killed while the kernel copies a request into a read-buffer page not yet faulted
 * in loses that request: the kernel's page pinning gives up on the fatal signal and it ends
 * the request EIO instead of keeping it for a successor (doc/kernel.md §4.11). Only WRITEs
 * reach far into the buffer, so a thread faults its whole buffer in, once, where they come;
 * elsewhere (idle views, passthrough, metadata walks) the buffers stay as small as the
 * requests they saw. */
static void fault_in_for_writes(struct sfs_fuse_io *io, void *buf, size_t len)
{
	static __thread void *done;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start, end;

	if (buf == done || !atomic_load(&io->writes))
		return;
	start = (uintptr_t)buf & ~(page - 1);
	end = ((uintptr_t)buf + len + page - 1) & ~(page - 1);
	if (madvise((void *)start, end - start, MADV_POPULATE_WRITE) == 0)
		done = buf;
}

/* The first WRITE whose data reaches past the buffer's first page marks the view. */
static void note_write(struct sfs_fuse_io *io, const struct fuse_in_header *in, ssize_t n)
{
	if (in->opcode == FUSE_WRITE && n > (ssize_t)sysconf(_SC_PAGESIZE) && !atomic_load(&io->writes))
		sfs_fuse_io_expect_writes(io);
}

static ssize_t io_read(int fd, void *buf, size_t len, void *view)
{
	struct sfs_fuse_io *io = sfs_view_fuse_io(view);
	const struct fuse_in_header *in = buf;
	ssize_t n;

	sfs_fuse_gate_end(); /* the request this thread read before, if any, is done */
	fault_in_for_writes(io, buf, len);
	while ((n = read(fd, buf, len)) > 0 && answered_failed(io, fd, buf, n))
		;
	if (n > 0) {
		sfs_fuse_gate_begin(); /* held: the kernel resends it to the successor */
		if (n >= (ssize_t)sizeof(*in)) {
			sfs_fuse_gate_set_unique(in->unique);
			note_write(io, in, n);
		}
		n = (ssize_t)sfs_fuse_adapt(buf, (size_t)n, len);
	}

	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags) + 4) &&
	    in->opcode == FUSE_INIT &&
	    !atomic_load(&io->init_unique)) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		uint64_t offered = init->flags;
		if ((init->flags & FUSE_INIT_EXT) &&
		    n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) + 4))
			offered |= (uint64_t)init->flags2 << 32;
		atomic_store(&io->offered, offered);
		if ((size_t)n <= sizeof(io->init_req)) {
			memcpy(io->init_req, buf, n);
			io->init_len = n;
		}
		atomic_store(&io->init_unique, in->unique);
	}
	return n;
}

/* A reply goes back the way its request came: the serving io_uring entry's, else /dev/fuse
 * (requests read from it, and notifications). */
static ssize_t send_reply(int fd, struct iovec *iov, int count)
{
	ssize_t n = sfs_fuse_uring_take_reply(iov, count);

	return n == -2 ? writev(fd, iov, count) : n;
}

/* The payload an io_uring entry must hold for this INIT reply: the kernel's
 * max(FUSE_MIN_READ_BUFFER, max_write, max_pages pages). */
static size_t uring_payload(const struct fuse_init_out *init)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = init->flags & FUSE_MAX_PAGES ? init->max_pages : 32;
	size_t p = 8192;

	if (init->max_write > p)
		p = init->max_write;
	return pages * page > p ? pages * page : p;
}

/* Sets the rings up before the reply asks for io_uring: afterwards the kernel holds every
 * request until each CPU's queue has an entry, so nothing may fail then. */
static struct sfs_fuse_uring *uring_for(struct sfs_fuse_io *io, int fd,
                                        const struct fuse_init_out *init)
{
	struct sfs_fuse_uring *u;

	if (!(atomic_load(&io->offered) & SFS_FUSE_OVER_IO_URING)) {
		atomic_store(&io->uring_state, SFS_URING_NOT_OFFERED);
		return NULL;
	}
	if (!(u = sfs_fuse_uring_prepare(io->se, fd, uring_payload(init),
	                                 io->inherit.fd >= 0 ? &io->inherit : NULL, &io->failed))) {
		atomic_store(&io->uring_errno, errno);
		atomic_store(&io->uring_state, SFS_URING_SETUP_FAILED);
	} else {
		sfs_fuse_uring_area(u, &io->area);
	}
	return u;
}

/* The INIT reply: header, then fuse_init_out. Only a successful reply of the protocol this
 * kernel speaks (7.x) is changed, and only by adding flags the kernel offered. */
static ssize_t write_init_reply(struct sfs_fuse_io *io, int fd, struct iovec *iov)
{
	struct fuse_init_out init;
	struct iovec patched[2] = {iov[0], {&init, iov[1].iov_len}};
	uint64_t add = atomic_load(&io->offered) & added_flags;
	bool has_flags2 = iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + 4;
	struct sfs_fuse_uring *u = NULL;
	ssize_t n;

	atomic_store(&io->init_unique, 0);
	memcpy(&init, iov[1].iov_base, iov[1].iov_len);
	if (init.major != FUSE_KERNEL_VERSION)
		return writev(fd, iov, 2);
	if (io->want_passthrough && !(init.flags & FUSE_WRITEBACK_CACHE) &&
	    iov[1].iov_len >= INIT_OUT_MAX_STACK_DEPTH + 4)
		add |= atomic_load(&io->offered) & FUSE_PASSTHROUGH;
	/* every view is default_permissions, which the kernel requires of an idmapped one */
	if (io->want_idmap)
		add |= atomic_load(&io->offered) & FUSE_ALLOW_IDMAP;
	if (!has_flags2)
		add &= 0xffffffffu; /* a reply too short to carry flags2 */
	else if ((u = uring_for(io, fd, &init)))
		add |= SFS_FUSE_OVER_IO_URING;
	init.flags |= (uint32_t)add;
	if (add >> 32) {
		init.flags |= FUSE_INIT_EXT;
		init.flags2 |= (uint32_t)(add >> 32);
	}
	if (add & FUSE_PASSTHROUGH) {
		/* the backing files are ext4's, which stacks on nothing */
		uint32_t depth = 1;
		memcpy((char *)&init + INIT_OUT_MAX_STACK_DEPTH, &depth, sizeof(depth));
	}
	if (io->replaying) {
		/* the kernel has had this reply from the predecessor; with io_uring, the new
		 * entries are registered as at the start (the predecessor's died with it) */
		n = iov[0].iov_len + iov[1].iov_len;
	} else {
		if (io->on_init)
			io->on_init(io);
		n = writev(fd, patched, 2);
	}
	atomic_store(&io->passthrough, n >= 0 && (add & FUSE_PASSTHROUGH));
	if (u && n >= 0) {
		/* the kernel took the reply, and with it made the connection ready for
		 * registrations (it answers EAGAIN before) */
		atomic_store(&io->uring, u);
		atomic_store(&io->uring_state, SFS_URING_ON);
		sfs_fuse_uring_start(u);
	} else {
		sfs_fuse_uring_destroy(u);
		io->area.fd = -1;
	}
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *view)
{
	struct sfs_fuse_io *io = sfs_view_fuse_io(view);
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t unique = atomic_load(&io->init_unique);

	if (unique && count == 2 && iov[0].iov_len == sizeof(*out) && out->unique == unique &&
	    out->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
	    iov[1].iov_len <= sizeof(struct fuse_init_out))
		return write_init_reply(io, fd, iov);
	return send_reply(fd, iov, count);
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

	io->fd = fd;
	io->se = se;
	io->area.fd = io->inherit.fd = -1;
	atomic_store(&io->failed, false);
	atomic_store(&io->uring, NULL);
	atomic_store(&io->uring_state, SFS_URING_PENDING);
	atomic_store(&io->uring_errno, 0);
	atomic_store(&io->init_unique, 0);
	atomic_store(&io->offered, 0);
	atomic_store(&io->passthrough, false);
	atomic_store(&io->writes, false);
	return fuse_session_custom_io(se, &ops, fd);
}

int sfs_fuse_io_backing_open(struct sfs_fuse_io *io, int fd)
{
	struct fuse_backing_map map = {.fd = fd};
	int id = ioctl(io->fd, FUSE_DEV_IOC_BACKING_OPEN, &map);

	return id < 0 ? -errno : id == 0 ? -EIO : id;
}

void sfs_fuse_io_backing_close(struct sfs_fuse_io *io, int id)
{
	uint32_t u = id;

	ioctl(io->fd, FUSE_DEV_IOC_BACKING_CLOSE, &u);
}

int sfs_fuse_io_replay_init(struct sfs_fuse_io *io, const void *init, size_t len)
{
	struct fuse_in_header in;
	struct fuse_init_in i = {0};
	struct fuse_buf buf = {.size = len};
	uint64_t offered;
	char *mem;

	/* the record is a handover state's bytes, aligned for nothing: read by copies */
	if (len < sizeof(in) + offsetof(struct fuse_init_in, flags) + 4 || len > sizeof(io->init_req))
		return -EINVAL;
	memcpy(&in, init, sizeof(in));
	memcpy(&i, (const char *)init + sizeof(in),
	       len - sizeof(in) < sizeof(i) ? len - sizeof(in) : sizeof(i));
	if (in.opcode != FUSE_INIT || in.len != len)
		return -EINVAL;
	/* libfuse may keep pointers into the buffer while it processes it, never after */
	if (!(mem = malloc(len)))
		return -ENOMEM;
	memcpy(mem, init, len);
	buf.mem = mem;
	memcpy(io->init_req, init, len);
	io->init_len = len;
	offered = i.flags;
	if ((i.flags & FUSE_INIT_EXT) && len >= sizeof(in) + offsetof(struct fuse_init_in, flags2) + 4)
		offered |= (uint64_t)i.flags2 << 32;
	atomic_store(&io->offered, offered);
	atomic_store(&io->init_unique, in.unique);
	io->replaying = true;
	fuse_session_process_buf(io->se, &buf);
	io->replaying = false;
	free(mem);
	return atomic_load(&io->init_unique) ? -EPROTO : 0;
}

/* FUSE_NOTIFY_RESEND (protocol 7.40, Linux 6.9): a notification with no argument. */
#define SFS_NOTIFY_RESEND 7

int sfs_fuse_io_resend(struct sfs_fuse_io *io)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = SFS_NOTIFY_RESEND, .unique = 0};

	return write(io->fd, &out, sizeof(out)) == sizeof(out) ? 0 : -errno;
}

int sfs_fuse_io_wait_begin(void)
{
	return sfs_fuse_uring_wait_begin();
}

void sfs_fuse_io_wait_end(void)
{
	sfs_fuse_uring_wait_end();
}

void sfs_fuse_io_detach(struct sfs_fuse_io *io)
{
	sfs_fuse_uring_destroy(atomic_exchange(&io->uring, NULL));
}

const char *sfs_fuse_io_transport(struct sfs_fuse_io *io, char *why, size_t len)
{
	struct sfs_fuse_uring *u = atomic_load(&io->uring);
	int err;

	switch (atomic_load(&io->uring_state)) {
	case SFS_URING_PENDING:
		snprintf(why, len, "the kernel has not started the connection yet");
		break;
	case SFS_URING_NOT_OFFERED:
		snprintf(why, len, "the kernel does not offer it (fuse.enable_uring is off)");
		break;
	case SFS_URING_SETUP_FAILED:
		snprintf(why, len, "io_uring set-up failed: %s", strerror(atomic_load(&io->uring_errno)));
		break;
	case SFS_URING_ON:
		if (!u || !(err = sfs_fuse_uring_error(u)))
			return "io_uring";
		snprintf(why, len, "the kernel refused the io_uring registration: %s", strerror(err));
		break;
	}
	return "dev_fuse";
}

unsigned sfs_fuse_io_uring_queues(struct sfs_fuse_io *io)
{
	struct sfs_fuse_uring *u = atomic_load(&io->uring);

	return u ? sfs_fuse_uring_queues(u) : 0;
}
