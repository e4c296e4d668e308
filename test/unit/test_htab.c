/* The one hash table (htab.h): 100,000 entries whose hashes collide found and removed
 * exactly, growth from one bucket, sweeps that remove what they visit, every entry where the
 * hash it was inserted with says after each growth, and a growth that cannot allocate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hash.h"
#include "htab.h"

enum { N = 100000, HASHES = 1021 }; /* about 98 entries share each colliding hash */

struct item {
	struct sfs_hlink link;
	uint64_t key;
	unsigned visits;
};

/* A growth that cannot allocate asks for more than ASan will give; it must then say no, not
 * stop the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

static uint64_t colliding(uint64_t key) { return key % HASHES; }
static uint64_t spread(uint64_t key) { return sfs_hash_inode(0, key); }

static struct item *items(void)
{
	struct item *it = calloc(N, sizeof(*it));

	for (size_t i = 0; it && i < N; i++)
		it[i].key = 1000 + i * 7;
	return it;
}

/* How many entries of t hold key, looked for under hash(key). */
static size_t found(struct sfs_htab *t, uint64_t (*hash)(uint64_t), uint64_t key)
{
	uint64_t h = hash(key);
	struct sfs_hlink *pos;
	size_t n = 0;

	sfs_htab_for_each_match(pos, t, h)
		n += sfs_htab_entry(pos, struct item, link)->key == key;
	return n;
}

/* Every entry sits in the bucket its stored hash names, and no bucket is empty of reason. */
static size_t misplaced(const struct sfs_htab *t)
{
	size_t bad = 0, seen = 0;

	for (size_t i = 0; i <= t->mask; i++)
		for (const struct sfs_hlink *e = t->buckets[i]; e; e = e->next, seen++)
			bad += (e->hash & t->mask) != i;
	return bad + (seen != t->count);
}

static void test_collisions(void)
{
	struct item *it = items();
	struct sfs_htab t;
	size_t bad = 0, removed = 0;

	CHECK(it && sfs_htab_init(&t, 16) == 0, "setup");
	for (size_t i = 0; i < N; i++)
		sfs_htab_insert(&t, &it[i].link, colliding(it[i].key));
	CHECK(sfs_htab_count(&t) == N, "%zu entries counted, %d inserted", sfs_htab_count(&t), N);
	for (size_t i = 0; i < N; i++)
		bad += found(&t, colliding, it[i].key) != 1;
	CHECK(bad == 0, "%zu of %d colliding keys not found exactly once", bad, N);
	CHECK(found(&t, colliding, 999) == 0, "an absent key whose hash is taken is not found");

	for (size_t i = 0; i < N; i += 2)
		removed += sfs_htab_remove(&t, &it[i].link);
	CHECK(removed == N / 2, "%zu of %d removals found their entry", removed, N / 2);
	CHECK(!sfs_htab_remove(&t, &it[0].link), "a removed entry is not removed twice");
	bad = 0;
	for (size_t i = 0; i < N; i++)
		bad += found(&t, colliding, it[i].key) != (i % 2 ? 1u : 0u);
	CHECK(bad == 0, "%zu keys wrong after removing every other", bad);
	CHECK(sfs_htab_count(&t) == N / 2, "half left: %zu", sfs_htab_count(&t));
	CHECK(misplaced(&t) == 0, "every entry in its stored hash's bucket");
	sfs_htab_destroy(&t);
	CHECK(!sfs_htab_ready(&t) && sfs_htab_count(&t) == 0, "destroyed is empty");
	free(it);
}

/* From one bucket to one per entry: each doubling places every entry again. */
static void test_growth(void)
{
	struct item *it = items();
	struct sfs_htab t;
	size_t bad = 0, bad_place = 0;

	CHECK(it && sfs_htab_init(&t, 1) == 0 && t.mask == 0, "one bucket at first");
	for (size_t i = 0; i < N; i++) {
		sfs_htab_insert(&t, &it[i].link, spread(it[i].key));
		if ((i & (i + 1)) == 0) /* after each power of two: just grown, or about to */
			bad_place += misplaced(&t);
	}
	for (size_t i = 0; i < N; i++)
		bad += found(&t, spread, it[i].key) != 1;
	CHECK(bad == 0, "%zu keys lost to growth", bad);
	CHECK(bad_place == 0, "entries out of their bucket during growth: %zu", bad_place);
	CHECK(t.mask + 1 >= N && t.mask + 1 < 2 * (size_t)N && !(t.mask & (t.mask + 1)),
	      "a power of two of buckets, at most one entry each: %zu for %d", t.mask + 1, N);
	sfs_htab_destroy(&t);

	CHECK(sfs_htab_init(&t, 1000) == 0 && t.mask + 1 == 1024, "1000 rounds up to 1024");
	sfs_htab_destroy(&t);
	free(it);
}

/* A table holds no key: what places an entry is the hash it was inserted with. Entries are
 * inserted under hashes no function of their key gives (and whose high bits differ, so each
 * growth moves them), and found by exactly those; entries of one hash stay newest first. */
static void test_stored_hash(void)
{
	struct item *it = items();
	struct sfs_htab t;
	struct sfs_hlink *pos;
	size_t bad = 0, order_bad = 0;

	CHECK(it && sfs_htab_init(&t, 2) == 0, "setup");
	for (size_t i = 0; i < N; i++) /* pairs share a hash: i and i ^ 1 */
		sfs_htab_insert(&t, &it[i].link, ((uint64_t)(i / 2) << 40) ^ (i / 2) * 0x9E3779B9u);
	for (size_t i = 0; i < N; i += 2) {
		uint64_t h = ((uint64_t)(i / 2) << 40) ^ (i / 2) * 0x9E3779B9u;
		size_t k = 0;

		sfs_htab_for_each_match(pos, &t, h) {
			struct item *e = sfs_htab_entry(pos, struct item, link);
			order_bad += e != &it[k ? i : i + 1]; /* the newer, i + 1, first */
			k++;
		}
		bad += k != 2;
	}
	CHECK(bad == 0, "%zu hashes without their two entries after growth", bad);
	CHECK(order_bad == 0, "%zu entries out of newest-first order after growth", order_bad);
	CHECK(misplaced(&t) == 0, "every entry in its stored hash's bucket");

	/* shrinking places them by the same hashes */
	CHECK(sfs_htab_resize(&t, 64) == 0 && t.mask == 63, "resized down to 64");
	bad = 0;
	for (size_t i = 0; i < N; i++)
		bad += found(&t, colliding, it[i].key) != 0; /* another hash finds nothing */
	CHECK(bad == 0, "%zu entries found under a hash they were not inserted with", bad);
	CHECK(misplaced(&t) == 0 && sfs_htab_count(&t) == N, "all there after shrinking");
	sfs_htab_destroy(&t);
	free(it);
}

/* Sweeps that remove and free the entry they are on, and lookups that remove their matches. */
static void test_remove_while_iterating(void)
{
	struct item *it = items();
	struct sfs_htab t;
	struct sfs_hlink *pos, *tmp;
	size_t bad = 0, taken = 0;

	CHECK(it && sfs_htab_init(&t, 64) == 0, "setup");
	for (size_t i = 0; i < N; i++)
		sfs_htab_insert(&t, &it[i].link, colliding(it[i].key));
	sfs_htab_for_each_safe(pos, tmp, &t) {
		struct item *e = sfs_htab_entry(pos, struct item, link);
		e->visits++;
		if (e->key % 3 == 0) {
			sfs_htab_remove(&t, pos);
			memset(pos, 0xa5, sizeof(*pos)); /* as if freed: the sweep must not read it */
		}
	}
	for (size_t i = 0; i < N; i++)
		bad += it[i].visits != 1;
	CHECK(bad == 0, "%zu entries not visited exactly once by a sweep that removes", bad);
	for (size_t i = 0; i < N; i++)
		taken += it[i].key % 3 == 0;
	CHECK(sfs_htab_count(&t) == N - taken, "%zu left, %zu expected", sfs_htab_count(&t),
	      N - taken);

	/* every entry of one colliding hash, removed as the lookup meets it */
	uint64_t h = colliding(it[1].key);
	size_t before = sfs_htab_count(&t), gone = 0;
	sfs_htab_for_each_match_safe(pos, tmp, &t, h) {
		sfs_htab_remove(&t, pos);
		memset(pos, 0xa5, sizeof(*pos));
		gone++;
	}
	CHECK(gone > 1 && sfs_htab_count(&t) == before - gone, "a hash's %zu entries removed", gone);
	bad = 0;
	sfs_htab_for_each_match(pos, &t, h)
		bad++;
	CHECK(bad == 0, "%zu entries left under the emptied hash", bad);

	sfs_htab_for_each_safe(pos, tmp, &t)
		sfs_htab_remove(&t, pos);
	CHECK(sfs_htab_count(&t) == 0 && !sfs_htab_first(&t), "a sweep empties the table");
	sfs_htab_destroy(&t);
	CHECK(!sfs_htab_first(&t), "a destroyed table has nothing to sweep");
	free(it);
}

/* Growth that cannot allocate (resize is what insert grows by): the old buckets stay, and
 * inserts go on into longer chains. */
static void test_growth_fails(void)
{
	struct item *it = items();
	struct sfs_htab t;
	struct sfs_hlink **was;
	size_t bad = 0;

	CHECK(it && sfs_htab_init(&t, 8) == 0, "setup");
	for (size_t i = 0; i < N / 2; i++)
		sfs_htab_insert(&t, &it[i].link, spread(it[i].key));
	was = t.buckets;
	size_t mask = t.mask;
	CHECK(sfs_htab_resize(&t, (size_t)1 << 58) == -ENOMEM, "2^58 buckets cannot be had");
	CHECK(t.buckets == was && t.mask == mask && sfs_htab_count(&t) == N / 2,
	      "the table as it was");
	CHECK(sfs_htab_resize(&t, SIZE_MAX) == -ENOMEM, "nor more than a size_t counts");
	for (size_t i = N / 2; i < N; i++)
		sfs_htab_insert(&t, &it[i].link, spread(it[i].key));
	for (size_t i = 0; i < N; i++)
		bad += found(&t, spread, it[i].key) != 1;
	CHECK(bad == 0 && misplaced(&t) == 0, "%zu keys lost after a failed growth", bad);
	sfs_htab_destroy(&t);
	free(it);
}

int main(void)
{
	test_collisions();
	test_growth();
	test_stored_hash();
	test_remove_while_iterating();
	test_growth_fails();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
