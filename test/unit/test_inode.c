/* Tests of the inode table (inode.h) and its descriptor cache (fdcache.h) without a kernel's
 * FUSE: files and directories of a temporary directory in /tmp (ext4, whose file handles are
 * the node ids) are looked up through "views" as the request layer would, and forgotten as
 * their kernels would forget them. Reopening a node by its handle takes CAP_DAC_READ_SEARCH
 * (test/run runs as root); without it the tests that need it say they were skipped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fdcache.h"
#include "handover.h"
#include "inode.h"

/* ---- what the hooks saw ------------------------------------------------------------------- */

/* One created hook's node; a node's pointer may be handed out again once it is freed. */
struct seen {
	struct sfs_node *n;
	int freed;       /* how many freed hooks it had */
	bool entered;    /* the table gave it out */
};

#define MAX_SEEN 1024
static struct seen seen[MAX_SEEN];
static size_t nseen;
static int freed_unseen, stat_mismatch, entered_unseen;

static struct seen *seen_live(const struct sfs_node *n)
{
	for (size_t i = nseen; i-- > 0;)
		if (seen[i].n == n && !seen[i].freed)
			return &seen[i];
	return NULL;
}

static void hook_created(void *arg, struct sfs_node *n, const struct stat *st)
{
	(void)arg;
	if (n->ino != st->st_ino || n->dev != st->st_dev || n->type != (st->st_mode & S_IFMT))
		stat_mismatch++;
	if (nseen < MAX_SEEN)
		seen[nseen++] = (struct seen){.n = n};
}

static void hook_freed(void *arg, struct sfs_node *n)
{
	struct seen *s = seen_live(n);

	(void)arg;
	if (s)
		s->freed++;
	else
		freed_unseen++;
}

static size_t freed_count(void)
{
	size_t k = 0;

	for (size_t i = 0; i < nseen; i++)
		k += seen[i].entered && seen[i].freed;
	return k;
}

static void seen_reset(void)
{
	nseen = 0;
	freed_unseen = stat_mismatch = entered_unseen = 0;
}

/* ---- the fixture --------------------------------------------------------------------------- */

struct fixture {
	struct sfs_handover ho;
	struct sfs_itab t;
	struct sfs_fdcache c;
	char dir[64];
	int dirfd;       /* opened for real: the mount fd open_by_handle_at wants */
	dev_t dev;
};

static bool can_open_handles;

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static void setup(struct fixture *x, size_t fd_limit)
{
	const struct sfs_itab_hooks hooks = {.created = hook_created, .freed = hook_freed, .fds = &sfs_fdcache_fds};
	struct stat st;

	seen_reset();
	strcpy(x->dir, "/tmp/sfs-test-inode.XXXXXX");
	CHECK(mkdtemp(x->dir) != NULL, "a temporary directory");
	x->dirfd = open(x->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(x->dirfd >= 0 && fstat(x->dirfd, &st) == 0, "the directory opened");
	x->dev = st.st_dev;
	CHECK(sfs_ho_create(&x->ho) == 0, "a state for the lookup counts");
	CHECK(sfs_itab_init(&x->t, &hooks) == 0, "the table");
	x->t.ho = &x->ho;
	sfs_fdcache_init(&x->c, x->dirfd, fd_limit);
}

/* Ends the table (its nodes go as a daemon's end takes them), then checks what the hooks
 * saw over the test: every node the table gave out was announced, with the stat it was made
 * from, and freed exactly once. */
static void teardown(struct fixture *x)
{
	DIR *d;
	struct dirent *de;
	size_t unfreed = 0;

	sfs_itab_destroy(&x->t, &x->c);
	sfs_ho_close(&x->ho);
	for (size_t i = 0; i < nseen; i++)
		unfreed += seen[i].entered && seen[i].freed != 1;
	CHECK(!unfreed && !freed_unseen && !entered_unseen && !stat_mismatch,
	      "each node given out was announced from its stat and freed once (%zu unfreed, %d "
	      "freed unannounced, %d given out unannounced, %d stats that differ)", unfreed,
	      freed_unseen, entered_unseen, stat_mismatch);
	d = fdopendir(dup(x->dirfd));
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(x->dirfd, de->d_name, de->d_type == DT_DIR ? AT_REMOVEDIR : 0);
	if (d)
		closedir(d);
	close(x->dirfd);
	rmdir(x->dir);
}

static void make(struct fixture *x, const char *name)
{
	int fd = openat(x->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	CHECK(fd >= 0, "file %s created", name);
	if (fd >= 0)
		close(fd);
}

static void make_dir(struct fixture *x, const char *name)
{
	CHECK(mkdirat(x->dirfd, name, 0755) == 0, "directory %s created", name);
}

/* The node of name counted as one lookup by view (as a LOOKUP would), or NULL. */
static struct sfs_node *get_rc(struct fixture *x, const char *name, uint32_t view, int *rc)
{
	int fd = openat(x->dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct sfs_node *n = NULL;
	struct stat st;

	*rc = fd < 0 ? -errno : 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		*rc = -errno;
		close(fd);
		return NULL;
	}
	*rc = sfs_itab_get(&x->t, &x->c, fd, &st, view, &n);
	if (*rc)
		return NULL;
	if (seen_live(n))
		seen_live(n)->entered = true;
	else
		entered_unseen++;
	return n;
}

static struct sfs_node *get(struct fixture *x, const char *name, uint32_t view)
{
	int rc;
	struct sfs_node *n = get_rc(x, name, view, &rc);

	CHECK(n != NULL, "%s looked up by view %u (%d)", name, view, rc);
	return n;
}

static uint64_t id_of(struct fixture *x, const char *name)
{
	int fd = openat(x->dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	uint64_t id = 0;

	CHECK(fd >= 0 && sfs_node_id_of(fd, &id) == 0, "the file handle of %s", name);
	if (fd >= 0)
		close(fd);
	return id;
}

/* The node's lookup count for view, as the table keeps it. */
static uint64_t lookups(const struct sfs_node *n, uint32_t view)
{
	for (uint32_t i = 0; n && i < n->nrefs; i++)
		if (n->refs[i].view == view)
			return n->refs[i].count;
	return 0;
}

static bool holds_view(const uint32_t *views, size_t k, uint32_t view)
{
	for (size_t i = 0; i < k; i++)
		if (views[i] == view)
			return true;
	return false;
}

/* ---- the tests ----------------------------------------------------------------------------- */

/* A lookup finds the node of the object, or makes it: a second lookup of one object is the
 * same node with one more lookup for that view, and each view's lookups are counted apart,
 * in the table and in the state a successor would read. A node keeps one descriptor however
 * often it is looked up. */
static void test_lookups_per_view(void)
{
	struct fixture x;
	struct sfs_node *f, *f2, *f3, *d;
	uint32_t views[4];
	uint64_t fid;
	size_t before;

	setup(&x, 64);
	make(&x, "f");
	make_dir(&x, "d");
	fid = id_of(&x, "f");
	before = open_fds();
	f = get(&x, "f", 1);
	if (!f) {
		teardown(&x);
		return;
	}
	CHECK(f->id == fid && f->type == S_IFREG && f->dev == x.dev,
	      "the node of a file has its file handle as its id and the file's type");
	f2 = get(&x, "f", 1);
	CHECK(f2 == f, "a second lookup by the same view is the same node");
	CHECK(lookups(f, 1) == 2 && f->nlookup == 2, "with two lookups counted for that view "
	      "(%llu, %llu in all)", (unsigned long long)lookups(f, 1),
	      (unsigned long long)f->nlookup);
	f3 = get(&x, "f", 2);
	CHECK(f3 == f, "a lookup by another view is the same node too");
	CHECK(lookups(f, 1) == 2 && lookups(f, 2) == 1 && f->nlookup == 3,
	      "each view's lookups counted apart (%llu and %llu)",
	      (unsigned long long)lookups(f, 1), (unsigned long long)lookups(f, 2));
	CHECK(sfs_ho_ref_get(&x.ho, fid, 1) == 2 && sfs_ho_ref_get(&x.ho, fid, 2) == 1,
	      "the state a successor reads has the same counts (%llu and %llu)",
	      (unsigned long long)sfs_ho_ref_get(&x.ho, fid, 1),
	      (unsigned long long)sfs_ho_ref_get(&x.ho, fid, 2));
	CHECK(sfs_itab_views_of(&x.t, f, views, 4) == 2 && holds_view(views, 2, 1) &&
	      holds_view(views, 2, 2), "the views holding it are views 1 and 2");
	CHECK(sfs_itab_views_of(&x.t, f, views, 1) == 2,
	      "with room for one view the answer says two hold it");
	CHECK(sfs_itab_id_held_by(&x.t, fid, 1) && sfs_itab_id_held_by(&x.t, fid, 2) &&
	      !sfs_itab_id_held_by(&x.t, fid, 3), "its id is held by views 1 and 2, not by view 3");
	CHECK(sfs_itab_find(&x.t, x.dev, f->ino) == f, "found by (dev, ino)");
	CHECK(sfs_itab_find(&x.t, x.dev + 1, f->ino) == NULL, "not under another dev");
	CHECK(sfs_itab_find_id(&x.t, fid) == f, "found by its id");
	CHECK(sfs_itab_find_id(&x.t, fid ^ (1ull << 32)) == NULL,
	      "not by an id of the same inode number and another generation");

	d = get(&x, "d", 1);
	CHECK(d && d != f && d->type == S_IFDIR && d->id == id_of(&x, "d"),
	      "a directory is a node of its own, of its type");
	CHECK(sfs_itab_count(&x.t) == 2, "two nodes in the table (%zu)", sfs_itab_count(&x.t));
	CHECK(open_fds() == before + 2, "one descriptor per node, however many lookups "
	      "(%zu more)", open_fds() - before);
	CHECK(nseen == 2, "the created hook ran once per node (%zu)", nseen);
	teardown(&x);
}

/* FORGET drops a view's lookups: the node stays while any view holds one and is freed (its
 * descriptor closed, its counts gone from the successor's state) with the last. A view
 * never forgets more than it was given, and a view that holds none forgets nothing. */
static void test_forget(void)
{
	struct fixture x;
	struct sfs_node *f, *g;
	uint64_t fid, gid;
	size_t before, nodes;
	ino_t fino;

	setup(&x, 64);
	make(&x, "f");
	make(&x, "g");
	fid = id_of(&x, "f");
	gid = id_of(&x, "g");
	before = open_fds();
	f = get(&x, "f", 1);
	get(&x, "f", 1);
	get(&x, "f", 2);
	if (!f) {
		teardown(&x);
		return;
	}
	fino = f->ino;
	sfs_itab_forget(&x.t, &x.c, f, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, fid) == f && lookups(f, 1) == 1 && f->nlookup == 2,
	      "one of view 1's two lookups forgotten: the node stays with one for view 1");
	sfs_itab_forget(&x.t, &x.c, f, 2, 5);
	CHECK(sfs_itab_find_id(&x.t, fid) == f, "view 2 forgetting 5 of its 1 lookup frees nothing "
	      "view 1 holds");
	CHECK(lookups(f, 1) == 1 && lookups(f, 2) == 0 && f->nlookup == 1,
	      "and takes only view 2's one lookup (%llu in all)", (unsigned long long)f->nlookup);
	CHECK(!sfs_itab_id_held_by(&x.t, fid, 2) && sfs_itab_id_held_by(&x.t, fid, 1),
	      "view 2 no longer holds it, view 1 does");
	CHECK(sfs_ho_ref_get(&x.ho, fid, 2) == 0 && sfs_ho_ref_get(&x.ho, fid, 1) == 1,
	      "the successor's state says so");
	sfs_itab_forget(&x.t, &x.c, f, 3, 1);
	CHECK(sfs_itab_find_id(&x.t, fid) == f && f->nlookup == 1,
	      "a FORGET by a view that holds no lookup changes nothing");
	CHECK(freed_count() == 0, "no node freed yet");
	sfs_itab_forget(&x.t, &x.c, f, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, fid) == NULL && sfs_itab_find(&x.t, x.dev, fino) == NULL,
	      "the last lookup forgotten, the node is gone");
	CHECK(freed_count() == 1, "the freed hook ran for it (%zu)", freed_count());
	CHECK(sfs_ho_ref_get(&x.ho, fid, 1) == 0, "no count of it left for a successor");
	CHECK(!sfs_itab_id_held_by(&x.t, fid, 1), "no view holds its id");
	CHECK(open_fds() == before, "its descriptor closed (%zu, %zu)", before, open_fds());

	g = get(&x, "g", 1);
	get(&x, "g", 1);
	nodes = sfs_itab_count(&x.t);
	sfs_itab_forget_id(&x.t, &x.c, gid ^ (7ull << 32), 1, 1);
	CHECK(sfs_itab_count(&x.t) == nodes && g && lookups(g, 1) == 2,
	      "a FORGET of an id the table does not have changes nothing");
	sfs_itab_forget_id(&x.t, &x.c, gid, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, gid) == g && lookups(g, 1) == 1,
	      "a FORGET by id drops one lookup of the node");
	sfs_itab_forget_id(&x.t, &x.c, gid, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, gid) == NULL && sfs_itab_count(&x.t) == 0,
	      "and the last one frees it");
	CHECK(freed_count() == 2, "the freed hook ran once per node (%zu)", freed_count());
	CHECK(open_fds() == before, "no descriptor left (%zu, %zu)", before, open_fds());
	teardown(&x);
}

/* A view that vanished sends no FORGET: dropping it takes all its lookups at once, frees
 * the nodes no other view (and no pin) holds, and clears its counts for a successor. */
static void test_drop_view(void)
{
	struct fixture x;
	struct sfs_node *a, *b, *c, *p;
	uint64_t aid, bid;
	uint32_t views[4];

	setup(&x, 64);
	make(&x, "a");
	make(&x, "b");
	make(&x, "c");
	make_dir(&x, "p");
	aid = id_of(&x, "a");
	bid = id_of(&x, "b");
	a = get(&x, "a", 1);
	get(&x, "a", 2);
	b = get(&x, "b", 1);
	get(&x, "b", 1);
	get(&x, "b", 1);
	c = get(&x, "c", 2);
	p = get(&x, "p", SFS_PIN);
	get(&x, "p", 1);
	if (!a || !b || !c || !p) {
		teardown(&x);
		return;
	}
	CHECK(sfs_itab_count(&x.t) == 4, "four nodes (%zu)", sfs_itab_count(&x.t));
	sfs_itab_drop_view(&x.t, &x.c, 1);
	CHECK(sfs_itab_find_id(&x.t, bid) == NULL, "a node only view 1 held (3 lookups) is freed");
	CHECK(sfs_itab_find_id(&x.t, aid) == a && lookups(a, 1) == 0 && lookups(a, 2) == 1 &&
	      a->nlookup == 1, "a node view 2 holds too stays, with view 2's lookup only");
	CHECK(sfs_itab_views_of(&x.t, a, views, 4) == 1 && views[0] == 2,
	      "the only view holding it is view 2");
	CHECK(sfs_itab_find(&x.t, x.dev, c->ino) == c && lookups(c, 2) == 1,
	      "a node of view 2 alone is untouched");
	CHECK(sfs_itab_find(&x.t, x.dev, p->ino) == p && p->nlookup == 0 && p->pins == 1,
	      "a pinned node stays, without view 1's lookup");
	CHECK(sfs_ho_ref_get(&x.ho, aid, 1) == 0 && sfs_ho_ref_get(&x.ho, bid, 1) == 0 &&
	      sfs_ho_ref_get(&x.ho, aid, 2) == 1, "view 1's counts are gone from the successor's "
	      "state, view 2's are kept");
	CHECK(freed_count() == 1, "the freed hook ran once (%zu)", freed_count());
	sfs_itab_drop_view(&x.t, &x.c, 2);
	CHECK(sfs_itab_count(&x.t) == 1 && sfs_itab_find_id(&x.t, aid) == NULL,
	      "view 2 dropped too: only the pinned node is left (%zu)", sfs_itab_count(&x.t));
	sfs_itab_unpin(&x.t, &x.c, p);
	CHECK(sfs_itab_count(&x.t) == 0, "unpinned, it goes as well");
	CHECK(freed_count() == 4, "each freed once (%zu)", freed_count());
	teardown(&x);
}

/* A pin (a view's root, the backing's root) keeps a node whatever the views forget, counts
 * as no view's lookup, and the node goes with the last unpin once no view holds it. */
static void test_pins(void)
{
	struct fixture x;
	struct sfs_node *r, *r2, *f;
	uint32_t views[2];
	uint64_t rid;

	setup(&x, 64);
	make_dir(&x, "root");
	make(&x, "f");
	rid = id_of(&x, "root");
	r = get(&x, "root", SFS_PIN);
	if (!r) {
		teardown(&x);
		return;
	}
	CHECK(r->pins == 1 && r->nlookup == 0, "pinned, with no lookup counted");
	CHECK(sfs_itab_views_of(&x.t, r, views, 2) == 0 && !sfs_itab_id_held_by(&x.t, rid, 0),
	      "no view holds a pinned node's id by the pin");
	CHECK(sfs_ho_ref_get(&x.ho, rid, SFS_PIN) == 0, "a pin is not a lookup for a successor");
	r2 = get(&x, "root", SFS_PIN);
	CHECK(r2 == r && r->pins == 2, "a second pin of it, on the same node");
	get(&x, "root", 1);
	sfs_itab_forget(&x.t, &x.c, r, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, rid) == r, "forgetting the view's lookup leaves it pinned");
	sfs_itab_unpin(&x.t, &x.c, r);
	CHECK(sfs_itab_find_id(&x.t, rid) == r && r->pins == 1, "one unpin of two leaves it");
	get(&x, "root", 1);
	sfs_itab_unpin(&x.t, &x.c, r);
	CHECK(sfs_itab_find_id(&x.t, rid) == r && r->pins == 0,
	      "the last unpin leaves a node a view still holds");
	sfs_itab_unpin(&x.t, &x.c, r);
	CHECK(sfs_itab_find_id(&x.t, rid) == r && r->pins == 0 && lookups(r, 1) == 1,
	      "an unpin too many changes nothing");
	sfs_itab_forget(&x.t, &x.c, r, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, rid) == NULL, "the view's FORGET then frees it");

	f = get(&x, "f", SFS_PIN);
	sfs_itab_unpin(&x.t, &x.c, f);
	CHECK(sfs_itab_count(&x.t) == 0, "a node only pinned goes with its unpin");
	CHECK(freed_count() == 2, "each freed once (%zu)", freed_count());
	teardown(&x);
}

/* Looks names up by view 1 until the node of keep is no longer among the cached
 * descriptors: its inode is then held by nothing of the table. */
static void push_out(struct fixture *x, struct sfs_node *keep, const char *prefix, int max)
{
	char name[32];

	for (int i = 0; i < max && sfs_fd_cached(&x->c, keep); i++) {
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		make(x, name);
		get(x, name, 1);
	}
}

/* A node whose descriptor the cache let go does not hold its inode: once the file is
 * deleted, ext4 may give its number to a new file. A lookup of the new file is a new node
 * (its file handle differs); the old one is stale: never found by (dev, ino) again, but
 * still by its id for the views that hold it, until they forget it. */
static void test_stale(void)
{
	struct fixture x;
	struct sfs_node *old, *cur, *again;
	char name[32] = "";
	uint64_t old_id;
	ino_t ino;
	struct stat st;
	bool reused = false;

	setup(&x, 16);
	make(&x, "old");
	old = get(&x, "old", 1);
	if (!old) {
		teardown(&x);
		return;
	}
	old_id = old->id;
	ino = old->ino;
	push_out(&x, old, "p", 64);
	CHECK(!sfs_fd_cached(&x.c, old), "the old node's descriptor was let go");
	CHECK(unlinkat(x.dirfd, "old", 0) == 0, "the old file deleted");
	for (int i = 0; i < 32 && !reused; i++) {
		snprintf(name, sizeof(name), "new%d", i);
		make(&x, name);
		reused = fstatat(x.dirfd, name, &st, 0) == 0 && st.st_ino == ino;
	}
	if (!reused) {
		printf("test_stale: skipped, ext4 gave inode %llu to no new file\n",
		       (unsigned long long)ino);
		teardown(&x);
		return;
	}
	cur = get(&x, name, 2);
	CHECK(cur && cur != old && cur->id != old_id,
	      "the new file with the old number is a new node, with its own id");
	CHECK(old->stale, "the old node is stale");
	CHECK(sfs_itab_find(&x.t, x.dev, ino) == cur, "(dev, ino) finds the new node");
	CHECK(sfs_itab_find_id(&x.t, old_id) == old && sfs_itab_id_held_by(&x.t, old_id, 1),
	      "the old id still finds the old node, held by view 1");
	CHECK(cur && sfs_itab_id_held_by(&x.t, cur->id, 2) && !sfs_itab_id_held_by(&x.t, cur->id, 1),
	      "the new id is held by view 2 only");
	again = get(&x, name, 1);
	CHECK(again == cur && lookups(old, 1) == 1,
	      "view 1 looking the new file up gets the new node, not the old one");
	sfs_itab_forget(&x.t, &x.c, old, 1, 1);
	CHECK(sfs_itab_find_id(&x.t, old_id) == NULL, "forgotten, the stale node is freed");
	CHECK(sfs_itab_find(&x.t, x.dev, ino) == cur && cur && lookups(cur, 1) == 1 &&
	      lookups(cur, 2) == 1, "the new node is untouched");
	teardown(&x);
}

/* A lookup by name (the handle, then the stat: ops/dir.c) enters the node without a
 * descriptor: the node a lookup through a descriptor finds, its lookups counted the same,
 * its descriptor opened by handle when a request first asks for one. A number used again
 * with another generation is another node, as through a descriptor. */
static void test_by_id(void)
{
	struct fixture x;
	struct sfs_node *a = NULL, *b, *c = NULL;
	struct stat st;
	uint64_t id = 0;
	int fd;

	setup(&x, 16);
	make(&x, "f");
	CHECK(sfs_node_id_at(x.dirfd, "f", 0, &id) == 0 &&
	      fstatat(x.dirfd, "f", &st, AT_SYMLINK_NOFOLLOW) == 0, "f's handle and stat, by name");
	CHECK(sfs_node_id_ino(id) == (uint32_t)st.st_ino, "the handle holds f's inode number");
	CHECK(sfs_itab_get_id(&x.t, id, &st, 1, &a) == 0 && a && a->id == id, "f entered by its id");
	if (!a) {
		teardown(&x);
		return;
	}
	CHECK(!sfs_fd_cached(&x.c, a), "entered by name, f's node holds no descriptor");
	if (can_open_handles) {
		fd = sfs_fd_get(&x.c, a);
		CHECK(fd >= 0 && sfs_fd_cached(&x.c, a), "its descriptor is opened by handle when asked");
		if (fd >= 0)
			sfs_fd_put(&x.c, a);
	}
	b = get(&x, "f", 2);
	CHECK(b == a && lookups(a, 1) == 1 && lookups(a, 2) == 1,
	      "a lookup through a descriptor finds the same node, each view counted apart");
	st.st_ino = a->ino;
	CHECK(sfs_itab_get_id(&x.t, id ^ (1ULL << 32), &st, 3, &c) == 0 && c && c != a &&
	      a->stale, "another generation under the same number is a new node; the old is stale");
	teardown(&x);
}

/* The hooks run once for each node: created as it enters the table, with the stat it was
 * made from, and freed as it leaves, by FORGET or by the table's end; a lookup of a node
 * the table has runs neither. */
static void test_hooks(void)
{
	struct fixture x;
	struct sfs_node *f, *d;

	setup(&x, 64);
	make(&x, "f");
	make_dir(&x, "d");
	f = get(&x, "f", 1);
	CHECK(nseen == 1 && seen[0].n == f, "the created hook ran for the new node");
	get(&x, "f", 2);
	get(&x, "f", SFS_PIN);
	CHECK(nseen == 1, "and not again for lookups and pins of it (%zu)", nseen);
	d = get(&x, "d", 1);
	CHECK(nseen == 2 && seen[1].n == d, "the created hook ran for the directory's node");
	sfs_itab_forget(&x.t, &x.c, f, 1, 1);
	sfs_itab_forget(&x.t, &x.c, f, 2, 1);
	CHECK(freed_count() == 0, "a pinned node is not freed");
	sfs_itab_unpin(&x.t, &x.c, f);
	CHECK(seen[0].freed == 1 && freed_count() == 1, "the freed hook ran as it left");
	CHECK(!stat_mismatch, "the created hook saw the stat the node was made from");
	CHECK(seen[1].freed == 0, "the directory's node is still in the table");
	teardown(&x); /* checks the directory's node is freed once by the table's end */
	CHECK(seen[1].freed == 1, "the table's end ran the freed hook for what it held");
}

/* The descriptor cache is bounded: with room for 16, 64 nodes looked up never hold more
 * than 16 descriptors; a node whose descriptor was let go is still the same node and is
 * reopened by its handle when needed; descriptors in use are never closed under their
 * users, and the excess goes as they are let go. When the nodes are
 * freed the process has the descriptors it had before. */
static void test_fdcache_bounded(void)
{
	enum { N = 64, LIMIT = 16 };
	struct fixture x;
	struct sfs_node *n[N] = {0}, *more[LIMIT] = {0}, *again;
	int fds[N], held = 0, same = 0;
	size_t before, most = 0, most_fds = 0;
	char name[32];

	setup(&x, LIMIT);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		make(&x, name);
	}
	before = open_fds();
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		n[i] = get(&x, name, 1);
		if (sfs_lru_count(&x.c.lru) > most)
			most = sfs_lru_count(&x.c.lru);
		if (open_fds() - before > most_fds)
			most_fds = open_fds() - before;
	}
	CHECK(most == LIMIT, "64 nodes looked up: at most %d descriptors cached at once (%zu)",
	      LIMIT, most);
	CHECK(most_fds <= LIMIT, "the process never held more than %d more descriptors (%zu)",
	      LIMIT, most_fds);
	CHECK(n[0] && !sfs_fd_cached(&x.c, n[0]) && n[N - 1] && sfs_fd_cached(&x.c, n[N - 1]),
	      "the least recently used were let go, the newest kept");
	CHECK(sfs_itab_count(&x.t) == N, "every node stays in the table (%zu)",
	      sfs_itab_count(&x.t));
	again = get(&x, "f0", 1);
	CHECK(again == n[0] && lookups(n[0], 1) == 2,
	      "a node whose descriptor was let go is the same node when looked up again");

	if (!can_open_handles) {
		printf("test_fdcache_bounded: reopening by handle skipped (no CAP_DAC_READ_SEARCH)\n");
	} else {
		for (int i = 0; i < N; i++) {
			struct stat st;
			fds[i] = n[i] ? sfs_fd_get(&x.c, n[i]) : -1;
			held += fds[i] >= 0;
			same += fds[i] >= 0 && fstat(fds[i], &st) == 0 && st.st_ino == n[i]->ino &&
			        st.st_dev == x.dev;
		}
		CHECK(held == N, "every node's descriptor had, the let go ones reopened by handle "
		      "(%d)", held);
		for (int i = 0; i < N; i++) {
			struct stat st;
			same += fds[i] >= 0 && fstat(fds[i], &st) == 0 && st.st_ino == n[i]->ino;
		}
		CHECK(same == 2 * N, "each is its node's object, and stays open while held, past "
		      "the bound (%d)", same);
		for (int i = 0; i < N; i++)
			if (fds[i] >= 0)
				sfs_fd_put(&x.c, n[i]);
		CHECK(sfs_lru_count(&x.c.lru) <= LIMIT, "let go, the cache is back under its "
		      "bound at once (%zu)", sfs_lru_count(&x.c.lru));
		for (int i = 0; i < LIMIT; i++) {
			snprintf(name, sizeof(name), "g%d", i);
			make(&x, name);
			more[i] = get(&x, name, 1);
		}
		CHECK(sfs_lru_count(&x.c.lru) <= LIMIT, "let go, and %d other nodes looked up: "
		      "at most %d cached again (%zu)", LIMIT, LIMIT, sfs_lru_count(&x.c.lru));
		for (int i = 0; i < LIMIT; i++)
			if (more[i])
				sfs_itab_forget(&x.t, &x.c, more[i], 1, 1);
	}
	for (int i = 0; i < N; i++)
		if (n[i])
			sfs_itab_forget(&x.t, &x.c, n[i], 1, i ? 1 : 2);
	CHECK(sfs_itab_count(&x.t) == 0, "all forgotten, the table is empty (%zu)",
	      sfs_itab_count(&x.t));
	CHECK(sfs_lru_count(&x.c.lru) == 0, "and the cache too (%zu)", sfs_lru_count(&x.c.lru));
	CHECK(open_fds() == before, "descriptors as before: %zu, %zu", before, open_fds());
	teardown(&x);
}

/* A node whose object was deleted while the cache held no descriptor of it cannot be
 * reopened: the cache says ESTALE, as the kernel is then told. */
static void test_gone(void)
{
	struct fixture x;
	struct sfs_node *n;
	size_t nodes;
	int fd;

	if (!can_open_handles) {
		printf("test_gone: skipped (no CAP_DAC_READ_SEARCH)\n");
		return;
	}
	setup(&x, 16);
	make(&x, "doomed");
	n = get(&x, "doomed", 1);
	if (!n) {
		teardown(&x);
		return;
	}
	push_out(&x, n, "p", 64);
	CHECK(!sfs_fd_cached(&x.c, n), "its descriptor let go");
	CHECK(unlinkat(x.dirfd, "doomed", 0) == 0, "the file deleted");
	fd = sfs_fd_get(&x.c, n);
	CHECK(fd == -ESTALE, "its descriptor cannot be had: ESTALE (%d)", fd);
	if (fd >= 0)
		sfs_fd_put(&x.c, n);
	nodes = sfs_itab_count(&x.t);
	sfs_itab_forget(&x.t, &x.c, n, 1, 1);
	CHECK(sfs_itab_count(&x.t) == nodes - 1, "forgotten, it goes like any node");
	teardown(&x);
}

/* A successor daemon reads the lookups its predecessor counted: a node it makes again (by
 * id, SFS_ADOPT) has them, and no more; a FORGET of an id it never made a node for drops
 * the predecessor's count. */
static void test_successor(void)
{
	struct fixture x;
	struct sfs_handover next;
	struct sfs_itab t2;
	struct sfs_fdcache c2;
	const struct sfs_itab_hooks none = {.fds = &sfs_fdcache_fds};
	struct sfs_node *f, *f2 = NULL;
	uint64_t fid, gid;
	char err[256] = "";
	struct stat st;
	int fd, rc;

	setup(&x, 64);
	make(&x, "f");
	make(&x, "g");
	fid = id_of(&x, "f");
	gid = id_of(&x, "g");
	f = get(&x, "f", 3);
	get(&x, "f", 3);
	get(&x, "f", 4);
	get(&x, "g", 3);
	if (f)
		sfs_itab_forget(&x.t, &x.c, f, 4, 1);
	sfs_ho_write_daemon(&x.ho);
	rc = sfs_ho_adopt(&next, dup(x.ho.fd), err, sizeof(err));
	CHECK(rc == 0, "a successor takes the state over (%s)", err);
	if (rc) {
		sfs_ho_close(&next);
		teardown(&x);
		return;
	}
	sfs_itab_init(&t2, &none);
	t2.ho = &next;
	sfs_fdcache_init(&c2, x.dirfd, 64);
	CHECK(sfs_itab_count(&t2) == 0, "its table starts empty");
	CHECK(sfs_itab_inherited(&t2, fid, 3), "view 3's kernel still knows f");
	CHECK(!sfs_itab_inherited(&t2, fid, 4), "view 4's forgot it");
	CHECK(!sfs_itab_inherited(&t2, fid, 5), "view 5's never had it");

	fd = openat(x.dirfd, "f", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	CHECK(fd >= 0 && fstat(fd, &st) == 0, "f opened");
	rc = fd < 0 ? -EBADF : sfs_itab_get(&t2, &c2, fd, &st, SFS_ADOPT, &f2);
	CHECK(rc == 0 && f2 && f2->id == fid, "the node made again by id");
	CHECK(rc == 0 && lookups(f2, 3) == 2 && f2->nlookup == 2 && f2->nrefs == 1,
	      "with view 3's two lookups, and nothing more");
	if (rc == 0) {
		sfs_itab_forget(&t2, &c2, f2, 3, 2);
		CHECK(sfs_itab_find_id(&t2, fid) == NULL, "view 3's FORGET of both frees it");
		CHECK(!sfs_itab_inherited(&t2, fid, 3), "and no count of it is left");
	}
	CHECK(sfs_itab_inherited(&t2, gid, 3), "view 3's kernel still knows g");
	sfs_itab_forget_id(&t2, &c2, gid, 3, 1);
	CHECK(!sfs_itab_inherited(&t2, gid, 3) && sfs_itab_count(&t2) == 0,
	      "a FORGET of g's id drops the count without a node made for it");
	sfs_itab_destroy(&t2, &c2);
	sfs_ho_close(&next);
	teardown(&x);
}

/* Whether the file handles of /tmp are ext4's (the node ids), and whether this process
 * may open by them. */
static int probe(void)
{
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC), again;
	uint64_t id;
	int rc;

	if (fd < 0)
		return -errno;
	rc = sfs_node_id_of(fd, &id);
	if (!rc) {
		again = sfs_node_id_open(id, fd, O_PATH | O_CLOEXEC);
		can_open_handles = again >= 0;
		if (again >= 0)
			close(again);
	}
	close(fd);
	return rc;
}

int main(void)
{
	int rc = probe();

	if (rc) {
		printf("skipped: /tmp has no ext4 file handles (%s)\n", strerror(-rc));
		return 77;
	}
	test_lookups_per_view();
	test_forget();
	test_drop_view();
	test_pins();
	test_stale();
	test_by_id();
	test_hooks();
	test_fdcache_bounded();
	test_gone();
	test_successor();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
