/* Coherence between views (contract §4.3): after a change through one view, the other views'
 * kernel caches of the affected entries, attributes and data are invalidated before the
 * request is answered. Notifications go through one notifier thread: an entry invalidation
 * locks the other view's directory, which may be held by a request of that view that is
 * itself waiting on us, so the request waits for its notifications with a bound. */
#ifndef SFS_COHERENCE_H
#define SFS_COHERENCE_H

#include <stdbool.h>
#include <sys/types.h>

struct sfs_services;
struct sfs_view;
struct sfs_node;

/* The notifier of one daemon's views (svc->coh). */
int sfs_coh_start(struct sfs_services *svc);
void sfs_coh_stop(struct sfs_services *svc);

/* Queue invalidations for every view other than origin that may cache the object. */
void sfs_coh_attr(struct sfs_view *origin, struct sfs_node *n);
void sfs_coh_data(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len);
void sfs_coh_name(struct sfs_view *origin, struct sfs_node *parent, const char *name);

/* The same for a name removed (unlink, rmdir, a rename's replaced target): gone is the object
 * it named if its last link went with it, else NULL. The views that know that object are
 * told it is deleted (FUSE_NOTIFY_DELETE), which their kernels report to inotify and
 * fanotify watchers of it (IN_DELETE_SELF, then IN_IGNORED): the one change notice a FUSE
 * server can cause (doc/kernel.md §4.14). */
void sfs_coh_removed(struct sfs_view *origin, struct sfs_node *parent, const char *name,
                     struct sfs_node *gone);
/* The origin view's own entry name in parent, invalidated from the notifier thread without
 * waiting (a handler must not invalidate its own directory's entries). */
void sfs_coh_own_entry(struct sfs_view *origin, struct sfs_node *parent, const char *name);

/* A spelling that views may cache under parent though it names nothing in the backing (a
 * casefold alias or negative entry): invalidated in every view that knows parent, the origin
 * included (without waiting for that one) unless its kernel settled that dentry itself. */
void sfs_coh_spelling(struct sfs_view *origin, struct sfs_node *parent, const char *name,
                      bool origin_settled);

/* The origin view's own cached pages of [off, off+len) of n, dropped at once from the calling
 * handler (a data invalidation takes no lock a request of the view holds while it waits for
 * the daemon; dirty pages in the range are written back by other workers first). off < 0:
 * its cached attributes only. */
void sfs_coh_own_data(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len);

/* The same from the notifier thread, without waiting: for pages the calling handler itself
 * holds locked until it answers (a read's). */
void sfs_coh_own_data_later(struct sfs_view *origin, struct sfs_node *n, off_t off, off_t len);

/* Waits (bounded) until what this thread queued has been delivered. */
void sfs_coh_flush(struct sfs_view *origin);

#endif
