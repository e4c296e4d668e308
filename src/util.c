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
	static const char frame[] = "strictfs: : ";
	size_t olen = strlen(object), room = 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n >= 0 && len > sizeof(frame) + (size_t)n)
		room = len - sizeof(frame) - (size_t)n;
	if (olen > room && room > 16) {
		size_t head = (room - 3) / 2, tail = room - 3 - head;
		n = snprintf(buf, len, "strictfs: %.*s...%s: ", (int)head, object, object + olen - tail);
	} else {
		n = snprintf(buf, len, "strictfs: %s: ", object);
	}
	if (n < 0 || (size_t)n >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* The length of the UTF-8 character at s (0 if the bytes there are not one, or a C1 control,
 * which a terminal may obey). */
static size_t utf8_char(const unsigned char *s)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	unsigned lo = 0x80, hi = 0xbf;

	if (s[0] < 0xc2 || s[0] > 0xf4 || (s[0] == 0xc2 && s[1] < 0xa0))
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f; /* no surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* One unit of the line at s as it is printed: its printed form in out (terminated), its
 * printed length in *outlen; returns how many bytes of s it takes. */
static size_t clean_unit(const unsigned char *s, char out[8], size_t *outlen)
{
	static const char esc[] = {'\n', 'n', '\t', 't', '\r', 'r', '\\', '\\'};
	size_t n;

	for (size_t i = 0; i < sizeof(esc); i += 2)
		if (*s == (unsigned char)esc[i]) {
			*outlen = (size_t)snprintf(out, 8, "\\%c", esc[i + 1]);
			return 1;
		}
	if (*s >= 0x20 && *s < 0x7f) {
		out[0] = (char)*s;
		out[1] = '\0';
		*outlen = 1;
		return 1;
	}
	if (*s >= 0x80 && (n = utf8_char(s))) {
		memcpy(out, s, n);
		out[n] = '\0';
		*outlen = n;
		return n;
	}
	*outlen = (size_t)snprintf(out, 8, "\\x%02x", *s);
	return 1;
}

void sfs_err_clean(char *out, size_t outlen, const char *line)
{
	const unsigned char *s = (const unsigned char *)line;
	size_t max = outlen - 1, total = 0, seen = 0, used = 0, head, tail, u, k;
	enum { HEAD, CUT, TAIL } part = HEAD;
	char unit[8];

	if (outlen < 4) {
		if (outlen)
			out[0] = '\0';
		return;
	}
	if (max > SFS_ERR_LINE_MAX)
		max = SFS_ERR_LINE_MAX;
	for (size_t i = 0; s[i]; i += k) {
		k = clean_unit(s + i, unit, &u);
		total += u;
	}
	head = total <= max ? max : (max - 3) / 2;
	tail = total <= max ? 0 : max - 3 - head;
	for (size_t i = 0; s[i]; i += k, seen += u) {
		k = clean_unit(s + i, unit, &u);
		if (part == HEAD && used + u > head) {
			memcpy(out + used, "...", 3);
			used += 3;
			part = CUT;
		}
		if (part == CUT && total - seen <= tail)
			part = TAIL; /* what is left fits */
		if (part == CUT)
			continue;
		memcpy(out + used, unit, u);
		used += u;
	}
	out[used] = '\0';
}

void sfs_err_print(const char *line)
{
	char out[SFS_ERR_LINE_MAX + 1];

	sfs_err_clean(out, sizeof(out), line);
	fprintf(stderr, "%s\n", out);
}

void sfs_err_printf(const char *fmt, ...)
{
	char small[SFS_ERR_LINE_MAX + 1], *line = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0) { /* no memory: the start of it will do */
		line = NULL;
		va_start(ap, fmt);
		vsnprintf(small, sizeof(small), fmt, ap);
		va_end(ap);
	}
	sfs_err_print(line ? line : small);
	free(line);
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

ssize_t sfs_read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* argv[1] and argv[2] of /proc/PID/cmdline if argv[1] is "__daemon", else false. */
static bool daemon_key_of(const char *pid, char *key, size_t len)
{
	char path[300], buf[512], *arg1, *arg2;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	if ((n = sfs_read_text(path, buf, sizeof(buf))) <= 0)
		return false;
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
