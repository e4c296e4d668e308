/* Requests whose answer waits for another party (see ops.h, "wait.c"). */
#include "ops.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fuse_io.h"
#include "locks.h"

/* Waiting requests served on threads of their own, over all views: beyond, refused. */
#define WAITERS_MAX 4096
static atomic_int waiters;

static void interrupted(fuse_req_t req, void *data)
{
	(void)req;
	sfs_lock_wait_interrupt(&((struct req_wait *)data)->w);
}

void req_wait_interruptible(struct req_wait *x, bool on)
{
	/* libfuse calls the handler under the request's lock, at once if the interrupt came
	 * first; once it is off, none reaches x */
	fuse_req_interrupt_func(x->req, on ? interrupted : NULL, on ? x : NULL);
}

static void run_and_free(struct req_wait *x)
{
	struct sfs_view *v = x->view;

	x->run(x);
	pthread_mutex_destroy(&x->w.lock);
	free(x);
	atomic_fetch_sub(&v->waits, 1); /* last: the view's end waits for it */
}

static void *waiter_thread(void *arg)
{
	run_and_free(arg);
	atomic_fetch_sub(&waiters, 1);
	return NULL;
}

/* A thread of its own for the wait, with a small stack: it only waits and answers. */
static int start_waiter(struct req_wait *x)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (atomic_fetch_add(&waiters, 1) >= WAITERS_MAX) {
		atomic_fetch_sub(&waiters, 1);
		return -ENOLCK;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&t, &attr, waiter_thread, x);
	pthread_attr_destroy(&attr);
	if (rc)
		atomic_fetch_sub(&waiters, 1);
	return rc;
}

int req_wait_start(struct req_wait *x)
{
	int where = sfs_fuse_io_wait_begin(), rc;

	if (where < 0)
		return where;
	pthread_mutex_init(&x->w.lock, NULL);
	atomic_fetch_add(&x->view->waits, 1);
	if (where == 0) {
		run_and_free(x);
		sfs_fuse_io_wait_end();
		return 0;
	}
	if ((rc = start_waiter(x)) < 0) {
		atomic_fetch_sub(&x->view->waits, 1);
		pthread_mutex_destroy(&x->w.lock);
	}
	return rc;
}
