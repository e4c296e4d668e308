/* After a takeover, requests that reached a queue while it had no entry are woken by a
 * request from each CPU (see sfs_fuse_uring_poke in fuse_uring.h). */
#include "fuse_uring_int.h"
#include "util.h"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The poker's descriptor of the view's mount namespace */
#define POKE_NSFD 3

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
