/* Tests of the bounded cache of fold indexes (foldcache.h): insert and lookup, the stamp that
 * refuses an index built across a change, the notes that keep an index exact, eviction from
 * the cold end under the byte budget, pins, and a threaded run that checks the cache never
 * keeps a stale index. No kernel: the directories are (dev, ino) pairs and their names. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "foldcache.h"

/* The directory change locks every cache below follows. */
static struct sfs_dirlock locks;

#define S(s) s, sizeof(s) - 1
#define ADD(idx, name) sfs_foldidx_add(idx, name, strlen(name))

static struct sfs_foldidx *mk_idx(int n, const char *prefix)
{
	struct sfs_foldidx *idx;
	char name[64];
	int i;

	if (sfs_foldidx_new(&idx, 0))
		return NULL;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		ADD(idx, name);
	}
	return idx;
}

static struct sfs_folddir *insert(struct sfs_foldcache *c, uint64_t ino, int n)
{
	struct sfs_folddir *d = NULL;
	int rc = sfs_foldcache_insert(c, 7, ino, sfs_foldcache_stamp(c, 7, ino), mk_idx(n, "n"), &d);

	CHECK(rc == 0 && d, "insert %llu: %d", (unsigned long long)ino, rc);
	return d;
}

static bool cached(struct sfs_foldcache *c, uint64_t ino)
{
	struct sfs_folddir *d = sfs_foldcache_get(c, 7, ino);

	if (d)
		sfs_foldcache_put(c, d);
	return d != NULL;
}

static size_t unit_bytes(void)
{
	struct sfs_foldcache_stats st;
	struct sfs_foldcache *c;

	sfs_foldcache_new(&c, (size_t)-1, &locks);
	sfs_foldcache_put(c, insert(c, 1, 20));
	sfs_foldcache_stats(c, &st);
	sfs_foldcache_free(c);
	return st.bytes;
}

static void test_cache_budget(void)
{
	size_t unit = unit_bytes();
	struct sfs_foldcache_stats st;
	struct sfs_foldcache *c;
	struct sfs_folddir *d, *pinned;

	CHECK(sfs_foldcache_new(&c, unit * 3 + unit / 2, &locks) == 0, "new");
	sfs_foldcache_put(c, insert(c, 1, 20));
	sfs_foldcache_put(c, insert(c, 2, 20));
	sfs_foldcache_put(c, insert(c, 3, 20));
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 3 && st.bytes == 3 * unit && st.names == 60, "three cached: %zu dirs %zu bytes",
	      st.dirs, st.bytes);
	sfs_foldcache_put(c, insert(c, 4, 20));
	CHECK(!cached(c, 1) && cached(c, 2), "the coldest went first");
	CHECK(cached(c, 2), "touch 2");
	sfs_foldcache_put(c, insert(c, 5, 20));
	CHECK(!cached(c, 3) && cached(c, 2) && cached(c, 4) && cached(c, 5), "LRU order");

	sfs_foldcache_stats(c, &st);
	CHECK(st.evictions == 2 && st.dirs == 3, "%llu evictions", (unsigned long long)st.evictions);
	sfs_foldcache_free(c);

	/* A pinned index at the cold end is passed over. */
	CHECK(sfs_foldcache_new(&c, unit * 3 + unit / 2, &locks) == 0, "new");
	pinned = insert(c, 1, 20);
	sfs_foldcache_put(c, insert(c, 2, 20));
	sfs_foldcache_put(c, insert(c, 3, 20));
	sfs_foldcache_put(c, insert(c, 4, 20));
	sfs_foldcache_put(c, insert(c, 5, 20));
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 3 && st.evictions == 2, "%zu dirs", st.dirs);
	sfs_foldcache_put(c, pinned);
	d = sfs_foldcache_get(c, 7, 1);
	CHECK(d == pinned, "pinned 1 kept");
	if (d)
		sfs_foldcache_put(c, d);
	CHECK(!cached(c, 2) && !cached(c, 3) && cached(c, 4) && cached(c, 5), "others went");
	sfs_foldcache_stats(c, &st);
	CHECK(st.bytes <= st.budget, "within budget");

	/* An index larger than the budget is handed out once, then dropped. */
	d = insert(c, 9, 2000);
	CHECK(d && sfs_foldidx_listed(sfs_folddir_rdlock(d), "n1999", 5), "huge index usable");
	sfs_folddir_unlock(d);
	sfs_foldcache_stats(c, &st);
	CHECK(st.bytes > st.budget && st.dirs == 1, "only the huge one left while pinned");
	sfs_foldcache_put(c, d);
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 0 && st.bytes == 0 && st.names == 0, "dropped at put: %zu dirs", st.dirs);
	sfs_foldcache_free(c);
}

static void test_cache_protocol(void)
{
	struct sfs_foldcache_stats st;
	struct sfs_foldidx_hit hit;
	struct sfs_foldcache *c;
	struct sfs_folddir *d, *d2;
	struct sfs_foldidx_stats is;
	uint64_t stamp;

	CHECK(sfs_foldcache_new(&c, 1 << 20, &locks) == 0, "new");
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("x"), &hit) == -ENODATA, "not cached");

	/* a change between stamp and insert refuses the index */
	stamp = sfs_foldcache_stamp(c, 7, 1);
	sfs_dirlock_lock(&locks, 7, 1);
	sfs_dirlock_unlock(&locks, 7, 1);
	CHECK(sfs_foldcache_insert(c, 7, 1, stamp, mk_idx(3, "n"), &d) == -EAGAIN, "stale stamp");
	stamp = sfs_foldcache_stamp(c, 7, 1);
	sfs_foldcache_forget(c, 7, 1);
	CHECK(sfs_foldcache_insert(c, 7, 1, stamp, mk_idx(3, "n"), &d) == -EAGAIN, "forgotten");

	/* a builder holding the change lock may insert (the lock is re-entrant) */
	sfs_dirlock_lock(&locks, 7, 1);
	stamp = sfs_foldcache_stamp(c, 7, 1);
	CHECK(sfs_foldcache_insert(c, 7, 1, stamp, mk_idx(3, "n"), &d) == 0, "insert under lock");
	sfs_dirlock_unlock(&locks, 7, 1);
	sfs_foldcache_put(c, d);

	/* the first insert wins */
	CHECK(sfs_foldcache_insert(c, 7, 1, sfs_foldcache_stamp(c, 7, 1), mk_idx(50, "z"), &d2) == 0 &&
	      d2 == d, "second insert returns the first");
	sfs_foldidx_stats(sfs_folddir_rdlock(d2), &is);
	sfs_folddir_unlock(d2);
	CHECK(is.names == 3, "the first index kept: %zu names", is.names);
	sfs_foldcache_put(c, d2);

	/* notes */
	sfs_dirlock_lock(&locks, 7, 1);
	CHECK(sfs_foldcache_note_add(c, 7, 1, S("Foo")) == 0, "note add");
	CHECK(sfs_foldcache_note_add(c, 7, 1, S("Foo")) == 0, "note add twice");
	CHECK(sfs_foldcache_note_add(c, 7, 1, S("FOO")) == 0, "note a collision");
	sfs_dirlock_unlock(&locks, 7, 1);
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("foo"), &hit) == 0 && !strcmp(hit.name, "FOO") &&
	      hit.collided, "lookup after notes: %s", hit.name);
	sfs_foldcache_stats(c, &st);
	CHECK(st.names == 5 && st.collisions == 1, "counted: %zu names %zu collisions", st.names,
	      st.collisions);
	CHECK(sfs_foldcache_note_remove(c, 7, 1, S("FOO")) == 0 &&
	      sfs_foldcache_note_remove(c, 7, 1, S("FOO")) == 0, "note remove twice");
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("foo"), &hit) == 0 && !strcmp(hit.name, "Foo"),
	      "head follows");
	CHECK(sfs_foldcache_note_rename(c, 7, 1, S("Foo"), 7, 1, S("bar")) == 0, "rename");
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("FOO"), &hit) == -ENOENT &&
	      sfs_foldcache_lookup(c, 7, 1, S("BAR"), &hit) == 0 && !strcmp(hit.name, "bar"),
	      "renamed");
	CHECK(sfs_foldcache_note_rename(c, 7, 1, S("ghost"), 7, 1, S("baz")) == 0 &&
	      sfs_foldcache_lookup(c, 7, 1, S("BAZ"), &hit) == 0, "rename of an unseen name adds");
	CHECK(sfs_foldcache_note_add(c, 7, 1, S("a/b")) == -EINVAL, "bad name");
	CHECK(sfs_foldcache_note_add(c, 7, 99, S("x")) == 0, "uncached directory");
	CHECK(!cached(c, 99), "stays uncached");

	/* across directories: 1 -> 2 (cached) and 1 -> 3 (not cached) */
	sfs_foldcache_put(c, insert(c, 2, 0));
	sfs_dirlock_lock2(&locks, 7, 1, 7, 2);
	CHECK(sfs_foldcache_note_rename(c, 7, 1, S("bar"), 7, 2, S("Bar")) == 0, "cross rename");
	sfs_dirlock_unlock2(&locks, 7, 1, 7, 2);
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("bar"), &hit) == -ENOENT &&
	      sfs_foldcache_lookup(c, 7, 2, S("BAR"), &hit) == 0 && !strcmp(hit.name, "Bar"),
	      "moved between directories");
	CHECK(sfs_foldcache_note_rename(c, 7, 1, S("baz"), 7, 3, S("baz")) == 0 &&
	      sfs_foldcache_lookup(c, 7, 1, S("baz"), &hit) == -ENOENT, "moved out");

	/* forget while pinned: gone from the cache, usable until put */
	d = sfs_foldcache_get(c, 7, 2);
	sfs_foldcache_forget(c, 7, 2);
	CHECK(!cached(c, 2), "forgotten");
	CHECK(sfs_foldidx_lookup(sfs_folddir_rdlock(d), S("bar"), &hit) == 0, "still readable");
	sfs_folddir_unlock(d);
	CHECK(sfs_foldcache_note_add(c, 7, 2, S("q")) == 0, "note on a forgotten directory");
	sfs_foldcache_put(c, d);
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 1 && st.hits > 0 && st.misses > 0, "%zu dirs", st.dirs);
	sfs_foldcache_free(c);
}

/* Threads change directories (under change locks), build, look up, forget and evict at once;
 * afterwards every cached index must equal the truth. */
enum { T_DIRS = 16, T_NAMES = 48, T_THREADS = 6, T_ITERS = 20000 };

struct world {
	struct sfs_foldcache *c;
	atomic_bool exists[T_DIRS][T_NAMES];
	atomic_int bad;
};

static void t_name(int n, char *buf, size_t len)
{
	snprintf(buf, len, "%s%d", n & 1 ? "NAME" : "name", n / 2); /* pairs collide */
}

static void t_build(struct world *w, int dir)
{
	uint64_t stamp = sfs_foldcache_stamp(w->c, 1, (uint64_t)dir);
	struct sfs_foldidx *idx;
	struct sfs_folddir *d;
	char name[32];
	int n;

	if (sfs_foldidx_new(&idx, 0))
		return;
	for (n = 0; n < T_NAMES; n++) {
		if (n % 8 == 0)
			sched_yield(); /* a real readdir blocks: let changes land mid-read */
		if (atomic_load(&w->exists[dir][n])) {
			t_name(n, name, sizeof(name));
			ADD(idx, name);
		}
	}
	if (!sfs_foldcache_insert(w->c, 1, (uint64_t)dir, stamp, idx, &d))
		sfs_foldcache_put(w->c, d);
}

static void t_change(struct world *w, int dir, int n)
{
	char name[32];
	bool was;

	t_name(n, name, sizeof(name));
	sfs_dirlock_lock(&locks, 1, (uint64_t)dir);
	was = atomic_load(&w->exists[dir][n]);
	atomic_store(&w->exists[dir][n], !was);
	if (was)
		sfs_foldcache_note_remove(w->c, 1, (uint64_t)dir, name, strlen(name));
	else
		sfs_foldcache_note_add(w->c, 1, (uint64_t)dir, name, strlen(name));
	sfs_dirlock_unlock(&locks, 1, (uint64_t)dir);
}

static void *t_run(void *arg)
{
	struct world *w = arg;
	struct sfs_foldidx_hit hit;
	unsigned seed = (unsigned)(uintptr_t)&hit;
	char name[32];
	int i, dir, n, r;

	for (i = 0; i < T_ITERS; i++) {
		r = rand_r(&seed);
		dir = r % T_DIRS;
		n = (r / T_DIRS) % T_NAMES;
		switch ((r / (T_DIRS * T_NAMES)) % 8) {
		case 0: case 1: case 2:
			t_change(w, dir, n);
			break;
		case 7:
			if (r % 64 == 0)
				sfs_foldcache_forget(w->c, 1, (uint64_t)dir);
			break;
		default:
			t_name(n, name, sizeof(name));
			if (sfs_foldcache_lookup(w->c, 1, (uint64_t)dir, name, strlen(name), &hit) ==
			    -ENODATA)
				t_build(w, dir);
		}
	}
	return NULL;
}

static void test_cache_threads(void)
{
	static struct world w;
	pthread_t t[T_THREADS];
	struct sfs_foldcache_stats st;
	struct sfs_foldidx_hit hit;
	struct sfs_folddir *d;
	char name[32];
	int i, dir, n, stale = 0, seen = 0;
	bool in;

	/* room for about half the directories, so eviction runs too */
	CHECK(sfs_foldcache_new(&w.c, T_DIRS / 2 * unit_bytes() * 2, &locks) == 0, "new");
	for (i = 0; i < T_THREADS; i++)
		pthread_create(&t[i], NULL, t_run, &w);
	for (i = 0; i < T_THREADS; i++)
		pthread_join(t[i], NULL);
	for (dir = 0; dir < T_DIRS; dir++) {
		d = sfs_foldcache_get(w.c, 1, (uint64_t)dir);
		if (!d)
			continue;
		seen++;
		for (n = 0; n < T_NAMES; n++) {
			t_name(n, name, sizeof(name));
			in = !sfs_foldidx_lookup(sfs_folddir_rdlock(d), name, strlen(name), &hit) &&
			     hit.exact;
			sfs_folddir_unlock(d);
			stale += in != atomic_load(&w.exists[dir][n]);
		}
		sfs_foldcache_put(w.c, d);
	}
	sfs_foldcache_stats(w.c, &st);
	CHECK(stale == 0, "%d stale names in %d cached directories", stale, seen);
	CHECK(seen > 0 && st.evictions > 0, "%d cached, %llu evictions", seen,
	      (unsigned long long)st.evictions);
	sfs_foldcache_free(w.c);
}

/* Notes that grow a cached index count against the budget: each note's put evicts from the
 * cold end, passing over the grown index while it is pinned, which goes at its own put once
 * it alone is over the budget. */
static void test_cache_growth(void)
{
	size_t unit = unit_bytes();
	struct sfs_foldcache_stats st;
	struct sfs_foldcache *c;
	struct sfs_folddir *d;
	char name[32];

	CHECK(sfs_foldcache_new(&c, unit * 3 + unit / 2, &locks) == 0, "new");
	sfs_foldcache_put(c, insert(c, 1, 20));
	sfs_foldcache_put(c, insert(c, 2, 20));
	d = insert(c, 3, 20);
	sfs_dirlock_lock(&locks, 7, 3);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "grown%d", i);
		CHECK(sfs_foldcache_note_add(c, 7, 3, name, strlen(name)) == 0, "note %s", name);
	}
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 3 && st.names == 70 && st.bytes <= st.budget,
	      "a few notes fit: %zu dirs %zu names %zu bytes", st.dirs, st.names, st.bytes);
	for (int i = 10; i < 200; i++) {
		snprintf(name, sizeof(name), "grown%d", i);
		CHECK(sfs_foldcache_note_add(c, 7, 3, name, strlen(name)) == 0, "note %s", name);
	}
	sfs_dirlock_unlock(&locks, 7, 3);
	sfs_foldcache_stats(c, &st);
	CHECK(!cached(c, 1) && !cached(c, 2), "more evicted the cold ones");
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 1 && st.names == 220 && st.bytes > st.budget && st.evictions == 2,
	      "the pinned one stays, counted: %zu names %zu bytes", st.names, st.bytes);
	sfs_foldcache_put(c, d);
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 0 && st.bytes == 0 && st.names == 0 && st.evictions == 3,
	      "and goes at its put: %zu dirs %zu bytes", st.dirs, st.bytes);
	sfs_foldcache_put(c, insert(c, 4, 20));
	CHECK(cached(c, 4), "the cache serves on");
	sfs_foldcache_free(c);
}

/* Pins count: a directory pinned twice and forgotten stays readable until its last put. */
static void test_cache_pins(void)
{
	struct sfs_foldcache_stats st;
	struct sfs_foldidx_hit hit;
	struct sfs_foldcache *c;
	struct sfs_folddir *a, *b;

	CHECK(sfs_foldcache_new(&c, 1 << 20, &locks) == 0, "new");
	a = insert(c, 1, 5);
	b = sfs_foldcache_get(c, 7, 1);
	CHECK(a && a == b, "a second pin of the same index");
	CHECK(sfs_foldcache_lookup(c, 7, 1, S("N3"), &hit) == 0 && !strcmp(hit.name, "n3") &&
	      !hit.exact, "a lookup through the cache finds another spelling");
	CHECK(sfs_foldcache_lookup(c, 7, 2, S("n3"), &hit) == -ENODATA, "not another directory's");
	sfs_foldcache_forget(c, 7, 1);
	sfs_foldcache_put(c, a);
	CHECK(sfs_foldidx_lookup(sfs_folddir_rdlock(b), S("n4"), &hit) == 0,
	      "readable after one put of two");
	sfs_folddir_unlock(b);
	sfs_foldcache_put(c, b); /* the last: freed (the sanitizers see a leak or a double free) */
	sfs_foldcache_stats(c, &st);
	CHECK(st.dirs == 0 && st.bytes == 0 && st.names == 0, "nothing left counted");
	CHECK(st.hits == 2 && st.misses == 1, "%llu hits, %llu misses",
	      (unsigned long long)st.hits, (unsigned long long)st.misses);
	sfs_foldcache_free(c);
}

int main(void)
{
	sfs_dirlock_init(&locks);
	test_cache_budget();
	test_cache_protocol();
	test_cache_growth();
	test_cache_pins();
	test_cache_threads();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
