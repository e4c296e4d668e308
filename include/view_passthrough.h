/* Kernel passthrough of a view's open files (contract §4.4, doc/kernel.md §4.8): the table of
 * the backing files a view has registered with its FUSE connection, one per node while the
 * node is open through the view (the kernel allows one backing file per inode at a time), and
 * why a view has no passthrough when it has none. The request path's side is in src/ops/. */
#ifndef SFS_VIEW_PASSTHROUGH_H
#define SFS_VIEW_PASSTHROUGH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "creds.h"
#include "htab.h"

struct sfs_node;

struct sfs_pt_entry {
	struct sfs_hlink link;   /* in the view's table, by the node's backing inode */
	const struct sfs_node *node;
	int id;                  /* the backing id, > 0 */
	unsigned opens;          /* the view's open files that use it */
	unsigned writers;        /* of those, open for writing */
	bool nobody;             /* registered with nobody's credentials (see creds.h) */
	bool moves_atime;        /* the view's reads through it move the atime */
	struct sfs_cred_key key; /* else whose */
};

struct sfs_passthrough {
	pthread_mutex_t lock;
	struct sfs_htab table;      /* struct sfs_pt_entry; made at the first registration */
	atomic_int backing_files;   /* registered backing ids */
	/* Why the view's files take the daemon path: the option or policy that says so, a
	 * kernel that did not offer passthrough, or the error of a registration (after one,
	 * the view registers no more: an inode cannot be open both ways). NULL while on. */
	_Atomic(const char *) off;
	char error[64];
};

struct sfs_view;

/* Before the view's session starts: whether it asks the kernel for passthrough (the view's
 * policies may say no: sfs_policy_no_passthrough). */
void sfs_pt_init(struct sfs_view *v);

/* Frees the table (with the view; none of its files is open by passthrough any more). */
void sfs_pt_destroy(struct sfs_view *v);

/* Why the view's files take the daemon path, or NULL while they go to the kernel. */
const char *sfs_pt_off_reason(struct sfs_view *v);

/* How many of the view's nodes are open for writing by passthrough (under pt.lock). */
unsigned sfs_pt_writers(struct sfs_view *v);

#endif
