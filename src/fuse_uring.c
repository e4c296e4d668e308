/* A view's io_uring entries set up, taken over from a predecessor, held and ended (see
 * fuse_uring.h); their threads serve in fuse_uring_serve.c. */
#include "fuse_uring_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <syslog.h>
#include <unistd.h>

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

/* A slot a predecessor left a request in (taken, or copied in after its last command) or a
 * reply: its entry is set up at once, to answer or commit it (adopt_entry). */
static bool slot_holds_request(const struct sfs_fuse_uring *u, unsigned i)
{
	const char *region = u->area + (size_t)i * u->region;
	const struct req_header *hdr = (const void *)region;
	struct sfs_uring_entry_state *sh = (void *)(region + SHARED_OFFSET);

	return atomic_load(&sh->busy) != 0 || hdr->ent.commit_id != 0;
}

static void entry_free(struct entry *e)
{
	if (e->thread_started)
		pthread_join(e->thread, NULL);
	if (e->ring_ready)
		io_uring_queue_exit(&e->ring);
	pthread_mutex_destroy(&e->sq_lock);
	free(e);
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
	e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
	e->iov[1] = (struct iovec){e->payload, u->payload};
	if ((rc = io_uring_queue_init(2, &e->ring, IORING_SETUP_SQE128)) < 0)
		return rc;
	e->ring_ready = true;
	if ((rc = pthread_create(&e->thread, NULL, fuse_uring_entry_main, e)))
		return -rc;
	e->thread_started = true;
	return 0;
}

int fuse_uring_slot_setup(struct sfs_fuse_uring *u, unsigned i, bool inherited)
{
	struct entry *e = calloc(1, sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->sq_lock, NULL);
	if ((rc = entry_setup(u, e, (uint16_t)(i / u->per_queue), i, inherited))) {
		entry_free(e);
		return rc;
	}
	u->ents[i] = e;
	u->nentries++;
	return 0;
}

/* A view's spares, shared out among its queues: SPARES_TOTAL, SPARES_MIN a queue at least. */
static unsigned spares_per_queue(unsigned queues)
{
	unsigned n = SPARES_TOTAL / queues;

	return n < SPARES_MIN ? SPARES_MIN : n;
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
	unsigned per_queue = SFS_URING_DEPTH + spares_per_queue(queues);
	u = calloc(1, sizeof(*u) + (size_t)queues * per_queue * sizeof(u->ents[0]));
	if (!u)
		return NULL;
	u->per_queue = per_queue;
	u->slots = queues * per_queue;
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
	if ((rc = inherited = map_area(u, u->slots, from)) > 0)
		rc = 0;
	for (unsigned i = 0; i < u->slots && !rc; i++) {
		if (i % per_queue < SFS_URING_DEPTH || (inherited > 0 && slot_holds_request(u, i)))
			rc = fuse_uring_slot_setup(u, i, inherited > 0);
	}
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
	/* no spare is set up any more: spare_for_wait holds the lock and sees GO_END */
	for (unsigned i = 0; i < u->slots; i++) {
		if (u->ents[i])
			entry_free(u->ents[i]);
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
	out->entries = u->slots;
}

void sfs_fuse_uring_hold(struct sfs_fuse_uring *u)
{
	pthread_mutex_lock(&u->lock);
	u->holding = true;
	/* an entry's submission under way when holding changed ends before this returns, and
	 * the next one sees it (prep_cmd reads it under the entry's sq_lock) */
	for (unsigned i = 0; i < u->slots; i++) {
		if (u->ents[i]) {
			pthread_mutex_lock(&u->ents[i]->sq_lock);
			pthread_mutex_unlock(&u->ents[i]->sq_lock);
		}
	}
	pthread_mutex_unlock(&u->lock);
}
