/* Names of backing directories as the daemon changes them, through any view. Every change of
 * a directory's entries is bracketed by its change lock and reported here, so the fold
 * indexes of casefold views (fold.h) stay exact: the daemon is the backing's only writer.
 * Also the casefold lookups that go through those indexes. */
#ifndef SFS_NAMES_H
#define SFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sfs_services;
struct sfs_node;
struct sfs_view;

int sfs_names_init(struct sfs_services *svc);
void sfs_names_destroy(struct sfs_services *svc);


/* Notes of a change made by view v (under the change lock): the fold indexes follow, and the
 * spellings casefold views may cache for the changed classes are invalidated, but for name
 * itself in v when v's kernel settled it (settled: v's kernel asked for the backing's name). */
void sfs_names_added(struct sfs_view *v, struct sfs_node *dir, const char *name, bool settled);
void sfs_names_removed(struct sfs_view *v, struct sfs_node *dir, const char *name, bool settled);
void sfs_names_renamed(struct sfs_view *v, struct sfs_node *from_dir, const char *from,
                       bool from_settled, struct sfs_node *to_dir, const char *to,
                       bool to_settled);
/* A directory (dev, ino) is gone: its index must not outlive it. */
void sfs_names_dir_gone(struct sfs_services *svc, dev_t dev, ino_t ino);

/* The name of the backing directory dir (open as dirfd) that a casefold lookup of name finds
 * when name itself is absent: its class's representative (contract §5.3). Returns 0 with the
 * name in out, or -ENOENT. */
int sfs_names_fold_lookup(struct sfs_services *svc, const struct sfs_node *dir, int dirfd,
                          const char *name, char *out, size_t outlen);

/* As sfs_names_fold_lookup, from a cached index only and for name whether present or not:
 * 0 with the spelling in out (*exact: name itself), -ENOENT when no spelling exists, -ENODATA
 * when no index of dir is cached (or others write to the backing: only it can tell). */
int sfs_names_fold_peek(struct sfs_services *svc, const struct sfs_node *dir, const char *name,
                        char *out, size_t outlen, bool *exact);
/* Whether readdir of a casefold view lists name (one name per class). */
bool sfs_names_fold_listed(struct sfs_services *svc, const struct sfs_node *dir, const char *name);

/* A casefold view is about to let the kernel cache name in dir, positive or negative, though
 * it is not a name of the backing: records it so that a change of its class invalidates it.
 * False when the view does not fold or the record cannot be kept (then it must not be cached). */
bool sfs_names_track_spelling(struct sfs_view *v, struct sfs_node *dir, const char *name);

/* The node dir is freed: no kernel holds a dentry under it any more. */
void sfs_names_node_freed(void *svc, struct sfs_node *dir);

/* Names hidden behind another spelling, in the directories indexed now. */
size_t sfs_names_collisions(struct sfs_services *svc);

#endif
