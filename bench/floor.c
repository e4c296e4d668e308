/* floor — the benchmark's floor (bench/README, "The floor"): a FUSE server that speaks the
 * kernel's protocol itself, with no libfuse, and answers every request from memory, through
 * /dev/fuse (read and write) or over io_uring. What a request costs through it is what the
 * kernel and the transport cost; bench/run measures it in the same run as strictfs.
 *
 *   floor [--uring] [--readers N] MOUNTPOINT
 *
 * mounts a small fixed tree at MOUNTPOINT (as root), returns once the mount serves (the server
 * goes on as a daemon), and serves until it is unmounted, then exits. N threads read /dev/fuse
 * (default 2; with --uring 1, for the forgets and interrupts that never come by the rings):
 * the kernel hands a request to the reader that has waited longest, so the count changes what
 * a round trip costs (bench/README, "The floor"). With --uring, requests
 * come over io_uring (FUSE_OVER_IO_URING, Linux 6.14 and later, fuse.enable_uring=Y at the
 * mount), one queue per possible CPU with one entry and one thread each, as strictfs's
 * transport does (src/fuse_uring*.c); where the kernel does not offer it, floor says why and
 * exits 1, leaving no mount.
 *
 * The tree: /, /dir, /file, /dir/file (empty files, nothing writable). LOOKUP, GETATTR,
 * STATFS, OPENDIR, READDIR, RELEASEDIR and DESTROY are answered; FORGET, BATCH_FORGET and
 * INTERRUPT take no answer; anything else is ENOSYS. Every length the kernel gives is checked
 * before it is used. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* FUSE over io_uring (protocol 7.42), newer than Debian 12's <linux/fuse.h> (7.38): defined
 * here as src/fuse_uring_int.h does, under names of our own, so that a newer header does not
 * clash. An entry hands the kernel two buffers: this header, and the payload. */
#define OVER_IO_URING (1ULL << 41) /* INIT flags2 bit 9 */
struct ring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique id, handed back with its reply */
	uint32_t payload_sz; /* the request's bytes in the payload, then the reply's */
	uint32_t padding;
	uint64_t reserved;
};
struct ring_header {
	char in_out[128]; /* the request's fuse_in_header, then the reply's fuse_out_header */
	char op_in[128];  /* the request's first argument (0 to 128 bytes) */
	struct ring_ent_in_out ent;
};
/* in the command area of a 128-byte SQE */
struct ring_cmd {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
enum { RING_REGISTER = 1, RING_COMMIT_AND_FETCH = 2 };
_Static_assert(sizeof(struct ring_header) == 288, "the kernel's fuse_uring_req_header");
_Static_assert(sizeof(struct ring_cmd) <= 80, "fits the command area of a 128-byte SQE");

#define URING_PARAM "/sys/module/fuse/parameters/enable_uring"

/* What INIT asks for: the smallest requests the kernel allows (max_write 4096) and the
 * default number of pages (32), asked for explicitly, so that the io_uring payload the kernel
 * wants, max(8 KiB, max_write, max_pages pages), is known before the mount. */
#define MAX_WRITE 4096
#define MAX_PAGES 32
#define TIMEOUT 3600      /* entry and attribute validity, seconds: nothing here changes */
#define READERS 2         /* /dev/fuse readers by default (one with --uring) */
#define MAX_READERS 64
#define REPLY_MAX 4096    /* the largest reply body (a directory listing is cut to it) */
#define READ_BUF (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in) + \
                  MAX_PAGES * 4096 + 4096)

struct node {
	uint64_t parent;
	const char *name;
	uint32_t mode, nlink;
};
/* node id = index + 1; the root (FUSE_ROOT_ID) first */
static const struct node nodes[] = {
	{1, "", S_IFDIR | 0755, 3},
	{1, "dir", S_IFDIR | 0755, 2},
	{1, "file", S_IFREG | 0644, 1},
	{2, "file", S_IFREG | 0644, 1},
};
#define NNODES (sizeof(nodes) / sizeof(nodes[0]))

struct reply {
	struct fuse_out_header h;
	char body[REPLY_MAX];
};

struct queue {
	uint16_t qid;
	struct io_uring ring;
	char *region; /* the header at its start, the payload on the next page */
	size_t region_size;
	struct ring_header *hdr;
	char *payload;
	struct iovec iov[2];
	pthread_t thread;
};

static const char *mnt;      /* the mountpoint, absolute */
static int fuse_fd = -1;
static bool mounted;
static int ready_fd = -1;    /* to the waiting parent: "OK\n" or the error */
static time_t started;
static size_t page_size, payload_size;
static struct queue *queues;
static unsigned nqueues;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_changed = PTHREAD_COND_INITIALIZER;
static unsigned reg_done;    /* queues whose registration the kernel took or refused */
static int reg_error;        /* the first refusal's errno */

static void unmount_ours(void)
{
	if (!mounted)
		return;
	if (umount2(mnt, UMOUNT_NOFOLLOW) < 0 && errno == EBUSY)
		umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW);
	mounted = false;
}

/* Before the mount serves: the mount goes, the waiting parent gets the one line and exits 1. */
static void fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = sizeof(msg) - 2;
	msg[n++] = '\n';
	unmount_ours();
	if (write(ready_fd >= 0 ? ready_fd : 2, msg, (size_t)n) < 0) {
		/* the parent is gone: nobody to tell */
	}
	exit(1);
}

/* ---------------------------------------------------------------------------------------- */
/* The file system: the answer to one request, from memory. */

static const struct node *node_of(uint64_t id)
{
	return id >= 1 && id <= NNODES ? &nodes[id - 1] : NULL;
}

static void fill_attr(uint64_t id, struct fuse_attr *a)
{
	const struct node *n = &nodes[id - 1];

	memset(a, 0, sizeof(*a));
	a->ino = id;
	a->mode = n->mode;
	a->nlink = n->nlink;
	a->size = S_ISDIR(n->mode) ? 4096 : 0;
	a->blocks = S_ISDIR(n->mode) ? 8 : 0;
	a->blksize = 4096;
	a->atime = a->mtime = a->ctime = (uint64_t)started;
}

/* The entries of directory id in READDIR's order: ".", "..", then its children. The one at
 * index i (its offset is i + 1), or false past the last. */
static bool dir_entry(uint64_t id, uint64_t i, uint64_t *ino, const char **name, uint32_t *type)
{
	if (i < 2) {
		*ino = i == 0 ? id : nodes[id - 1].parent;
		*name = i == 0 ? "." : "..";
		*type = DT_DIR;
		return true;
	}
	i -= 2;
	for (uint64_t c = 2; c <= NNODES; c++) {
		if (nodes[c - 1].parent != id || i-- > 0)
			continue;
		*ino = c;
		*name = nodes[c - 1].name;
		*type = S_ISDIR(nodes[c - 1].mode) ? DT_DIR : DT_REG;
		return true;
	}
	return false;
}

static size_t list_dir(uint64_t id, uint64_t from, size_t max, char *out)
{
	uint64_t ino;
	const char *name;
	uint32_t type;
	size_t n = 0;

	for (uint64_t i = from; dir_entry(id, i, &ino, &name, &type); i++) {
		size_t namelen = strlen(name), size = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
		struct fuse_dirent de = {.ino = ino, .off = i + 1, .namelen = (uint32_t)namelen,
		                         .type = type};

		if (size > max - n)
			break;
		memset(out + n, 0, size);
		memcpy(out + n, &de, FUSE_NAME_OFFSET);
		memcpy(out + n + FUSE_NAME_OFFSET, name, namelen);
		n += size;
	}
	return n;
}

/* Fills r with the answer to the request in (arg: the len bytes after its header); false for
 * a request that takes no answer. */
static bool serve(const struct fuse_in_header *in, const char *arg, size_t len, struct reply *r)
{
	const struct node *node = node_of(in->nodeid);
	size_t n = 0;
	int err = 0;

	switch (in->opcode) {
	case FUSE_FORGET:       /* nothing is counted here: a node lives for ever */
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:    /* every answer is immediate */
		return false;
	case FUSE_LOOKUP: {
		struct fuse_entry_out e;
		uint64_t c;

		if (!len || memchr(arg, '\0', len) == NULL) {
			err = EIO;
			break;
		}
		if (!node || !S_ISDIR(node->mode)) {
			err = node ? ENOTDIR : ENOENT;
			break;
		}
		for (c = 2; c <= NNODES; c++)
			if (nodes[c - 1].parent == in->nodeid && strcmp(nodes[c - 1].name, arg) == 0)
				break;
		if (c > NNODES) {
			err = ENOENT;
			break;
		}
		memset(&e, 0, sizeof(e));
		e.nodeid = c;
		e.generation = 1;
		e.entry_valid = e.attr_valid = TIMEOUT;
		fill_attr(c, &e.attr);
		memcpy(r->body, &e, n = sizeof(e));
		break;
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out a;

		if (len < sizeof(struct fuse_getattr_in)) {
			err = EIO;
			break;
		}
		if (!node) {
			err = ENOENT;
			break;
		}
		memset(&a, 0, sizeof(a));
		a.attr_valid = TIMEOUT;
		fill_attr(in->nodeid, &a.attr);
		memcpy(r->body, &a, n = sizeof(a));
		break;
	}
	case FUSE_STATFS: {
		struct fuse_statfs_out s;

		memset(&s, 0, sizeof(s));
		s.st.blocks = 1024;
		s.st.bfree = s.st.bavail = 1024;
		s.st.files = 16;
		s.st.ffree = 16 - NNODES;
		s.st.bsize = s.st.frsize = 4096;
		s.st.namelen = 255;
		memcpy(r->body, &s, n = sizeof(s));
		break;
	}
	case FUSE_OPENDIR: {
		struct fuse_open_out o;

		if (len < sizeof(struct fuse_open_in)) {
			err = EIO;
			break;
		}
		if (!node || !S_ISDIR(node->mode)) {
			err = node ? ENOTDIR : ENOENT;
			break;
		}
		memset(&o, 0, sizeof(o));
		o.fh = in->nodeid;
		memcpy(r->body, &o, n = sizeof(o));
		break;
	}
	case FUSE_READDIR: {
		struct fuse_read_in rd;

		if (len < sizeof(rd)) {
			err = EIO;
			break;
		}
		memcpy(&rd, arg, sizeof(rd));
		if (!node || !S_ISDIR(node->mode)) {
			err = node ? ENOTDIR : ENOENT;
			break;
		}
		n = list_dir(in->nodeid, rd.offset, rd.size < REPLY_MAX ? rd.size : REPLY_MAX, r->body);
		break;
	}
	case FUSE_RELEASEDIR:
		if (len < sizeof(struct fuse_release_in))
			err = EIO;
		break;
	case FUSE_DESTROY:
		break;
	default:
		err = ENOSYS;
		break;
	}
	r->h.unique = in->unique;
	r->h.error = -err;
	r->h.len = (uint32_t)(sizeof(r->h) + (err ? 0 : n));
	return true;
}

/* ---------------------------------------------------------------------------------------- */
/* /dev/fuse: a request per read(2), its answer by one write(2). */

static ssize_t read_request(char *buf, size_t size)
{
	ssize_t n;

	while ((n = read(fuse_fd, buf, size)) < 0 && (errno == EINTR || errno == EAGAIN))
		;
	return n;
}

static void *reader_main(void *arg)
{
	char *buf = malloc(READ_BUF);
	struct reply *r = malloc(sizeof(*r));
	ssize_t n;

	(void)arg;
	if (!buf || !r)
		goto out;
	/* ENODEV once the file system is unmounted: the reader's end */
	while ((n = read_request(buf, READ_BUF)) > 0) {
		struct fuse_in_header in;

		if ((size_t)n < sizeof(in))
			continue; /* nothing to answer: no id to answer it with */
		memcpy(&in, buf, sizeof(in));
		if (in.len != (size_t)n) {
			r->h = (struct fuse_out_header){.len = sizeof(r->h), .error = -EIO,
			                                .unique = in.unique};
		} else if (!serve(&in, buf + sizeof(in), (size_t)n - sizeof(in), r)) {
			continue;
		}
		/* ENOENT: the caller was interrupted and is gone; ENODEV: the next read ends */
		if (write(fuse_fd, r, r->h.len) < 0 && errno != ENOENT && errno != ENODEV)
			break;
	}
out:
	free(buf);
	free(r);
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* io_uring: each queue's entry is registered once, then each answer goes back with the
 * command that fetches the next request (commit and fetch). */

/* The CPUs the kernel makes queues for: every possible one (a queue without an entry holds
 * every request up). 0 if the list cannot be read. */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	char line[256], *p = line, *end;
	unsigned long n = 0, a, b;

	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	while (*p && *p != '\n') {
		a = b = strtoul(p, &end, 10);
		if (end == p)
			return 0;
		if (*end == '-') {
			p = end + 1;
			b = strtoul(p, &end, 10);
			if (end == p || b < a)
				return 0;
		}
		n += b - a + 1;
		p = *end == ',' ? end + 1 : end;
		if (n > UINT16_MAX)
			return 0;
	}
	return (unsigned)n;
}

/* Each queue's ring and buffers, made before the mount: after the INIT reply asks for
 * io_uring, the kernel holds every request until each queue has its entry. */
static void rings_prepare(void)
{
	int rc;

	if (!(nqueues = possible_cpus()))
		fail("cannot count the possible CPUs (/sys/devices/system/cpu/possible)");
	payload_size = MAX_PAGES * page_size;
	if (payload_size < FUSE_MIN_READ_BUFFER)
		payload_size = FUSE_MIN_READ_BUFFER;
	if (payload_size < MAX_WRITE)
		payload_size = MAX_WRITE;
	if (!(queues = calloc(nqueues, sizeof(*queues))))
		fail("out of memory");
	for (unsigned i = 0; i < nqueues; i++) {
		struct queue *q = &queues[i];

		q->qid = (uint16_t)i;
		q->region_size = page_size + payload_size;
		q->region = mmap(NULL, q->region_size, PROT_READ | PROT_WRITE,
		                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (q->region == MAP_FAILED)
			fail("mmap of the io_uring buffers: %s", strerror(errno));
		q->hdr = (struct ring_header *)q->region;
		q->payload = q->region + page_size;
		q->iov[0] = (struct iovec){q->hdr, sizeof(*q->hdr)};
		q->iov[1] = (struct iovec){q->payload, payload_size};
		if ((rc = io_uring_queue_init(4, &q->ring, IORING_SETUP_SQE128)) < 0)
			fail("io_uring_setup: %s%s", strerror(-rc),
			     rc == -EPERM ? " (kernel.io_uring_disabled?)" : "");
	}
}

/* Submits the queue's command: 0 once the kernel took it, or -errno. */
static int ring_command(struct queue *q, uint32_t op, uint64_t commit_id, bool wait)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ring_cmd *cmd;
	int rc;

	if (!sqe)
		return -EBUSY; /* never: one command is in flight at a time */
	memset(sqe, 0, 2 * sizeof(*sqe)); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)q->iov;
	sqe->len = 2;
	cmd = (struct ring_cmd *)((char *)sqe + offsetof(struct io_uring_sqe, cmd));
	cmd->commit_id = commit_id;
	cmd->qid = q->qid;
	while ((rc = wait ? io_uring_submit_and_wait(&q->ring, 1) : io_uring_submit(&q->ring)) ==
	       -EINTR)
		;
	return rc < 0 ? rc : 0;
}

/* The result of the command in flight: 0 when it brought a request, else -errno (ENOTCONN
 * and the like once the file system is unmounted). */
static int ring_wait(struct queue *q)
{
	struct io_uring_cqe *cqe;
	int rc;

	while ((rc = io_uring_wait_cqe(&q->ring, &cqe)) == -EINTR)
		;
	if (rc < 0)
		return rc;
	rc = cqe->res;
	io_uring_cqe_seen(&q->ring, cqe);
	return rc < 0 ? rc : 0;
}

/* The request in the entry, checked against the buffers, answered in them. */
static void serve_entry(struct queue *q, struct reply *r)
{
	struct fuse_in_header in;
	uint64_t id = q->hdr->ent.commit_id;
	size_t payload_sz = q->hdr->ent.payload_sz, arg0 = 0, body;

	memcpy(&in, q->hdr->in_out, sizeof(in));
	if (in.len < sizeof(in) || payload_sz > payload_size || in.len - sizeof(in) < payload_sz ||
	    (arg0 = in.len - sizeof(in) - payload_sz) > sizeof(q->hdr->op_in) || in.unique != id) {
		r->h = (struct fuse_out_header){.len = sizeof(r->h), .error = -EIO, .unique = id};
	} else {
		/* the arguments made whole as on /dev/fuse: the first one just before the payload */
		char *args = q->payload - arg0;

		memcpy(args, q->hdr->op_in, arg0);
		if (!serve(&in, args, arg0 + payload_sz, r)) /* not carried by rings: ended all the same */
			r->h = (struct fuse_out_header){.len = sizeof(r->h), .error = -ENOSYS, .unique = id};
	}
	body = r->h.len - sizeof(r->h);
	memcpy(q->hdr->in_out, &r->h, sizeof(r->h));
	memcpy(q->payload, r->body, body);
	q->hdr->ent.payload_sz = (uint32_t)body;
}

static void *queue_main(void *arg)
{
	struct queue *q = arg;
	struct io_uring_cqe *cqe;
	struct reply *r = malloc(sizeof(*r));
	cpu_set_t set;
	int rc;

	/* served on its own CPU: the caller there hands over to it without a cross-CPU wake-up
	 * (doc/kernel.md §4.10), as strictfs's entries are; where that CPU cannot be had, the
	 * scheduler places it */
	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	rc = r ? ring_command(q, RING_REGISTER, 0, false) : -ENOMEM;
	/* a refused registration completes at once; an accepted one when a request comes */
	if (!rc && io_uring_peek_cqe(&q->ring, &cqe) == 0 && cqe->res < 0)
		rc = cqe->res;
	pthread_mutex_lock(&reg_lock);
	reg_done++;
	if (rc && !reg_error)
		reg_error = -rc;
	pthread_cond_broadcast(&reg_changed);
	pthread_mutex_unlock(&reg_lock);
	while (!rc && !(rc = ring_wait(q))) {
		serve_entry(q, r);
		rc = ring_command(q, RING_COMMIT_AND_FETCH, q->hdr->ent.commit_id, true);
	}
	free(r);
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Start: mount, INIT, threads. */

/* Why the kernel does not offer FUSE over io_uring, as far as the parameter says. */
static const char *uring_refusal(void)
{
	FILE *f = fopen(URING_PARAM, "re");
	int c;

	if (!f)
		return "this kernel has no FUSE over io_uring (no " URING_PARAM ")";
	c = fgetc(f);
	fclose(f);
	return c == 'Y' ? NULL : "the kernel does not offer FUSE over io_uring: " URING_PARAM " is N";
}

/* The first request is INIT; the answer asks for io_uring where wanted. */
static void init_session(bool uring)
{
	char *buf = malloc(READ_BUF);
	struct fuse_in_header in;
	struct fuse_init_in init;
	struct {
		struct fuse_out_header h;
		struct fuse_init_out o;
	} out;
	uint64_t offered;
	ssize_t n;

	if (!buf)
		fail("out of memory");
	if ((n = read_request(buf, READ_BUF)) < 0)
		fail("reading INIT from /dev/fuse: %s", strerror(errno));
	memset(&init, 0, sizeof(init));
	if ((size_t)n < sizeof(in) + offsetof(struct fuse_init_in, flags2))
		fail("the kernel's first request is %zd bytes, too short for INIT", n);
	memcpy(&in, buf, sizeof(in));
	if (in.opcode != FUSE_INIT || in.len != (size_t)n)
		fail("the kernel's first request is not INIT (opcode %u, %u bytes)", in.opcode, in.len);
	n -= (ssize_t)sizeof(in);
	memcpy(&init, buf + sizeof(in), (size_t)n < sizeof(init) ? (size_t)n : sizeof(init));
	free(buf);
	offered = init.flags;
	if ((init.flags & FUSE_INIT_EXT) && (size_t)n >= offsetof(struct fuse_init_in, flags2) + 4)
		offered |= (uint64_t)init.flags2 << 32;
	if (init.major != FUSE_KERNEL_VERSION)
		fail("the kernel speaks FUSE %u.%u, not %u.x", init.major, init.minor, FUSE_KERNEL_VERSION);
	if (uring && !(offered & OVER_IO_URING)) {
		const char *why = uring_refusal();
		fail("%s", why ? why : "the kernel's INIT did not offer FUSE over io_uring "
		     "(fuse.enable_uring was N when the mount was made)");
	}

	memset(&out, 0, sizeof(out));
	out.h.len = sizeof(out);
	out.h.unique = in.unique;
	out.o.major = FUSE_KERNEL_VERSION;
	out.o.minor = init.minor < FUSE_KERNEL_MINOR_VERSION ? init.minor : FUSE_KERNEL_MINOR_VERSION;
	out.o.max_readahead = init.max_readahead;
	out.o.max_write = MAX_WRITE;
	out.o.time_gran = 1;
	if (offered & FUSE_MAX_PAGES) {
		out.o.flags |= FUSE_MAX_PAGES;
		out.o.max_pages = MAX_PAGES;
	}
	if (uring) {
		out.o.flags |= FUSE_INIT_EXT;
		out.o.flags2 |= (uint32_t)(OVER_IO_URING >> 32);
	}
	/* the kernel makes the connection ready for registrations within this write */
	if (write(fuse_fd, &out, sizeof(out)) != (ssize_t)sizeof(out))
		fail("the kernel refused the INIT reply: %s", strerror(errno));
}

static void start_threads(bool uring, pthread_t *readers, unsigned nreaders)
{
	int rc;

	for (unsigned i = 0; i < nreaders; i++)
		if ((rc = pthread_create(&readers[i], NULL, reader_main, NULL)))
			fail("pthread_create: %s", strerror(rc));
	if (!uring)
		return;
	for (unsigned i = 0; i < nqueues; i++)
		if ((rc = pthread_create(&queues[i].thread, NULL, queue_main, &queues[i])))
			fail("pthread_create: %s", strerror(rc));
	/* nothing is served until every queue has its entry */
	pthread_mutex_lock(&reg_lock);
	while (reg_done < nqueues)
		pthread_cond_wait(&reg_changed, &reg_lock);
	rc = reg_error;
	pthread_mutex_unlock(&reg_lock);
	if (rc)
		fail("the kernel refused the io_uring registration: %s", strerror(rc));
}

/* The daemon: mount, serve, and exit when the file system is unmounted. */
static int serve_mount(bool uring, unsigned nreaders)
{
	pthread_t readers[MAX_READERS];
	char opts[128];
	int null;

	signal(SIGPIPE, SIG_IGN);
	started = time(NULL);
	if (uring)
		rings_prepare();
	if ((fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC)) < 0)
		fail("/dev/fuse: %s", strerror(errno));
	snprintf(opts, sizeof(opts),
	         "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions", fuse_fd);
	if (mount("floor", mnt, "fuse.floor", MS_NOSUID | MS_NODEV, opts) < 0)
		fail("mount on %s: %s", mnt, strerror(errno));
	mounted = true;
	init_session(uring);
	start_threads(uring, readers, nreaders);

	/* up: the parent returns, the daemon lets go of its stdio */
	if (write(ready_fd, "OK\n", 3) != 3) {
		/* the parent is gone; serve all the same */
	}
	close(ready_fd);
	ready_fd = -1;
	if (chdir("/") < 0) {
		/* the mountpoint was absolute: nothing depends on the directory */
	}
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	for (unsigned i = 0; i < nreaders; i++)
		pthread_join(readers[i], NULL);
	for (unsigned i = 0; uring && i < nqueues; i++)
		pthread_join(queues[i].thread, NULL);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */

static void usage(FILE *to)
{
	fprintf(to, "usage: floor [--uring] [--readers N] MOUNTPOINT\n"
	            "Mounts a FUSE file system answered from memory at MOUNTPOINT (as root) and\n"
	            "serves it until it is unmounted.\n"
	            "  --uring      requests over io_uring (fuse.enable_uring=Y), a queue per CPU\n"
	            "  --readers N  threads reading /dev/fuse, 1 to %d (default %d; --uring: 1)\n",
	        MAX_READERS, READERS);
}

/* Whether the last mount at path is a floor: after a daemon that died before it reported,
 * its mount (now without a server) is ours to remove. */
static bool floor_mounted_at(const char *path)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char line[4096], src[256], at[PATH_MAX], type[64];
	bool ours = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%255s %4095s %63s", src, at, type) == 3 && strcmp(at, path) == 0)
			ours = strcmp(type, "fuse.floor") == 0;
	fclose(f);
	return ours;
}

/* The parent: waits for the daemon's word, and says it. */
static int wait_ready(int fd, pid_t child)
{
	char msg[512];
	size_t got = 0;
	ssize_t n;
	int status;

	while (got < sizeof(msg) - 1 && (n = read(fd, msg + got, sizeof(msg) - 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	msg[got] = '\0';
	if (strcmp(msg, "OK\n") == 0)
		return 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (got) {
		fprintf(stderr, "floor: %s", msg);
		if (msg[got - 1] != '\n')
			fputc('\n', stderr);
		return 1;
	}
	if (WIFSIGNALED(status))
		fprintf(stderr, "floor: the server was killed by signal %d before the mount served\n",
		        WTERMSIG(status));
	else
		fprintf(stderr, "floor: the server ended before the mount served\n");
	if (floor_mounted_at(mnt))
		umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW);
	return 1;
}

int main(int argc, char **argv)
{
	static char abs_mnt[PATH_MAX];
	bool uring = false;
	long nreaders = 0;
	char *end;
	struct stat st;
	const char *why;
	int p[2];
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--uring") == 0) {
			uring = true;
		} else if (strcmp(argv[i], "--readers") == 0 && i + 1 < argc) {
			nreaders = strtol(argv[++i], &end, 10);
			if (*argv[i] == '\0' || *end != '\0' || nreaders < 1 || nreaders > MAX_READERS) {
				fprintf(stderr, "floor: --readers takes 1 to %d\n", MAX_READERS);
				return 2;
			}
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' || mnt) {
			usage(stderr);
			return 2;
		} else {
			mnt = argv[i];
		}
	}
	if (!mnt) {
		usage(stderr);
		return 2;
	}
	if (!realpath(mnt, abs_mnt) || stat(abs_mnt, &st) < 0) {
		fprintf(stderr, "floor: %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "floor: %s: not a directory\n", mnt);
		return 1;
	}
	mnt = abs_mnt;
	/* said at once where it is already known; the INIT request says it for certain */
	if (uring && (why = uring_refusal())) {
		fprintf(stderr, "floor: %s\n", why);
		return 1;
	}
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "floor: pipe: %s\n", strerror(errno));
		return 1;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "floor: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid > 0) {
		close(p[1]);
		return wait_ready(p[0], pid);
	}
	close(p[0]);
	ready_fd = p[1];
	setsid();
	return serve_mount(uring, nreaders ? (unsigned)nreaders : uring ? 1 : READERS);
}
