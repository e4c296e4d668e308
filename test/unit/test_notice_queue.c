/* Tests of the coherence notices' queue (notice_queue.h) with a recording callback in place
 * of the views' kernels: the order of delivery, the copy of a notice, the request's wait for
 * its own notices and its two bounds (a stalled notifier, a delivery that waits on the waiting
 * request's view), and a stop that delivers what is left. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "notice_queue.h"

#define MAX_SEEN 8192

/* What the "kernels" were told, and a gate that holds the notifier in a delivery. */
struct sink {
	pthread_mutex_t lock;
	pthread_cond_t opened;
	bool closed;              /* deliveries wait until it opens */
	long delay_ms;            /* each delivery takes this long */
	size_t n;
	struct sfs_notice seen[MAX_SEEN];
	char names[MAX_SEEN][16];
};

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->opened, NULL);
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, ms % 1000 * 1000000};

	nanosleep(&t, NULL);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void record(void *arg, const struct sfs_notice *n)
{
	struct sink *s = arg;

	pthread_mutex_lock(&s->lock);
	while (s->closed)
		pthread_cond_wait(&s->opened, &s->lock);
	pthread_mutex_unlock(&s->lock);
	if (s->delay_ms)
		sleep_ms(s->delay_ms);
	pthread_mutex_lock(&s->lock);
	if (s->n < MAX_SEEN) {
		s->seen[s->n] = *n;
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", n->name);
		s->n++;
	}
	pthread_mutex_unlock(&s->lock);
}

static void gate(struct sink *s, bool closed)
{
	pthread_mutex_lock(&s->lock);
	s->closed = closed;
	pthread_cond_broadcast(&s->opened);
	pthread_mutex_unlock(&s->lock);
}

static size_t delivered(struct sink *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void push(struct sfs_noticeq *q, uint32_t slot, uint64_t ino, const char *name, bool wait)
{
	struct sfs_notice n = {.slot = slot, .kind = name ? SFS_NOTICE_ENTRY : SFS_NOTICE_INODE,
	                       .ino = ino, .off = -1, .name = name};

	sfs_noticeq_push(q, &n, wait);
}

/* In the order queued, each a copy: the caller's name may change right after. */
static void test_order_and_copy(void)
{
	struct sink *s = malloc(sizeof(*s));
	struct sfs_noticeq *q;
	char name[16];
	bool in_order = true;

	sink_init(s);
	CHECK(sfs_noticeq_start(&q, 8, record, s) == 0, "a queue");
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		push(q, (uint32_t)i % 8, 1000 + i, i % 2 ? name : NULL, true);
		strcpy(name, "overwritten");
	}
	sfs_noticeq_flush(q, 0);
	CHECK(delivered(s) == 100, "flush waits for all it queued (%zu)", delivered(s));
	for (int i = 0; i < 100 && i < (int)s->n; i++) {
		char want[16];
		snprintf(want, sizeof(want), "e%d", i);
		if (s->seen[i].ino != 1000u + i || s->seen[i].slot != (uint32_t)i % 8 ||
		    strcmp(s->names[i], i % 2 ? want : "") ||
		    s->seen[i].kind != (i % 2 ? SFS_NOTICE_ENTRY : SFS_NOTICE_INODE))
			in_order = false;
	}
	CHECK(in_order, "in order, with the names as queued");
	sfs_noticeq_stop(q);
	free(s);
}

/* A notice queued without wait holds no flush up; nor does a flush with nothing queued. */
/* A queue whose notifier is held at the gate before its first delivery; its sink. */
static struct sink *gated_queue(struct sfs_noticeq **q)
{
	struct sink *s = malloc(sizeof(*s));

	sink_init(s);
	CHECK(sfs_noticeq_start(q, 8, record, s) == 0, "a queue");
	gate(s, true);
	return s;
}

/* The gate opened and the queue stopped: what it held is delivered. */
static void open_and_stop(struct sfs_noticeq *q, struct sink *s, size_t want, const char *what)
{
	gate(s, false);
	sfs_noticeq_stop(q);
	CHECK(delivered(s) == want, "%s", what);
	free(s);
}

static void test_no_wait(void)
{
	struct sfs_noticeq *q;
	struct sink *s = gated_queue(&q);
	long t0;

	t0 = now_ms();
	sfs_noticeq_flush(q, 1);
	push(q, 2, 7, "own", false);
	sfs_noticeq_flush(q, 1);
	CHECK(now_ms() - t0 < 100, "returns at once (%ld ms)", now_ms() - t0);
	CHECK(delivered(s) == 0, "the notice still waits at the gate");
	open_and_stop(q, s, 1, "and is delivered before the queue stops");
}

/* A notifier that delivers nothing for the stall bound (200 ms) is waited for no longer. */
static void test_stall_bound(void)
{
	struct sfs_noticeq *q;
	struct sink *s = gated_queue(&q);
	long t0, took;

	push(q, 1, 7, NULL, true);
	t0 = now_ms();
	sfs_noticeq_flush(q, 2);
	took = now_ms() - t0;
	CHECK(took >= 190 && took < 2000, "a stalled delivery is waited for 200 ms (%ld)", took);
	CHECK(delivered(s) == 0, "and was not delivered");
	open_and_stop(q, s, 1, "the stop delivers it");
}

/* A delivery in progress to the waiting request's own view may wait for a lock that request
 * holds: the request stops waiting after the cycle bound, long before the stall bound. */
static void test_cycle_bound(void)
{
	struct sfs_noticeq *q;
	struct sink *s = gated_queue(&q);
	long t0, took;

	push(q, 3, 7, "x", true);
	sleep_ms(20); /* the notifier is in the delivery to view 3 */
	t0 = now_ms();
	sfs_noticeq_flush(q, 3);
	took = now_ms() - t0;
	CHECK(took < 150, "a request of view 3 gives up at once (%ld ms)", took);
	open_and_stop(q, s, 1, "the stop delivers it");
}

/* The stall bound is between deliveries, not overall: a slow notifier that keeps delivering
 * is waited for to the end. */
static void test_progress_extends(void)
{
	struct sink *s = malloc(sizeof(*s));
	struct sfs_noticeq *q;

	sink_init(s);
	s->delay_ms = 70;
	CHECK(sfs_noticeq_start(&q, 8, record, s) == 0, "a queue");
	for (int i = 0; i < 5; i++)
		push(q, 1, (uint64_t)i, NULL, true);
	sfs_noticeq_flush(q, 2);
	CHECK(delivered(s) == 5, "all five, 350 ms in all (%zu)", delivered(s));
	sfs_noticeq_stop(q);
	free(s);
}

#define THREADS 4
#define EACH 1000

struct pusher {
	struct sfs_noticeq *q;
	uint32_t slot;
};

static void *pusher(void *arg)
{
	struct pusher *p = arg;

	for (int i = 0; i < EACH; i++) {
		push(p->q, p->slot, (uint64_t)p->slot << 32 | (uint64_t)i, NULL, true);
		if (i % 100 == 99)
			sfs_noticeq_flush(p->q, p->slot);
	}
	sfs_noticeq_flush(p->q, p->slot);
	return NULL;
}

/* Requests of several views queue and wait at once: each one's notices arrive, in its order. */
static void test_threads(void)
{
	struct sink *s = malloc(sizeof(*s));
	struct pusher p[THREADS];
	pthread_t th[THREADS];
	struct sfs_noticeq *q;
	uint64_t next[THREADS] = {0};
	bool ordered = true;

	sink_init(s);
	CHECK(sfs_noticeq_start(&q, THREADS, record, s) == 0, "a queue");
	for (int i = 0; i < THREADS; i++) {
		p[i] = (struct pusher){q, (uint32_t)i};
		pthread_create(&th[i], NULL, pusher, &p[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	sfs_noticeq_stop(q);
	CHECK(s->n == THREADS * EACH, "every notice delivered (%zu)", s->n);
	for (size_t i = 0; i < s->n; i++) {
		uint32_t v = s->seen[i].slot;
		if (v >= THREADS || (s->seen[i].ino & 0xffffffff) != next[v]++)
			ordered = false;
	}
	CHECK(ordered, "each thread's in its order");
	free(s);
}

int main(void)
{
	test_order_and_copy();
	test_no_wait();
	test_stall_bound();
	test_cycle_bound();
	test_progress_extends();
	test_threads();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
