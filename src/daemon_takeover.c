/* Views that outlive the daemon (contract §6, "Failover"): `strictfs upgrade` hands them over
 * at a request boundary to the binary installed since, and a successor, which the keeper
 * starts after a handover or a crash, takes the predecessor's backing, views and open files
 * from the state and serves them again; crashes are counted, and past the limit the views
 * answer EIO until they are unmounted. */
#include "daemon_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "fuse_gate.h"
#include "fuse_uring.h"
#include "view_files.h"
#include "locks.h"
#include "util.h"
#include "profile.h"

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
int hand_over(struct sfs_daemon *d, char *err, size_t errlen)
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
	sfs_fuse_gate_hold();
	sfs_for_each_view(&d->views, v) {
		struct sfs_fuse_uring *u = atomic_load(&v->fuse_io.uring);
		if (u)
			sfs_fuse_uring_hold(u);
	}
	if (!sfs_fuse_gate_quiet(HANDOVER_QUIET_MS))
		syslog(LOG_WARNING, "%s: requests still served after %d s; the successor gets them again",
		       d->source, HANDOVER_QUIET_MS / 1000);
	sfs_quota_flush(&d->svc.quota);
	d->ho.daemon.state = SFS_HO_HANDING_OVER;
	sfs_ho_write_daemon(&d->ho);
	syslog(LOG_INFO, "%s: generation %llu hands its %zu view(s) over to %s", d->source,
	       (unsigned long long)d->ho.daemon.generation, sfs_registry_count(&d->views),
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

/* ---- the successor (keeper.h, handover.h) ---------------------------------------------- */

/* The daemon's log: at its start, and again in a successor once it has closed what it
 * inherited (take_over). */
void open_log(void)
{
	openlog("strictfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Crashes within this long of the first count towards the limit; at the limit the views
 * answer EIO. The limit is 5, or STRICTFS_CRASH_LIMIT in the first daemon's environment. */
#define CRASH_WINDOW_MS 60000
#define CRASH_LIMIT 5

uint32_t crash_limit_of_environment(void)
{
	const char *s = getenv("STRICTFS_CRASH_LIMIT");
	unsigned long long n;

	return s && sfs_parse_uint(s, &n) && n >= 1 && n <= 1000000 ? (uint32_t)n : CRASH_LIMIT;
}

void record_daemon(struct sfs_daemon *d, const char *optstr)
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
int start_keeper(struct sfs_daemon *d)
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

	if (sfs_registry_at(&d->views, rec->slot) || !(v = calloc(1, sizeof(*v))))
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
	sfs_registry_add(&d->views, v);
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

	for (uint32_t slot = 0; slot < sfs_openfiles_used(&d->files); slot++) {
		struct sfs_view *v;
		int rc;
		if (!sfs_openfiles_record(&d->files, slot, &rec))
			continue;
		if (!(v = sfs_registry_at(&d->views, rec.view)))
			rc = -ENOENT;
		else if (atomic_load(&rec.live) == SFS_HO_DIR)
			rc = sfs_view_adopt_dir(v, slot, &rec);
		else if (atomic_load(&rec.live) == SFS_HO_LOCK)
			rc = sfs_locks_adopt(d->svc.locks, slot, &rec);
		else
			rc = sfs_view_adopt_file(v, slot, &rec);
		rc ? lost++ : files++;
	}
	sfs_openfiles_settle(&d->files);
	syslog(lost ? LOG_WARNING : LOG_INFO, "%s: %zu open files taken over, %zu lost", d->source,
	       files, lost);
}

static void start_adopted_views(struct sfs_daemon *d)
{
	struct sfs_ho_view *rec = malloc(sizeof(*rec));
	struct sfs_view *v;

	sfs_for_each_view(&d->views, v) {
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
int take_over(struct sfs_daemon *d, int state_fd, char *err, size_t errlen)
{
	struct sfs_ho_daemon *r = &d->ho.daemon;
	struct sfs_ho_view *rec;
	struct sfs_view *v;
	bool crashed;

	if (sfs_ho_adopt(&d->ho, state_fd, err, errlen))
		return -1;
	if (sfs_openfiles_resume(&d->files, sfs_ho_files_memory(&d->ho))) {
		sfs_errf(err, errlen, "state", "out of memory");
		return -1;
	}
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
	sfs_ho_close_unnamed(&d->ho, &d->files, -1);
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
	       d->source, (unsigned long long)r->generation, sfs_registry_count(&d->views),
	       crashed ? "a crash of its predecessor" : "a handover");
	if (r->failed[0])
		syslog(LOG_ERR, "%s: %s: its views answer EIO until they are unmounted", d->source,
		       r->failed);
	start_adopted_views(d);
	/* the daemon answers (and an upgrade waits for that) once each queue was woken and the
	 * process that woke it is gone: it was in the view, and would hold it busy */
	sfs_for_each_view(&d->views, v)
		sfs_view_poked(v, POKE_WAIT_MS);
	return 0;
}
