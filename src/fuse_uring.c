/* A view's requests over io_uring (see fuse_uring.h). */
#define FUSE_USE_VERSION 314
#include "fuse_uring.h"
#include "fuse_gate.h"
#include "uring_entry.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <syslog.h>
#include <unistd.h>

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
	pthread_mutex_t sq_lock; /* the ring's submissions, and the handover's gate (holding) */
};

/* user_data of the entry's command, and of its tripwire (arm_tripwire) */
#define CMD_TAG 1
#define TRIPWIRE_TAG 2

/* The poker's descriptor of the view's mount namespace */
#define POKE_NSFD 3

enum go { GO_WAIT, GO_SERVE, GO_END };

struct sfs_fuse_uring {
	struct fuse_session *se;
	int fd;
	size_t payload;
	int area_fd;            /* the memfd of every entry's buffers */
	int tripwire;           /* a ring nothing completes on, which each entry polls */
	char *area;
	size_t area_size, region;
	unsigned nentries;
	unsigned queues;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	enum go go;
	unsigned registered;    /* entries in their queue (first command taken), under lock */
	bool holding;           /* a handover: no command is submitted any more (under sq_locks) */
	const atomic_bool *failed; /* answer every request EIO (fuse_io.h) */
	atomic_int error;       /* the first refused registration's errno */
	struct entry ents[];
};

/* The entry this thread is serving a request of, for the reply (libfuse replies through the
 * transport's writev, on the thread that handles the request). */
static __thread struct entry *serving;

/* The CPUs the kernel makes queues for: every possible one, online or not (a queue without
 * an entry holds up every request of the connection). */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	unsigned n = 0, a, b;
	char sep;

	if (!f)
		return 0;
	while (fscanf(f, "%u", &a) == 1) {
		b = a;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u%c", &b, &sep) < 1)
			break;
		if (b >= a)
			n += b - a + 1;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n;
}

/* 0 with the ring's submission lock taken (submit_and_wait lets it go), or -EBUSY if the ring
 * has no free SQE (never: one command is in flight at a time), or -ECANCELED once the
 * handover gate is held: the entry's request or reply is then the successor's. */
static int prep_cmd(struct entry *e, int op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe;
	unsigned char *whole;
	struct cmd_req *cmd;

	pthread_mutex_lock(&e->sq_lock);
	if (e->u->holding) {
		pthread_mutex_unlock(&e->sq_lock);
		return -ECANCELED;
	}
	if (!(sqe = io_uring_get_sqe(&e->ring))) {
		pthread_mutex_unlock(&e->sq_lock);
		return -EBUSY;
	}
	/* from here on the buffers hold no request until the kernel copies one in */
	e->hdr->ent.commit_id = 0;
	whole = (unsigned char *)sqe;
	memset(whole, 0, 2 * sizeof(*sqe)); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->user_data = CMD_TAG;
	sqe->fd = e->u->fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)e->iov;
	sqe->len = 2;
	cmd = (struct cmd_req *)(whole + offsetof(struct io_uring_sqe, cmd));
	cmd->qid = e->qid;
	cmd->commit_id = commit_id;
	return 0;
}

/* The reply of a request the kernel sent malformed, or that nothing answered. */
static void reply_error(struct entry *e, int err)
{
	struct fuse_out_header out = {
		.len = sizeof(out), .error = -err, .unique = e->hdr->ent.commit_id};

	sfs_uring_reply_begin(e->sh, e->hdr->in_out, e->hdr->ent.payload_sz, e->payload, 0);
	memcpy(e->hdr->in_out, &out, sizeof(out));
	e->hdr->ent.payload_sz = 0;
	sfs_uring_reply_end(e->sh);
}

/* The request in the entry, as read() from /dev/fuse would have given it: the lengths come
 * from the kernel and are checked against the buffers before anything is copied. */
static void serve_request(struct entry *e)
{
	struct fuse_in_header in;
	size_t payload_sz = e->hdr->ent.payload_sz, arg0;
	char *start;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	if (atomic_load(e->u->failed)) {
		reply_error(e, EIO);
		return;
	}
	if (in.len < sizeof(in) || payload_sz > e->u->payload || in.len - sizeof(in) < payload_sz ||
	    (arg0 = in.len - sizeof(in) - payload_sz) > OP_IN_SIZE ||
	    in.unique != e->hdr->ent.commit_id) {
		reply_error(e, EIO);
		return;
	}
	start = e->payload - arg0 - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), e->hdr->op_in, arg0);

	struct fuse_buf buf = {.size = in.len, .mem = start};

	e->unique = in.unique;
	e->replied = false;
	/* a predecessor's request is one the kernel sent again, as FUSE_NOTIFY_RESEND would have
	 * (bit 63): its change may have been made already (ops/intent.c) */
	sfs_fuse_gate_set_unique(e->orphan == in.unique ? in.unique | 1ULL << 63 : in.unique);
	serving = e;
	fuse_session_process_buf(e->u->se, &buf);
	serving = NULL;
	if (!e->replied)
		reply_error(e, EIO);
}

int sfs_fuse_uring_wait_begin(void)
{
	struct entry *e = serving;
	struct sfs_fuse_uring *u;
	unsigned first, busy = 0;

	if (!e)
		return 1;
	u = e->u;
	first = (unsigned)e->qid * SFS_URING_DEPTH;
	pthread_mutex_lock(&u->lock);
	for (unsigned i = first; i < first + SFS_URING_DEPTH && i < u->nentries; i++)
		busy += u->ents[i].waiting;
	if (busy + 1 >= SFS_URING_DEPTH) {
		pthread_mutex_unlock(&u->lock);
		return -ENOLCK;
	}
	e->waiting = true;
	pthread_mutex_unlock(&u->lock);
	return 0;
}

void sfs_fuse_uring_wait_end(void)
{
	struct entry *e = serving;

	if (!e)
		return;
	pthread_mutex_lock(&e->u->lock);
	e->waiting = false;
	pthread_mutex_unlock(&e->u->lock);
}

ssize_t sfs_fuse_uring_take_reply(const struct iovec *iov, int count)
{
	struct entry *e = serving;
	const struct fuse_out_header *out = iov[0].iov_base;
	size_t total = 0;

	if (!e || count < 1 || iov[0].iov_len != sizeof(*out) || out->unique != e->unique ||
	    e->replied)
		return -2;
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > e->u->payload - total) {
			errno = EMSGSIZE;
			return -1;
		}
		total += iov[i].iov_len;
	}
	sfs_uring_reply_begin(e->sh, e->hdr->in_out, e->hdr->ent.payload_sz, e->payload, total);
	total = 0;
	for (int i = 1; i < count; i++) {
		/* memmove: a reply may quote the request it answers */
		memmove(e->payload + total, iov[i].iov_base, iov[i].iov_len);
		total += iov[i].iov_len;
	}
	memcpy(e->hdr->in_out, out, sizeof(*out));
	e->hdr->ent.payload_sz = total;
	e->replied = true;
	sfs_uring_reply_end(e->sh);
	return (ssize_t)(total + sizeof(*out));
}

static enum go wait_for_go(struct sfs_fuse_uring *u)
{
	enum go g;

	pthread_mutex_lock(&u->lock);
	while (u->go == GO_WAIT)
		pthread_cond_wait(&u->changed, &u->lock);
	g = u->go;
	pthread_mutex_unlock(&u->lock);
	return g;
}

/* Hands the kernel the command prep_cmd made: 0 once it took it, or -errno. The kernel acts
 * on it at once (a registration, a commit) and posts a completion when it refuses it or hands
 * the entry a request. */
static int submit_cmd(struct entry *e)
{
	int rc, tries = 0;

	/* an SQE the kernel did not take stays in the ring and goes with the next call: a queue
	 * left without its entry would hold up every request, so short shortages are waited out */
	while ((rc = io_uring_submit(&e->ring)) < 0 && tries++ < 100) {
		if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
			break;
		if (rc != -EINTR)
			usleep(10000);
	}
	pthread_mutex_unlock(&e->sq_lock); /* taken by prep_cmd */
	if (rc < 0)
		return rc;
	/* the kernel applies a commit as it takes the command: the reply is the kernel's now */
	atomic_store_explicit(&e->sh->busy, 0, memory_order_release);
	return 0;
}

/* The errno of a command the kernel refused as it took it (its completion already posted),
 * or 0. */
static int refused_at_once(struct entry *e)
{
	struct io_uring_cqe *cqe;

	return io_uring_peek_cqe(&e->ring, &cqe) == 0 && cqe->user_data == CMD_TAG && cqe->res < 0
	       ? cqe->res : 0;
}

/* The result of the command submitted: 0 when it delivered a request, -errno when the kernel
 * refused it or the connection ended. */
static int wait_cmd(struct entry *e)
{
	struct io_uring_cqe *cqe;
	int rc;

	for (;;) {
		while ((rc = io_uring_wait_cqe(&e->ring, &cqe)) == -EINTR)
			;
		if (rc || cqe->user_data == CMD_TAG)
			break;
		io_uring_cqe_seen(&e->ring, cqe); /* the tripwire's, should its ring end */
	}
	if (rc == 0) {
		rc = cqe->res;
		io_uring_cqe_seen(&e->ring, cqe);
	}
	if (rc >= 0) {
		/* a request: the successor's to answer should this process end before it commits */
		atomic_store_explicit(&e->sh->replied, SFS_REPLY_NONE, memory_order_relaxed);
		atomic_store_explicit(&e->sh->busy, e->hdr->ent.commit_id, memory_order_release);
	}
	return rc < 0 ? rc : 0;
}

static int submit_and_wait(struct entry *e)
{
	int rc = submit_cmd(e);

	return rc ? rc : wait_cmd(e);
}

static bool connection_ended(int err)
{
	return err == -ENOTCONN || err == -ECONNABORTED || err == -ECANCELED || err == -ENODEV;
}

/* An entry serves the requests of callers on its queue's CPU: run there, the caller's CPU
 * hands over to it without a cross-CPU wake-up (unpinned, metadata work measured no faster
 * than /dev/fuse; pinned, unlinks took 0.73x the time, doc/kernel.md §4.10). A CPU the
 * daemon may not use, or one that is offline, leaves the thread where the scheduler puts it. */
static void run_on_queue_cpu(const struct entry *e)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(e->qid, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* An entry's first command, submitted: the commit of the predecessor's request it holds, or a
 * registration. 0 once the kernel took it, or -errno. */
static int first_command(struct entry *e)
{
	uint64_t id = e->orphan;
	int rc;

	if (!id)
		return (rc = prep_cmd(e, CMD_REGISTER, 0)) ? rc : submit_cmd(e);
	/* the predecessor's request: answered unless it was, then committed through the
	 * predecessor's entry, which goes on serving with this thread */
	sfs_fuse_gate_begin();
	switch (atomic_load(&e->sh->replied)) {
	case SFS_REPLY_NONE:
		serve_request(e);
		break;
	case SFS_REPLY_WRITING: /* cut short and not undone (adopt_entry) */
		reply_error(e, EIO);
		break;
	default: /* answered: only the commit is left */
		break;
	}
	sfs_fuse_gate_end();
	e->orphan = 0;
	if ((rc = prep_cmd(e, CMD_COMMIT_AND_FETCH, id)) || (rc = submit_cmd(e)))
		return rc;
	if (refused_at_once(e) != -ENOENT)
		return 0;
	/* the kernel no longer knows the request: the predecessor's commit went through, or
	 * the kernel ended it (a delivery it could not finish); the entry ended with its task,
	 * and its slot is registered again */
	wait_cmd(e);
	return (rc = prep_cmd(e, CMD_REGISTER, 0)) ? rc : submit_cmd(e);
}

/* A poll of another ring's descriptor, which nothing completes, keeps in flight a request
 * that io_uring tracks (its file is a ring); a thread that exits with a tracked request in
 * flight cancels every request it submitted, the entry's waiting command included, before it
 * is marked exiting. So a killed thread's entry leaves its queue as the thread dies. Untracked,
 * the command waits as long as its ring is open, and the descriptor table the keeper shares
 * keeps the ring open past the daemon's death: the entry takes the next request of its CPU,
 * which the kernel then ends ECANCELED (doc/kernel.md §4.11). */
static void arm_tripwire(struct entry *e)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int rc = -EBUSY;

	pthread_mutex_lock(&e->sq_lock);
	if ((sqe = io_uring_get_sqe(&e->ring))) {
		io_uring_prep_poll_add(sqe, e->u->tripwire, POLLIN);
		sqe->user_data = TRIPWIRE_TAG;
		rc = io_uring_submit(&e->ring);
	}
	pthread_mutex_unlock(&e->sq_lock);
	/* a poll refused is completed at once; one in flight has no completion */
	if (rc == 1 && io_uring_peek_cqe(&e->ring, &cqe) == 0) {
		rc = cqe->res < 0 ? cqe->res : -EALREADY;
		io_uring_cqe_seen(&e->ring, cqe);
	}
	if (rc < 0)
		syslog(LOG_WARNING, "io_uring queue %u: no tripwire (%s): a crash can give callers "
		       "ECANCELED", e->qid, strerror(-rc));
}

/* One entry: register, then serve and commit-and-fetch until the connection ends. */
static void *entry_main(void *arg)
{
	struct entry *e = arg;
	int rc;

	if (wait_for_go(e->u) != GO_SERVE)
		return NULL;
	arm_tripwire(e);
	run_on_queue_cpu(e);
	if (!(rc = first_command(e)) && !(rc = refused_at_once(e))) {
		/* in the kernel's queue: a request that waits there is handed out from now on
		 * (sfs_fuse_uring_poke waits for this) */
		pthread_mutex_lock(&e->u->lock);
		e->u->registered++;
		pthread_cond_broadcast(&e->u->changed);
		pthread_mutex_unlock(&e->u->lock);
	}
	if (!rc)
		rc = wait_cmd(e);
	if (rc < 0) {
		/* the kernel has gone back to /dev/fuse for this connection (it does on any refused
		 * registration), so nothing waits on this entry */
		int none = 0;
		if (!connection_ended(rc) && atomic_compare_exchange_strong(&e->u->error, &none, -rc))
			syslog(LOG_WARNING, "io_uring registration refused (%s): serving through /dev/fuse",
			       strerror(-rc));
		return NULL;
	}
	for (;;) {
		sfs_fuse_gate_begin();
		serve_request(e);
		sfs_fuse_gate_end();
		if (!(rc = prep_cmd(e, CMD_COMMIT_AND_FETCH, e->hdr->ent.commit_id)))
			rc = submit_and_wait(e);
		if (rc < 0) {
			if (!connection_ended(rc))
				syslog(LOG_ERR, "io_uring queue %u: commit refused: %s", e->qid, strerror(-rc));
			return NULL;
		}
	}
}

/* Where a daemon maps new buffers: far below where the kernel puts anything on its own (its
 * mappings go down from just under the stack, the heap up from the program, both near the top
 * of the address space), so that every successor, however its own layout falls, finds the
 * address free. Mapped where the kernel chose, they were taken by a successor's own library,
 * stack or heap once in about 200 kills, and the requests in them were lost (doc/kernel.md
 * §4.11). Where the address space is smaller, the kernel chooses after all. */
#define AREA_FLOOR ((uintptr_t)1 << 44)
#define AREA_ALIGN ((uintptr_t)2 << 20)
#define AREA_TRIES 4096

static void *map_fresh(int fd, size_t size)
{
	uintptr_t step = (size + AREA_ALIGN - 1) & ~(AREA_ALIGN - 1);
	void *at;

	for (uintptr_t i = 0; i < AREA_TRIES; i++) {
		void *want = (void *)(AREA_FLOOR + i * step);
		at = mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
		if (at == want)
			return at;
		if (at != MAP_FAILED)
			munmap(at, size); /* a kernel that took the address as a hint only */
		else if (errno != EEXIST)
			break;
	}
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* The buffers of every entry, in one memfd: a successor's are its predecessor's, at the same
 * address, when they fit (the same CPUs, the same payload: the INIT it replays is the same). */
static int map_area(struct sfs_fuse_uring *u, unsigned n, const struct sfs_uring_area *from)
{
	long page = sysconf(_SC_PAGESIZE);

	u->region = (size_t)page + u->payload;
	u->area_size = u->region * n;
	if (from && from->region == u->region && from->entries == n) {
		void *at = mmap((void *)(uintptr_t)from->base, u->area_size, PROT_READ | PROT_WRITE,
		                MAP_SHARED | MAP_FIXED_NOREPLACE, from->fd, 0);
		if (at != MAP_FAILED && at == (void *)(uintptr_t)from->base) {
			u->area = at;
			u->area_fd = from->fd;
			return 1;
		}
		int e = at == MAP_FAILED ? errno : EEXIST;
		if (at != MAP_FAILED)
			munmap(at, u->area_size);
		syslog(LOG_WARNING, "io_uring: the predecessor's buffers cannot be mapped where they "
		       "were (%#llx: %s); its unanswered requests stay unanswered",
		       (unsigned long long)from->base, strerror(e));
	}
	u->area_fd = memfd_create("strictfs-uring", MFD_CLOEXEC);
	if (u->area_fd < 0)
		return -errno;
	if (ftruncate(u->area_fd, u->area_size) < 0)
		return -errno;
	u->area = map_fresh(u->area_fd, u->area_size);
	if (u->area == MAP_FAILED) {
		u->area = NULL;
		return -errno;
	}
	return 0;
}

/* What the predecessor left in an entry's buffers: busy, and the header's commit_id (h),
 * which it cleared before each command it submitted:
 * - busy, h == busy: its request, not yet committed (answered if replied says so; a reply
 *   cut short is undone);
 * - busy, h == 0: committed or about to be; the commit is tried again (if the kernel no
 *   longer knows the request, the slot is registered anew, see first_command);
 * - h other than 0 and busy: a request the kernel copied in after the last command, to a
 *   thread killed before it marked it: unanswered, or it would wait for good;
 * - neither: the entry was waiting; its slot is registered anew. */
static void adopt_entry(struct entry *e)
{
	uint64_t busy = atomic_load(&e->sh->busy), h = e->hdr->ent.commit_id;

	if (h && h != busy) {
		e->orphan = h;
		atomic_store(&e->sh->replied, SFS_REPLY_NONE);
		atomic_store(&e->sh->busy, h);
		return;
	}
	e->orphan = busy;
	/* a reply cut short: the request is put back and served again, as a resent one */
	if (busy && atomic_load(&e->sh->replied) == SFS_REPLY_WRITING &&
	    !sfs_uring_reply_undo(e->sh, e->hdr->in_out, &e->hdr->ent.payload_sz, e->payload)) {
		syslog(LOG_WARNING, "io_uring queue %u: request %llu answered EIO: its reply was cut "
		       "short by the crash and the request cannot be read again", e->qid,
		       (unsigned long long)busy);
	}
}

static int entry_setup(struct sfs_fuse_uring *u, struct entry *e, uint16_t qid, unsigned i,
                       bool inherited)
{
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	e->u = u;
	e->qid = qid;
	e->region_size = u->region;
	e->region = u->area + (size_t)i * u->region;
	e->hdr = (struct req_header *)e->region;
	e->payload = e->region + page;
	e->sh = (struct sfs_uring_entry_state *)(e->region + SHARED_OFFSET);
	if (inherited && e->sh->qid == qid)
		adopt_entry(e);
	if (!e->orphan) {
		atomic_store(&e->sh->busy, 0);
		atomic_store(&e->sh->replied, SFS_REPLY_NONE);
	}
	e->sh->qid = qid;
	pthread_mutex_init(&e->sq_lock, NULL);
	e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
	e->iov[1] = (struct iovec){e->payload, u->payload};
	if ((rc = io_uring_queue_init(2, &e->ring, IORING_SETUP_SQE128)) < 0)
		return rc;
	e->ring_ready = true;
	if ((rc = pthread_create(&e->thread, NULL, entry_main, e)))
		return -rc;
	e->thread_started = true;
	return 0;
}

static void set_go(struct sfs_fuse_uring *u, enum go g)
{
	pthread_mutex_lock(&u->lock);
	u->go = g;
	pthread_cond_broadcast(&u->changed);
	pthread_mutex_unlock(&u->lock);
}

struct sfs_fuse_uring *sfs_fuse_uring_prepare(struct fuse_session *se, int fuse_fd,
                                              size_t payload, const struct sfs_uring_area *from,
                                              const atomic_bool *failed)
{
	unsigned queues = possible_cpus();
	struct sfs_fuse_uring *u;
	int rc = 0, inherited;

	if (!queues || queues > UINT16_MAX) {
		errno = ENODEV;
		return NULL;
	}
	u = calloc(1, sizeof(*u) + (size_t)queues * SFS_URING_DEPTH * sizeof(u->ents[0]));
	if (!u)
		return NULL;
	u->se = se;
	u->failed = failed;
	u->fd = fuse_fd;
	u->payload = payload;
	u->queues = queues;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->changed, NULL);
	u->go = GO_WAIT;
	u->area_fd = -1;
	if ((u->tripwire = io_uring_setup(1, &(struct io_uring_params){0})) < 0) {
		errno = -u->tripwire;
		free(u);
		return NULL;
	}
	if ((rc = inherited = map_area(u, queues * SFS_URING_DEPTH, from)) > 0)
		rc = 0;
	for (unsigned i = 0; i < queues * SFS_URING_DEPTH && !rc; i++, u->nentries++)
		rc = entry_setup(u, &u->ents[i], (uint16_t)(i / SFS_URING_DEPTH), i, inherited > 0);
	if (rc) {
		sfs_fuse_uring_destroy(u);
		errno = -rc;
		return NULL;
	}
	return u;
}

void sfs_fuse_uring_start(struct sfs_fuse_uring *u)
{
	set_go(u, GO_SERVE);
}

void sfs_fuse_uring_destroy(struct sfs_fuse_uring *u)
{
	if (!u)
		return;
	set_go(u, GO_END); /* threads still waiting to start end at once */
	for (unsigned i = 0; i < u->nentries; i++) {
		struct entry *e = &u->ents[i];
		if (e->thread_started)
			pthread_join(e->thread, NULL);
		if (e->ring_ready)
			io_uring_queue_exit(&e->ring);
	}
	if (u->area)
		munmap(u->area, u->area_size);
	if (u->area_fd >= 0)
		close(u->area_fd);
	close(u->tripwire);
	pthread_cond_destroy(&u->changed);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

int sfs_fuse_uring_error(const struct sfs_fuse_uring *u)
{
	return atomic_load(&u->error);
}

unsigned sfs_fuse_uring_queues(const struct sfs_fuse_uring *u)
{
	return u->queues;
}

void sfs_fuse_uring_area(const struct sfs_fuse_uring *u, struct sfs_uring_area *out)
{
	out->fd = u->area_fd;
	out->base = (uintptr_t)u->area;
	out->region = u->region;
	out->entries = u->nentries;
}

/* Whether every entry is in its queue (registered, or its first commit taken), within ms. */
static bool all_registered(struct sfs_fuse_uring *u, int ms)
{
	struct timespec until;
	bool all;

	sfs_deadline_in(CLOCK_REALTIME, ms, &until);
	pthread_mutex_lock(&u->lock);
	while (u->registered < u->nentries && u->go == GO_SERVE &&
	       pthread_cond_timedwait(&u->changed, &u->lock, &until) == 0)
		;
	all = u->registered == u->nentries;
	pthread_mutex_unlock(&u->lock);
	return all;
}

void sfs_fuse_uring_hold(struct sfs_fuse_uring *u)
{
	for (unsigned i = 0; i < u->nentries; i++) {
		pthread_mutex_lock(&u->ents[i].sq_lock);
		u->holding = true;
		pthread_mutex_unlock(&u->ents[i].sq_lock);
	}
}

/* `strictfs __uring-poke`, which asks for a statfs of mountpoint from each CPU at once: a
 * process of its own, not a fork of the daemon, which would hold the daemon's descriptors and
 * be taken for it. */
static pid_t start_poker(const struct sfs_fuse_uring *u, int nsfd, const char *mountpoint)
{
	char queues[16];
	char *argv[] = {"strictfs", "__uring-poke", (char *)mountpoint, queues, NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	snprintf(queues, sizeof(queues), "%u", u->queues);
	if (posix_spawn_file_actions_init(&fa))
		return -1;
	rc = posix_spawn_file_actions_adddup2(&fa, nsfd, POKE_NSFD);
	if (!rc)
		rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc ? -1 : pid;
}

void sfs_fuse_uring_poke(struct sfs_fuse_uring *u, int nsfd, const char *mountpoint)
{
	pid_t pid;

	if (all_registered(u, 5000) && (pid = start_poker(u, nsfd, mountpoint)) > 0)
		waitpid(pid, NULL, 0);
}

/* One caller of the poker: a statfs from a thread on one CPU, its request handed to an entry
 * of that CPU's queue. */
struct poke_caller {
	pthread_t thread;
	bool started;
	int fd;
	unsigned cpu;
};

static void *poke_call(void *arg)
{
	struct poke_caller *c = arg;
	struct statfs sf;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(c->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0)
		fstatfs(c->fd, &sf);
	return NULL;
}

int sfs_fuse_uring_poke_main(int argc, char *argv[])
{
	unsigned long long queues;
	struct poke_caller *c;
	int fd;

	close_range(POKE_NSFD + 1, ~0U, 0);
	if (argc != 4 || !sfs_parse_uint(argv[3], &queues) || !queues || queues > UINT16_MAX)
		return 2;
	if (setns(POKE_NSFD, CLONE_NEWNS) < 0)
		return 1;
	close(POKE_NSFD);
	/* no lookup in the view: its root is where the mount is, and O_PATH checks nothing */
	if ((fd = open(argv[2], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 1;
	if (!(c = calloc(queues, sizeof(*c))))
		return 1;
	for (unsigned long long i = 0; i < queues; i++) {
		c[i] = (struct poke_caller){.fd = fd, .cpu = (unsigned)i};
		c[i].started = pthread_create(&c[i].thread, NULL, poke_call, &c[i]) == 0;
	}
	for (unsigned long long i = 0; i < queues; i++)
		if (c[i].started)
			pthread_join(c[i].thread, NULL);
	free(c);
	return 0;
}
