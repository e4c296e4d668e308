/* Fuzzes the view options' path from the command line (sfs_opts_join, as the CLI and the
 * helper join repeated -o) to the parser (sfs_opts_parse, sfs_opts_remount). The input is
 * one or more -o lists separated by '\x1f', optionally followed by '\n' and a remount option
 * string. Beyond not crashing, the harness checks: the lists are joined whole or refused with
 * one line naming the limit, never cut; errors are one "strictfs: " line; an accepted string parses the same twice,
 * its result is normalised (subdir, flags), and its options serialised back to a string parse
 * to the same result (superblock options included); a remount keeps what cannot change live,
 * and applying it twice is the same as once. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>

#include "fuzz.h"
#include "options.h"

#define ERRLEN 512

static void check_error(int rc, const char *err, const char *what)
{
	FUZZ_CHECK(rc == -EINVAL, "%s: rc %d", what, rc);
	FUZZ_CHECK(!strncmp(err, "strictfs: ", 10), "%s: error without prefix: '%s'", what, err);
	FUZZ_CHECK(memchr(err, '\0', ERRLEN) != NULL, "%s: error not terminated", what);
}

/* What the options mean, without how they were asked for (requested, remount). */
static bool same_meaning(const struct sfs_opts *a, const struct sfs_opts *b, bool with_sb)
{
	if (a->acl != b->acl || a->user_xattr != b->user_xattr || a->ro != b->ro ||
	    a->nodiratime != b->nodiratime || a->df != b->df || a->share != b->share ||
	    a->cache != b->cache || a->atime != b->atime || a->casefold != b->casefold ||
	    a->usrquota != b->usrquota || a->grpquota != b->grpquota ||
	    a->size_limit != b->size_limit || a->inode_limit != b->inode_limit ||
	    strcmp(a->subdir, b->subdir) || a->mount_flags != b->mount_flags ||
	    strcmp(a->flag_names, b->flag_names))
		return false;
	if (!with_sb)
		return true;
	if (a->n_sb != b->n_sb)
		return false;
	for (int i = 0; i < a->n_sb; i++)
		if (strcmp(a->sb[i].key, b->sb[i].key) || strcmp(a->sb[i].value, b->sb[i].value) ||
		    strcmp(a->sb[i].text, b->sb[i].text))
			return false;
	return true;
}

static void check_normalised(const struct sfs_opts *o, const char *optstr)
{
	const char *s = o->subdir;
	size_t len = strlen(s);
	unsigned long at = o->mount_flags & (MS_NOATIME | MS_STRICTATIME | MS_RELATIME);

	FUZZ_CHECK(s[0] == '/', "subdir '%s' not absolute", s);
	FUZZ_CHECK(len == 1 || s[len - 1] != '/', "subdir '%s' ends in /", s);
	FUZZ_CHECK(!strstr(s, "//"), "subdir '%s' has an empty component", s);
	FUZZ_CHECK(!strstr(s, "/./") && (len < 2 || strcmp(s + len - 2, "/.")),
	           "subdir '%s' has a '.' component", s);
	FUZZ_CHECK(!strstr(s, "/../") && (len < 3 || strcmp(s + len - 3, "/..")),
	           "subdir '%s' has a '..' component", s);
	FUZZ_CHECK(o->ro == !!(o->mount_flags & MS_RDONLY), "ro %d but flags %#lx", o->ro,
	           o->mount_flags);
	FUZZ_CHECK(at == MS_NOATIME || at == MS_STRICTATIME || at == MS_RELATIME,
	           "not exactly one atime flag: %#lx", o->mount_flags);
	FUZZ_CHECK(o->n_sb >= 0 && o->n_sb <= SFS_MAX_SB_OPTS, "n_sb %d", o->n_sb);
	for (int i = 0; i < o->n_sb; i++) {
		/* what reaches fsconfig is the option exactly as asked for, never a cut-off copy */
		const char *t = o->sb[i].text, *at = optstr;
		size_t tl = strlen(t);
		bool whole = false;
		while (optstr && !whole && (at = strstr(at, t))) {
			whole = (at == optstr || at[-1] == ',') && (at[tl] == ',' || at[tl] == '\0');
			at++;
		}
		FUZZ_CHECK(!optstr || whole, "superblock option '%s' is not one asked for", t);
	}
	for (int i = 0; i < o->n_sb; i++)
		for (int j = i + 1; j < o->n_sb; j++)
			FUZZ_CHECK(strcmp(o->sb[i].key, o->sb[j].key), "superblock option %s twice",
			           o->sb[i].key);
	if (optstr && strlen(optstr) < SFS_OPTSTR_MAX)
		FUZZ_CHECK(!strcmp(o->requested, optstr), "requested '%s' is not what was asked",
		           o->requested);
}

/* The options as one string of canonical spellings. False if it does not fit. */
static bool serialise(const struct sfs_opts *o, char *buf, size_t len)
{
	static const char *const atime[] = {"relatime", "noatime", "strictatime"};
	static const char *const casefold[] = {"nocasefold", "casefold", "casefold=strict"};
	char sb[SFS_OPTSTR_MAX];
	int n;

	sfs_opts_sb_string(o, sb, sizeof(sb));
	n = snprintf(buf, len, "noquota%s%s,size=%llu,inodes=%llu,"
	             "%s,%s,%s,%s,subdir=%s,cache=%s,share=%s,%s,%s,%s,%s,%s,%s,%s%s%s",
	             o->usrquota ? ",usrquota" : "", o->grpquota ? ",grpquota" : "",
	             (unsigned long long)o->size_limit, (unsigned long long)o->inode_limit,
	             o->acl ? "acl" : "noacl", o->user_xattr ? "user_xattr" : "nouser_xattr",
	             o->ro ? "ro" : "rw", sfs_df_name(o->df), o->subdir,
	             o->cache == SFS_CACHE_WRITEBACK ? "writeback" : "strict",
	             o->share == SFS_SHARE_EXISTING ? "existing" : "exclusive",
	             casefold[o->casefold], atime[o->atime],
	             o->nodiratime ? "nodiratime" : "diratime",
	             o->mount_flags & MS_NOSUID ? "nosuid" : "suid",
	             o->mount_flags & MS_NODEV ? "nodev" : "dev",
	             o->mount_flags & MS_NOEXEC ? "noexec" : "exec",
	             o->mount_flags & 256 /* MS_NOSYMFOLLOW */ ? "nosymfollow" : "symfollow",
	             *sb ? "," : "", sb);
	return n > 0 && (size_t)n < len && (size_t)n < SFS_OPTSTR_MAX;
}

static void check_accepted(const struct sfs_opts *o, const char *optstr)
{
	static struct sfs_opts again, back;
	char err[ERRLEN] = "", text[2 * SFS_OPTSTR_MAX];
	int rc;

	check_normalised(o, optstr);
	rc = sfs_opts_parse(optstr, &again, err, sizeof(err));
	FUZZ_CHECK(rc == 0 && !memcmp(o, &again, sizeof(again)), "a second parse differs");
	FUZZ_CHECK(sfs_opts_sb_compatible(o, o, err, sizeof(err)) == 0,
	           "options incompatible with themselves: %s", err);
	if (!serialise(o, text, sizeof(text)))
		return;
	rc = sfs_opts_parse(text, &back, err, sizeof(err));
	FUZZ_CHECK(rc == 0, "serialised options '%s' refused: %s", text, err);
	FUZZ_CHECK(same_meaning(o, &back, true), "serialised options '%s' mean something else",
	           text);
}

static void check_remount(const struct sfs_opts *cur, const char *optstr)
{
	static struct sfs_opts o, twice, none;
	char err[ERRLEN] = "";
	int rc = sfs_opts_remount(cur, optstr, &o, err, sizeof(err));

	if (rc) {
		check_error(rc, err, "remount");
		return;
	}
	check_normalised(&o, NULL);
	FUZZ_CHECK(!o.remount, "remount flag kept");
	FUZZ_CHECK(o.acl == cur->acl && !strcmp(o.subdir, cur->subdir) && o.cache == cur->cache &&
	           o.casefold == cur->casefold && o.share == cur->share,
	           "remount '%s' changed what cannot change live", optstr);
	rc = sfs_opts_remount(&o, optstr, &twice, err, sizeof(err));
	FUZZ_CHECK(rc == 0, "remount '%s' accepted once, refused twice: %s", optstr, err);
	FUZZ_CHECK(same_meaning(&o, &twice, true), "remount '%s' twice differs from once", optstr);
	rc = sfs_opts_remount(cur, "", &none, err, sizeof(err));
	FUZZ_CHECK(rc == 0 && same_meaning(cur, &none, false), "an empty remount changed options");
}

/* Joins the -o lists of in (separated by '\x1f') as the CLI does into joined. False if the
 * join was refused, which must be because the whole would not fit. */
static bool join_lists(char *in, char *joined)
{
	char err[ERRLEN] = "", want[2 * SFS_OPTSTR_MAX] = "";
	size_t whole = 0;

	joined[0] = '\0';
	for (char *list = in, *next; list; list = next) {
		if ((next = strchr(list, '\x1f')))
			*next++ = '\0';
		if (!*list)
			continue; /* mount(8) too adds nothing for an empty -o */
		whole += strlen(list) + (whole > 0);
		if (whole < sizeof(want)) {
			if (*want)
				strcat(want, ",");
			strcat(want, list);
		}
		if (sfs_opts_join(joined, list, err, sizeof(err))) {
			FUZZ_CHECK(whole >= SFS_OPTSTR_MAX, "a list of %zu bytes refused: %s", whole, err);
			FUZZ_CHECK(!strncmp(err, "strictfs: -o: ", 14) && !strchr(err, '\n'),
			           "join refusal is not one line naming -o: '%s'", err);
			return false;
		}
	}
	FUZZ_CHECK(!strcmp(joined, want), "the joined list '%s' is not every list in order", joined);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sfs_opts o;
	static char joined[SFS_OPTSTR_MAX];
	char *in = malloc(size + 1), *nl, *second = NULL;
	char err[ERRLEN] = "";
	int rc;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	if ((nl = memchr(in, '\n', size))) {
		*nl = '\0';
		second = nl + 1;
	}
	if (!join_lists(in, joined))
		goto out;
	rc = sfs_opts_parse(joined, &o, err, sizeof(err));
	if (rc) {
		check_error(rc, err, "parse");
	} else {
		check_accepted(&o, joined);
		if (second)
			check_remount(&o, second);
	}
out:
	free(in);
	return 0;
}
