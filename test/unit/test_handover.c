/* Tests of the state a successor takes over (handover.h): what a second process mapping the
 * same memfd reads back, and what it refuses. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "handover.h"

/* The open-file table over a state (openfiles.h), as the daemon makes it: over new records,
 * or over a predecessor's. */
static void files_over(struct sfs_handover *h, struct sfs_openfiles *t)
{
	struct sfs_openfiles_mem mem = sfs_ho_files_memory(h);

	sfs_openfiles_destroy(t);
	if (h->resumed ? sfs_openfiles_resume(t, mem) : sfs_openfiles_init(t, mem)) {
		printf("FAIL the open-file table: out of memory\n");
		exit(1);
	}
}

/* A successor's view of the state: the same memfd, mapped again. */
static void reopen(struct sfs_handover *h, struct sfs_handover *succ)
{
	char err[256] = "";
	int fd = dup(h->fd);

	sfs_ho_close(succ); /* the previous reopen's */
	if (sfs_ho_adopt(succ, fd, err, sizeof(err))) {
		printf("FAIL adopt: %s\n", err);
		exit(1);
	}
}

static void test_records(void)
{
	struct sfs_handover h, s = {0};
	struct sfs_ho_view v = {.slot = 7, .fuse_fd = 42, .init_len = 3, .uring_fd = -1};
	struct sfs_ho_view out;
	unsigned char *copy;
	char err[256];

	CHECK(sfs_ho_create(&h) == 0, "create");
	strcpy(h.daemon.key, "b-7-0");
	h.daemon.listen_fd = 5;
	sfs_ho_write_daemon(&h);
	v.opts_size = sizeof(v.opts);
	strcpy(v.mountpoint, "/srv/a");
	sfs_ho_write_view(&h, &v);
	strcpy(v.mountpoint, "/srv/b");
	sfs_ho_write_view(&h, &v); /* the newer copy */
	reopen(&h, &s);
	CHECK(!strcmp(s.daemon.key, "b-7-0") && s.daemon.listen_fd == 5, "the daemon's record");
	CHECK(s.resumed, "a successor knows it is one");
	CHECK(sfs_ho_read_view(&s, 7, &out) && !strcmp(out.mountpoint, "/srv/b") && out.fuse_fd == 42,
	      "the view's newer record");
	CHECK(!sfs_ho_read_view(&s, 6, &out), "no record for another slot");

	/* a write torn in the middle leaves the older copy */
	copy = h.map;
	for (size_t off = 4096; off < (1u << 24); off += 8) {
		/* find the view's copy holding "/srv/b" and damage it */
		if (!memcmp(copy + off, "/srv/b", 6)) {
			copy[off + 5] = 'x';
			break;
		}
	}
	reopen(&h, &s);
	CHECK(sfs_ho_read_view(&s, 7, &out) && !strcmp(out.mountpoint, "/srv/a"),
	      "a damaged copy is not trusted: the older one is read (got %s)", out.mountpoint);

	sfs_ho_drop_view(&h, 7);
	reopen(&h, &s);
	CHECK(!sfs_ho_read_view(&s, 7, &out), "a dropped view has no record");

	/* a state of another layout is refused, with why */
	memset(h.map + 8, 0xff, 4); /* the version */
	sfs_ho_close(&s);
	CHECK(sfs_ho_adopt(&s, dup(h.fd), err, sizeof(err)) == -EINVAL, "another layout refused");
	CHECK(strstr(err, "this binary reads version") != NULL, "and says why: %s", err);
	sfs_ho_close(&s);
	sfs_ho_close(&h);
}

static void test_lookups(void)
{
	struct sfs_handover h, s = {0};
	struct sfs_ho_ref refs[8];
	const int n = 50000;

	CHECK(sfs_ho_create(&h) == 0, "create");
	sfs_ho_write_daemon(&h);
	for (int i = 1; i <= n; i++)
		sfs_ho_ref_set(&h, (uint64_t)i << 32 | (uint64_t)i * 7, i % 3, i);
	sfs_ho_ref_set(&h, 1ULL << 32 | 7, 9, 5); /* a second view of one id */
	for (int i = 1; i <= n; i += 2)
		sfs_ho_ref_set(&h, (uint64_t)i << 32 | (uint64_t)i * 7, i % 3, 0); /* forgotten */
	reopen(&h, &s);
	CHECK(sfs_ho_ref_get(&s, 2ULL << 32 | 14, 2) == 2, "a count read back after the table grew");
	CHECK(sfs_ho_ref_get(&s, 3ULL << 32 | 21, 0) == 0, "a forgotten one is gone");
	CHECK(sfs_ho_refs_of(&s, 1ULL << 32 | 7, refs, 8) == 1 && refs[0].view == 9 &&
	      refs[0].count == 5, "every view's count of an id");
	sfs_ho_refs_drop_view(&s, 2);
	CHECK(sfs_ho_ref_get(&s, 2ULL << 32 | 14, 2) == 0, "a view that ended has no counts");
	CHECK(sfs_ho_ref_get(&s, 4ULL << 32 | 28, 1) == 4, "the others keep theirs");
	sfs_ho_close(&s);
	sfs_ho_close(&h);
}

/* A file released as the daemon dies, the answer not sent: the kernel sends the RELEASE
 * again, so its slot must not name another file by then. */
static void test_release_in_flight(void)
{
	struct sfs_handover h, s = {0};
	struct sfs_openfiles ht = {0}, st = {0};
	struct sfs_ho_file rec = {.view = 1, .fd = 20, .node = 5, .dev = 1, .ino = 3}, got;
	int a, b, c;
	char obj;

	CHECK(sfs_ho_create(&h) == 0, "create");
	files_over(&h, &ht);
	sfs_ho_write_daemon(&h);
	atomic_init(&rec.live, SFS_HO_FILE);
	atomic_init(&rec.twin, -1);
	a = sfs_openfiles_alloc(&ht, &obj);
	sfs_openfiles_publish(&ht, a, &rec);
	b = sfs_openfiles_alloc(&ht, &obj);
	sfs_openfiles_publish(&ht, b, &rec);
	sfs_openfiles_releasing(&ht, a);
	CHECK(sfs_openfiles_object(&ht, a, SFS_HO_FILE) == NULL, "a file being released names none");
	CHECK(sfs_openfiles_alloc(&ht, &obj) != a, "its slot is not handed out before the answer");
	reopen(&h, &s);
	files_over(&s, &st);
	CHECK(!sfs_openfiles_record(&st, a, &got), "a successor does not take it over");
	sfs_openfiles_adopt(&st, b, &obj);
	sfs_openfiles_settle(&st);
	c = sfs_openfiles_alloc(&st, &obj);
	CHECK(c != a && c != b, "nor hands its slot out");
	sfs_openfiles_released(&st, a);
	CHECK(sfs_openfiles_alloc(&st, &obj) == a, "until the RELEASE comes again");
	sfs_openfiles_destroy(&st);
	sfs_openfiles_destroy(&ht);
	sfs_ho_close(&s);
	sfs_ho_close(&h);
}

static void test_files_and_intents(void)
{
	struct sfs_handover h, s = {0}, s2 = {0};
	struct sfs_openfiles ht = {0}, st = {0};
	struct sfs_ho_file rec = {.view = 3, .fd = 17, .node = 99, .dev = 1, .ino = 2}, got;
	struct sfs_ho_intent in = {.view = 3, .unique = 1234, .op = SFS_HO_MAKE}, found;
	int a, b, slot, busy, freed;
	char obj;

	CHECK(sfs_ho_create(&h) == 0, "create");
	files_over(&h, &ht);
	sfs_ho_write_daemon(&h);
	a = sfs_openfiles_alloc(&ht, &obj);
	b = sfs_openfiles_alloc(&ht, &obj);
	atomic_init(&rec.live, SFS_HO_FILE);
	atomic_init(&rec.twin, -1);
	sfs_openfiles_publish(&ht, b, &rec);
	CHECK(sfs_openfiles_object(&ht, b, SFS_HO_FILE) == &obj, "a published slot names its object");
	CHECK(sfs_openfiles_object(&ht, a, SFS_HO_FILE) == NULL, "an unpublished one names none");
	CHECK(sfs_openfiles_object(&ht, b, SFS_HO_DIR) == NULL, "nor one of another kind");
	CHECK(sfs_openfiles_object(&ht, 1ULL << 40, SFS_HO_FILE) == NULL, "nor one out of range");
	strcpy(in.name, "d");
	slot = sfs_ho_intent_begin(&h, &in);
	CHECK(slot >= 0, "an intent");
	reopen(&h, &s);
	files_over(&s, &st);
	CHECK(sfs_openfiles_record(&st, b, &got) && got.fd == 17 && got.node == 99, "a file's record");
	CHECK(!sfs_openfiles_record(&st, a, &got), "no record for a slot never published");
	CHECK(sfs_ho_intent_find(&s, 3, 1234, &found) == slot && found.state == SFS_HO_BEGUN &&
	      !strcmp(found.name, "d"), "a begun intent found by view and request");
	sfs_ho_intent_done(&h, slot, -17);
	CHECK(sfs_ho_intent_find(&s, 3, 1234, &found) == slot && found.state == SFS_HO_DONE &&
	      found.rc == -17, "and done, with its result");
	CHECK(sfs_ho_intent_find(&s, 4, 1234, &found) < 0, "not for another view");
	sfs_ho_intent_end(&h, slot);
	CHECK(sfs_ho_intent_find(&s, 3, 1234, &found) < 0, "an ended one is gone");
	in.unique = 5678;
	busy = sfs_ho_intent_begin(&h, &in); /* in flight as the daemon dies */
	in.unique = 9012;
	freed = sfs_ho_intent_begin(&h, &in);
	sfs_ho_intent_end(&h, freed);
	reopen(&h, &s2);
	CHECK(sfs_ho_intent_begin(&s2, &in) == freed,
	      "a successor takes its predecessor's free slots again, not new ones");
	CHECK(sfs_ho_intent_find(&s2, 3, 5678, &found) == busy && sfs_ho_intent_begin(&s2, &in) != busy,
	      "and keeps the record of a change in flight");
	sfs_openfiles_destroy(&st);
	sfs_openfiles_destroy(&ht);
	sfs_ho_close(&s2);
	sfs_ho_close(&s);
	sfs_ho_close(&h);
	test_release_in_flight();
}

int main(void)
{
	test_records();
	test_lookups();
	test_files_and_intents();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
