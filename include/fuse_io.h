/* A view's /dev/fuse transport (libfuse's custom I/O): the same read, writev and splice
 * libfuse would do, plus one rewrite of the INIT reply, which adds flags libfuse 3.14 cannot
 * ask for (3.17 can) where the kernel offers them:
 * - FUSE_HANDLE_KILLPRIV_V2: every backing call is made as the caller, so the backing already
 *   clears set-id bits and security.capability exactly as ext4 does for that caller, and with
 *   it the kernel stops asking for security.capability before every write (one round trip per
 *   write; it marks the superblock SB_NOSEC).
 * - FUSE_DIRECT_IO_ALLOW_MMAP: files a view opens with FOPEN_DIRECT_IO (strictatime views,
 *   where every read must reach the backing) can still be mapped shared. */
#ifndef SFS_FUSE_IO_H
#define SFS_FUSE_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sfs_fuse_io {
	_Atomic uint64_t init_unique;  /* the INIT request's id, 0 until it has been read */
	_Atomic uint64_t offered;      /* the INIT flags the kernel offered (flags2 above bit 32) */
};

struct fuse_session;

/* The transport state of a session's userdata (libfuse hands the transport the session's
 * userdata, a view; view.c answers). */
struct sfs_fuse_io *sfs_view_fuse_io(void *view);

/* Hands fd (a mounted /dev/fuse) to the session with this transport; io lives as long as
 * the session. Returns 0 or -1 (fd is then not used). */
int sfs_fuse_io_attach(struct fuse_session *se, struct sfs_fuse_io *io, int fd);

#endif
