/* The strictfs command: its arguments and dispatch, and umount, status and upgrade, which
 * are a few calls to the daemons; a view is added in cli_mount.c. Messages put the object first
 * ("strictfs: OBJECT: reason"); refusals exit 1, usage errors 2 (contract §2). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "control.h"
#include "mntns.h"
#include "mountid.h"
#include "options.h"
#include "status_print.h"
#include "util.h"

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif

#define ERRLEN 1024

static void usage(FILE *out)
{
	fputs("Usage:\n"
	      " strictfs mount [-o OPTIONS] [-N NS] SOURCE MOUNTPOINT\n"
	      "                                                 add a view of SOURCE\n"
	      " strictfs umount [-N NS] MOUNTPOINT              remove a view\n"
	      " strictfs status [SOURCE|MOUNTPOINT] [--json]    daemons, backings and views\n"
	      " strictfs quota set|grace|report|check SOURCE ... usage and limits; see\n"
	      "                                                 'strictfs quota --help'\n"
	      " strictfs upgrade SOURCE|--all                   hand the views over to the binary\n"
	      "                                                 installed now\n"
	      " strictfs demo                                   the seed scenario, end to end\n"
	      "\nOptions:\n"
	      " -o, --options LIST   view options (acl, noacl, user_xattr, nouser_xattr, ro, rw,\n"
	      "                      subdir=PATH, bsddf, minixdf, nosuid, nodev, noexec, noatime,\n"
	      "                      relatime, strictatime, nodiratime, nosymfollow, cache=,\n"
	      "                      share=, quota, usrquota, grpquota, noquota, size=, inodes=,\n"
	      "                      ext4 superblock options); see strictfs(8)\n"
	      " -N, --namespace NS   mount or unmount the view in the mount namespace of NS\n"
	      "                      (a PID or a namespace file such as /proc/PID/ns/mnt)\n"
	      " -h, --help           display this help\n"
	      " -V, --version        display version\n",
	      out);
}

static int usage_error(const char *fmt, const char *arg)
{
	char *what = NULL;

	if (asprintf(&what, fmt, arg) < 0)
		what = NULL;
	sfs_err_printf("strictfs: %s", what ? what : fmt);
	free(what);
	fprintf(stderr, "Try 'strictfs --help' for more information.\n");
	return SFS_EXIT_USAGE;
}

static void print_err(const char *line)
{
	sfs_err_print(line);
}

static int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"options", required_argument, NULL, 'o'},
		{"verbose", no_argument, NULL, 'v'},
		{"namespace", required_argument, NULL, 'N'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	char options[SFS_OPTSTR_MAX] = "", err[ERRLEN];
	const char *ns = NULL;
	bool verbose = false;
	int c;
	char bad[3];

	/* options anywhere, as mount(8) takes them (`strictfs mount SRC DIR -o noacl`); "--"
	 * ends them */
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:vN:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'N':
			ns = optarg;
			break;
		case 'o':
			if (sfs_opts_join(options, optarg, err, sizeof(err))) {
				print_err(err);
				return SFS_EXIT_FAIL;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return SFS_EXIT_OK;
		case ':':
			return usage_error("mount: %s: needs an argument", sfs_cli_bad_option(argv, bad));
		default:
			return usage_error("mount: %s: bad option", sfs_cli_bad_option(argv, bad));
		}
	}
	if (argc - optind == 1 && strstr(options, "remount"))
		return sfs_cli_mount(argv[optind], argv[optind], options, verbose) ? SFS_EXIT_FAIL
		                                                                   : SFS_EXIT_OK;
	if (argc - optind != 2)
		return usage_error("%s: needs SOURCE and MOUNTPOINT", "mount");
	return sfs_cli_mount_ns(argv[optind], argv[optind + 1], options, verbose, ns)
	               ? SFS_EXIT_FAIL
	               : SFS_EXIT_OK;
}

/* The pid of the daemon whose only view is at mp, or 0. */
static pid_t sole_view_daemon(const char *mp)
{
	json_object *doc = sfs_client_status(), *daemons = json_object_object_get(doc, "daemons");
	pid_t pid = 0;

	for (size_t i = 0; daemons && i < json_object_array_length(daemons); i++) {
		json_object *d = json_object_array_get_idx(daemons, i);
		json_object *views = json_object_object_get(d, "views");
		if (json_object_array_length(views) != 1)
			continue;
		if (!strcmp(json_object_get_string(json_object_object_get(
			    json_object_array_get_idx(views, 0), "mountpoint")), mp))
			pid = json_object_get_int(json_object_object_get(d, "pid"));
	}
	json_object_put(doc);
	return pid;
}

/* The daemon serving a view at mp in the mount namespace named ns ("mnt:[INO]", as status
 * reports it), or 0; *last tells whether it is that daemon's only view. */
static pid_t view_daemon_in_ns(const char *mp, const char *ns, bool *last)
{
	json_object *doc = sfs_client_status(), *daemons = json_object_object_get(doc, "daemons");
	pid_t pid = 0;

	for (size_t i = 0; !pid && daemons && i < json_object_array_length(daemons); i++) {
		json_object *d = json_object_array_get_idx(daemons, i);
		json_object *views = json_object_object_get(d, "views");
		for (size_t k = 0; !pid && k < json_object_array_length(views); k++) {
			json_object *v = json_object_array_get_idx(views, k);
			const char *m = json_object_get_string(json_object_object_get(v, "mountpoint"));
			const char *n = json_object_get_string(json_object_object_get(v, "mount_ns"));
			if (m && n && !strcmp(m, mp) && !strcmp(n, ns)) {
				pid = json_object_get_int(json_object_object_get(d, "pid"));
				*last = json_object_array_length(views) == 1;
			}
		}
	}
	json_object_put(doc);
	return pid;
}

/* Unmounts the view mp leads to now, in this process's namespace, and only it: mp is
 * resolved once, and nothing is unmounted if it leads elsewhere by the time of the unmount
 * (whoever owns a directory on the way may swap it for a symlink, mountid.h). Returns 0, or -1
 * with the one-line error. */
static int umount_view(const char *mp, char *err, size_t errlen)
{
	char type[64] = "";
	uint64_t id = 0;
	int rc = sfs_mount_id_at(mp, &id);

	if (!rc)
		rc = sfs_mount_describe(id, NULL, 0, type, sizeof(type));
	if (rc == -EINVAL || (!rc && strcmp(type, "fuse.strictfs"))) {
		sfs_errf(err, errlen, mp, "not a strictfs view");
		return -1;
	}
	if (!rc)
		rc = sfs_umount_checked(mp, id, 0);
	if (rc == -ESTALE || rc == -ELOOP)
		sfs_errf(err, errlen, mp, "no longer leads to the view it named (a directory on the way "
		         "was replaced); nothing unmounted");
	else if (rc)
		sfs_errf(err, errlen, mp, "%s", strerror(-rc));
	return rc ? -1 : 0;
}

/* umount --namespace NS MOUNTPOINT: the view is looked up by its path in that namespace and
 * the namespace itself in the daemons' status (the container's /proc may not show this
 * process), then unmounted there. */
static int umount_in_ns(const char *spec, const char *mountpoint)
{
	struct sfs_mntns ns = SFS_MNTNS_NONE;
	char err[ERRLEN] = "", mp[PATH_MAX], id[48];
	bool last = false;
	struct stat st;
	pid_t daemon;
	int rc = SFS_EXIT_FAIL, e = 0;

	if (sfs_mntns_open(&ns, spec, err, sizeof(err)))
		goto out;
	if (fstat(ns.target, &st) < 0) {
		sfs_errf(err, sizeof(err), spec, "%s", strerror(errno));
		goto out;
	}
	snprintf(id, sizeof(id), "mnt:[%llu]", (unsigned long long)st.st_ino);
	if (sfs_mntns_enter(&ns, err, sizeof(err)))
		goto out;
	if (!realpath(mountpoint, mp)) {
		sfs_errf(err, sizeof(err), mountpoint, "%s", strerror(errno));
		sfs_mntns_leave(&ns, NULL, 0);
		goto out;
	}
	if (sfs_mntns_leave(&ns, err, sizeof(err)))
		goto out;
	daemon = view_daemon_in_ns(mp, id, &last);
	if (!daemon) {
		sfs_errf(err, sizeof(err), mp, "not a strictfs view in the namespace of --namespace %s",
		         spec);
		goto out;
	}
	if (sfs_mntns_enter(&ns, err, sizeof(err)))
		goto out;
	e = umount_view(mp, err, sizeof(err));
	if (sfs_mntns_leave(&ns, e ? NULL : err, e ? 0 : sizeof(err)) || e)
		goto out;
	if (last && !sfs_wait_pid_gone(daemon, 10000)) {
		sfs_errf(err, sizeof(err), mp, "unmounted, but daemon %d has not exited yet", daemon);
		goto out;
	}
	rc = SFS_EXIT_OK;
out:
	sfs_mntns_close(&ns);
	if (rc)
		print_err(err);
	return rc;
}

static int cmd_umount(int argc, char **argv)
{
	char mp[PATH_MAX], src[PATH_MAX], err[ERRLEN];
	pid_t last;

	if (argc == 4 && (!strcmp(argv[1], "-N") || !strcmp(argv[1], "--namespace")))
		return umount_in_ns(argv[2], argv[3]);
	if (argc == 3 && !strncmp(argv[1], "--namespace=", 12))
		return umount_in_ns(argv[1] + 12, argv[2]);
	if (argc > 1 && (!strcmp(argv[1], "-N") || !strncmp(argv[1], "--namespace", 11)))
		return usage_error("%s: needs NS and MOUNTPOINT", "umount --namespace");
	if (argc != 2)
		return usage_error("%s: needs MOUNTPOINT", "umount");
	if (!realpath(argv[1], mp)) {
		sfs_errf(err, sizeof(err), argv[1], "%s", strerror(errno));
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	if (!sfs_cli_view_source(mp, src, sizeof(src))) {
		sfs_errf(err, sizeof(err), mp, "not a strictfs view");
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	last = sole_view_daemon(mp);
	if (umount_view(mp, err, sizeof(err))) {
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	/* the last view: the daemon releases the backing; wait so the device is free on return */
	if (last && !sfs_wait_pid_gone(last, 10000)) {
		sfs_errf(err, sizeof(err), mp, "unmounted, but daemon %d has not exited yet", last);
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	return SFS_EXIT_OK;
}

/* Keeps the daemons whose source, backing device or a view matches what. */
static void filter_status(json_object *doc, const char *what)
{
	json_object *daemons = json_object_object_get(doc, "daemons");
	json_object *kept = json_object_new_array();
	char real[PATH_MAX];

	if (!realpath(what, real))
		sfs_strlcpy(real, what, sizeof(real));
	for (size_t i = 0; i < json_object_array_length(daemons); i++) {
		json_object *d = json_object_array_get_idx(daemons, i);
		json_object *views = json_object_object_get(d, "views");
		json_object *b = json_object_object_get(d, "backing");
		bool match = !strcmp(json_object_get_string(json_object_object_get(d, "source")), real) ||
		             !strcmp(json_object_get_string(json_object_object_get(b, "path")), real);
		for (size_t k = 0; !match && k < json_object_array_length(views); k++)
			match = !strcmp(json_object_get_string(json_object_object_get(
				                json_object_array_get_idx(views, k), "mountpoint")), real);
		if (match)
			json_object_array_add(kept, json_object_get(d));
	}
	json_object_object_add(doc, "daemons", kept);
}

/* The generation and pid of the daemon of key, from its status; false if it does not answer. */
static bool daemon_generation(const char *key, unsigned long long *gen, long *pid)
{
	struct sfs_msg req, rep;
	json_object *doc = NULL;
	const char *j;
	bool ok = false;

	sfs_msg_init(&req, SFS_REQ_STATUS);
	if (sfs_client_call(key, &req, &rep) == 0) {
		if ((j = sfs_msg_get(&rep, "json")) && (doc = json_tokener_parse(j))) {
			*gen = json_object_get_uint64(json_object_object_get(doc, "generation"));
			*pid = json_object_get_int64(json_object_object_get(doc, "pid"));
			ok = true;
			json_object_put(doc);
		}
		sfs_msg_free(&rep);
	}
	sfs_msg_free(&req);
	return ok;
}

static long long monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Hands the views of a source over to the binary installed now, and waits for it to serve. */
static int upgrade_source(const char *source)
{
	char key[128], err[ERRLEN];
	unsigned long long old_gen, gen = 0;
	struct sfs_msg req, rep;
	long old_pid, pid = 0;
	long long t0, t;

	if (sfs_cli_running_key(source, key, sizeof(key), err, sizeof(err))) {
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	t0 = monotonic_ms();
	sfs_msg_init(&req, SFS_REQ_UPGRADE);
	if (sfs_cli_call_daemon(key, &req, &rep, source, err, sizeof(err))) {
		sfs_msg_free(&req);
		print_err(err);
		return SFS_EXIT_FAIL;
	}
	old_gen = strtoull(sfs_msg_get(&rep, "generation") ?: "0", NULL, 10);
	old_pid = strtol(sfs_msg_get(&rep, "pid") ?: "0", NULL, 10);
	sfs_msg_free(&rep);
	sfs_msg_free(&req);
	do {
		bool answered = daemon_generation(key, &gen, &pid);
		t = monotonic_ms();
		if (answered && gen > old_gen)
			break;
		usleep(2000);
	} while (t - t0 < 30000);
	if (gen <= old_gen) {
		sfs_err_printf("strictfs: %s: generation %llu handed over, but no successor answered "
		               "within 30 s (see the system log)", source, old_gen);
		return SFS_EXIT_FAIL;
	}
	printf("%s: generation %llu (pid %ld) took over from generation %llu (pid %ld) in %lld ms\n",
	       source, gen, pid, old_gen, old_pid, t - t0);
	return SFS_EXIT_OK;
}

/* Every running daemon, one after the other (the package's upgrade); the first failure does
 * not stop the others. */
static int upgrade_all(void)
{
	json_object *doc = sfs_client_status();
	json_object *daemons = json_object_object_get(doc, "daemons");
	int rc = SFS_EXIT_OK;

	if (!json_object_array_length(daemons))
		printf("no strictfs daemon runs: nothing to upgrade\n");
	for (size_t i = 0; i < json_object_array_length(daemons); i++) {
		const char *source = json_object_get_string(
			json_object_object_get(json_object_array_get_idx(daemons, i), "source"));
		if (source && upgrade_source(source) != SFS_EXIT_OK)
			rc = SFS_EXIT_FAIL;
	}
	json_object_put(doc);
	return rc;
}

static int cmd_upgrade(int argc, char **argv)
{
	if (argc != 2)
		return usage_error("upgrade: %s", "needs one SOURCE (or a view's MOUNTPOINT), or --all");
	return !strcmp(argv[1], "--all") ? upgrade_all() : upgrade_source(argv[1]);
}

static int cmd_status(int argc, char **argv)
{
	const char *what = NULL;
	bool as_json = false;
	json_object *doc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			as_json = true;
		else if (argv[i][0] == '-')
			return usage_error("status: unknown option %s", argv[i]);
		else if (!what)
			what = argv[i];
		else
			return usage_error("status: %s: one SOURCE or MOUNTPOINT at most", argv[i]);
	}
	/* the daemons answer only root, under /run/strictfs (0700): another user must not be told
	 * that none runs */
	if (access(SFS_RUNDIR, R_OK | X_OK) < 0 && errno != ENOENT) {
		sfs_err_printf("strictfs: %s: not accessible: %s (run as root)", SFS_RUNDIR,
		               strerror(errno));
		return SFS_EXIT_FAIL;
	}
	doc = sfs_client_status();
	if (what)
		filter_status(doc, what);
	if (as_json)
		printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
		                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		sfs_status_print(doc);
	json_object_put(doc);
	return SFS_EXIT_OK;
}

int sfs_cli_main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return SFS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return SFS_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("strictfs %s\n", SFS_VERSION);
		return SFS_EXIT_OK;
	}
	if (geteuid() != 0 && strcmp(argv[1], "status")) {
		sfs_err_printf("strictfs: %s: must be run as root", argv[1]);
		return SFS_EXIT_FAIL;
	}
	if (!strcmp(argv[1], "mount"))
		return cmd_mount(argc - 1, argv + 1);
	if (!strcmp(argv[1], "umount") || !strcmp(argv[1], "unmount"))
		return cmd_umount(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(argv[1], "quota"))
		return sfs_cli_quota(argc - 1, argv + 1);
	if (!strcmp(argv[1], "upgrade"))
		return cmd_upgrade(argc - 1, argv + 1);
	if (!strcmp(argv[1], "demo"))
		return sfs_demo("/proc/self/exe");
	return usage_error("%s: unknown command", argv[1]);
}
