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
 *   registration ioctls; the OPEN or CREATE reply that hands a backing id over, which
 *   libfuse 3.14 has no field for, is made by fuse_adapt.h and sent as it is.
 * - FUSE_OVER_IO_URING, where offered (fuse.enable_uring) and the rings could be set up before
 *   the reply: requests then arrive through per-CPU io_uring queues (fuse_uring.h) and their
 *   replies go back there; /dev/fuse still carries FORGET, INTERRUPT and notifications. */
#ifndef SFS_FUSE_IO_H
#define SFS_FUSE_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse_uring.h"

/* Why a view's requests do not come through io_uring. */
enum sfs_uring_state {
	SFS_URING_PENDING,             /* no INIT yet */
	SFS_URING_ON,                  /* negotiated; see sfs_fuse_uring_error for the kernel's word */
	SFS_URING_NOT_OFFERED,         /* the kernel does not offer it (fuse.enable_uring is off) */
	SFS_URING_SETUP_FAILED,        /* offered, but a ring or thread could not be made: errno */
};

struct sfs_fuse_uring;

struct sfs_fuse_io {
	int fd;                        /* the mounted /dev/fuse */
	struct fuse_session *se;
	_Atomic(struct sfs_fuse_uring *) uring; /* set with the INIT reply, if negotiated */
	atomic_int uring_state;        /* enum sfs_uring_state */
	atomic_int uring_errno;        /* SFS_URING_SETUP_FAILED: why */
	_Atomic uint64_t init_unique;  /* the INIT request's id, 0 until it has been read */
	_Atomic uint64_t offered;      /* the INIT flags the kernel offered (flags2 above bit 32) */
	bool want_passthrough;         /* set before the session starts */
	bool want_idmap;               /* FUSE_ALLOW_IDMAP: set before the session starts */
	atomic_bool passthrough;       /* negotiated: backing files may be handed over */
	/* The kernel's INIT request as read, kept for a successor, which replays it to its own
	 * session (sfs_fuse_io_replay_init). on_init is told before the reply goes out. */
	unsigned char init_req[256];
	size_t init_len;
	void (*on_init)(struct sfs_fuse_io *io);
	bool replaying;                /* the INIT reply is libfuse's to make, not the kernel's to get */
	struct sfs_uring_area area;    /* the io_uring entries' buffers (fd -1: none) */
	struct sfs_uring_area inherit; /* a successor's: the predecessor's (fd -1: none) */
	atomic_bool failed;            /* every request is answered EIO (set before the session starts) */
	atomic_bool writes;            /* WRITEs with data come through the daemon: threads fault their
	                                * read buffers in (sfs_fuse_io_expect_writes) */
};

struct fuse_session;

/* The transport state of a session's userdata (libfuse hands the transport the session's
 * userdata, a view; view.c answers). */
struct sfs_fuse_io *sfs_view_fuse_io(void *view);

/* Hands fd (a mounted /dev/fuse) to the session with this transport; io lives as long as
 * the session. Returns 0 or -1 (fd is then not used). */
int sfs_fuse_io_attach(struct fuse_session *se, struct sfs_fuse_io *io, int fd);

/* Ends what the transport started beside the session (the io_uring entries), once the
 * connection has ended; before fuse_session_destroy. */
void sfs_fuse_io_detach(struct sfs_fuse_io *io);

/* How requests reach the view: "io_uring" or "dev_fuse", and in why (when not io_uring) the
 * reason in a few words. */
const char *sfs_fuse_io_transport(struct sfs_fuse_io *io, char *why, size_t len);
unsigned sfs_fuse_io_uring_queues(struct sfs_fuse_io *io);

/* Registers the open file fd as a backing file of the connection, with the calling thread's
 * credentials, which the kernel keeps for every read and write through it: a backing id > 0,
 * or -errno (EPERM without CAP_SYS_ADMIN, EOPNOTSUPP where the kernel has no passthrough). */
int sfs_fuse_io_backing_open(struct sfs_fuse_io *io, int fd);
void sfs_fuse_io_backing_close(struct sfs_fuse_io *io, int id);

/* A successor's session for a connection its predecessor started: libfuse processes the
 * kernel's INIT request again (init, len: as the predecessor read it), and the reply, which
 * the kernel already has, is not sent; io_uring entries are registered anew. Returns 0 or
 * -errno. */
int sfs_fuse_io_replay_init(struct sfs_fuse_io *io, const void *init, size_t len);

/* Asks the kernel to send again every request the connection's previous server read and never
 * answered (FUSE_NOTIFY_RESEND, doc/kernel.md §4.11). Returns 0 or -errno. */
int sfs_fuse_io_resend(struct sfs_fuse_io *io);

/* Says that the view's WRITEs come through the daemon (a successor adopting a file open for
 * writing without passthrough): from their next read on, its threads fault their whole read
 * buffers in first, as they do once a WRITE with data has come (doc/kernel.md §4.11). */
void sfs_fuse_io_expect_writes(struct sfs_fuse_io *io);

/* How a request that may wait long (a lock) waits without holding the others up: 1 on a
 * thread of its own (a request read from /dev/fuse, whose answer may go from any thread), 0
 * on the calling thread (an io_uring entry's, whose answer goes back through the entry,
 * which stays taken until then; if it was the last of its queue not waiting, a spare entry
 * joins the queue, since the kernel queues a CPU's requests to its queue alone), or -ENOLCK
 * when that queue has no spare left (fuse_uring_int.h). After 0, sfs_fuse_io_wait_end when
 * the wait is over. */
int sfs_fuse_io_wait_begin(void);
void sfs_fuse_io_wait_end(void);


#endif
