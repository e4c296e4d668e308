/* Per-thread caller credentials (contract §4.1). Each worker thread acts on the backing with the
 * caller's fsuid, fsgid, supplementary groups and umask, switched with raw syscalls (glibc's
 * wrappers would change every thread) and only where they differ from what the thread has. */
#ifndef SFS_CREDS_H
#define SFS_CREDS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

/* A request acting as its caller raises the daemon's own capabilities for a moment with the
 * privilege bracket of priv.h (sfs_priv_begin, _end). */
#include "priv.h"

#include "idmap.h"

/* Switches the calling thread to the request's caller: the header's ids, or, through a view
 * idmapped with map (NULL or inactive: none), the ids map gives the calling thread's own
 * (mapped_caller in creds.c). resuid: the uid ext4 lends its reserved blocks to. Returns 0
 * or -errno. */
int sfs_creds_enter(fuse_req_t req, const struct sfs_idmap *map, uid_t resuid);

/* The fsuid and fsgid the calling thread acts as (after sfs_creds_enter): the caller's on
 * disk, which the header lacks on an idmapped view. */
uid_t sfs_creds_uid(void);

/* Before a call that writes a file's data (write, fallocate, copy_file_range): ext4 lends
 * its reserved blocks by the writer's fsuid, so a caller of an idmapped view whose disk id is
 * resuid but whose own id is not (a container's root, 0 on disk) writes as an id nothing has,
 * as a native idmapped mount would lend it nothing. Nobody else changes. 0 or -errno. */
int sfs_creds_for_data(void);

/* Whether the caller is such a one: a creation, which must be owned by its disk id, would
 * take ext4's reserved blocks it has no right to (req_room_above_reserve looks first). */
bool sfs_creds_borrows_reserve(void);

/* A namespace's root acting through an idmapped view holds its file capabilities for every
 * object, where the kernel grants them only over objects whose owner and group the map
 * covers: before the daemon acts on objects the kernel did not check (the entries of a
 * READDIRPLUS, under st's directory), _scope drops them when st's ids are outside the map
 * and says so; _unscope gives them back. */
#include <sys/stat.h>
bool sfs_creds_caps_scope(const struct stat *st);

/* Whether the caller is such a root, holding file capabilities for this request; and the end
 * of them till the next request (req_hold, when an object it holds has ids the map no longer
 * covers: the kernel weighed them against the ids it held, which another writer may have
 * changed since, and capable_wrt_inode_uidgid would refuse them now). */
bool sfs_creds_ns_caps(void);
void sfs_creds_end_ns_caps(void);

/* Whether the caller is such a namespace's root holding CAP_FSETID: the kernel then keeps the
 * set-group-ID bit of a chmod by it on a file of a group it is not in (setattr_prepare, with
 * the mount's idmapping), which the backing would clear for the disk id without it. */
bool sfs_creds_ns_fsetid(void);
void sfs_creds_caps_unscope(void);
gid_t sfs_creds_gid(void);


/* Around the registration of a backing file for kernel passthrough (fuse_io.h): the kernel
 * keeps the credentials of the registering thread for every read and write through that file,
 * so the thread holds only what the I/O may use. as_caller: the caller's fsuid, fsgid and
 * groups (as sfs_creds_enter left them), with no capability but CAP_SYS_ADMIN, which the
 * registration itself needs (root, who has every file capability, keeps them). Otherwise
 * nobody's: an unused uid and gid, no groups, only CAP_SYS_ADMIN (for opens that never
 * write: a read needs no identity, and a later writer sharing the file then borrows none).
 * Returns 0 or -errno; _end restores the thread. */
int sfs_creds_backing_begin(bool as_caller);
void sfs_creds_backing_end(void);

/* Whom the calling thread acts for, as the key of a backing file registered with
 * sfs_creds_backing_begin(true): fsuid, fsgid and a hash of the groups. */
struct sfs_cred_key {
	uint32_t uid, gid;
	uint64_t groups;
};
struct sfs_cred_key sfs_creds_key(void);

/* Whether the calling thread's caller writes differently from a nobody: root (it keeps set-id
 * bits, uses reserved blocks), one ext4 lets use its reserved blocks (resuid, resgid), or, to
 * the file of attributes st (if not NULL), a member of its group when it is set-group-ID
 * without group execute (the write keeps that bit for members only). */
bool sfs_creds_write_privileged(uid_t resuid, gid_t resgid, const struct stat *st);

/* Whether the mode bits alone give the calling thread's caller (after sfs_creds_enter) the
 * access mask (R_OK|W_OK|X_OK) on st: the kernel's check on a noacl view, redone by the
 * daemon on the object now under a name before it repeats a refused call with DAC
 * capabilities. Root passes, as it does in the kernel by CAP_DAC_OVERRIDE. */
#include <sys/stat.h>
bool sfs_mode_allows(const struct stat *st, int mask);

/* The calling thread's umask for the creation it makes next: the caller's, which the kernel
 * sends with CREATE, MKDIR, MKNOD and TMPFILE (under FUSE_DONT_MASK the backing applies it,
 * unless a default ACL decides, as ext4 does). Only those set it: every other request
 * carries 0, and setting it for them would cost a system call on each change between the two. */
void sfs_creds_umask(mode_t mask);

/* Whether fs.protected_regular refuses the calling thread's caller (after sfs_creds_enter) an
 * O_CREAT open that finds the regular file st in the directory dir: a sticky directory,
 * writable by others (or, at 2, by its group), that neither the caller nor the directory's
 * owner owns the file in (the VFS's may_create_in_sticky). */
bool sfs_creds_sticky_refuses(const struct stat *dir, const struct stat *st);

/* Whether the process pid has capability cap in its effective set, in the daemon's own user
 * namespace: for what ext4 allows a capable caller only (CAP_SYS_ADMIN lists trusted.*,
 * CAP_LINUX_IMMUTABLE sets the immutable flag). */
bool sfs_pid_has_cap(pid_t pid, int cap);

#endif
