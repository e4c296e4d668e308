/* Kernel passthrough of a view's open files (contract §4.4, doc/kernel.md §4.8): the table of
 * the backing files a view has registered with its FUSE connection, one per node while the
 * node is open through the view (the kernel allows one backing file per inode at a time), and
 * why a view has no passthrough when it has none. The request path's side, which keeps it, is
 * src/ops/passthrough.c (passthrough.h). */
#ifndef SFS_VIEW_PASSTHROUGH_H
#define SFS_VIEW_PASSTHROUGH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "htab.h"

struct sfs_passthrough {
	pthread_mutex_t lock;
	struct sfs_htab table;      /* entries of ops/passthrough.c; made at the first registration */
	atomic_int backing_files;   /* registered backing ids */
	/* Why the view's files take the daemon path: the option or policy that says so, a
	 * kernel that did not offer passthrough, or the error of a registration (after one,
	 * the view registers no more: an inode cannot be open both ways). NULL while on. */
	_Atomic(const char *) off;
	char error[64];
};

#endif
