/* The quota ledger's own header: what its files share and nobody else may use. The ledger
 * lives by job: quota.c (the per-node bookkeeping, the barrier and reservations, start and
 * stop), quota_trees.c (the view trees), quota_scan.c (the scans), quota_control.c (the state
 * file, the control requests and the reports). include/quota.h is its interface. */
#ifndef SFS_QUOTA_INT_H
#define SFS_QUOTA_INT_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#include "inoset.h"
#include "quota.h"

/* The state file's directory on the backing, which no scan counts: the daemon's own state is
 * nobody's usage. */
#define STATE_DIR ".strictfs"

/* Broadcast under the ledger lock when the start-up scan ends, done or failed: changes wait
 * on it (sfs_charge_begin), so that the scan counts a tree nobody changes. */
extern pthread_cond_t scan_done_cond;

struct scan;
/* How a walk counts each object it finds (count_once, count_later). */
typedef int count_fn(struct scan *s, const struct stat *st);

struct scan {
	struct sfs_quota *q;
	count_fn *count;
	struct sfs_qstate usage;
	struct sfs_qentry total;
	struct sfs_inoset links;     /* count_once: multiply linked files already counted */
	struct sfs_qlink *names;     /* count_later: every name of a multiply linked file */
	size_t nnames, capnames;
	dev_t dev;
	time_t last_report;
	char where[PATH_MAX];        /* where the walk failed: a path in the backing */
};

/* ---- quota_scan.c ----------------------------------------------------------------------- */

/* Before a scan whose progress status shows: a view tree's (and the start-up scan's). */
void progress_start(struct sfs_quota *q);
/* A view tree counted as the ledger counts it, so its usage can join the ledger: 0 or -errno,
 * with where the walk stopped in s->where. */
int scan_tree_at(struct sfs_quota *q, struct scan *s, int top);
/* `quota check`'s count of the tree at top, apart from the ledger's: hard links told apart
 * its own way (count_later). */
int recount_tree_at(struct sfs_quota *q, struct scan *s, int top);
/* quota check's count of what no walk finds: objects whose last name went (O_TMPFILE files
 * too) that a view still has open, which the ledger counts as ext4 charges them (all but a
 * predecessor's not changed since the start-up scan); in the view trees of rmask only (0:
 * all). */
int recount_nameless(struct sfs_quota *q, struct scan *s, uint32_t rmask);
/* After every scan_tree_at and recount_tree_at, whether it failed or not. */
void scan_free(struct scan *s);
/* Until the start-up scan has ended, done or failed: a view tree is counted after it, not
 * beside it (sfs_quota_add_root). */
void wait_startup_scan(struct sfs_quota *q);
/* The start-up scan's thread (sfs_quota_start): the ledger's usage, or where and why the
 * scan failed. */
void *scan_thread(void *arg);

/* ---- quota_control.c -------------------------------------------------------------------- */

/* At start, before the scan (sfs_quota_start): the limits and grace timers the backing kept.
 * 0, or -errno with the one-line reason in err. */
int load_state(struct sfs_quota *q, char *err, size_t errlen);

#endif
