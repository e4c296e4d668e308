/* The request path's own header: the request frame every handler runs in, the open files
 * and directories it hands the kernel, and the helpers the handler files share. The handlers
 * live by the object they serve, as in the kernel's fs/fuse: dir.c (names: lookup, make,
 * remove, rename, link, readlink), file.c (open files and their data), readdir.c, attr.c
 * (attributes, statfs, ioctl), xattr.c; open.c opens backing objects for a view; req.c is
 * the frame; ops.c holds the one fuse_lowlevel_ops table. */
#ifndef SFS_OPS_H
#define SFS_OPS_H

#include "view.h"
#include "view_files.h"

#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "creds.h"
#include "locks.h"
#include "handover.h"
#include "openfiles.h"
#include "services.h"
#include "policy.h"
#include "quota.h"

/* A node and its backing descriptor (O_PATH, from the descriptor cache), held for a
 * request. */
struct held {
	struct sfs_node *node;
	int fd;
	/* on an idmapped view, which of its object's ids the map leaves out (HELD_*_UNMAPPED),
	 * looked at once when first asked (req_held_unmapped); -1 not yet */
	int unmapped;
};

#define HELD_UID_UNMAPPED 1
#define HELD_GID_UNMAPPED 2

#define REQ_HELD_MAX 2

/* One request, from its first line to its one reply: what the policies see of it (r), and
 * what it has taken and must give back before it answers. A handler starts with req_start
 * or req_begin and ends with exactly one req_reply_*, which first settles the frame: the
 * notices queued for other views are delivered (coherence.c, bounded), the quota charge
 * ends, the held nodes are let go. So no handler can forget a step or reply twice. */
struct req {
	struct sfs_req r;
	struct sfs_charge charge;
	bool charging;
	unsigned nheld;
	struct held held[REQ_HELD_MAX];
	int intent;    /* its change of names, recorded for a successor (intent.c), or -1 */
	bool replayed; /* a resent request whose change the predecessor had made */
};

/* ---- intent.c: changes of names a successor may be asked to make again ------------------ */

/* Before the backing call of a change of names, under the directory lock: records it. For a
 * request the kernel sent again after a failover whose change was already made, returns true
 * with the first attempt's result in *rc (q->replayed): the caller answers it without the
 * backing call. obj and obj2 are the inode numbers the names hold now (0: none): what is
 * removed or moved, what is exchanged. */
bool intent_start(struct req *q, enum sfs_ho_intent_op op, const struct held *p, const char *name,
                  const struct held *np, const char *name2, uint64_t obj, uint64_t obj2, int *rc);
/* The same for a write to an O_APPEND descriptor, which would append again: *n the first
 * attempt's result. */
bool intent_start_append(struct req *q, int fd, size_t len, ssize_t *n);
/* After the backing call: its result. */
void intent_done(struct req *q, int rc);
/* After the answer went out (the frame's replies call it). */
void intent_end(struct req *q);

/* The frame of a request that acts without the caller's credentials (attributes of what
 * is already open or held). */
void req_start(struct req *q, fuse_req_t req);
/* The frame of a request that acts on the backing as its caller (creds.c): 0 or -errno. */
int req_begin(struct req *q, fuse_req_t req);
/* A request that may change usage: the quota barrier, and what it reserves until it ends. */
void req_charge(struct req *q);
/* A request that changes anything: req_begin, req_charge, and the view must allow it. */
int req_begin_change(struct req *q, fuse_req_t req);
/* Whether the view is idmapped and st's owner or group is outside its map. */
bool req_ids_unmapped(const struct req *q, const struct stat *st);
/* An idmapped mount writes nothing to an object whose ids it does not map (HAS_UNMAPPED_ID:
 * inode_permission EACCES for a directory a change writes or a file opened for writing,
 * may_linkat EOVERFLOW, an xattr EPERM). The kernel checked the ids it held of h's object;
 * another writer may have changed them since, so the ids of now decide: err if they are
 * outside the map, else 0. */
int req_refuse_unmapped(const struct req *q, struct held *h, int err);
/* Which of h's object's ids of now the idmapped view's map leaves out (HELD_*_UNMAPPED; 0 on
 * any other view): one fstat per held object and request, at the first call. */
int req_held_unmapped(const struct req *q, struct held *h);
/* Before a creation (or a name, or an xattr, that may take a block) by a caller who would
 * borrow ext4's reserve acting as its disk id (creds.h): ENOSPC unless the backing has room
 * for it above the reserve, as a native idmapped mount gives it no more. Else 0. */
int req_room_above_reserve(struct req *q);
/* Holds node ino of the request's view until the reply; *out is the frame's slot. */
int req_hold(struct req *q, fuse_ino_t ino, struct held **out);

struct sfs_quota *req_ledger(const struct req *q);
/* Reserves what the request adds for objects of uid:gid against the view's limits: 0 or
 * -EDQUOT. */
int req_reserve(struct req *q, uint32_t uid, uint32_t gid, int64_t bytes, int64_t inodes);
/* Reserves the blocks an allocation of [off, off+len) in node's file may need. */
int req_reserve_alloc(struct req *q, struct sfs_node *n, int fd, off_t off, off_t len);

/* Drops the lookup an entry the kernel never got had counted. */
void forget_one(struct sfs_view *v, fuse_ino_t ino);

/* The replies: each settles the frame, then answers exactly once. rc < 0 answers that
 * error instead. Those that hand the kernel something (an entry, an open file) return
 * fuse_reply_*'s result, so the caller can take back what the kernel never got. */
void req_reply_err(struct req *q, int rc);
/* The answer of a request refused before its handler began a frame: one of its own. */
void req_fail(fuse_req_t req, int rc);
void req_reply_none(struct req *q);
void req_reply_entry(struct req *q, int rc, const struct fuse_entry_param *e);
int req_reply_create(struct req *q, int rc, const struct fuse_entry_param *e,
                     const struct fuse_file_info *fi);
int req_reply_open(struct req *q, int rc, const struct fuse_file_info *fi);
void req_reply_attr(struct req *q, int rc, const struct stat *st, double timeout);
void req_reply_statx(struct req *q, int rc, const struct statx *stx, double timeout);
void req_reply_readlink(struct req *q, int rc, const char *link);
void req_reply_write(struct req *q, ssize_t n);
void req_reply_buf(struct req *q, int rc, const void *buf, size_t n);
/* getxattr and listxattr: the data when the caller gave a size, else only its length. */
void req_reply_xattr(struct req *q, int rc, const void *buf, size_t size, size_t n);
void req_reply_statfs(struct req *q, int rc, const struct statvfs *st);
void req_reply_ioctl(struct req *q, int rc, const void *buf, size_t n);
void req_reply_lseek(struct req *q, off_t off);
void req_reply_lock(struct req *q, const struct flock *fl);

/* Runs a backing call as the caller; where the view's rules say the kernel has already
 * allowed the access (noacl views over an ACL-enforcing backing), an EACCES is retried with
 * the DAC capabilities for that one call (doc/kernel.md §8). Evaluates to the result or
 * -errno. */
#define BACKING(r, call)                                                            \
	({                                                                          \
		long rc_ = (call);                                                  \
		if (rc_ < 0 && errno == EACCES && sfs_policy_dac_retry((r)->view)) { \
			sfs_priv_begin(SFS_PRIV_DAC);                               \
			rc_ = (call);                                               \
			int e_ = errno;                                             \
			sfs_priv_end();                                             \
			errno = e_;                                                 \
		}                                                                   \
		rc_ < 0 ? -errno : rc_;                                             \
	})

/* "/proc/self/fd/N", the magic link that lands on fd's object without following it. */
void fd_path(char buf[40], int fd);
int stat_fd(int fd, struct stat *st);
/* One path component, never "." or "..". */
bool valid_name(const char *name);

/* ---- wait.c: requests whose answer waits for another party ------------------------------ */
/* A lock's holder, a lease's: the wait holds no worker. Over /dev/fuse it runs on a thread of
 * its own (at most 4096 over the daemon), over io_uring on the entry's own thread, which
 * must answer through the entry, a spare entry taking the queue's next requests (at least
 * 256 waits a view, fuse_io.h). Embedded first in what the caller allocates. */
struct req_wait {
	fuse_req_t req;
	struct sfs_view *view;
	struct sfs_lock_wait w;              /* what FUSE_INTERRUPT and the view's end end */
	void (*run)(struct req_wait *x);     /* waits through w and answers req exactly once */
};
/* Runs x->run on this thread or a thread of its own, and frees x after. Returns 0, or -errno
 * when it was not started (-ENOLCK: too many wait), and the caller answers and frees x. */
int req_wait_start(struct req_wait *x);
/* While run waits, FUSE_INTERRUPT ends the wait (EINTR); off again before run answers. */
void req_wait_interruptible(struct req_wait *x, bool on);
/* ---- lease.c: leases held through other views ------------------------------------------ */
/* The rest of a request that an open's lease breaks hold up: an open, or a truncate by name. */
struct lease_then {
	void (*open)(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
	void (*setattr)(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
	                struct fuse_file_info *fi);
	struct fuse_file_info fi;
	struct stat attr;
	int valid;
};
/* An open of ino with flags (a truncate: O_WRONLY) through the request's view, when another
 * view's kernel holds a lease on the file that it conflicts with: takes the request, breaks
 * those leases, the request waiting as the opener would natively, then runs then. False,
 * doing nothing, when there is no such lease. */
bool lease_break_first(fuse_req_t req, fuse_ino_t ino, int flags, const struct lease_then *then);
/* Whether the request is the daemon's own open that breaks a lease (answered at once). */
bool lease_breaker(fuse_req_t req);
/* ---- open.c: backing objects opened for a view ------------------------------------------ */

/* The atime an open file or directory last showed, in ns, or NO_ATIME where the view's reads
 * never move it (noatime, ro). */
#define NO_ATIME LLONG_MIN

int open_flags_for_backing(const struct sfs_view *v, int flags);
int open_node(struct sfs_req *r, struct held *h, int flags, struct stat *st);
long long first_atime(const struct sfs_view *v, const struct stat *st);
void atime_moved(struct sfs_view *v, struct sfs_node *n, int fd, atomic_llong *seen);

/* ---- passthrough.c: kernel passthrough of open files (passthrough.h: the daemon's calls) -- */

/* The backing id an open of n (a regular file open as fd, of attributes st, for writing or
 * not) is handed: > 0, 0 for the daemon path, or -errno to refuse the open. made: the object
 * is new, so the view's kernel has no attributes of it to drop. */
int pt_open(struct sfs_view *v, struct sfs_node *n, int fd, const struct stat *st, bool writes,
            bool made);
/* The end of an open that pt_open gave an id. */
void pt_release(struct sfs_view *v, struct sfs_node *n, bool writes);
/* The attribute timeout of n in v's replies: none while a passthrough writer may change it
 * unseen. */
/* A predecessor daemon's passthrough: what a successor needs of the backing file an open
 * file uses (into rec), and the backing file taken over for one open file of n. */
void pt_record(struct sfs_view *v, const struct sfs_node *n, struct sfs_ho_file *rec);
void pt_adopt(struct sfs_view *v, struct sfs_node *n, const struct sfs_ho_file *rec);

double attr_timeout_of(const struct sfs_view *v, const struct sfs_node *n);
double attr_timeout_of_made(const struct sfs_view *v, struct sfs_node *n);

/* ---- file.c: the view's open files ----------------------------------------------------- */

struct sfs_file {
	int fd;
	bool direct; /* O_DIRECT: the backing wants aligned buffers, libfuse's are not */
	/* The kernel's writeback of a mapped file's pages writes whole pages and a short tail at
	 * the offsets they belong to, which an O_DIRECT descriptor refuses (EINVAL: the data is
	 * lost) and an O_APPEND one puts at the end: those go through a twin descriptor without
	 * either flag, opened at the first such write. -1 until then. */
	bool needs_twin;
	atomic_int twin;
	bool append; /* O_APPEND: a write made again appends again (intent.c) */
	atomic_llong atime; /* see atime_moved */
	bool cached;        /* the view's kernel may keep pages it read (no FOPEN_DIRECT_IO) */
	/* Kernel passthrough: the backing id the open was handed (0: the daemon path), the
	 * node, and whether it writes (pt_release). */
	int backing;
	struct sfs_node *node;
	bool writes;
	int slot;             /* the kernel's fh: a slot of the open-file table (openfiles.h) */
	struct sfs_list link; /* on the view's open files, under files_lock */
};

/* What an fh the daemon does not know names (only a successor that lost a record can meet
 * one): no descriptor, so every call on it fails with EBADF. */
extern struct sfs_file sfs_no_file;

/* The open file of the kernel's fh in view v, looked up, never trusted as memory. */
static inline struct sfs_file *file_in(struct sfs_view *v, const struct fuse_file_info *fi)
{
	struct sfs_file *f = sfs_openfiles_object(v->svc->files, fi->fh, SFS_HO_FILE);

	return f ? f : &sfs_no_file;
}

/* The same for a request not yet answered (the answer frees req). */
static inline struct sfs_file *file_of(fuse_req_t req, const struct fuse_file_info *fi)
{
	return file_in(fuse_req_userdata(req), fi);
}

/* ---- readdir.c: the view's open directories -------------------------------------------- */

struct sfs_dir {
	struct sfs_node *node; /* the kernel holds the directory open, and so its node */
	int fd;
	DIR *dp;
	off_t offset;
	struct dirent *entry;
	atomic_llong atime; /* see atime_moved */
	int slot;           /* the kernel's fh (see struct sfs_file) */
};

/* The open directory of the kernel's fh, or NULL when the daemon does not know it. */
static inline struct sfs_dir *dir_of(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct sfs_view *v = fuse_req_userdata(req);

	return sfs_openfiles_object(v->svc->files, fi->fh, SFS_HO_DIR);
}

/* ---- change.c: the frame of every change of names --------------------------------------
 * A handler that makes, removes, renames or links a name fills a struct change, calls
 * change_begin, makes its one backing call if that returns true, and hands the result to
 * change_done; one whose change made or named an object then enters it with change_entry.
 * The frame takes the directory change locks (dirlock.h) in their order, holds the objects
 * under the names, records the intent (intent.c), and after the call updates the fold
 * indexes (names.c) under the locks, brings the ledger up to date and queues the notices for
 * the other views (coherence.h). An O_TMPFILE file changes no names: it enters through
 * change_entry alone, and through a CHANGE_LINK when it gets its first one. */
enum change_kind { CHANGE_MAKE, CHANGE_LINK, CHANGE_REMOVE, CHANGE_RENAME, CHANGE_TMPFILE };

/* An object under a name, held (O_PATH) across the change, so that the ledger and the other
 * views learn afterwards what became of it. */
struct change_obj {
	int fd;
	struct sfs_node *node; /* if the table knows it */
	struct sfs_nodeq was;
	struct stat st;
};

struct change {
	/* Filled by the handler: */
	enum change_kind kind;
	unsigned int flags;        /* CHANGE_RENAME: renameat2's */
	struct held *dir, *dir2;   /* dir2: a rename's target directory, else NULL */
	const char *asked, *asked2; /* the names as the kernel sent them */
	struct held *linked;       /* CHANGE_LINK: the object given a name */
	/* Filled by the frame: */
	const char *name, *name2;  /* the names in the backing's spelling */
	char buf[NAME_MAX + 1], buf2[NAME_MAX + 1];
	struct change_obj obj;     /* under name: what is removed or moved */
	struct change_obj obj2;    /* under name2: what is replaced or exchanged */
	bool made;                 /* the change was made (change_done's rc was 0) */
};

/* Begins the change: true when the handler is to make the backing call; false for a request
 * a predecessor answered already (a failover), *rc its result. */
bool change_begin(struct req *q, struct change *c, int *rc);
/* Settles the change after the backing call's result rc (0 or -errno). */
void change_done(struct req *q, struct change *c, int rc);
/* Enters the object the change made or named into the table and the entry e: fd's object
 * when fd >= 0 (a created or O_TMPFILE file's open descriptor), else what is under the name.
 * A new object is settled by the policies (mode: as asked) and counted by the ledger. */
int change_entry(struct req *q, struct change *c, int fd, mode_t mode,
                 struct fuse_entry_param *e);
/* The directory change lock of one directory, for what reads a directory's names whole. */
void dir_lock(struct sfs_view *v, const struct sfs_node *dir);
void dir_unlock(struct sfs_view *v, const struct sfs_node *dir);
const char *backing_spelling(struct req *q, struct held *p, const char *name, char *buf,
                             size_t len);

/* ---- dir.c: names ----------------------------------------------------------------------- */

/* Enters an O_PATH descriptor of a backing object found in parent into the table, counting
 * a lookup by the view, and fills the entry. Takes ownership of fd. */
int entry_from_fd(struct sfs_view *v, struct sfs_node *parent, int fd, struct fuse_entry_param *e);
/* The entry of name in dirfd (never following a symlink), entered without opening it, its
 * lookup counted by r's view, as the caller; with dac_retry, with the noacl retry BACKING
 * gives. */
int entry_by_name(struct sfs_req *r, struct sfs_node *dir, int dirfd, const char *name,
                  bool dac_retry, struct fuse_entry_param *e);
/* The prologue of every call that makes or removes a name in a directory. */
int begin_dir_change(struct req *q, fuse_req_t req, fuse_ino_t parent, const char *name,
                     bool create, struct held **p);
enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };
int reserve_new(struct req *q, struct held *p, enum make_kind kind, const char *target);

/* The handlers, for the table in ops.c. */
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_readlink(fuse_req_t req, fuse_ino_t ino);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_statx(fuse_req_t req, fuse_ino_t ino, uint32_t flags, uint32_t mask,
              struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                struct fuse_file_info *fi);
void op_statfs(fuse_req_t req, fuse_ino_t ino);
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
              struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
              size_t out_bufsz);
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                  struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock);
void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
              int sleep);
void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op);
/* lock.c: the locks that came through open file f (fh) go with its RELEASE. */
void sfs_view_release_locks(struct sfs_view *v, const struct sfs_file *f, uint32_t fh);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi);
void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                        struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                        struct fuse_file_info *fi_out, size_t len, int flags);
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                 size_t size, int flags);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
