/* View options: parsed with libmount's optstr walker into struct sfs_opts. Every option
 * strictfs knows is in one table below; an option outside it is refused by name, and so is
 * an option of contract §5 whose policy module does not exist yet. */
#include "options.h"

#include "quota_state.h"

#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "util.h"

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif

enum arg { ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL };

/* One known option, as libmount's optmap has them: the field of struct sfs_opts it sets and
 * to what, or, for an option with a syntax of its own, the function that reads it. */
struct opt_def {
	const char *name;
	enum arg arg;
	int (*apply)(struct sfs_opts *o, const struct opt_def *d, const char *val, char *err,
	             size_t errlen);
	size_t field;               /* offsetof the field set (set_bool, set_int, set_choice) */
	long data;                  /* the value set, a flag bit, or what apply makes of it */
	bool inv;                   /* set_flag: clears the bit (the positive form of a "no" flag) */
	const char *const *choices; /* set_choice: the values NAME=VALUE takes, in enum order */
	const char *key;            /* superblock options: the family, when it differs from name */
	/* Cannot change on a live view: its FUSE connection was negotiated for it (acl, cache),
	 * or its root, names or backing are fixed (subdir, casefold, share). A remount that
	 * changes the field is refused, naming the option as it was spelled. */
	bool fixed;
	enum { F_BOOL, F_INT, F_STR } kind; /* of the field, for comparing a fixed one */
};

#define FIELD(o, d, type) (*(type *)((char *)(o) + (d)->field))

_Static_assert(sizeof(enum sfs_df) == sizeof(int) && sizeof(enum sfs_atime) == sizeof(int) &&
               sizeof(enum sfs_cache) == sizeof(int) && sizeof(enum sfs_share) == sizeof(int),
               "enum fields are set as int");

static int set_bool(struct sfs_opts *o, const struct opt_def *d, const char *v, char *e, size_t l)
{
	(void)v, (void)e, (void)l;
	FIELD(o, d, bool) = d->data;
	return 0;
}

static int set_int(struct sfs_opts *o, const struct opt_def *d, const char *v, char *e, size_t l)
{
	(void)v, (void)e, (void)l;
	FIELD(o, d, int) = d->data;
	return 0;
}

/* A per-mount flag of the view's mount(2): nosuid, nodev, noexec, nosymfollow, and their
 * positive forms (inv). */
static int set_flag(struct sfs_opts *o, const struct opt_def *d, const char *v, char *e, size_t l)
{
	(void)v, (void)e, (void)l;
	if (d->inv)
		o->mount_flags &= ~(unsigned long)d->data;
	else
		o->mount_flags |= d->data;
	return 0;
}

/* NAME=VALUE for one of d->choices: the field gets the value's index. */
static int set_choice(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                      size_t errlen)
{
	char obj[128], use[128] = "";

	for (int i = 0; d->choices[i]; i++)
		if (!strcmp(d->choices[i], v)) {
			FIELD(o, d, int) = i;
			return 0;
		}
	for (int i = 0; d->choices[i]; i++)
		snprintf(use + strlen(use), sizeof(use) - strlen(use), "%s%s=%s",
		         !i ? "" : d->choices[i + 1] ? ", " : " or ", d->name, d->choices[i]);
	snprintf(obj, sizeof(obj), "%s=%s", d->name, v);
	sfs_errf(err, errlen, obj, "unknown value (use %s)", use);
	return -EINVAL;
}

/* subdir=PATH: kept as a clean absolute path; ".." and empty components are refused so the
 * daemon never has to reason about them (it resolves the path beneath the backing root). */
static int set_subdir(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                      size_t errlen)
{
	char out[PATH_MAX] = "";
	char tmp[PATH_MAX];
	char *save = NULL;

	(void)d;
	if (!*v) {
		sfs_errf(err, errlen, "subdir=", "empty path");
		return -EINVAL;
	}
	if (!sfs_strlcpy(tmp, v, sizeof(tmp))) {
		sfs_errf(err, errlen, "subdir", "path too long");
		return -EINVAL;
	}
	for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			char obj[PATH_MAX + 8];
			snprintf(obj, sizeof(obj), "subdir=%s", v);
			sfs_errf(err, errlen, obj, "'..' is not allowed");
			return -EINVAL;
		}
		strcat(out, "/");
		strcat(out, c);
	}
	strcpy(o->subdir, *out ? out : "/");
	return 0;
}

/* idmap=MAP, or X-mount.idmap=MAP as util-linux names it (mount(8) keeps X-mount.* options to
 * itself and gives a helper none): kept parsed and in one spelling, which a remount compares. */
static int set_idmap(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                     size_t errlen)
{
	int rc = sfs_idmap_parse(d->name, v, &o->idmap, err, errlen);

	if (!rc) {
		sfs_idmap_format(&o->idmap, o->idmap_text, sizeof(o->idmap_text));
		snprintf(o->idmap_name, sizeof(o->idmap_name), "%s=", d->name);
	}
	return rc;
}

/* quota / usrquota / grpquota / noquota: which per-id limits the view enforces. */
static int set_quota(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                     size_t errlen)
{
	(void)v, (void)err, (void)errlen;
	if (d->data == 0)
		o->usrquota = o->grpquota = false;
	o->usrquota |= d->data & 1;
	o->grpquota |= (d->data & 2) != 0;
	return 0;
}

/* size=N[KMGT] and inodes=N[KMGT]: limits of the view's tree; 0 lifts the limit. */
static int set_view_limit(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                          size_t errlen)
{
	uint64_t n;

	if (!sfs_parse_size(v, &n)) {
		char obj[PATH_MAX + 16];
		snprintf(obj, sizeof(obj), "%s=%s", d->name, v);
		sfs_errf(err, errlen, obj, "not a %s (a whole number with an optional K, M, G or T)",
		         d->data ? "count" : "size");
		return -EINVAL;
	}
	FIELD(o, d, uint64_t) = n;
	return 0;
}

/* casefold, casefold=strict (nocasefold is a plain value). */
static int set_casefold(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                        size_t errlen)
{
	(void)d;
	if (!v) {
		o->casefold = SFS_CASEFOLD_ON;
		return 0;
	}
	if (!strcmp(v, "strict")) {
		o->casefold = SFS_CASEFOLD_STRICT;
		return 0;
	}
	char obj[128];
	snprintf(obj, sizeof(obj), "casefold=%s", v);
	sfs_errf(err, errlen, obj, "unknown value (use casefold, casefold=strict or nocasefold)");
	return -EINVAL;
}

static int ignore(struct sfs_opts *o, const struct opt_def *d, const char *v, char *e, size_t l)
{
	(void)o, (void)d, (void)v, (void)e, (void)l;
	return 0;
}

static int root_id_only(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                        size_t errlen)
{
	(void)o;
	if (!strcmp(v, "0"))
		return 0;
	char obj[128];
	snprintf(obj, sizeof(obj), "%s=%s", d->name, v);
	sfs_errf(err, errlen, obj, "views always belong to root (the kernel checks each caller)");
	return -EINVAL;
}

static bool value_ok(const struct opt_def *d, const char *v)
{
	static const char *const data[] = {"journal", "ordered", "writeback", NULL};
	static const char *const errors[] = {"continue", "remount-ro", "panic", NULL};
	static const char *const data_err[] = {"abort", "ignore", NULL};
	static const char *const dax[] = {"always", "never", "inode", NULL};
	const char *const *set = NULL;
	unsigned long long n;

	if (!strcmp(d->key, "data"))
		set = data;
	else if (!strcmp(d->key, "errors"))
		set = errors;
	else if (!strcmp(d->key, "data_err"))
		set = data_err;
	else if (!strcmp(d->key, "dax"))
		set = dax;
	if (!set)
		return sfs_parse_uint(v, &n);
	for (; *set; set++)
		if (!strcmp(*set, v))
			return true;
	return false;
}

/* Superblock-only ext4 options (contract §3.3): recorded as (family, value) so that a later view
 * can be compared with the one in force whatever spelling it uses. */
static int set_sb(struct sfs_opts *o, const struct opt_def *d, const char *v, char *err,
                  size_t errlen)
{
	const char *key = d->key ? d->key : d->name;
	struct sfs_sb_opt *s = NULL;
	char obj[128];

	snprintf(obj, sizeof(obj), "%s%s%s", d->name, v ? "=" : "", v ? v : "");
	if (v && !value_ok(d, v)) {
		sfs_errf(err, errlen, obj, "malformed value");
		return -EINVAL;
	}
	/* Cut to fit, the value would reach the backing as another one (commit=000...05 as
	 * commit=000...0). */
	if (v && strlen(v) >= sizeof(s->value)) {
		sfs_errf(err, errlen, d->name, "value too long");
		return -EINVAL;
	}
	for (int i = 0; i < o->n_sb; i++)
		if (!strcmp(o->sb[i].key, key))
			s = &o->sb[i];
	if (!s) {
		if (o->n_sb == SFS_MAX_SB_OPTS) {
			sfs_errf(err, errlen, obj, "too many superblock options");
			return -EINVAL;
		}
		s = &o->sb[o->n_sb++];
	}
	sfs_strlcpy(s->key, key, sizeof(s->key));
	if (v)
		sfs_strlcpy(s->value, v, sizeof(s->value));
	else
		snprintf(s->value, sizeof(s->value), "%ld", d->data);
	sfs_strlcpy(s->text, obj, sizeof(s->text));
	return 0;
}

#define DEF(n, a, f, ...) {.name = n, .arg = a, .apply = f, __VA_ARGS__}
#define AT(member) .field = offsetof(struct sfs_opts, member)
#define BOOL(n, member, value) DEF(n, ARG_NONE, set_bool, AT(member), .data = value, .kind = F_BOOL)
#define VALUE(n, member, value) DEF(n, ARG_NONE, set_int, AT(member), .data = value, .kind = F_INT)
#define CHOICE(n, member, list) \
	DEF(n, ARG_REQUIRED, set_choice, AT(member), .choices = list, .kind = F_INT)
/* the same, for an option that cannot change on a live view */
#define FIXED_BOOL(n, member, value) \
	DEF(n, ARG_NONE, set_bool, AT(member), .data = value, .kind = F_BOOL, .fixed = true)
#define FIXED_VALUE(n, member, value) \
	DEF(n, ARG_NONE, set_int, AT(member), .data = value, .kind = F_INT, .fixed = true)
#define FIXED_CHOICE(n, member, list) DEF(n, ARG_REQUIRED, set_choice, AT(member), \
                                          .choices = list, .kind = F_INT, .fixed = true)
#define FLAG(n, bit) DEF(n, ARG_NONE, set_flag, .data = bit)
#define NOFLAG(n, bit) DEF(n, ARG_NONE, set_flag, .data = bit, .inv = true)
#define IGNORED(n, a) DEF(n, a, ignore, .data = 0)
#define SB(n, a, family) DEF(n, a, set_sb, .key = family)
#define SB_SET(n, family) DEF(n, ARG_NONE, set_sb, .data = 1, .key = family)
#define SB_FLAG(on, off, family) \
	SB_SET(on, family), DEF(off, ARG_NONE, set_sb, .data = 0, .key = family)

static const char *const cache_choices[] = {"strict", "writeback", NULL};   /* enum sfs_cache */
static const char *const share_choices[] = {"exclusive", "existing", NULL}; /* enum sfs_share */

static const struct opt_def table[] = {
	FIXED_BOOL("acl", acl, 1),
	FIXED_BOOL("noacl", acl, 0),
	BOOL("user_xattr", user_xattr, 1),
	BOOL("nouser_xattr", user_xattr, 0),
	BOOL("ro", ro, 1),
	BOOL("rw", ro, 0),
	VALUE("bsddf", df, SFS_DF_BSD),
	VALUE("minixdf", df, SFS_DF_MINIX),
	DEF("subdir", ARG_REQUIRED, set_subdir, AT(subdir), .kind = F_STR, .fixed = true),
	DEF("idmap", ARG_REQUIRED, set_idmap, AT(idmap_text), .kind = F_STR, .fixed = true),
	DEF("X-mount.idmap", ARG_REQUIRED, set_idmap, AT(idmap_text), .kind = F_STR, .fixed = true),
	FIXED_CHOICE("cache", cache, cache_choices),
	BOOL("passthrough", no_passthrough, 0),
	BOOL("nopassthrough", no_passthrough, 1),
	FIXED_CHOICE("share", share, share_choices),
	BOOL("remount", remount, 1),
	FLAG("nosuid", MS_NOSUID),
	NOFLAG("suid", MS_NOSUID),
	FLAG("nodev", MS_NODEV),
	NOFLAG("dev", MS_NODEV),
	FLAG("noexec", MS_NOEXEC),
	NOFLAG("exec", MS_NOEXEC),
	FLAG("nosymfollow", MS_NOSYMFOLLOW),
	NOFLAG("symfollow", MS_NOSYMFOLLOW),
	VALUE("noatime", atime, SFS_ATIME_NOATIME),
	VALUE("atime", atime, SFS_ATIME_RELATIME),
	VALUE("relatime", atime, SFS_ATIME_RELATIME),
	VALUE("norelatime", atime, SFS_ATIME_STRICT),
	VALUE("strictatime", atime, SFS_ATIME_STRICT),
	BOOL("nodiratime", nodiratime, 1),
	BOOL("diratime", nodiratime, 0),
	FIXED_VALUE("nocasefold", casefold, SFS_CASEFOLD_OFF),
	DEF("casefold", ARG_OPTIONAL, set_casefold, AT(casefold), .kind = F_INT, .fixed = true),
	DEF("noquota", ARG_NONE, set_quota, .data = 0),
	DEF("quota", ARG_NONE, set_quota, .data = 3),
	BOOL("usrquota", usrquota, 1),
	BOOL("grpquota", grpquota, 1),
	DEF("size", ARG_REQUIRED, set_view_limit, AT(size_limit), .data = 0),
	DEF("inodes", ARG_REQUIRED, set_view_limit, AT(inode_limit), .data = 1),
	/* what mount(8) echoes back from a view's own FUSE mount options on remount: every view
	 * is allow_other,default_permissions and owned by root */
	IGNORED("allow_other", ARG_NONE),
	IGNORED("default_permissions", ARG_NONE),
	DEF("user_id", ARG_REQUIRED, root_id_only, .data = 0),
	DEF("group_id", ARG_REQUIRED, root_id_only, .data = 0),
	/* fstab bookkeeping that mount(8) handles and may pass through. */
	IGNORED("defaults", ARG_NONE),
	IGNORED("auto", ARG_NONE),
	IGNORED("noauto", ARG_NONE),
	IGNORED("nofail", ARG_NONE),
	IGNORED("_netdev", ARG_NONE),
	IGNORED("comment", ARG_OPTIONAL),
	/* Superblock-only ext4 options (contract §3.3). */
	SB("data", ARG_REQUIRED, "data"),
	SB("data_err", ARG_REQUIRED, "data_err"),
	SB("commit", ARG_REQUIRED, "commit"),
	SB("errors", ARG_REQUIRED, "errors"),
	SB("max_batch_time", ARG_REQUIRED, "max_batch_time"),
	SB("min_batch_time", ARG_REQUIRED, "min_batch_time"),
	SB("stripe", ARG_REQUIRED, "stripe"),
	SB("journal_ioprio", ARG_REQUIRED, "journal_ioprio"),
	SB("inode_readahead_blks", ARG_REQUIRED, "inode_readahead_blks"),
	SB("resuid", ARG_REQUIRED, "resuid"),
	SB("resgid", ARG_REQUIRED, "resgid"),
	SB("max_dir_size_kb", ARG_REQUIRED, "max_dir_size_kb"),
	DEF("dax", ARG_OPTIONAL, set_sb, .data = 1, .key = "dax"),
	SB_FLAG("barrier", "nobarrier", "barrier"),
	SB_FLAG("discard", "nodiscard", "discard"),
	SB_FLAG("journal_checksum", "nojournal_checksum", "journal_checksum"),
	SB_FLAG("lazytime", "nolazytime", "lazytime"),
	SB_FLAG("delalloc", "nodelalloc", "delalloc"),
	SB_FLAG("auto_da_alloc", "noauto_da_alloc", "auto_da_alloc"),
	SB_FLAG("block_validity", "noblock_validity", "block_validity"),
	SB_FLAG("dioread_nolock", "dioread_lock", "dioread_nolock"),
	SB_FLAG("init_itable", "noinit_itable", "init_itable"),
	SB_FLAG("grpid", "nogrpid", "grpid"),
	SB_FLAG("bsdgroups", "sysvgroups", "grpid"),
	SB_SET("journal_async_commit", "journal_async_commit"),
	SB_SET("noload", "noload"),
	SB_SET("norecovery", "noload"),
	SB_SET("nombcache", "nombcache"),
	SB_SET("i_version", "i_version"),
	SB_SET("prefetch_block_bitmaps", "prefetch_block_bitmaps"),
};

static const struct opt_def *find_def(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		if (strlen(table[i].name) == len && !strncmp(table[i].name, name, len))
			return &table[i];
	return NULL;
}

bool sfs_sb_opt_shown(const struct sfs_sb_opt *s, const char *shown)
{
	const char *eq = strchr(shown, '=');
	size_t len = eq ? (size_t)(eq - shown) : strlen(shown);
	const struct opt_def *d = find_def(shown, len);
	char value[24];
	long data;

	if (d && d->apply == set_sb) {
		data = d->data;
	} else if (!d && !eq && len > 2 && !strncmp(shown, "no", 2) &&
	           (d = find_def(shown + 2, len - 2)) && d->apply == set_sb && d->arg == ARG_NONE &&
	           d->data == 1) {
		data = 0; /* "noX" of a flag whose off spelling is another word (nodioread_nolock) */
	} else {
		return false;
	}
	if (strcmp(d->key ? d->key : d->name, s->key))
		return false;
	if (eq)
		return !strcmp(eq + 1, s->value);
	if (d->arg == ARG_REQUIRED)
		return false;
	snprintf(value, sizeof(value), "%ld", data);
	return !strcmp(value, s->value);
}

static void note_flag_name(struct sfs_opts *o, const char *name)
{
	static const char *const flags[] = {"nosuid", "nodev", "noexec", "nosymfollow",
	                                    "noatime", "nodiratime", "strictatime"};
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (!strcmp(flags[i], name) && !strstr(o->flag_names, name))
			sfs_list_append(o->flag_names, sizeof(o->flag_names), name);
}

static void set_defaults(struct sfs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->acl = true;
	o->user_xattr = true;
	o->df = SFS_DF_BSD;
	o->share = SFS_SHARE_EXCLUSIVE;
	o->cache = SFS_CACHE_STRICT;
	o->atime = SFS_ATIME_RELATIME;
	strcpy(o->subdir, "/");
}

/* The flags a view's mount(2) gets, and the names status shows, follow the final state. */
static void finish_flags(struct sfs_opts *o)
{
	static const struct { unsigned long bit; const char *name; } bits[] = {
		{MS_NOSUID, "nosuid"}, {MS_NODEV, "nodev"}, {MS_NOEXEC, "noexec"},
		{MS_NOSYMFOLLOW, "nosymfollow"}};

	o->flag_names[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(bits); i++)
		if (o->mount_flags & bits[i].bit)
			note_flag_name(o, bits[i].name);
	if (o->atime == SFS_ATIME_NOATIME) {
		o->mount_flags |= MS_NOATIME;
		note_flag_name(o, "noatime");
	} else if (o->atime == SFS_ATIME_STRICT) {
		o->mount_flags |= MS_STRICTATIME;
		note_flag_name(o, "strictatime");
	} else {
		o->mount_flags |= MS_RELATIME;
	}
	if (o->nodiratime) {
		o->mount_flags |= MS_NODIRATIME;
		note_flag_name(o, "nodiratime");
	}
	if (o->ro)
		o->mount_flags |= MS_RDONLY;
}

bool sfs_opts_enforce_quota(const struct sfs_opts *o)
{
	return o->usrquota || o->grpquota || o->size_limit || o->inode_limit;
}

const char *sfs_opts_quota_name(const struct sfs_opts *o)
{
	if (o->usrquota && o->grpquota)
		return "quota";
	if (o->usrquota)
		return "usrquota";
	if (o->grpquota)
		return "grpquota";
	return o->size_limit ? "size" : "inodes";
}

/* Options that are each fine but cannot hold together. */
static int check_combinations(const struct sfs_opts *o, char *err, size_t errlen)
{
	if (o->cache == SFS_CACHE_WRITEBACK && sfs_opts_enforce_quota(o)) {
		sfs_errf(err, errlen, "cache=writeback",
		         "cannot be combined with %s (writes must reach the daemon to be checked "
		         "against the limits)", sfs_opts_quota_name(o));
		return -EINVAL;
	}
	if (o->share == SFS_SHARE_EXISTING && sfs_opts_enforce_quota(o)) {
		sfs_errf(err, errlen, sfs_opts_quota_name(o),
		         "cannot be enforced with share=existing (other mounts write to the backing "
		         "unaccounted)");
		return -EINVAL;
	}
	return 0;
}

static void too_long(char *err, size_t errlen)
{
	sfs_errf(err, errlen, "-o", "the option list is longer than %d bytes", SFS_OPTSTR_MAX - 1);
}

/* What a remount asked for that cannot change live: the first such option as spelled. */
struct fixed_seen {
	const struct opt_def *def[8];
	char text[8][160];
	int n;
};

static void note_fixed(struct fixed_seen *seen, const struct opt_def *d, const char *name,
                       size_t nsz, const char *value, size_t vsz)
{
	int i = 0;

	if (!seen || !d->fixed)
		return;
	/* one entry a field, its last spelling (the one in force): the fixed fields are few */
	while (i < seen->n && seen->def[i]->field != d->field)
		i++;
	if (i == (int)ARRAY_SIZE(seen->def))
		abort(); /* more fixed fields than entries: the table outgrew struct fixed_seen */
	seen->def[i] = d;
	snprintf(seen->text[i], sizeof(seen->text[0]), "%.*s%s%.*s", (int)nsz, name,
	         value ? "=" : "", value ? (int)vsz : 0, value ? value : "");
	if (i == seen->n)
		seen->n++;
}

/* Applies an option string onto o, whatever o held before; the fixed options it names are
 * noted in seen (if not NULL). */
static int apply(struct sfs_opts *o, const char *optstr, struct fixed_seen *seen, char *err,
                 size_t errlen)
{
	char copy[SFS_OPTSTR_MAX];
	char *name, *value;
	size_t nsz, vsz;
	char *next;

	if (!sfs_strlcpy(copy, optstr ? optstr : "", sizeof(copy))) {
		too_long(err, errlen);
		return -EINVAL;
	}
	next = copy;
	while (mnt_optstr_next_option(&next, &name, &nsz, &value, &vsz) == 0) {
		char nm[128], val[PATH_MAX];
		const struct opt_def *d = find_def(name, nsz);
		int rc;

		snprintf(nm, sizeof(nm), "%.*s", (int)nsz, name);
		if (value)
			snprintf(val, sizeof(val), "%.*s", (int)vsz, value);
		if (!d && !strncmp(nm, "x-", 2))
			continue; /* userspace fstab options belong to mount(8) and systemd */
		if (!d) {
			sfs_errf(err, errlen, nm, "unknown option");
			return -EINVAL;
		}
		if (d->arg == ARG_NONE && value) {
			sfs_errf(err, errlen, nm, "takes no value");
			return -EINVAL;
		}
		if (d->arg == ARG_REQUIRED && !value) {
			sfs_errf(err, errlen, nm, "needs a value (%s=...)", nm);
			return -EINVAL;
		}
		rc = d->apply(o, d, value ? val : NULL, err, errlen);
		if (rc)
			return rc;
		note_fixed(seen, d, name, nsz, value, vsz);
	}
	finish_flags(o);
	return check_combinations(o, err, errlen);
}

int sfs_opts_join(char *dst, const char *more, char *err, size_t errlen)
{
	if (!*more || sfs_list_append(dst, SFS_OPTSTR_MAX, more))
		return 0;
	too_long(err, errlen);
	return -E2BIG;
}

int sfs_opts_parse(const char *optstr, struct sfs_opts *o, char *err, size_t errlen)
{
	int rc;

	set_defaults(o);
	rc = apply(o, optstr, NULL, err, errlen);
	if (!rc)
		sfs_strlcpy(o->requested, optstr ? optstr : "", sizeof(o->requested));
	return rc;
}

static bool same_field(const struct opt_def *d, const struct sfs_opts *a, const struct sfs_opts *b)
{
	switch (d->kind) {
	case F_BOOL:
		return FIELD(a, d, bool) == FIELD(b, d, bool);
	case F_INT:
		return FIELD(a, d, int) == FIELD(b, d, int);
	default:
		return !strcmp((const char *)a + d->field, (const char *)b + d->field);
	}
}

/* What a live view cannot change (the table's fixed rows): refused, naming the option as the
 * remount spelled it. Giving one's current value again is no change. */
static int unchangeable(const struct sfs_opts *cur, const struct sfs_opts *o,
                        const struct fixed_seen *seen, char *err, size_t errlen)
{
	for (int i = 0; i < seen->n; i++)
		if (!same_field(seen->def[i], cur, o)) {
			sfs_errf(err, errlen, seen->text[i],
			         "cannot change on a live view; umount and mount it again");
			return -EINVAL;
		}
	return 0;
}

int sfs_opts_remount(const struct sfs_opts *cur, const char *optstr, struct sfs_opts *o,
                     char *err, size_t errlen)
{
	char requested[SFS_OPTSTR_MAX];
	struct fixed_seen seen = {.n = 0};
	int rc;

	*o = *cur;
	o->n_sb = 0;
	o->mount_flags &= ~(unsigned long)(MS_RDONLY | MS_NOATIME | MS_STRICTATIME | MS_RELATIME |
	                                   MS_NODIRATIME);
	if ((rc = apply(o, optstr, &seen, err, errlen)))
		return rc;
	o->remount = false;
	if ((rc = unchangeable(cur, o, &seen, err, errlen)))
		return rc;
	/* what was asked, mount then remounts; once that no longer fits, what was in force
	 * (respelled) and then this remount: never a history cut short */
	sfs_strlcpy(requested, cur->requested, sizeof(requested));
	if (!sfs_list_append(requested, sizeof(requested), optstr)) {
		char effective[SFS_EFFECTIVE_MAX];
		sfs_opts_format(cur, effective, sizeof(effective));
		if (!sfs_strlcpy(requested, effective, sizeof(requested)) ||
		    !sfs_list_append(requested, sizeof(requested), optstr)) {
			too_long(err, errlen);
			return -EINVAL;
		}
	}
	sfs_strlcpy(o->requested, requested, sizeof(o->requested));
	return 0;
}

void sfs_opts_sb_string(const struct sfs_opts *o, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int i = 0; i < o->n_sb; i++)
		sfs_list_append(buf, len, o->sb[i].text);
}

int sfs_opts_sb_compatible(const struct sfs_opts *in_force, const struct sfs_opts *req,
                           char *err, size_t errlen)
{
	for (int i = 0; i < req->n_sb; i++) {
		const struct sfs_sb_opt *r = &req->sb[i];
		const struct sfs_sb_opt *f = NULL;

		for (int j = 0; j < in_force->n_sb; j++)
			if (!strcmp(in_force->sb[j].key, r->key))
				f = &in_force->sb[j];
		if (!f) {
			sfs_errf(err, errlen, r->text,
			         "the backing is already mounted without it (superblock-only option; "
			         "it must match the first view)");
			return -EINVAL;
		}
		if (strcmp(f->value, r->value)) {
			sfs_errf(err, errlen, r->text,
			         "the backing is mounted with %s (superblock-only option; it must match)",
			         f->text);
			return -EINVAL;
		}
	}
	return 0;
}

char *sfs_opts_format(const struct sfs_opts *o, char *buf, size_t len)
{
	char item[PATH_MAX + 32];

	snprintf(buf, len, "%s,%s,%s,%s", o->acl ? "acl" : "noacl",
	         o->user_xattr ? "user_xattr" : "nouser_xattr", o->ro ? "ro" : "rw", sfs_df_name(o->df));
	if (o->casefold != SFS_CASEFOLD_OFF)
		sfs_list_append(buf, len, o->casefold == SFS_CASEFOLD_STRICT ? "casefold=strict" : "casefold");
	if (strcmp(o->subdir, "/")) {
		snprintf(item, sizeof(item), "subdir=%s", o->subdir);
		sfs_list_append(buf, len, item);
	}
	if (*o->idmap_text) {
		snprintf(item, sizeof(item), "idmap=%s", o->idmap_text);
		sfs_list_append(buf, len, item);
	}
	if (o->cache == SFS_CACHE_WRITEBACK)
		sfs_list_append(buf, len, "cache=writeback");
	if (o->no_passthrough)
		sfs_list_append(buf, len, "nopassthrough");
	if (o->share == SFS_SHARE_EXISTING)
		sfs_list_append(buf, len, "share=existing");
	if (o->usrquota || o->grpquota)
		sfs_list_append(buf, len, sfs_opts_quota_name(o));
	if (o->size_limit) {
		snprintf(item, sizeof(item), "size=%llu", (unsigned long long)o->size_limit);
		sfs_list_append(buf, len, item);
	}
	if (o->inode_limit) {
		snprintf(item, sizeof(item), "inodes=%llu", (unsigned long long)o->inode_limit);
		sfs_list_append(buf, len, item);
	}
	if (*o->flag_names)
		sfs_list_append(buf, len, o->flag_names);
	for (int i = 0; i < o->n_sb; i++)
		sfs_list_append(buf, len, o->sb[i].text);
	return buf;
}

void sfs_opts_mount_attr(unsigned long ms, struct mount_attr *a)
{
	static const struct { unsigned long ms; unsigned long long attr; } map[] = {
		{MS_RDONLY, MOUNT_ATTR_RDONLY}, {MS_NOSUID, MOUNT_ATTR_NOSUID},
		{MS_NODEV, MOUNT_ATTR_NODEV}, {MS_NOEXEC, MOUNT_ATTR_NOEXEC},
		{MS_NOSYMFOLLOW, MOUNT_ATTR_NOSYMFOLLOW}, {MS_NODIRATIME, MOUNT_ATTR_NODIRATIME}};

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		if (ms & map[i].ms)
			a->attr_set |= map[i].attr;
		else
			a->attr_clr |= map[i].attr;
	}
	a->attr_clr |= MOUNT_ATTR__ATIME;
	a->attr_set |= ms & MS_NOATIME ? MOUNT_ATTR_NOATIME
	             : ms & MS_STRICTATIME ? MOUNT_ATTR_STRICTATIME : MOUNT_ATTR_RELATIME;
}

const char *sfs_casefold_name(enum sfs_casefold cf)
{
	return cf == SFS_CASEFOLD_STRICT ? "strict" : cf == SFS_CASEFOLD_ON ? "on" : "off";
}

const char *sfs_df_name(enum sfs_df df)
{
	return df == SFS_DF_MINIX ? "minixdf" : "bsddf";
}
