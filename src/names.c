/* Names of backing directories (see names.h): the change bracket and notes that keep the fold
 * indexes exact, and building an index from the backing when a casefold lookup first needs
 * one. */
#include "names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "creds.h"
#include "daemon.h"
#include "fdcache.h"
#include "fold.h"

/* Indexes of warm directories: about 120 bytes a name, so some 500,000 names. */
#define FOLD_BUDGET (64u << 20)
#define BUILD_TRIES 4

int sfs_names_init(struct sfs_daemon *d)
{
	return sfs_foldcache_new(&d->folds, FOLD_BUDGET);
}

void sfs_names_destroy(struct sfs_daemon *d)
{
	if (d->folds)
		sfs_foldcache_free(d->folds);
	d->folds = NULL;
}

void sfs_names_lock(struct sfs_daemon *d, const struct sfs_node *dir)
{
	sfs_foldcache_change_lock(d->folds, dir->dev, dir->ino);
}

void sfs_names_unlock(struct sfs_daemon *d, const struct sfs_node *dir)
{
	sfs_foldcache_change_unlock(d->folds, dir->dev, dir->ino);
}

void sfs_names_lock2(struct sfs_daemon *d, const struct sfs_node *a, const struct sfs_node *b)
{
	sfs_foldcache_change_lock2(d->folds, a->dev, a->ino, b->dev, b->ino);
}

void sfs_names_unlock2(struct sfs_daemon *d, const struct sfs_node *a, const struct sfs_node *b)
{
	sfs_foldcache_change_unlock2(d->folds, a->dev, a->ino, b->dev, b->ino);
}

void sfs_names_added(struct sfs_daemon *d, const struct sfs_node *dir, const char *name)
{
	sfs_foldcache_note_add(d->folds, dir->dev, dir->ino, name, strlen(name));
}

void sfs_names_removed(struct sfs_daemon *d, const struct sfs_node *dir, const char *name)
{
	sfs_foldcache_note_remove(d->folds, dir->dev, dir->ino, name, strlen(name));
}

void sfs_names_renamed(struct sfs_daemon *d, const struct sfs_node *from_dir, const char *from,
                       const struct sfs_node *to_dir, const char *to)
{
	sfs_foldcache_note_rename(d->folds, from_dir->dev, from_dir->ino, from, strlen(from),
	                          to_dir->dev, to_dir->ino, to, strlen(to));
}

void sfs_names_dir_gone(struct sfs_daemon *d, dev_t dev, ino_t ino)
{
	sfs_foldcache_forget(d->folds, dev, ino);
}

static bool is_admin_entry(struct sfs_daemon *d, const struct sfs_node *dir, const char *name)
{
	return dir->ino == d->backing_root_ino && !strcmp(name, ".strictfs");
}

/* Reads the names of dir; the index is the daemon's, so the directory is read whatever the
 * caller may read (a casefold lookup needs only search permission, as on ext4). */
static int read_names(struct sfs_daemon *d, const struct sfs_node *dir, int dirfd,
                      struct sfs_foldidx **out)
{
	size_t n = 0, cap = 256;
	char **names = malloc(cap * sizeof(*names));
	struct dirent *de;
	DIR *dp = NULL;
	int fd, rc = 0;

	sfs_priv_begin(SFS_PRIV_DAC);
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_NOATIME | O_CLOEXEC);
	if (fd < 0)
		fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	sfs_priv_end();
	if (fd < 0 || !names || !(dp = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	while ((de = readdir(dp))) {
		if (is_admin_entry(d, dir, de->d_name))
			continue;
		if (n == cap) {
			char **more = realloc(names, (cap *= 2) * sizeof(*names));
			if (!more) {
				rc = -ENOMEM;
				goto out;
			}
			names = more;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	rc = sfs_foldidx_from_names(out, (const char *const *)names, n);
out:
	if (dp)
		closedir(dp);
	while (n)
		free(names[--n]);
	free(names);
	return rc;
}

/* The cached index of dir, built from the backing if needed; pinned. */
static struct sfs_folddir *index_of(struct sfs_daemon *d, const struct sfs_node *dir, int dirfd)
{
	struct sfs_folddir *fd = sfs_foldcache_get(d->folds, dir->dev, dir->ino);

	for (int tries = 0; !fd && tries < BUILD_TRIES; tries++) {
		uint64_t stamp = sfs_foldcache_stamp(d->folds, dir->dev, dir->ino);
		struct sfs_foldidx *idx;
		if (read_names(d, dir, dirfd, &idx))
			return NULL;
		if (sfs_foldcache_insert(d->folds, dir->dev, dir->ino, stamp, idx, &fd) != -EAGAIN)
			break;
		fd = NULL;
	}
	return fd;
}

int sfs_names_fold_lookup(struct sfs_daemon *d, const struct sfs_node *dir, int dirfd,
                          const char *name, char *out, size_t outlen)
{
	struct sfs_foldidx_hit hit;
	struct sfs_folddir *fd;
	int rc;

	if (strlen(name) > SFS_FOLD_NAME_MAX)
		return -ENOENT;
	rc = sfs_foldcache_lookup(d->folds, dir->dev, dir->ino, name, strlen(name), &hit);
	if (rc == -ENODATA) {
		if (!(fd = index_of(d, dir, dirfd)))
			return -ENOENT;
		rc = sfs_foldidx_lookup(sfs_folddir_rdlock(fd), name, strlen(name), &hit);
		sfs_folddir_unlock(fd);
		sfs_foldcache_put(d->folds, fd);
	}
	if (rc)
		return -ENOENT;
	if (hit.len >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, hit.name, hit.len + 1);
	return 0;
}

bool sfs_names_fold_listed(struct sfs_daemon *d, const struct sfs_node *dir, const char *name)
{
	struct sfs_folddir *fd;
	bool listed = true;
	int dirfd;

	dirfd = sfs_fd_get(&d->fdc, (struct sfs_node *)dir);
	if (dirfd < 0)
		return true;
	fd = index_of(d, dir, dirfd);
	sfs_fd_put(&d->fdc, (struct sfs_node *)dir);
	if (!fd)
		return true;
	listed = sfs_foldidx_listed(sfs_folddir_rdlock(fd), name, strlen(name));
	sfs_folddir_unlock(fd);
	sfs_foldcache_put(d->folds, fd);
	return listed;
}

size_t sfs_names_collisions(struct sfs_daemon *d)
{
	struct sfs_foldcache_stats st;

	if (!d->folds)
		return 0;
	sfs_foldcache_stats(d->folds, &st);
	return st.collisions;
}
