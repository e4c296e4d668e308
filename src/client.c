/* The CLI's half of the control protocol (see client.h). */
#include "client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

int sfs_client_connect(const char *key)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {10, 0}, connect_tv = {5, 0};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	sfs_socket_path(key, sa.sun_path, sizeof(sa.sun_path));
	/* a Unix connect waits for room in the listener's backlog for as long as the send timeout
	 * says, forever by default: one daemon that stopped accepting would hang every status */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connect_tv, sizeof(connect_tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

#define SOCKET_WAIT_MS 5000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* Retries connecting to key while *budget_ms lasts (a connect itself may take seconds) and the
 * daemon pid lives (one in its teardown has already removed its socket); the fd or -errno. */
static int connect_within(const char *key, pid_t pid, int *budget_ms)
{
	long long start = now_ms();
	int fd = sfs_client_connect(key);

	while (fd < 0 && now_ms() - start < *budget_ms && (kill(pid, 0) == 0 || errno == EPERM)) {
		usleep(100 * 1000);
		fd = sfs_client_connect(key);
	}
	*budget_ms -= now_ms() - start;
	return fd;
}

int sfs_client_connect_running(const char *key, const char *source, char *err, size_t errlen)
{
	int budget = SOCKET_WAIT_MS, fd = sfs_client_connect(key);
	pid_t pid;

	if (fd >= 0)
		return fd;
	if (!(pid = sfs_daemon_pid(key)))
		return -ESRCH;
	if (!sfs_same_namespace(pid, "mnt")) {
		sfs_errf(err, errlen, source, "served by strictfs daemon %d of another mount namespace; "
		         "add views from there", pid);
		return -EBUSY;
	}
	if ((fd = connect_within(key, pid, &budget)) >= 0)
		return fd;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return -ESRCH; /* it was ending: the source is free for a new daemon */
	sfs_errf(err, errlen, source,
	         "served by strictfs daemon %d, which does not answer on %s/%s.sock (%s); "
	         "a running daemon makes a missing socket again, so retry, or stop it with 'kill %d'",
	         pid, SFS_RUNDIR, key, strerror(-fd), pid);
	return fd;
}

int sfs_client_call(const char *key, struct sfs_msg *req, struct sfs_msg *reply)
{
	int fd = sfs_client_connect(key), rc;

	if (fd < 0)
		return fd;
	rc = sfs_msg_send(fd, req);
	if (!rc)
		rc = sfs_msg_recv(fd, reply);
	close(fd);
	return rc;
}

/* The daemon keeps descriptors for its whole life, its keeper and successors with it: it
 * must start with none of this command's caller's (a lock it holds, the pipe a script reads
 * the command's output from), only stdio on /dev/null and the ready pipe, moved to 3.
 * Returns the ready pipe's number. */
static int only_ready_fd(int ready)
{
	int null;

	if (ready < 3)
		ready = fcntl(ready, F_DUPFD, 3); /* this command ran with stdio closed */
	if (ready != 3 && (ready = dup2(ready, 3)) < 0)
		_exit(127);
	close_range(4, ~0U, 0);
	null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3; fd++)
		if (fd != null)
			dup2(null, fd);
	if (null > 2)
		close(null);
	return ready; /* dup2 and F_DUPFD leave it open across exec */
}

int sfs_client_start_daemon(const char *key, const char *source, bool is_file,
                            const char *options, pid_t *pid, char *err, size_t errlen)
{
	char buf[1024], fdarg[16];
	int p[2], status;
	pid_t child;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		/* a grandchild in its own session, so the daemon outlives this command */
		setsid();
		if (fork() != 0)
			_exit(0);
		snprintf(fdarg, sizeof(fdarg), "%d", only_ready_fd(p[1]));
		execl("/proc/self/exe", "strictfs", "__daemon", key, source, is_file ? "file" : "device",
		      options, fdarg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	waitpid(child, &status, 0);
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	if (n <= 0) {
		sfs_errf(err, errlen, source, "the daemon did not start");
		return -EIO;
	}
	buf[n] = '\0';
	if (strncmp(buf, "OK ", 3)) {
		sfs_strlcpy(err, buf, errlen);
		return -EINVAL;
	}
	*pid = atoi(buf + 3);
	return 0;
}

/* A daemon of this mount namespace (others have their own /run/strictfs) without a socket. */
static void wait_for_socket(pid_t pid, const char *key, void *arg)
{
	int fd;

	if (!sfs_same_namespace(pid, "mnt"))
		return;
	fd = connect_within(key, pid, arg);
	if (fd >= 0)
		close(fd);
	else if (kill(pid, 0) == 0 || errno == EPERM)
		sfs_err_printf("strictfs: %s/%s.sock: daemon %d does not answer (%s)", SFS_RUNDIR, key,
		               pid, strerror(-fd));
}

json_object *sfs_client_status(void)
{
	json_object *doc = json_object_new_object(), *daemons = json_object_new_array();
	int budget = SOCKET_WAIT_MS;
	struct dirent *de;
	DIR *dir;

	sfs_each_daemon(wait_for_socket, &budget);
	dir = opendir(SFS_RUNDIR);

	json_object_object_add(doc, "version", json_object_new_int(SFS_STATUS_VERSION));
	while (dir && (de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		struct sfs_msg req, rep;
		char key[256];
		const char *js;
		if (len < 6 || strcmp(de->d_name + len - 5, ".sock") || len - 5 >= sizeof(key))
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(len - 5), de->d_name);
		sfs_msg_init(&req, SFS_REQ_STATUS);
		if (sfs_client_call(key, &req, &rep) == 0) {
			js = sfs_msg_get(&rep, "json");
			json_object *o = js ? json_tokener_parse(js) : NULL;
			if (o)
				json_object_array_add(daemons, o);
			sfs_msg_free(&rep);
		}
		sfs_msg_free(&req);
	}
	if (dir)
		closedir(dir);
	json_object_object_add(doc, "daemons", daemons);
	return doc;
}

bool sfs_wait_pid_gone(pid_t pid, int ms)
{
	int fd = syscall(SYS_pidfd_open, pid, 0);
	struct pollfd pf;
	bool gone;

	if (fd < 0)
		return errno == ESRCH;
	pf.fd = fd;
	pf.events = POLLIN;
	gone = poll(&pf, 1, ms) == 1;
	close(fd);
	return gone;
}
