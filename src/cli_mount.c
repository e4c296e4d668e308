/* Adding a view (`strictfs mount`, mount.strictfs): under the source's lock, its daemon is
 * found or started, the view's FUSE mount is made detached, carrying the view's flags, and
 * moved onto the mountpoint (in a container's mount namespace with -N), then handed to the
 * daemon. A refusal undoes what was done, so that no mount, daemon or lock file is left behind,
 * and is a syslog line as well as the error printed, as every refused view is (contract §6). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <syslog.h>
#include <unistd.h>

#include <libmount.h>

#include "client.h"
#include "control.h"
#include "mntns.h"
#include "mountid.h"
#include "options.h"
#include "util.h"

#define ERRLEN 1024

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

/* The FUSE mount of a view, made detached: /dev/fuse is opened and the mount made before a
 * container's namespace is entered, since a container may have no /dev/fuse. Its unique
 * mount id in *id, which the daemon unmounts it by (mountid.h): read from the mount itself
 * before it is attached, so nothing put at mp meanwhile can stand in. Returns the mount's
 * descriptor, or -1. */
static int make_view(const char *source, const char *mp, const struct sfs_opts *o, int *fuse_fd,
                     uint64_t *id, char *err, size_t errlen)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC), mnt, r;

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
	*fuse_fd = fd;
	return mnt;
}

/* The view's mount attached at mp, in the caller's namespace (contract §6) or in ns. Closes
 * mnt: a mount never attached ends with it, and with it its FUSE connection. */
static int attach_view(int mnt, const char *mp, struct sfs_mntns *ns, char *err, size_t errlen)
{
	int r, e;

	if (sfs_mntns_enter(ns, err, errlen)) {
		close(mnt);
		return -1;
	}
	r = move_mount(mnt, "", AT_FDCWD, mp, MOVE_MOUNT_F_EMPTY_PATH);
	e = errno;
	close(mnt);
	if (sfs_mntns_leave(ns, err, errlen)) {
		if (!r && !sfs_mntns_enter(ns, NULL, 0))
			umount2(mp, MNT_DETACH);
		return -1;
	}
	if (r < 0) {
		sfs_errf(err, errlen, mp, "%s", strerror(e));
		return -1;
	}
	return 0;
}

/* idmap=: the detached view idmapped through a user namespace with the map, before it
 * is attached, so that no path ever reaches it but through the map (doc/design.md). The
 * kernel allows it only once the daemon's INIT reply has allowed it: a statfs waits for
 * that reply. */
static int idmap_view(int mnt, const struct sfs_opts *o, int given, char *err, size_t errlen)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP};
	struct statfs sf;
	int userns, r = 0;

	if (fstatfs(mnt, &sf) < 0) {
		sfs_errf(err, errlen, o->idmap_name, "the view did not start: %s", strerror(errno));
		return -1;
	}
	userns = given >= 0 ? fcntl(given, F_DUPFD_CLOEXEC, 0)
	                    : sfs_idmap_userns(&o->idmap, o->idmap_name, err, errlen);
	if (userns < 0) {
		if (given >= 0)
			sfs_errf(err, errlen, o->idmap_name, "%s", strerror(errno));
		return -1;
	}
	attr.userns_fd = userns;
	if (mount_setattr(mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		sfs_errf(err, errlen, o->idmap_name, "the kernel refuses to idmap the view: %s%s",
		         strerror(errno),
		         errno == EINVAL ? " (FUSE_ALLOW_IDMAP needs Linux 6.12 or later)" : "");
		r = -1;
	}
	close(userns);
	return r;
}

/* idmap=/PATH, util-linux's other form: the user namespace file's maps, read here, take the
 * path's place in the options the daemon gets (it never reads a namespace itself), and the
 * namespace idmaps the view. *resolved: the options to use (to free); *userns: the
 * namespace, or -1 when the options name none. Returns 0, or -1 with err. */
static int resolve_idmap_path(const char *options, char **resolved, int *userns, char *err,
                              size_t errlen)
{
	static const char *const names[] = {"idmap", "X-mount.idmap"};
	char path[PATH_MAX], spelled[24], text[SFS_IDMAP_TEXT_MAX];
	struct sfs_idmap m;
	size_t len;
	char *v;

	*userns = -1;
	if (!(*resolved = strdup(options)))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (mnt_optstr_get_option(*resolved, names[i], &v, &len) || !len)
			continue;
		if (len >= 2 && v[0] == '"' && v[len - 1] == '"')
			v++, len -= 2;
		if (!len || v[0] != '/' || len >= sizeof(path))
			continue; /* extents, or a path the parser refuses by name */
		memcpy(path, v, len);
		path[len] = '\0';
		snprintf(spelled, sizeof(spelled), "%s=", names[i]);
		if (*userns >= 0)
			close(*userns);
		if ((*userns = sfs_idmap_read_userns(path, spelled, &m, err, errlen)) < 0 ||
		    mnt_optstr_set_option(resolved, names[i],
		                          sfs_idmap_format(&m, text, sizeof(text)))) {
			if (*userns >= 0)
				sfs_errf(err, errlen, spelled, "cannot rewrite the options");
			return -1;
		}
	}
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
static int mount_resolved(const char *source, const char *mountpoint, const char *options,
                          bool verbose, struct sfs_mntns *ns, int userns)
{
	char err[ERRLEN] = "", key[128], path[PATH_MAX], mp[PATH_MAX], lockp[PATH_MAX];
	struct sfs_opts o;
	uint64_t mnt_id = 0;
	pid_t started = 0;
	bool is_file, none = false;
	int lock = -1, fuse_fd = -1, conn, mnt;

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
	if ((mnt = make_view(source, mp, &o, &fuse_fd, &mnt_id, err, sizeof(err))) < 0)
		goto fail;
	if (sfs_idmap_active(&o.idmap)) {
		/* the daemon serves it first: the kernel idmaps only a view whose INIT allowed it */
		if (add_view(key, source, mp, options, fuse_fd, mnt_id, ns->target, err, sizeof(err)) ||
		    idmap_view(mnt, &o, userns, err, sizeof(err))) {
			close(mnt); /* never attached: the daemon sees its view end */
			goto fail;
		}
		if (attach_view(mnt, mp, ns, err, sizeof(err)))
			goto fail;
	} else if (attach_view(mnt, mp, ns, err, sizeof(err))) {
		goto fail;
	} else if (add_view(key, source, mp, options, fuse_fd, mnt_id, ns->target, err,
	                    sizeof(err))) {
		goto fail_unmount;
	}
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
	sfs_err_print(err);
	log_refusal(source, mountpoint, err);
	return -1;
}

static int mount_in(const char *source, const char *mountpoint, const char *options, bool verbose,
                    struct sfs_mntns *ns)
{
	char err[ERRLEN] = "", *resolved = NULL;
	int userns, r;

	if (resolve_idmap_path(options, &resolved, &userns, err, sizeof(err))) {
		if (!*err)
			sfs_errf(err, sizeof(err), "-o", "%s", strerror(ENOMEM));
		sfs_err_print(err);
		log_refusal(source, mountpoint, err);
		free(resolved);
		if (userns >= 0)
			close(userns);
		return -1;
	}
	r = mount_resolved(source, mountpoint, resolved, verbose, ns, userns);
	free(resolved);
	if (userns >= 0)
		close(userns);
	return r;
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
		sfs_err_print(err);
		log_refusal(source, mountpoint, err);
		return -1;
	}
	r = mount_in(source, mountpoint, options, verbose, &ns);
	sfs_mntns_close(&ns);
	return r;
}
