/* Small helpers shared by the CLI and the daemon. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

void sfs_errf(char *buf, size_t len, const char *object, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "strictfs: %s: ", object);

	if (n < 0 || (size_t)n >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

bool sfs_strlcpy(char *dst, const char *src, size_t len)
{
	size_t n = strlen(src);

	if (len == 0)
		return false;
	if (n >= len) {
		memcpy(dst, src, len - 1);
		dst[len - 1] = '\0';
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

bool sfs_list_append(char *dst, size_t len, const char *item)
{
	size_t used = strlen(dst);
	size_t need = strlen(item) + (used ? 1 : 0);

	if (used + need >= len)
		return false;
	if (used)
		dst[used++] = ',';
	strcpy(dst + used, item);
	return true;
}

void sfs_deadline_in(clockid_t clock, long ms, struct timespec *t)
{
	clock_gettime(clock, t);
	t->tv_nsec += ms % 1000 * 1000000l;
	t->tv_sec += ms / 1000 + t->tv_nsec / 1000000000l;
	t->tv_nsec %= 1000000000l;
}

bool sfs_parse_uint(const char *s, unsigned long long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

int sfs_source_key(const char *source, char *key, size_t keylen, char *path, size_t pathlen,
                   bool *is_file, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(source, real) || stat(real, &st) < 0) {
		int e = errno;
		sfs_errf(err, errlen, source, "%s", strerror(e));
		return -e;
	}
	if (S_ISBLK(st.st_mode)) {
		snprintf(key, keylen, "b-%u-%u", major(st.st_rdev), minor(st.st_rdev));
		*is_file = false;
	} else if (S_ISREG(st.st_mode)) {
		snprintf(key, keylen, "f-%llu-%llu", (unsigned long long)st.st_dev,
		         (unsigned long long)st.st_ino);
		*is_file = true;
	} else {
		sfs_errf(err, errlen, source, "not a block device or an image file");
		return -EINVAL;
	}
	if (!sfs_strlcpy(path, real, pathlen)) {
		sfs_errf(err, errlen, source, "path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

/* argv[1] and argv[2] of /proc/PID/cmdline if argv[1] is "__daemon", else false. */
static bool daemon_key_of(const char *pid, char *key, size_t len)
{
	char path[300], buf[512], *arg1, *arg2;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	arg1 = memchr(buf, '\0', n);
	if (!arg1 || ++arg1 >= buf + n || strcmp(arg1, "__daemon"))
		return false;
	arg2 = arg1 + strlen(arg1) + 1;
	if (arg2 >= buf + n || strcmp(basename(buf), "strictfs"))
		return false;
	return sfs_strlcpy(key, arg2, len);
}

void sfs_each_daemon(void (*fn)(pid_t pid, const char *key, void *arg), void *arg)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	char key[128];

	while (proc && (de = readdir(proc))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9' || atoi(de->d_name) == getpid())
			continue;
		if (daemon_key_of(de->d_name, key, sizeof(key)))
			fn(atoi(de->d_name), key, arg);
	}
	if (proc)
		closedir(proc);
}

struct pid_of_key {
	const char *key;
	pid_t pid;
};

static void match_key(pid_t pid, const char *key, void *arg)
{
	struct pid_of_key *m = arg;

	if (!m->pid && !strcmp(key, m->key))
		m->pid = pid;
}

pid_t sfs_daemon_pid(const char *key)
{
	struct pid_of_key m = {key, 0};

	sfs_each_daemon(match_key, &m);
	return m.pid;
}

void sfs_mountpoint_errf(char *buf, size_t len, const char *mp, int e)
{
	if (e == ENOTCONN)
		sfs_errf(buf, len, mp, "%s (a view whose daemon is gone; clear it with "
		         "'strictfs umount %s' or 'umount -l %s')", strerror(e), mp, mp);
	else
		sfs_errf(buf, len, mp, "%s", strerror(e));
}

bool sfs_same_namespace(int pid, const char *type)
{
	struct stat mine, theirs;
	char self[64], path[64];

	snprintf(self, sizeof(self), "/proc/self/ns/%s", type);
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, type);
	return stat(self, &mine) == 0 && stat(path, &theirs) == 0 && mine.st_ino == theirs.st_ino &&
	       mine.st_dev == theirs.st_dev;
}
