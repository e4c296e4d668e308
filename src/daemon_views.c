/* A source's views (contract §6): whether a view may join those served, adding it with its
 * root node and its own clone of the backing, changing its options in place on a remount or
 * refusing the change by name, and dropping it once its session has ended. A successor makes
 * its predecessor's views again with the same steps (daemon_takeover.c). */
#include "daemon_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "control.h"
#include "util.h"
#include "passthrough.h"
#include "view_files.h"
#include "profile.h"

/* The view's root: subdir resolved beneath the backing root, never through a symlink. */
int open_view_root(struct sfs_daemon *d, const char *subdir, struct sfs_node **out,
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
int refuse_when_failed(struct sfs_daemon *d, char *err, size_t errlen)
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

/* An idmapped view acts on the backing as the ids its map gives the caller, but ext4 lends its
 * reserved blocks by the writer's own fsuid (and groups). Where the map gives resuid's disk id
 * to another host id, the daemon writes that caller's data as nobody and looks for room above
 * the reserve before its creations (creds.h, sfs_creds_for_data). The other way round cannot
 * be made up for: the host's resuid (other than root, who has CAP_SYS_RESOURCE) acting as
 * another disk id, or a resgid the map moves either way, would be refused the reserve a native
 * idmapped mount lends, or lent what it refuses. Refused by name while ext4 reserves blocks. */
static int idmap_allows(const struct sfs_backing *b, const struct sfs_opts *o, char *err,
                        size_t errlen)
{
	const struct sfs_idmap *m = &o->idmap;
	uint32_t u = sfs_idmap_uid_to_disk(m, b->resuid);
	uint32_t g[2] = {sfs_idmap_gid_to_host(m, b->resgid), sfs_idmap_gid_to_disk(m, b->resgid)};
	bool moves_uid = b->resuid != 0 && u != SFS_IDMAP_NONE && u != b->resuid, moves_gid = false;

	if (!sfs_idmap_active(m) || !sfs_backing_reserved_blocks(b))
		return 0;
	for (int i = 0; i < 2; i++)
		moves_gid |= b->resgid != 0 && g[i] != SFS_IDMAP_NONE && g[i] != b->resgid;
	if (!moves_uid && !moves_gid)
		return 0;
	sfs_errf(err, errlen, o->idmap_name,
	         "the backing reserves blocks for %s %u, which the map gives another id, and "
	         "ext4 lends them by the writer's own id (reserve none: tune2fs -r 0, or for an id "
	         "outside the map: tune2fs -%c)", moves_uid ? "uid" : "gid",
	         moves_uid ? (unsigned)b->resuid : (unsigned)b->resgid, moves_uid ? 'u' : 'g');
	return -EINVAL;
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
	if ((rc = backing_allows(d, o, err, errlen)) ||
	    (rc = idmap_allows(&d->backing, o, err, errlen)))
		return rc;
	if (o->cache == SFS_CACHE_WRITEBACK && sfs_registry_count(&d->views)) {
		sfs_errf(err, errlen, "cache=writeback",
		         "%s has other views; writeback caching needs the only view",
		         d->source);
		return -EBUSY;
	}
	sfs_for_each_view(&d->views, v)
		if (v->prof->opts.cache == SFS_CACHE_WRITEBACK) {
			sfs_errf(err, errlen, "cache=writeback",
			         "the view at %s uses it; no further views of %s while it exists",
			         v->mountpoint, d->source);
			return -EBUSY;
		}
	if (sfs_registry_count(&d->views) >= SFS_MAX_VIEWS) {
		sfs_errf(err, errlen, d->source, "too many views");
		return -EMFILE;
	}
	return 0;
}

/* The view's own clone of the backing, with the flags of its profile (backing.h). */
int make_clone(struct sfs_daemon *d, struct sfs_view *v, char *err, size_t errlen)
{
	int rc = sfs_backing_clone(&d->backing, v->prof->backing_attrs, &v->clone);

	if (rc)
		sfs_errf(err, errlen, d->source, "cannot clone the backing mount: %s", strerror(-rc));
	return rc;
}

/* A subdir view with size= or inodes= has its tree's usage kept apart (quota.h). */
int track_view_tree(struct sfs_daemon *d, struct sfs_view *v, const struct sfs_opts *o,
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

void log_view(const struct sfs_daemon *d, const char *what, const struct sfs_view *v)
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
void prepare_view(struct sfs_daemon *d, struct sfs_view *v, uint32_t slot, const char *mp,
                  const char *src)
{
	v->svc = &d->svc;
	v->ended_cb = daemon_wake_cb;
	v->ended_arg = d;
	v->slot = slot;
	sfs_strlcpy(v->mountpoint, mp, sizeof(v->mountpoint));
	sfs_strlcpy(v->source, src, sizeof(v->source));
	sfs_view_set_caching(v, !*d->shared_with && d->backing.mode == SFS_SHARE_EXCLUSIVE);
	sfs_pt_init(v);
	v->fuse_io.want_idmap = sfs_idmap_active(&v->prof->opts.idmap);
	pthread_mutex_init(&v->files_lock, NULL);
	sfs_list_init(&v->files);
}

/* What a view made but not started holds: its profile, its clone and its passthrough table. */
void free_unstarted_view(struct sfs_view *v)
{
	sfs_pt_destroy(v);
	sfs_backing_clone_close(&v->clone);
	sfs_profile_free((struct sfs_profile *)v->prof);
	free(v);
}

int add_view(struct sfs_daemon *d, struct sfs_msg *req, char *err, size_t errlen)
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
	if ((slot = sfs_registry_free_slot(&d->views)) < 0) {
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
	sfs_registry_add(&d->views, v);
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

/* Puts profile p in force on v, whole, or changes nothing: the remount's work. pt.lock keeps
 * a passthrough open from coming between the count of writers and the new profile; the quota
 * barrier, which a request holds when it takes pt.lock, is never taken under it (doc/design.md,
 * "Locks"), so the view's tree is tracked before and dropped after. */
static int put_in_force(struct sfs_daemon *d, struct sfs_view *v, struct sfs_profile *p,
                        char *err, size_t errlen)
{
	bool tracked = v->qroot >= 0;
	int rc = track_view_tree(d, v, &p->opts, err, errlen);

	if (rc)
		return rc;
	pthread_mutex_lock(&v->pt.lock);
	if (!(rc = passthrough_writers_hold(v, p, err, errlen)) &&
	    !(rc = clone_follows(v, p, err, errlen))) {
		p->retired = (struct sfs_profile *)v->prof;
		atomic_store(&v->prof, p);
	}
	pthread_mutex_unlock(&v->pt.lock);
	if (rc && !tracked && v->qroot >= 0) {
		sfs_quota_drop_root(&d->svc.quota, v->qroot);
		v->qroot = -1;
	}
	return rc;
}

/* remount: the view's options change in place, or the change is refused by name. With check
 * set, only whether it would be refused, and the view's mount flags before and after. */
int remount_view(struct sfs_daemon *d, struct sfs_msg *req, unsigned long *flags,
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
	if (!(v = sfs_registry_find(&d->views, mp, req->fds[0]))) {
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
	sfs_registry_remove(&d->views, v);
	sfs_view_end_locks(v);
	sfs_view_finish(v);
	sfs_view_close_files(v);
	sfs_itab_drop_view(&d->svc.itab, &d->svc.fdc, v->slot);
	sfs_quota_drop_root(&d->svc.quota, v->qroot);
	sfs_itab_unpin(&d->svc.itab, &d->svc.fdc, v->root);
	syslog(LOG_INFO, "%s: view at %s removed", d->source, v->mountpoint);
	free_unstarted_view(v);
}

void reap_ended_views(struct sfs_daemon *d)
{
	struct sfs_view *v;

	sfs_for_each_view(&d->views, v)
		if (atomic_load(&v->ended))
			drop_view(d, v);
}
