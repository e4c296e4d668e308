/* One daemon per source (contract §6): sets up the backing, answers the control socket, adds and
 * drops views, and ends when the last view is gone or on SIGTERM. The control loop is one
 * thread, each control connection has its own (they take turns under control_lock), and each
 * view's session has its own threads (view.c). */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <libmount.h>

#include "coherence.h"
#include "locks.h"
#include "fuse_uring.h"
#include "names.h"
#include "policy.h"
#include "control.h"
#include "status.h"
#include "util.h"

#define ERRLEN 1024
#define SHUTDOWN_WAIT_MS 5000
#define NAMESPACE_CHECK_MS 2000
/* How long a control client may take to send its request, and to read the reply. */
#define CONN_TIMEOUT_MS 2000
#define WATCHDOG_MS 100
#define QUOTA_SCAN_WAIT_MS 5000 /* the command waits 10 s for an answer (client.c) */

void sfs_daemon_wake(struct sfs_daemon *d)
{
	uint64_t one = 1;
	if (write(d->event_fd, &one, sizeof(one)) < 0)
		syslog(LOG_WARNING, "eventfd: %m");
}

static void node_created(void *svc, struct sfs_node *n, const struct stat *st)
{
	(void)svc;
	sfs_quota_node_init(&n->q, st);
}

static void wake(void *d)
{
	sfs_daemon_wake(d);
}

/* The ledger gets what it needs of the daemon, and nothing more (quota.h). */
static int start_quota(struct sfs_daemon *d, char *err, size_t errlen)
{
	const struct sfs_quota_ctx ctx = {
		.source = d->source, .device = d->backing.device, .root_fd = d->backing.root_fd,
		.handle_fd = d->handle_fd, .root_ino = d->svc.root_ino,
		.read_only = d->backing.read_only, .itab = &d->svc.itab, .fdc = &d->svc.fdc,
		.wake = wake, .wake_arg = d,
	};

	return sfs_quota_start(&d->svc.quota, &ctx, err, errlen);
}

/* The descriptor limit is raised to the hard limit; the node cache takes a quarter of it,
 * the rest is for files the callers hold open. */
static size_t raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		return rl.rlim_cur / 4 > 16384 ? 16384 : rl.rlim_cur / 4;
	}
	return 256;
}

static void *signal_thread(void *arg)
{
	struct sfs_daemon *d = arg;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		syslog(LOG_INFO, "%s: signal %d: unmounting every view", d->source, sig);
		atomic_store(&d->stopping, true);
		sfs_daemon_wake(d);
	}
	return NULL;
}

static int listen_on(struct sfs_daemon *d, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	sfs_socket_path(d->key, sa.sun_path, sizeof(sa.sun_path));
	unlink(sa.sun_path); /* a crashed daemon's socket: we hold the source's lock */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0600) < 0 || listen(fd, 16) < 0) {
		sfs_errf(err, errlen, sa.sun_path, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	d->listen_fd = fd;
	return 0;
}

/* Commands find the daemon by the paths of its socket and lock. If they were removed (or all
 * of /run/strictfs), they are made again: otherwise the next command would not see this daemon
 * and would start a second one for the source. */
static void keep_control_paths(struct sfs_daemon *d)
{
	char path[PATH_MAX], err[ERRLEN];
	struct stat st, held;
	int old = d->listen_fd, fd;

	sfs_lock_path(d->key, path, sizeof(path));
	if (stat(path, &st) < 0 || fstat(d->lock_fd, &held) < 0 || st.st_ino != held.st_ino ||
	    st.st_dev != held.st_dev) {
		mkdir(SFS_RUNDIR, 0700);
		if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
			close(d->lock_fd);
			d->lock_fd = fd;
		}
	}
	sfs_socket_path(d->key, path, sizeof(path));
	if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		return;
	mkdir(SFS_RUNDIR, 0700);
	if (listen_on(d, err, sizeof(err)) < 0) {
		syslog(LOG_WARNING, "%s: control socket gone and not made again: %s", d->source, err);
		return;
	}
	close(old);
	syslog(LOG_WARNING, "%s: control socket %s was removed; made again", d->source, path);
}

/* The view's root: subdir resolved beneath the backing root, never through a symlink. */
static int open_view_root(struct sfs_daemon *d, const char *subdir, struct sfs_node **out,
                          char *err, size_t errlen)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	const char *rel = subdir[1] ? subdir + 1 : ".";
	char obj[PATH_MAX + 8];
	struct stat st;
	int fd;

	snprintf(obj, sizeof(obj), "subdir=%s", subdir);
	if (!strcmp(rel, ".strictfs") || !strncmp(rel, ".strictfs/", 10)) {
		sfs_errf(err, errlen, obj, "%s", strerror(ENOENT));
		return -ENOENT;
	}
	fd = syscall(SYS_openat2, d->backing.root_fd, rel, &how, sizeof(how));
	if (fd < 0) {
		int e = errno;
		sfs_errf(err, errlen, obj, "%s", e == ELOOP ? "a symlink in the path (not followed)"
		                                            : strerror(e));
		return -e;
	}
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		sfs_errf(err, errlen, obj, "%s", strerror(e));
		return -e;
	}
	return sfs_itab_get(&d->svc.itab, &d->svc.fdc, fd, &st, SFS_PIN, out);
}

/* A daemon that kept crashing serves nothing new until its views are gone (contract §6). */
static int refuse_when_failed(struct sfs_daemon *d, char *err, size_t errlen)
{
	if (!d->ho.daemon.failed[0])
		return 0;
	sfs_errf(err, errlen, d->source, "its daemon failed (%s); unmount its views first",
	         d->ho.daemon.failed);
	return -EIO;
}

/* What options o need of the backing, for a new view and for a remount alike. */
static int backing_allows(struct sfs_daemon *d, const struct sfs_opts *o, char *err,
                          size_t errlen)
{
	const struct sfs_backing *b = &d->backing;
	int rc;

	if ((rc = sfs_opts_sb_compatible(&d->in_force, o, err, errlen)))
		return rc;
	if (o->acl && !b->has_acl) {
		sfs_errf(err, errlen, "acl", "the backing has no POSIX ACL support");
		return -EOPNOTSUPP;
	}
	if (o->user_xattr && !b->has_user_xattr) {
		sfs_errf(err, errlen, "user_xattr", "the backing has no user xattr support");
		return -EOPNOTSUPP;
	}
	if (!o->ro && b->read_only) {
		sfs_errf(err, errlen, "rw", "the backing is read-only (use ro)");
		return -EROFS;
	}
	if (o->casefold != SFS_CASEFOLD_OFF && b->mode == SFS_SHARE_EXISTING) {
		sfs_errf(err, errlen, o->casefold == SFS_CASEFOLD_STRICT ? "casefold=strict" : "casefold",
		         "needs strictfs to be the backing's only writer; not with share=existing");
		return -EINVAL;
	}
	return 0;
}

/* Whether a view with options o can join the views already served. */
static int admissible(struct sfs_daemon *d, const struct sfs_opts *o, char *err, size_t errlen)
{
	struct sfs_view *v;
	int rc;

	if ((rc = refuse_when_failed(d, err, errlen)))
		return rc;
	if (o->share != d->in_force.share) {
		sfs_errf(err, errlen, o->share == SFS_SHARE_EXISTING ? "share=existing" : "share=exclusive",
		         "%s is already served with %s", d->source,
		         d->in_force.share == SFS_SHARE_EXISTING ? "share=existing" : "share=exclusive");
		return -EINVAL;
	}
	if (o->remount) {
		sfs_errf(err, errlen, "remount", "not a view of this source");
		return -EINVAL;
	}
	if ((rc = backing_allows(d, o, err, errlen)))
		return rc;
	if (o->cache == SFS_CACHE_WRITEBACK && sfs_registry_count(&d->svc.views)) {
		sfs_errf(err, errlen, "cache=writeback",
		         "%s has other views; writeback caching needs the only view",
		         d->source);
		return -EBUSY;
	}
	sfs_for_each_view(&d->svc.views, v)
		if (v->prof->opts.cache == SFS_CACHE_WRITEBACK) {
			sfs_errf(err, errlen, "cache=writeback",
			         "the view at %s uses it; no further views of %s while it exists",
			         v->mountpoint, d->source);
			return -EBUSY;
		}
	if (sfs_registry_count(&d->svc.views) >= SFS_MAX_VIEWS) {
		sfs_errf(err, errlen, d->source, "too many views");
		return -EMFILE;
	}
	return 0;
}

/* The view's own clone of the backing, with the flags of its profile (backing.h). */
static int make_clone(struct sfs_daemon *d, struct sfs_view *v, char *err, size_t errlen)
{
	int rc = sfs_backing_clone(&d->backing, v->prof->backing_attrs, &v->clone);

	if (rc)
		sfs_errf(err, errlen, d->source, "cannot clone the backing mount: %s", strerror(-rc));
	return rc;
}

/* A subdir view with size= or inodes= has its tree's usage kept apart (quota.h). */
static int track_view_tree(struct sfs_daemon *d, struct sfs_view *v, const struct sfs_opts *o,
                           char *err, size_t errlen)
{
	int fd;

	if (v->qroot >= 0 || !strcmp(o->subdir, "/") || (!o->size_limit && !o->inode_limit))
		return 0;
	if ((fd = sfs_fd_get(&d->svc.fdc, v->root)) < 0) {
		sfs_errf(err, errlen, o->subdir, "%s", strerror(-fd));
		return fd;
	}
	v->qroot = sfs_quota_add_root(&d->svc.quota, v->root, fd, err, errlen);
	sfs_fd_put(&d->svc.fdc, v->root);
	return v->qroot < 0 ? -EINVAL : 0;
}

/* The two descriptors of an add-view request: /dev/fuse and a mount namespace. Anything else
 * would become a view that serves nothing, or one no namespace can unmount. */
static bool add_view_fds_ok(const struct sfs_msg *req)
{
	struct stat st;

	return req->nfds == 2 && fstat(req->fds[0], &st) == 0 && S_ISCHR(st.st_mode) &&
	       major(st.st_rdev) == 10 && minor(st.st_rdev) == 229 &&
	       ioctl(req->fds[1], NS_GET_NSTYPE) == CLONE_NEWNS;
}

static void log_view(const struct sfs_daemon *d, const char *what, const struct sfs_view *v)
{
	char opts[SFS_EFFECTIVE_MAX];

	syslog(LOG_INFO, "%s: %s %s (-o %s) with %s", d->source, what, v->mountpoint,
	       v->prof->opts.requested, sfs_opts_format(&v->prof->opts, opts, sizeof(opts)));
}

/* The view's mount namespace by identity (see struct sfs_view). */
static int namespace_identity(int nsfd, struct sfs_view *v, char *err, size_t errlen)
{
	struct stat ns;

	if (fstat(nsfd, &ns) < 0) {
		int e = errno;
		sfs_errf(err, errlen, "control", "bad namespace descriptor");
		return -e;
	}
	v->ns_dev = ns.st_dev;
	v->ns_ino = ns.st_ino;
	return 0;
}

/* What every view gets before its session starts, a new one or one taken over: its open
 * files list is filled before the start by a successor (adopt_files). */
static void prepare_view(struct sfs_daemon *d, struct sfs_view *v, uint32_t slot, const char *mp,
                         const char *src)
{
	v->svc = &d->svc;
	v->ended_cb = wake;
	v->ended_arg = d;
	v->slot = slot;
	sfs_strlcpy(v->mountpoint, mp, sizeof(v->mountpoint));
	sfs_strlcpy(v->source, src, sizeof(v->source));
	sfs_view_set_caching(v, !*d->shared_with && d->backing.mode == SFS_SHARE_EXCLUSIVE);
	sfs_pt_init(v);
	pthread_mutex_init(&v->files_lock, NULL);
	sfs_list_init(&v->files);
}

/* What a view made but not started holds: its profile and its clone. */
static void free_unstarted_view(struct sfs_view *v)
{
	sfs_backing_clone_close(&v->clone);
	sfs_profile_free((struct sfs_profile *)v->prof);
	free(v);
}

static int add_view(struct sfs_daemon *d, struct sfs_msg *req, char *err, size_t errlen)
{
	const char *mp = sfs_msg_get(req, "mountpoint");
	const char *optstr = sfs_msg_get(req, "options");
	const char *src = sfs_msg_get(req, "source");
	const char *mnt_id = sfs_msg_get(req, "mnt_id");
	unsigned long long id = 0;
	struct sfs_view *v = NULL;
	struct sfs_opts o;
	int rc, slot;

	if (!mp || !optstr || !src || !add_view_fds_ok(req) || strlen(mp) >= PATH_MAX ||
	    strlen(src) >= PATH_MAX || !mnt_id || !sfs_parse_uint(mnt_id, &id) || !id) {
		sfs_errf(err, errlen, "control", "malformed add-view request");
		return -EPROTO;
	}
	if ((rc = sfs_opts_parse(optstr, &o, err, errlen)) || (rc = admissible(d, &o, err, errlen)) ||
	    (rc = sfs_quota_enforceable(&d->svc.quota, &o, NULL, err, errlen)))
		return rc; /* the requesting strictfs command logs the refusal */
	if (!(v = calloc(1, sizeof(*v))) || !(v->prof = sfs_profile_make(&o))) {
		free(v);
		return -ENOMEM;
	}
	v->qroot = -1;
	v->clone.fd = v->clone.tree_fd = -1;
	if ((rc = namespace_identity(req->fds[1], v, err, errlen)) ||
	    (rc = make_clone(d, v, err, errlen)))
		goto fail;
	if ((slot = sfs_registry_free_slot(&d->svc.views)) < 0) {
		rc = -EMFILE;
		goto fail;
	}
	if ((rc = open_view_root(d, o.subdir, &v->root, err, errlen)))
		goto fail;
	if ((rc = track_view_tree(d, v, &o, err, errlen))) {
		sfs_itab_unpin(&d->svc.itab, &d->svc.fdc, v->root);
		goto fail;
	}
	prepare_view(d, v, slot, mp, src);
	v->mnt_id = id;
	rc = sfs_view_start(v, req->fds[0], NULL);
	req->fds[0] = -1;
	if (rc) {
		sfs_errf(err, errlen, mp, "cannot start the FUSE session: %s", strerror(-rc));
		sfs_quota_drop_root(&d->svc.quota, v->qroot);
		sfs_itab_unpin(&d->svc.itab, &d->svc.fdc, v->root);
		goto fail;
	}
	sfs_registry_add(&d->svc.views, v);
	sfs_view_record(v);
	log_view(d, "view added at", v);
	return 0;
fail:
	free_unstarted_view(v);
	return rc;
}

/* A remount that would take passthrough from the view's files while some are open for
 * writing by it: the kernel gives no way to take them back, so their writes would pass the
 * limits (or the choice) the new options make. Refused by the option that wants the daemon
 * path, with what the administrator can do. Under pt.lock. */
static int passthrough_writers_hold(struct sfs_view *v, const struct sfs_profile *p, char *err,
                                    size_t errlen)
{
	unsigned n;

	if (!p->no_passthrough || v->prof->no_passthrough || sfs_pt_off_reason(v) ||
	    !(n = sfs_pt_writers(v)))
		return 0;
	sfs_errf(err, errlen, p->no_passthrough,
	         "%u file%s open for writing through %s by the kernel's passthrough, which the "
	         "daemon cannot take back; close %s, or umount and mount the view again",
	         n, n == 1 ? " is" : "s are", v->mountpoint, n == 1 ? "it" : "them");
	return -EBUSY;
}

/* The view's clone follows the new profile's flags: files open through it at once. */
static int clone_follows(struct sfs_view *v, const struct sfs_profile *p, char *err,
                         size_t errlen)
{
	int rc;

	if (p->backing_attrs == v->prof->backing_attrs)
		return 0;
	if (!(rc = sfs_backing_clone_set(&v->clone, p->backing_attrs)))
		return 0;
	if (rc == -EBUSY)
		sfs_errf(err, errlen, "ro", "files are open for writing through %s", v->mountpoint);
	else
		sfs_errf(err, errlen, v->mountpoint, "cannot change the flags of its clone of the "
		         "backing: %s", strerror(-rc));
	return rc;
}

/* Puts profile p in force on v, whole, or changes nothing: the remount's work. */
static int put_in_force(struct sfs_daemon *d, struct sfs_view *v, struct sfs_profile *p,
                        char *err, size_t errlen)
{
	bool tracked = v->qroot >= 0;
	int rc;

	pthread_mutex_lock(&v->pt.lock);
	if ((rc = passthrough_writers_hold(v, p, err, errlen)) ||
	    (rc = track_view_tree(d, v, &p->opts, err, errlen)))
		goto out;
	if ((rc = clone_follows(v, p, err, errlen))) {
		if (!tracked && v->qroot >= 0) {
			sfs_quota_drop_root(&d->svc.quota, v->qroot);
			v->qroot = -1;
		}
		goto out;
	}
	p->retired = (struct sfs_profile *)v->prof;
	atomic_store(&v->prof, p);
out:
	pthread_mutex_unlock(&v->pt.lock);
	return rc;
}

/* remount: the view's options change in place, or the change is refused by name. With check
 * set, only whether it would be refused, and the view's mount flags before and after. */
static int remount_view(struct sfs_daemon *d, struct sfs_msg *req, unsigned long *flags,
                        unsigned long *old_flags, uint64_t *mnt_id, char *err, size_t errlen)
{
	const char *mp = sfs_msg_get(req, "mountpoint");
	const char *optstr = sfs_msg_get(req, "options");
	const char *check = sfs_msg_get(req, "check");
	struct sfs_profile *p;
	struct sfs_view *v = NULL;
	struct sfs_opts o;
	int rc;

	if (!mp || !optstr || req->nfds != 1) {
		sfs_errf(err, errlen, "control", "malformed remount request");
		return -EPROTO;
	}
	if (!(v = sfs_registry_find(&d->svc.views, mp, req->fds[0]))) {
		sfs_errf(err, errlen, mp, "not a view of %s", d->source);
		return -ENOENT;
	}
	if (v->failed) {
		sfs_errf(err, errlen, mp, "its daemon failed (%s); unmount it", d->ho.daemon.failed);
		return -EIO;
	}
	if ((rc = sfs_opts_remount(&v->prof->opts, optstr, &o, err, errlen)) ||
	    (rc = backing_allows(d, &o, err, errlen)) ||
	    (rc = sfs_quota_enforceable(&d->svc.quota, &o, &v->prof->opts, err, errlen)))
		return rc;
	if (!(p = sfs_profile_make(&o)))
		return -ENOMEM;
	*flags = o.mount_flags;
	*old_flags = v->prof->opts.mount_flags;
	*mnt_id = v->mnt_id;
	if (check && !strcmp(check, "1")) {
		pthread_mutex_lock(&v->pt.lock);
		rc = passthrough_writers_hold(v, p, err, errlen);
		pthread_mutex_unlock(&v->pt.lock);
		sfs_profile_free(p);
		return rc;
	}
	if ((rc = put_in_force(d, v, p, err, errlen))) {
		sfs_profile_free(p);
		return rc;
	}
	sfs_view_record(v);
	log_view(d, "view remounted at", v);
	return 0;
}

static void drop_view(struct sfs_daemon *d, struct sfs_view *v)
{
	sfs_ho_drop_view(&d->ho, v->slot);
	sfs_registry_remove(&d->svc.views, v);
	sfs_view_end_locks(v);
	sfs_view_finish(v);
	sfs_view_close_files(v);
	sfs_itab_drop_view(&d->svc.itab, &d->svc.fdc, v->slot);
	sfs_quota_drop_root(&d->svc.quota, v->qroot);
	sfs_itab_unpin(&d->svc.itab, &d->svc.fdc, v->root);
	syslog(LOG_INFO, "%s: view at %s removed", d->source, v->mountpoint);
	free_unstarted_view(v);
}

static void reap_ended_views(struct sfs_daemon *d)
{
	struct sfs_view *v;

	sfs_for_each_view(&d->svc.views, v)
		if (atomic_load(&v->ended))
			drop_view(d, v);
}

/* A reply: rc (0 or errno), the one-line error, and one more field if key is set. */
static void reply_fields(struct sfs_msg *m, int rc, const char *msg, const char *key,
                         const char *value)
{
	char num[16];

	sfs_msg_init(m, SFS_REPLY);
	snprintf(num, sizeof(num), "%d", rc < 0 ? -rc : rc);
	sfs_msg_add(m, "rc", num);
	if (msg)
		sfs_msg_add(m, "msg", msg);
	if (key && value)
		sfs_msg_add(m, key, value);
}

static void reply(struct sfs_msg *m, int rc, const char *msg, const char *json)
{
	reply_fields(m, rc, msg, "json", json);
}

/* Reads the optional limit fields of a quota set request; false on a malformed value. */
static bool limit_fields(const struct sfs_msg *req, uint64_t soft[SFS_QNRES],
                         uint64_t hard[SFS_QNRES], unsigned *which)
{
	static const struct { const char *key; unsigned bit; bool hard; int res; } f[] = {
		{"bsoft", SFS_QSET_BSOFT, false, SFS_QBYTES}, {"bhard", SFS_QSET_BHARD, true, SFS_QBYTES},
		{"isoft", SFS_QSET_ISOFT, false, SFS_QINODES}, {"ihard", SFS_QSET_IHARD, true, SFS_QINODES}};
	unsigned long long v;

	*which = 0;
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		const char *s = sfs_msg_get(req, f[i].key);
		if (!s)
			continue;
		if (!sfs_parse_uint(s, &v) || v > INT64_MAX)
			return false;
		(f[i].hard ? hard : soft)[f[i].res] = v;
		*which |= f[i].bit;
	}
	return true;
}

/* Each view's tree: its usage (the whole backing's, or its subdir's when kept apart) and
 * its own limits. */
static json_object *views_usage(struct sfs_daemon *d)
{
	json_object *a = json_object_new_array();
	struct sfs_view *v;

	sfs_registry_read_lock(&d->svc.views);
	sfs_for_each_view(&d->svc.views, v) {
		json_object *o;
		struct sfs_qentry e;
		if (atomic_load(&v->ended))
			continue;
		const struct sfs_opts *vo = &v->prof->opts;
		o = json_object_new_object();
		json_object_object_add(o, "mountpoint", json_object_new_string(v->mountpoint));
		json_object_object_add(o, "subdir", json_object_new_string(vo->subdir));
		if (v->qroot >= 0 || !strcmp(vo->subdir, "/")) {
			sfs_quota_tree(&d->svc.quota, v->qroot, &e);
			json_object_object_add(o, "bytes", json_object_new_int64(e.used[SFS_QBYTES]));
			json_object_object_add(o, "inodes", json_object_new_int64(e.used[SFS_QINODES]));
		}
		json_object_object_add(o, "size", json_object_new_int64((int64_t)vo->size_limit));
		json_object_object_add(o, "inode_limit",
		                       json_object_new_int64((int64_t)vo->inode_limit));
		json_object_array_add(a, o);
	}
	sfs_registry_read_unlock(&d->svc.views);
	return a;
}

/* `strictfs quota set|grace|report|check`: rc, and a JSON answer for report and check. */
static int quota_request(struct sfs_daemon *d, const struct sfs_msg *req, json_object **out,
                         char *err, size_t errlen)
{
	const char *op = sfs_msg_get(req, "op"), *type = sfs_msg_get(req, "type");
	const char *id = sfs_msg_get(req, "id");
	uint64_t soft[SFS_QNRES] = {0}, hard[SFS_QNRES] = {0};
	unsigned long long n;
	unsigned which;

	if (op && !strcmp(op, "report")) {
		*out = sfs_quota_report(&d->svc.quota);
		json_object_object_add(*out, "views", views_usage(d));
		return 0;
	}
	if (op && !strcmp(op, "check")) {
		bool same;
		*out = sfs_quota_check(&d->svc.quota, &same);
		json_object_object_add(*out, "same", json_object_new_boolean(same));
		return 0;
	}
	if (op && !strcmp(op, "set") && type && id && sfs_parse_uint(id, &n) && n < UINT32_MAX &&
	    (!strcmp(type, "user") || !strcmp(type, "group")) && limit_fields(req, soft, hard, &which))
		return sfs_quota_set(&d->svc.quota, strcmp(type, "user") ? SFS_QGRP : SFS_QUSR, (uint32_t)n,
		                     soft, hard, which, err, errlen) ? -EINVAL : 0;
	if (op && !strcmp(op, "grace")) {
		time_t grace[SFS_QNRES] = {0, 0};
		const char *b = sfs_msg_get(req, "bgrace"), *i = sfs_msg_get(req, "igrace");
		which = 0;
		if (b && sfs_parse_duration(b, &grace[SFS_QBYTES]))
			which |= SFS_QSET_BGRACE;
		if (i && sfs_parse_duration(i, &grace[SFS_QINODES]))
			which |= SFS_QSET_IGRACE;
		if ((b && !(which & SFS_QSET_BGRACE)) || (i && !(which & SFS_QSET_IGRACE)))
			goto malformed;
		return sfs_quota_set_grace(&d->svc.quota, grace, which, err, errlen) ? -EINVAL : 0;
	}
malformed:
	sfs_errf(err, errlen, "control", "malformed quota request");
	return -EPROTO;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The watchdog cuts the connection off ms from now (0: never). */
static void conn_deadline(struct sfs_daemon *d, int slot, int ms)
{
	pthread_mutex_lock(&d->conns_lock);
	d->conns[slot].deadline_ms = ms ? now_ms() + ms : 0;
	pthread_mutex_unlock(&d->conns_lock);
}

/* ---- strictfs upgrade ------------------------------------------------------------------ */

/* Requests being served may take this long to finish before the handover goes on without
 * them (they are then resent to the successor, as after a crash). */
#define HANDOVER_QUIET_MS 10000

/* Whether the binary the keeper will exec reads the state this daemon writes. */
static int successor_compatible(struct sfs_daemon *d, char *err, size_t errlen)
{
	char mine[64], theirs[64] = "", cmd[PATH_MAX + 32];
	FILE *p;

	sfs_ho_format_version(mine, sizeof(mine));
	if (access(d->binary, X_OK) < 0) {
		sfs_errf(err, errlen, d->binary, "cannot hand over to it: %s", strerror(errno));
		return -ENOENT;
	}
	snprintf(cmd, sizeof(cmd), "'%s' __state-version 2>/dev/null", d->binary);
	if (strchr(d->binary, '\'') || !(p = popen(cmd, "re")) || !fgets(theirs, sizeof(theirs), p)) {
		sfs_errf(err, errlen, d->binary, "cannot tell which state it reads; not handed over");
		return -ENOEXEC;
	}
	pclose(p);
	theirs[strcspn(theirs, "\n")] = '\0';
	if (strcmp(mine, theirs)) {
		sfs_errf(err, errlen, d->binary, "reads state %s, this daemon writes %s: unmount the "
		         "views of %s to start it", theirs, mine, d->source);
		return -EPROTO;
	}
	return 0;
}

/* The views go to the successor at a request boundary: no request is begun any more, those
 * being served are finished, the state says the daemon handed over, and once the reply is
 * sent the process ends; the keeper execs the installed binary, which takes over. */
static int hand_over(struct sfs_daemon *d, char *err, size_t errlen)
{
	struct sfs_view *v;
	int rc;

	if ((rc = refuse_when_failed(d, err, errlen)))
		return rc;
	if (!d->keeper.pid) {
		sfs_errf(err, errlen, d->source, "the daemon has no keeper to hand over to");
		return -ESRCH;
	}
	if ((rc = successor_compatible(d, err, errlen)))
		return rc;
	sfs_fuse_io_hold();
	sfs_for_each_view(&d->svc.views, v) {
		struct sfs_fuse_uring *u = atomic_load(&v->fuse_io.uring);
		if (u)
			sfs_fuse_uring_hold(u);
	}
	if (!sfs_fuse_io_quiet(HANDOVER_QUIET_MS))
		syslog(LOG_WARNING, "%s: requests still served after %d s; the successor gets them again",
		       d->source, HANDOVER_QUIET_MS / 1000);
	sfs_quota_flush(&d->svc.quota);
	d->ho.daemon.state = SFS_HO_HANDING_OVER;
	sfs_ho_write_daemon(&d->ho);
	syslog(LOG_INFO, "%s: generation %llu hands its %zu view(s) over to %s", d->source,
	       (unsigned long long)d->ho.daemon.generation, sfs_registry_count(&d->svc.views),
	       d->binary);
	d->handed_over = true;
	return 0;
}

int sfs_daemon_state_version(void)
{
	char v[64];

	sfs_ho_format_version(v, sizeof(v));
	printf("%s\n", v);
	return 0;
}

/* Answers one request under control_lock; the reply goes out after. */
static void answer(struct sfs_daemon *d, struct sfs_msg *req, struct sfs_msg *rep)
{
	char err[ERRLEN] = "";
	int rc;

	if (d->closing) {
		reply(rep, ESHUTDOWN, "strictfs: control: the daemon is shutting down", NULL);
		return;
	}
	switch (req->type) {
	case SFS_REQ_ADD_VIEW:
		rc = add_view(d, req, err, sizeof(err));
		reply(rep, rc, rc ? err : NULL, NULL);
		break;
	case SFS_REQ_STATUS: {
		json_object *o = sfs_status_daemon(d);
		reply(rep, 0, NULL, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
		break;
	}
	case SFS_REQ_REMOUNT: {
		unsigned long flags = 0, old_flags = 0;
		uint64_t mnt_id = 0;
		char num[32];
		rc = remount_view(d, req, &flags, &old_flags, &mnt_id, err, sizeof(err));
		snprintf(num, sizeof(num), "%lu", flags);
		reply_fields(rep, rc, rc ? err : NULL, "mount_flags", num);
		snprintf(num, sizeof(num), "%lu", old_flags);
		sfs_msg_add(rep, "old_mount_flags", num);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)mnt_id);
		sfs_msg_add(rep, "mnt_id", num);
		break;
	}
	case SFS_REQ_QUOTA: {
		json_object *o = NULL;
		rc = quota_request(d, req, &o, err, sizeof(err));
		reply(rep, rc, rc ? err : NULL,
		      o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL);
		json_object_put(o);
		break;
	}
	case SFS_REQ_UPGRADE: {
		char gen[32], pid[32];
		snprintf(gen, sizeof(gen), "%llu", (unsigned long long)d->ho.daemon.generation);
		snprintf(pid, sizeof(pid), "%d", getpid());
		rc = hand_over(d, err, sizeof(err));
		reply_fields(rep, rc, rc ? err : NULL, "generation", gen);
		sfs_msg_add(rep, "pid", pid);
		break;
	}
	case SFS_REQ_STOP:
		atomic_store(&d->stopping, true);
		sfs_daemon_wake(d);
		reply(rep, 0, NULL, NULL);
		break;
	default:
		reply(rep, EPROTO, "strictfs: control: unknown request", NULL);
	}
}

/* A view that would enforce limits is answered once the start-up scan has ended, so that a
 * scan that failed refuses it (sfs_quota_enforceable) rather than a race deciding. Waited for
 * here, outside control_lock, and for less than the command waits for its answer; a longer
 * scan goes on behind the view, whose changes wait for it. */
static void settle_quota_scan(struct sfs_daemon *d, const struct sfs_msg *req)
{
	const char *optstr = sfs_msg_get(req, "options");
	char err[ERRLEN];
	struct sfs_opts o;

	if ((req->type != SFS_REQ_ADD_VIEW && req->type != SFS_REQ_REMOUNT) || !optstr ||
	    sfs_opts_parse(optstr, &o, err, sizeof(err)) || !sfs_opts_enforce_quota(&o))
		return;
	sfs_quota_wait_scan(&d->svc.quota, QUOTA_SCAN_WAIT_MS);
}

static void serve_connection(struct sfs_daemon *d, int slot, int conn)
{
	struct timeval tv = {CONN_TIMEOUT_MS / 1000, 0};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct sfs_msg req, rep;
	int rc;

	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
		syslog(LOG_WARNING, "%s: control request from uid %d refused", d->source,
		       (int)cred.uid);
		reply(&rep, EPERM, "strictfs: control: only root may use the control socket", NULL);
		goto send;
	}
	rc = sfs_msg_recv(conn, &req);
	if (rc == -ECONNRESET)
		return; /* a command that only checked the daemon is there */
	if (rc) {
		syslog(LOG_WARNING, "%s: malformed control request: %s", d->source, strerror(-rc));
		reply(&rep, -rc, "strictfs: control: malformed request", NULL);
		goto send;
	}
	conn_deadline(d, slot, 0); /* adding a view may take its time; the client waits */
	settle_quota_scan(d, &req);
	pthread_mutex_lock(&d->control_lock);
	answer(d, &req, &rep);
	pthread_mutex_unlock(&d->control_lock);
	for (int i = 0; i < req.nfds; i++)
		if (req.fds[i] >= 0)
			close(req.fds[i]);
	sfs_msg_free(&req);
	conn_deadline(d, slot, CONN_TIMEOUT_MS);
send:
	sfs_msg_send(conn, &rep);
	sfs_msg_free(&rep);
	if (d->handed_over)
		_exit(0); /* the keeper execs the successor; nothing here is to be undone */
}

struct conn_start {
	struct sfs_daemon *d;
	int slot, fd;
};

static void *conn_thread(void *arg)
{
	struct conn_start *c = arg;
	struct sfs_daemon *d = c->d;

	serve_connection(d, c->slot, c->fd);
	pthread_mutex_lock(&d->conns_lock);
	close(c->fd); /* under the lock: the watchdog never shuts down a reused number */
	d->conns[c->slot].fd = -1;
	d->nconns--;
	pthread_cond_broadcast(&d->conns_idle);
	pthread_mutex_unlock(&d->conns_lock);
	sfs_daemon_wake(d); /* a slot is free: the loop listens again */
	free(c);
	return NULL;
}

/* Each connection is served by its own thread, so that a client that stalls before or while
 * sending its request (or does not read the reply) holds up only itself. */
static void accept_one(struct sfs_daemon *d)
{
	int conn = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	struct conn_start *c;
	pthread_attr_t attr;
	pthread_t t;
	int slot = -1;

	if (conn < 0)
		return;
	pthread_mutex_lock(&d->conns_lock);
	for (int i = 0; i < SFS_MAX_CONNS && slot < 0; i++)
		if (d->conns[i].fd < 0)
			slot = i;
	if (slot >= 0) {
		d->conns[slot].fd = conn;
		d->conns[slot].deadline_ms = now_ms() + CONN_TIMEOUT_MS;
		d->nconns++;
	}
	pthread_mutex_unlock(&d->conns_lock);
	c = slot >= 0 ? malloc(sizeof(*c)) : NULL;
	if (c) {
		*c = (struct conn_start){d, slot, conn};
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		if (pthread_create(&t, &attr, conn_thread, c) == 0) {
			pthread_attr_destroy(&attr);
			return;
		}
		pthread_attr_destroy(&attr);
		free(c);
	}
	syslog(LOG_WARNING, "%s: cannot serve a control connection", d->source);
	pthread_mutex_lock(&d->conns_lock);
	if (slot >= 0) {
		d->conns[slot].fd = -1;
		d->nconns--;
	}
	close(conn);
	pthread_mutex_unlock(&d->conns_lock);
}

/* Shuts down the connections past their deadline (all of them if all): their thread's read
 * or write then fails at once. Returns how many are being served. */
static int conns_watchdog(struct sfs_daemon *d, bool all)
{
	long long now = now_ms();
	int n;

	pthread_mutex_lock(&d->conns_lock);
	for (int i = 0; i < SFS_MAX_CONNS; i++) {
		struct sfs_conn *c = &d->conns[i];
		if (c->fd >= 0 && (all || (c->deadline_ms && now >= c->deadline_ms))) {
			shutdown(c->fd, SHUT_RDWR);
			c->deadline_ms = 0;
		}
	}
	n = d->nconns;
	pthread_mutex_unlock(&d->conns_lock);
	return n;
}

/* The loop has ended (closing is set): connections still served are cut off and waited for. */
static void conns_drain(struct sfs_daemon *d)
{
	conns_watchdog(d, true);
	pthread_mutex_lock(&d->conns_lock);
	while (d->nconns > 0)
		pthread_cond_wait(&d->conns_idle, &d->conns_lock);
	pthread_mutex_unlock(&d->conns_lock);
}

static void wait_views_ended(struct sfs_daemon *d, int ms)
{
	struct sfs_view *v;

	for (int waited = 0; waited < ms; waited += 50) {
		bool all = true;
		sfs_for_each_view(&d->svc.views, v)
			if (!atomic_load(&v->ended))
				all = false;
		if (all)
			return;
		usleep(50 * 1000);
	}
}

static void unmount_all(struct sfs_daemon *d)
{
	struct sfs_view *v;

	sfs_for_each_view(&d->svc.views, v)
		sfs_view_unmount(v, false);
	wait_views_ended(d, SHUTDOWN_WAIT_MS);
	reap_ended_views(d);
}

/* The daemon may end only while no strictfs command is between starting it and adding its
 * view: those commands hold the source's lock. */
static bool may_exit(struct sfs_daemon *d)
{
	int conns;

	pthread_mutex_lock(&d->conns_lock);
	conns = d->nconns;
	pthread_mutex_unlock(&d->conns_lock);
	return sfs_registry_count(&d->svc.views) == 0 && conns == 0 && flock(d->lock_fd, LOCK_EX | LOCK_NB) == 0;
}

/* The kernel checks exclusivity only when the backing is created: root can still mount the
 * device natively and share the superblock (doc/kernel.md §2). Such a mount is noticed, logged
 * and shown; the daemon is then not the only writer, so views stop trusting their caches. */
static void check_shared(struct sfs_daemon *d)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	char now[sizeof(d->shared_with)] = "";
	struct libmnt_fs *fs;
	struct sfs_view *v;

	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_devno(fs) == d->backing.rdev)
			sfs_list_append(now, sizeof(now), mnt_fs_get_target(fs));
	mnt_free_iter(it);
	mnt_unref_table(tb);
	if (!strcmp(now, d->shared_with))
		return;
	if (*now)
		syslog(LOG_WARNING, "%s: the backing device is also mounted natively at %s; "
		       "strictfs is no longer its only writer", d->source, now);
	else
		syslog(LOG_INFO, "%s: the native mounts of the backing device are gone", d->source);
	strcpy(d->shared_with, now);
	atomic_store(&d->svc.shared, *now != 0);
	sfs_registry_read_lock(&d->svc.views);
	sfs_for_each_view(&d->svc.views, v)
		sfs_view_set_caching(v, !*now && d->backing.mode == SFS_SHARE_EXCLUSIVE);
	sfs_registry_read_unlock(&d->svc.views);
}

/* The daemon lives in the mount namespace of the command that first mounted its source,
 * perhaps a container's, and its presence keeps that namespace alive. When no other process
 * (its keeper aside) is left in it, nobody can reach the views mounted there any more: they
 * are unmounted, as the namespace's end would have done. */
static void unmount_unreachable_views(struct sfs_daemon *d)
{
	struct sfs_view *v;
	struct stat self;
	bool alone = true;
	struct dirent *de;
	DIR *proc;

	if (stat("/proc/self/ns/mnt", &self) < 0 || !(proc = opendir("/proc")))
		return;
	while (alone && (de = readdir(proc))) {
		char path[300];
		struct stat st;
		pid_t pid = atoi(de->d_name);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || pid == getpid() || pid == d->keeper.pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
		if (stat(path, &st) == 0 && st.st_ino == self.st_ino && st.st_dev == self.st_dev)
			alone = false;
	}
	closedir(proc);
	if (!alone)
		return;
	sfs_for_each_view(&d->svc.views, v) {
		if (v->ns_ino == self.st_ino && v->ns_dev == self.st_dev) {
			syslog(LOG_INFO, "%s: no process is left in the mount namespace of %s; unmounting it",
			       d->source, v->mountpoint);
			sfs_view_unmount(v, true);
		}
	}
}

/* Nodes the kernels forgot leave their memory in malloc's arenas. After a large drop (the
 * kernels let go of many inodes at once: memory pressure, drop_caches, a big rm) it goes back
 * to the system, so the daemon's size follows the files in use, not those it once saw. */
static void give_back_forgotten_nodes(struct sfs_daemon *d)
{
	size_t n = sfs_itab_count(&d->svc.itab);

	if (n > d->itab_peak) {
		d->itab_peak = n;
	} else if (d->itab_peak - n >= 10000 && n < d->itab_peak / 2) {
		malloc_trim(0);
		d->itab_peak = n;
	}
}

static int start_keeper(struct sfs_daemon *d);

static void control_loop(struct sfs_daemon *d)
{
	long long last_check = 0;
	bool done = false;

	while (!done) {
		int busy = conns_watchdog(d, false);
		struct pollfd pf[4] = {{busy < SFS_MAX_CONNS ? d->listen_fd : -1, POLLIN, 0},
		                       {d->event_fd, POLLIN, 0}, {d->mountinfo_fd, POLLPRI, 0},
		                       {d->keeper.pidfd, POLLIN, 0}};
		int timeout = busy ? WATCHDOG_MS : sfs_registry_count(&d->svc.views) ? NAMESPACE_CHECK_MS : 200;
		long long now;
		uint64_t n;

		if (poll(pf, 4, timeout) < 0 && errno != EINTR) {
			pthread_mutex_lock(&d->control_lock);
			d->closing = true;
			pthread_mutex_unlock(&d->control_lock);
			break;
		}
		pthread_mutex_lock(&d->control_lock);
		now = now_ms();
		if (sfs_registry_count(&d->svc.views) && now - last_check >= NAMESPACE_CHECK_MS) {
			unmount_unreachable_views(d);
			give_back_forgotten_nodes(d);
			last_check = now;
		}
		if (pf[2].revents & (POLLPRI | POLLERR))
			check_shared(d);
		if (pf[3].revents & POLLIN && sfs_keeper_gone(&d->keeper)) {
			syslog(LOG_WARNING, "%s: the keeper was killed; starting another", d->source);
			start_keeper(d);
		}
		if (pf[1].revents & POLLIN && read(d->event_fd, &n, sizeof(n)) < 0)
			syslog(LOG_WARNING, "eventfd: %m");
		reap_ended_views(d);
		sfs_quota_flush(&d->svc.quota);
		if (atomic_load(&d->stopping)) {
			unmount_all(d);
			if (sfs_registry_count(&d->svc.views) == 0)
				flock(d->lock_fd, LOCK_EX);
			done = true;
		} else {
			if (pf[0].revents & POLLIN)
				accept_one(d);
			keep_control_paths(d);
			done = may_exit(d);
		}
		d->closing = done;
		pthread_mutex_unlock(&d->control_lock);
	}
	conns_drain(d);
}

/* "OK PID" or the one-line error, to the strictfs command waiting for the daemon. */
static void report_ready(int fd, const char *msg)
{
	if (fd < 0)
		return;
	if (write(fd, msg, strlen(msg)) < 0)
		syslog(LOG_WARNING, "ready pipe: %m");
	close(fd);
}

/* The tables and threads the views share, over a backing already set up. */
static int start_services(struct sfs_daemon *d, char *err, size_t errlen)
{
	struct sfs_node *root;
	struct stat st;
	pthread_t sig;
	int fd, rc;

	const struct sfs_itab_hooks node_hooks = {
		.created = node_created, .freed = sfs_names_node_freed, .arg = &d->svc};

	if (sfs_itab_init(&d->svc.itab, &node_hooks)) {
		sfs_errf(err, errlen, d->source, "out of memory");
		return -1;
	}
	d->svc.itab.ho = d->svc.ho = &d->ho;
	/* open_by_handle_at wants a descriptor opened for real, not O_PATH, as its mount fd */
	d->handle_fd = openat(d->backing.root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->handle_fd < 0) {
		sfs_errf(err, errlen, d->backing.device, "cannot open the backing root: %s",
		         strerror(errno));
		return -1;
	}
	sfs_fdcache_init(&d->svc.fdc, d->handle_fd, d->fd_limit);
	fd = openat(d->backing.root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 ||
	    (rc = sfs_itab_get(&d->svc.itab, &d->svc.fdc, fd, &st, SFS_PIN, &root))) {
		sfs_errf(err, errlen, d->backing.device, "cannot open the backing root");
		return -1;
	}
	d->svc.root_ino = st.st_ino;
	if (start_quota(d, err, errlen))
		return -1;
	if (sfs_names_init(&d->svc)) {
		sfs_errf(err, errlen, d->source, "out of memory");
		return -1;
	}
	if (sfs_coh_start(&d->svc))
		return -1;
	if (sfs_locks_init(&d->svc.locks, &d->ho)) {
		sfs_errf(err, errlen, d->source, "out of memory");
		return -1;
	}
	d->mountinfo_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	d->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->event_fd < 0 || pthread_create(&sig, NULL, signal_thread, d)) {
		sfs_errf(err, errlen, d->source, "cannot start: %s", strerror(errno));
		return -1;
	}
	pthread_detach(sig);
	return 0;
}

static int setup(struct sfs_daemon *d, const char *optstr, char *err, size_t errlen)
{
	char lock[PATH_MAX];

	sfs_lock_path(d->key, lock, sizeof(lock));
	d->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		sfs_errf(err, errlen, lock, "%s", strerror(errno));
		return -1;
	}
	if (sfs_opts_parse(optstr, &d->in_force, err, errlen))
		return -1;
	if (sfs_backing_open(&d->backing, d->source, d->source_is_file, &d->in_force, err, errlen))
		return -1;
	syslog(LOG_INFO, "%s: backing %s mounted (%s, %s)", d->source, d->backing.device,
	       d->backing.mode == SFS_SHARE_EXISTING ? "shared-existing" : "exclusive",
	       d->backing.options);
	if (start_services(d, err, errlen) || listen_on(d, err, errlen) < 0)
		return -1;
	return 0;
}

/* ---- views that outlive the daemon (keeper.h, handover.h) ------------------------------ */

/* The daemon's log: at its start, and again in a successor once it has closed what it
 * inherited (take_over). */
static void open_log(void)
{
	openlog("strictfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Crashes within this long of the first count towards the limit; at the limit the views
 * answer EIO. The limit is 5, or STRICTFS_CRASH_LIMIT in the first daemon's environment. */
#define CRASH_WINDOW_MS 60000
#define CRASH_LIMIT 5

static uint32_t crash_limit_of_environment(void)
{
	const char *s = getenv("STRICTFS_CRASH_LIMIT");
	unsigned long long n;

	return s && sfs_parse_uint(s, &n) && n >= 1 && n <= 1000000 ? (uint32_t)n : CRASH_LIMIT;
}

static void record_daemon(struct sfs_daemon *d, const char *optstr)
{
	struct sfs_ho_daemon *r = &d->ho.daemon;
	struct sfs_ho_backing *b = &r->backing;
	struct stat st;

	sfs_strlcpy(r->key, d->key, sizeof(r->key));
	sfs_strlcpy(r->source, d->source, sizeof(r->source));
	r->source_is_file = d->source_is_file;
	if (optstr)
		sfs_strlcpy(r->options, optstr, sizeof(r->options));
	sfs_strlcpy(r->binary, d->binary, sizeof(r->binary));
	r->listen_fd = d->listen_fd;
	r->lock_fd = d->lock_fd;
	b->root_fd = d->backing.root_fd;
	b->loop_fd = d->backing.loop_fd;
	b->dev_fd = d->backing.dev_fd;
	b->loop_attached = d->backing.loop_attached;
	b->mode = d->backing.mode;
	b->read_only = d->backing.read_only;
	b->has_acl = d->backing.has_acl;
	b->has_user_xattr = d->backing.has_user_xattr;
	b->rdev = d->backing.rdev;
	b->fs_dev = d->backing.fs_dev;
	if (fstat(d->backing.root_fd, &st) == 0) {
		b->root_dev = st.st_dev;
		b->root_ino = st.st_ino;
	}
	sfs_strlcpy(b->device, d->backing.device, sizeof(b->device));
	sfs_strlcpy(b->options, d->backing.options, sizeof(b->options));
	sfs_strlcpy(b->uuid, d->backing.uuid, sizeof(b->uuid));
	sfs_strlcpy(b->existing_at, d->backing.existing_at, sizeof(b->existing_at));
	r->state = SFS_HO_SERVING;
	sfs_ho_write_daemon(&d->ho);
}

/* The keeper of this daemon; it execs our binary as `__daemon KEY SOURCE KIND - -1 STATE`. */
static int start_keeper(struct sfs_daemon *d)
{
	char version[64];
	int i = 0, rc;

	snprintf(d->state_arg, sizeof(d->state_arg), "%d", d->ho.fd);
	d->keeper_argv[i++] = "strictfs";
	d->keeper_argv[i++] = "__daemon";
	d->keeper_argv[i++] = d->key;
	d->keeper_argv[i++] = d->source;
	d->keeper_argv[i++] = d->source_is_file ? "file" : "device";
	d->keeper_argv[i++] = "-";
	d->keeper_argv[i++] = "-1";
	d->keeper_argv[i++] = d->state_arg;
	d->keeper_argv[i] = NULL;
	sfs_ho_format_version(version, sizeof(version));
	if ((rc = sfs_keeper_start(&d->keeper, d->binary, version, d->keeper_argv, d->title)))
		syslog(LOG_WARNING, "%s: no keeper (%s): the views end with this daemon", d->source,
		       strerror(-rc));
	return rc;
}

/* A predecessor that went without handing over crashed: the crash is counted, and past the
 * limit the views are not served again (they answer EIO) until they are unmounted. */
static bool crash_limit_reached(struct sfs_daemon *d)
{
	struct sfs_ho_daemon *r = &d->ho.daemon;
	int64_t now = sfs_ho_now_ms();

	if (r->state != SFS_HO_SERVING)
		return false;
	r->crashes_total++;
	if (!r->crashes || now - r->window_ms >= CRASH_WINDOW_MS) {
		r->window_ms = now;
		r->crashes = 0;
	}
	return ++r->crashes >= r->crash_limit;
}

/* The backing as the predecessor left it: its descriptors are ours now. */
static int adopt_backing(struct sfs_daemon *d, char *err, size_t errlen)
{
	const struct sfs_ho_backing *b = &d->ho.daemon.backing;
	struct stat st;

	if (fstat(b->root_fd, &st) < 0 || st.st_dev != b->root_dev || st.st_ino != b->root_ino) {
		sfs_errf(err, errlen, "state", "the backing's root descriptor is not the one recorded");
		return -1;
	}
	d->backing.root_fd = b->root_fd;
	d->backing.loop_fd = b->loop_fd;
	d->backing.dev_fd = b->dev_fd;
	d->backing.loop_attached = b->loop_attached;
	d->backing.mode = b->mode;
	d->backing.read_only = b->read_only;
	d->backing.has_acl = b->has_acl;
	d->backing.has_user_xattr = b->has_user_xattr;
	d->backing.rdev = b->rdev;
	d->backing.fs_dev = b->fs_dev;
	sfs_strlcpy(d->backing.device, b->device, sizeof(d->backing.device));
	sfs_strlcpy(d->backing.options, b->options, sizeof(d->backing.options));
	sfs_strlcpy(d->backing.uuid, b->uuid, sizeof(d->backing.uuid));
	sfs_strlcpy(d->backing.existing_at, b->existing_at, sizeof(d->backing.existing_at));
	sfs_backing_read_reserved(&d->backing);
	return 0;
}

/* The predecessor's clone of the backing for the view, which its open files were opened
 * through: a later remount must change their flags too. A new one if the record's does not
 * check out (the files then keep the flags they had). */
static int adopt_clone(struct sfs_daemon *d, struct sfs_view *v, const struct sfs_ho_view *rec,
                       char *err, size_t errlen)
{
	v->clone = (struct sfs_clone){.tree_fd = rec->clone_tree_fd, .fd = rec->clone_fd};
	if (sfs_backing_clone_valid(&d->backing, &v->clone) &&
	    !sfs_backing_clone_set(&v->clone, v->prof->backing_attrs))
		return 0;
	syslog(LOG_WARNING, "%s: view at %s: its clone of the backing is not the one recorded; "
	       "a new one", d->source, rec->mountpoint);
	v->clone.fd = v->clone.tree_fd = -1;
	return make_clone(d, v, err, errlen);
}

/* A view of the predecessor, made again from its record, registered at the same slot; its
 * session starts once its open files are back (start_adopted_views). */
static int adopt_view(struct sfs_daemon *d, const struct sfs_ho_view *rec)
{
	char err[ERRLEN] = "";
	struct sfs_view *v;
	int rc;

	if (sfs_registry_at(&d->svc.views, rec->slot) || !(v = calloc(1, sizeof(*v))))
		return -EEXIST;
	if (!(v->prof = sfs_profile_make(&rec->opts))) {
		free(v);
		return -ENOMEM;
	}
	v->qroot = -1;
	v->ns_dev = rec->ns_dev;
	v->ns_ino = rec->ns_ino;
	v->mnt_id = rec->mnt_id;
	if ((rc = adopt_clone(d, v, rec, err, sizeof(err))))
		goto fail;
	if ((rc = open_view_root(d, rec->opts.subdir, &v->root, err, sizeof(err))))
		goto fail;
	if (rec->qroot_tracked && (rc = track_view_tree(d, v, &rec->opts, err, sizeof(err)))) {
		sfs_itab_unpin(&d->svc.itab, &d->svc.fdc, v->root);
		goto fail;
	}
	prepare_view(d, v, rec->slot, rec->mountpoint, rec->source);
	v->failed = d->ho.daemon.failed[0] != 0;
	v->fuse_io.fd = rec->fuse_fd;
	sfs_registry_add(&d->svc.views, v);
	return 0;
fail:
	syslog(LOG_ERR, "%s: cannot take the view at %s over: %s", d->source, rec->mountpoint, err);
	free_unstarted_view(v);
	return rc;
}

/* The predecessor's open files and directories, at their slots in their views. A record
 * that does not check out is dropped: the kernel's calls on that file then fail (EBADF). */
static void adopt_files(struct sfs_daemon *d)
{
	struct sfs_ho_file rec;
	size_t files = 0, lost = 0;

	for (uint32_t slot = 0; slot < d->ho.next_slot; slot++) {
		struct sfs_view *v;
		int rc;
		if (!sfs_ho_file_record(&d->ho, slot, &rec))
			continue;
		if (!(v = sfs_registry_at(&d->svc.views, rec.view)))
			rc = -ENOENT;
		else if (atomic_load(&rec.live) == SFS_HO_DIR)
			rc = sfs_view_adopt_dir(v, slot, &rec);
		else if (atomic_load(&rec.live) == SFS_HO_LOCK)
			rc = sfs_locks_adopt(d->svc.locks, slot, &rec);
		else
			rc = sfs_view_adopt_file(v, slot, &rec);
		rc ? lost++ : files++;
	}
	sfs_ho_files_settle(&d->ho);
	syslog(lost ? LOG_WARNING : LOG_INFO, "%s: %zu open files taken over, %zu lost", d->source,
	       files, lost);
}

static void start_adopted_views(struct sfs_daemon *d)
{
	struct sfs_ho_view *rec = malloc(sizeof(*rec));
	struct sfs_view *v;

	sfs_for_each_view(&d->svc.views, v) {
		int rc;
		if (!rec || !sfs_ho_read_view(&d->ho, v->slot, rec))
			continue;
		if ((rc = sfs_view_start(v, rec->fuse_fd, rec))) {
			syslog(LOG_ERR, "%s: cannot resume the view at %s: %s", d->source, v->mountpoint,
			       strerror(-rc));
			atomic_store(&v->ended, true);
			continue;
		}
		log_view(d, "view taken over at", v);
	}
	free(rec);
}

/* Whether this process runs the file at path (its keeper ran another when that file could
 * not take over). */
static bool runs_file(const char *path)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* How long a successor waits for its io_uring queues to be woken (sfs_view_poked). */
#define POKE_WAIT_MS 5000

/* A successor: the predecessor's state, checked, then everything it served, served again. */
static int take_over(struct sfs_daemon *d, int state_fd, char *err, size_t errlen)
{
	struct sfs_ho_daemon *r = &d->ho.daemon;
	struct sfs_ho_view *rec;
	struct sfs_view *v;
	bool crashed;

	if (sfs_ho_adopt(&d->ho, state_fd, err, errlen))
		return -1;
	if (strcmp(r->key, d->key)) {
		sfs_errf(err, errlen, "state", "it is the state of %s, not of %s", r->key, d->key);
		return -1;
	}
	crashed = r->state == SFS_HO_SERVING;
	sfs_strlcpy(d->binary, r->binary, sizeof(d->binary));
	if (!runs_file(d->binary))
		syslog(LOG_WARNING, "%s: %s is gone or reads another state: the views stay with the "
		       "binary the predecessor ran until they are unmounted", d->source, d->binary);
	/* The log's socket is not in the state: closed with the rest, glibc would send the next
	 * message to whatever took its number, and close that when the send fails (a view's
	 * /dev/fuse descriptor, an open file's, the keeper's pidfd). So it is closed first and
	 * opened again after. */
	closelog();
	sfs_ho_close_unnamed(&d->ho, -1);
	/* the keeper cleared close-on-exec on what it passed: the programs this daemon starts
	 * (__uring-poke) get only what they are handed, as from the first daemon */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	open_log();
	start_keeper(d);
	if (crash_limit_reached(d))
		snprintf(r->failed, sizeof(r->failed), "the daemon crashed %u times within %d s",
		         r->crashes, CRASH_WINDOW_MS / 1000);
	d->lock_fd = r->lock_fd;
	d->listen_fd = r->listen_fd;
	if (sfs_opts_parse(r->options, &d->in_force, err, errlen) ||
	    adopt_backing(d, err, errlen) || start_services(d, err, errlen))
		return -1;
	check_shared(d);
	if (!(rec = malloc(sizeof(*rec))))
		return -1;
	for (uint32_t slot = 0; slot < SFS_HO_VIEWS; slot++)
		if (sfs_ho_read_view(&d->ho, slot, rec))
			adopt_view(d, rec);
	free(rec);
	if (!r->failed[0])
		adopt_files(d); /* a daemon that failed answers EIO: its files are not used */
	r->generation++;
	r->took_over_ms = sfs_ho_now_ms();
	record_daemon(d, NULL);
	syslog(crashed ? LOG_WARNING : LOG_INFO, "%s: generation %llu took over %zu view(s) after %s",
	       d->source, (unsigned long long)r->generation, sfs_registry_count(&d->svc.views),
	       crashed ? "a crash of its predecessor" : "a handover");
	if (r->failed[0])
		syslog(LOG_ERR, "%s: %s: its views answer EIO until they are unmounted", d->source,
		       r->failed);
	start_adopted_views(d);
	/* the daemon answers (and an upgrade waits for that) once each queue was woken and the
	 * process that woke it is gone: it was in the view, and would hold it busy */
	sfs_for_each_view(&d->svc.views, v)
		sfs_view_poked(v, POKE_WAIT_MS);
	return 0;
}

static void teardown(struct sfs_daemon *d)
{
	char path[PATH_MAX];

	sfs_keeper_stop(&d->keeper); /* the views end with this daemon now */
	if (d->listen_fd >= 0) {
		sfs_socket_path(d->key, path, sizeof(path));
		unlink(path);
		close(d->listen_fd);
	}
	if (sfs_registry_count(&d->svc.views)) {
		/* views unmounted lazily while files in them are open keep serving until this
		 * process ends; their threads use the tables, so nothing is freed under them. The
		 * exit ends their connections (callers get ECONNABORTED) and releases the backing. */
		sfs_quota_flush(&d->svc.quota);
		syslog(LOG_WARNING, "%s: %zu view(s) still in use after unmounting; their open "
		       "files fail as the daemon exits", d->source, sfs_registry_count(&d->svc.views));
		return;
	}
	sfs_quota_stop(&d->svc.quota);
	sfs_coh_stop(&d->svc);
	sfs_locks_destroy(d->svc.locks);
	sfs_names_destroy(&d->svc);
	if (d->svc.itab.buckets)
		sfs_itab_destroy(&d->svc.itab, &d->svc.fdc);
	if (d->handle_fd >= 0)
		close(d->handle_fd);
	sfs_backing_close(&d->backing);
	syslog(LOG_INFO, "%s: backing released; daemon exits", d->source);
}

/* A successor inherits the keeper's dispositions (every signal ignored) and mask. */
static void default_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* What the keeper execs: this binary, by the path it was started from, so that an upgrade
 * installed over it is what a successor runs. */
static void find_binary(struct sfs_daemon *d)
{
	ssize_t n = readlink("/proc/self/exe", d->binary, sizeof(d->binary) - 1);

	d->binary[n > 0 ? n : 0] = '\0';
	if (n > 10 && !strcmp(d->binary + n - 10, " (deleted)"))
		d->binary[n - 10] = '\0';
}

int sfs_daemon_main(int argc, char **argv)
{
	static struct sfs_daemon daemon_state;
	struct sfs_daemon *d = &daemon_state;
	char err[ERRLEN] = "";
	bool successor = argc == 7;
	sigset_t set;
	int ready, rc;
	pid_t other;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "strictfs: __daemon: internal use only\n");
		return 2;
	}
	/* started through /proc/self/exe, it would be "exe" to ps, top and pgrep */
	prctl(PR_SET_NAME, "strictfs");
	default_signals();
	sfs_strlcpy(d->key, argv[1], sizeof(d->key));
	sfs_strlcpy(d->source, argv[2], sizeof(d->source));
	d->source_is_file = !strcmp(argv[3], "file");
	d->title = argv[0];
	ready = atoi(argv[5]);
	d->listen_fd = d->event_fd = d->lock_fd = d->mountinfo_fd = d->handle_fd = -1;
	d->backing.root_fd = d->backing.loop_fd = d->backing.dev_fd = -1;
	d->keeper.pidfd = -1;
	d->started = time(NULL);
	d->svc.backing = &d->backing;
	sfs_registry_init(&d->svc.views);
	sfs_dirlock_init(&d->svc.dirlock);
	pthread_mutex_init(&d->control_lock, NULL);
	pthread_mutex_init(&d->conns_lock, NULL);
	pthread_cond_init(&d->conns_idle, NULL);
	for (int i = 0; i < SFS_MAX_CONNS; i++)
		d->conns[i].fd = -1;
	open_log();
	umask(0);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	d->fd_limit = raise_fd_limit();

	if (successor) {
		rc = take_over(d, atoi(argv[6]), err, sizeof(err));
	} else if ((other = sfs_daemon_pid(d->key))) {
		/* its socket may be gone, but a second daemon would mount the backing again */
		sfs_errf(err, sizeof(err), d->source, "already served by strictfs daemon %d", other);
		rc = -1;
	} else {
		find_binary(d);
		/* the keeper first, while this process is small: it keeps a copy of it */
		if ((rc = sfs_ho_create(&d->ho)))
			sfs_errf(err, sizeof(err), d->source, "cannot make the state: %s", strerror(-rc));
		else
			start_keeper(d);
		d->ho.daemon.crash_limit = crash_limit_of_environment();
		if (!rc && (rc = setup(d, argv[4], err, sizeof(err))) == 0)
			record_daemon(d, argv[4]);
	}
	if (rc < 0) {
		syslog(LOG_ERR, "%s", err);
		report_ready(ready, err);
		teardown(d);
		return 1;
	}
	check_shared(d);
	{
		char ok[32];
		snprintf(ok, sizeof(ok), "OK %d", getpid());
		report_ready(ready, ok);
	}
	control_loop(d);
	teardown(d);
	return 0;
}
