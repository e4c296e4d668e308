/* View options: one table of every option strictfs knows; anything else is refused by name. */
#ifndef SFS_OPTIONS_H
#define SFS_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mount.h>

#include "idmap.h"

enum sfs_df { SFS_DF_BSD, SFS_DF_MINIX };
enum sfs_share { SFS_SHARE_EXCLUSIVE, SFS_SHARE_EXISTING };
enum sfs_cache { SFS_CACHE_STRICT, SFS_CACHE_WRITEBACK };
enum sfs_casefold { SFS_CASEFOLD_OFF, SFS_CASEFOLD_ON, SFS_CASEFOLD_STRICT };
enum sfs_atime { SFS_ATIME_RELATIME, SFS_ATIME_NOATIME, SFS_ATIME_STRICT };

#define SFS_MAX_SB_OPTS 32
/* An option list, with its NUL: what the kernel takes as mount(2) data (a page). Longer lists
 * are refused by name at every step (CLI, helper, control message, daemon), never cut. */
#define SFS_OPTSTR_MAX 4096
/* The effective options of a view: at most the requested ones respelled, plus the defaults. */
#define SFS_EFFECTIVE_MAX (SFS_OPTSTR_MAX + 256)

/* A superblock-only ext4 option: key names the family (barrier, data, ...), value the
 * setting ("0"/"1" for flags), text how the user spelled it. */
struct sfs_sb_opt {
	char key[32];
	char value[64];
	char text[96];
};

struct sfs_opts {
	bool acl;
	bool user_xattr;
	bool ro;
	bool remount;
	bool nodiratime;
	enum sfs_df df;
	enum sfs_share share;
	enum sfs_cache cache;
	bool no_passthrough;            /* nopassthrough: open files' data through the daemon */
	enum sfs_atime atime;
	enum sfs_casefold casefold;
	bool usrquota;                  /* enforce user limits (quota, usrquota) */
	bool grpquota;                  /* enforce group limits (quota, grpquota) */
	uint64_t size_limit;            /* size=: bytes of the view's tree, 0 for none */
	uint64_t inode_limit;           /* inodes=: inodes of the view's tree, 0 for none */
	char subdir[PATH_MAX];          /* normalised, "/" or "/a/b" */
	struct sfs_idmap idmap;         /* idmap=, X-mount.idmap=: none unless active */
	char idmap_text[SFS_IDMAP_TEXT_MAX]; /* its canonical spelling, "" for none */
	char idmap_name[24];            /* "idmap=" or "X-mount.idmap=", as given, for messages */
	unsigned long mount_flags;      /* MS_* for the view's mount(2) */
	char flag_names[256];           /* the per-mount flags asked for, comma list */
	int n_sb;
	struct sfs_sb_opt sb[SFS_MAX_SB_OPTS];
	char requested[SFS_OPTSTR_MAX]; /* as given, for status */
};

/* Appends one more -o list to the list in dst (SFS_OPTSTR_MAX bytes), comma-separated, as
 * mount(8) joins repeated -o. Returns 0, or -E2BIG with the one-line refusal naming the
 * limit in err (dst then unchanged): a list is never cut. */
int sfs_opts_join(char *dst, const char *more, char *err, size_t errlen);

/* Parses a mount option string into o (defaults first). Returns 0, or -EINVAL with the
 * one-line error naming the option in err. */
int sfs_opts_parse(const char *optstr, struct sfs_opts *o, char *err, size_t errlen);

/* The options of a live view after `remount,optstr`: changes on top of cur. Returns 0, or
 * -EINVAL naming an unknown option or one that cannot change live (acl, subdir, cache,
 * share). */
int sfs_opts_remount(const struct sfs_opts *cur, const char *optstr, struct sfs_opts *o,
                     char *err, size_t errlen);

/* Whether the view enforces any quota limit (quota, usrquota, grpquota, size=, inodes=). */
bool sfs_opts_enforce_quota(const struct sfs_opts *o);

/* The option that sets o's limits, for a message: quota, usrquota, grpquota, size or inodes. */
const char *sfs_opts_quota_name(const struct sfs_opts *o);

/* Whether shown, one option of the list the kernel reports for the superblock, is the setting
 * the superblock option s asks for, in any spelling of its family in the option table: the
 * kernel reports noload as norecovery, bsdgroups as grpid, dioread_lock as nodioread_nolock. */
bool sfs_sb_opt_shown(const struct sfs_sb_opt *s, const char *shown);

/* Superblock-only options as one fsconfig-ready comma list. */
void sfs_opts_sb_string(const struct sfs_opts *o, char *buf, size_t len);

/* Checks that a view's superblock-only options agree with those in force on the backing.
 * Returns 0, or -EINVAL with the error naming the option and the value in force. */
int sfs_opts_sb_compatible(const struct sfs_opts *in_force, const struct sfs_opts *req,
                           char *err, size_t errlen);

/* A view's effective options as one mount-style list, every family named in its one
 * spelling (acl|noacl, user_xattr|nouser_xattr, rw|ro, bsddf|minixdf, then what differs
 * from the defaults: casefold, subdir=, cache=, quota, size=, inodes=, the per-mount flags,
 * the superblock-only options). status (text and JSON) and the log lines all say this.
 * Returns buf. */
char *sfs_opts_format(const struct sfs_opts *o, char *buf, size_t len);

/* The flags of a view's own mount as mount_setattr and fsmount take them, from its MS_*
 * per-mount flags (struct sfs_opts.mount_flags): attr_set what they ask for, attr_clr every
 * other per-mount flag a view has. */
void sfs_opts_mount_attr(unsigned long ms_flags, struct mount_attr *a);

/* The view options a daemon needs, serialised back to an option string (for the wire). */
const char *sfs_df_name(enum sfs_df df);
const char *sfs_casefold_name(enum sfs_casefold cf);

#endif
