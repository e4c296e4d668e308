/* The per-directory fold index (see foldidx.h): every exact name of a directory under its
 * folded key, so a lookup finds any spelling in O(1). Pure logic over names. */
#include "foldidx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "htab.h"

/* Two hash tables (htab.h) over the same entries: by folded key (class heads only) and by exact
 * name (every entry), so that adding, removing and finding an exact spelling stay O(1) even in a
 * class of thousands of case variants. */
struct fentry {
	struct sfs_hlink klink;       /* in the key table: class heads only */
	struct sfs_hlink elink;       /* in the exact table: every name */
	struct fentry *cnext, *cprev; /* the class, a ring; its head is the bytewise-smallest */
	uint16_t nlen, klen;
	bool key_is_name;             /* the name folds to itself (most names): stored once */
	char bytes[];                 /* the name, then the key unless key_is_name */
};

struct sfs_foldidx {
	struct sfs_htab ktab, etab;   /* by sfs_hash_bytes of the key, of the name */
	size_t names, classes;
	size_t entry_bytes;           /* the entries' memory, as fe_size counts it */
	struct sfs_hash_key key;      /* users choose the names, so the hash is keyed */
};

#define MIN_BUCKETS 16
#define MAX_INITIAL_BUCKETS ((size_t)1 << 24)

/* A name being looked for, folded and hashed once per operation. */
struct probe {
	const char *name;
	size_t len, klen;
	uint64_t khash, ehash;
	char key[SFS_FOLD_KEY_MAX];
};

/* The table is keyed (hash.h): flooding a directory with names that collide would otherwise
 * make each lookup a scan. */
static uint64_t siphash(const struct sfs_foldidx *idx, const char *s, size_t len)
{
	return sfs_hash_bytes(&idx->key, s, len);
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
	       SFS_FOLD_ALLOC_OVERHEAD;
}

int sfs_foldidx_check_name(const char *name, size_t len)
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
	int rc = sfs_foldidx_check_name(name, len);

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

static struct fentry *by_key(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct fentry, klink);
}

static struct fentry *by_name(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct fentry, elink);
}

/* The head of p's class, or NULL. */
static struct fentry *find_class(const struct sfs_foldidx *idx, const struct probe *p)
{
	struct sfs_hlink *l;

	sfs_htab_for_each_match(l, &idx->ktab, p->khash)
		if (by_key(l)->klen == p->klen && !memcmp(fe_key(by_key(l)), p->key, p->klen))
			return by_key(l);
	return NULL;
}

/* The entry of p's exact name, or NULL. */
static struct fentry *find_exact(const struct sfs_foldidx *idx, const struct probe *p)
{
	struct sfs_hlink *l;

	sfs_htab_for_each_match(l, &idx->etab, p->ehash)
		if (by_name(l)->nlen == p->len && !memcmp(by_name(l)->bytes, p->name, p->len))
			return by_name(l);
	return NULL;
}

static struct fentry *entry_new(const struct probe *p)
{
	bool same = p->klen == p->len && !memcmp(p->key, p->name, p->len);
	struct fentry *e = malloc(offsetof(struct fentry, bytes) + p->len + (same ? 0 : p->klen));

	if (!e)
		return NULL;
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

/* Puts head in old's place in the key table, under the class's key hash. */
static void replace_head(struct sfs_foldidx *idx, struct fentry *old, struct fentry *head)
{
	uint64_t khash = old->klink.hash;

	sfs_htab_remove(&idx->ktab, &old->klink);
	sfs_htab_insert(&idx->ktab, &head->klink, khash);
}

/* e joins the class whose head is head (NULL: e starts a class of its own). */
static void class_insert(struct sfs_foldidx *idx, struct fentry *head, struct fentry *e,
                         uint64_t khash)
{
	if (!head) {
		e->cnext = e->cprev = e;
		sfs_htab_insert(&idx->ktab, &e->klink, khash);
		idx->classes++;
		return;
	}
	e->cnext = head->cnext;
	e->cprev = head;
	head->cnext->cprev = e;
	head->cnext = e;
	if (fe_cmp(e, head) < 0)
		replace_head(idx, head, e);
}

static struct fentry *smallest(struct fentry *ring)
{
	struct fentry *min = ring, *e;

	for (e = ring->cnext; e != ring; e = e->cnext)
		if (fe_cmp(e, min) < 0)
			min = e;
	return min;
}

static void class_remove(struct sfs_foldidx *idx, struct fentry *head, struct fentry *e)
{
	if (e->cnext == e) {
		sfs_htab_remove(&idx->ktab, &e->klink);
		idx->classes--;
		return;
	}
	e->cprev->cnext = e->cnext;
	e->cnext->cprev = e->cprev;
	if (head == e)
		replace_head(idx, e, smallest(e->cnext));
}

static size_t table_bytes(const struct sfs_htab *t)
{
	return (t->mask + 1) * sizeof(*t->buckets) + SFS_FOLD_ALLOC_OVERHEAD;
}

/* Halves a table below one entry in eight buckets, so that a directory emptied after a burst
 * does not keep its tables (htab.h doubles them past one per bucket by itself). A halving
 * that cannot allocate keeps the table as it was. */
static void maybe_shrink(struct sfs_htab *t)
{
	size_t nb = t->mask + 1;

	if (nb > MIN_BUCKETS && sfs_htab_count(t) < nb / 8)
		sfs_htab_resize(t, nb / 2);
}

int sfs_foldidx_new(struct sfs_foldidx **out, size_t expect)
{
	struct sfs_foldidx *idx = calloc(1, sizeof(*idx));
	size_t nb = MIN_BUCKETS;

	while (nb < expect && nb < MAX_INITIAL_BUCKETS)
		nb *= 2;
	if (!idx)
		return -ENOMEM;
	if (sfs_htab_init(&idx->ktab, nb) || sfs_htab_init(&idx->etab, nb)) {
		sfs_foldidx_free(idx);
		return -ENOMEM;
	}
	sfs_hash_key_init(&idx->key, idx);
	*out = idx;
	return 0;
}

void sfs_foldidx_free(struct sfs_foldidx *idx)
{
	struct sfs_hlink *l, *next;

	if (!idx)
		return;
	sfs_htab_for_each_safe(l, next, &idx->etab)
		free(by_name(l)); /* every entry is in etab once; the tables go whole below */
	sfs_htab_destroy(&idx->ktab);
	sfs_htab_destroy(&idx->etab);
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
	struct fentry *e;

	if (find_exact(idx, p))
		return -EEXIST;
	e = entry_new(p);
	if (!e)
		return -ENOMEM;
	class_insert(idx, find_class(idx, p), e, p->khash);
	sfs_htab_insert(&idx->etab, &e->elink, p->ehash);
	idx->names++;
	idx->entry_bytes += fe_size(e);
	return 0;
}

static int remove_probe(struct sfs_foldidx *idx, const struct probe *p)
{
	struct fentry *e = find_exact(idx, p);

	if (!e)
		return -ENOENT;
	sfs_htab_remove(&idx->etab, &e->elink);
	class_remove(idx, find_class(idx, p), e);
	idx->names--;
	idx->entry_bytes -= fe_size(e);
	free(e);
	maybe_shrink(&idx->etab);
	maybe_shrink(&idx->ktab);
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
	if (!find_exact(idx, &f))
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
	head = find_class(idx, &p);
	if (!head)
		return -ENOENT;
	exact = find_exact(idx, &p);
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
	head = find_class(idx, &p);
	return !head || bytecmp(name, len, head->bytes, head->nlen) <= 0;
}

void sfs_foldidx_stats(const struct sfs_foldidx *idx, struct sfs_foldidx_stats *st)
{
	st->names = idx->names;
	st->classes = idx->classes;
	st->collisions = idx->names - idx->classes;
	st->bytes = sizeof(*idx) + SFS_FOLD_ALLOC_OVERHEAD + idx->entry_bytes +
	            table_bytes(&idx->ktab) + table_bytes(&idx->etab);
}
