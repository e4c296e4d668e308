/* Requests the kernel sends that libfuse 3.14 has no handler for, handed over as ones it has
 * (the transport calls this on every request before libfuse sees it):
 * - FUSE_TMPFILE (open(dir, O_TMPFILE)) carries what FUSE_CREATE carries, with the name "/"
 *   that the VFS gives every O_TMPFILE dentry and that no CREATE can carry (a name holds no
 *   '/'); its reply is CREATE's (entry and open file). It becomes a CREATE of "/", which the
 *   create handler serves as a file with no name (src/ops/file.c). Unanswered, the kernel
 *   would take the ENOSYS libfuse gives it as "no O_TMPFILE here", for good (EOPNOTSUPP). */
#ifndef SFS_FUSE_ADAPT_H
#define SFS_FUSE_ADAPT_H

#include <stddef.h>

/* buf holds one request of len bytes as read (header first). */
void sfs_fuse_adapt(void *buf, size_t len);

#endif
