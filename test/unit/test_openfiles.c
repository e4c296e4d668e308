/* Tests of the open-file table (openfiles.h) over records in plain memory, as the handover
 * state would hold them: slots handed out and back, what a slot the kernel names finds, the
 * records a successor reads, and a successor's table over its predecessor's records. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "openfiles.h"

#define CAP 8

struct memory {
	struct sfs_ho_file records[CAP];
	_Atomic uint32_t used;
};

static struct sfs_openfiles_mem mem_of(struct memory *m)
{
	return (struct sfs_openfiles_mem){.records = m->records, .used = &m->used, .cap = CAP};
}

static struct sfs_ho_file record(enum sfs_ho_kind kind, int fd)
{
	struct sfs_ho_file r = {.view = 2, .fd = fd, .node = 40 + fd, .dev = 1, .ino = 7};

	atomic_init(&r.live, kind);
	atomic_init(&r.twin, -1);
	return r;
}

/* Slots in order, then the freed ones again; none past the records there are. */
static void test_slots(void)
{
	struct memory *m = calloc(1, sizeof(*m));
	struct sfs_openfiles t;
	char obj;
	int s[CAP];

	CHECK(sfs_openfiles_init(&t, mem_of(m)) == 0, "a table");
	for (int i = 0; i < CAP; i++)
		s[i] = sfs_openfiles_alloc(&t, &obj);
	CHECK(s[0] == 0 && s[CAP - 1] == CAP - 1, "slots in order (%d..%d)", s[0], s[CAP - 1]);
	CHECK(atomic_load(&m->used) == CAP && sfs_openfiles_used(&t) == CAP,
	      "the high-water mark a successor reads follows");
	CHECK(sfs_openfiles_alloc(&t, &obj) == -EMFILE, "no slot past the records");
	sfs_openfiles_free(&t, s[3]);
	sfs_openfiles_free(&t, s[5]);
	CHECK(sfs_openfiles_alloc(&t, &obj) == s[5], "a freed slot is handed out again");
	CHECK(sfs_openfiles_alloc(&t, &obj) == s[3], "and the one before it");
	CHECK(atomic_load(&m->used) == CAP, "reusing slots moves no mark");
	sfs_openfiles_destroy(&t);
	free(m);
}

/* What a slot the kernel names finds: only a published object of the kind asked for. */
static void test_lookup(void)
{
	struct memory *m = calloc(1, sizeof(*m));
	struct sfs_ho_file file = record(SFS_HO_FILE, 10), dir = record(SFS_HO_DIR, 11), got;
	struct sfs_openfiles t;
	char f, d;
	int a, b, c;

	CHECK(sfs_openfiles_init(&t, mem_of(m)) == 0, "a table");
	a = sfs_openfiles_alloc(&t, &f);
	b = sfs_openfiles_alloc(&t, &d);
	c = sfs_openfiles_alloc(&t, &f);
	CHECK(sfs_openfiles_object(&t, a, SFS_HO_FILE) == NULL, "an unpublished slot names none");
	sfs_openfiles_publish(&t, a, &file);
	sfs_openfiles_publish(&t, b, &dir);
	CHECK(sfs_openfiles_object(&t, a, SFS_HO_FILE) == &f, "a published file names its object");
	CHECK(sfs_openfiles_object(&t, b, SFS_HO_DIR) == &d, "a directory too");
	CHECK(sfs_openfiles_object(&t, a, SFS_HO_DIR) == NULL, "nor as another kind");
	CHECK(sfs_openfiles_object(&t, b, SFS_HO_FILE) == NULL, "either way");
	CHECK(sfs_openfiles_object(&t, c, SFS_HO_FILE) == NULL, "a slot taken, not published");
	CHECK(sfs_openfiles_object(&t, CAP, SFS_HO_FILE) == NULL, "a slot past the records");
	CHECK(sfs_openfiles_object(&t, 1ULL << 40, SFS_HO_FILE) == NULL, "a slot far past them");
	CHECK(sfs_openfiles_record(&t, a, &got) && got.fd == 10 && got.node == 50,
	      "the record a successor reads");
	CHECK(!sfs_openfiles_record(&t, c, &got), "none for a slot not published");
	sfs_openfiles_set_twin(&t, a, 33);
	CHECK(sfs_openfiles_record(&t, a, &got) && atomic_load(&got.twin) == 33,
	      "a twin set in place keeps the record whole");
	m->records[a].node ^= 1; /* a torn or damaged record */
	CHECK(!sfs_openfiles_record(&t, a, &got), "a record that fails its check is not read");
	sfs_openfiles_free(&t, b);
	CHECK(sfs_openfiles_object(&t, b, SFS_HO_DIR) == NULL, "a freed slot names nothing");
	CHECK(!sfs_openfiles_record(&t, b, &got), "and has no record");
	sfs_openfiles_destroy(&t);
	free(m);
}

/* A RELEASE answered late: the slot stays reserved until its answer, and a RELEASE of a slot
 * that is not being released changes nothing. */
static void test_release(void)
{
	struct memory *m = calloc(1, sizeof(*m));
	struct sfs_ho_file file = record(SFS_HO_FILE, 12);
	struct sfs_openfiles t;
	char obj;
	int a, b;

	CHECK(sfs_openfiles_init(&t, mem_of(m)) == 0, "a table");
	a = sfs_openfiles_alloc(&t, &obj);
	b = sfs_openfiles_alloc(&t, &obj);
	sfs_openfiles_publish(&t, a, &file);
	sfs_openfiles_publish(&t, b, &file);
	sfs_openfiles_releasing(&t, a);
	CHECK(sfs_openfiles_object(&t, a, SFS_HO_FILE) == NULL, "a file being released names none");
	CHECK(atomic_load(&m->records[a].live) == SFS_HO_RELEASING, "its record says so");
	CHECK(sfs_openfiles_alloc(&t, &obj) == 2, "its slot is not handed out before the answer");
	sfs_openfiles_released(&t, b);
	CHECK(sfs_openfiles_object(&t, b, SFS_HO_FILE) == &obj, "a live file is not released so");
	sfs_openfiles_released(&t, 1ULL << 40);
	sfs_openfiles_released(&t, a);
	CHECK(sfs_openfiles_alloc(&t, &obj) == a, "the answer frees the slot");
	sfs_openfiles_destroy(&t);
	free(m);
}

/* A successor's table over its predecessor's records: it reads no further than the mark,
 * takes over what it adopts, and settles the rest. */
static void test_resume(void)
{
	struct memory *m = calloc(1, sizeof(*m));
	struct sfs_ho_file file = record(SFS_HO_FILE, 13), lock = record(SFS_HO_LOCK, 14), got;
	struct sfs_openfiles t, s;
	char obj, adopted;
	int a, b, c, d, n;

	CHECK(sfs_openfiles_init(&t, mem_of(m)) == 0, "a table");
	a = sfs_openfiles_alloc(&t, &obj); /* open, taken over */
	b = sfs_openfiles_alloc(&t, &obj); /* released, the answer not sent */
	c = sfs_openfiles_alloc(&t, &obj); /* freed */
	d = sfs_openfiles_alloc(&t, &obj); /* a lock owner's, not taken over */
	sfs_openfiles_publish(&t, a, &file);
	sfs_openfiles_publish(&t, b, &file);
	sfs_openfiles_publish(&t, d, &lock);
	sfs_openfiles_releasing(&t, b);
	sfs_openfiles_free(&t, c);
	sfs_openfiles_destroy(&t); /* the predecessor is gone; its records stay */

	CHECK(sfs_openfiles_resume(&s, mem_of(m)) == 0, "a successor's table");
	CHECK(sfs_openfiles_used(&s) == 4, "it reads as far as the predecessor wrote");
	CHECK(sfs_openfiles_record(&s, a, &got) && got.fd == 13, "an open file's record");
	CHECK(sfs_openfiles_record(&s, d, &got) && atomic_load(&got.live) == SFS_HO_LOCK,
	      "a lock owner's");
	CHECK(!sfs_openfiles_record(&s, b, &got) && !sfs_openfiles_record(&s, c, &got),
	      "none for a slot released or freed");
	sfs_openfiles_adopt(&s, a, &adopted);
	sfs_openfiles_settle(&s);
	CHECK(sfs_openfiles_object(&s, a, SFS_HO_FILE) == &adopted, "an adopted slot is served");
	CHECK(atomic_load(&m->records[d].live) == 0, "a record not taken over is cleared");
	n = sfs_openfiles_alloc(&s, &obj);
	CHECK(n == c || n == d, "the slots left are free (got %d)", n);
	n = sfs_openfiles_alloc(&s, &obj);
	CHECK(n == c || n == d, "both of them (got %d)", n);
	CHECK(sfs_openfiles_alloc(&s, &obj) == 4, "then new ones; the released one stays reserved");
	sfs_openfiles_released(&s, b);
	CHECK(sfs_openfiles_alloc(&s, &obj) == b, "until the RELEASE comes again");
	sfs_openfiles_destroy(&s);

	atomic_store(&m->used, 1000); /* a mark past the records, from a damaged state */
	CHECK(sfs_openfiles_resume(&s, mem_of(m)) == 0 && sfs_openfiles_used(&s) == CAP,
	      "is not read past them");
	sfs_openfiles_destroy(&s);
	free(m);
}

#define THREADS 4
#define ROUNDS 20000
#define BIG 64

struct race {
	struct sfs_openfiles *t;
	_Atomic int owner[BIG];
	atomic_int dup;
};

struct racer {
	struct race *r;
	int id;
};

/* Takes slots and gives them back, checking no other thread holds a slot it got. */
static void *racer(void *arg)
{
	struct racer *me = arg;
	struct race *r = me->r;

	for (int i = 0; i < ROUNDS; i++) {
		int slot = sfs_openfiles_alloc(r->t, me), free_ = 0;
		if (slot < 0)
			continue;
		if (!atomic_compare_exchange_strong(&r->owner[slot], &free_, me->id))
			atomic_fetch_add(&r->dup, 1);
		atomic_store(&r->owner[slot], 0);
		sfs_openfiles_free(r->t, slot);
	}
	return NULL;
}

static void test_threads(void)
{
	struct sfs_ho_file *records = calloc(BIG, sizeof(*records));
	_Atomic uint32_t used = 0;
	struct sfs_openfiles t;
	struct race *r = calloc(1, sizeof(*r));
	struct racer who[THREADS];
	pthread_t th[THREADS];

	CHECK(sfs_openfiles_init(&t, (struct sfs_openfiles_mem){records, &used, BIG}) == 0,
	      "a table");
	r->t = &t;
	for (int i = 0; i < THREADS; i++) {
		who[i] = (struct racer){r, i + 1};
		pthread_create(&th[i], NULL, racer, &who[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&r->dup) == 0, "no slot handed to two threads at once (%d)",
	      atomic_load(&r->dup));
	CHECK(atomic_load(&used) <= THREADS, "freed slots are reused (mark %u)", atomic_load(&used));
	sfs_openfiles_destroy(&t);
	free(r);
	free(records);
}

int main(void)
{
	test_slots();
	test_lookup();
	test_release();
	test_resume();
	test_threads();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
