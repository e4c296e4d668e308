/* Mounts known by identity (see mountid.h). Raw system calls: Debian 12's headers know
 * neither openat2's use here nor statmount. */
#include "mountid.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000U
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x2000
#endif
#ifndef SYS_statmount
#define SYS_statmount 457
#endif

#define STATMOUNT_MNT_POINT 0x10u
#define STATMOUNT_FS_TYPE 0x20u
#define STATMOUNT_FS_SUBTYPE 0x100u

struct mnt_id_req {
	uint32_t size, spare;
	uint64_t mnt_id, param;
};

/* The kernel's struct statmount up to the fields read here; its fixed part is 512 bytes,
 * the strings follow it (offsets into str). */
struct statmount_head {
	uint32_t size, mnt_opts;
	uint64_t mask;
	uint32_t sb_dev_major, sb_dev_minor;
	uint64_t sb_magic;
	uint32_t sb_flags, fs_type;
	uint64_t mnt_id, mnt_parent_id;
	uint32_t mnt_id_old, mnt_parent_id_old;
	uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
	uint32_t mnt_root, mnt_point;
	uint64_t mnt_ns_id;
	uint32_t fs_subtype, sb_source;
	uint64_t spare[48];
	char str[];
};
_Static_assert(sizeof(struct statmount_head) == 512, "struct statmount's fixed part");

static int open_no_symlinks(int dirfd, const char *path, int flags)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_PATH | O_CLOEXEC),
	                       .resolve = RESOLVE_NO_SYMLINKS};
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* The same, path taken relative to rootfd as if it were "/" (another namespace's root). */
static int open_in_root(int rootfd, const char *path, int flags)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_PATH | O_CLOEXEC),
	                       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

int sfs_mount_id_of(int fd, uint64_t *id)
{
	struct statx sx;

	/* DONT_SYNC: a dead view's FUSE root would answer a fresh getattr ENOTCONN */
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
	          STATX_MNT_ID_UNIQUE, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID_UNIQUE))
		return -EOPNOTSUPP;
	if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return -EINVAL;
	*id = sx.stx_mnt_id;
	return 0;
}

int sfs_mount_id_at(const char *path, uint64_t *id)
{
	int fd = open_no_symlinks(AT_FDCWD, path, O_DIRECTORY), rc;

	if (fd < 0)
		return fd;
	rc = sfs_mount_id_of(fd, id);
	close(fd);
	return rc;
}

int sfs_mount_open_checked(const char *path, uint64_t want)
{
	return sfs_mount_open_checked_in(AT_FDCWD, path, want);
}

int sfs_mount_open_checked_in(int rootfd, const char *path, uint64_t want)
{
	int fd = rootfd == AT_FDCWD ? open_no_symlinks(AT_FDCWD, path, O_DIRECTORY)
	                            : open_in_root(rootfd, path, O_DIRECTORY), rc;
	uint64_t id;

	if (fd < 0)
		return fd;
	if ((rc = sfs_mount_id_of(fd, &id)) || id != want) {
		close(fd);
		return rc == -EINVAL || !rc ? -ESTALE : rc;
	}
	return fd;
}

int sfs_mount_describe(uint64_t id, char *point, size_t plen, char *type, size_t tlen)
{
	struct mnt_id_req req = {sizeof(req), 0, id,
	                         STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE | STATMOUNT_FS_SUBTYPE};
	size_t len = sizeof(struct statmount_head) + 2 * PATH_MAX;
	struct statmount_head *sm = calloc(1, len);
	int rc = 0;

	if (!sm)
		return -ENOMEM;
	if (syscall(SYS_statmount, &req, sm, len, 0) < 0) {
		rc = -errno;
		goto out;
	}
	if (point && !(sm->mask & STATMOUNT_MNT_POINT)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	if (point)
		sfs_strlcpy(point, sm->str + sm->mnt_point, plen);
	if (type)
		snprintf(type, tlen, "%s%s%s", (sm->mask & STATMOUNT_FS_TYPE) ? sm->str + sm->fs_type : "",
		         (sm->mask & STATMOUNT_FS_SUBTYPE) ? "." : "",
		         (sm->mask & STATMOUNT_FS_SUBTYPE) ? sm->str + sm->fs_subtype : "");
out:
	free(sm);
	return rc;
}

/* path's directory (through no symlink) and its last component. */
static int open_parent(const char *path, char *base, size_t len)
{
	char copy[PATH_MAX], copy2[PATH_MAX];

	if (!sfs_strlcpy(copy, path, sizeof(copy)) || !sfs_strlcpy(copy2, path, sizeof(copy2)))
		return -ENAMETOOLONG;
	if (!sfs_strlcpy(base, basename(copy), len) || !strcmp(base, "/") || !strcmp(base, ".") ||
	    !strcmp(base, ".."))
		return -EINVAL;
	return open_no_symlinks(AT_FDCWD, dirname(copy2), O_DIRECTORY);
}

int sfs_umount_checked(const char *path, uint64_t want, int flags)
{
	char base[NAME_MAX + 1];
	int dir = open_parent(path, base, sizeof(base)), cwd = -1, fd, rc;
	uint64_t id = 0;

	if (dir < 0)
		return dir == -ELOOP || dir == -ENOENT || dir == -ENOTDIR ? -ESTALE : dir;
	fd = open_no_symlinks(dir, base, O_DIRECTORY | O_NOFOLLOW);
	rc = fd < 0 ? fd : sfs_mount_id_of(fd, &id);
	if (fd >= 0)
		close(fd); /* held, it would make the mount busy */
	if (rc == -ELOOP || rc == -ENOENT || rc == -ENOTDIR || rc == -EINVAL || (!rc && id != want)) {
		rc = -ESTALE;
		goto out;
	}
	if (rc)
		goto out;
	/* umount2 takes no descriptor: the name is looked up again from the directory's, and
	 * while it is a mountpoint nobody can rename or replace it (EBUSY) */
	if ((cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 || fchdir(dir) < 0) {
		rc = -errno;
		goto out;
	}
	rc = umount2(base, flags | UMOUNT_NOFOLLOW) < 0 ? -errno : 0;
	if (fchdir(cwd) < 0 && !rc)
		rc = -errno;
out:
	if (cwd >= 0)
		close(cwd);
	close(dir);
	return rc;
}
