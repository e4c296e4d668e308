/* The daemon's calls into a view's open files, directories and locks, which the request layer
 * keeps (src/ops/file.c, readdir.c, lock.c): at a view's end, and when a successor takes over
 * a predecessor's. view.h is the view itself, and view.c all of it. */
#ifndef SFS_VIEW_FILES_H
#define SFS_VIEW_FILES_H

#include <stdint.h>

struct sfs_view;
struct sfs_ho_file;

/* Closes the files of an ended view that the kernel never released (a view unmounted lazily
 * loses the RELEASEs of files closed after it). Only once its session threads are gone. */
void sfs_view_close_files(struct sfs_view *v);

/* Ends the lock waits of an ended view (their requests answer EINTR) and its locks (ops/
 * lock.c); before its session threads are stopped, since an io_uring entry's thread may be
 * the one waiting. */
void sfs_view_end_locks(struct sfs_view *v);

/* A successor takes over a predecessor's open file or directory record (handover.h) at the
 * same slot, so the kernel's fh goes on naming it. Returns 0 or -errno (the record is then
 * not the descriptor's, or its node is gone). */
int sfs_view_adopt_file(struct sfs_view *v, uint32_t slot, const struct sfs_ho_file *rec);
int sfs_view_adopt_dir(struct sfs_view *v, uint32_t slot, const struct sfs_ho_file *rec);

#endif
