/* idmap= and X-mount.idmap= (see idmap.h): util-linux's syntax read into extents, and the user namespace
 * the kernel idmaps a mount through. */
#include "idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static bool ranges_overlap(uint32_t a, uint32_t b, uint32_t count_a, uint32_t count_b)
{
	return a < b + (uint64_t)count_b && b < a + (uint64_t)count_a;
}

/* The kernel refuses a user namespace map whose extents overlap on either side. */
static bool extent_fits(const struct sfs_idmap_extent *list, int n, const struct sfs_idmap_extent *e)
{
	for (int i = 0; i < n; i++)
		if (ranges_overlap(list[i].disk, e->disk, list[i].count, e->count) ||
		    ranges_overlap(list[i].host, e->host, list[i].count, e->count))
			return false;
	return true;
}

static int add_extent(struct sfs_idmap_extent *list, int *n, const struct sfs_idmap_extent *e,
                      const char *name, const char *text, char *err, size_t errlen)
{
	char obj[96];

	snprintf(obj, sizeof(obj), "%s=%s", name, text);
	if (*n == SFS_IDMAP_EXTENTS) {
		sfs_errf(err, errlen, obj, "more than %d extents of one kind", SFS_IDMAP_EXTENTS);
		return -EINVAL;
	}
	if (!extent_fits(list, *n, e)) {
		sfs_errf(err, errlen, obj, "overlaps another extent");
		return -EINVAL;
	}
	list[(*n)++] = *e;
	return 0;
}

static bool parse_id(const char **p, char stop, uint32_t *out)
{
	char *end;
	unsigned long long v;

	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	v = strtoull(*p, &end, 10);
	if (errno || v > UINT32_MAX || *end != stop)
		return false;
	*out = (uint32_t)v;
	*p = end + (stop != '\0');
	return true;
}

/* One extent, "[u:|g:|b:]DISK:HOST:COUNT". */
static int parse_extent(const char *name, const char *text, struct sfs_idmap *m, char *err,
                        size_t errlen)
{
	struct sfs_idmap_extent e;
	const char *p = text;
	char kind = 'b', obj[96];
	int rc = 0;

	if ((p[0] == 'u' || p[0] == 'g' || p[0] == 'b') && p[1] == ':') {
		kind = p[0];
		p += 2;
	}
	if (!parse_id(&p, ':', &e.disk) || !parse_id(&p, ':', &e.host) ||
	    !parse_id(&p, '\0', &e.count) || !e.count ||
	    e.disk + (uint64_t)e.count - 1 >= UINT32_MAX || e.host + (uint64_t)e.count - 1 >= UINT32_MAX) {
		snprintf(obj, sizeof(obj), "%s=%s", name, text);
		sfs_errf(err, errlen, obj,
		         "not an extent (use [u:|g:|b:]ID-ON-DISK:ID-SHOWN:COUNT, COUNT > 0)");
		return -EINVAL;
	}
	if (kind != 'g')
		rc = add_extent(m->uid, &m->nuid, &e, name, text, err, errlen);
	if (!rc && kind != 'u')
		rc = add_extent(m->gid, &m->ngid, &e, name, text, err, errlen);
	return rc;
}

int sfs_idmap_parse(const char *name, const char *spec, struct sfs_idmap *m, char *err,
                    size_t errlen)
{
	char buf[SFS_IDMAP_TEXT_MAX], *save = NULL, obj[40];
	size_t len = strlen(spec);
	int rc;

	memset(m, 0, sizeof(*m));
	snprintf(obj, sizeof(obj), "%s=", name);
	if (len >= 2 && spec[0] == '"' && spec[len - 1] == '"') {
		spec++; /* as fstab or a shell may quote a value with spaces */
		len -= 2;
	}
	if (len >= sizeof(buf)) {
		sfs_errf(err, errlen, obj, "too long");
		return -EINVAL;
	}
	memcpy(buf, spec, len);
	buf[len] = '\0';
	if (buf[0] == '/') {
		sfs_errf(err, errlen, obj, "a user namespace file is read by the mount command only");
		return -EINVAL;
	}
	for (char *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
		if ((rc = parse_extent(name, t, m, err, errlen)))
			return rc;
	if (!sfs_idmap_active(m)) {
		sfs_errf(err, errlen, obj, "empty map");
		return -EINVAL;
	}
	return 0;
}

static uint32_t map_id(const struct sfs_idmap_extent *list, int n, uint32_t id, bool to_disk)
{
	for (int i = 0; i < n; i++) {
		uint32_t from = to_disk ? list[i].host : list[i].disk;
		uint32_t to = to_disk ? list[i].disk : list[i].host;

		if (id >= from && id - from < list[i].count)
			return to + (id - from);
	}
	return SFS_IDMAP_NONE;
}

uint32_t sfs_idmap_uid_to_disk(const struct sfs_idmap *m, uint32_t host)
{
	return map_id(m->uid, m->nuid, host, true);
}

uint32_t sfs_idmap_gid_to_disk(const struct sfs_idmap *m, uint32_t host)
{
	return map_id(m->gid, m->ngid, host, true);
}

uint32_t sfs_idmap_uid_to_host(const struct sfs_idmap *m, uint32_t disk)
{
	return map_id(m->uid, m->nuid, disk, false);
}

uint32_t sfs_idmap_gid_to_host(const struct sfs_idmap *m, uint32_t disk)
{
	return map_id(m->gid, m->ngid, disk, false);
}

static void format_extents(const struct sfs_idmap_extent *list, int n, char kind, char *buf,
                           size_t len)
{
	char item[48];

	for (int i = 0; i < n; i++) {
		snprintf(item, sizeof(item), "%c:%" PRIu32 ":%" PRIu32 ":%" PRIu32, kind, list[i].disk,
		         list[i].host, list[i].count);
		if (*buf)
			strncat(buf, " ", len - strlen(buf) - 1);
		strncat(buf, item, len - strlen(buf) - 1);
	}
}

char *sfs_idmap_format(const struct sfs_idmap *m, char *buf, size_t len)
{
	buf[0] = '\0';
	format_extents(m->uid, m->nuid, 'u', buf, len);
	format_extents(m->gid, m->ngid, 'g', buf, len);
	return buf;
}

/* The lines of a /proc/PID/uid_map or gid_map read from the daemon's namespace: "inside outside
 * count", inside the disk id an idmapped mount shows as the outside one. Only whole lines
 * count: a read cut short never yields a shortened number. */
static int read_map(pid_t pid, const char *file, struct sfs_idmap_extent *list, int *n)
{
	char path[64], buf[SFS_IDMAP_EXTENTS * 40 + 64], *line, *nl;
	unsigned long inner, outer, count;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	if (sfs_read_text(path, buf, sizeof(buf)) < 0)
		return -errno;
	*n = 0;
	for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
		if (sscanf(line, "%lu %lu %lu", &inner, &outer, &count) != 3)
			continue;
		if (*n == SFS_IDMAP_EXTENTS)
			return -E2BIG;
		list[(*n)++] = (struct sfs_idmap_extent){inner, outer, count};
	}
	return 0;
}

int sfs_idmap_read_pid(pid_t pid, struct sfs_idmap *m)
{
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = read_map(pid, "uid_map", m->uid, &m->nuid)))
		return rc;
	return read_map(pid, "gid_map", m->gid, &m->ngid);
}

static bool extents_cover(const struct sfs_idmap_extent *outer, int nouter,
                          const struct sfs_idmap_extent *list, int n)
{
	for (int i = 0; i < n; i++) {
		bool in = false;

		for (int j = 0; j < nouter && !in; j++)
			in = list[i].host >= outer[j].host &&
			     list[i].host + (uint64_t)list[i].count <=
			             outer[j].host + (uint64_t)outer[j].count;
		if (!in)
			return false;
	}
	return true;
}

bool sfs_idmap_covers(const struct sfs_idmap *outer, const struct sfs_idmap *m)
{
	return extents_cover(outer->uid, outer->nuid, m->uid, m->nuid) &&
	       extents_cover(outer->gid, outer->ngid, m->gid, m->ngid);
}

/* "disk host count" lines, as /proc/PID/uid_map takes them in one write. */
static int write_map(pid_t pid, const char *file, const struct sfs_idmap_extent *list, int n)
{
	char path[64], text[SFS_IDMAP_EXTENTS * 40] = "";
	int fd, rc = 0;

	if (!n)
		return 0;
	for (int i = 0; i < n; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
		         "%" PRIu32 " %" PRIu32 " %" PRIu32 "\n", list[i].disk, list[i].host,
		         list[i].count);
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		rc = -errno;
	close(fd);
	return rc;
}

/* The child that joins a namespace while its maps are read. */
static void hold_joined_userns(int ns, int ready, int wait_fd)
{
	char c = setns(ns, CLONE_NEWUSER) == 0 ? 'y' : 'n';

	if (write(ready, &c, 1) == 1 && c == 'y')
		while (read(wait_fd, &c, 1) < 0 && errno == EINTR)
			;
	_exit(0);
}

/* The child that holds the namespace while its maps are written: it waits for the parent's end
 * of the pipe to close. */
static void hold_new_userns(int ready, int wait_fd)
{
	char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';

	if (write(ready, &c, 1) == 1 && c == 'y')
		while (read(wait_fd, &c, 1) < 0 && errno == EINTR)
			;
	_exit(0);
}

/* A child in a user namespace, new (ns -1) or joined, until *hold is closed: its pid, or
 * -errno. */
static pid_t namespace_child(int ns, int *hold)
{
	int ready[2], h[2];
	char c = 'n';
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(h, O_CLOEXEC) < 0) {
		int e = errno;
		close(ready[0]);
		close(ready[1]);
		return -e;
	}
	if ((pid = fork()) == 0) {
		close(ready[0]);
		close(h[1]);
		if (ns < 0)
			hold_new_userns(ready[1], h[0]);
		hold_joined_userns(ns, ready[1], h[0]);
	}
	close(ready[1]);
	close(h[0]);
	if (pid > 0 && !(read(ready[0], &c, 1) == 1 && c == 'y')) {
		close(h[1]);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		pid = -EPERM;
	} else if (pid < 0) {
		pid = -errno;
		close(h[1]);
	}
	close(ready[0]);
	*hold = pid > 0 ? h[1] : -1;
	return pid;
}

static void end_child(pid_t pid, int hold)
{
	close(hold);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int sfs_idmap_userns(const struct sfs_idmap *m, const char *name, char *err, size_t errlen)
{
	int hold, fd = -1, rc;
	char path[64];
	pid_t pid = namespace_child(-1, &hold);

	rc = pid < 0 ? (int)pid : 0;
	if (!rc && !(rc = write_map(pid, "uid_map", m->uid, m->nuid)) &&
	    !(rc = write_map(pid, "gid_map", m->gid, m->ngid))) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			rc = -errno;
	}
	if (pid > 0)
		end_child(pid, hold);
	if (rc) {
		sfs_errf(err, errlen, name, "cannot make its user namespace: %s", strerror(-rc));
		return rc;
	}
	return fd;
}

static bool same_file(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int sfs_idmap_read_userns(const char *path, const char *name, struct sfs_idmap *m, char *err,
                          size_t errlen)
{
	char obj[PATH_MAX + 24];
	int fd = open(path, O_RDONLY | O_CLOEXEC), hold, rc = 0;
	pid_t pid;

	snprintf(obj, sizeof(obj), "%s%s", name, path);
	memset(m, 0, sizeof(*m));
	if (fd < 0) {
		sfs_errf(err, errlen, obj, "%s", strerror(errno));
		return -1;
	}
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWUSER) {
		sfs_errf(err, errlen, obj, "not a user namespace");
		close(fd);
		return -1;
	}
	if (same_file(fd, "/proc/self/ns/user")) {
		sfs_errf(err, errlen, obj, "is this system's own user namespace, which maps every id "
		         "to itself");
		close(fd);
		return -1;
	}
	if ((pid = namespace_child(fd, &hold)) < 0)
		rc = (int)pid;
	if (!rc)
		rc = sfs_idmap_read_pid(pid, m);
	if (pid > 0)
		end_child(pid, hold);
	if (!rc && !sfs_idmap_active(m))
		rc = -ENODATA;
	if (rc) {
		sfs_errf(err, errlen, obj, "cannot read its maps: %s",
		         rc == -ENODATA ? "the namespace maps no id" : strerror(-rc));
		close(fd);
		return -1;
	}
	return fd;
}
