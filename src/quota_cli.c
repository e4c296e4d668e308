/* `strictfs quota set|grace|report|check` (contract §5.4): the administrator's side of the
 * daemon's quota ledger. Limits of users and groups live on the backing; a view's own limits
 * are its size= and inodes= options, so `--view` is a remount of that view. */
#include "cli.h"
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "control.h"
#include "quota_state.h"
#include "util.h"

#define ERRLEN 1024

static void usage(FILE *out)
{
	fputs("Usage:\n"
	      " strictfs quota set SOURCE (-u USER | -g GROUP | --view MOUNTPOINT)\n"
	      "                    [--bsoft SIZE] [--bhard SIZE] [--isoft N] [--ihard N]\n"
	      " strictfs quota grace SOURCE [--blocks DURATION] [--inodes DURATION]\n"
	      " strictfs quota report SOURCE [--json]\n"
	      " strictfs quota check SOURCE\n"
	      "\nSOURCE is the device or image the views serve (or one of its views' mountpoints).\n"
	      "SIZE and N take K, M, G, T (binary); 0 removes a limit. DURATION: 90, 45s, 30m, 12h,\n"
	      "7d, 2w. A view's limits (--view) are its size= and inodes= options: hard only.\n",
	      out);
}

static int usage_error(const char *fmt, const char *arg)
{
	char *what = NULL;

	if (asprintf(&what, fmt, arg) < 0)
		what = NULL;
	sfs_err_printf("strictfs: quota: %s", what ? what : fmt);
	free(what);
	fprintf(stderr, "Try 'strictfs quota --help' for more information.\n");
	return SFS_EXIT_USAGE;
}

/* The daemon key of SOURCE, or of the source of the view mounted at SOURCE. */
/* Sends a quota request; on success *json holds the parsed answer if the daemon sent one. */
static int quota_call(const char *source, struct sfs_msg *req, json_object **json)
{
	char err[ERRLEN] = "", key[128];
	struct sfs_msg rep;
	const char *j;

	if (sfs_cli_running_key(source, key, sizeof(key), err, sizeof(err)) ||
	    sfs_cli_call_daemon(key, req, &rep, source, err, sizeof(err))) {
		sfs_err_print(err);
		return -1;
	}
	j = sfs_msg_get(&rep, "json");
	if (json)
		*json = j ? json_tokener_parse(j) : NULL;
	sfs_msg_free(&rep);
	return 0;
}

static bool parse_id(const char *s, bool group, uint32_t *id)
{
	unsigned long long n;

	if (group) {
		struct group *g = getgrnam(s);
		if (g) {
			*id = g->gr_gid;
			return true;
		}
	} else {
		struct passwd *p = getpwnam(s);
		if (p) {
			*id = p->pw_uid;
			return true;
		}
	}
	if (!sfs_parse_uint(s, &n) || n >= UINT32_MAX)
		return false;
	*id = (uint32_t)n;
	return true;
}

/* One NAME=VALUE more on a remount's option list; false, with the refusal printed, if it
 * would not fit (a limit is never cut short). */
static bool add_limit(char *opts, const char *name, const char *value)
{
	char item[SFS_OPTSTR_MAX + 16], err[512];

	if (!value)
		return true;
	snprintf(item, sizeof(item), "%s=%s", name, value);
	if (!sfs_opts_join(opts, item, err, sizeof(err)))
		return true;
	sfs_err_print(err);
	return false;
}

/* --view: the view's limits are its options; `remount,size=N,inodes=N` sets them live. */
static int set_view(const char *mp, const char *bhard, const char *ihard)
{
	char opts[SFS_OPTSTR_MAX] = "remount";

	if (!add_limit(opts, "size", bhard) || !add_limit(opts, "inodes", ihard))
		return SFS_EXIT_FAIL;
	return sfs_cli_remount(mp, opts) ? SFS_EXIT_FAIL : SFS_EXIT_OK;
}

static int cmd_set(int argc, char **argv)
{
	enum { OPT_BSOFT = 256, OPT_BHARD, OPT_ISOFT, OPT_IHARD, OPT_VIEW };
	static const struct option longopts[] = {
		{"user", required_argument, NULL, 'u'}, {"group", required_argument, NULL, 'g'},
		{"view", required_argument, NULL, OPT_VIEW}, {"bsoft", required_argument, NULL, OPT_BSOFT},
		{"bhard", required_argument, NULL, OPT_BHARD}, {"isoft", required_argument, NULL, OPT_ISOFT},
		{"ihard", required_argument, NULL, OPT_IHARD}, {NULL, 0, NULL, 0}};
	static const char *const field[] = {"bsoft", "bhard", "isoft", "ihard"};
	const char *user = NULL, *group = NULL, *view = NULL, *val[4] = {NULL};
	struct sfs_msg req;
	char idbuf[16], bad[3];
	uint32_t id;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":u:g:", longopts, NULL)) != -1) {
		switch (c) {
		case 'u': user = optarg; break;
		case 'g': group = optarg; break;
		case OPT_VIEW: view = optarg; break;
		case OPT_BSOFT: case OPT_BHARD: case OPT_ISOFT: case OPT_IHARD:
			val[c - OPT_BSOFT] = optarg;
			break;
		case ':': return usage_error("set: %s: needs an argument", sfs_cli_bad_option(argv, bad));
		default: return usage_error("set: %s: bad option", sfs_cli_bad_option(argv, bad));
		}
	}
	if (optind + 1 != argc)
		return usage_error("set: %s", "needs one SOURCE");
	if (!!user + !!group + !!view != 1)
		return usage_error("set: %s", "needs exactly one of -u USER, -g GROUP, --view MOUNTPOINT");
	if (!val[0] && !val[1] && !val[2] && !val[3])
		return usage_error("set: %s", "no limit given (--bsoft, --bhard, --isoft, --ihard)");
	for (int i = 0; i < 4; i++) {
		uint64_t n;
		if (val[i] && !sfs_parse_size(val[i], &n)) {
			sfs_err_printf("strictfs: --%s=%s: not a %s (a whole number with an optional K, "
			               "M, G or T)", field[i], val[i], i < 2 ? "size" : "count");
			return SFS_EXIT_FAIL;
		}
	}
	if (view) {
		if (val[0] || val[2]) {
			sfs_err_printf("strictfs: --%s: a view has hard limits only (its size= and "
			               "inodes= options)", val[0] ? "bsoft" : "isoft");
			return SFS_EXIT_FAIL;
		}
		return set_view(view, val[1], val[3]);
	}
	if (!parse_id(user ? user : group, !user, &id)) {
		sfs_err_printf("strictfs: %s: no such %s", user ? user : group, user ? "user" : "group");
		return SFS_EXIT_FAIL;
	}
	sfs_msg_init(&req, SFS_REQ_QUOTA);
	sfs_msg_add(&req, "op", "set");
	sfs_msg_add(&req, "type", user ? "user" : "group");
	snprintf(idbuf, sizeof(idbuf), "%" PRIu32, id);
	sfs_msg_add(&req, "id", idbuf);
	for (int i = 0; i < 4; i++) {
		uint64_t n;
		char num[32];
		if (!val[i])
			continue;
		sfs_parse_size(val[i], &n);
		snprintf(num, sizeof(num), "%" PRIu64, n);
		sfs_msg_add(&req, field[i], num);
	}
	rc = quota_call(argv[optind], &req, NULL);
	sfs_msg_free(&req);
	return rc ? SFS_EXIT_FAIL : SFS_EXIT_OK;
}

static int cmd_grace(int argc, char **argv)
{
	static const struct option longopts[] = {{"blocks", required_argument, NULL, 'b'},
	                                         {"inodes", required_argument, NULL, 'i'},
	                                         {NULL, 0, NULL, 0}};
	const char *b = NULL, *i = NULL;
	struct sfs_msg req;
	time_t t;
	char bad[3];
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (c == 'b')
			b = optarg;
		else if (c == 'i')
			i = optarg;
		else
			return usage_error(c == ':' ? "grace: %s: needs an argument" : "grace: %s: bad option",
			                   sfs_cli_bad_option(argv, bad));
	}
	if (optind + 1 != argc)
		return usage_error("grace: %s", "needs one SOURCE");
	if (!b && !i)
		return usage_error("grace: %s", "no grace time given (--blocks, --inodes)");
	if ((b && !sfs_parse_duration(b, &t)) || (i && !sfs_parse_duration(i, &t))) {
		sfs_err_printf("strictfs: --%s=%s: not a duration (e.g. 90, 45s, 30m, 12h, 7d, 2w)",
		               b && !sfs_parse_duration(b, &t) ? "blocks" : "inodes",
		               b && !sfs_parse_duration(b, &t) ? b : i);
		return SFS_EXIT_FAIL;
	}
	sfs_msg_init(&req, SFS_REQ_QUOTA);
	sfs_msg_add(&req, "op", "grace");
	if (b)
		sfs_msg_add(&req, "bgrace", b);
	if (i)
		sfs_msg_add(&req, "igrace", i);
	rc = quota_call(argv[optind], &req, NULL);
	sfs_msg_free(&req);
	return rc ? SFS_EXIT_FAIL : SFS_EXIT_OK;
}

static int64_t num(json_object *o, const char *a, const char *b)
{
	json_object *x = json_object_object_get(o, a);
	return json_object_get_int64(b ? json_object_object_get(x, b) : x);
}

static void print_limit(int64_t v, bool kib)
{
	if (!v)
		printf(" %10s", "-");
	else
		printf(" %10" PRId64, kib ? (v + 1023) / 1024 : v);
}

static void print_grace(json_object *res)
{
	json_object *g = json_object_object_get(res, "grace_ends");
	char buf[32] = "-";

	if (g) {
		int64_t left = json_object_get_int64(g) - time(NULL);
		if (left <= 0)
			snprintf(buf, sizeof(buf), "none");
		else if (left >= 86400)
			snprintf(buf, sizeof(buf), "%" PRId64 "days", (left + 86399) / 86400);
		else
			snprintf(buf, sizeof(buf), "%02" PRId64 ":%02" PRId64, left / 3600, left % 3600 / 60);
	}
	printf(" %8s", buf);
}

/* One repquota-like table: blocks in KiB as st_blocks counts them, then inodes. */
static void print_table(json_object *doc, const char *table, bool group)
{
	json_object *a = json_object_object_get(doc, table);

	printf("%-16s %10s %10s %10s %8s %10s %10s %10s %8s\n", group ? "Group" : "User", "KiB used",
	       "soft", "hard", "grace", "files", "soft", "hard", "grace");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		uint32_t id = (uint32_t)num(e, "id", NULL);
		char name[64];
		struct passwd *p = group ? NULL : getpwuid(id);
		struct group *g = group ? getgrgid(id) : NULL;

		if (p || g)
			snprintf(name, sizeof(name), "%s", p ? p->pw_name : g->gr_name);
		else
			snprintf(name, sizeof(name), "#%" PRIu32, id);
		printf("%-16s %10" PRId64, name, (num(e, "bytes", "used") + 1023) / 1024);
		print_limit(num(e, "bytes", "soft"), true);
		print_limit(num(e, "bytes", "hard"), true);
		print_grace(json_object_object_get(e, "bytes"));
		printf(" %10" PRId64, num(e, "inodes", "used"));
		print_limit(num(e, "inodes", "soft"), false);
		print_limit(num(e, "inodes", "hard"), false);
		print_grace(json_object_object_get(e, "inodes"));
		printf("\n");
	}
}

/* Each view's tree: usage against its size= and inodes=. */
static void print_views(json_object *a)
{
	if (!json_object_array_length(a))
		return;
	printf("\n%-32s %10s %10s %10s %10s\n", "View", "KiB used", "size", "files", "inodes");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *v = json_object_array_get_idx(a, i);
		printf("%-32s", json_object_get_string(json_object_object_get(v, "mountpoint")));
		if (json_object_object_get(v, "bytes"))
			printf(" %10" PRId64, (num(v, "bytes", NULL) + 1023) / 1024);
		else
			printf(" %10s", "(shared)");
		print_limit(num(v, "size", NULL), true);
		if (json_object_object_get(v, "inodes"))
			printf(" %10" PRId64, num(v, "inodes", NULL));
		else
			printf(" %10s", "(shared)");
		print_limit(num(v, "inode_limit", NULL), false);
		printf("\n");
	}
}

/* "done", "running", or where and why it failed: the usage below is then not known. */
static const char *scan_state(json_object *scan)
{
	static char buf[PATH_MAX + 128];
	const char *state = json_object_get_string(json_object_object_get(scan, "scan"));
	json_object *at = json_object_object_get(scan, "failed_at");

	if (!at)
		return state ? state : "?";
	snprintf(buf, sizeof(buf), "failed at %s: %s; the usage below is not known",
	         json_object_get_string(at),
	         json_object_get_string(json_object_object_get(scan, "error")));
	return buf;
}

static int cmd_report(int argc, char **argv)
{
	json_object *doc = NULL;
	const char *source = NULL;
	bool as_json = false;
	struct sfs_msg req;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			as_json = true;
		else if (argv[i][0] == '-')
			return usage_error("report: unknown option %s", argv[i]);
		else if (!source)
			source = argv[i];
		else
			return usage_error("report: %s: one SOURCE only", argv[i]);
	}
	if (!source)
		return usage_error("report: %s", "needs a SOURCE");
	sfs_msg_init(&req, SFS_REQ_QUOTA);
	sfs_msg_add(&req, "op", "report");
	rc = quota_call(source, &req, &doc);
	sfs_msg_free(&req);
	if (rc)
		return SFS_EXIT_FAIL;
	if (as_json) {
		json_object_object_add(doc, "version", json_object_new_int(1));
		json_object_object_add(doc, "source", json_object_new_string(source));
		printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
		                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
	} else {
		json_object *g = json_object_object_get(doc, "grace");
		printf("Quota report for %s (grace times: blocks %" PRId64 "s, inodes %" PRId64 "s; "
		       "scan %s)\n\n", source, num(g, "blocks", NULL), num(g, "inodes", NULL),
		       scan_state(json_object_object_get(doc, "scan")));
		print_table(doc, "users", false);
		printf("\n");
		print_table(doc, "groups", true);
		printf("\nTotal: %" PRId64 " KiB in %" PRId64 " inodes\n",
		       (num(json_object_object_get(doc, "total"), "bytes", "used") + 1023) / 1024,
		       num(json_object_object_get(doc, "total"), "inodes", "used"));
		print_views(json_object_object_get(doc, "views"));
	}
	json_object_put(doc);
	return SFS_EXIT_OK;
}

static int cmd_check(int argc, char **argv)
{
	json_object *doc = NULL, *diffs, *error;
	struct sfs_msg req;
	bool same;
	int rc;

	if (argc != 2 || argv[1][0] == '-')
		return usage_error("check: %s", "needs one SOURCE");
	sfs_msg_init(&req, SFS_REQ_QUOTA);
	sfs_msg_add(&req, "op", "check");
	rc = quota_call(argv[1], &req, &doc);
	sfs_msg_free(&req);
	if (rc)
		return SFS_EXIT_FAIL;
	same = json_object_get_boolean(json_object_object_get(doc, "same"));
	diffs = json_object_object_get(doc, "differences");
	if ((error = json_object_object_get(doc, "error"))) {
		sfs_err_printf("strictfs: %s: quota check failed: %s", argv[1],
		               json_object_get_string(error));
	} else if (same) {
		printf("%s: live accounting equals a fresh scan (%" PRId64 " inodes, %" PRId64
		       " KiB)\n", argv[1], num(doc, "inodes", NULL), (num(doc, "bytes", NULL) + 1023) / 1024);
	} else {
		for (size_t i = 0; i < json_object_array_length(diffs); i++) {
			json_object *x = json_object_array_get_idx(diffs, i);
			printf("%s %" PRId64 " %s: live %" PRId64 ", scan %" PRId64 "\n",
			       json_object_get_string(json_object_object_get(x, "table")), num(x, "id", NULL),
			       json_object_get_string(json_object_object_get(x, "resource")),
			       num(x, "live", NULL), num(x, "scan", NULL));
		}
		sfs_err_printf("strictfs: %s: quota accounting differs from a fresh scan in %zu places",
		               argv[1], json_object_array_length(diffs));
	}
	json_object_put(doc);
	return same ? SFS_EXIT_OK : SFS_EXIT_FAIL;
}

int sfs_cli_quota(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("%s", "needs a command (set, grace, report, check)");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return SFS_EXIT_OK;
	}
	if (!strcmp(argv[1], "set"))
		return cmd_set(argc - 1, argv + 1);
	if (!strcmp(argv[1], "grace"))
		return cmd_grace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	return usage_error("%s: unknown command", argv[1]);
}
