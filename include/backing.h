/* The backing: the one ext4 superblock a daemon serves, held through a detached mount fd
 * (contract §3). Created exclusively with fsopen/FSCONFIG_CMD_CREATE_EXCL/fsmount, or cloned
 * from an existing mount with share=existing. Image files are attached to a loop device. */
#ifndef SFS_BACKING_H
#define SFS_BACKING_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "options.h"

/* A clone of the backing mount with other per-mount flags (see sfs_backing_flavour). */
struct sfs_flavour {
	unsigned attrs;            /* MOUNT_ATTR_* set on the clone */
	int tree_fd;               /* the detached clone (open_tree) */
	int fd;                    /* its root opened for real: a mount fd for open_by_handle_at */
};

#define SFS_MAX_FLAVOURS 8

struct sfs_backing {
	int root_fd;               /* the backing's root directory (a detached mount, noatime) */
	int loop_fd;               /* loop device strictfs attached, or -1 */
	int dev_fd;                /* the block device, read-only, for superblock reads */
	bool loop_attached;        /* strictfs attached it (and so detaches it) */
	char device[PATH_MAX];     /* the block device ("/dev/loop3") */
	dev_t rdev;                /* its device number */
	dev_t fs_dev;              /* st_dev of files in the backing */
	enum sfs_share mode;
	bool read_only;            /* the superblock is read-only */
	bool has_acl;              /* probed: POSIX ACLs work on the backing */
	bool has_user_xattr;       /* probed: user.* xattrs work */
	char options[1024];        /* effective super options, read back from the kernel */
	char uuid[64];
	char existing_at[PATH_MAX]; /* share=existing: the mount served */
	pthread_mutex_t flavours_lock;
	size_t nflavours;
	struct sfs_flavour flavours[SFS_MAX_FLAVOURS];
};

/* Sets up the backing of source (a block device or image file) for the first view's
 * options. Returns 0, or -errno with the one-line error in err; nothing is left behind on
 * failure (no mount, no loop device). */
int sfs_backing_open(struct sfs_backing *b, const char *source, bool source_is_file,
                     const struct sfs_opts *o, char *err, size_t errlen);

/* A mount fd (for open_by_handle_at) of a clone of the backing whose per-mount flags are
 * MOUNT_ATTR_NOATIME, _STRICTATIME, _RELATIME (0), _NODIRATIME and _RDONLY as in attrs. A
 * view opens its files and directories through the clone with its own flags, so the kernel
 * applies the view's atime rule and ro to every access exactly as on a native mount, while the
 * backing itself is noatime and the daemon's own reads (scans, fold indexes) change nothing.
 * Clones are made once per set of flags and live as long as the backing. Returns the fd, or
 * -errno. */
int sfs_backing_flavour(struct sfs_backing *b, unsigned attrs);

/* Releases the superblock and detaches a loop device strictfs attached. */
void sfs_backing_close(struct sfs_backing *b);

/* Where a block device is mounted in this namespace (first match), or false. */
bool sfs_backing_find_mount(dev_t rdev, char *where, size_t len, char *opts, size_t optslen);

/* Total blocks of the ext4 superblock in filesystem-block units (for minixdf), or 0. */
unsigned long long sfs_backing_total_blocks(const struct sfs_backing *b);

#endif
