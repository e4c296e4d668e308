/* A view's profile: everything its options mean, derived from them by one function,
 * sfs_profile_make. A fresh mount builds one; a remount builds another from the new options,
 * and the daemon either puts it in force whole or refuses the remount by name, so a view
 * always enforces exactly what a fresh mount with its options would (contract §5). A profile
 * never changes once in force: a remount publishes a new one, and the view keeps those it
 * retired until it ends, so a request that read one may go on using it. */
#ifndef SFS_PROFILE_H
#define SFS_PROFILE_H

#include <stddef.h>

#include "options.h"

/* The profile itself, struct sfs_profile, is in view.h: the view holds it, and code that
 * knows views but not the policies (view.c, names.c) reads it. */
struct sfs_profile;

/* The profile of options o, allocated; NULL if out of memory. */
struct sfs_profile *sfs_profile_make(const struct sfs_opts *o);

/* Frees p and every profile it retired. */
void sfs_profile_free(struct sfs_profile *p);

/* The names of MOUNT_ATTR_* flags, comma-separated ("ro,nosuid,relatime"), into buf. */
char *sfs_profile_attr_names(unsigned attrs, char *buf, size_t len);

#endif
