/* Per-thread caller credentials (see creds.h). The thread-local cache keeps what the thread
 * currently has, so a run of requests by one caller costs no syscall at all. */
#include "creds.h"

#include <errno.h>
#include <stdlib.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "caller.h"
#include "priv.h"
#include "util.h"

#define MAX_GROUPS SFS_CALLER_MAX_GROUPS
#define GROUPS_TTL_NS 1000000000ll

struct thread_creds {
	bool ready;
	uid_t uid; /* the fsuid the thread has now */
	gid_t gid;
	uid_t caller_uid; /* whom the request acts for on disk (sfs_creds_uid) */
	uid_t data_uid;   /* and the fsuid its writes of data take (sfs_creds_for_data) */
	bool privileged; /* every permitted capability effective: the caller is root */
	/* or, through an idmapped view, the file capabilities a namespace's root holds over
	 * every id of the map (mapped_caller), and that map */
	unsigned long long caps;
	bool ns_fsetid; /* and CAP_FSETID there too (sfs_creds_ns_fsetid) */
	const struct sfs_idmap *map;
	mode_t umask;
	/* supplementary groups: valid for (pid, uid, gid) until groups_expiry */
	pid_t groups_pid;
	uid_t groups_uid;
	gid_t groups_gid;
	long long groups_expiry;
	int ngroups;
	gid_t groups[MAX_GROUPS];
};

static __thread struct thread_creds tc;

/* An id no file and no user has: (uid_t)-2, the one below the "no change" value. */
#define NOBODY_ID ((uid_t)-2)

/* Whom a request acts for on the backing. ngroups -1: the groups are read only if needed. */
struct caller {
	uid_t uid;
	gid_t gid;
	uid_t data_uid;
	bool privileged;
	unsigned long long caps;
	bool ns_fsetid;
	int ngroups;
	gid_t groups[MAX_GROUPS];
};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A libfuse worker is started by another worker and inherits that thread's credentials of
 * the moment, caller's fsuid included: read what it has rather than assume root. CLONE_FS
 * gives it a umask of its own. */
static int thread_init(void)
{
	if (unshare(CLONE_FS) < 0)
		return -errno;
	tc.uid = syscall(SYS_setfsuid, -1);
	tc.gid = syscall(SYS_setfsgid, -1);
	tc.caller_uid = tc.data_uid = tc.uid;
	tc.umask = umask(0);
	tc.umask = 0;
	tc.ngroups = -1;
	tc.ready = true;
	return 0;
}

static bool groups_fresh(const struct fuse_ctx *ctx)
{
	return tc.ngroups >= 0 && tc.groups_pid == ctx->pid && tc.groups_uid == ctx->uid &&
	       tc.groups_gid == ctx->gid && now_ns() < tc.groups_expiry;
}

static int put_groups(const gid_t *list, int n)
{
	if (n != tc.ngroups || memcmp(list, tc.groups, n * sizeof(gid_t))) {
		if (syscall(SYS_setgroups, n, list) < 0)
			return -errno;
		memcpy(tc.groups, list, n * sizeof(gid_t));
		tc.ngroups = n;
	}
	return 0;
}

static int set_groups(fuse_req_t req, const struct fuse_ctx *ctx)
{
	gid_t list[MAX_GROUPS];
	int n, rc;

	if (groups_fresh(ctx))
		return 0;
	n = ctx->pid ? fuse_req_getgroups(req, MAX_GROUPS, list) : 0;
	if (n < 0)
		n = 0; /* the caller is gone or unreadable: act with no supplementary groups */
	if (n > MAX_GROUPS)
		n = MAX_GROUPS;
	if ((rc = put_groups(list, n)))
		return rc;
	tc.groups_pid = ctx->pid;
	tc.groups_uid = ctx->uid;
	tc.groups_gid = ctx->gid;
	tc.groups_expiry = now_ns() + GROUPS_TTL_NS;
	return 0;
}

/* The capabilities over files a user namespace's root has over the ids of an idmapped
 * mount (capable_wrt_inode_uidgid): to read, search and write past the mode bits, to act
 * as an owner, to give files away. Not CAP_FSETID, which a write asks for in the host's
 * namespace (setattr_should_drop_suidgid), nor any capability that is not about files. */
#define NS_FILE_CAPS                                                                      \
	(1ull << CAP_DAC_OVERRIDE | 1ull << CAP_DAC_READ_SEARCH | 1ull << CAP_FOWNER |      \
	 1ull << CAP_CHOWN)

/* A header id on an idmapped view: none (-1), the mapped id (a creation), or the caller's own
 * (a request the kernel filled in before the INIT reply's flag took effect: the first STATFS
 * of a new view comes so, doc/kernel.md §3). Anything else is another mapping's. */
static bool header_agrees(uint32_t header, uint32_t mapped, uint32_t host)
{
	return header == (uint32_t)-1 || header == mapped || header == host;
}

/* Whether acting as c's disk id would let ext4 lend the caller its reserved blocks, which it
 * lends by the writer's own fsuid (ext4_has_free_clusters): a native idmapped mount would not,
 * for a caller whose host id is not resuid and who is not the host's root (CAP_SYS_RESOURCE).
 * Such a caller's data is written as an id nothing has (sfs_creds_for_data), and its
 * creations, which must be owned by the disk id, look for room above the reserve first
 * (sfs_creds_borrows_reserve). The other way (a host resuid acting as another disk id) is
 * refused at mount (daemon_views.c, idmap_allows). */
static bool lends_reserve_wrongly(const struct caller *c, uid_t host_uid, uid_t resuid)
{
	return !c->privileged && c->uid == resuid && host_uid != resuid;
}

/* A request through an idmapped view: the kernel sends the ids of the new object with a
 * creation and none with anything else (doc/kernel.md §3). The caller acts as the ids the
 * view's map gives its host ids, groups the map leaves out dropped, with capabilities only
 * when it is the host's root; one the map leaves out acts as an id nothing has. A creation
 * whose ids are not the map's came through a mount the view's map is not (open_tree_attr
 * by the host's root): refused, as the daemon could not tell whom it acts for. */
static int mapped_caller(const struct fuse_ctx *ctx, const struct sfs_idmap *map, uid_t resuid,
                         struct caller *c)
{
	struct sfs_caller_ids h = {.fsuid = NOBODY_ID, .fsgid = NOBODY_ID};
	uint32_t id;

	c->ngroups = 0;
	if (!sfs_caller_read(ctx->pid, &h)) {
		c->uid = ctx->uid != (uid_t)-1 ? ctx->uid : NOBODY_ID;
		c->gid = ctx->gid != (gid_t)-1 ? ctx->gid : NOBODY_ID;
		c->data_uid = c->uid != resuid ? c->uid : NOBODY_ID;
		c->privileged = false;
		c->caps = 0;
		c->ns_fsetid = false;
		return 0;
	}
	c->privileged = h.fsuid == 0;
	c->caps = 0;
	c->ns_fsetid = false;
	if (!c->privileged && (h.cap_eff & (NS_FILE_CAPS | 1ull << CAP_FSETID)) &&
	    sfs_caller_ns_covers(ctx->pid, map)) {
		c->caps = h.cap_eff & NS_FILE_CAPS;
		c->ns_fsetid = h.cap_eff & (1ull << CAP_FSETID);
	}
	c->uid = (id = sfs_idmap_uid_to_disk(map, h.fsuid)) != SFS_IDMAP_NONE ? id : NOBODY_ID;
	c->gid = (id = sfs_idmap_gid_to_disk(map, h.fsgid)) != SFS_IDMAP_NONE ? id : NOBODY_ID;
	c->data_uid = lends_reserve_wrongly(c, h.fsuid, resuid) ? NOBODY_ID : c->uid;
	for (int i = 0; i < h.ngroups; i++)
		if ((id = sfs_idmap_gid_to_disk(map, h.groups[i])) != SFS_IDMAP_NONE)
			c->groups[c->ngroups++] = id;
	if (!header_agrees(ctx->uid, c->uid, h.fsuid) || !header_agrees(ctx->gid, c->gid, h.fsgid))
		return -EPERM;
	return 0;
}

/* The effective capabilities become() left for the caller. */
static int caller_caps(void)
{
	return tc.caps ? sfs_priv_effective_mask(tc.caps) : sfs_priv_effective(tc.privileged);
}

static int become(fuse_req_t req, const struct fuse_ctx *ctx, const struct caller *c)
{
	int rc;

	/* setgroups, and setfs[ug]id to other than the real ids, take CAP_SETGID and CAP_SETUID:
	 * the thread has them while it switches, and keeps them only for root */
	bool new_groups = c->ngroups >= 0 && (c->ngroups != tc.ngroups ||
	                                      memcmp(c->groups, tc.groups, c->ngroups * sizeof(gid_t)));

	if ((c->gid != tc.gid || c->uid != tc.uid || new_groups ||
	     (c->ngroups < 0 && !c->privileged && !groups_fresh(ctx))) &&
	    (rc = sfs_priv_effective(true)))
		return rc;
	if (c->ngroups >= 0) {
		if ((rc = put_groups(c->groups, c->ngroups)))
			return rc;
		tc.groups_expiry = 0; /* not the groups of the header's ids */
	} else if (!c->privileged && (rc = set_groups(req, ctx))) {
		/* Groups matter only where the backing decides by them; root passes those checks
		 * by capability, so its requests skip the /proc read. */
		return rc;
	}
	if (c->gid != tc.gid) {
		syscall(SYS_setfsgid, c->gid);
		if ((gid_t)syscall(SYS_setfsgid, -1) != c->gid)
			return -EPERM;
		tc.gid = c->gid;
	}
	if (c->uid != tc.uid) {
		syscall(SYS_setfsuid, c->uid);
		if (c->uid != 0)
			sfs_priv_fsuid_changed(); /* the host's root acting as a mapped id keeps them */
		if ((uid_t)syscall(SYS_setfsuid, -1) != c->uid)
			return -EPERM;
		tc.uid = c->uid;
	}
	tc.caller_uid = c->uid;
	tc.data_uid = c->data_uid;
	tc.privileged = c->privileged;
	tc.caps = c->caps;
	tc.ns_fsetid = c->ns_fsetid;
	/* Every permitted capability for root, none for anyone else: setfsuid drops only the
	 * file-system capabilities, and the others (CAP_SYS_RESOURCE: ext4's blocks reserved for
	 * root; CAP_SYS_ADMIN, CAP_SETFCAP, ...) would otherwise act for an ordinary user's
	 * request (contract §4.1). A namespace's root through an idmapped view: its file
	 * capabilities, which the kernel has already weighed for what the request names. */
	return caller_caps();
}

int sfs_creds_enter(fuse_req_t req, const struct sfs_idmap *map, uid_t resuid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct caller c;
	int rc;

	if (!tc.ready && (rc = thread_init()))
		return rc;
	tc.map = map && sfs_idmap_active(map) ? map : NULL;
	if (tc.map) {
		if ((rc = mapped_caller(ctx, map, resuid, &c)))
			return rc;
	} else {
		c.uid = ctx->uid; /* field by field: the groups array is not read */
		c.gid = ctx->gid;
		c.data_uid = ctx->uid;
		c.privileged = ctx->uid == 0;
		c.caps = 0;
		c.ns_fsetid = false;
		c.ngroups = -1;
	}
	return become(req, ctx, &c);
}

bool sfs_creds_ns_fsetid(void)
{
	return tc.ns_fsetid;
}

static bool map_covers_object(const struct stat *st)
{
	return sfs_idmap_uid_to_host(tc.map, st->st_uid) != SFS_IDMAP_NONE &&
	       sfs_idmap_gid_to_host(tc.map, st->st_gid) != SFS_IDMAP_NONE;
}

bool sfs_creds_ns_caps(void)
{
	return tc.caps != 0;
}

void sfs_creds_end_ns_caps(void)
{
	tc.caps = 0; /* till the next request's sfs_creds_enter */
	tc.ns_fsetid = false;
	sfs_priv_effective(false);
}

bool sfs_creds_caps_scope(const struct stat *st)
{
	if (!tc.caps || map_covers_object(st))
		return false;
	sfs_priv_effective(false);
	return true;
}

void sfs_creds_caps_unscope(void)
{
	sfs_priv_effective_mask(tc.caps);
}

uid_t sfs_creds_uid(void)
{
	return tc.caller_uid;
}

bool sfs_creds_borrows_reserve(void)
{
	return tc.data_uid != tc.caller_uid;
}

int sfs_creds_for_data(void)
{
	int rc;

	if (tc.uid == tc.data_uid)
		return 0;
	if ((rc = sfs_priv_effective(true)))
		return rc;
	syscall(SYS_setfsuid, tc.data_uid);
	sfs_priv_fsuid_changed();
	if ((uid_t)syscall(SYS_setfsuid, -1) != tc.data_uid)
		return -EPERM;
	tc.uid = tc.data_uid; /* the next request's become() switches back */
	return caller_caps();
}

gid_t sfs_creds_gid(void)
{
	return tc.gid;
}

static __thread struct {
	bool active, ids_changed, caps_changed;
	struct __user_cap_data_struct caps[2];
} reg;

static int set_fs_ids(uid_t uid, gid_t gid)
{
	syscall(SYS_setfsgid, gid);
	syscall(SYS_setfsuid, uid);
	return (uid_t)syscall(SYS_setfsuid, -1) == uid && (gid_t)syscall(SYS_setfsgid, -1) == gid
	               ? 0 : -EPERM;
}

/* Every permitted capability effective: what switching ids and groups takes. */
static int caps_all(void)
{
	struct __user_cap_data_struct d[2];

	if (sfs_priv_caps_get(d) < 0)
		return -errno;
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	return sfs_priv_caps_set(d) < 0 ? -errno : 0;
}

static int become_nobody(void)
{
	int rc = caps_all();

	if (rc)
		return rc;
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return -errno;
	return set_fs_ids(NOBODY_ID, NOBODY_ID);
}

int sfs_creds_backing_begin(bool as_caller)
{
	struct __user_cap_data_struct d[2];
	int rc = 0;

	if (!tc.ready && (rc = thread_init()))
		return rc;
	if (as_caller && (rc = sfs_creds_for_data()))
		return rc;
	reg.active = true;
	reg.ids_changed = reg.caps_changed = false;
	if (as_caller && tc.privileged)
		return 0; /* root: every capability is the caller's own */
	if (sfs_priv_caps_get(reg.caps) < 0) {
		rc = -errno;
		reg.active = false;
		return rc;
	}
	reg.caps_changed = true; /* from here on, _end puts reg.caps back */
	if (!as_caller) {
		reg.ids_changed = true;
		if ((rc = become_nobody())) {
			sfs_creds_backing_end();
			return rc;
		}
	}
	memcpy(d, reg.caps, sizeof(d));
	d[0].effective = d[1].effective = 0;
	sfs_priv_caps_raise(d, CAP_SYS_ADMIN);
	if (sfs_priv_caps_set(d) < 0) {
		rc = -errno;
		sfs_creds_backing_end();
		return rc;
	}
	return 0;
}

void sfs_creds_backing_end(void)
{
	if (!reg.active)
		return;
	if (reg.ids_changed) {
		/* back to what the thread cache says it has, which takes CAP_SETUID and CAP_SETGID */
		caps_all();
		set_fs_ids(tc.uid, tc.gid);
		if (tc.ngroups >= 0)
			syscall(SYS_setgroups, tc.ngroups, tc.groups);
		else
			syscall(SYS_setgroups, 0, NULL);
	}
	if (reg.caps_changed)
		sfs_priv_caps_set(reg.caps);
	reg.active = false;
}

struct sfs_cred_key sfs_creds_key(void)
{
	struct sfs_cred_key k = {tc.data_uid, tc.gid, 1469598103934665603ull};

	for (int i = 0; !tc.privileged && i < tc.ngroups; i++)
		k.groups = (k.groups ^ tc.groups[i]) * 1099511628211ull;
	return k;
}

static bool caller_in_group(gid_t gid)
{
	if (gid == tc.gid)
		return true;
	for (int i = 0; i < tc.ngroups; i++)
		if (tc.groups[i] == gid)
			return true;
	return false;
}

bool sfs_creds_write_privileged(uid_t resuid, gid_t resgid, const struct stat *st)
{
	/* a write keeps S_ISGID of a file without group execute for a member of its group
	 * (setattr_should_drop_sgid), and drops it for anyone else */
	bool keeps_sgid = st && (st->st_mode & (S_ISGID | S_IXGRP)) == S_ISGID &&
	                  caller_in_group(st->st_gid);

	return tc.privileged || tc.data_uid == resuid || (resgid != 0 && caller_in_group(resgid)) ||
	       keeps_sgid;
}

bool sfs_mode_allows(const struct stat *st, int mask)
{
	mode_t bits;

	if (tc.privileged)
		return true;
	if (st->st_uid == tc.caller_uid)
		bits = st->st_mode >> 6;
	else if (caller_in_group(st->st_gid))
		bits = st->st_mode >> 3;
	else
		bits = st->st_mode;
	return (mask & ~bits & 7) == 0;
}

/* The sysctl's value, read at each call: the administrator may change it at any time, and
 * the daemon asks only when the kernel could not check (a raced create). Unreadable: 1, the
 * value every distribution ships. */
static int protected_regular(void)
{
	FILE *f = fopen("/proc/sys/fs/protected_regular", "re");
	int level = 1;

	if (f) {
		if (fscanf(f, "%d", &level) != 1)
			level = 1;
		fclose(f);
	}
	return level;
}

void sfs_creds_umask(mode_t mask)
{
	if (mask != tc.umask) {
		umask(mask);
		tc.umask = mask;
	}
}

bool sfs_creds_sticky_refuses(const struct stat *dir, const struct stat *st)
{
	int level;

	if (!(dir->st_mode & S_ISVTX) || !S_ISREG(st->st_mode) || dir->st_uid == st->st_uid ||
	    st->st_uid == tc.caller_uid)
		return false;
	if (!(dir->st_mode & (S_IWOTH | S_IWGRP)) || !(level = protected_regular()))
		return false;
	return (dir->st_mode & S_IWOTH) || level >= 2;
}

/* Capabilities held in another user namespace (an unprivileged `unshare -U` has them all)
 * are no privilege over the backing. */
bool sfs_pid_has_cap(pid_t pid, int cap)
{
	char path[64], line[256];
	bool yes = false;
	bool same;
	FILE *f;

	if (pid <= 0)
		return false;
	sfs_priv_begin(SFS_PRIV_INSPECT);
	same = sfs_same_namespace(pid, "user");
	sfs_priv_end();
	if (!same)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long eff;
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			yes = eff & (1ull << cap);
			break;
		}
	}
	fclose(f);
	return yes;
}
