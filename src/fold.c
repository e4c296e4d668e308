/* The fold of casefold views (see fold.h): utf8proc, shaped to match the kernel's fs/unicode.
 * Nothing here touches a file system. */
#include "fold.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <utf8proc.h>

/* No IGNORE here: default-ignorables are stripped after canonical ordering instead (see
 * strip_and_encode). STABLE is a no-op for decomposition and kept as a statement of intent. */
#define FOLD_OPTIONS (UTF8PROC_DECOMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_STABLE)

/* Length of the well-formed sequence at s, or 0. The kernel's trie (fs/unicode/mkutf8data.c)
 * holds exactly these sequences: every code point but the surrogates, in shortest form. Its
 * fold is laxer than its strict-mode check: utf8byte() passes a stray continuation byte after a
 * character through as part of it, so "A\xBF" matches "a\xBF" on casefold ext4 without
 * strict. contract §5.3 matches every invalid name byte-exactly, as strict-mode validation sees it. */
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
