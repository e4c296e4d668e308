/* The daemon's side of a view's kernel passthrough (view_passthrough.h holds the view's table):
 * what the daemon does with it as a view starts, is remounted and ends, and what status shows.
 * All in src/ops/passthrough.c, whose request-path side src/ops/ops.h declares. */
#ifndef SFS_PASSTHROUGH_H
#define SFS_PASSTHROUGH_H

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
