/* The strictfs command: mount, umount, status, demo. Messages put the object first
 * ("strictfs: OBJECT: reason"); refusals exit 1, usage errors 2 (contract §2). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <syslog.h>
#include <unistd.h>

#include "client.h"
#include "control.h"
#include "mntns.h"
#include "mountid.h"
#include "options.h"
#include "status.h"
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

const char *sfs_cli_bad_option(char **argv, char buf[3])
{
	const char *word = argv[optind > 0 ? optind - 1 : 0];

	/* a long option's optopt is 0 (unknown) or its value (an argument missing) */
	if (optopt <= 0 || optopt >= 127 || !strncmp(word, "--", 2))
		return word;
	buf[0] = '-';
	buf[1] = (char)optopt;
	buf[2] = '\0';
	return buf;
}

static void print_err(const char *line)
{
	sfs_err_print(line);
}

/* The refusal in the system log, one line as on stderr. */
static void log_refusal(const char *source, const char *mountpoint, const char *err)
{
	char *line = NULL, out[SFS_ERR_LINE_MAX + 1];

	if (asprintf(&line, "%s: view at %s refused: %s", source, mountpoint, err) < 0)
		return;
	sfs_err_clean(out, sizeof(out), line);
	free(line);
	openlog("strictfs", LOG_PID, LOG_DAEMON);
	syslog(LOG_WARNING, "%s", out);
	closelog();
}

static int ensure_rundir(char *err, size_t errlen)
{
	if (mkdir(SFS_RUNDIR, 0700) < 0 && errno != EEXIST) {
		sfs_errf(err, errlen, SFS_RUNDIR, "%s", strerror(errno));
		return -1;
	}
	chmod(SFS_RUNDIR, 0700);
	return 0;
}

/* The view's FUSE superblock, always read-write: ro, like nosuid and the atime rule, is a
 * flag of the view's mount, which a remount changes (mount_setattr). On a read-only
 * superblock a later remount,rw would change the mount and every write would still fail.
 * Returns the detached mount's descriptor, carrying the view's flags from the start. */
static int make_view_mount(const char *source, int fuse_fd, const struct sfs_opts *o, char *err,
                           size_t errlen)
{
	static const char *const flags[] = {"allow_other", "default_permissions"};
	const char *const strings[][2] = {{"source", source}, {"subtype", "strictfs"},
	                                  {"rootmode", "40000"}, {"user_id", "0"},
	                                  {"group_id", "0"}};
	struct mount_attr attr;
	char fd[16];
	int fs = fsopen("fuse", FSOPEN_CLOEXEC), mnt = -1;

	if (fs < 0) {
		sfs_errf(err, errlen, "fuse", "fsopen: %s", strerror(errno));
		return -1;
	}
	snprintf(fd, sizeof(fd), "%d", fuse_fd);
	for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
		if (fsconfig(fs, FSCONFIG_SET_STRING, strings[i][0], strings[i][1], 0) < 0)
			goto fail;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (fsconfig(fs, FSCONFIG_SET_FLAG, flags[i], NULL, 0) < 0)
			goto fail;
	sfs_opts_mount_attr(o->mount_flags, &attr);
	if (fsconfig(fs, FSCONFIG_SET_STRING, "fd", fd, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mnt = fsmount(fs, FSMOUNT_CLOEXEC, attr.attr_set)) < 0)
		goto fail;
	close(fs);
	return mnt;
fail:
	sfs_errf(err, errlen, source, "cannot make the view's FUSE mount: %s", strerror(errno));
	close(fs);
	return -1;
}

/* The FUSE mount of a view, attached here in the caller's namespace (contract §6), or in ns:
 * /dev/fuse is opened and the mount made before entering it, since a container may have no
 * /dev/fuse. Its unique mount id in *id, which the daemon unmounts it by (mountid.h): read
 * from the mount itself before it is attached, so nothing put at mp meanwhile can stand in. */
static int mount_view(const char *source, const char *mp, const struct sfs_opts *o, int *fuse_fd,
                      uint64_t *id, struct sfs_mntns *ns, char *err, size_t errlen)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC), mnt, r, e;

	if (fd < 0) {
		sfs_errf(err, errlen, "/dev/fuse", "%s", strerror(errno));
		return -1;
	}
	if ((mnt = make_view_mount(source, fd, o, err, errlen)) < 0) {
		close(fd);
		return -1;
	}
	if ((r = sfs_mount_id_of(mnt, id))) {
		sfs_errf(err, errlen, mp, "cannot identify the view's mount: %s", strerror(-r));
		close(mnt);
		close(fd);
		return -1;
	}
	if (sfs_mntns_enter(ns, err, errlen)) {
		close(mnt);
		close(fd);
		return -1;
	}
	r = move_mount(mnt, "", AT_FDCWD, mp, MOVE_MOUNT_F_EMPTY_PATH);
	e = errno;
	close(mnt);
	if (sfs_mntns_leave(ns, err, errlen)) {
		if (!r && !sfs_mntns_enter(ns, NULL, 0))
			umount2(mp, MNT_DETACH);
		close(fd);
		return -1;
	}
	if (r < 0) {
		sfs_errf(err, errlen, mp, "%s", strerror(e));
		close(fd);
		return -1;
	}
	*fuse_fd = fd;
	return 0;
}

/* One request to the daemon of key. Returns 0 with the reply (to be freed), or -1 with the
 * one-line error: the daemon's refusal, or that it did not answer (naming object). */
int sfs_cli_call_daemon(const char *key, struct sfs_msg *req, struct sfs_msg *rep,
                        const char *object, char *err, size_t errlen)
{
	const char *rc, *msg;
	int r = sfs_client_call(key, req, rep);

	if (r) {
		sfs_errf(err, errlen, object, "the daemon did not answer: %s", strerror(-r));
		return -1;
	}
	rc = sfs_msg_get(rep, "rc");
	if (rc && !strcmp(rc, "0"))
		return 0;
	msg = sfs_msg_get(rep, "msg");
	if (msg)
		sfs_strlcpy(err, msg, errlen);
	else
		sfs_errf(err, errlen, object, "refused by the daemon");
	sfs_msg_free(rep);
	return -1;
}

int sfs_cli_running_key(const char *what, char *key, size_t keylen, char *err, size_t errlen)
{
	char path[PATH_MAX], src[PATH_MAX], real[PATH_MAX];
	bool is_file;
	int conn;

	if (realpath(what, real) && sfs_cli_view_source(real, src, sizeof(src)))
		what = src;
	if (sfs_source_key(what, key, keylen, path, sizeof(path), &is_file, err, errlen))
		return -1;
	if ((conn = sfs_client_connect(key)) < 0) {
		sfs_errf(err, errlen, what, "no strictfs daemon serves it (mount a view of it first)");
		return -1;
	}
	close(conn);
	return 0;
}

/* ns_target: the namespace the view was mounted in, or -1 for this process's own. */
static int add_view(const char *key, const char *source, const char *mp, const char *options,
                    int fuse_fd, uint64_t mnt_id, int ns_target, char *err, size_t errlen)
{
	char id[24];
	struct sfs_msg req, rep;
	int ns = ns_target >= 0 ? fcntl(ns_target, F_DUPFD_CLOEXEC, 0)
	                        : open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	int r;

	if (ns < 0) {
		sfs_errf(err, errlen, "/proc/self/ns/mnt", "%s", strerror(errno));
		return -1;
	}
	sfs_msg_init(&req, SFS_REQ_ADD_VIEW);
	sfs_msg_add(&req, "mountpoint", mp);
	sfs_msg_add(&req, "source", source);
	sfs_msg_add(&req, "options", options);
	snprintf(id, sizeof(id), "%llu", (unsigned long long)mnt_id);
	sfs_msg_add(&req, "mnt_id", id);
	req.fds[0] = fuse_fd;
	req.fds[1] = ns;
	req.nfds = 2;
	r = sfs_cli_call_daemon(key, &req, &rep, source, err, errlen);
	sfs_msg_free(&req);
	close(ns);
	if (!r)
		sfs_msg_free(&rep);
	return r;
}

static int check_mountpoint(const char *mp, char *real, char *err, size_t errlen)
{
	struct statfs sf;
	struct stat st;

	/* statfs always reaches a FUSE daemon: a dead view's cached attributes do not hide it */
	if (!realpath(mp, real) || stat(real, &st) < 0 || statfs(real, &sf) < 0) {
		sfs_mountpoint_errf(err, errlen, mp, errno);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		sfs_errf(err, errlen, mp, "not a directory");
		return -1;
	}
	return 0;
}

static int remount_call(const char *key, const char *mp, const char *options, bool check,
                        unsigned long flags[2], uint64_t *mnt_id, char *err, size_t errlen)
{
	struct sfs_msg req, rep;
	const char *fl;
	int ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC), r;

	sfs_msg_init(&req, SFS_REQ_REMOUNT);
	sfs_msg_add(&req, "mountpoint", mp);
	sfs_msg_add(&req, "options", options);
	sfs_msg_add(&req, "check", check ? "1" : "0");
	req.fds[0] = ns;
	req.nfds = ns >= 0;
	r = sfs_cli_call_daemon(key, &req, &rep, mp, err, errlen);
	sfs_msg_free(&req);
	if (ns >= 0)
		close(ns);
	if (r)
		return r;
	if ((fl = sfs_msg_get(&rep, "mount_flags")))
		flags[0] = strtoul(fl, NULL, 10);
	if ((fl = sfs_msg_get(&rep, "old_mount_flags")))
		flags[1] = strtoul(fl, NULL, 10);
	if ((fl = sfs_msg_get(&rep, "mnt_id")))
		*mnt_id = strtoull(fl, NULL, 10);
	sfs_msg_free(&rep);
	return 0;
}

/* The view's source as its mount table entry names it. */
bool sfs_cli_view_source(const char *mp, char *src, size_t len)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, mp, MNT_ITER_BACKWARD) : NULL;
	bool yes = fs && mnt_fs_get_fstype(fs) && !strcmp(mnt_fs_get_fstype(fs), "fuse.strictfs") &&
	           mnt_fs_get_source(fs);

	if (yes)
		sfs_strlcpy(src, mnt_fs_get_source(fs), len);
	mnt_unref_table(tb);
	return yes;
}

/* remount: the daemon validates the change (and refuses by name what cannot change live),
 * the kernel's per-mount flags change with mount_setattr, then the daemon applies it. Should
 * the daemon refuse at the last step (a file opened for writing meanwhile), the mount's flags
 * go back: a refused remount changes nothing. */
/* The view's mount (unique id mnt_id, found at mp through no symlink: mountid.h) gets the
 * per-mount flags of ms_flags; a path that leads elsewhere by now changes nothing. */
static int set_view_flags(const char *mp, uint64_t mnt_id, unsigned long ms_flags, char *err,
                          size_t errlen)
{
	struct mount_attr attr;
	int fd = sfs_mount_open_checked(mp, mnt_id), rc = 0;

	if (fd < 0) {
		sfs_errf(err, errlen, mp, "%s", fd == -ESTALE ? "no longer leads to the view it named "
		         "(a directory on the way was replaced); nothing changed" : strerror(-fd));
		return -1;
	}
	sfs_opts_mount_attr(ms_flags, &attr);
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		rc = -1;
		if (errno == EBUSY && (ms_flags & MS_RDONLY))
			sfs_errf(err, errlen, "ro", "files are open for writing through %s", mp);
		else
			sfs_errf(err, errlen, mp, "%s", strerror(errno));
	}
	close(fd);
	return rc;
}

int sfs_cli_remount(const char *mountpoint, const char *options)
{
	char err[ERRLEN] = "", mp[PATH_MAX], src[PATH_MAX], key[128], path[PATH_MAX];
	unsigned long flags[2] = {0, 0}; /* the view's mount flags after and before */
	uint64_t mnt_id = 0;
	bool is_file;

	if (!realpath(mountpoint, mp)) {
		sfs_errf(err, sizeof(err), mountpoint, "%s", strerror(errno));
		goto fail;
	}
	if (!sfs_cli_view_source(mp, src, sizeof(src))) {
		sfs_errf(err, sizeof(err), mp, "not a strictfs view");
		goto fail;
	}
	if (sfs_source_key(src, key, sizeof(key), path, sizeof(path), &is_file, err, sizeof(err)) ||
	    remount_call(key, mp, options, true, flags, &mnt_id, err, sizeof(err)) ||
	    set_view_flags(mp, mnt_id, flags[0], err, sizeof(err)))
		goto fail;
	if (remount_call(key, mp, options, false, flags, &mnt_id, err, sizeof(err))) {
		set_view_flags(mp, mnt_id, flags[1], NULL, 0);
		goto fail;
	}
	return 0;
fail:
	print_err(err);
	return -1;
}

/* Whether fd is still the file at path (it was not removed or replaced meanwhile). */
static bool still_at(int fd, const char *path)
{
	struct stat held, now;

	return fstat(fd, &held) == 0 && stat(path, &now) == 0 && held.st_ino == now.st_ino &&
	       held.st_dev == now.st_dev;
}

/* The source's lock: an flock on /run/strictfs/KEY.lock. A refused command that leaves no
 * daemon removes the file while it holds the lock (drop_lock_file), so a lock is taken only
 * once the file locked is still the one at the path: the classic lock-file pattern. Returns
 * the descriptor, or -1 with errno set. */
static int lock_source(const char *lockp)
{
	for (;;) {
		int fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600), e;

		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX) < 0) {
			e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (still_at(fd, lockp))
			return fd;
		close(fd); /* removed while this command waited for it: lock the one there now */
	}
}

/* A refusal leaves no lock file when no daemon serves the source: it is removed while held,
 * by this command (lock, held) or, when the daemon it started has ended, taken again without
 * waiting (lock -1: a command holding it now is using it). A daemon that refused to start
 * is waited for: it may still be releasing the backing. */
static void drop_lock_file(const char *key, const char *lockp, int lock)
{
	int fd = lock >= 0 ? lock : open(lockp, O_RDWR | O_CLOEXEC);
	pid_t other = sfs_daemon_pid(key);

	if (fd < 0)
		return;
	if (other && lock >= 0)
		sfs_wait_pid_gone(other, 5000);
	if ((lock >= 0 || flock(fd, LOCK_EX | LOCK_NB) == 0) && still_at(fd, lockp) &&
	    !sfs_daemon_pid(key))
		unlink(lockp);
	if (lock < 0)
		close(fd);
}

/* ns: where the mountpoint is resolved and the view mounted (SFS_MNTNS_NONE: here); the
 * source, the lock and the daemon are always this namespace's. */
static int mount_in(const char *source, const char *mountpoint, const char *options, bool verbose,
                    struct sfs_mntns *ns)
{
	char err[ERRLEN] = "", key[128], path[PATH_MAX], mp[PATH_MAX], lockp[PATH_MAX];
	struct sfs_opts o;
	uint64_t mnt_id = 0;
	pid_t started = 0;
	bool is_file, none = false;
	int lock = -1, fuse_fd = -1, conn;

	if (sfs_opts_parse(options, &o, err, sizeof(err)))
		goto fail;
	if (o.remount && ns->target >= 0) {
		sfs_errf(err, sizeof(err), "--namespace",
		         "not with remount (remount from inside the namespace)");
		goto fail;
	}
	if (o.remount)
		return sfs_cli_remount(mountpoint, options);
	if (sfs_source_key(source, key, sizeof(key), path, sizeof(path), &is_file, err, sizeof(err)))
		goto fail;
	if (sfs_mntns_enter(ns, err, sizeof(err)))
		goto fail;
	if (check_mountpoint(mountpoint, mp, err, sizeof(err))) {
		sfs_mntns_leave(ns, NULL, 0);
		goto fail;
	}
	if (sfs_mntns_leave(ns, err, sizeof(err)) || ensure_rundir(err, sizeof(err)))
		goto fail;
	sfs_lock_path(key, lockp, sizeof(lockp));
	if ((lock = lock_source(lockp)) < 0) {
		sfs_errf(err, sizeof(err), lockp, "%s", strerror(errno));
		goto fail;
	}
	conn = sfs_client_connect_running(key, source, err, sizeof(err));
	if (conn >= 0) {
		close(conn);
	} else if (conn != -ESRCH || sfs_client_start_daemon(key, path, is_file, options, &started,
	                                                     err, sizeof(err))) {
		none = conn == -ESRCH; /* the daemon started for it refused */
		goto fail;
	}
	if (mount_view(source, mp, &o, &fuse_fd, &mnt_id, ns, err, sizeof(err)))
		goto fail;
	if (add_view(key, source, mp, options, fuse_fd, mnt_id, ns->target, err, sizeof(err)))
		goto fail_unmount;
	close(fuse_fd);
	close(lock);
	if (verbose)
		printf("strictfs: %s mounted on %s (-o %s)\n", source, mp, *options ? options : "defaults");
	return 0;
fail_unmount:
	if (!sfs_mntns_enter(ns, NULL, 0)) {
		sfs_umount_checked(mp, mnt_id, MNT_DETACH);
		sfs_mntns_leave(ns, NULL, 0);
	}
fail:
	if (fuse_fd >= 0)
		close(fuse_fd);
	if (lock >= 0) {
		if (none)
			drop_lock_file(key, lockp, lock);
		close(lock);
	}
	/* a daemon started for this view ends by itself once the lock is free: wait for it, so
	 * that nothing is left behind when this command returns */
	if (started && sfs_wait_pid_gone(started, 5000))
		drop_lock_file(key, lockp, -1);
	print_err(err);
	log_refusal(source, mountpoint, err);
	return -1;
}

int sfs_cli_mount(const char *source, const char *mountpoint, const char *options, bool verbose)
{
	struct sfs_mntns ns = SFS_MNTNS_NONE;

	return mount_in(source, mountpoint, options, verbose, &ns);
}

int sfs_cli_mount_ns(const char *source, const char *mountpoint, const char *options, bool verbose,
                     const char *ns_spec)
{
	struct sfs_mntns ns = SFS_MNTNS_NONE;
	char err[ERRLEN];
	int r;

	if (!ns_spec)
		return sfs_cli_mount(source, mountpoint, options, verbose);
	if (sfs_mntns_open(&ns, ns_spec, err, sizeof(err))) {
		print_err(err);
		log_refusal(source, mountpoint, err);
		return -1;
	}
	r = mount_in(source, mountpoint, options, verbose, &ns);
	sfs_mntns_close(&ns);
	return r;
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
