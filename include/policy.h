/* View policies: each option family is one module exporting a struct sfs_policy of hooks.
 * The request path (src/ops/) calls the dispatchers below and never tests an option itself, so
 * a new option family is a new module, not an edit of every handler. A NULL hook means the
 * module has nothing to say about that step. */
#ifndef SFS_POLICY_H
#define SFS_POLICY_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

struct sfs_view;
struct sfs_opts;
struct sfs_node;
struct sfs_charge;

enum sfs_xattr_op { SFS_XATTR_GET, SFS_XATTR_SET, SFS_XATTR_REMOVE };

/* How the view's kernel may cache what one open reads, from the most to the least caching:
 * keep the pages it has, drop them at this open (the first read then reaches the daemon),
 * or cache nothing (every read reaches the daemon: FOPEN_DIRECT_IO for a file, no listing
 * cache for a directory). */
enum sfs_cache_use { SFS_CACHE_KEEP, SFS_CACHE_DROP, SFS_CACHE_NONE };

/* What a policy needs to know about one request. */
struct sfs_req {
	fuse_req_t req;
	struct sfs_view *view;
	const struct fuse_ctx *ctx;
};

struct sfs_policy {
	const char *name;
	/* Negotiates capabilities at FUSE INIT. */
	void (*init)(const struct sfs_view *v, struct fuse_conn_info *conn);
	/* Any modifying request: 0 or -errno (EROFS for ro views). */
	int (*modify)(const struct sfs_view *v);
	/* A name in a directory, for lookup (create=false) or creation (create=true). */
	int (*name_check)(const struct sfs_view *v, const struct sfs_node *parent, const char *name,
	                  bool create);
	/* Whether readdir shows a name of a directory. */
	bool (*dirent_visible)(const struct sfs_view *v, const struct sfs_node *dir, const char *name);
	/* Gate of an xattr call by name: 0 or -errno (EOPNOTSUPP when the view has it off). */
	int (*xattr)(const struct sfs_req *r, const char *name, enum sfs_xattr_op op);
	/* Whether listxattr shows a name to this caller. */
	bool (*xattr_visible)(const struct sfs_req *r, const char *name);
	/* After a new object (open as fd, O_PATH) was made in the directory open as dirfd, named
	 * or not (O_TMPFILE), with the mode the caller asked for (before the umask). */
	int (*created)(const struct sfs_req *r, int dirfd, int fd, mode_t mode);
	/* The backing refused with EACCES: may the call be repeated with DAC capabilities,
	 * because the kernel has already allowed it by this view's rules? */
	bool (*dac_retry)(const struct sfs_view *v);
	/* A name absent from a directory: the spelling of it the directory holds (casefold
	 * views), in out. 0, or -ENOENT. */
	int (*resolve)(const struct sfs_view *v, const struct sfs_node *dir, int dirfd,
	               const char *name, char *out, size_t outlen);
	/* Before the backing is asked: the backing spelling a lookup of name finds (0, *exact
	 * when it is name itself), -ENOENT when the directory holds none, or -ENODATA when
	 * the module cannot tell without the backing. */
	int (*peek)(const struct sfs_view *v, const struct sfs_node *dir, const char *name,
	            char *out, size_t outlen, bool *exact);
	/* Inode flags (FS_IOC_GETFLAGS) the view adds to the backing's for an inode of type;
	 * only flags of SFS_POLICY_VIEW_FLAGS. */
	unsigned (*inode_flags)(const struct sfs_view *v, mode_t type);
	/* Adjusts statfs results for the caller. */
	void (*statfs)(const struct sfs_req *r, struct statvfs *st);
	/* Reserves what a modifying request will add (c's ids and amounts) against the limits
	 * the view enforces: 0 or -EDQUOT. */
	int (*charge)(const struct sfs_req *r, struct sfs_charge *c);
	/* After a change whose cost could not be known beforehand (an xattr): whether the
	 * view's limits still hold for c's ids; 0 or -EDQUOT (the caller then undoes it). */
	int (*within)(const struct sfs_req *r, struct sfs_charge *c);
	/* Per-mount flags (MOUNT_ATTR_*) of the clone of the backing the view opens its files
	 * and directories through (backing.h, sfs_backing_clone): the kernel then applies
	 * them to every access as on a native mount. */
	unsigned (*mount_attrs)(const struct sfs_opts *o);
	/* How the kernel may cache what an open of the object st reads: an access the kernel
	 * answers from its cache never reaches the backing (atime). */
	enum sfs_cache_use (*open_cache)(const struct sfs_view *v, const struct stat *st);
	/* The open(2) flags of a backing file for an open the kernel asked for with flags. */
	int (*backing_flags)(const struct sfs_view *v, int flags);
	/* Whether options o hold a view's requests to any limit, so that what they will cost
	 * is worth working out before they act (the view's profile keeps the answer). */
	bool (*limits)(const struct sfs_opts *o);
	/* The option of o that makes a view's open files take the daemon path instead of the
	 * kernel's passthrough (the daemon must see their data), or NULL (kept in the profile). */
	const char *(*no_passthrough)(const struct sfs_opts *o);
	/* Whether the view may answer with the object open as fd (stat st), reached by a file
	 * handle rather than a name (LOOKUP of "." or ".." from the kernel's export
	 * operations): 0 or -ESTALE. */
	int (*reach)(const struct sfs_view *v, int fd, const struct stat *st);
};

extern const struct sfs_policy sfs_policy_acl;
extern const struct sfs_policy sfs_policy_xattr;
extern const struct sfs_policy sfs_policy_confine;
extern const struct sfs_policy sfs_policy_df;
extern const struct sfs_policy sfs_policy_atime;
extern const struct sfs_policy sfs_policy_casefold;
extern const struct sfs_policy sfs_policy_quota;
extern const struct sfs_policy sfs_policy_cache;

/* The modules every view runs, in order. */
extern const struct sfs_policy *const sfs_policies[];

void sfs_policy_init(const struct sfs_view *v, struct fuse_conn_info *conn);
int sfs_policy_modify(const struct sfs_view *v);
int sfs_policy_name(const struct sfs_view *v, const struct sfs_node *parent, const char *name,
                    bool create);
bool sfs_policy_dirent_visible(const struct sfs_view *v, const struct sfs_node *dir,
                               const char *name);
int sfs_policy_xattr_gate(const struct sfs_req *r, const char *name, enum sfs_xattr_op op);
bool sfs_policy_xattr_visible(const struct sfs_req *r, const char *name);
int sfs_policy_created(const struct sfs_req *r, int dirfd, int fd, mode_t mode);
bool sfs_policy_dac_retry(const struct sfs_view *v);
void sfs_policy_statfs(const struct sfs_req *r, struct statvfs *st);
int sfs_policy_charge(const struct sfs_req *r, struct sfs_charge *c);
int sfs_policy_within(const struct sfs_req *r, struct sfs_charge *c);
int sfs_policy_resolve(const struct sfs_view *v, const struct sfs_node *dir, int dirfd,
                       const char *name, char *out, size_t outlen);
int sfs_policy_peek(const struct sfs_view *v, const struct sfs_node *dir, const char *name,
                    char *out, size_t outlen, bool *exact);
unsigned sfs_policy_inode_flags(const struct sfs_view *v, mode_t type);
/* The inode flags a view's options decide (casefold: FS_CASEFOLD_FL, <linux/fs.h>): shown as
 * the options say, and never changed through a view, where a change would reach every view
 * of the backing (contract §4.7). */
#define SFS_POLICY_VIEW_FLAGS 0x40000000u
unsigned sfs_policy_mount_attrs(const struct sfs_opts *o);
enum sfs_cache_use sfs_policy_open_cache(const struct sfs_view *v, const struct stat *st);
int sfs_policy_backing_flags(const struct sfs_view *v, int flags);
bool sfs_policy_limits(const struct sfs_opts *o);
int sfs_policy_reach(const struct sfs_view *v, int fd, const struct stat *st);
const char *sfs_policy_no_passthrough(const struct sfs_opts *o);

#endif
