/* An io_uring entry's thread: its commands to the kernel (register, commit and fetch), and
 * the requests it hands to libfuse and whose replies it takes (see fuse_uring.h). */
#define FUSE_USE_VERSION 314
#include "fuse_adapt.h"
#include "fuse_uring_int.h"
#include "fuse_gate.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

/* user_data of the entry's command, and of its tripwire (arm_tripwire) */
#define CMD_TAG 1
#define TRIPWIRE_TAG 2

/* The ids of wake_queue's requests: even, as the kernel's own, and far above any the kernel
 * counts to, so that a queue never holds two requests of one id. */
#define WAKE_UNIQUE_BASE (1ULL << 62)

/* The entry this thread is serving a request of, for the reply (libfuse replies through the
 * transport's writev, on the thread that handles the request). */
static __thread struct entry *serving;

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
	if (in.opcode == FUSE_NOTIFY_REPLY && in.unique >= WAKE_UNIQUE_BASE) {
		reply_error(e, ECANCELED); /* wake_queue's: it only had to reach the queue */
		return;
	}
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
	struct fuse_buf buf = {
		.size = sfs_fuse_adapt(start, in.len, sizeof(in) + arg0 + e->u->payload),
		.mem = start};

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

/* Whether queue qid has an entry other than e free to take its next request. Under u->lock. */
static bool queue_has_free_entry(struct sfs_fuse_uring *u, uint16_t qid, const struct entry *e)
{
	unsigned first = (unsigned)qid * u->per_queue;

	for (unsigned i = first; i < first + u->per_queue; i++) {
		const struct entry *o = u->ents[i];
		if (o && o != e && !o->waiting)
			return true;
	}
	return false;
}

/* A spare set up in e's queue, for the requests that come while e waits: the kernel hands a
 * CPU's requests to that CPU's queue only, and an entry takes its next request only with its
 * reply, so a queue whose every entry waits would hold up its callers, the waits' own ends
 * among them. 0, or -ENOLCK when the queue has no spare left (or the entries are ending). */
static int spare_for_wait(struct sfs_fuse_uring *u, const struct entry *e)
{
	unsigned first = (unsigned)e->qid * u->per_queue;

	if (u->holding || u->go != GO_SERVE)
		return -ENOLCK;
	for (unsigned i = first + SFS_URING_DEPTH; i < first + u->per_queue; i++) {
		if (u->ents[i])
			continue;
		if (fuse_uring_slot_setup(u, i, false))
			return -ENOLCK;
		/* read by the spare's thread after it takes this lock (wake_queue) */
		u->ents[i]->wake_node = ((const struct fuse_in_header *)e->hdr->in_out)->nodeid;
		return 0;
	}
	return -ENOLCK;
}

int sfs_fuse_uring_wait_begin(void)
{
	struct entry *e = serving;
	struct sfs_fuse_uring *u;
	int rc = 0;

	if (!e)
		return 1;
	u = e->u;
	pthread_mutex_lock(&u->lock);
	if (!queue_has_free_entry(u, e->qid, e))
		rc = spare_for_wait(u, e);
	if (!rc)
		e->waiting = true;
	pthread_mutex_unlock(&u->lock);
	return rc;
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

/* Requests that reached e's queue while none of its entries was free wait there for the next
 * commit or the next request of that queue: the kernel does not hand them to an entry that
 * registers (doc/kernel.md §4.12). So a spare, once registered, has the kernel make a request
 * on its queue: a retrieve notification asks for a FUSE_NOTIFY_REPLY, which the kernel queues
 * on the CPU of the thread that writes it (this one, on e's CPU). The entry that takes it
 * commits it and fetches the next waiting request, and so on until the queue is empty. The
 * kernel retrieves only from a regular file it knows: the waiting request's own, a lock's or
 * a lease's (lease.c waits for regular files only), held by the caller while it waits. */
static void wake_queue(struct entry *e)
{
	struct {
		struct fuse_out_header h;
		struct fuse_notify_retrieve_out r;
	} msg = {
		.h = {.len = sizeof(msg), .error = FUSE_NOTIFY_RETRIEVE},
		.r = {.nodeid = e->wake_node,
		      .notify_unique = WAKE_UNIQUE_BASE + 2ULL * atomic_fetch_add(&e->u->wakes, 1)},
	};

	if (sched_getcpu() != (int)e->qid) /* its CPU is offline or not the daemon's */
		return;
	if (write(e->u->fd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		syslog(LOG_WARNING, "io_uring queue %u: cannot wake it (%s): requests that came "
		       "while its entries waited wait for the next request there", e->qid,
		       strerror(errno));
}

/* One entry: register, then serve and commit-and-fetch until the connection ends. */
void *fuse_uring_entry_main(void *arg)
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
		if (e->wake_node)
			wake_queue(e);
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
