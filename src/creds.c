/* Per-thread caller credentials (see creds.h). The thread-local cache keeps what the thread
 * currently has, so a run of requests by one caller costs no syscall at all. */
#include "creds.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "priv.h"
#include "util.h"

#define MAX_GROUPS 256
#define GROUPS_TTL_NS 1000000000ll

struct thread_creds {
	bool ready;
	uid_t uid;
	gid_t gid;
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

static int set_groups(fuse_req_t req, const struct fuse_ctx *ctx)
{
	gid_t list[MAX_GROUPS];
	int n;

	if (groups_fresh(ctx))
		return 0;
	n = ctx->pid ? fuse_req_getgroups(req, MAX_GROUPS, list) : 0;
	if (n < 0)
		n = 0; /* the caller is gone or unreadable: act with no supplementary groups */
	if (n > MAX_GROUPS)
		n = MAX_GROUPS;
	if (n != tc.ngroups || memcmp(list, tc.groups, n * sizeof(gid_t))) {
		if (syscall(SYS_setgroups, n, list) < 0)
			return -errno;
		memcpy(tc.groups, list, n * sizeof(gid_t));
		tc.ngroups = n;
	}
	tc.groups_pid = ctx->pid;
	tc.groups_uid = ctx->uid;
	tc.groups_gid = ctx->gid;
	tc.groups_expiry = now_ns() + GROUPS_TTL_NS;
	return 0;
}

int sfs_creds_enter(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int rc;

	if (!tc.ready && (rc = thread_init()))
		return rc;
	/* setgroups, and setfs[ug]id to other than the real ids, take CAP_SETGID and CAP_SETUID:
	 * the thread has them while it switches, and keeps them only for root */
	if ((ctx->gid != tc.gid || ctx->uid != tc.uid || (ctx->uid != 0 && !groups_fresh(ctx))) &&
	    (rc = sfs_priv_effective(true)))
		return rc;
	/* Groups matter only where the backing decides by them; root passes those checks by
	 * capability, so its requests skip the /proc read. */
	if (ctx->uid != 0 && (rc = set_groups(req, ctx)))
		return rc;
	if (ctx->gid != tc.gid) {
		syscall(SYS_setfsgid, ctx->gid);
		if ((gid_t)syscall(SYS_setfsgid, -1) != ctx->gid)
			return -EPERM;
		tc.gid = ctx->gid;
	}
	if (ctx->uid != tc.uid) {
		syscall(SYS_setfsuid, ctx->uid);
		if ((uid_t)syscall(SYS_setfsuid, -1) != ctx->uid)
			return -EPERM;
		tc.uid = ctx->uid;
	}
	/* Every permitted capability for root, none for anyone else: setfsuid drops only the
	 * file-system capabilities, and the others (CAP_SYS_RESOURCE: ext4's blocks reserved for
	 * root; CAP_SYS_ADMIN, CAP_SETFCAP, ...) would otherwise act for an ordinary user's
	 * request (contract §4.1). */
	return sfs_priv_effective(ctx->uid == 0);
}

/* An id no file and no user has: (uid_t)-2, the one below the "no change" value. */
#define NOBODY_ID ((uid_t)-2)

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
	reg.active = true;
	reg.ids_changed = reg.caps_changed = false;
	if (as_caller && tc.uid == 0)
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
	struct sfs_cred_key k = {tc.uid, tc.gid, 1469598103934665603ull};

	for (int i = 0; tc.uid != 0 && i < tc.ngroups; i++)
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

	return tc.uid == 0 || tc.uid == resuid || (resgid != 0 && caller_in_group(resgid)) ||
	       keeps_sgid;
}

bool sfs_mode_allows(const struct stat *st, int mask)
{
	mode_t bits;

	if (tc.uid == 0)
		return true;
	if (st->st_uid == tc.uid)
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
	    st->st_uid == tc.uid)
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
