/* The quota scans' set of inode numbers (inoset.h): every number found again after the set
 * has grown many times, whatever the numbers look like. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "inoset.h"

enum { N = 20000 }; /* 1024 buckets at first: grows five times */

static uint64_t sequential(size_t i) { return 12 + i; }          /* a fresh ext4 */
static uint64_t by_group(size_t i) { return 1 + i * 8192; }      /* one per block group */
static uint64_t high(size_t i) { return 0xfffff000u + i * 3; }   /* past 32 bits */

static uint64_t scattered(size_t i)
{
	uint64_t x = (i + 1) * 0x2545f4914f6cdd1dull;
	return x ^ (x >> 29); /* one to one, and 0 only for x = 0 */
}

static const struct {
	const char *name;
	uint64_t (*ino)(size_t i);
} patterns[] = {
	{"sequential", sequential}, {"one per group", by_group}, {"past 32 bits", high},
	{"scattered", scattered},
};

/* Each number is new once; a number added before (the one at i / 2, added before the last
 * growth for most i) is found at once, and the count does not move. */
static void test_pattern(const char *name, uint64_t (*ino)(size_t i))
{
	struct sfs_inoset s = {0};
	size_t bad_new = 0, bad_again = 0, bad_has = 0;

	for (size_t i = 0; i < N; i++) {
		bad_new += sfs_inoset_add(&s, ino(i)) != 1;
		bad_again += sfs_inoset_add(&s, ino(i / 2)) != 0;
	}
	for (size_t i = 0; i < N; i++) {
		bad_again += sfs_inoset_add(&s, ino(i)) != 0;
		bad_has += !sfs_inoset_has(&s, ino(i));
	}
	CHECK(bad_new == 0, "%s: %zu of %d numbers not new at their first add", name, bad_new, N);
	CHECK(bad_again == 0, "%s: %zu numbers added again after the set grew", name, bad_again);
	CHECK(bad_has == 0, "%s: %zu numbers not found", name, bad_has);
	CHECK(s.n == N, "%s: %zu numbers held, %d added", name, s.n, N);
	CHECK(s.tab.mask + 1 >= s.n, "%s: at most one number a bucket (%zu in %zu)", name, s.n,
	      s.tab.mask + 1);
	sfs_inoset_free(&s);
}

static void test_edges(void)
{
	struct sfs_inoset s = {0};

	CHECK(!sfs_inoset_has(&s, 12), "an empty set holds nothing");
	CHECK(!sfs_inoset_has(&s, 0), "not even 0");
	CHECK(sfs_inoset_add(&s, 0) == 1 && sfs_inoset_add(&s, 0) == 0, "0 is a number like any");
	CHECK(sfs_inoset_has(&s, 0) && !sfs_inoset_has(&s, 12), "0 is held, 12 not");
	CHECK(sfs_inoset_add(&s, UINT64_MAX) == 1 && sfs_inoset_has(&s, UINT64_MAX), "the largest");
	CHECK(s.n == 2, "two held, got %zu", s.n);
	sfs_inoset_free(&s);
	CHECK(s.n == 0 && !s.blocks && !sfs_htab_ready(&s.tab) && !sfs_inoset_has(&s, 0),
	      "freed is empty");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++)
		test_pattern(patterns[i].name, patterns[i].ino);
	test_edges();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
