/* Fuzzes casefold matching (fold.c): the fold, the comparison, and the per-directory fold index
 * against a plain model of the directory. The input is records separated by '/' (the byte no
 * name holds): the first byte of a record chooses an operation on the index, the rest is the
 * name (rename takes the next record as its target). Checked for every name: the fold fits
 * SFS_FOLD_MAXLEN and fails cleanly in less room; it reports invalid UTF-8 exactly when an
 * independent decoder (utf8proc_iterate) does, and then leaves the bytes alone; a valid name
 * folds to valid UTF-8; folding is idempotent (for names without default-ignorables, see
 * has_ignorable); sfs_fold_equal agrees with comparing folds, and
 * is reflexive and symmetric. Checked for the index: every add/remove/rename result, lookup
 * (the exact spelling if present, otherwise the class's bytewise-smallest member), listed,
 * and the counts, as the model predicts; an index built at once from the final names, and the
 * same index through the cache, answer every lookup alike. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <utf8proc.h>

#include "foldcache.h"

static struct sfs_dirlock locks;
static bool locks_ready;
#include "fuzz.h"

#define MAX_RECORDS 256
#define MODEL_MAX 256

struct name {
	const char *s;
	size_t len;
};

/* ---- The fold ----------------------------------------------------------------------------- */

static bool ref_valid(const char *s, size_t len)
{
	utf8proc_int32_t c;

	while (len) {
		utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s,
		                                      (utf8proc_ssize_t)len, &c);
		if (n <= 0)
			return false;
		s += n;
		len -= (size_t)n;
	}
	return true;
}

/* The fold into an exactly sized heap buffer (so that ASan sees any overrun); NULL on -ENOMEM. */
static char *fold(const char *s, size_t len, size_t *outlen, bool *invalid)
{
	size_t size = SFS_FOLD_MAXLEN(len);
	char *out = malloc(size ? size : 1);
	int rc;

	if (!out)
		return NULL;
	rc = sfs_fold(s, len, out, size, outlen, invalid);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "fold of %zu bytes: rc %d", len, rc);
	if (rc) {
		free(out);
		return NULL;
	}
	FUZZ_CHECK(*outlen <= size, "fold longer than SFS_FOLD_MAXLEN");
	return out;
}

/* True if a code point of the valid name s folds to nothing (a default-ignorable). Folding is
 * idempotent only without them: they are dropped after canonical ordering, as the kernel drops
 * them, and marks they kept apart may reorder when the fold is folded again (a + U+0301 +
 * U+00AD + U+0323 folds to a + U+0301 + U+0323, which folds to a + U+0323 + U+0301). Names are
 * only ever compared by folding each once, so this is no inconsistency. */
static bool has_ignorable(const char *s, size_t len)
{
	utf8proc_int32_t c;
	char out[SFS_FOLD_MAXLEN(4)];
	size_t n;
	bool invalid;

	while (len) {
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s,
		                                      (utf8proc_ssize_t)len, &c);
		if (k <= 0)
			return false;
		if (sfs_fold(s, (size_t)k, out, sizeof(out), &n, &invalid) == 0 && n == 0)
			return true;
		s += k;
		len -= (size_t)k;
	}
	return false;
}

static void check_fold(const char *s, size_t len)
{
	size_t n, n2, tight;
	bool invalid, invalid2;
	char *out, *again, *small;

	out = fold(s, len, &n, &invalid);
	if (!out)
		return;
	FUZZ_CHECK(invalid == !ref_valid(s, len), "invalid flag %d, utf8proc says valid %d", invalid,
	           ref_valid(s, len));
	FUZZ_CHECK(sfs_fold_valid_utf8(s, len) == !invalid, "sfs_fold_valid_utf8 disagrees");
	if (invalid)
		FUZZ_CHECK(n == len && !memcmp(out, s, len), "an invalid name was changed");
	else
		FUZZ_CHECK(ref_valid(out, n), "a valid name folded to invalid UTF-8");
	/* Less room than the fold needs: a clean -ENAMETOOLONG, nothing written past it. */
	if (n > 0) {
		tight = n - 1;
		small = malloc(tight ? tight : 1);
		if (small) {
			size_t sn;
			bool si;
			FUZZ_CHECK(sfs_fold(s, len, small, tight, &sn, &si) == -ENAMETOOLONG,
			           "fold into %zu bytes of %zu did not refuse", tight, n);
			free(small);
		}
	}
	again = fold(out, n, &n2, &invalid2);
	if (again) {
		FUZZ_CHECK(!invalid2 || invalid, "a fold became invalid");
		FUZZ_CHECK((n2 == n && !memcmp(again, out, n)) || has_ignorable(s, len),
		           "fold is not idempotent");
		free(again);
	}
	FUZZ_CHECK(sfs_fold_equal(s, len, s, len), "a name differs from itself");
	free(out);
}

static bool folds_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t an, bn;
	bool ai, bi, eq;
	char *af = fold(a, alen, &an, &ai), *bf = fold(b, blen, &bn, &bi);

	eq = af && bf && an == bn && !memcmp(af, bf, an);
	if (!af || !bf)
		eq = alen == blen && !memcmp(a, b, alen);
	free(af);
	free(bf);
	return eq;
}

static void check_pair(const char *a, size_t alen, const char *b, size_t blen)
{
	bool eq = sfs_fold_equal(a, alen, b, blen);

	FUZZ_CHECK(eq == sfs_fold_equal(b, blen, a, alen), "sfs_fold_equal is not symmetric");
	FUZZ_CHECK(eq == folds_equal(a, alen, b, blen), "sfs_fold_equal %d, folds equal %d", eq,
	           !eq);
}

/* ---- The index against a model ------------------------------------------------------------ */

/* The directory as a list of names, each with its fold (computed once: the checks compare
 * folds, and folding on every comparison would make an input of many names quadratic in folds). */
struct entry {
	const char *s;
	size_t len;
	char *key; /* NULL if the fold failed (no memory): then compared by bytes */
	size_t klen;
};

struct model {
	struct entry n[MODEL_MAX];
	size_t count;
};

static void key_of(const char *s, size_t len, char **key, size_t *klen)
{
	bool invalid;

	*key = fold(s, len, klen, &invalid);
}

static bool same_key(const struct entry *e, const char *key, size_t klen, const char *s,
                     size_t len)
{
	if (!e->key || !key)
		return e->len == len && !memcmp(e->s, s, len);
	return e->klen == klen && !memcmp(e->key, key, klen);
}

static void model_add(struct model *m, const char *s, size_t len)
{
	struct entry *e = &m->n[m->count++];

	e->s = s;
	e->len = len;
	key_of(s, len, &e->key, &e->klen);
}

static int ref_check_name(const char *s, size_t len)
{
	if (len > SFS_FOLD_NAME_MAX)
		return -ENAMETOOLONG;
	if (!len || memchr(s, '/', len) || memchr(s, '\0', len))
		return -EINVAL;
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return -EINVAL;
	return 0;
}

static int model_find(const struct model *m, const char *s, size_t len)
{
	for (size_t i = 0; i < m->count; i++)
		if (m->n[i].len == len && !memcmp(m->n[i].s, s, len))
			return (int)i;
	return -1;
}

static int bytecmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);

	return r ? r : alen < blen ? -1 : alen > blen;
}

/* The class of s (whose fold is key) in the model: its size and its bytewise-smallest member. */
static size_t model_class(const struct model *m, const char *s, size_t len, const char *key,
                          size_t klen, const struct entry **min)
{
	size_t k = 0;

	*min = NULL;
	for (size_t i = 0; i < m->count; i++) {
		if (!same_key(&m->n[i], key, klen, s, len))
			continue;
		k++;
		if (!*min || bytecmp(m->n[i].s, m->n[i].len, (*min)->s, (*min)->len) < 0)
			*min = &m->n[i];
	}
	return k;
}

static void model_remove(struct model *m, int i)
{
	free(m->n[i].key);
	m->n[i] = m->n[--m->count];
}

static void check_lookup(const struct sfs_foldidx *idx, const struct model *m, const char *s,
                         size_t len)
{
	struct sfs_foldidx_hit hit;
	const struct entry *min;
	int rc = sfs_foldidx_lookup(idx, s, len, &hit), bad = ref_check_name(s, len);
	size_t k, klen;
	char *key;
	bool exact;

	if (bad) {
		FUZZ_CHECK(rc == bad, "lookup of a refused name: %d, expected %d", rc, bad);
		FUZZ_CHECK(!sfs_foldidx_listed(idx, s, len), "a refused name is listed");
		return;
	}
	key_of(s, len, &key, &klen);
	k = model_class(m, s, len, key, klen, &min);
	free(key);
	if (!k) {
		FUZZ_CHECK(rc == -ENOENT, "lookup found a name of no class: rc %d", rc);
		FUZZ_CHECK(sfs_foldidx_listed(idx, s, len), "a new class is not listed");
		return;
	}
	exact = model_find(m, s, len) >= 0;
	FUZZ_CHECK(rc == 0, "lookup missed a class of %zu names: rc %d", k, rc);
	FUZZ_CHECK(hit.exact == exact, "hit.exact %d, expected %d", hit.exact, exact);
	if (exact)
		FUZZ_CHECK(hit.len == len && !memcmp(hit.name, s, len), "exact hit is another name");
	else
		FUZZ_CHECK(hit.len == min->len && !memcmp(hit.name, min->s, min->len),
		           "hit is not the class's smallest member");
	FUZZ_CHECK(hit.name[hit.len] == '\0', "hit name not terminated");
	FUZZ_CHECK(hit.collided == (k > 1), "hit.collided %d for a class of %zu", hit.collided, k);
	FUZZ_CHECK(sfs_foldidx_listed(idx, s, len) == (bytecmp(s, len, min->s, min->len) <= 0),
	           "listed wrong for a class of %zu", k);
}

static void check_stats(const struct sfs_foldidx *idx, const struct model *m)
{
	struct sfs_foldidx_stats st;
	size_t classes = 0;

	for (size_t i = 0; i < m->count; i++) {
		const struct entry *min;
		model_class(m, m->n[i].s, m->n[i].len, m->n[i].key, m->n[i].klen, &min);
		if (min == &m->n[i])
			classes++;
	}
	sfs_foldidx_stats(idx, &st);
	FUZZ_CHECK(st.names == m->count && st.classes == classes &&
	           st.collisions == m->count - classes,
	           "stats names %zu classes %zu, model %zu and %zu", st.names, st.classes, m->count,
	           classes);
}

/* The final names indexed at once, and that index through the cache: the same answers. */
static void check_rebuilt(const struct sfs_foldidx *idx, const struct model *m,
                          const struct name *probes, size_t np)
{
	const char *names[MODEL_MAX];
	struct sfs_foldidx *built;
	struct sfs_foldcache *c;
	struct sfs_folddir *d;
	char *copies[MODEL_MAX];

	for (size_t i = 0; i < m->count; i++) {
		copies[i] = strndup(m->n[i].s, m->n[i].len);
		names[i] = copies[i] ? copies[i] : ".";
	}
	if (sfs_foldidx_from_names(&built, names, m->count) == 0) {
		check_stats(built, m);
		for (size_t i = 0; i < np; i++)
			check_lookup(built, m, probes[i].s, probes[i].len);
		if (!locks_ready) {
			sfs_dirlock_init(&locks);
			locks_ready = true;
		}
		if (sfs_foldcache_new(&c, 1 << 20, &locks) == 0) {
			uint64_t stamp = sfs_foldcache_stamp(c, 1, 2);
			if (sfs_foldcache_insert(c, 1, 2, stamp, built, &d) == 0) {
				for (size_t i = 0; i < np; i++) {
					struct sfs_foldidx_hit a, b;
					int ra = sfs_foldcache_lookup(c, 1, 2, probes[i].s, probes[i].len, &a);
					int rb = sfs_foldidx_lookup(idx, probes[i].s, probes[i].len, &b);
					FUZZ_CHECK(ra == rb && (ra || (a.len == b.len &&
					           !memcmp(a.name, b.name, a.len) && a.exact == b.exact)),
					           "the cached index answers otherwise");
				}
				sfs_foldcache_put(c, d);
			}
			sfs_foldcache_forget(c, 1, 2);
			sfs_foldcache_free(c);
		} else {
			sfs_foldidx_free(built);
		}
	}
	for (size_t i = 0; i < m->count; i++)
		free(copies[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct model m;
	static struct name rec[MAX_RECORDS];
	const char *p = (const char *)data, *end = p + size;
	struct sfs_foldidx *idx;
	size_t nrec = 0;

	while (p <= end && nrec < MAX_RECORDS) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		const char *e = slash ? slash : end;
		rec[nrec].s = p;
		rec[nrec].len = (size_t)(e - p);
		nrec++;
		p = e + 1;
	}
	for (size_t i = 0; i < nrec; i++) {
		const char *s = rec[i].s + (rec[i].len > 0);
		size_t len = rec[i].len - (rec[i].len > 0);
		check_fold(s, len);
		if (i > 0)
			check_pair(s, len, rec[i - 1].s + (rec[i - 1].len > 0),
			           rec[i - 1].len - (rec[i - 1].len > 0));
	}
	if (sfs_foldidx_new(&idx, 0))
		return 0;
	for (size_t i = 0; i < nrec; i++) {
		unsigned op = rec[i].len ? (unsigned char)rec[i].s[0] % 5 : 3;
		const char *s = rec[i].s + (rec[i].len > 0), *t;
		size_t len = rec[i].len - (rec[i].len > 0), tlen;
		int bad = ref_check_name(s, len), at = bad ? -1 : model_find(&m, s, len), rc;

		switch (op) {
		case 0:
			rc = sfs_foldidx_add(idx, s, len);
			if (rc == -ENOMEM)
				goto out;
			FUZZ_CHECK(rc == (bad ? bad : at >= 0 ? -EEXIST : 0), "add: rc %d", rc);
			if (!rc && m.count < MODEL_MAX)
				model_add(&m, s, len);
			else if (!rc) /* the model is full: undo */
				sfs_foldidx_remove(idx, s, len);
			break;
		case 1:
			rc = sfs_foldidx_remove(idx, s, len);
			FUZZ_CHECK(rc == (bad ? bad : at < 0 ? -ENOENT : 0), "remove: rc %d", rc);
			if (!rc)
				model_remove(&m, at);
			break;
		case 2:
			if (i + 1 >= nrec)
				break;
			t = rec[++i].s;
			tlen = rec[i].len;
			rc = sfs_foldidx_rename(idx, s, len, t, tlen);
			if (rc == -ENOMEM)
				goto out;
			if (!bad)
				bad = ref_check_name(t, tlen);
			FUZZ_CHECK(rc == (bad ? bad : at < 0 ? -ENOENT : 0), "rename: rc %d", rc);
			if (rc || (len == tlen && !memcmp(s, t, len)))
				break;
			model_remove(&m, at);
			if (model_find(&m, t, tlen) < 0)
				model_add(&m, t, tlen);
			break;
		case 3:
		case 4:
			break; /* lookups: checked below for every record */
		}
		check_lookup(idx, &m, s, len);
	}
	check_stats(idx, &m);
	for (size_t i = 0; i < nrec; i++)
		check_lookup(idx, &m, rec[i].s, rec[i].len);
	check_rebuilt(idx, &m, rec, nrec);
out:
	while (m.count)
		model_remove(&m, 0);
	sfs_foldidx_free(idx);
	return 0;
}
