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

/* A view's clone of the backing mount, with the view's per-mount flags (sfs_backing_clone). */
struct sfs_clone {
	int tree_fd;               /* the detached clone (open_tree), whose flags are set */
	int fd;                    /* its root opened for real: a mount fd for open_by_handle_at */
};

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
	/* who may use the blocks ext4 reserves (resuid=, resgid=, else the superblock's
	 * defaults), besides CAP_SYS_RESOURCE: their writes differ from anyone else's */
	uid_t resuid;
	gid_t resgid;
};

/* Sets up the backing of source (a block device or image file) for the first view's
 * options. Returns 0, or -errno with the one-line error in err; nothing is left behind on
 * failure (no mount, no loop device). */
int sfs_backing_open(struct sfs_backing *b, const char *source, bool source_is_file,
                     const struct sfs_opts *o, char *err, size_t errlen);

/* A new clone of the backing mount for one view, with the per-mount flags in attrs
 * (MOUNT_ATTR_NOATIME, _STRICTATIME, _RELATIME (0), _NODIRATIME, _RDONLY). The view opens its
 * files and directories through it, so the kernel applies the view's atime rule and ro to
 * every access exactly as on a native mount, while the backing itself is noatime and the
 * daemon's own reads (scans, fold indexes) change nothing. Returns 0 or -errno. */
int sfs_backing_clone(const struct sfs_backing *b, unsigned attrs, struct sfs_clone *c);

/* Changes a clone's flags in place: files open through it follow at once, as on a native
 * remount. Returns 0 or -errno (EBUSY: going read-only with files open for writing). */
int sfs_backing_clone_set(const struct sfs_clone *c, unsigned attrs);

/* Whether c is a clone of the backing b (a successor's check of a recorded one). */
bool sfs_backing_clone_valid(const struct sfs_backing *b, const struct sfs_clone *c);

void sfs_backing_clone_close(struct sfs_clone *c);

/* Releases the superblock and detaches a loop device strictfs attached. */
void sfs_backing_close(struct sfs_backing *b);

/* Where a block device is mounted in this namespace (first match), or false. */
bool sfs_backing_find_mount(dev_t rdev, char *where, size_t len, char *opts, size_t optslen);

/* Sets b->resuid and b->resgid: the mount options in force, else the superblock's defaults. */
void sfs_backing_read_reserved(struct sfs_backing *b);

/* Total blocks of the ext4 superblock in filesystem-block units (for minixdf), or 0. */
unsigned long long sfs_backing_total_blocks(const struct sfs_backing *b);
/* The blocks ext4 reserves for resuid, resgid and CAP_SYS_RESOURCE, read now (tune2fs -r
 * changes them live); 0 if unreadable. */
unsigned long long sfs_backing_reserved_blocks(const struct sfs_backing *b);

#endif
