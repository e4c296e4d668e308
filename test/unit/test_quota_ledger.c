/* Tests of the quota ledger (quota.h) without a kernel's FUSE: a temporary directory in /tmp
 * (ext4) stands for the backing. The ledger scans it, follows the changes the request layer
 * would report, reserves against limits, keeps them in the directory's /.strictfs/quota and
 * keeps a view tree's usage apart. It takes root, as the daemon does: files of other owners
 * (chown) and directories reopened by handle (open_by_handle_at). `quota check` is left out:
 * it syncs the whole file system /tmp is on. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fdcache.h"
#include "inode.h"
#include "quota.h"

#define UA 4001u  /* two users and a group no file of the system has */
#define UC 4003u
#define GB 4002u

struct fixture {
	char dir[64];
	int rootfd;          /* opened for real: the ledger's root and mount fd */
	ino_t root_ino;
	struct sfs_itab t;
	struct sfs_fdcache c;
	struct sfs_quota *q;
	struct sfs_node *root;
	int wakes;
};

static void wake(void *arg)
{
	((struct fixture *)arg)->wakes++;
}

static void node_created(void *arg, struct sfs_node *n, const struct stat *st)
{
	(void)arg;
	sfs_quota_node_init(&n->q, st); /* as the daemon's hook */
}

static void write_bytes(struct fixture *x, const char *name, size_t len)
{
	char buf[4096];
	int fd = openat(x->rootfd, name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	size_t done = 0;

	memset(buf, 'x', sizeof(buf));
	while (fd >= 0 && done < len) {
		ssize_t n = write(fd, buf, len - done < sizeof(buf) ? len - done : sizeof(buf));
		if (n <= 0)
			break;
		done += n;
	}
	CHECK(fd >= 0 && done == len, "%zu bytes written to %s", len, name);
	if (fd >= 0)
		close(fd);
}

static void make(struct fixture *x, const char *name, size_t len, uid_t uid, gid_t gid)
{
	write_bytes(x, name, len);
	CHECK(fchownat(x->rootfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0, "%s owned by %u:%u",
	      name, uid, gid);
}

static void make_dir(struct fixture *x, const char *name, uid_t uid, gid_t gid)
{
	CHECK(mkdirat(x->rootfd, name, 0755) == 0 &&
	      fchownat(x->rootfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0,
	      "directory %s owned by %u:%u", name, uid, gid);
}

/* What the ledger counts an object as: its blocks, in bytes. */
static int64_t bytes_of(struct fixture *x, const char *name)
{
	struct stat st;

	CHECK(fstatat(x->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, "%s is there", name);
	return (int64_t)st.st_blocks * 512;
}

static struct sfs_qentry usage(struct fixture *x, enum sfs_qtype type, uint32_t id)
{
	struct sfs_qentry e;

	sfs_quota_usage(x->q, type, id, &e);
	return e;
}

static struct sfs_qentry total(struct fixture *x)
{
	struct sfs_qentry e;

	sfs_quota_tree(x->q, -1, &e);
	return e;
}

static const char *scan_state(struct fixture *x)
{
	static char state[16];
	json_object *o = sfs_quota_status(x->q), *s;

	state[0] = '\0';
	if (json_object_object_get_ex(o, "scan", &s))
		snprintf(state, sizeof(state), "%s", json_object_get_string(s));
	json_object_put(o);
	return state;
}

/* The node of name (a path under the root), counted as one lookup of view 1. */
static struct sfs_node *get(struct fixture *x, const char *name, uint32_t view)
{
	int fd = openat(x->rootfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct sfs_node *n = NULL;
	struct stat st;

	CHECK(fd >= 0 && fstat(fd, &st) == 0 && sfs_itab_get(&x->t, &x->c, fd, &st, view, &n) == 0,
	      "the node of %s", name);
	return n;
}

/* Starts the ledger on the directory and waits (at most 10 s) for its scan. */
static int start(struct fixture *x, char *err, size_t errlen)
{
	const struct sfs_quota_ctx ctx = {
		.source = x->dir, .device = "the test's directory", .root_fd = x->rootfd,
		.handle_fd = x->rootfd, .root_ino = x->root_ino, .itab = &x->t, .fdc = &x->c,
		.wake = wake, .wake_arg = x,
	};

	x->q = calloc(1, sizeof(*x->q));
	if (!x->q)
		return -1;
	if (sfs_quota_start(x->q, &ctx, err, errlen))
		return -1;
	sfs_quota_wait_scan(x->q, 10000);
	return 0;
}

static void stop(struct fixture *x)
{
	if (x->q)
		sfs_quota_stop(x->q);
	free(x->q);
	x->q = NULL;
}

/* The tree the ledger is started on:
 *   /            root's        (counted: the backing's root is someone's inode too)
 *   a1           UA:GB  10000 bytes
 *   a2, a2link   UA:GB  one inode of two names, 20000 bytes
 *   c1           UC:GB  5000 bytes
 *   sub/         UA:GB
 *   sub/s1       UC:GB  3000 bytes
 *   sub/deep/    UA:GB  (reached by handle)
 *   sub/deep/d1  UA:GB  7000 bytes
 *   .strictfs/junk UA:GB 9000 bytes  (the daemon's own: counted by nobody) */
static void setup(struct fixture *x)
{
	struct stat st;
	const struct sfs_itab_hooks hooks = {.created = node_created, .fds = &sfs_fdcache_fds};

	memset(x, 0, sizeof(*x));
	strcpy(x->dir, "/tmp/sfs-test-qledger.XXXXXX");
	CHECK(mkdtemp(x->dir) != NULL, "a temporary directory");
	x->rootfd = open(x->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(x->rootfd >= 0 && fstat(x->rootfd, &st) == 0, "the directory opened");
	x->root_ino = st.st_ino;
	make(x, "a1", 10000, UA, GB);
	make(x, "a2", 20000, UA, GB);
	CHECK(linkat(x->rootfd, "a2", x->rootfd, "a2link", 0) == 0, "a second name of a2");
	make(x, "c1", 5000, UC, GB);
	make_dir(x, "sub", UA, GB);
	make(x, "sub/s1", 3000, UC, GB);
	make_dir(x, "sub/deep", UA, GB);
	make(x, "sub/deep/d1", 7000, UA, GB);
	make_dir(x, ".strictfs", 0, 0);
	make(x, ".strictfs/junk", 9000, UA, GB);
	CHECK(sfs_itab_init(&x->t, &hooks) == 0, "the inode table");
	sfs_fdcache_init(&x->c, x->rootfd, 64);
}

static void teardown(struct fixture *x)
{
	static const char *const files[] = {"a1", "a2", "a2link", "c1", "n1", "n2", "sub/s1",
		"sub/n3", "sub/deep/d1", ".strictfs/junk", ".strictfs/quota", ".strictfs/quota.new"};
	static const char *const dirs[] = {"sub/deep", "sub", ".strictfs"};

	stop(x);
	sfs_itab_destroy(&x->t, &x->c);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlinkat(x->rootfd, files[i], 0);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		unlinkat(x->rootfd, dirs[i], AT_REMOVEDIR);
	close(x->rootfd);
	CHECK(rmdir(x->dir) == 0, "the temporary directory removed");
}

/* The start-up scan counts every inode of the backing once, by its owner and group and in
 * the total: hard links at one name, /.strictfs left out, subdirectories reached by handle.
 * Then the scan says it is done, and the owner is woken to write the state. */
static void test_scan(void)
{
	struct fixture x;
	struct sfs_qentry a, c, g, r, all;
	char err[256] = "";
	int64_t ua, uc, root;

	setup(&x);
	ua = bytes_of(&x, "a1") + bytes_of(&x, "a2") + bytes_of(&x, "sub") +
	     bytes_of(&x, "sub/deep") + bytes_of(&x, "sub/deep/d1");
	uc = bytes_of(&x, "c1") + bytes_of(&x, "sub/s1");
	root = bytes_of(&x, ".");
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	CHECK(!strcmp(scan_state(&x), "done"), "its scan is done within 10 s (%s)", scan_state(&x));
	a = usage(&x, SFS_QUSR, UA);
	c = usage(&x, SFS_QUSR, UC);
	g = usage(&x, SFS_QGRP, GB);
	r = usage(&x, SFS_QUSR, 0);
	all = total(&x);
	CHECK(a.used[SFS_QINODES] == 5 && a.used[SFS_QBYTES] == ua,
	      "user %u: 5 inodes (a2 once), %lld bytes (%lld, %lld)", UA, (long long)ua,
	      (long long)a.used[SFS_QINODES], (long long)a.used[SFS_QBYTES]);
	CHECK(c.used[SFS_QINODES] == 2 && c.used[SFS_QBYTES] == uc,
	      "user %u: 2 inodes, %lld bytes (%lld, %lld)", UC, (long long)uc,
	      (long long)c.used[SFS_QINODES], (long long)c.used[SFS_QBYTES]);
	CHECK(g.used[SFS_QINODES] == 7 && g.used[SFS_QBYTES] == ua + uc,
	      "group %u: the 7 inodes of both users (%lld)", GB, (long long)g.used[SFS_QINODES]);
	CHECK(r.used[SFS_QINODES] == 1 && r.used[SFS_QBYTES] == root,
	      "root: the root directory only, not /.strictfs (%lld inodes)",
	      (long long)r.used[SFS_QINODES]);
	CHECK(all.used[SFS_QINODES] == 8 && all.used[SFS_QBYTES] == ua + uc + root,
	      "the total: 8 inodes, %lld bytes (%lld, %lld)", (long long)(ua + uc + root),
	      (long long)all.used[SFS_QINODES], (long long)all.used[SFS_QBYTES]);
	stop(&x); /* joins the scan's thread, which wakes the owner last */
	CHECK(x.wakes >= 1, "the owner was woken when the scan ended");
	teardown(&x);
}

/* After the start, each change the request layer reports moves the ledger by the
 * difference, once: a file that grew, a file given to another owner, a new file, a file
 * deleted (known to the table or not), and one name of two removed (nothing moves). */
static void test_changes(void)
{
	struct fixture x;
	struct sfs_node *a1, *c1, *n1;
	struct sfs_qentry a, c, g, all, a0, c0, g0, all0;
	struct sfs_nodeq was;
	struct stat st;
	char err[256] = "";
	int64_t before, grown, fresh;
	int fd, pfd;

	setup(&x);
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	x.root = get(&x, ".", SFS_PIN);
	a1 = get(&x, "a1", 1);
	c1 = get(&x, "c1", 1);
	if (!x.root || !a1 || !c1) {
		teardown(&x);
		return;
	}
	a0 = usage(&x, SFS_QUSR, UA);
	c0 = usage(&x, SFS_QUSR, UC);
	g0 = usage(&x, SFS_QGRP, GB);
	all0 = total(&x);

	before = bytes_of(&x, "a1");
	write_bytes(&x, "a1", 65536);
	grown = bytes_of(&x, "a1") - before;
	fd = sfs_fd_get(&x.c, a1);
	sfs_quota_sync(x.q, a1, NULL, fd);
	a = usage(&x, SFS_QUSR, UA);
	g = usage(&x, SFS_QGRP, GB);
	all = total(&x);
	CHECK(grown > 0 && a.used[SFS_QBYTES] == a0.used[SFS_QBYTES] + grown &&
	      a.used[SFS_QINODES] == a0.used[SFS_QINODES], "a1 grew by %lld bytes: its owner's "
	      "usage too, and no more (%lld)", (long long)grown,
	      (long long)(a.used[SFS_QBYTES] - a0.used[SFS_QBYTES]));
	CHECK(g.used[SFS_QBYTES] == g0.used[SFS_QBYTES] + grown &&
	      all.used[SFS_QBYTES] == all0.used[SFS_QBYTES] + grown,
	      "and its group's and the total");
	sfs_quota_sync(x.q, a1, NULL, fd);
	CHECK(usage(&x, SFS_QUSR, UA).used[SFS_QBYTES] == a.used[SFS_QBYTES] &&
	      total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES],
	      "reported again without a change, nothing moves");

	CHECK(fchownat(x.rootfd, "a1", UC, GB, 0) == 0, "a1 given to user %u", UC);
	sfs_quota_sync(x.q, a1, NULL, fd);
	sfs_fd_put(&x.c, a1);
	c = usage(&x, SFS_QUSR, UC);
	CHECK(usage(&x, SFS_QUSR, UA).used[SFS_QINODES] == a.used[SFS_QINODES] - 1 &&
	      usage(&x, SFS_QUSR, UA).used[SFS_QBYTES] == a.used[SFS_QBYTES] - bytes_of(&x, "a1"),
	      "the old owner is no longer charged for a1");
	CHECK(c.used[SFS_QINODES] == c0.used[SFS_QINODES] + 1 &&
	      c.used[SFS_QBYTES] == c0.used[SFS_QBYTES] + bytes_of(&x, "a1"),
	      "the new owner is");
	CHECK(total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES] &&
	      total(&x).used[SFS_QINODES] == all.used[SFS_QINODES], "the total did not move");

	/* a new file: the table's hook counted it as its stat says, the ledger not yet */
	all = total(&x);
	make(&x, "n1", 12000, UA, GB);
	fresh = bytes_of(&x, "n1");
	n1 = get(&x, "n1", 1);
	pfd = sfs_fd_get(&x.c, x.root);
	CHECK(n1 && pfd >= 0 && fstatat(x.rootfd, "n1", &st, AT_SYMLINK_NOFOLLOW) == 0,
	      "the new file's node and its directory's descriptor");
	if (n1 && pfd >= 0) {
		sfs_quota_created(x.q, n1, &st, x.root, pfd);
		CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] + 1 &&
		      total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES] + fresh,
		      "a new file is counted once, with its %lld bytes", (long long)fresh);
		fd = sfs_fd_get(&x.c, n1);
		sfs_quota_sync(x.q, n1, NULL, fd);
		sfs_fd_put(&x.c, n1);
		CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] + 1,
		      "reported again, it is not counted twice");
	}
	if (pfd >= 0)
		sfs_fd_put(&x.c, x.root);

	/* deleted, the node known: its descriptor sees no link left */
	all = total(&x);
	c = usage(&x, SFS_QUSR, UC);
	before = bytes_of(&x, "c1");
	CHECK(unlinkat(x.rootfd, "c1", 0) == 0, "c1 deleted");
	fd = sfs_fd_get(&x.c, c1);
	sfs_quota_sync(x.q, c1, NULL, fd);
	sfs_fd_put(&x.c, c1);
	CHECK(usage(&x, SFS_QUSR, UC).used[SFS_QINODES] == c.used[SFS_QINODES] - 1 &&
	      usage(&x, SFS_QUSR, UC).used[SFS_QBYTES] == c.used[SFS_QBYTES] - before &&
	      total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] - 1,
	      "a deleted file of a node is no longer counted");

	/* deleted, no node: what it was counted as is told with it (ops/dir.c's victims) */
	all = total(&x);
	fd = openat(x.rootfd, "sub/s1", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	CHECK(fd >= 0 && fstat(fd, &st) == 0, "sub/s1 opened");
	sfs_quota_node_init(&was, &st);
	CHECK(unlinkat(x.rootfd, "sub/s1", 0) == 0, "sub/s1 deleted");
	sfs_quota_sync(x.q, NULL, &was, fd);
	close(fd);
	CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] - 1 &&
	      total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES] - (int64_t)st.st_blocks * 512,
	      "a deleted file the table did not know is no longer counted");

	/* one name of two */
	all = total(&x);
	fd = openat(x.rootfd, "a2link", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	CHECK(fd >= 0 && fstat(fd, &st) == 0, "a2link opened");
	sfs_quota_node_init(&was, &st);
	CHECK(unlinkat(x.rootfd, "a2link", 0) == 0, "a2link removed");
	sfs_quota_sync(x.q, NULL, &was, fd);
	close(fd);
	CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] &&
	      total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES],
	      "one name of two removed: the file is still counted, once");
	teardown(&x);
}

/* A request reserves what it may add before it adds it: against the user's and group's
 * hard limits and a view's own limits, what other requests reserved included; all tables
 * or none; released at its end; releases always admitted. */
static void test_reservations(void)
{
	struct fixture x;
	struct sfs_charge c1, c2;
	struct sfs_qlimits none = {0}, view = {0};
	uint64_t soft[SFS_QNRES] = {0}, hard[SFS_QNRES] = {0};
	char err[256] = "";
	int64_t used;
	int rc;

	setup(&x);
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	used = usage(&x, SFS_QUSR, UA).used[SFS_QBYTES];
	hard[SFS_QBYTES] = (uint64_t)used + 8192;
	CHECK(sfs_quota_set(x.q, SFS_QUSR, UA, soft, hard, SFS_QSET_BHARD, err, sizeof(err)) == 0,
	      "user %u limited to 8192 bytes more than it uses (%s)", UA, err);
	CHECK(usage(&x, SFS_QUSR, UA).lim.hard[SFS_QBYTES] == hard[SFS_QBYTES], "the limit is in");

	sfs_charge_begin(x.q, &c1);
	c1.id[SFS_QUSR] = UA;
	c1.id[SFS_QGRP] = GB;
	c1.amount[SFS_QBYTES] = 8192;
	CHECK(sfs_quota_reserve(&c1, SFS_CHARGE_USR | SFS_CHARGE_GRP, &none) == 0,
	      "8192 bytes reserved, up to the limit");
	CHECK(usage(&x, SFS_QUSR, UA).reserved[SFS_QBYTES] == 8192 &&
	      usage(&x, SFS_QGRP, GB).reserved[SFS_QBYTES] == 8192, "in the user's and the group's");

	sfs_charge_begin(x.q, &c2);
	c2.id[SFS_QUSR] = UA;
	c2.id[SFS_QGRP] = GB;
	c2.amount[SFS_QBYTES] = 1;
	rc = sfs_quota_reserve(&c2, SFS_CHARGE_USR | SFS_CHARGE_GRP, &none);
	CHECK(rc == -EDQUOT, "one byte more by another request: EDQUOT (%d)", rc);
	CHECK(usage(&x, SFS_QGRP, GB).reserved[SFS_QBYTES] == 8192,
	      "refused by the user's table, the group's reserved nothing");
	CHECK(sfs_quota_reserve(&c2, SFS_CHARGE_GRP, &none) == 0,
	      "the group alone, without a limit, admits it");
	sfs_charge_end(&c2);
	CHECK(usage(&x, SFS_QGRP, GB).reserved[SFS_QBYTES] == 8192, "ended, its reservation goes");
	sfs_charge_end(&c1);
	CHECK(usage(&x, SFS_QUSR, UA).reserved[SFS_QBYTES] == 0 &&
	      usage(&x, SFS_QGRP, GB).reserved[SFS_QBYTES] == 0, "the first ended, nothing reserved");

	sfs_charge_begin(x.q, &c1);
	c1.id[SFS_QUSR] = UA;
	c1.id[SFS_QGRP] = GB;
	c1.amount[SFS_QBYTES] = 8193;
	CHECK(sfs_quota_reserve(&c1, SFS_CHARGE_USR, &none) == -EDQUOT, "8193 bytes: EDQUOT");
	c1.amount[SFS_QBYTES] = -4096;
	CHECK(sfs_quota_reserve(&c1, SFS_CHARGE_USR, &none) == 0, "a release is admitted");
	c1.amount[SFS_QBYTES] = 4096;
	view.hard[SFS_QBYTES] = (uint64_t)total(&x).used[SFS_QBYTES] + 4095;
	CHECK(sfs_quota_reserve(&c1, SFS_CHARGE_TOTAL, &view) == -EDQUOT,
	      "past a view's size= limit: EDQUOT");
	view.hard[SFS_QBYTES] += 1;
	CHECK(sfs_quota_reserve(&c1, SFS_CHARGE_TOTAL, &view) == 0, "up to it: admitted");
	CHECK(total(&x).reserved[SFS_QBYTES] == 4096, "and reserved in the total");
	sfs_charge_end(&c1);
	CHECK(total(&x).reserved[SFS_QBYTES] == 0, "until the request ends");

	hard[SFS_QBYTES] = (uint64_t)used - 1;
	sfs_quota_set(x.q, SFS_QUSR, UA, soft, hard, SFS_QSET_BHARD, err, sizeof(err));
	sfs_charge_begin(x.q, &c1);
	c1.id[SFS_QUSR] = UA;
	CHECK(sfs_quota_within(&c1, SFS_CHARGE_USR, &none) == -EDQUOT,
	      "a user over the limit now is told so");
	CHECK(sfs_quota_within(&c1, SFS_CHARGE_GRP, &none) == 0, "its group is within");
	sfs_charge_end(&c1);
	teardown(&x);
}

/* Limits are kept in /.strictfs/quota and found there by the next start, whose scan counts
 * the same usage (the state file counted by nobody); a state file that cannot be read stops
 * the start with the line at fault, and is left as it was. */
static void test_state_kept(void)
{
	struct fixture x;
	uint64_t soft[SFS_QNRES] = {0}, hard[SFS_QNRES] = {0};
	struct sfs_qentry a, all;
	char err[256] = "", buf[64] = "";
	struct stat st;
	int fd;
	ssize_t n;

	setup(&x);
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	soft[SFS_QINODES] = 40;
	hard[SFS_QINODES] = 50;
	CHECK(sfs_quota_set(x.q, SFS_QUSR, UC, soft, hard, SFS_QSET_ISOFT | SFS_QSET_IHARD, err,
	                    sizeof(err)) == 0, "user %u limited to 50 inodes (%s)", UC, err);
	CHECK(fstatat(x.rootfd, ".strictfs/quota", &st, 0) == 0, "the limits are on the backing");
	all = total(&x);
	stop(&x);
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts again (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	a = usage(&x, SFS_QUSR, UC);
	CHECK(a.lim.hard[SFS_QINODES] == 50 && a.lim.soft[SFS_QINODES] == 40,
	      "the limits are back (%llu, %llu)", (unsigned long long)a.lim.soft[SFS_QINODES],
	      (unsigned long long)a.lim.hard[SFS_QINODES]);
	CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] &&
	      total(&x).used[SFS_QBYTES] == all.used[SFS_QBYTES],
	      "the same usage, the state file counted by nobody");
	stop(&x);

	fd = openat(x.rootfd, ".strictfs/quota", O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, "nonsense\n", 9) == 9, "the state file damaged");
	if (fd >= 0)
		close(fd);
	err[0] = '\0';
	CHECK(start(&x, err, sizeof(err)) == -1, "a start on it fails");
	CHECK(strstr(err, "line 1") && strstr(err, "quota"), "saying where: %s", err);
	fd = openat(x.rootfd, ".strictfs/quota", O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	CHECK(n == 9 && !memcmp(buf, "nonsense\n", 9), "and the file is left as it was");
	if (fd >= 0)
		close(fd);
	teardown(&x);
}

/* The tree of a subdir= view with size= or inodes= has its usage kept apart: counted by a
 * scan of its own, a file made inside it is charged to it and one made outside is not, and
 * nothing moves across its edge. */
static void test_view_tree(void)
{
	struct fixture x;
	struct sfs_node *sub, *deep, *n2, *n3;
	struct sfs_qentry tree, tree0, all;
	struct stat st;
	char err[256] = "";
	int sfd, dfd, rfd, slot;
	int64_t expect;

	setup(&x);
	CHECK(start(&x, err, sizeof(err)) == 0, "the ledger starts (%s)", err);
	if (!x.q) {
		teardown(&x);
		return;
	}
	x.root = get(&x, ".", SFS_PIN);
	sub = get(&x, "sub", SFS_PIN);
	deep = get(&x, "sub/deep", 1);
	if (!x.root || !sub || !deep) {
		teardown(&x);
		return;
	}
	expect = bytes_of(&x, "sub") + bytes_of(&x, "sub/s1") + bytes_of(&x, "sub/deep") +
	         bytes_of(&x, "sub/deep/d1");
	sfd = sfs_fd_get(&x.c, sub);
	slot = sfs_quota_add_root(x.q, sub, sfd, err, sizeof(err));
	CHECK(slot >= 0, "sub's usage kept apart (%s)", err);
	if (slot < 0) {
		sfs_fd_put(&x.c, sub);
		teardown(&x);
		return;
	}
	sfs_quota_tree(x.q, slot, &tree);
	tree0 = tree;
	CHECK(tree.used[SFS_QINODES] == 4 && tree.used[SFS_QBYTES] == expect,
	      "its scan counts its 4 inodes, %lld bytes (%lld, %lld)", (long long)expect,
	      (long long)tree.used[SFS_QINODES], (long long)tree.used[SFS_QBYTES]);

	all = total(&x);
	make(&x, "sub/n3", 6000, UA, GB);
	n3 = get(&x, "sub/n3", 1);
	if (n3 && fstatat(x.rootfd, "sub/n3", &st, AT_SYMLINK_NOFOLLOW) == 0)
		sfs_quota_created(x.q, n3, &st, sub, sfd);
	sfs_quota_tree(x.q, slot, &tree);
	CHECK(tree.used[SFS_QINODES] == tree0.used[SFS_QINODES] + 1 &&
	      tree.used[SFS_QBYTES] == tree0.used[SFS_QBYTES] + (int64_t)st.st_blocks * 512,
	      "a file made inside is charged to the tree");
	CHECK(total(&x).used[SFS_QINODES] == all.used[SFS_QINODES] + 1,
	      "and to the whole backing");
	tree0 = tree;

	make(&x, "n2", 6000, UA, GB);
	n2 = get(&x, "n2", 1);
	rfd = sfs_fd_get(&x.c, x.root);
	if (n2 && rfd >= 0 && fstatat(x.rootfd, "n2", &st, AT_SYMLINK_NOFOLLOW) == 0)
		sfs_quota_created(x.q, n2, &st, x.root, rfd);
	sfs_quota_tree(x.q, slot, &tree);
	CHECK(tree.used[SFS_QINODES] == tree0.used[SFS_QINODES] &&
	      tree.used[SFS_QBYTES] == tree0.used[SFS_QBYTES], "a file made outside is not");

	dfd = sfs_fd_get(&x.c, deep);
	CHECK(sfs_quota_may_move(x.q, sub, sfd, x.root, rfd) == -EXDEV,
	      "a move out of the tree: EXDEV");
	CHECK(sfs_quota_may_move(x.q, x.root, rfd, deep, dfd) == -EXDEV,
	      "a move into it, deeper down: EXDEV");
	CHECK(sfs_quota_may_move(x.q, deep, dfd, sub, sfd) == 0, "a move inside it is allowed");
	sfs_quota_drop_root(x.q, slot);
	CHECK(sfs_quota_may_move(x.q, sub, sfd, x.root, rfd) == 0,
	      "once its last view is gone, the edge is gone");
	sfs_fd_put(&x.c, deep);
	if (rfd >= 0)
		sfs_fd_put(&x.c, x.root);
	sfs_fd_put(&x.c, sub);
	teardown(&x);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: the ledger needs root (chown, open_by_handle_at)\n");
		return 77;
	}
	test_scan();
	test_changes();
	test_reservations();
	test_state_kept();
	test_view_tree();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
