/* The handover gate and the request a thread serves (see fuse_gate.h). */
#include "fuse_gate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* The id of the request this thread serves (bit 63 set when the kernel sent it again). */
static __thread uint64_t serving_unique;

uint64_t sfs_fuse_gate_unique(void)
{
	return serving_unique;
}

void sfs_fuse_gate_set_unique(uint64_t unique)
{
	serving_unique = unique;
}

static atomic_bool holding;
static atomic_int serving;                  /* threads between a request and their next read */
static pthread_once_t serving_once = PTHREAD_ONCE_INIT;
static pthread_key_t serving_key;           /* set while this thread serves a request */

static void thread_done_serving(void *mark)
{
	if (mark)
		atomic_fetch_sub(&serving, 1);
}

static void make_serving_key(void)
{
	pthread_key_create(&serving_key, thread_done_serving);
}

/* Never returns: the process is about to end, and whatever this thread holds (a request read
 * and not begun, a reply not committed) is its successor's to finish. */
static void park(void)
{
	for (;;)
		pause();
}

void sfs_fuse_gate_begin(void)
{
	pthread_once(&serving_once, make_serving_key);
	atomic_fetch_add(&serving, 1);
	if (atomic_load(&holding)) {
		atomic_fetch_sub(&serving, 1);
		park();
	}
	pthread_setspecific(serving_key, (void *)1);
}

void sfs_fuse_gate_end(void)
{
	pthread_once(&serving_once, make_serving_key);
	if (pthread_getspecific(serving_key)) {
		pthread_setspecific(serving_key, NULL);
		atomic_fetch_sub(&serving, 1);
	}
	if (atomic_load(&holding))
		park();
}

void sfs_fuse_gate_hold(void)
{
	atomic_store(&holding, true);
}

bool sfs_fuse_gate_quiet(int ms)
{
	for (int waited = 0; atomic_load(&serving) > 0; waited++) {
		if (waited >= ms)
			return false;
		usleep(1000);
	}
	return true;
}
