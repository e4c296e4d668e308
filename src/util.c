/* Small helpers shared by the CLI and the daemon. */
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

void sfs_errf(char *buf, size_t len, const char *object, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "strictfs: %s: ", object);

	if (n < 0 || (size_t)n >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

bool sfs_strlcpy(char *dst, const char *src, size_t len)
{
	size_t n = strlen(src);

	if (len == 0)
		return false;
	if (n >= len) {
		memcpy(dst, src, len - 1);
		dst[len - 1] = '\0';
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

bool sfs_list_append(char *dst, size_t len, const char *item)
{
	size_t used = strlen(dst);
	size_t need = strlen(item) + (used ? 1 : 0);

	if (used + need >= len)
		return false;
	if (used)
		dst[used++] = ',';
	strcpy(dst + used, item);
	return true;
}

bool sfs_parse_uint(const char *s, unsigned long long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

int sfs_source_key(const char *source, char *key, size_t keylen, char *path, size_t pathlen,
                   bool *is_file, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(source, real) || stat(real, &st) < 0) {
		int e = errno;
		sfs_errf(err, errlen, source, "%s", strerror(e));
		return -e;
	}
	if (S_ISBLK(st.st_mode)) {
		snprintf(key, keylen, "b-%u-%u", major(st.st_rdev), minor(st.st_rdev));
		*is_file = false;
	} else if (S_ISREG(st.st_mode)) {
		snprintf(key, keylen, "f-%llu-%llu", (unsigned long long)st.st_dev,
		         (unsigned long long)st.st_ino);
		*is_file = true;
	} else {
		sfs_errf(err, errlen, source, "not a block device or an image file");
		return -EINVAL;
	}
	if (!sfs_strlcpy(path, real, pathlen)) {
		sfs_errf(err, errlen, source, "path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

void sfs_mountpoint_errf(char *buf, size_t len, const char *mp, int e)
{
	if (e == ENOTCONN)
		sfs_errf(buf, len, mp, "%s (a view whose daemon is gone; clear it with "
		         "'strictfs umount %s' or 'umount -l %s')", strerror(e), mp, mp);
	else
		sfs_errf(buf, len, mp, "%s", strerror(e));
}
