/* Table-driven tests of casefold views' core: the fold (vectors checked against the kernel's own
 * fs/unicode tables) and the per-directory fold index. The cache of indexes has its own tests
 * (test_foldcache.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "check.h"
#include "foldidx.h"

#define S(s) s, sizeof(s) - 1

static const char *hex(const char *s, size_t len)
{
	static char buf[4 * SFS_FOLD_KEY_MAX + 1];
	size_t i, o = 0;

	for (i = 0; i < len && o + 5 < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02X", (unsigned char)s[i]);
	buf[o] = '\0';
	return buf;
}

/* ---- The fold ------------------------------------------------------------------------------ */

/* Expected folds, each as fs/unicode (Unicode 12.1, via e2fsprogs' copy of the kernel's tables)
 * produces it, except where marked. */
static const struct {
	const char *in, *out;
	const char *what;
} folds[] = {
	{ "\xC4\xB0", "i\xCC\x87", "Turkish dotted I: i + U+0307, not i" },
	{ "\xC4\xB1", "\xC4\xB1", "dotless i stays" },
	{ "\xC3\x9F", "ss", "sharp s" },
	{ "\xE1\xBA\x9E", "ss", "capital sharp s" },
	{ "Stra\xC3\x9F" "e", "strasse", "Strasse" },
	{ "\xE2\x84\xAA", "k", "Kelvin sign" },
	{ "\xE2\x84\xA6", "\xCF\x89", "Ohm sign" },
	{ "\xE2\x84\xAB", "a\xCC\x8A", "Angstrom sign" },
	{ "\xEF\xAC\x81", "fi", "fi ligature" },
	{ "\xEF\xAC\x93", "\xD5\xB4\xD5\xB6", "Armenian men-now ligature" },
	{ "\xC3\xA9", "e\xCC\x81", "NFC e-acute" },
	{ "\xC3\x89", "e\xCC\x81", "NFC E-acute" },
	{ "\xC7\x84", "\xC7\x86", "DZ caron: compatibility decomposition is not applied" },
	{ "\xC7\xB0", "j\xCC\x8C", "j caron: full folding" },
	{ "\xCE\x90", "\xCE\xB9\xCC\x88\xCC\x81", "U+0390: the largest growth, 2 -> 6 bytes" },
	{ "\xE1\xBE\x80", "\xCE\xB1\xCC\x93\xCE\xB9", "U+1F80: ypogegrammeni folds to iota" },
	{ "\xE1\xBE\xB7", "\xCE\xB1\xCD\x82\xCE\xB9", "U+1FB7" },
	{ "\xCD\x85", "\xCE\xB9", "combining ypogegrammeni" },
	{ "\xCF\x82", "\xCF\x83", "final sigma" },
	{ "\xEA\xB0\x80", "\xE1\x84\x80\xE1\x85\xA1", "Hangul syllable" },
	{ "\xE2\x80\x8D", "", "ZWJ alone folds to nothing" },
	{ "a\xE2\x80\x8D" "b", "ab", "ZWJ" },
	{ "a\xC2\xAD" "b", "ab", "soft hyphen" },
	{ "\xEF\xBB\xBF" "x", "x", "BOM / ZWNBSP" },
	{ "x\xEF\xB8\x8F", "x", "variation selector 16" },
	{ "a\xE2\x81\xA5" "b", "ab", "reserved default-ignorable U+2065 (utf8proc alone keeps it)" },
	{ "a\xF3\xA0\xBF\xBF" "b", "ab", "reserved default-ignorable U+E0FFF" },
	{ "a\xCC\x81\xCC\xA3", "a\xCC\xA3\xCC\x81", "canonical ordering" },
	{ "a\xCC\x81\xC2\xAD\xCC\xA3", "a\xCC\x81\xCC\xA3",
	  "an ignorable stops reordering (utf8proc's IGNORE would reorder)" },
	/* Unicode after 12.1, where utf8proc's tables (15.0) and the kernel's differ; we follow
	 * utf8proc. The kernel leaves both unchanged. */
	{ "\xEA\x9F\x87", "\xEA\x9F\x88", "U+A7C7 (Unicode 13) folds; not in the kernel" },
	{ "\xE1\xA0\x8F", "", "U+180F (Unicode 14, ignorable) is stripped; not by the kernel" },
	/* Not UTF-8: the bytes themselves. */
	{ "\xFF", "\xFF", "lone 0xFF" },
	{ "A\xC3", "A\xC3", "truncated sequence, and no folding of the rest" },
	{ "\xC0\xAF", "\xC0\xAF", "overlong '/'" },
	{ "\xED\xA0\x80", "\xED\xA0\x80", "surrogate" },
};

static const struct {
	const char *a, *b;
	bool equal;
} pairs[] = {
	{ "\xC3\x9F", "ss", true },                 /* ß ss SS ẞ */
	{ "\xC3\x9F", "SS", true },
	{ "\xE1\xBA\x9E", "ss", true },
	{ "\xE1\xBA\x9E", "\xC3\x9F", true },
	{ "Stra\xC3\x9F" "e", "STRASSE", true },
	{ "\xC4\xB0", "i", false },                 /* no Turkish special case */
	{ "\xC4\xB0", "I", false },
	{ "\xC4\xB0", "i\xCC\x87", true },
	{ "\xC4\xB0", "I\xCC\x87", true },
	{ "\xC4\xB1", "i", false },
	{ "\xC4\xB1", "I", false },
	{ "\xE2\x84\xAA", "k", true },              /* Kelvin */
	{ "\xE2\x84\xAA", "K", true },
	{ "\xEF\xAC\x81", "fi", true },             /* ﬁ */
	{ "\xEF\xAC\x81", "FI", true },
	{ "caf\xC3\xA9", "cafe\xCC\x81", true },    /* NFC = NFD */
	{ "CAF\xC3\x89", "cafe\xCC\x81", true },
	{ "caf\xC3\xA9", "cafe", false },
	{ "\xE2\x84\xAB", "\xC3\xA5", true },       /* Angstrom = å */
	{ "\xCF\x82", "\xCE\xA3", true },           /* ς = Σ */
	{ "ab", "a\xE2\x80\x8D" "b", true },        /* ZWJ */
	{ "ab", "A\xC2\xAD" "B", true },            /* soft hyphen */
	{ "\xE2\x80\x8B", "\xC2\xAD", true },       /* ignorables only: both fold to "" */
	{ "a\xCC\x81\xCC\xA3", "a\xCC\xA3\xCC\x81", true },
	{ "a\xCC\x81\xC2\xAD\xCC\xA3", "a\xCC\xA3\xCC\x81", false },
	{ "a", "b", false },
	{ "\xFF", "\xFF", true },                   /* invalid: exact bytes */
	{ "A\xFF", "a\xFF", false },
	{ "\xC3", "\xC3", true },
	{ "\xC0\xAF", "/", false },
	{ "\xC0\xAF", "\xC0\xAF", true },
	{ "A\xED\xA0\x80", "a\xED\xA0\x80", false },
	{ "\xED\xA0\x80", "\xED\xA0\x80", true },
};

static const struct {
	const char *s;
	bool valid;
} utf8[] = {
	{ "", true }, { "abc", true }, { "\xC3\xA9", true }, { "\xEF\xBF\xBF", true },
	{ "\xF4\x8F\xBF\xBF", true }, { "\xEE\x80\x80", true }, { "\xF0\x9F\x98\x80", true },
	{ "\xFF", false }, { "\xFE", false }, { "\x80", false }, { "\xC3", false },
	{ "\xE2\x82", false }, { "\xF0\x9F\x98", false }, { "\xC0\xAF", false },
	{ "\xC1\xBF", false }, { "\xE0\x80\xAF", false }, { "\xF0\x80\x80\xAF", false },
	{ "\xED\xA0\x80", false }, { "\xED\xBF\xBF", false }, { "\xF4\x90\x80\x80", false },
	{ "\xF5\x80\x80\x80", false }, { "\xF8\x88\x80\x80\x80", false }, { "a\xC3(", false },
};

static void test_fold_vectors(void)
{
	char out[SFS_FOLD_KEY_MAX];
	bool invalid;
	size_t i, n, len;
	int rc;

	for (i = 0; i < sizeof(folds) / sizeof(folds[0]); i++) {
		len = strlen(folds[i].in);
		rc = sfs_fold(folds[i].in, len, out, sizeof(out), &n, &invalid);
		CHECK(rc == 0, "%s: rc %d", folds[i].what, rc);
		CHECK(n == strlen(folds[i].out) && !memcmp(out, folds[i].out, n), "%s: got %s",
		      folds[i].what, hex(out, n));
		CHECK(invalid == !sfs_fold_valid_utf8(folds[i].in, len), "%s: invalid flag",
		      folds[i].what);
	}
	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		CHECK(sfs_fold_equal(pairs[i].a, strlen(pairs[i].a), pairs[i].b, strlen(pairs[i].b)) ==
			      pairs[i].equal,
		      "%s vs %s: expected %s", pairs[i].a, pairs[i].b,
		      pairs[i].equal ? "equal" : "different");
	for (i = 0; i < sizeof(utf8) / sizeof(utf8[0]); i++) {
		len = strlen(utf8[i].s);
		CHECK(sfs_fold_valid_utf8(utf8[i].s, len) == utf8[i].valid, "valid(%s)",
		      hex(utf8[i].s, len));
		rc = sfs_fold(utf8[i].s, len, out, sizeof(out), &n, &invalid);
		CHECK(rc == 0 && invalid == !utf8[i].valid, "flag for %s", hex(utf8[i].s, len));
	}
	CHECK(sfs_fold(S("Hello, World! 0-9 @[`{~"), out, sizeof(out), &n, &invalid) == 0 &&
	      n == 23 && !memcmp(out, "hello, world! 0-9 @[`{~", 23) && !invalid, "ASCII");
	CHECK(sfs_fold(S("ABC"), out, 2, &n, &invalid) == -ENAMETOOLONG, "short out, ASCII");
	CHECK(sfs_fold(S("\xC3\x9F"), out, 1, &n, &invalid) == -ENAMETOOLONG, "short out");
	CHECK(sfs_fold(S("\xFF\xFF"), out, 1, &n, &invalid) == -ENAMETOOLONG, "short out, invalid");
	CHECK(sfs_fold(S(""), out, 0, &n, &invalid) == 0 && n == 0 && !invalid, "empty");
	CHECK(!strcmp(sfs_fold_unicode_version(), utf8proc_unicode_version()), "version");
}

/* Names past NAME_MAX take the heap paths. */
static void test_fold_long(void)
{
	char a[2001], b[3001];
	int i;

	for (i = 0; i < 1000; i++)
		memcpy(a + 2 * i, "\xC3\x89", 2);     /* É */
	for (i = 0; i < 1000; i++)
		memcpy(b + 3 * i, "e\xCC\x81", 3);    /* e + U+0301 */
	CHECK(sfs_fold_equal(a, 2000, b, 3000), "1000 x E-acute");
	b[2999] = '\x80';                           /* e + U+0300 */
	CHECK(!sfs_fold_equal(a, 2000, b, 3000), "last accent differs");
}

static bool reserved_ignorable(int c)
{
	return c == 0x2065 || (c >= 0xFFF0 && c <= 0xFFF8) || c == 0xE0000 ||
	       (c >= 0xE0002 && c <= 0xE001F) || (c >= 0xE0080 && c <= 0xE00FF) ||
	       (c >= 0xE01F0 && c <= 0xE0FFF);
}

/* utf8proc's own DECOMPOSE | CASEFOLD | IGNORE | STABLE; a lone code point cannot tell its
 * ordering from ours, so only the reserved ignorables (which it keeps) differ. */
static bool same_as_utf8proc(int c, const char *in, size_t len, const char *out, size_t n)
{
	utf8proc_uint8_t *ref = NULL;
	utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)len, &ref,
					  UTF8PROC_DECOMPOSE | UTF8PROC_CASEFOLD |
						  UTF8PROC_IGNORE | UTF8PROC_STABLE);
	bool same = r >= 0 && (size_t)r == n && !memcmp(ref, out, n);

	free(ref);
	return same || (reserved_ignorable(c) && n == 0);
}

/* Every code point: the fold is utf8proc's, idempotent, within SFS_FOLD_MAXLEN, valid UTF-8. */
static void test_fold_all_code_points(void)
{
	char in[4], out[SFS_FOLD_MAXLEN(4)], again[SFS_FOLD_MAXLEN(SFS_FOLD_MAXLEN(4))];
	size_t n, m, len;
	int bad = 0, c;
	bool invalid;

	for (c = 0; c < 0x110000; c++) {
		if (c >= 0xD800 && c <= 0xDFFF)
			continue;
		len = (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)in);
		if (sfs_fold(in, len, out, SFS_FOLD_MAXLEN(len), &n, &invalid) || invalid ||
		    !sfs_fold_valid_utf8(out, n) || !same_as_utf8proc(c, in, len, out, n) ||
		    sfs_fold(out, n, again, sizeof(again), &m, &invalid) || m != n ||
		    memcmp(out, again, n)) {
			if (bad++ < 5)
				CHECK(false, "U+%04X: fold differs, not closed or too long", c);
		}
	}
	CHECK(bad == 0, "%d code points misbehave", bad);
}

/* sfs_fold_valid_utf8 agrees with utf8proc's decoder on every string of up to three bytes. */
static void test_valid_exhaustive(void)
{
	utf8proc_int32_t cp;
	unsigned char s[3];
	unsigned long v;
	int bad = 0;
	size_t len, at;
	utf8proc_ssize_t k;
	bool ref;

	for (len = 1; len <= 3; len++) {
		for (v = 0; v < 1UL << (8 * len); v++) {
			for (at = 0; at < len; at++)
				s[at] = (unsigned char)(v >> (8 * at));
			ref = true;
			for (at = 0; ref && at < len; at += (size_t)k) {
				k = utf8proc_iterate(s + at, (utf8proc_ssize_t)(len - at), &cp);
				ref = k > 0;
			}
			if (ref != sfs_fold_valid_utf8((const char *)s, len) && bad++ < 5)
				CHECK(false, "%s: utf8proc says %d", hex((char *)s, len), ref);
		}
	}
	CHECK(bad == 0, "%d strings disagree with utf8proc", bad);
}

/* ---- The index ------------------------------------------------------------------------------ */

static void expect_lookup(const struct sfs_foldidx *idx, const char *ask, const char *rep,
                          bool exact, int line)
{
	struct sfs_foldidx_hit hit;
	int rc = sfs_foldidx_lookup(idx, ask, strlen(ask), &hit);

	if (!rep) {
		CHECK(rc == -ENOENT, "line %d: lookup %s: rc %d, want -ENOENT", line, ask, rc);
		return;
	}
	CHECK(rc == 0 && !strcmp(hit.name, rep) && hit.len == strlen(rep) && hit.exact == exact,
	      "line %d: lookup %s: rc %d got %s exact %d, want %s exact %d", line, ask, rc,
	      rc ? "-" : hit.name, rc ? -1 : hit.exact, rep, exact);
}

static void expect_counts(const struct sfs_foldidx *idx, size_t names, size_t classes, int line)
{
	struct sfs_foldidx_stats st;

	sfs_foldidx_stats(idx, &st);
	CHECK(st.names == names && st.classes == classes && st.collisions == names - classes,
	      "line %d: %zu names %zu classes %zu collisions, want %zu %zu", line, st.names,
	      st.classes, st.collisions, names, classes);
}

#define LOOKUP(idx, ask, rep, exact) expect_lookup(idx, ask, rep, exact, __LINE__)
#define COUNTS(idx, names, classes) expect_counts(idx, names, classes, __LINE__)
#define LISTED(idx, name, want) \
	CHECK(sfs_foldidx_listed(idx, name, strlen(name)) == (want), "listed(%s) != %d", name, want)
#define ADD(idx, name) sfs_foldidx_add(idx, name, strlen(name))
#define DEL(idx, name) sfs_foldidx_remove(idx, name, strlen(name))
#define REN(idx, a, b) sfs_foldidx_rename(idx, a, strlen(a), b, strlen(b))

static void test_index_rules(void)
{
	struct sfs_foldidx *idx;
	char longname[SFS_FOLD_NAME_MAX + 2];

	CHECK(sfs_foldidx_new(&idx, 0) == 0, "new");
	CHECK(ADD(idx, "foo") == 0 && ADD(idx, "FOO") == 0 && ADD(idx, "Foo") == 0, "add class");
	CHECK(ADD(idx, "foo") == -EEXIST, "exact duplicate");
	COUNTS(idx, 3, 1);
	LOOKUP(idx, "foo", "foo", true);             /* the spelling asked for, when it exists */
	LOOKUP(idx, "Foo", "Foo", true);
	LOOKUP(idx, "fOO", "FOO", false);            /* else the bytewise-smallest */
	LISTED(idx, "FOO", true);
	LISTED(idx, "Foo", false);
	LISTED(idx, "foo", false);
	LISTED(idx, "fOO", false);                   /* unknown, larger than FOO */

	CHECK(DEL(idx, "FOO") == 0, "remove the head");
	LOOKUP(idx, "FOO", "Foo", false);
	LISTED(idx, "Foo", true);
	LISTED(idx, "FOO", true);                    /* unknown, would be the smallest */
	CHECK(DEL(idx, "FOO") == -ENOENT, "remove twice");
	COUNTS(idx, 2, 1);

	CHECK(REN(idx, "Foo", "bar") == 0, "rename out of the class");
	LOOKUP(idx, "BAR", "bar", false);
	LOOKUP(idx, "FOO", "foo", false);
	COUNTS(idx, 2, 2);
	CHECK(REN(idx, "foo", "BAR") == 0, "rename into another class");
	LOOKUP(idx, "foo", NULL, false);
	LOOKUP(idx, "Bar", "BAR", false);
	LOOKUP(idx, "bar", "bar", true);
	LISTED(idx, "BAR", true);
	LISTED(idx, "bar", false);
	COUNTS(idx, 2, 1);
	CHECK(ADD(idx, "x") == 0 && ADD(idx, "y") == 0, "x, y");
	CHECK(REN(idx, "x", "y") == 0, "rename onto an existing name");
	LOOKUP(idx, "x", NULL, false);
	LOOKUP(idx, "Y", "y", false);
	CHECK(REN(idx, "y", "y") == 0, "rename onto itself");
	CHECK(REN(idx, "x", "z") == -ENOENT, "rename of an absent name");
	LOOKUP(idx, "z", NULL, false);
	COUNTS(idx, 3, 2);

	/* Unicode classes */
	CHECK(ADD(idx, "Stra\xC3\x9F" "e") == 0 && ADD(idx, "STRASSE") == 0 &&
	      ADD(idx, "strasse") == 0, "Strasse");
	LOOKUP(idx, "STRA\xE1\xBA\x9E" "E", "STRASSE", false);
	LOOKUP(idx, "Stra\xC3\x9F" "e", "Stra\xC3\x9F" "e", true);
	LISTED(idx, "STRASSE", true);
	LISTED(idx, "Stra\xC3\x9F" "e", false);
	CHECK(ADD(idx, "caf\xC3\xA9") == 0 && ADD(idx, "cafe\xCC\x81") == 0, "NFC and NFD");
	LOOKUP(idx, "CAF\xC3\x89", "cafe\xCC\x81", false);
	LISTED(idx, "caf\xC3\xA9", false);
	CHECK(ADD(idx, "\xE2\x80\x8B") == 0 && ADD(idx, "\xC2\xAD") == 0, "ignorables only");
	LOOKUP(idx, "\xE2\x80\x8D", "\xC2\xAD", false);
	LISTED(idx, "\xE2\x80\x8B", false);
	CHECK(ADD(idx, "\xE2\x84\xAA" "elvin") == 0, "Kelvin sign");
	LOOKUP(idx, "kelvin", "\xE2\x84\xAA" "elvin", false);
	LOOKUP(idx, "\xC4\xB0" "x", NULL, false);
	CHECK(ADD(idx, "ix") == 0, "ix");
	LOOKUP(idx, "\xC4\xB0" "x", NULL, false);    /* İ is not I */
	LOOKUP(idx, "I\xCC\x87" "X", NULL, false);

	/* Invalid UTF-8: only the exact bytes */
	CHECK(ADD(idx, "A\xFF") == 0 && ADD(idx, "a\xFF") == 0, "invalid names");
	LOOKUP(idx, "a\xFF", "a\xFF", true);
	LOOKUP(idx, "\xFF", NULL, false);
	LISTED(idx, "A\xFF", true);
	LISTED(idx, "a\xFF", true);
	COUNTS(idx, 14, 9);

	/* Refused names */
	memset(longname, 'a', sizeof(longname));
	CHECK(sfs_foldidx_add(idx, longname, SFS_FOLD_NAME_MAX + 1) == -ENAMETOOLONG, "256 bytes");
	CHECK(sfs_foldidx_add(idx, longname, SFS_FOLD_NAME_MAX) == 0, "255 bytes");
	CHECK(sfs_foldidx_add(idx, "", 0) == -EINVAL, "empty");
	CHECK(ADD(idx, ".") == -EINVAL && ADD(idx, "..") == -EINVAL, "dot and dot-dot");
	CHECK(ADD(idx, "a/b") == -EINVAL, "slash");
	CHECK(sfs_foldidx_add(idx, "a\0b", 3) == -EINVAL, "NUL");
	CHECK(REN(idx, "STRASSE", "a/b") == -EINVAL, "rename to a refused name");
	LOOKUP(idx, "strasse", "strasse", true);
	CHECK(!sfs_foldidx_listed(idx, "..", 2), "listed(..)");
	COUNTS(idx, 15, 10);
	sfs_foldidx_free(idx);
}

static void test_index_from_names(void)
{
	const char *names[] = { ".", "..", "a", "A", "a", "b" };
	const char *bad[] = { "ok", "a/b" };
	struct sfs_foldidx *idx;

	CHECK(sfs_foldidx_from_names(&idx, names, 6) == 0, "from names");
	COUNTS(idx, 3, 2);
	CHECK(sfs_foldidx_lookup(idx, S(".."), &(struct sfs_foldidx_hit){ 0 }) == -EINVAL, "..");
	sfs_foldidx_free(idx);
	CHECK(sfs_foldidx_from_names(&idx, bad, 2) == -EINVAL, "from names: a/b");
	CHECK(sfs_foldidx_from_names(&idx, names, 0) == 0, "from no names");
	COUNTS(idx, 0, 0);
	sfs_foldidx_free(idx);
}

/* 110,000 names in 100,000 classes, then all removed again. */
static void test_index_growth(void)
{
	enum { N = 100000 };
	struct sfs_foldidx_stats st0, st;
	struct sfs_foldidx_hit hit;
	struct sfs_foldidx *idx;
	char name[32], ask[32];
	int i, bad = 0;

	CHECK(sfs_foldidx_new(&idx, 0) == 0, "new");
	sfs_foldidx_stats(idx, &st0);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "file-%06d", i);
		bad += ADD(idx, name) != 0;
		if (i % 10 == 0) {
			snprintf(name, sizeof(name), "FILE-%06d", i);
			bad += ADD(idx, name) != 0;
		}
	}
	CHECK(bad == 0, "%d adds failed", bad);
	COUNTS(idx, N + N / 10, N);
	for (i = 0; i < N; i++) {
		snprintf(ask, sizeof(ask), "File-%06d", i);
		snprintf(name, sizeof(name), "%s-%06d", i % 10 ? "file" : "FILE", i);
		if (sfs_foldidx_lookup(idx, ask, strlen(ask), &hit) || strcmp(hit.name, name) ||
		    hit.exact || hit.collided != !(i % 10))
			bad++;
		if (!sfs_foldidx_listed(idx, name, strlen(name)))
			bad++;
		snprintf(name, sizeof(name), "file-%06d", i);
		if (i % 10 == 0 && sfs_foldidx_listed(idx, name, strlen(name)))
			bad++;
	}
	CHECK(bad == 0, "%d lookups or listings wrong", bad);
	for (i = 0; i < N; i += 10) {
		snprintf(name, sizeof(name), "FILE-%06d", i);
		bad += DEL(idx, name) != 0;
		snprintf(name, sizeof(name), "file-%06d", i);
		bad += !sfs_foldidx_listed(idx, name, strlen(name));
	}
	CHECK(bad == 0, "%d removals wrong", bad);
	COUNTS(idx, N, N);
	sfs_foldidx_stats(idx, &st);
	CHECK(st.bytes > st0.bytes + (size_t)N * 32, "bytes grow with names: %zu", st.bytes);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "file-%06d", i);
		bad += DEL(idx, name) != 0;
	}
	CHECK(bad == 0, "%d final removals failed", bad);
	COUNTS(idx, 0, 0);
	sfs_foldidx_stats(idx, &st);
	CHECK(st.bytes == st0.bytes, "tables shrink back: %zu vs %zu", st.bytes, st0.bytes);
	sfs_foldidx_free(idx);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One class of 4096 case variants: the head follows the bytewise order as heads go. */
static void test_index_big_class(void)
{
	enum { L = 12, K = 1 << L };
	static char names[K][L + 1];
	static char *sorted[K];
	struct sfs_foldidx_hit hit;
	struct sfs_foldidx *idx;
	int i, j, bad = 0;

	for (i = 0; i < K; i++) {
		for (j = 0; j < L; j++)
			names[i][j] = (char)((i >> j & 1 ? 'A' : 'a') + j);
		names[i][L] = '\0';
		sorted[i] = names[i];
	}
	qsort(sorted, K, sizeof(*sorted), cmp_str);
	CHECK(sfs_foldidx_new(&idx, 0) == 0, "new");
	for (i = 0; i < K; i++)
		bad += ADD(idx, names[(i * 2654435761u) % K]) != 0; /* a scrambled order */
	CHECK(bad == 0, "adds");
	COUNTS(idx, K, 1);
	for (i = 0; i < K; i++) {
		if (sfs_foldidx_listed(idx, sorted[i], L) != true)
			bad++;
		if (i + 1 < K && sfs_foldidx_listed(idx, sorted[i + 1], L))
			bad++;
		bad += DEL(idx, sorted[i]) != 0;
		if (i + 1 < K && (sfs_foldidx_lookup(idx, "aBcDeFgHiJkL", 12, &hit) ||
				  (strcmp(hit.name, sorted[i + 1]) && strcmp(hit.name, "aBcDeFgHiJkL"))))
			bad++;
	}
	CHECK(bad == 0, "%d wrong heads", bad);
	COUNTS(idx, 0, 0);
	sfs_foldidx_free(idx);
}

int main(void)
{
	test_fold_vectors();
	test_fold_long();
	test_fold_all_code_points();
	test_valid_exhaustive();
	test_index_rules();
	test_index_from_names();
	test_index_growth();
	test_index_big_class();

	printf("%d checks\n", checks);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
