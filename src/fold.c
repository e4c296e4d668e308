/* Casefold views (see fold.h): the fold itself (utf8proc, shaped to match fs/unicode), the
 * per-directory index of folded names, and the bounded cache of indexes. Nothing here touches
 * a file system; the request path reads directories and reports their changes. */
#include "fold.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

/* ==== The fold ============================================================================= */

/* No IGNORE here: default-ignorables are stripped after canonical ordering instead (see
 * strip_and_encode). STABLE is a no-op for decomposition and kept as a statement of intent. */
#define FOLD_OPTIONS (UTF8PROC_DECOMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_STABLE)

/* Length of the well-formed sequence at s, or 0. The kernel's trie (fs/unicode/mkutf8data.c)
 * holds exactly these sequences: every code point but the surrogates, in shortest form. Its
 * fold is laxer than its strict-mode check: utf8byte() passes a stray continuation byte after a
 * character through as part of it, so "A\xBF" matches "a\xBF" on casefold ext4 without
 * strict. SPEC §5.3 matches every invalid name byte-exactly, as strict-mode validation sees it. */
static size_t utf8_next(const unsigned char *s, size_t left)
{
	uint32_t v, min;
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		n = 2, v = s[0] & 0x1F, min = 0x80;
	} else if ((s[0] & 0xF0) == 0xE0) {
		n = 3, v = s[0] & 0x0F, min = 0x800;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		n = 4, v = s[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (left < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	return n;
}

bool sfs_fold_valid_utf8(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	while (len) {
		n = utf8_next(p, len);
		if (!n)
			return false;
		p += n;
		len -= n;
	}
	return true;
}

/* Default_Ignorable_Code_Point also covers these reserved code points (DerivedCoreProperties.txt,
 * the same ranges in Unicode 12.1 and 15.0), and the kernel strips them; utf8proc 2.8 marks only
 * assigned code points ignorable, so it would keep them. */
static bool reserved_ignorable(int32_t c)
{
	return c == 0x2065 || (c >= 0xFFF0 && c <= 0xFFF8) || c == 0xE0000 ||
	       (c >= 0xE0002 && c <= 0xE001F) || (c >= 0xE0080 && c <= 0xE00FF) ||
	       (c >= 0xE01F0 && c <= 0xE0FFF);
}

static bool ignorable(int32_t c)
{
	return utf8proc_get_property(c)->ignorable || reserved_ignorable(c);
}

/* Writes the folded code points as UTF-8, leaving out the default-ignorables. They are dropped
 * only now, after canonical ordering, because the kernel's trie maps them to "" but keeps them
 * as starters (CCC 0): combining marks on either side of one are never reordered across it.
 * utf8proc's IGNORE drops them first and would reorder a+U+0301+U+00AD+U+0323 to a+0323+0301
 * where the kernel gives a+0301+0323. */
static int strip_and_encode(const int32_t *cps, size_t n, char *out, size_t outsize,
                            size_t *outlen)
{
	utf8proc_uint8_t b[4];
	size_t o = 0, i, k;

	for (i = 0; i < n; i++) {
		if (ignorable(cps[i]))
			continue;
		k = (size_t)utf8proc_encode_char(cps[i], b);
		if (o + k > outsize)
			return -ENAMETOOLONG;
		memcpy(out + o, b, k);
		o += k;
	}
	*outlen = o;
	return 0;
}

/* A folded code point is at least one byte, so SFS_FOLD_MAXLEN code points always do. */
#define FOLD_STACK_CPS SFS_FOLD_KEY_MAX

/* Decomposes and case-folds a valid name into code points: in buf if they fit, otherwise in a
 * buffer allocated into *heap. Returns how many, -ENOMEM, or -EILSEQ if utf8proc disagrees
 * with sfs_fold_valid_utf8 (the name is then treated as invalid). */
static ssize_t fold_cps(const char *name, size_t len, int32_t *buf, size_t cap, int32_t **heap)
{
	const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)name;
	utf8proc_ssize_t n;

	n = utf8proc_decompose(s, (utf8proc_ssize_t)len, buf, (utf8proc_ssize_t)cap, FOLD_OPTIONS);
	if (n >= 0 && (size_t)n > cap) {
		*heap = malloc((size_t)n * sizeof(**heap));
		if (!*heap)
			return -ENOMEM;
		cap = (size_t)n;
		n = utf8proc_decompose(s, (utf8proc_ssize_t)len, *heap, n, FOLD_OPTIONS);
	}
	if (n < 0 || (size_t)n > cap)
		return -EILSEQ;
	return n;
}

static int copy_exact(const char *name, size_t len, char *out, size_t outsize, size_t *outlen)
{
	if (len > outsize)
		return -ENAMETOOLONG;
	memcpy(out, name, len);
	*outlen = len;
	return 0;
}

/* Most names are ASCII, where the fold is A-Z -> a-z alone (no decompositions, no ignorables):
 * this skips utf8proc for them. Returns false, touching nothing, for any other name. */
static bool fold_ascii(const char *name, size_t len, char *out, size_t outsize, size_t *outlen,
                       int *rc)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)name[i] >= 0x80)
			return false;
	*rc = len > outsize ? -ENAMETOOLONG : 0;
	if (*rc)
		return true;
	for (i = 0; i < len; i++)
		out[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
	*outlen = len;
	return true;
}

int sfs_fold(const char *name, size_t len, char *out, size_t outsize, size_t *outlen,
             bool *invalid)
{
	int32_t stack[FOLD_STACK_CPS], *heap = NULL;
	ssize_t n;
	int rc;

	*invalid = false;
	if (fold_ascii(name, len, out, outsize, outlen, &rc))
		return rc;
	*invalid = !sfs_fold_valid_utf8(name, len);
	if (*invalid)
		return copy_exact(name, len, out, outsize, outlen);
	n = fold_cps(name, len, stack, FOLD_STACK_CPS, &heap);
	if (n == -EILSEQ) {
		*invalid = true;
		rc = copy_exact(name, len, out, outsize, outlen);
	} else if (n < 0) {
		rc = (int)n;
	} else {
		rc = strip_and_encode(heap ? heap : stack, (size_t)n, out, outsize, outlen);
	}
	free(heap);
	return rc;
}

/* Folds into buf, or into *heap when the name is longer than the index ever holds. */
static int fold_any(const char *s, size_t len, char *buf, size_t size, char **heap,
                    const char **key, size_t *klen)
{
	bool invalid;

	*key = buf;
	if (SFS_FOLD_MAXLEN(len) > size) {
		*heap = malloc(SFS_FOLD_MAXLEN(len));
		if (!*heap)
			return -ENOMEM;
		*key = *heap;
		size = SFS_FOLD_MAXLEN(len);
	}
	return sfs_fold(s, len, (char *)*key, size, klen, &invalid);
}

bool sfs_fold_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	char abuf[SFS_FOLD_KEY_MAX], bbuf[SFS_FOLD_KEY_MAX], *aheap = NULL, *bheap = NULL;
	const char *ak, *bk;
	size_t akl, bkl;
	bool eq;

	if (fold_any(a, alen, abuf, sizeof(abuf), &aheap, &ak, &akl) ||
	    fold_any(b, blen, bbuf, sizeof(bbuf), &bheap, &bk, &bkl))
		eq = alen == blen && !memcmp(a, b, alen);
	else
		eq = akl == bkl && !memcmp(ak, bk, akl);
	free(aheap);
	free(bheap);
	return eq;
}

const char *sfs_fold_unicode_version(void)
{
	return utf8proc_unicode_version();
}

/* ==== The per-directory index ============================================================== */

/* Two chained hash tables over the same entries: by folded key (class heads only) and by exact
 * name (every entry), so that adding, removing and finding an exact spelling stay O(1) even in a
 * class of thousands of case variants. Both share one bucket count, kept >= names. */
struct fentry {
	struct fentry *knext;         /* key table chain: class heads only */
	struct fentry *enext;         /* exact table chain: every name */
	struct fentry *cnext, *cprev; /* the class, a ring; its head is the bytewise-smallest */
	uint32_t khash, ehash;
	uint16_t nlen, klen;
	bool key_is_name;             /* the name folds to itself (most names): stored once */
	char bytes[];                 /* the name, then the key unless key_is_name */
};

struct sfs_foldidx {
	struct fentry **ktab, **etab;
	size_t mask;                  /* buckets - 1 */
	size_t names, classes, bytes;
	uint64_t k0, k1;              /* SipHash key: users choose the names, so the hash is keyed */
};

#define MIN_BUCKETS 16
#define MAX_INITIAL_BUCKETS ((size_t)1 << 24)
/* What malloc adds to each block (glibc: an 8-byte header, 16-byte granules), for the budget. */
#define ALLOC_OVERHEAD 16

/* A name being looked for, folded and hashed once per operation. */
struct probe {
	const char *name;
	size_t len, klen;
	uint32_t khash, ehash;
	char key[SFS_FOLD_KEY_MAX];
};

/* SipHash-1-3 (as in Rust's and Python's tables): flooding a directory with names that collide
 * in the table would otherwise make each lookup a scan. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sipround(uint64_t v[4])
{
	v[0] += v[1], v[1] = ROTL(v[1], 13), v[1] ^= v[0], v[0] = ROTL(v[0], 32);
	v[2] += v[3], v[3] = ROTL(v[3], 16), v[3] ^= v[2];
	v[0] += v[3], v[3] = ROTL(v[3], 21), v[3] ^= v[0];
	v[2] += v[1], v[1] = ROTL(v[1], 17), v[1] ^= v[2], v[2] = ROTL(v[2], 32);
}

static uint32_t siphash(const struct sfs_foldidx *idx, const char *s, size_t len)
{
	uint64_t v[4] = { idx->k0 ^ 0x736f6d6570736575ULL, idx->k1 ^ 0x646f72616e646f6dULL,
			  idx->k0 ^ 0x6c7967656e657261ULL, idx->k1 ^ 0x7465646279746573ULL };
	uint64_t m, last = (uint64_t)len << 56;
	size_t i, j;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, s + i, 8); /* host order: the hash never leaves the process */
		v[3] ^= m, sipround(v), v[0] ^= m;
	}
	for (j = 0; i + j < len; j++)
		last |= (uint64_t)(unsigned char)s[i + j] << (8 * j);
	v[3] ^= last, sipround(v), v[0] ^= last;
	v[2] ^= 0xff;
	sipround(v), sipround(v), sipround(v);
	return (uint32_t)(v[0] ^ v[1] ^ v[2] ^ v[3]);
}

static void seed(struct sfs_foldidx *idx)
{
	uint64_t k[2];
	struct timespec ts;

	if (getrandom(k, sizeof(k), GRND_NONBLOCK) == (ssize_t)sizeof(k)) {
		idx->k0 = k[0], idx->k1 = k[1];
		return;
	}
	/* No entropy yet (early boot): unpredictable enough to spread names, not to resist attack. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	idx->k0 = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)idx;
	idx->k1 = (uint64_t)ts.tv_sec * 0xBF58476D1CE4E5B9ULL ^ (uint64_t)getpid();
}

static int bytecmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);

	if (r)
		return r;
	return alen < blen ? -1 : alen > blen;
}

static const char *fe_key(const struct fentry *e)
{
	return e->key_is_name ? e->bytes : e->bytes + e->nlen;
}

static size_t fe_size(const struct fentry *e)
{
	return offsetof(struct fentry, bytes) + e->nlen + (e->key_is_name ? 0 : e->klen) +
	       ALLOC_OVERHEAD;
}

static int check_name(const char *name, size_t len)
{
	if (len > SFS_FOLD_NAME_MAX)
		return -ENAMETOOLONG;
	if (!len || memchr(name, '/', len) || memchr(name, '\0', len))
		return -EINVAL;
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return -EINVAL;
	return 0;
}

static int probe_init(const struct sfs_foldidx *idx, const char *name, size_t len,
                      struct probe *p)
{
	bool invalid;
	int rc = check_name(name, len);

	if (!rc)
		rc = sfs_fold(name, len, p->key, sizeof(p->key), &p->klen, &invalid);
	if (rc)
		return rc;
	p->name = name;
	p->len = len;
	p->ehash = siphash(idx, name, len);
	p->khash = p->klen == len && !memcmp(p->key, name, len) ? p->ehash
								  : siphash(idx, p->key, p->klen);
	return 0;
}

/* The link that holds the head of p's class, or the NULL that ends the chain. */
static struct fentry **find_class(const struct sfs_foldidx *idx, const struct probe *p)
{
	struct fentry **link = &idx->ktab[p->khash & idx->mask];

	while (*link && !((*link)->khash == p->khash && (*link)->klen == p->klen &&
			  !memcmp(fe_key(*link), p->key, p->klen)))
		link = &(*link)->knext;
	return link;
}

/* The link that holds p's exact name, or the NULL that ends the chain. */
static struct fentry **find_exact(const struct sfs_foldidx *idx, const struct probe *p)
{
	struct fentry **link = &idx->etab[p->ehash & idx->mask];

	while (*link && !((*link)->ehash == p->ehash && (*link)->nlen == p->len &&
			  !memcmp((*link)->bytes, p->name, p->len)))
		link = &(*link)->enext;
	return link;
}

static struct fentry *entry_new(const struct probe *p)
{
	bool same = p->klen == p->len && !memcmp(p->key, p->name, p->len);
	struct fentry *e = malloc(offsetof(struct fentry, bytes) + p->len + (same ? 0 : p->klen));

	if (!e)
		return NULL;
	e->khash = p->khash;
	e->ehash = p->ehash;
	e->nlen = (uint16_t)p->len;
	e->klen = (uint16_t)p->klen;
	e->key_is_name = same;
	memcpy(e->bytes, p->name, p->len);
	if (!same)
		memcpy(e->bytes + p->len, p->key, p->klen);
	return e;
}

static int fe_cmp(const struct fentry *a, const struct fentry *b)
{
	return bytecmp(a->bytes, a->nlen, b->bytes, b->nlen);
}

/* Puts head in old's place in the key chain. */
static void replace_head(struct fentry **klink, struct fentry *old, struct fentry *head)
{
	head->knext = old->knext;
	old->knext = NULL;
	*klink = head;
}

static void class_insert(struct sfs_foldidx *idx, struct fentry **klink, struct fentry *e)
{
	struct fentry *head = *klink;

	if (!head) {
		e->cnext = e->cprev = e;
		e->knext = NULL;
		*klink = e;
		idx->classes++;
		return;
	}
	e->knext = NULL;
	e->cnext = head->cnext;
	e->cprev = head;
	head->cnext->cprev = e;
	head->cnext = e;
	if (fe_cmp(e, head) < 0)
		replace_head(klink, head, e);
}

static struct fentry *smallest(struct fentry *ring)
{
	struct fentry *min = ring, *e;

	for (e = ring->cnext; e != ring; e = e->cnext)
		if (fe_cmp(e, min) < 0)
			min = e;
	return min;
}

static void class_remove(struct sfs_foldidx *idx, struct fentry **klink, struct fentry *e)
{
	if (e->cnext == e) {
		*klink = e->knext;
		idx->classes--;
		return;
	}
	e->cprev->cnext = e->cnext;
	e->cnext->cprev = e->cprev;
	if (*klink == e)
		replace_head(klink, e, smallest(e->cnext));
}

static size_t tables_bytes(size_t buckets)
{
	return 2 * (buckets * sizeof(struct fentry *) + ALLOC_OVERHEAD);
}

/* Rehashes into nb buckets. Failing to allocate keeps the old tables: chains grow longer,
 * nothing breaks. */
static void resize(struct sfs_foldidx *idx, size_t nb)
{
	struct fentry **kt = calloc(nb, sizeof(*kt)), **et = calloc(nb, sizeof(*et)), *e, *next;
	size_t i;

	if (!kt || !et) {
		free(kt);
		free(et);
		return;
	}
	for (i = 0; i <= idx->mask; i++) {
		for (e = idx->ktab[i]; e; e = next) {
			next = e->knext;
			e->knext = kt[e->khash & (nb - 1)];
			kt[e->khash & (nb - 1)] = e;
		}
		for (e = idx->etab[i]; e; e = next) {
			next = e->enext;
			e->enext = et[e->ehash & (nb - 1)];
			et[e->ehash & (nb - 1)] = e;
		}
	}
	free(idx->ktab);
	free(idx->etab);
	idx->bytes = idx->bytes - tables_bytes(idx->mask + 1) + tables_bytes(nb);
	idx->ktab = kt;
	idx->etab = et;
	idx->mask = nb - 1;
}

/* Doubles past one name per bucket; halves below one in eight, so that a directory emptied
 * after a burst does not keep its tables. */
static void maybe_resize(struct sfs_foldidx *idx)
{
	size_t nb = idx->mask + 1;

	if (idx->names > nb)
		resize(idx, nb * 2);
	else if (nb > MIN_BUCKETS && idx->names < nb / 8)
		resize(idx, nb / 2);
}

int sfs_foldidx_new(struct sfs_foldidx **out, size_t expect)
{
	struct sfs_foldidx *idx = calloc(1, sizeof(*idx));
	size_t nb = MIN_BUCKETS;

	while (nb < expect && nb < MAX_INITIAL_BUCKETS)
		nb *= 2;
	if (!idx)
		return -ENOMEM;
	idx->ktab = calloc(nb, sizeof(*idx->ktab));
	idx->etab = calloc(nb, sizeof(*idx->etab));
	if (!idx->ktab || !idx->etab) {
		sfs_foldidx_free(idx);
		return -ENOMEM;
	}
	idx->mask = nb - 1;
	idx->bytes = sizeof(*idx) + ALLOC_OVERHEAD + tables_bytes(nb);
	seed(idx);
	*out = idx;
	return 0;
}

void sfs_foldidx_free(struct sfs_foldidx *idx)
{
	struct fentry *e, *next;
	size_t i;

	if (!idx)
		return;
	for (i = 0; idx->etab && i <= idx->mask; i++) {
		for (e = idx->etab[i]; e; e = next) {
			next = e->enext;
			free(e);
		}
	}
	free(idx->ktab);
	free(idx->etab);
	free(idx);
}

int sfs_foldidx_from_names(struct sfs_foldidx **out, const char *const *names, size_t n)
{
	struct sfs_foldidx *idx;
	size_t i;
	int rc = sfs_foldidx_new(&idx, n);

	if (rc)
		return rc;
	for (i = 0; !rc && i < n; i++) {
		if (!strcmp(names[i], ".") || !strcmp(names[i], ".."))
			continue;
		rc = sfs_foldidx_add(idx, names[i], strlen(names[i]));
		if (rc == -EEXIST)
			rc = 0;
	}
	if (rc) {
		sfs_foldidx_free(idx);
		return rc;
	}
	*out = idx;
	return 0;
}

static int add_probe(struct sfs_foldidx *idx, const struct probe *p)
{
	struct fentry **elink = find_exact(idx, p), *e;

	if (*elink)
		return -EEXIST;
	e = entry_new(p);
	if (!e)
		return -ENOMEM;
	e->enext = NULL;
	*elink = e;
	class_insert(idx, find_class(idx, p), e);
	idx->names++;
	idx->bytes += fe_size(e);
	maybe_resize(idx);
	return 0;
}

static int remove_probe(struct sfs_foldidx *idx, const struct probe *p)
{
	struct fentry **elink = find_exact(idx, p), *e = *elink;

	if (!e)
		return -ENOENT;
	*elink = e->enext;
	class_remove(idx, find_class(idx, p), e);
	idx->names--;
	idx->bytes -= fe_size(e);
	free(e);
	maybe_resize(idx);
	return 0;
}

int sfs_foldidx_add(struct sfs_foldidx *idx, const char *name, size_t len)
{
	struct probe p;
	int rc = probe_init(idx, name, len, &p);

	return rc ? rc : add_probe(idx, &p);
}

int sfs_foldidx_remove(struct sfs_foldidx *idx, const char *name, size_t len)
{
	struct probe p;
	int rc = probe_init(idx, name, len, &p);

	return rc ? rc : remove_probe(idx, &p);
}

/* Adds first, so that running out of memory leaves the index as it was. */
int sfs_foldidx_rename(struct sfs_foldidx *idx, const char *from, size_t fromlen, const char *to,
                       size_t tolen)
{
	struct probe f, t;
	int rc = probe_init(idx, from, fromlen, &f);

	if (!rc)
		rc = probe_init(idx, to, tolen, &t);
	if (rc)
		return rc;
	if (!*find_exact(idx, &f))
		return -ENOENT;
	if (fromlen == tolen && !memcmp(from, to, fromlen))
		return 0;
	rc = add_probe(idx, &t);
	if (rc && rc != -EEXIST) /* -EEXIST: rename replaces the target, which keeps its entry */
		return rc;
	return remove_probe(idx, &f);
}

int sfs_foldidx_lookup(const struct sfs_foldidx *idx, const char *name, size_t len,
                       struct sfs_foldidx_hit *hit)
{
	struct fentry *head, *exact, *rep;
	struct probe p;
	int rc = probe_init(idx, name, len, &p);

	if (rc)
		return rc;
	head = *find_class(idx, &p);
	if (!head)
		return -ENOENT;
	exact = *find_exact(idx, &p);
	rep = exact ? exact : head;
	memcpy(hit->name, rep->bytes, rep->nlen);
	hit->name[rep->nlen] = '\0';
	hit->len = rep->nlen;
	hit->exact = exact != NULL;
	hit->collided = head->cnext != head;
	return 0;
}

bool sfs_foldidx_listed(const struct sfs_foldidx *idx, const char *name, size_t len)
{
	struct fentry *head;
	struct probe p;

	if (probe_init(idx, name, len, &p))
		return false;
	head = *find_class(idx, &p);
	return !head || bytecmp(name, len, head->bytes, head->nlen) <= 0;
}

void sfs_foldidx_stats(const struct sfs_foldidx *idx, struct sfs_foldidx_stats *st)
{
	st->names = idx->names;
	st->classes = idx->classes;
	st->collisions = idx->names - idx->classes;
	st->bytes = idx->bytes;
}

/* ==== The cache of indexes ================================================================= */

#define CHANGE_STRIPES 64
#define MIN_DIR_BUCKETS 64

struct stripe {
	pthread_mutex_t lock;     /* recursive: a builder may hold it as a change lock already */
	_Atomic uint64_t epoch;   /* bumped by every change and forget of its directories */
};

struct sfs_folddir {
	struct sfs_folddir *hnext;               /* cache table chain; victim list once dropped */
	struct sfs_folddir *lru_prev, *lru_next; /* most recently used first */
	uint64_t dev, ino;
	struct sfs_foldidx *idx;
	pthread_rwlock_t lock;                   /* readers: rdlock; the one writer: note_* */
	/* Under the cache mutex: */
	unsigned pins;
	bool dead;                               /* out of table and list; freed by the last put */
	struct sfs_foldidx_stats acct;           /* what the totals count for this index */
};

struct sfs_foldcache {
	pthread_mutex_t lock;                    /* the cache mutex: everything below */
	struct sfs_folddir **tab;
	size_t mask, dirs;
	struct sfs_folddir *head, *tail;
	size_t bytes, budget, names, collisions;
	uint64_t hits, misses, evictions;
	struct stripe stripes[CHANGE_STRIPES];
};

static uint64_t dir_hash(uint64_t dev, uint64_t ino)
{
	uint64_t x = ino ^ (dev * 0x9E3779B97F4A7C15ULL);

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static struct stripe *stripe_of(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	return &c->stripes[dir_hash(dev, ino) >> 58];
}

int sfs_foldcache_new(struct sfs_foldcache **out, size_t budget)
{
	struct sfs_foldcache *c = calloc(1, sizeof(*c));
	pthread_mutexattr_t attr;
	int i;

	if (!c)
		return -ENOMEM;
	c->tab = calloc(MIN_DIR_BUCKETS, sizeof(*c->tab));
	if (!c->tab) {
		free(c);
		return -ENOMEM;
	}
	c->mask = MIN_DIR_BUCKETS - 1;
	c->budget = budget;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	for (i = 0; i < CHANGE_STRIPES; i++) {
		pthread_mutex_init(&c->stripes[i].lock, &attr);
		atomic_init(&c->stripes[i].epoch, 0);
	}
	pthread_mutexattr_destroy(&attr);
	*out = c;
	return 0;
}

static void dir_free(struct sfs_folddir *d)
{
	pthread_rwlock_destroy(&d->lock);
	sfs_foldidx_free(d->idx);
	free(d);
}

static void free_victims(struct sfs_folddir *d)
{
	struct sfs_folddir *next;

	for (; d; d = next) {
		next = d->hnext;
		dir_free(d);
	}
}

void sfs_foldcache_free(struct sfs_foldcache *c)
{
	size_t i;
	int s;

	if (!c)
		return;
	for (i = 0; i <= c->mask; i++)
		free_victims(c->tab[i]);
	for (s = 0; s < CHANGE_STRIPES; s++)
		pthread_mutex_destroy(&c->stripes[s].lock);
	pthread_mutex_destroy(&c->lock);
	free(c->tab);
	free(c);
}

static struct sfs_folddir **table_link(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir **link = &c->tab[dir_hash(dev, ino) & c->mask];

	while (*link && !((*link)->dev == dev && (*link)->ino == ino))
		link = &(*link)->hnext;
	return link;
}

static void table_grow_locked(struct sfs_foldcache *c)
{
	size_t nb = (c->mask + 1) * 2, i;
	struct sfs_folddir **t = calloc(nb, sizeof(*t)), *d, *next;

	if (!t)
		return; /* longer chains, still correct */
	for (i = 0; i <= c->mask; i++) {
		for (d = c->tab[i]; d; d = next) {
			next = d->hnext;
			d->hnext = t[dir_hash(d->dev, d->ino) & (nb - 1)];
			t[dir_hash(d->dev, d->ino) & (nb - 1)] = d;
		}
	}
	free(c->tab);
	c->tab = t;
	c->mask = nb - 1;
}

static void lru_unlink(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	if (d->lru_prev)
		d->lru_prev->lru_next = d->lru_next;
	else
		c->head = d->lru_next;
	if (d->lru_next)
		d->lru_next->lru_prev = d->lru_prev;
	else
		c->tail = d->lru_prev;
	d->lru_prev = d->lru_next = NULL;
}

static void lru_push_front(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	d->lru_prev = NULL;
	d->lru_next = c->head;
	if (c->head)
		c->head->lru_prev = d;
	c->head = d;
	if (!c->tail)
		c->tail = d;
}

static size_t dir_bytes(const struct sfs_foldidx_stats *st)
{
	return st->bytes + sizeof(struct sfs_folddir) + ALLOC_OVERHEAD;
}

/* Replaces d's share of the totals with st. */
static void account_locked(struct sfs_foldcache *c, struct sfs_folddir *d,
                           const struct sfs_foldidx_stats *st)
{
	c->bytes = c->bytes - (d->acct.bytes ? dir_bytes(&d->acct) : 0) + dir_bytes(st);
	c->names = c->names - d->acct.names + st->names;
	c->collisions = c->collisions - d->acct.collisions + st->collisions;
	d->acct = *st;
}

/* Takes d out of the table, the LRU list and the totals; the caller frees it once unpinned. */
static void drop_locked(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	struct sfs_folddir **link = table_link(c, d->dev, d->ino);

	*link = d->hnext;
	d->hnext = NULL;
	lru_unlink(c, d);
	c->bytes -= dir_bytes(&d->acct);
	c->names -= d->acct.names;
	c->collisions -= d->acct.collisions;
	c->dirs--;
	d->dead = true;
}

/* Drops unpinned indexes from the cold end while over budget; returns them, to be freed
 * outside the cache mutex. */
static struct sfs_folddir *evict_locked(struct sfs_foldcache *c)
{
	struct sfs_folddir *victims = NULL, *d = c->tail, *prev;

	while (c->bytes > c->budget && d) {
		prev = d->lru_prev;
		if (!d->pins) {
			drop_locked(c, d);
			d->hnext = victims;
			victims = d;
			c->evictions++;
		}
		d = prev;
	}
	return victims;
}

static struct sfs_folddir *pin_locked(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d = *table_link(c, dev, ino);

	if (d) {
		d->pins++;
		lru_unlink(c, d);
		lru_push_front(c, d);
	}
	return d;
}

struct sfs_folddir *sfs_foldcache_get(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d;

	pthread_mutex_lock(&c->lock);
	d = pin_locked(c, dev, ino);
	if (d)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	return d;
}

void sfs_foldcache_put(struct sfs_foldcache *c, struct sfs_folddir *d)
{
	struct sfs_folddir *victims;
	bool last;

	pthread_mutex_lock(&c->lock);
	last = !--d->pins && d->dead;
	victims = evict_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (last)
		dir_free(d);
	free_victims(victims);
}

const struct sfs_foldidx *sfs_folddir_rdlock(struct sfs_folddir *d)
{
	pthread_rwlock_rdlock(&d->lock);
	return d->idx;
}

void sfs_folddir_unlock(struct sfs_folddir *d)
{
	pthread_rwlock_unlock(&d->lock);
}

uint64_t sfs_foldcache_stamp(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	return atomic_load(&stripe_of(c, dev, ino)->epoch);
}

static struct sfs_folddir *dir_new(uint64_t dev, uint64_t ino, struct sfs_foldidx *idx)
{
	struct sfs_folddir *d = calloc(1, sizeof(*d));
	pthread_rwlockattr_t attr;
	int rc;

	if (!d)
		return NULL;
	/* glibc prefers readers by default: a stream of lookups would starve note_*, which holds
	 * the change lock meanwhile. Readers never take the read lock twice, so this is safe. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&d->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc) {
		free(d);
		return NULL;
	}
	d->dev = dev;
	d->ino = ino;
	d->idx = idx;
	return d;
}

/* Under the stripe lock no change of the directory is half done, so an unchanged epoch means
 * every change either preceded the stamp (and the read saw it) or has not begun. */
int sfs_foldcache_insert(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, uint64_t stamp,
                         struct sfs_foldidx *idx, struct sfs_folddir **out)
{
	struct stripe *s = stripe_of(c, dev, ino);
	struct sfs_folddir *d = dir_new(dev, ino, idx), *victims, *won;
	struct sfs_foldidx_stats st;

	if (!d) {
		sfs_foldidx_free(idx);
		return -ENOMEM;
	}
	sfs_foldidx_stats(idx, &st);
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->epoch) != stamp) {
		pthread_mutex_unlock(&s->lock);
		dir_free(d);
		return -EAGAIN;
	}
	pthread_mutex_lock(&c->lock);
	won = pin_locked(c, dev, ino);
	if (!won) {
		if (c->dirs >= c->mask + 1)
			table_grow_locked(c);
		*table_link(c, dev, ino) = d;
		lru_push_front(c, d);
		c->dirs++;
		d->pins = 1;
		account_locked(c, d, &st);
	}
	victims = evict_locked(c);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&s->lock);
	if (won)
		dir_free(d);
	free_victims(victims);
	*out = won ? won : d;
	return 0;
}

int sfs_foldcache_lookup(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                         size_t len, struct sfs_foldidx_hit *hit)
{
	struct sfs_folddir *d = sfs_foldcache_get(c, dev, ino);
	int rc;

	if (!d)
		return -ENODATA;
	rc = sfs_foldidx_lookup(sfs_folddir_rdlock(d), name, len, hit);
	sfs_folddir_unlock(d);
	sfs_foldcache_put(c, d);
	return rc;
}

void sfs_foldcache_change_lock(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	pthread_mutex_lock(&stripe_of(c, dev, ino)->lock);
}

/* The epoch moves on at the end of the change, under the lock (see insert). */
void sfs_foldcache_change_unlock(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct stripe *s = stripe_of(c, dev, ino);

	atomic_fetch_add(&s->epoch, 1);
	pthread_mutex_unlock(&s->lock);
}

/* Stripes are taken in address order, so two renames between the same pair cannot deadlock. */
void sfs_foldcache_change_lock2(struct sfs_foldcache *c, uint64_t dev1, uint64_t ino1,
                                uint64_t dev2, uint64_t ino2)
{
	struct stripe *a = stripe_of(c, dev1, ino1), *b = stripe_of(c, dev2, ino2), *t;

	if (a > b)
		t = a, a = b, b = t;
	pthread_mutex_lock(&a->lock);
	if (b != a)
		pthread_mutex_lock(&b->lock);
}

void sfs_foldcache_change_unlock2(struct sfs_foldcache *c, uint64_t dev1, uint64_t ino1,
                                  uint64_t dev2, uint64_t ino2)
{
	struct stripe *a = stripe_of(c, dev1, ino1), *b = stripe_of(c, dev2, ino2);

	if (b != a)
		sfs_foldcache_change_unlock(c, dev2, ino2);
	sfs_foldcache_change_unlock(c, dev1, ino1);
}

enum note_op { NOTE_ADD, NOTE_REMOVE, NOTE_RENAME };

static int apply(struct sfs_foldidx *idx, enum note_op op, const char *a, size_t alen,
                 const char *b, size_t blen)
{
	int rc;

	switch (op) {
	case NOTE_ADD:
		rc = sfs_foldidx_add(idx, a, alen);
		return rc == -EEXIST ? 0 : rc;
	case NOTE_REMOVE:
		rc = sfs_foldidx_remove(idx, a, alen);
		return rc == -ENOENT ? 0 : rc;
	case NOTE_RENAME:
		rc = sfs_foldidx_rename(idx, a, alen, b, blen);
		if (rc == -ENOENT) /* from was never seen: the directory still gained to */
			rc = apply(idx, NOTE_ADD, b, blen, NULL, 0);
		return rc;
	}
	return -EINVAL;
}

/* Applies one change to the cached index of (dev, ino), if any. An index that cannot follow
 * is dropped rather than left stale. */
static int note(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, enum note_op op,
                const char *a, size_t alen, const char *b, size_t blen)
{
	struct sfs_foldidx_stats st;
	struct sfs_folddir *d;
	int rc = check_name(a, alen);

	if (!rc && op == NOTE_RENAME)
		rc = check_name(b, blen);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	d = pin_locked(c, dev, ino);
	pthread_mutex_unlock(&c->lock);
	if (!d)
		return 0;
	pthread_rwlock_wrlock(&d->lock);
	rc = apply(d->idx, op, a, alen, b, blen);
	sfs_foldidx_stats(d->idx, &st);
	pthread_rwlock_unlock(&d->lock);
	pthread_mutex_lock(&c->lock);
	if (!d->dead && rc) /* (a forgotten d has nothing left to count) */
		drop_locked(c, d);
	else if (!d->dead)
		account_locked(c, d, &st);
	pthread_mutex_unlock(&c->lock);
	sfs_foldcache_put(c, d);
	return 0;
}

int sfs_foldcache_note_add(struct sfs_foldcache *c, uint64_t dev, uint64_t ino, const char *name,
                           size_t len)
{
	return note(c, dev, ino, NOTE_ADD, name, len, NULL, 0);
}

int sfs_foldcache_note_remove(struct sfs_foldcache *c, uint64_t dev, uint64_t ino,
                              const char *name, size_t len)
{
	return note(c, dev, ino, NOTE_REMOVE, name, len, NULL, 0);
}

int sfs_foldcache_note_rename(struct sfs_foldcache *c, uint64_t fdev, uint64_t fino,
                              const char *from, size_t fromlen, uint64_t tdev, uint64_t tino,
                              const char *to, size_t tolen)
{
	int rc;

	if (fdev == tdev && fino == tino)
		return note(c, fdev, fino, NOTE_RENAME, from, fromlen, to, tolen);
	rc = check_name(to, tolen);
	if (!rc)
		rc = note(c, fdev, fino, NOTE_REMOVE, from, fromlen, NULL, 0);
	if (!rc)
		rc = note(c, tdev, tino, NOTE_ADD, to, tolen, NULL, 0);
	return rc;
}

/* The epoch moves first, so a build that started before the directory went is refused. */
void sfs_foldcache_forget(struct sfs_foldcache *c, uint64_t dev, uint64_t ino)
{
	struct sfs_folddir *d, *gone = NULL;

	atomic_fetch_add(&stripe_of(c, dev, ino)->epoch, 1);
	pthread_mutex_lock(&c->lock);
	d = *table_link(c, dev, ino);
	if (d) {
		drop_locked(c, d);
		if (!d->pins)
			gone = d;
	}
	pthread_mutex_unlock(&c->lock);
	if (gone)
		dir_free(gone);
}

void sfs_foldcache_stats(struct sfs_foldcache *c, struct sfs_foldcache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->dirs = c->dirs;
	st->bytes = c->bytes;
	st->budget = c->budget;
	st->names = c->names;
	st->collisions = c->collisions;
	st->hits = c->hits;
	st->misses = c->misses;
	st->evictions = c->evictions;
	pthread_mutex_unlock(&c->lock);
}
