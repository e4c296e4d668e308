/* The daemon's own capabilities on the calling thread. A worker acting for a caller holds
 * none of them but root's (creds.h, contract §4.1); the privilege bracket raises one for a
 * single backing call the kernel or the daemon already allowed, and puts the thread back.
 * Capabilities are per thread and set with raw capget/capset, which change the calling
 * thread alone; nothing here knows a request, so the daemon's own threads use it too. */
#ifndef SFS_PRIV_H
#define SFS_PRIV_H

#include <linux/capability.h>
#include <stdbool.h>

/* Capabilities a thread may raise for one backing call, deliberately and briefly:
 * SEARCH to reopen a node by handle, DAC to perform an access the kernel already allowed on
 * a noacl view, FOWNER|FSETID for the suid/sgid-clearing SETATTR (doc/kernel.md §4.4), and
 * what a caller's own capability allows it (IMMUTABLE, RESOURCE). */
enum {
	SFS_PRIV_SEARCH = 1 << 0,
	SFS_PRIV_DAC = 1 << 1,
	SFS_PRIV_FOWNER = 1 << 2,
	SFS_PRIV_ADMIN = 1 << 3,  /* CAP_SYS_ADMIN: to close a passthrough backing id */
	/* for an inode flag change ext4 allows only with them, when the caller has them */
	SFS_PRIV_IMMUTABLE = 1 << 4, /* CAP_LINUX_IMMUTABLE: append-only, immutable */
	SFS_PRIV_RESOURCE = 1 << 5,  /* CAP_SYS_RESOURCE: data journaling */
	/* CAP_SYS_PTRACE: to see the namespaces of a caller holding capabilities the thread,
	 * acting as a caller, does not (/proc/PID/ns asks for them) */
	SFS_PRIV_INSPECT = 1 << 6,
	SFS_PRIV_SETFCAP = 1 << 7, /* CAP_SETFCAP: the kernel's removal of security.capability */
};
void sfs_priv_begin(unsigned what);
void sfs_priv_end(void);

/* Makes every permitted capability of the calling thread effective (all), or none, keeping
 * the permitted set so it can have them again. The thread remembers which it has, so a run
 * of requests by one caller costs no syscall. Returns 0 or -errno. */
int sfs_priv_effective(bool all);

/* Makes effective exactly the permitted capabilities in mask (bits 1 << CAP_*). */
int sfs_priv_effective_mask(unsigned long long mask);

/* After a setfsuid: the kernel took the file-system capabilities from the effective set (to
 * an fsuid other than 0) or gave them (to 0), so what the thread remembers is stale. */
void sfs_priv_fsuid_changed(void);

/* The calling thread's capability sets, read and written whole; and one capability added
 * to the effective set of d. Return 0, or -1 with errno set. */
int sfs_priv_caps_get(struct __user_cap_data_struct d[2]);
int sfs_priv_caps_set(struct __user_cap_data_struct d[2]);
void sfs_priv_caps_raise(struct __user_cap_data_struct d[2], int cap);

#endif
