/* The io_uring transport's private header: what its files share, by job. fuse_uring.c sets
 * the entries up (their rings, buffers and threads, a predecessor's taken over) and ends them;
 * fuse_uring_serve.c is an entry's thread, its commands to the kernel and the requests it
 * serves; fuse_uring_poke.c wakes, after a takeover, the requests that waited for a queue.
 * include/fuse_uring.h is its interface. */
#ifndef SFS_FUSE_URING_INT_H
#define SFS_FUSE_URING_INT_H

#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fuse_uring.h"
#include "uring_entry.h"

/* The kernel's ring layout (uapi <linux/fuse.h> 7.42), newer than Debian 12's headers. An
 * entry hands the kernel two buffers: this header, and the payload. */
#define IN_OUT_SIZE 128 /* the request's fuse_in_header, then the reply's fuse_out_header */
#define OP_IN_SIZE 128  /* the request's first argument, the per-operation header */
struct ent_in_out {
	uint64_t flags;
	uint64_t commit_id;     /* the request's id, handed back with its reply */
	uint32_t payload_sz;    /* the bytes of the request, then of the reply, in the payload */
	uint32_t padding;
	uint64_t reserved;
};
struct req_header {
	char in_out[IN_OUT_SIZE];
	char op_in[OP_IN_SIZE];
	struct ent_in_out ent;
};
/* In the SQE's command area (which is why the ring needs 128-byte SQEs). */
struct cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
enum { CMD_REGISTER = 1, CMD_COMMIT_AND_FETCH = 2 };

_Static_assert(sizeof(struct req_header) == 288, "the kernel's fuse_uring_req_header");

/* Beside the kernel's header, in the entry's first page: what a successor must know of the
 * entry (uring_entry.h). busy is the id of the request the entry took and has not committed
 * (0: none), replied how far its reply got. The header's own commit_id says the rest: the
 * daemon clears it before each command it submits, and the kernel writes it with each
 * request it copies in, so a request delivered to a thread killed before it set busy is
 * still found (see adopt_entry). */
#define SHARED_OFFSET 1024
_Static_assert(SHARED_OFFSET >= sizeof(struct req_header) &&
               SHARED_OFFSET + sizeof(struct sfs_uring_entry_state) <=
                   4096 - OP_IN_SIZE - sizeof(struct fuse_in_header),
               "beside the kernel's header, before where the request is reassembled");
_Static_assert(sizeof(struct cmd_req) <= 80, "fits the command area of a 128-byte SQE");

struct entry {
	struct sfs_fuse_uring *u;
	uint16_t qid;
	bool thread_started;
	pthread_t thread;
	struct io_uring ring;
	bool ring_ready;
	/* One mapping: the header at its start, the payload on the next page, and the request
	 * reassembled (header, first argument, payload) just before the payload, as libfuse
	 * decodes it, without copying the payload. */
	char *region;
	size_t region_size;
	struct req_header *hdr;
	char *payload;
	struct iovec iov[2];    /* the two buffers REGISTER hands over */
	uint64_t unique;        /* the request being served */
	bool replied;
	struct sfs_uring_entry_state *sh;
	uint64_t orphan;        /* a predecessor's request this entry answers first, or 0 */
	bool waiting;           /* its request waits long (a lock), under the ring's lock */
	uint64_t wake_node;     /* a spare's: the file whose wait made it (wake_queue) */
	pthread_mutex_t sq_lock; /* the ring's submissions, and the handover's gate (holding) */
};

/* What the entries' threads wait for before their first command: sfs_fuse_uring_start
 * (serve), or sfs_fuse_uring_destroy before it (end). */
enum go { GO_WAIT, GO_SERVE, GO_END };

/* A queue's slots: SFS_URING_DEPTH entries set up at the start, then spares, set up one at a
 * time when a request that waits (a lock) would leave its queue no entry to take the next
 * request (spare_for_wait). A slot's buffers are at a fixed place in the area, so a successor
 * finds a spare's unanswered request where it finds any other entry's. */
#define SPARES_TOTAL 256 /* a view's spares, shared out among its queues */
#define SPARES_MIN 8     /* but at least this many a queue */

struct sfs_fuse_uring {
	struct fuse_session *se;
	int fd;
	size_t payload;
	int area_fd;            /* the memfd of every slot's buffers */
	int tripwire;           /* a ring nothing completes on, which each entry polls */
	char *area;
	size_t area_size, region;
	unsigned queues;
	unsigned per_queue;     /* slots a queue has: SFS_URING_DEPTH, then its spares */
	unsigned slots;         /* queues * per_queue */
	unsigned nentries;      /* entries set up, under lock */
	pthread_mutex_t lock;
	pthread_cond_t changed;
	enum go go;
	unsigned registered;    /* entries in their queue (first command taken), under lock */
	bool holding;           /* a handover: no command is submitted any more (under lock and
	                         * every entry's sq_lock) */
	const atomic_bool *failed; /* answer every request EIO (fuse_io.h) */
	atomic_int error;       /* the first refused registration's errno */
	atomic_uint wakes;      /* queue wake-ups sent (wake_queue) */
	struct entry *ents[];   /* a slot's entry once set up, else NULL (written under lock) */
};

/* Sets up the entry of slot i (queue i / per_queue) and starts its thread; inherited: the
 * slot's buffers are a predecessor's. 0 or -errno (the slot is then left as it was). Called
 * under u->lock once the entries serve. */
int fuse_uring_slot_setup(struct sfs_fuse_uring *u, unsigned i, bool inherited);

/* An entry's thread (fuse_uring_serve.c): it waits for sfs_fuse_uring_start, registers, then
 * serves and commits until the connection ends. */
void *fuse_uring_entry_main(void *arg);

#endif
