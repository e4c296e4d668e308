/* The thread behind an idmapped view's request (see caller.h). */
#include "caller.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "priv.h"

/* One slot per thread id modulo this: a thread's status file stays open while its slot is
 * not taken by another, and is read again from offset 0 for each request. A descriptor of
 * /proc/TID is bound to the task, not to the number: once the task is gone its reads fail
 * (ESRCH), so a reused number never reads another task's status through it. */
#define STATUS_SLOTS 64
/* User namespaces whose maps are kept, each held open so that its inode number, the key,
 * cannot name another namespace while it is here. */
#define NS_SLOTS 8

struct status_slot {
	pthread_mutex_t lock; /* held across the read: the slot's fd is not closed under it */
	pid_t tid;
	int fd;
};

struct ns_slot {
	ino_t ino;
	int fd;
	struct sfs_idmap maps;
};

static struct status_slot status_slots[STATUS_SLOTS];
static struct ns_slot ns_slots[NS_SLOTS];
static unsigned ns_next; /* the slot the next namespace takes */
static pthread_mutex_t ns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static void slots_init(void)
{
	for (int i = 0; i < STATUS_SLOTS; i++) {
		pthread_mutex_init(&status_slots[i].lock, NULL);
		status_slots[i].fd = -1;
	}
	for (int i = 0; i < NS_SLOTS; i++)
		ns_slots[i].fd = -1;
}

static ssize_t read_whole(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* Thread tid's status text into buf: its length, or -1. */
static ssize_t read_status(pid_t tid, char *buf, size_t len)
{
	struct status_slot *s = &status_slots[(unsigned)tid % STATUS_SLOTS];
	char path[40];
	ssize_t n = -1;
	int fd;

	pthread_mutex_lock(&s->lock);
	if (s->fd >= 0 && s->tid == tid && (n = read_whole(s->fd, buf, len)) > 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		n = -1;
		goto out;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = fd;
	s->tid = tid;
	n = read_whole(fd, buf, len);
out:
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void parse_groups(const char *p, struct sfs_caller_ids *ids)
{
	char *end;

	while (ids->ngroups < SFS_CALLER_MAX_GROUPS) {
		unsigned long g = strtoul(p, &end, 10);
		/* a number the read cut short is no group of the caller's */
		if (end == p || (*end != ' ' && *end != '\n'))
			break;
		ids->groups[ids->ngroups++] = g;
		p = end;
	}
}

bool sfs_caller_read(pid_t tid, struct sfs_caller_ids *ids)
{
	char buf[4096], *line;
	unsigned long a, b, c, d;
	bool uid = false, gid = false;

	pthread_once(&slots_once, slots_init);
	if (tid <= 0 || read_status(tid, buf, sizeof(buf)) <= 0)
		return false;
	ids->ngroups = 0;
	ids->cap_eff = 0;
	/* the prefix first: a request pays for the four lines it needs, not for fifty scans */
	for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (!strncmp(line, "Uid:", 4) && sscanf(line + 4, "%lu %lu %lu %lu", &a, &b, &c, &d) == 4)
			ids->fsuid = d, uid = true;
		else if (!strncmp(line, "Gid:", 4) &&
		         sscanf(line + 4, "%lu %lu %lu %lu", &a, &b, &c, &d) == 4)
			ids->fsgid = d, gid = true;
		else if (!strncmp(line, "Groups:", 7))
			parse_groups(line + 7, ids);
		else if (!strncmp(line, "CapEff:", 7))
			sscanf(line + 7, "%llx", &ids->cap_eff);
	}
	return uid && gid;
}

/* The inode number of thread tid's user namespace ("user:[N]"), or 0. /proc/TID/ns asks for
 * ptrace access, which a thread acting as another caller may lack. */
static ino_t ns_ino(pid_t tid)
{
	char path[40], link[64];
	unsigned long long ino;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)tid);
	sfs_priv_begin(SFS_PRIV_INSPECT);
	n = readlink(path, link, sizeof(link) - 1);
	sfs_priv_end();
	if (n <= 0)
		return 0;
	link[n] = '\0';
	return sscanf(link, "user:[%llu]", &ino) == 1 ? (ino_t)ino : 0;
}

/* The namespace of tid, held open, with its maps: a slot filled, or false. */
static bool ns_load(pid_t tid, struct ns_slot *out)
{
	char path[40];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)tid);
	sfs_priv_begin(SFS_PRIV_INSPECT);
	out->fd = open(path, O_RDONLY | O_CLOEXEC);
	sfs_priv_end();
	if (out->fd < 0)
		return false;
	/* the maps read are those of the namespace held: the thread is the same one after */
	if (fstat(out->fd, &st) < 0 || sfs_idmap_read_pid(tid, &out->maps) < 0 ||
	    ns_ino(tid) != st.st_ino) {
		close(out->fd);
		out->fd = -1;
		return false;
	}
	out->ino = st.st_ino;
	return true;
}

bool sfs_caller_ns_covers(pid_t tid, const struct sfs_idmap *map)
{
	ino_t ino = tid > 0 ? ns_ino(tid) : 0;
	struct ns_slot fresh;
	bool covers = false;

	pthread_once(&slots_once, slots_init);
	if (!ino)
		return false;
	pthread_mutex_lock(&ns_lock);
	for (int i = 0; i < NS_SLOTS; i++)
		if (ns_slots[i].fd >= 0 && ns_slots[i].ino == ino) {
			covers = sfs_idmap_covers(&ns_slots[i].maps, map);
			pthread_mutex_unlock(&ns_lock);
			return covers;
		}
	pthread_mutex_unlock(&ns_lock);
	if (!ns_load(tid, &fresh) || fresh.ino != ino)
		goto drop;
	covers = sfs_idmap_covers(&fresh.maps, map);
	pthread_mutex_lock(&ns_lock);
	struct ns_slot *s = &ns_slots[ns_next++ % NS_SLOTS];
	if (s->fd >= 0)
		close(s->fd);
	*s = fresh;
	pthread_mutex_unlock(&ns_lock);
	return covers;
drop:
	if (fresh.fd >= 0)
		close(fresh.fd);
	return covers;
}
