/* The one LRU list (lru.h): the order entries are used in, the oldest as they are touched
 * and removed, the count, and a walk from the oldest that removes what it passes. */
#include <string.h>

#include "check.h"
#include "lru.h"

enum { N = 8 };

struct item {
	struct sfs_list lru;
	int id;
};

static int oldest_id(const struct sfs_lru *l)
{
	struct sfs_list *e = sfs_lru_oldest(l);

	return e ? sfs_list_entry(e, struct item, lru)->id : -1;
}

/* The ids from the oldest to the newest, as digits: "0123" */
static const char *order(struct sfs_lru *l)
{
	static char buf[N + 1];
	struct sfs_list *pos, *tmp;
	size_t k = 0;

	sfs_lru_for_each_oldest_first(pos, tmp, l)
		buf[k++] = (char)('0' + sfs_list_entry(pos, struct item, lru)->id);
	buf[k] = '\0';
	return buf;
}

static void test_order(void)
{
	struct item it[N];
	struct sfs_lru l;

	sfs_lru_init(&l);
	CHECK(!sfs_lru_oldest(&l) && sfs_lru_count(&l) == 0, "empty: no oldest, none counted");
	for (int i = 0; i < N; i++) {
		it[i].id = i;
		sfs_lru_add(&l, &it[i].lru);
	}
	CHECK(sfs_lru_count(&l) == N, "%zu counted", sfs_lru_count(&l));
	CHECK(oldest_id(&l) == 0, "the first added is the oldest: %d", oldest_id(&l));
	CHECK(!strcmp(order(&l), "01234567"), "in the order added: %s", order(&l));

	sfs_lru_touch(&l, &it[0].lru);
	CHECK(oldest_id(&l) == 1, "touched, 0 is the newest: oldest %d", oldest_id(&l));
	sfs_lru_touch(&l, &it[4].lru);
	sfs_lru_touch(&l, &it[4].lru); /* already the newest */
	CHECK(!strcmp(order(&l), "12356704"), "after touching 0 then 4: %s", order(&l));

	sfs_lru_remove(&l, &it[1].lru);
	sfs_lru_remove(&l, &it[7].lru);
	CHECK(oldest_id(&l) == 2 && sfs_lru_count(&l) == N - 2, "removed 1 and 7: oldest %d",
	      oldest_id(&l));
	CHECK(!strcmp(order(&l), "235604"), "then: %s", order(&l));
	sfs_lru_add(&l, &it[1].lru);
	CHECK(!strcmp(order(&l), "2356041"), "added again, 1 is the newest: %s", order(&l));

	/* an eviction: from the oldest, skipping what is in use (here: even ids) */
	struct sfs_list *pos, *tmp;
	sfs_lru_for_each_oldest_first(pos, tmp, &l)
		if (sfs_list_entry(pos, struct item, lru)->id % 2)
			sfs_lru_remove(&l, pos);
	CHECK(!strcmp(order(&l), "2604") && sfs_lru_count(&l) == 4, "odd ids evicted: %s",
	      order(&l));
	while (sfs_lru_oldest(&l))
		sfs_lru_remove(&l, sfs_lru_oldest(&l));
	CHECK(sfs_lru_count(&l) == 0 && !strcmp(order(&l), ""), "emptied by its oldest");
}

int main(void)
{
	test_order();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
