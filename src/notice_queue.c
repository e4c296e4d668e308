/* The coherence notices' queue (see notice_queue.h): a list under one lock, a notifier thread
 * that takes notices off it and delivers each without the lock, and the bounded wait of a
 * request for its own. */
#include "notice_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* A request waits for its notices while the notifier makes progress, and gives up only when
 * it has delivered nothing for this long (it is then blocked on a lock a request of the
 * target view holds): the wait grows with the number of views, never the staleness. */
#define STALL_BOUND_MS 200
/* A delivery to a view that has a request waiting here, still not done after this long, waits
 * for a lock that request holds in its kernel (its directory, during a create or unlink):
 * both give up waiting, or each would wait out the stall bound on every such change. */
#define CYCLE_MS 2

#define NONE UINT32_MAX

struct item {
	struct item *next;
	uint64_t seq;
	struct sfs_notice notice;   /* its name is name[] */
	char name[];
};

struct sfs_noticeq {
	pthread_mutex_t lock;         /* the coherence queue lock (doc/design.md): all below */
	pthread_cond_t work;
	pthread_cond_t done;
	struct item *head, *tail;
	uint64_t next_seq, done_seq;
	uint32_t delivering;          /* the view the notifier is delivering to, or NONE */
	struct timespec since;        /* when that delivery began */
	uint32_t slots;
	uint32_t *waiting;            /* requests of each view waiting in sfs_noticeq_flush */
	bool stop;
	sfs_notice_deliver_fn *deliver;
	void *arg;
	pthread_t thread;
};

/* The newest notice this thread queued with wait, 0 once flushed. */
static __thread uint64_t last_queued;

/* Under q->lock: the oldest notice, taken off the queue; NULL when empty. */
static struct item *take_oldest(struct sfs_noticeq *q)
{
	struct item *it = q->head;

	if (it) {
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
	}
	return it;
}

static void *notifier(void *arg)
{
	struct sfs_noticeq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct item *it;
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->work, &q->lock);
		if (!(it = take_oldest(q)))
			break; /* stopped, with nothing left to deliver */
		q->delivering = it->notice.slot;
		clock_gettime(CLOCK_MONOTONIC, &q->since);
		pthread_mutex_unlock(&q->lock);
		q->deliver(q->arg, &it->notice);
		pthread_mutex_lock(&q->lock);
		q->delivering = NONE;
		q->done_seq = it->seq;
		pthread_cond_broadcast(&q->done);
		free(it);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void noticeq_free(struct sfs_noticeq *q)
{
	pthread_cond_destroy(&q->done);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q->waiting);
	free(q);
}

int sfs_noticeq_start(struct sfs_noticeq **out, uint32_t slots, sfs_notice_deliver_fn *deliver,
                      void *arg)
{
	struct sfs_noticeq *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;
	int rc;

	if (!q || !(q->waiting = calloc(slots, sizeof(*q->waiting)))) {
		free(q);
		return -ENOMEM;
	}
	q->slots = slots;
	q->deliver = deliver;
	q->arg = arg;
	q->delivering = NONE;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	/* the waits are timed on the monotonic clock: a clock step must not stretch them */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->done, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&q->thread, NULL, notifier, q);
	if (rc) {
		noticeq_free(q);
		return -rc;
	}
	*out = q;
	return 0;
}

void sfs_noticeq_stop(struct sfs_noticeq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	noticeq_free(q);
}

void sfs_noticeq_push(struct sfs_noticeq *q, const struct sfs_notice *n, bool wait)
{
	size_t nlen = n->name ? strlen(n->name) + 1 : 1;
	struct item *it = malloc(sizeof(*it) + nlen);

	if (!it)
		return;
	it->next = NULL;
	it->notice = *n;
	memcpy(it->name, n->name ? n->name : "", nlen);
	it->notice.name = it->name;
	pthread_mutex_lock(&q->lock);
	it->seq = ++q->next_seq;
	if (wait)
		last_queued = it->seq;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
}

/* Under q->lock: whether the delivery in progress waits on a request waiting here (CYCLE_MS).
 * Giving up is safe for that view: the notifier is queued on its lock, and takes it as soon
 * as the request lets it go, before anything else of that view can look. */
static bool waits_on_a_waiter(struct sfs_noticeq *q)
{
	struct timespec now;

	if (q->delivering == NONE || q->delivering >= q->slots || !q->waiting[q->delivering])
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - q->since.tv_sec) * 1000 + (now.tv_nsec - q->since.tv_nsec) / 1000000 >=
	       CYCLE_MS;
}

static bool passed(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

void sfs_noticeq_flush(struct sfs_noticeq *q, uint32_t slot)
{
	struct timespec deadline, tick;
	uint64_t seen;

	if (!q || !last_queued || slot >= q->slots)
		return;
	sfs_deadline_in(CLOCK_MONOTONIC, STALL_BOUND_MS, &deadline);
	pthread_mutex_lock(&q->lock);
	seen = q->done_seq;
	q->waiting[slot]++;
	while (q->done_seq < last_queued && !waits_on_a_waiter(q)) {
		sfs_deadline_in(CLOCK_MONOTONIC, CYCLE_MS, &tick);
		if (pthread_cond_timedwait(&q->done, &q->lock, &tick) != ETIMEDOUT || !passed(&deadline))
			continue;
		if (q->done_seq == seen)
			break; /* stalled: see STALL_BOUND_MS */
		seen = q->done_seq;
		sfs_deadline_in(CLOCK_MONOTONIC, STALL_BOUND_MS, &deadline);
	}
	q->waiting[slot]--;
	pthread_mutex_unlock(&q->lock);
	last_queued = 0;
}
