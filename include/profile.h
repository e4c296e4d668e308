/* A view's profile: everything its options mean, derived from them by one function,
 * sfs_profile_make. A fresh mount builds one; a remount builds another from the new options,
 * and the daemon either puts it in force whole or refuses the remount by name, so a view
 * always enforces exactly what a fresh mount with its options would (contract §5). A profile
 * never changes once in force: a remount publishes a new one, and the view keeps those it
 * retired until it ends, so a request that read one may go on using it. */
#ifndef SFS_PROFILE_H
#define SFS_PROFILE_H

#include <stdbool.h>

#include "options.h"

struct sfs_profile {
	struct sfs_opts opts;
	/* MOUNT_ATTR_* of the view's own mount: ro, nosuid, nodev, noexec, nosymfollow, the
	 * atime rule. Never the superblock's: a remount could not change that. */
	unsigned mount_attrs;
	/* MOUNT_ATTR_* of the view's clone of the backing, which its files are opened through:
	 * ro and the atime rule, applied by the kernel to every access (policy.h, mount_attrs) */
	unsigned backing_attrs;
	/* Why its open files' data must go through the daemon, or NULL where the kernel's
	 * passthrough may carry it (policy.h, no_passthrough) */
	const char *no_passthrough;
	/* It holds requests to quota limits (policy.h, limits) */
	bool limits;
	struct sfs_profile *retired; /* the profile this one replaced, kept until the view ends */
};

/* The profile of options o, allocated; NULL if out of memory. */
struct sfs_profile *sfs_profile_make(const struct sfs_opts *o);

/* Frees p and every profile it retired. */
void sfs_profile_free(struct sfs_profile *p);

/* The names of MOUNT_ATTR_* flags, comma-separated ("ro,nosuid,relatime"), into buf. */
char *sfs_profile_attr_names(unsigned attrs, char *buf, size_t len);

#endif
