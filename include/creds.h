/* Per-thread caller credentials (contract §4.1). Each worker thread acts on the backing with the
 * caller's fsuid, fsgid, supplementary groups and umask, switched with raw syscalls (glibc's
 * wrappers would change every thread) and only where they differ from what the thread has. */
#ifndef SFS_CREDS_H
#define SFS_CREDS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>

/* Switches the calling thread to the request's caller. Returns 0 or -errno. */
int sfs_creds_enter(fuse_req_t req);

/* Capabilities a thread may raise for one backing call, deliberately and briefly:
 * SEARCH to reopen a node by handle, DAC to perform an access the kernel already allowed on
 * a noacl view, FOWNER|FSETID for the suid/sgid-clearing SETATTR (doc/kernel.md §4.4). */
enum {
	SFS_PRIV_SEARCH = 1 << 0,
	SFS_PRIV_DAC = 1 << 1,
	SFS_PRIV_FOWNER = 1 << 2,
};
void sfs_priv_begin(unsigned what);
void sfs_priv_end(void);

/* Whether the mode bits alone give the calling thread's caller (after sfs_creds_enter) the
 * access mask (R_OK|W_OK|X_OK) on st: the kernel's check on a noacl view, redone by the
 * daemon on the object now under a name before it repeats a refused call with DAC
 * capabilities. Root passes, as it does in the kernel by CAP_DAC_OVERRIDE. */
#include <sys/stat.h>
bool sfs_mode_allows(const struct stat *st, int mask);

/* Whether the process pid has CAP_SYS_ADMIN in its effective set, in the daemon's own user
 * namespace (for listing trusted.*, as ext4 lists them only to capable(CAP_SYS_ADMIN)). */
bool sfs_pid_has_sys_admin(pid_t pid);

#endif
