/* Tests of the caller's ids and namespace as an idmapped view reads them (caller.h): what the
 * thread has now, not what its kept descriptor read before; nothing once the thread is gone;
 * a user namespace's maps, kept, cover what they cover. Run as root (test/run is). */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caller.h"
#include "check.h"

static void test_own_ids_fresh(void)
{
	struct sfs_caller_ids ids;
	pid_t tid = gettid();

	CHECK(sfs_caller_read(tid, &ids) && ids.fsuid == getuid() && ids.fsgid == getgid(),
	      "own fsuid %u fsgid %u", ids.fsuid, ids.fsgid);
	/* the same thread again, through the kept descriptor: its ids of now */
	syscall(SYS_setfsuid, 4321);
	syscall(SYS_setfsgid, 4322);
	CHECK(sfs_caller_read(tid, &ids) && ids.fsuid == 4321 && ids.fsgid == 4322,
	      "changed fsuid %u fsgid %u", ids.fsuid, ids.fsgid);
	syscall(SYS_setfsgid, getgid());
	syscall(SYS_setfsuid, getuid());
}

static void *report_tid(void *arg)
{
	struct sfs_caller_ids ids;

	*(pid_t *)arg = gettid();
	CHECK(sfs_caller_read(gettid(), &ids), "a live thread is read");
	return NULL;
}

static void test_gone_thread_reads_nothing(void)
{
	struct sfs_caller_ids ids;
	pthread_t t;
	pid_t tid = 0;

	pthread_create(&t, NULL, report_tid, &tid);
	pthread_join(t, NULL);
	CHECK(tid > 0 && !sfs_caller_read(tid, &ids), "thread %d is gone: nothing read", (int)tid);
}

/* A child in a new user namespace mapping 0 to 100000 for 65536 ids; its pid, or -1. */
static pid_t child_in_userns(void)
{
	int go[2], ready[2];
	char c, path[64];
	pid_t pid;

	if (pipe(go) || pipe(ready) || (pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
		(void)!write(ready[1], &c, 1);
		(void)!read(go[0], &c, 1);
		_exit(0);
	}
	if (read(ready[0], &c, 1) != 1 || c != 'y')
		return -1;
	const char *files[] = {"uid_map", "setgroups", "gid_map"};
	const char *text[] = {"0 100000 65536\n", "deny", "0 100000 65536\n"};
	for (int i = 0; i < 3; i++) {
		int fd;
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		if ((fd = open(path, O_WRONLY)) < 0 || write(fd, text[i], strlen(text[i])) < 0)
			return -1;
		close(fd);
	}
	return pid;
}

static void test_namespace_covers(void)
{
	struct sfs_idmap inside, wider, outside;
	char err[256];
	pid_t pid;

	sfs_idmap_parse("idmap=", "b:0:100000:65536", &inside, err, sizeof(err));
	sfs_idmap_parse("idmap=", "b:0:100000:70000", &wider, err, sizeof(err));
	sfs_idmap_parse("idmap=", "b:0:300000:10", &outside, err, sizeof(err));
	CHECK(sfs_caller_ns_covers(gettid(), &outside), "the host's namespace maps every id");
	pid = child_in_userns();
	CHECK(pid > 0, "a child in a user namespace");
	if (pid <= 0)
		return;
	for (int round = 0; round < 2; round++) { /* read, then kept */
		CHECK(sfs_caller_ns_covers(pid, &inside), "its namespace covers its own map (%d)", round);
		CHECK(!sfs_caller_ns_covers(pid, &wider), "not a wider one (%d)", round);
		CHECK(!sfs_caller_ns_covers(pid, &outside), "nor another range (%d)", round);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(!sfs_caller_ns_covers(pid, &inside), "a process gone covers nothing");
}

int main(void)
{
	test_own_ids_fresh();
	test_gone_thread_reads_nothing();
	test_namespace_covers();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
