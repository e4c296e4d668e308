/* Who the thread behind a request of an idmapped view is (contract §5.5): the header carries no
 * ids there, so they are read from /proc. The calling thread waits for the answer, so it cannot
 * end or change its ids or its user namespace meanwhile (doc/kernel.md §3). Descriptors are
 * kept, so a run of requests by one thread costs one read of its status, and a user namespace's
 * maps are read once while the daemon holds it. */
#ifndef SFS_CALLER_H
#define SFS_CALLER_H

#include <stdbool.h>
#include <sys/types.h>

#include "idmap.h"

#define SFS_CALLER_MAX_GROUPS 256

/* In the daemon's user namespace (the host's ids). */
struct sfs_caller_ids {
	uid_t fsuid;
	gid_t fsgid;
	unsigned long long cap_eff;
	int ngroups;
	gid_t groups[SFS_CALLER_MAX_GROUPS];
};

/* The fsuid, fsgid, groups and effective capabilities of thread tid, from /proc/TID/status:
 * true, or false if it cannot be read (gone, or no such thread). */
bool sfs_caller_read(pid_t tid, struct sfs_caller_ids *ids);

/* Whether thread tid's user namespace maps every id of map: its uid_map and gid_map are read
 * once per namespace, which the daemon holds open while it keeps them. */
bool sfs_caller_ns_covers(pid_t tid, const struct sfs_idmap *map);

#endif
