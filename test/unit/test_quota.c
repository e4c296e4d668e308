/* Table-driven tests of the quota arithmetic (hard and soft limits, grace) and of the state
 * file format (round trip, refusals with the line at fault). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quota_state.h"

static const time_t grace[SFS_QNRES] = {100, 50};

static int admit(const struct sfs_qentry *e, int64_t bytes, int64_t inodes, time_t now)
{
	const int64_t d[SFS_QNRES] = {bytes, inodes};
	return sfs_qentry_admit(e, d, now, grace);
}

static void apply(struct sfs_qentry *e, int64_t bytes, int64_t inodes, time_t now)
{
	const int64_t d[SFS_QNRES] = {bytes, inodes};
	sfs_qentry_apply(e, d, now);
}

static void test_limits(void)
{
	struct sfs_qentry e = {.id = 1000};

	CHECK(admit(&e, 1 << 30, 1000000, 1) == 0, "no limits: anything goes");
	e.lim.hard[SFS_QBYTES] = 8192;
	CHECK(admit(&e, 8192, 0, 1) == 0, "up to the hard limit");
	CHECK(admit(&e, 8193, 0, 1) == -EDQUOT, "past the hard limit");
	apply(&e, 4096, 0, 1);
	e.reserved[SFS_QBYTES] = 4096;
	CHECK(admit(&e, 1, 0, 1) == -EDQUOT, "reservations count");
	CHECK(admit(&e, -4096, 0, 1) == 0, "releases always pass");
	e.reserved[SFS_QBYTES] = 0;

	e.lim.hard[SFS_QINODES] = 2;
	apply(&e, 0, 2, 1);
	CHECK(admit(&e, 0, 1, 1) == -EDQUOT, "inode hard limit");
	CHECK(admit(&e, 4096, 0, 1) == 0, "blocks independent of inodes");
	CHECK(admit(&e, 0, 0, 1) == 0, "nothing new");
}

static void test_grace(void)
{
	struct sfs_qentry e = {.id = 7};

	e.lim.soft[SFS_QBYTES] = 4096;
	e.lim.hard[SFS_QBYTES] = 16384;
	CHECK(admit(&e, 8192, 0, 10) == 0, "passing the soft limit is allowed");
	apply(&e, 8192, 0, 10);
	CHECK(e.grace_start[SFS_QBYTES] == 10, "grace starts when usage passes soft");
	CHECK(admit(&e, 4096, 0, 109) == 0, "within grace");
	apply(&e, 4096, 0, 50);
	CHECK(e.grace_start[SFS_QBYTES] == 10, "grace start kept while over");
	CHECK(admit(&e, 1, 0, 110) == -EDQUOT, "grace ran out");
	CHECK(admit(&e, -4096, 0, 110) == 0, "freeing still works");
	apply(&e, -8192, 0, 111);
	CHECK(e.grace_start[SFS_QBYTES] == 0, "back at the soft limit clears the grace timer");
	CHECK(admit(&e, 4096, 0, 112) == 0, "a new grace period");
	apply(&e, 0, 1, 112);
	CHECK(e.grace_start[SFS_QINODES] == 0, "no inode soft limit, no timer");
}

static void test_table(void)
{
	struct sfs_qstate s;
	uint32_t ids[] = {1000, 0, 65534, 5, 1000, 4000000000u};

	sfs_qstate_init(&s);
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		CHECK(sfs_qtable_get(&s.t[SFS_QUSR], ids[i]) != NULL, "get %u", ids[i]);
	CHECK(s.t[SFS_QUSR].n == 5, "five distinct ids, got %zu", s.t[SFS_QUSR].n);
	for (size_t i = 1; i < s.t[SFS_QUSR].n; i++)
		CHECK(s.t[SFS_QUSR].e[i - 1].id < s.t[SFS_QUSR].e[i].id, "sorted");
	CHECK(sfs_qtable_find(&s.t[SFS_QUSR], 65534) != NULL, "find");
	CHECK(sfs_qtable_find(&s.t[SFS_QUSR], 6) == NULL, "find missing");
	CHECK(sfs_qtable_find(&s.t[SFS_QGRP], 1000) == NULL, "types apart");
	sfs_qstate_free(&s);
}

static void test_format_round_trip(void)
{
	struct sfs_qstate s, r;
	struct sfs_qentry *e;
	char err[128] = "", *buf, *buf2;
	size_t len, len2;

	sfs_qstate_init(&s);
	s.grace[SFS_QBYTES] = 3600;
	s.grace[SFS_QINODES] = 60;
	e = sfs_qtable_get(&s.t[SFS_QUSR], 1000);
	e->lim.hard[SFS_QBYTES] = 10 << 20;
	e->lim.soft[SFS_QINODES] = 100;
	e->grace_start[SFS_QINODES] = 1764000000;
	e->used[SFS_QBYTES] = 12345; /* usage is not stored */
	e = sfs_qtable_get(&s.t[SFS_QGRP], 100);
	e->lim.hard[SFS_QINODES] = 5;
	sfs_qtable_get(&s.t[SFS_QUSR], 33); /* no limits: not written */
	CHECK(sfs_qstate_format(&s, &buf, &len) == 0, "format");
	CHECK(strstr(buf, "user 33 ") == NULL, "limitless entries are not written");

	sfs_qstate_init(&r);
	CHECK(sfs_qstate_parse(buf, len, &r, err, sizeof(err)) == 0, "parse back: %s", err);
	CHECK(r.grace[SFS_QBYTES] == 3600 && r.grace[SFS_QINODES] == 60, "grace periods");
	e = sfs_qtable_find(&r.t[SFS_QUSR], 1000);
	CHECK(e && e->lim.hard[SFS_QBYTES] == 10 << 20 && e->lim.soft[SFS_QINODES] == 100 &&
	          e->grace_start[SFS_QINODES] == 1764000000 && e->used[SFS_QBYTES] == 0,
	      "user entry round trip");
	e = sfs_qtable_find(&r.t[SFS_QGRP], 100);
	CHECK(e && e->lim.hard[SFS_QINODES] == 5, "group entry round trip");
	CHECK(sfs_qstate_format(&r, &buf2, &len2) == 0 && len2 == len && !memcmp(buf, buf2, len),
	      "format(parse(format(s))) == format(s)");
	free(buf);
	free(buf2);
	sfs_qstate_free(&s);
	sfs_qstate_free(&r);
}

static void refused(const char *text, const char *needle)
{
	struct sfs_qstate s;
	char err[128] = "";

	sfs_qstate_init(&s);
	CHECK(sfs_qstate_parse(text, strlen(text), &s, err, sizeof(err)) == -EINVAL,
	      "accepted: %s", text);
	CHECK(strstr(err, needle) != NULL, "'%s': error '%s' lacks '%s'", text, err, needle);
	sfs_qstate_free(&s);
}

static void test_parse_refusals(void)
{
	refused("", "line 1: no version line first");
	refused("user 1 bsoft=0 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n", "line 1: no version");
	refused("version 2\n", "line 1: unknown format version");
	refused("version 1\nversion 1\n", "line 2: malformed");
	refused("version 1\nuser x bsoft=0 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n", "line 2");
	refused("version 1\nuser 1 bsoft=0 bhard=0 isoft=0 ihard=0 bgrace=0\n", "line 2");
	refused("version 1\nuser 1 bsoft=-1 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n", "line 2");
	refused("version 1\nuser 1 bhard=0 bsoft=0 isoft=0 ihard=0 bgrace=0 igrace=0\n", "line 2");
	refused("version 1\nuser 4294967295 bsoft=0 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n",
	        "line 2");
	refused("version 1\n\nuser 1 bsoft=1 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n"
	        "user 1 bsoft=1 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0\n",
	        "line 4: id listed twice");
	refused("version 1\ngrace blocks=1\n", "line 2");
	refused("version 1\nproject 1\n", "line 2: malformed");
	refused("version 1\nuser 1 bsoft=0 bhard=0 isoft=0 ihard=0 bgrace=0 igrace=0 extra\n",
	        "line 2");
	refused("version 1\ngrace blocks=99999999999999999999 inodes=1\n", "line 2");

	struct sfs_qstate s;
	char err[64];
	const char nul[] = "version 1\nus\0er 1\n";
	sfs_qstate_init(&s);
	CHECK(sfs_qstate_parse(nul, sizeof(nul) - 1, &s, err, sizeof(err)) == -EINVAL,
	      "a NUL byte is refused");
	sfs_qstate_free(&s);
}

static void test_units(void)
{
	static const struct { const char *in; uint64_t out; bool ok; } sizes[] = {
		{"0", 0, true}, {"4096", 4096, true}, {"1K", 1024, true}, {"1k", 1024, true},
		{"10M", 10ull << 20, true}, {"2G", 2ull << 30, true}, {"3T", 3ull << 40, true},
		{"", 0, false}, {"M", 0, false}, {"-1", 0, false}, {"1.5G", 0, false},
		{"1KB", 0, false}, {"99999999999T", 0, false}, {"18446744073709551615", 0, false},
	};
	static const struct { const char *in; time_t out; bool ok; } durations[] = {
		{"90", 90, true}, {"45s", 45, true}, {"30m", 1800, true}, {"12h", 43200, true},
		{"7d", 604800, true}, {"2w", 1209600, true}, {"7x", 0, false}, {"d", 0, false},
		{"", 0, false},
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t v = 0;
		bool ok = sfs_parse_size(sizes[i].in, &v);
		CHECK(ok == sizes[i].ok && (!ok || v == sizes[i].out), "size '%s'", sizes[i].in);
	}
	for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		time_t v = 0;
		bool ok = sfs_parse_duration(durations[i].in, &v);
		CHECK(ok == durations[i].ok && (!ok || v == durations[i].out), "duration '%s'",
		      durations[i].in);
	}
}

/* quota check's own way to count a hard link once: every name kept, sorted, one per inode. */
static void test_links_unique(void)
{
	static const struct {
		uint64_t ino[8];
		size_t n, kept;
	} cases[] = {
		{{0}, 0, 0},
		{{42}, 1, 1},
		{{42, 42}, 2, 1},
		{{7, 3, 7, 3, 9}, 5, 3},
		{{5, 5, 5, 5, 5, 5, 5, 5}, 8, 1},
		{{1, 2, 3, 4}, 4, 4},
		{{UINT64_MAX, 1, UINT64_MAX, 1ull << 32, 1}, 5, 3},
	};
	struct sfs_qlink a[8];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t kept;
		for (size_t i = 0; i < cases[c].n; i++)
			a[i] = (struct sfs_qlink){.ino = cases[c].ino[i], .uid = 1000, .bytes = 4096};
		kept = sfs_qlinks_unique(a, cases[c].n);
		CHECK(kept == cases[c].kept, "case %zu: %zu kept, expected %zu", c, kept, cases[c].kept);
		for (size_t i = 1; i < kept; i++)
			CHECK(a[i - 1].ino < a[i].ino, "case %zu: one per inode, in order", c);
	}

	/* many: 3000 files of two names each, in the order a directory may list them */
	enum { FILES = 3000 };
	struct sfs_qlink *big = malloc(2 * FILES * sizeof(*big));
	for (size_t i = 0; i < 2 * FILES; i++)
		big[i] = (struct sfs_qlink){.ino = 12 + (i * 7919) % FILES, .uid = 1000};
	CHECK(sfs_qlinks_unique(big, 2 * FILES) == FILES, "3000 files of two names: 3000");
	free(big);
}

int main(void)
{
	test_limits();
	test_grace();
	test_table();
	test_format_round_trip();
	test_parse_refusals();
	test_units();
	test_links_unique();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
