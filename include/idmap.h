/* An idmapped view's mapping (idmap=, or X-mount.idmap= as util-linux names it; doc/design.md
 * "Idmapped views"): which host id
 * stands for which id on disk, in util-linux's syntax and the kernel's sense. The view is
 * attached through a user namespace with that map, the kernel shows and checks through it,
 * and the daemon acts on the backing as the ids the map gives the caller. */
#ifndef SFS_IDMAP_H
#define SFS_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* util-linux takes as many lines as a user namespace; a view needs few */
#define SFS_IDMAP_EXTENTS 16
/* The spelling kept for status and a successor: each extent "u:DISK:HOST:COUNT " */
#define SFS_IDMAP_TEXT_MAX (SFS_IDMAP_EXTENTS * 2 * 40)

/* disk..disk+count-1 on disk are host..host+count-1 through the view: one line of a user
 * namespace's uid_map, "disk host count". */
struct sfs_idmap_extent {
	uint32_t disk, host, count;
};

struct sfs_idmap {
	int nuid, ngid; /* both 0: not idmapped */
	struct sfs_idmap_extent uid[SFS_IDMAP_EXTENTS], gid[SFS_IDMAP_EXTENTS];
};

/* What no id is: the result of mapping an id outside every extent. */
#define SFS_IDMAP_NONE ((uint32_t)-1)

/* Reads util-linux's X-mount.idmap= value: space-separated extents "[u:|g:|b:]DISK:HOST:COUNT"
 * (no prefix: both), the whole optionally in double quotes. Refuses a user namespace file
 * (sfs_idmap_read_userns reads one),
 * overlapping extents, a zero count and a range past 2^32-2, naming the option as name
 * spelled it and the extent. Returns 0 or -errno with the one-line error in err. */
int sfs_idmap_parse(const char *name, const char *spec, struct sfs_idmap *m, char *err,
                    size_t errlen);

static inline bool sfs_idmap_active(const struct sfs_idmap *m)
{
	return m->nuid || m->ngid;
}

/* The disk id a host id stands for, or SFS_IDMAP_NONE; and back. */
uint32_t sfs_idmap_uid_to_disk(const struct sfs_idmap *m, uint32_t host);
uint32_t sfs_idmap_gid_to_disk(const struct sfs_idmap *m, uint32_t host);
uint32_t sfs_idmap_uid_to_host(const struct sfs_idmap *m, uint32_t disk);
uint32_t sfs_idmap_gid_to_host(const struct sfs_idmap *m, uint32_t disk);

/* The user namespace maps of process pid as the daemon's namespace sees them (host ids in the
 * second column, taken as the extents' host side). Returns 0, or -errno (-E2BIG: more than
 * SFS_IDMAP_EXTENTS of a kind). */
int sfs_idmap_read_pid(pid_t pid, struct sfs_idmap *m);

/* Whether every host id of m, uids and gids, lies in one extent of outer. */
bool sfs_idmap_covers(const struct sfs_idmap *outer, const struct sfs_idmap *m);

/* The map in util-linux's syntax, one extent per entry ("u:0:100000:65536 g:..."). */
char *sfs_idmap_format(const struct sfs_idmap *m, char *buf, size_t len);

/* A user namespace with m's maps, for mount_setattr(MOUNT_ATTR_IDMAP): a child made for it
 * writes nothing and ends before this returns. Returns the namespace's descriptor, or -errno
 * with the error, naming the option as name, in err. */
int sfs_idmap_userns(const struct sfs_idmap *m, const char *name, char *err, size_t errlen);

/* util-linux's other form, the path of a user namespace file (/proc/PID/ns/user): its maps
 * into m, read by a child that joins it (from the daemon's namespace a map's second column is
 * the host's ids). Returns the namespace's descriptor, or -1 with the error, naming name (as
 * "idmap=") and the path, in err. The mount command's alone: it forks. */
int sfs_idmap_read_userns(const char *path, const char *name, struct sfs_idmap *m, char *err,
                          size_t errlen);

#endif
