/* Mount namespaces for `strictfs mount --namespace` and mount(8)'s `-N`: the view is mounted
 * in another process's mount namespace while the daemon and its control socket stay here. */
#ifndef SFS_MNTNS_H
#define SFS_MNTNS_H

#include <stddef.h>

/* A target namespace and the way back. All descriptors are -1 when no target was given, and
 * then entering and leaving do nothing. */
struct sfs_mntns {
	int target; /* the target mount namespace */
	int orig;   /* this process's own mount namespace */
	int cwd;    /* the working directory to return to (setns moves it to the root) */
};

#define SFS_MNTNS_NONE {-1, -1, -1}

/* Opens the namespace named by spec: a PID, or a path to a mount namespace file (as util-linux
 * mount -N takes it, e.g. /proc/PID/ns/mnt or the /proc/PID/fd/N that mount(8) passes to its
 * helper). Returns 0, or -1 with the one-line error in err ("strictfs: --namespace SPEC: ..."). */
int sfs_mntns_open(struct sfs_mntns *ns, const char *spec, char *err, size_t errlen);

/* Moves this (single-threaded) process into the target namespace, or back to its own with
 * its working directory. Return 0, or -1 with the one-line error in err. */
int sfs_mntns_enter(struct sfs_mntns *ns, char *err, size_t errlen);
int sfs_mntns_leave(struct sfs_mntns *ns, char *err, size_t errlen);

void sfs_mntns_close(struct sfs_mntns *ns);

#endif
