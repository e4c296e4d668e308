/* A view's /dev/fuse transport (libfuse's custom I/O): the same read, writev and splice
 * libfuse would do, plus one rewrite of the INIT reply, which adds flags libfuse 3.14 cannot
 * ask for (3.17 can) where the kernel offers them:
 * - FUSE_HANDLE_KILLPRIV_V2: every backing call is made as the caller, so the backing already
 *   clears set-id bits and security.capability exactly as ext4 does for that caller, and with
 *   it the kernel stops asking for security.capability before every write (one round trip per
 *   write; it marks the superblock SB_NOSEC).
 * - FUSE_DIRECT_IO_ALLOW_MMAP: files a view opens with FOPEN_DIRECT_IO (strictatime views,
 *   where every read must reach the backing) can still be mapped shared.
 * - FUSE_PASSTHROUGH, with a stack depth of 1, where the view wants it and writeback caching
 *   is not negotiated (the kernel ignores it then): an open file's reads, writes and maps go
 *   to a backing file the daemon registered (doc/kernel.md §4.8). The transport also owns the
 *   registration ioctls and marks the one OPEN or CREATE reply that hands a backing id over,
 *   which libfuse 3.14 has no field for. */
#ifndef SFS_FUSE_IO_H
#define SFS_FUSE_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sfs_fuse_io {
	int fd;                        /* the mounted /dev/fuse */
	_Atomic uint64_t init_unique;  /* the INIT request's id, 0 until it has been read */
	_Atomic uint64_t offered;      /* the INIT flags the kernel offered (flags2 above bit 32) */
	bool want_passthrough;         /* set before the session starts */
	atomic_bool passthrough;       /* negotiated: backing files may be handed over */
};

struct fuse_session;

/* The transport state of a session's userdata (libfuse hands the transport the session's
 * userdata, a view; view.c answers). */
struct sfs_fuse_io *sfs_view_fuse_io(void *view);

/* Hands fd (a mounted /dev/fuse) to the session with this transport; io lives as long as
 * the session. Returns 0 or -1 (fd is then not used). */
int sfs_fuse_io_attach(struct fuse_session *se, struct sfs_fuse_io *io, int fd);

/* Registers the open file fd as a backing file of the connection, with the calling thread's
 * credentials, which the kernel keeps for every read and write through it: a backing id > 0,
 * or -errno (EPERM without CAP_SYS_ADMIN, EOPNOTSUPP where the kernel has no passthrough). */
int sfs_fuse_io_backing_open(struct sfs_fuse_io *io, int fd);
void sfs_fuse_io_backing_close(struct sfs_fuse_io *io, int id);

/* The next OPEN or CREATE reply this thread sends hands backing id over (FOPEN_PASSTHROUGH),
 * instead of any page-cache flag. 0 sends it as libfuse made it. */
void sfs_fuse_io_reply_backing(int id);

#endif
