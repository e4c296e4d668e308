/* The tree's one hash table (issue 30), intrusive and chained as list.h is intrusive: an
 * entry embeds a struct sfs_hlink, and the table never allocates or frees entries, only its
 * bucket array.
 *
 * The caller hashes its key to 64 bits (hash.h: sfs_hash_inode for inodes, sfs_hash_bytes
 * for names) and the table keeps that hash in the link. A lookup walks the entries whose
 * stored hash equals the one looked for (sfs_htab_for_each_match), and the caller compares
 * its full key. Growth places every entry again by its stored hash, so an entry is found by
 * the hash it was inserted with whatever the table's size: a table whose growth hashed
 * differently from its lookups lost entries once (issue 30).
 *
 * The table doubles when an insert would take it past one entry per bucket. A growth that
 * cannot allocate keeps the old buckets: the chains grow longer, nothing is lost, and the
 * next insert tries again. So insert cannot fail, and neither can remove.
 *
 * No locking: a table belongs to its user, who holds its own lock across every call and
 * every iteration. */
#ifndef SFS_HTAB_H
#define SFS_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_hlink {
	struct sfs_hlink *next;  /* the next entry in its bucket */
	uint64_t hash;           /* what it was inserted with: the table's only key */
};

struct sfs_htab {
	struct sfs_hlink **buckets;  /* NULL before init and after destroy */
	size_t mask;                 /* buckets - 1: their number is a power of two */
	size_t count;
};

/* An empty table of at least `buckets` buckets (rounded up to a power of two). 0 or -ENOMEM. */
int sfs_htab_init(struct sfs_htab *t, size_t buckets);

/* Frees the bucket array; the entries are the caller's (free them first, by a sweep). */
void sfs_htab_destroy(struct sfs_htab *t);

static inline bool sfs_htab_ready(const struct sfs_htab *t)
{
	return t->buckets != NULL;
}

static inline size_t sfs_htab_count(const struct sfs_htab *t)
{
	return t->count;
}

/* Adds e under hash; e must not be in a table. Entries of one hash are met newest first. */
void sfs_htab_insert(struct sfs_htab *t, struct sfs_hlink *e, uint64_t hash);

/* Takes e out; false if it was not in t. */
bool sfs_htab_remove(struct sfs_htab *t, struct sfs_hlink *e);

/* Places every entry again in `buckets` buckets (rounded up to a power of two). 0, or
 * -ENOMEM with the table as it was. Insert grows the table by itself; this is for a user
 * that knows its size ahead, and lets the tests make a growth fail. */
int sfs_htab_resize(struct sfs_htab *t, size_t buckets);

/* The entry struct that holds link ptr, as sfs_list_entry. */
#define sfs_htab_entry(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* e, or the first entry after it in its chain, whose stored hash is hash; or NULL. */
static inline struct sfs_hlink *sfs_htab_match_(struct sfs_hlink *e, uint64_t hash)
{
	while (e && e->hash != hash)
		e = e->next;
	return e;
}

/* The lookup: pos over the entries of t stored under hash h (a variable: h is read more than
 * once), newest first; the body compares the key. Nothing allocated, no call made. */
#define sfs_htab_for_each_match(pos, t, h)                                     \
	for ((pos) = sfs_htab_match_((t)->buckets[(h) & (t)->mask], (h)); (pos); \
	     (pos) = sfs_htab_match_((pos)->next, (h)))

/* The same, where the body may remove pos (and only pos) from t: tmp holds the next match. */
#define sfs_htab_for_each_match_safe(pos, tmp, t, h)                             \
	for ((pos) = sfs_htab_match_((t)->buckets[(h) & (t)->mask], (h));         \
	     (pos) && ((tmp) = sfs_htab_match_((pos)->next, (h)), true); (pos) = (tmp))

/* The first entry of t, and the one after e, in bucket order; NULL at the end. */
struct sfs_hlink *sfs_htab_first(const struct sfs_htab *t);
struct sfs_hlink *sfs_htab_next(const struct sfs_htab *t, const struct sfs_hlink *e);

/* A sweep: pos over every entry of t, in no useful order. The body may remove pos (and only
 * pos) from t and free it; it must not insert, which may grow the table under the sweep. */
#define sfs_htab_for_each_safe(pos, tmp, t)                                   \
	for ((pos) = sfs_htab_first(t);                                       \
	     (pos) && ((tmp) = sfs_htab_next((t), (pos)), true); (pos) = (tmp))

#endif
