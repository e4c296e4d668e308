/* Casefold views (contract §5.3): the fold that makes two names one. Pure logic over names; the
 * per-directory index (foldidx.h) and the cache of indexes (foldcache.h) build on it. */
#ifndef SFS_FOLD_H
#define SFS_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest name ext4 stores (EXT4_NAME_LEN); the index refuses longer ones. */
#define SFS_FOLD_NAME_MAX 255
/* Folding never makes a name more than three times longer (U+0390: 2 bytes -> 6), checked over
 * every code point by test_fold; sfs_fold reports -ENAMETOOLONG rather than overflow. */
#define SFS_FOLD_MAXLEN(len) (3 * (size_t)(len))
#define SFS_FOLD_KEY_MAX SFS_FOLD_MAXLEN(SFS_FOLD_NAME_MAX)


/* True if s[0..len) is well-formed UTF-8 (RFC 3629: shortest form, no surrogates, at most
 * U+10FFFF). Unassigned code points and noncharacters are valid, as for the kernel. */
bool sfs_fold_valid_utf8(const char *s, size_t len);

/* Folds name[0..len) into out: NFD + full case folding (C+F) + removal of default-ignorable code
 * points, as a casefold ext4 directory compares names. A name that is not valid UTF-8 folds to
 * itself byte for byte and *invalid is set (such names match only exactly; casefold=strict
 * refuses to create them). out need not be terminated. Returns 0, -ENAMETOOLONG if out is
 * shorter than the fold (SFS_FOLD_MAXLEN(len) always suffices) or -ENOMEM. */
int sfs_fold(const char *name, size_t len, char *out, size_t outsize, size_t *outlen,
             bool *invalid);

/* True if the two names fold equal. Names past SFS_FOLD_NAME_MAX need memory; without it they
 * are compared byte for byte. */
bool sfs_fold_equal(const char *a, size_t alen, const char *b, size_t blen);

/* The Unicode version of the tables in use ("15.0.0" with utf8proc 2.8; the kernel's are 12.1). */
const char *sfs_fold_unicode_version(void);

#endif
