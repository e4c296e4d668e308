/* Mounts known by identity, not by path (doc/kernel.md §2a): a path to a mountpoint can be
 * redirected by whoever owns a directory above it (swapped for a symlink), so what strictfs
 * unmounts is the mount it made, found by its unique id, and reached for the unmount through
 * a descriptor of its mountpoint's directory. */
#ifndef SFS_MOUNTID_H
#define SFS_MOUNTID_H

#include <stddef.h>
#include <stdint.h>

/* The unique id (statx STATX_MNT_ID_UNIQUE, 6.8+, never reused) of the mount whose root path
 * names, followed through no symlink. Returns 0 or -errno: -EINVAL when path is not the root
 * of a mount, -EOPNOTSUPP when the kernel gives no unique id. */
int sfs_mount_id_at(const char *path, uint64_t *id);

/* The same for the mount whose root fd is (a mount fsmount made, attached or not). */
int sfs_mount_id_of(int fd, uint64_t *id);

/* A descriptor (O_PATH) of path, followed through no symlink, if it is the root of the mount
 * with unique id want: what a change of that mount's flags goes through (mount_setattr with
 * AT_EMPTY_PATH), so a path swapped meanwhile cannot redirect it. Returns the fd, -ESTALE
 * when path leads elsewhere, or -errno. */
int sfs_mount_open_checked(const char *path, uint64_t want);

/* The same with path resolved in the root that rootfd is a descriptor of (another mount
 * namespace's, reached through /proc/PID/root), as if it were "/". */
int sfs_mount_open_checked_in(int rootfd, const char *path, uint64_t want);

/* Where the mount with unique id is now, in the caller's mount namespace and relative to its
 * root (statmount), and its type as the mount table shows it ("fuse.strictfs"); either buffer
 * may be NULL. Returns 0 or -errno (-ENOENT: no such mount here). */
int sfs_mount_describe(uint64_t id, char *point, size_t plen, char *type, size_t tlen);

/* Unmounts (umount2 flags) the mount with unique id want at path, only if path, followed
 * through no symlink, leads to that mount's root. The unmount itself is relative to a
 * descriptor of path's directory, so a swap of a directory above it after the check does not
 * redirect it (the mountpoint itself cannot be renamed or replaced while it is one). Returns
 * 0, -ESTALE when path leads elsewhere, or umount2's -errno. */
int sfs_umount_checked(const char *path, uint64_t want, int flags);

#endif
