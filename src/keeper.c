/* The keeper (see keeper.h). Its code runs in a clone of the daemon that shares nothing but
 * the descriptor table and a copy of the memory of the moment, so it uses only system calls:
 * no allocation, no lock, nothing another thread of the daemon might have held at the clone. */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define KEEPER_STACK (64 * 1024)

static struct {
	int daemon_pidfd;
	char daemon_stat[32];    /* "/proc/PID/stat" of the daemon */
	char daemon_task[32];    /* "/proc/PID/task" */
	const char *binary;
	char state_version[64];  /* as `__state-version` prints it, with its newline */
	char *const *argv;
	char *title;
	struct timespec started;
} K;

static char keeper_stack[KEEPER_STACK] __attribute__((aligned(64)));

/* Calls fn with each descriptor of the table. */
__attribute__((no_sanitize("address", "undefined")))
static void for_each_fd(void (*fn)(int fd))
{
	char buf[4096];
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dir < 0)
		return;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			unsigned short reclen;
			const char *name;
			int fd = 0;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			name = buf + off + 19;
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			if (!*name && name != buf + off + 19 && fd != dir)
				fn(fd);
			off += reclen;
		}
	}
	close(dir);
}

/* Whether descriptor fd is the file /proc/self/fd names target (len bytes). */
__attribute__((no_sanitize("address", "undefined")))
static bool fd_is(unsigned long fd, const char *target, size_t len)
{
	char path[32] = "/proc/self/fd/", got[32];
	int i = 14, n = 0;

	for (unsigned long f = fd; f; f /= 10)
		n++;
	n = n ? n : 1;
	for (int j = n - 1; j >= 0; j--, fd /= 10)
		path[i + j] = (char)('0' + fd % 10);
	path[i + n] = '\0';
	return readlink(path, got, sizeof(got)) == (ssize_t)len && memcmp(got, target, len) == 0;
}

__attribute__((no_sanitize("address", "undefined")))
static void keep_across_exec(int fd)
{
	fcntl(fd, F_SETFD, 0);
}

/* Every descriptor of the table survives the exec: the successor sorts out which it needs
 * (handover.h), and closes the rest. */
__attribute__((no_sanitize("address", "undefined")))
static void keep_all_across_exec(void)
{
	for_each_fd(keep_across_exec);
}

static void last_for_oom_killer(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "-1000", 5) < 0) {
			/* not root's to set here: the keeper is still tiny */
		}
		close(fd);
	}
}

/* The kernel's struct sigaction: glibc's wrapper (and a sanitizer's in front of it) is not
 * the keeper's to call. */
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

static void ignore_signals(void)
{
	struct kernel_sigaction ign = {.handler = SIG_IGN};
	uint64_t none = 0;

	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
			syscall(SYS_rt_sigaction, s, &ign, NULL, sizeof(uint64_t));
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(uint64_t));
}

/* Whether the daemon is dying: its main thread is exiting or has exited (the daemon's main
 * thread ends only with the process). A killed daemon's thread may stay, uninterruptible, in a
 * write of an entry invalidation that waits for a directory lock held by a caller whose
 * request only a daemon can answer (doc/kernel.md §4.11), and hold up the exit (or a core
 * dump) for good: the successor must not wait for that thread. */
/* A /proc file (path at dirfd) read into buf as a string; its length, <= 0 when it is gone. */
__attribute__((no_sanitize("address", "undefined")))
static ssize_t read_proc(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

__attribute__((no_sanitize("address", "undefined")))
static bool daemon_dying(void)
{
	char buf[512];
	ssize_t n = read_proc(AT_FDCWD, K.daemon_stat, buf, sizeof(buf));

	if (n <= 0)
		return true; /* gone */
	for (ssize_t i = n - 1; i > 0; i--) {
		unsigned long flags = 0;
		char *p = buf + i + 2;
		if (buf[i] != ')')
			continue;
		if (i + 2 >= n || *p == 'Z' || *p == 'X')
			return true;
		for (int field = 3; field < 9 && *p; field++) /* to field 9, the task's flags */
			while (*p && *p++ != ' ')
				;
		while (*p >= '0' && *p <= '9')
			flags = flags * 10 + (unsigned long)(*p++ - '0');
		return flags & 0x4; /* PF_EXITING */
	}
	return false;
}

/* The number a decimal (base 10) or "0x" hexadecimal (base 16) field starts with. */
__attribute__((no_sanitize("address", "undefined")))
static unsigned long field_number(const char **p, int base)
{
	unsigned long v = 0;

	if (base == 16 && (*p)[0] == '0' && (*p)[1] == 'x')
		*p += 2;
	for (;; (*p)++) {
		int d = **p >= '0' && **p <= '9' ? **p - '0' : **p >= 'a' && **p <= 'f' ? **p - 'a' + 10 : 99;
		if (d >= base)
			return v;
		v = v * (unsigned long)base + (unsigned long)d;
	}
}

__attribute__((no_sanitize("address", "undefined")))
static bool is_fuse_device(unsigned long fd)
{
	return fd_is(fd, "/dev/fuse", 9);
}

/* Whether a thread of the dying daemon is done with the backing: gone, or blocked writing to
 * /dev/fuse (a reply, or an entry invalidation waiting for a directory lock that only a
 * successor can free). Any other thread may still be inside a change the resent request
 * would make again: a successor that started beside it would race it (a link made twice
 * answers EEXIST). */
__attribute__((no_sanitize("address", "undefined")))
static bool thread_done(int taskdir, const char *tid)
{
	char path[48], buf[256];
	const char *p = buf;
	int i = 0;

	for (; tid[i] && i < 20; i++)
		path[i] = tid[i];
	memcpy(path + i, "/syscall", 9);
	if (read_proc(taskdir, path, buf, sizeof(buf)) <= 0)
		return true; /* gone */
	if (*p < '0' || *p > '9')
		return false; /* "running", or "-1": not blocked in a system call */
	unsigned long nr = field_number(&p, 10);
	if (nr != SYS_write && nr != SYS_writev)
		return false;
	p++;
	return is_fuse_device(field_number(&p, 16));
}

/* Whether every thread but the main one (which has exited) is done with the backing. */
__attribute__((no_sanitize("address", "undefined")))
static bool threads_done(void)
{
	char buf[2048];
	int dir = open(K.daemon_task, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *main_tid = K.daemon_stat + 6; /* "PID/stat" */
	bool done = true;
	long n;

	if (dir < 0)
		return true;
	while (done && (n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; done && off < n;) {
			unsigned short reclen;
			const char *name = buf + off + 19;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			off += reclen;
			if (*name < '0' || *name > '9')
				continue;
			int k = 0;
			while (name[k] && name[k] == main_tid[k])
				k++;
			if (!name[k] && main_tid[k] == '/')
				continue;
			done = thread_done(dir, name);
		}
	}
	close(dir);
	return done;
}

/* A thread that never settles (a backing call stuck on a device) does not hold the views up
 * for longer than this. */
#define SETTLE_MS 2000

/* Returns once the daemon is gone: every thread exited, or its main thread exited and the
 * rest are done with the backing (threads_done), or have had SETTLE_MS to be. */
__attribute__((no_sanitize("address", "undefined")))
static void wait_for_daemon_death(void)
{
	struct pollfd pf = {K.daemon_pidfd, POLLIN, 0};
	int settling = -1;

	for (;;) {
		int r = poll(&pf, 1, settling >= 0 ? 1 : 100);
		if (r > 0 && (pf.revents & (POLLIN | POLLHUP)))
			return;
		if (r != 0 || (settling < 0 && !daemon_dying()))
			continue;
		if (threads_done() || ++settling >= SETTLE_MS)
			return;
	}
}

/* The installed binary, started with `__state-version` and its output to fd. */
__attribute__((noinline, no_sanitize("address", "undefined")))
static pid_t start_state_version(int fd)
{
	static char *const argv[] = {"strictfs", "__state-version", NULL};
	pid_t pid = vfork();

	if (pid == 0) {
		dup2(fd, STDOUT_FILENO);
		execve(K.binary, argv, environ);
		_exit(127);
	}
	return pid;
}

/* What the installed binary prints for `__state-version`, in out; its length, -1 if it could
 * not be run or did not answer within 2 s. */
__attribute__((no_sanitize("address", "undefined")))
static ssize_t ask_state_version(char *out, size_t len)
{
	struct pollfd pf;
	ssize_t n = 0, r = 0;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = start_state_version(p[1]);
	close(p[1]);
	pf = (struct pollfd){p[0], POLLIN, 0};
	while (pid > 0 && (size_t)n < len - 1 && poll(&pf, 1, 2000) > 0 &&
	       (r = read(p[0], out + n, len - 1 - (size_t)n)) > 0)
		n += r;
	close(p[0]);
	out[n] = '\0';
	if (pid < 0)
		return -1;
	kill(pid, SIGKILL); /* one that hangs; one that ended is a zombie until reaped */
	waitpid(pid, NULL, 0);
	return r < 0 ? -1 : n;
}

/* Whether the installed binary can take the views over: the daemon's own file, or another
 * (a package installed since) that reads the state this daemon wrote. One that reads another
 * state would refuse it and the views would end with it; the keeper then runs the daemon's
 * own binary, which /proc/self/exe holds even when the file was replaced or removed. */
__attribute__((no_sanitize("address", "undefined")))
static bool installed_takes_over(void)
{
	struct stat inst, own;
	char said[sizeof(K.state_version)];

	if (stat(K.binary, &inst) < 0)
		return false;
	if (stat("/proc/self/exe", &own) < 0 ||
	    (inst.st_dev == own.st_dev && inst.st_ino == own.st_ino))
		return true;
	return ask_state_version(said, sizeof(said)) > 0 && !strcmp(said, K.state_version);
}

__attribute__((no_sanitize("address", "undefined")))
static int keeper_main(void *arg)
{
	struct timespec now;

	(void)arg;
	for (int i = 0; i < 8; i++)
		K.title[i] = "__keeper"[i];
	prctl(PR_SET_NAME, "strictfs-keep");
	last_for_oom_killer();
	ignore_signals();
	wait_for_daemon_death();
	/* a successor that dies at once would make this a loop: not faster than 4 a second */
	clock_gettime(CLOCK_MONOTONIC, &now);
	long lived_ms = (now.tv_sec - K.started.tv_sec) * 1000 + (now.tv_nsec - K.started.tv_nsec) / 1000000;
	if (lived_ms < 250) {
		struct timespec pause = {0, (250 - lived_ms) * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	if (installed_takes_over()) {
		keep_all_across_exec();
		execve(K.binary, K.argv, environ);
	}
	keep_all_across_exec();
	execve("/proc/self/exe", K.argv, environ);
	_exit(127);
}

int sfs_keeper_start(struct sfs_keeper *k, const char *binary, const char *state_version,
                     char *const argv[], char *title)
{
	int pidfd = -1;
	pid_t pid;

	snprintf(K.daemon_stat, sizeof(K.daemon_stat), "/proc/%d/stat", (int)getpid());
	snprintf(K.daemon_task, sizeof(K.daemon_task), "/proc/%d/task", (int)getpid());
	K.daemon_pidfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (K.daemon_pidfd < 0)
		return -errno;
	fcntl(K.daemon_pidfd, F_SETFD, FD_CLOEXEC);
	K.binary = binary;
	snprintf(K.state_version, sizeof(K.state_version), "%s\n", state_version);
	K.argv = argv;
	K.title = title;
	clock_gettime(CLOCK_MONOTONIC, &K.started);
	pid = clone(keeper_main, keeper_stack + sizeof(keeper_stack),
	            CLONE_FILES | CLONE_PIDFD | SIGCHLD, NULL, &pidfd);
	if (pid < 0) {
		int e = errno;
		close(K.daemon_pidfd);
		return -e;
	}
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	k->pid = pid;
	k->pidfd = pidfd;
	return 0;
}

/* The keeper has ended (or been killed): it is reaped and its descriptors go. */
static void reap(struct sfs_keeper *k)
{
	waitpid(k->pid, NULL, 0);
	close(k->pidfd);
	close(K.daemon_pidfd);
	k->pid = 0;
	k->pidfd = -1;
}

bool sfs_keeper_gone(struct sfs_keeper *k)
{
	struct pollfd pf = {k->pidfd, POLLIN, 0};

	if (!k->pid || poll(&pf, 1, 0) <= 0 || !(pf.revents & POLLIN))
		return false;
	reap(k);
	return true;
}

void sfs_keeper_stop(struct sfs_keeper *k)
{
	if (!k->pid)
		return;
	syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
	reap(k);
}
