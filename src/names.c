/* Names of backing directories (see names.h): the change bracket and notes that keep the fold
 * indexes exact, and building an index from the backing when a casefold lookup first needs
 * one. */
#include "names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "priv.h"
#include "services.h"
#include "view.h"
#include "fdcache.h"
#include "coherence.h"
#include "foldcache.h"
#include "hash.h"
#include "htab.h"
#include "view.h"

/* Indexes of warm directories: about 120 bytes a name, so some 500,000 names. */
#define FOLD_BUDGET (64u << 20)
#define BUILD_TRIES 4

int sfs_names_init(struct sfs_services *svc)
{
	pthread_mutex_init(&svc->spellings.lock, NULL);
	sfs_hash_key_init(&svc->spellings.key, svc);
	return sfs_foldcache_new(&svc->folds, FOLD_BUDGET, &svc->dirlock);
}

void sfs_names_destroy(struct sfs_services *svc)
{
	if (svc->folds)
		sfs_foldcache_free(svc->folds);
	svc->folds = NULL;
}

/* ---- Spellings casefold views may cache ------------------------------------------------
 * A casefold view's kernel keeps one dentry per spelling it looked up. Spellings that are
 * not backing names (aliases, and negatives) are recorded under their directory's node by
 * folded name; a change of that class in the directory, through any view, invalidates them.
 * The records die with the node: no kernel holds dentries under a forgotten directory. */

#define MAX_SPELLINGS (1u << 18)

struct spelling {
	struct sfs_hlink link; /* in its directory's set, by the hash of the folded name */
	uint16_t foldlen;
	uint16_t namelen;
	char data[];           /* folded name, then the spelling, NUL-terminated */
};

/* A directory's spellings: made at its first, freed with the node. */
struct sfs_spellset {
	struct sfs_htab tab;
};

/* The folded form of name into buf; its length, or 0 when it cannot be folded. */
static size_t fold_of(const char *name, char *buf, size_t len)
{
	size_t out;
	bool invalid;

	if (sfs_fold(name, strlen(name), buf, len, &out, &invalid))
		return 0;
	return out;
}

/* dir's set of spellings, made if it has none; NULL without memory. Under the lock. */
static struct sfs_spellset *set_of(struct sfs_node *dir)
{
	struct sfs_spellset *set = dir->spellings;

	if (set)
		return set;
	if (!(set = malloc(sizeof(*set))))
		return NULL;
	if (sfs_htab_init(&set->tab, 16)) {
		free(set);
		return NULL;
	}
	return dir->spellings = set;
}

/* Whether set holds name (folded hash h) already. */
static bool tracked(struct sfs_spellset *set, uint64_t h, const char *name, size_t nlen)
{
	struct sfs_hlink *pos;

	sfs_htab_for_each_match(pos, &set->tab, h) {
		struct spelling *sp = sfs_htab_entry(pos, struct spelling, link);
		if (sp->namelen == nlen && !memcmp(sp->data + sp->foldlen, name, nlen))
			return true;
	}
	return false;
}

bool sfs_names_track_spelling(struct sfs_view *v, struct sfs_node *dir, const char *name)
{
	struct sfs_spellings *all = &v->svc->spellings;
	char fold[SFS_FOLD_KEY_MAX];
	size_t flen, nlen = strlen(name);
	struct sfs_spellset *set;
	struct spelling *sp;
	uint64_t h;
	bool ok = false;

	if (v->prof->opts.casefold == SFS_CASEFOLD_OFF || nlen > SFS_FOLD_NAME_MAX ||
	    !(flen = fold_of(name, fold, sizeof(fold))))
		return false;
	h = sfs_hash_bytes(&all->key, fold, flen);
	pthread_mutex_lock(&all->lock);
	if (!(set = set_of(dir)))
		goto out;
	if (tracked(set, h, name, nlen)) {
		ok = true;
		goto out;
	}
	if (all->total >= MAX_SPELLINGS || !(sp = malloc(sizeof(*sp) + flen + nlen + 1)))
		goto out;
	sp->foldlen = flen;
	sp->namelen = nlen;
	memcpy(sp->data, fold, flen);
	memcpy(sp->data + flen, name, nlen + 1);
	sfs_htab_insert(&set->tab, &sp->link, h);
	all->total++;
	ok = true;
out:
	pthread_mutex_unlock(&all->lock);
	return ok;
}

/* Takes out of dir's records every spelling of name's class; returns them as a chain of
 * their links (out of the table, a link is free to chain them). */
static struct sfs_hlink *take_class(struct sfs_spellings *all, struct sfs_node *dir,
                                    const char *name)
{
	char fold[SFS_FOLD_KEY_MAX];
	struct sfs_hlink *taken = NULL, *pos, *tmp;
	struct sfs_spellset *set;
	size_t flen;
	uint64_t h;

	if (!(flen = fold_of(name, fold, sizeof(fold))))
		return NULL;
	h = sfs_hash_bytes(&all->key, fold, flen);
	pthread_mutex_lock(&all->lock);
	if ((set = dir->spellings))
		sfs_htab_for_each_match_safe(pos, tmp, &set->tab, h) {
			struct spelling *sp = sfs_htab_entry(pos, struct spelling, link);
			if (sp->foldlen != flen || memcmp(sp->data, fold, flen))
				continue;
			sfs_htab_remove(&set->tab, pos);
			pos->next = taken;
			taken = pos;
			all->total--;
		}
	pthread_mutex_unlock(&all->lock);
	return taken;
}

/* The class of name in dir changed through view v. When v's kernel settled name's own dentry
 * itself (settled), that dentry is left alone in v: it names the backing's entry now, or
 * nothing, and whoever holds it (overlayfs holds its upper directories') would see it
 * unhashed. Every other spelling, and that one in the other views, is invalidated. */
static void class_changed(struct sfs_view *v, struct sfs_node *dir, const char *name,
                          bool settled)
{
	struct sfs_hlink *l = take_class(&v->svc->spellings, dir, name), *next;

	for (; l; l = next) {
		struct spelling *sp = sfs_htab_entry(l, struct spelling, link);
		const char *spelling = sp->data + sp->foldlen;
		next = l->next;
		sfs_coh_spelling(v, dir, spelling, settled && !strcmp(spelling, name));
		free(sp);
	}
}

void sfs_names_node_freed(void *svc, struct sfs_node *dir)
{
	struct sfs_spellings *all = &((struct sfs_services *)svc)->spellings;
	struct sfs_spellset *set = dir->spellings;

	struct sfs_hlink *pos, *tmp;

	if (!set)
		return;
	pthread_mutex_lock(&all->lock);
	sfs_htab_for_each_safe(pos, tmp, &set->tab) {
		free(sfs_htab_entry(pos, struct spelling, link));
		all->total--;
	}
	pthread_mutex_unlock(&all->lock);
	sfs_htab_destroy(&set->tab);
	free(set);
	dir->spellings = NULL;
}

void sfs_names_added(struct sfs_view *v, struct sfs_node *dir, const char *name,
                     bool settled)
{
	sfs_foldcache_note_add(v->svc->folds, dir->dev, dir->ino, name, strlen(name));
	class_changed(v, dir, name, settled);
}

void sfs_names_removed(struct sfs_view *v, struct sfs_node *dir, const char *name,
                       bool settled)
{
	sfs_foldcache_note_remove(v->svc->folds, dir->dev, dir->ino, name, strlen(name));
	class_changed(v, dir, name, settled);
}

void sfs_names_renamed(struct sfs_view *v, struct sfs_node *from_dir, const char *from,
                       bool from_settled, struct sfs_node *to_dir, const char *to,
                       bool to_settled)
{
	sfs_foldcache_note_rename(v->svc->folds, from_dir->dev, from_dir->ino, from, strlen(from),
	                          to_dir->dev, to_dir->ino, to, strlen(to));
	class_changed(v, from_dir, from, from_settled);
	class_changed(v, to_dir, to, to_settled);
}

void sfs_names_dir_gone(struct sfs_services *svc, dev_t dev, ino_t ino)
{
	sfs_foldcache_forget(svc->folds, dev, ino);
}

/* Reads the names of dir; the index is the daemon's, so the directory is read whatever the
 * caller may read (a casefold lookup needs only search permission, as on ext4). */
static int read_names(struct sfs_services *svc, const struct sfs_node *dir, int dirfd,
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
		if (sfs_is_admin_entry(svc, dir, de->d_name))
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
static struct sfs_folddir *index_of(struct sfs_services *svc, const struct sfs_node *dir, int dirfd)
{
	struct sfs_folddir *fd = sfs_foldcache_get(svc->folds, dir->dev, dir->ino);

	for (int tries = 0; !fd && tries < BUILD_TRIES; tries++) {
		uint64_t stamp = sfs_foldcache_stamp(svc->folds, dir->dev, dir->ino);
		struct sfs_foldidx *idx;
		if (read_names(svc, dir, dirfd, &idx))
			return NULL;
		if (sfs_foldcache_insert(svc->folds, dir->dev, dir->ino, stamp, idx, &fd) != -EAGAIN)
			break;
		fd = NULL;
	}
	return fd;
}

/* While a native mount of the device exists, it writes behind the daemon's back and no index
 * stays exact: a directory's index is read afresh when this thread last did so more than a
 * second ago (the views' caches are as short then; see check_shared in daemon.c). */
static void revalidate_if_shared(struct sfs_services *svc, const struct sfs_node *dir)
{
	static __thread struct {
		dev_t dev;
		ino_t ino;
		time_t at;
	} fresh;
	time_t now;

	if (!atomic_load(&svc->shared))
		return;
	now = time(NULL);
	if (fresh.dev == dir->dev && fresh.ino == dir->ino && now - fresh.at < 1)
		return;
	sfs_foldcache_forget(svc->folds, dir->dev, dir->ino);
	fresh.dev = dir->dev;
	fresh.ino = dir->ino;
	fresh.at = now;
}

int sfs_names_fold_lookup(struct sfs_services *svc, const struct sfs_node *dir, int dirfd,
                          const char *name, char *out, size_t outlen)
{
	struct sfs_foldidx_hit hit;
	struct sfs_folddir *fd;
	int rc;

	if (strlen(name) > SFS_FOLD_NAME_MAX)
		return -ENOENT;
	revalidate_if_shared(svc, dir);
	rc = sfs_foldcache_lookup(svc->folds, dir->dev, dir->ino, name, strlen(name), &hit);
	if (rc == -ENODATA) {
		if (!(fd = index_of(svc, dir, dirfd)))
			return -ENOENT;
		rc = sfs_foldidx_lookup(sfs_folddir_rdlock(fd), name, strlen(name), &hit);
		sfs_folddir_unlock(fd);
		sfs_foldcache_put(svc->folds, fd);
	}
	if (rc)
		return -ENOENT;
	if (hit.len >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, hit.name, hit.len + 1);
	return 0;
}

int sfs_names_fold_peek(struct sfs_services *svc, const struct sfs_node *dir, const char *name,
                        char *out, size_t outlen, bool *exact)
{
	struct sfs_foldidx_hit hit;
	size_t len = strlen(name);
	int rc;

	if (len > SFS_FOLD_NAME_MAX || atomic_load(&svc->shared))
		return -ENODATA;
	rc = sfs_foldcache_lookup(svc->folds, dir->dev, dir->ino, name, len, &hit);
	if (rc)
		return rc == -ENOENT ? -ENOENT : -ENODATA;
	if (hit.len >= outlen)
		return -ENODATA;
	memcpy(out, hit.name, hit.len + 1);
	*exact = hit.exact;
	return 0;
}

bool sfs_names_fold_listed(struct sfs_services *svc, const struct sfs_node *dir, const char *name)
{
	struct sfs_folddir *fd;
	bool listed = true;
	int dirfd;

	dirfd = sfs_fd_get(&svc->fdc, (struct sfs_node *)dir);
	if (dirfd < 0)
		return true;
	revalidate_if_shared(svc, dir);
	fd = index_of(svc, dir, dirfd);
	sfs_fd_put(&svc->fdc, (struct sfs_node *)dir);
	if (!fd)
		return true;
	listed = sfs_foldidx_listed(sfs_folddir_rdlock(fd), name, strlen(name));
	sfs_folddir_unlock(fd);
	sfs_foldcache_put(svc->folds, fd);
	return listed;
}

size_t sfs_names_collisions(struct sfs_services *svc)
{
	struct sfs_foldcache_stats st;

	if (!svc->folds)
		return 0;
	sfs_foldcache_stats(svc->folds, &st);
	return st.collisions;
}
