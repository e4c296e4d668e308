/* One view: its FUSE session, the thread serving it, and its removal in its own mount
 * namespace. The mount itself was made by the requesting strictfs process (contract §6); the
 * session adopts the /dev/fuse descriptor it sent. */
#include "view.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "fdcache.h"
#include "handover.h"
#include "mountid.h"
#include "services.h"
#include "util.h"

/* Kernel caches may be long because every change is notified to the other views; with
 * share=existing others write behind the daemon's back, so caches stay short there. */
#define TIMEOUT_EXCLUSIVE 5.0
#define TIMEOUT_SHARED 0.5

static void *serve(void *arg)
{
	struct sfs_view *v = arg;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();

	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_idle_threads(cfg, 4);
	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_session_loop_mt(v->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	atomic_store(&v->ended, true);
	v->ended_cb(v->ended_arg);
	return NULL;
}

void sfs_view_set_caching(struct sfs_view *v, bool sole_writer)
{
	v->entry_timeout = v->attr_timeout = sole_writer ? TIMEOUT_EXCLUSIVE : TIMEOUT_SHARED;
	/* a casefold view's negative entry for one spelling would hide the creation of another;
	 * the kernel keeps one dentry per spelling, so such views cache no negatives */
	v->negative_timeout = v->prof->opts.casefold != SFS_CASEFOLD_OFF ? 0 : v->entry_timeout;
	v->keep_cache = sole_writer;
}

/* A node a predecessor daemon gave the view's kernel, made again from its id. */
static struct sfs_node *adopt(const struct sfs_view *v, uint64_t id)
{
	int fd = sfs_fd_open_id(&v->svc->fdc, id);
	struct sfs_node *n;
	struct stat st;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return NULL;
	}
	if (sfs_itab_get(&v->svc->itab, &v->svc->fdc, fd, &st, SFS_ADOPT, &n))
		return NULL;
	return n->id == id ? n : NULL;
}

struct sfs_node *sfs_view_adopt_node(struct sfs_view *v, const struct stat *st, uint64_t id)
{
	/* Found again by its id, not through the file's descriptor: that one is on the view's
	 * clone of the backing, and a node's own must be on the backing's mount like every
	 * other node's, or a link or rename between it and another node is EXDEV. */
	struct sfs_node *n = adopt(v, id);

	return n && n->dev == st->st_dev && n->ino == st->st_ino ? n : NULL;
}

struct sfs_node *sfs_node_of(const struct sfs_view *v, fuse_ino_t ino)
{
	struct sfs_node *n;

	if (ino == FUSE_ROOT_ID)
		return v->root;
	n = sfs_itab_find_id(&v->svc->itab, ino);
	if (!n && sfs_itab_inherited(&v->svc->itab, ino, v->slot))
		n = adopt(v, ino);
	return n;
}

fuse_ino_t sfs_ino_of(const struct sfs_view *v, const struct sfs_node *n)
{
	return n == v->root ? FUSE_ROOT_ID : n->id;
}

struct sfs_fuse_io *sfs_view_fuse_io(void *view)
{
	return &((struct sfs_view *)view)->fuse_io;
}

void sfs_view_record(struct sfs_view *v)
{
	struct sfs_ho_view *r;

	if (!v->svc->ho || !(r = calloc(1, sizeof(*r))))
		return;
	r->slot = v->slot;
	r->fuse_fd = v->fuse_io.fd;
	r->ns_dev = v->ns_dev;
	r->ns_ino = v->ns_ino;
	if (v->fuse_io.init_len <= sizeof(r->init)) {
		memcpy(r->init, v->fuse_io.init_req, v->fuse_io.init_len);
		r->init_len = v->fuse_io.init_len;
	}
	r->qroot_tracked = v->qroot >= 0;
	r->uring_fd = v->fuse_io.area.fd;
	r->uring_base = v->fuse_io.area.base;
	r->uring_region = v->fuse_io.area.region;
	r->uring_entries = v->fuse_io.area.entries;
	r->clone_tree_fd = v->clone.tree_fd;
	r->clone_fd = v->clone.fd;
	sfs_strlcpy(r->mountpoint, v->mountpoint, sizeof(r->mountpoint));
	sfs_strlcpy(r->source, v->source, sizeof(r->source));
	r->mnt_id = v->mnt_id;
	r->opts_size = sizeof(r->opts);
	r->opts = v->prof->opts;
	sfs_ho_write_view(v->svc->ho, r);
	free(r);
}

static int open_namespace_of(const struct sfs_view *v);

static void *poke_thread(void *arg)
{
	struct sfs_view *v = arg;
	struct sfs_fuse_uring *u = atomic_load(&v->fuse_io.uring);
	int nsfd = open_namespace_of(v);

	if (u && nsfd >= 0)
		sfs_fuse_uring_poke(u, nsfd, v->mountpoint);
	if (nsfd >= 0)
		close(nsfd);
	return NULL;
}

void sfs_view_poked(struct sfs_view *v, int ms)
{
	struct timespec until;

	if (!v->poke_started)
		return;
	sfs_deadline_in(CLOCK_REALTIME, ms, &until);
	if (pthread_timedjoin_np(v->poke, NULL, &until) == 0)
		v->poke_started = false;
}

/* A successor's io_uring queues may hold requests that came while they had no entry; off the
 * daemon's threads, since it waits for the entries to serve (fuse_uring.h). */
static void poke_queues(struct sfs_view *v)
{
	if (atomic_load(&v->fuse_io.uring) && pthread_create(&v->poke, NULL, poke_thread, v) == 0)
		v->poke_started = true;
}

/* The kernel's INIT was read: a successor will need it, before the reply goes out. */
static void record_init(struct sfs_fuse_io *io)
{
	sfs_view_record((struct sfs_view *)((char *)io - offsetof(struct sfs_view, fuse_io)));
}

int sfs_view_start(struct sfs_view *v, int fuse_fd, const struct sfs_ho_view *from)
{
	char *argv[] = {"strictfs", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	int rc;

	v->se = fuse_session_new(&args, &sfs_ops, sizeof(sfs_ops), v);
	fuse_opt_free_args(&args); /* libfuse copies argv while parsing; the session keeps none */
	if (!v->se) {
		close(fuse_fd);
		return -ENOMEM;
	}
	if (sfs_fuse_io_attach(v->se, &v->fuse_io, fuse_fd) != 0) {
		close(fuse_fd);
		fuse_session_destroy(v->se);
		v->se = NULL;
		return -EINVAL;
	}
	v->fuse_io.on_init = record_init;
	atomic_store(&v->fuse_io.failed, v->failed);
	if (from && from->uring_fd >= 0)
		v->fuse_io.inherit = (struct sfs_uring_area){from->uring_fd, from->uring_base,
		                                             from->uring_region, from->uring_entries};
	if (from && from->init_len &&
	    (rc = sfs_fuse_io_replay_init(&v->fuse_io, from->init, from->init_len))) {
		fuse_session_destroy(v->se);
		v->se = NULL;
		return rc;
	}
	/* Before any thread reads: a RESEND puts back every request read and not answered, so one
	 * this daemon had already read would come twice and be made twice (doc/kernel.md §4.11). */
	if (from)
		sfs_fuse_io_resend(&v->fuse_io);
	rc = pthread_create(&v->thread, NULL, serve, v);
	if (rc) {
		fuse_session_destroy(v->se);
		v->se = NULL;
		return -rc;
	}
	v->thread_started = true;
	if (from) {
		sfs_view_record(v); /* with the io_uring buffers it has now */
		poke_queues(v);
	}
	return 0;
}

/* What each process living in the mount namespace (ns_dev, ns_ino), found by the
 * namespace's identity, gives: its file "ns/mnt" or "root" opened (flags) and handed to use,
 * which returns a descriptor, or < 0 to try the next process. The result of the first that
 * gives one, else -1 (no process there: the namespace, and the views in it, are gone). */
static int open_in_namespace(dev_t ns_dev, ino_t ns_ino, const char *what, int flags,
                             int (*use)(int fd, const void *arg), const void *arg)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	int fd = -1;

	while (proc && fd < 0 && (de = readdir(proc))) {
		char path[300];
		struct stat st;
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
		if (stat(path, &st) < 0 || st.st_ino != ns_ino || st.st_dev != ns_dev)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/%s", de->d_name, what);
		if ((fd = open(path, flags | O_CLOEXEC)) >= 0 && use)
			fd = use(fd, arg);
	}
	if (proc)
		closedir(proc);
	return fd;
}

static int open_namespace_of(const struct sfs_view *v)
{
	return open_in_namespace(v->ns_dev, v->ns_ino, "ns/mnt", O_RDONLY, NULL, NULL);
}

void sfs_view_place_of(const struct sfs_view *v, struct sfs_view_place *p)
{
	*p = (struct sfs_view_place){.ns_dev = v->ns_dev, .ns_ino = v->ns_ino, .mnt_id = v->mnt_id};
	sfs_strlcpy(p->mountpoint, v->mountpoint, sizeof(p->mountpoint));
}

/* The view's mount root as seen from one process's root: a process of the namespace that
 * chrooted elsewhere sees another tree, so the next one is tried. */
static int mount_root_from(int root, const void *arg)
{
	const struct sfs_view_place *p = arg;
	int fd = sfs_mount_open_checked_in(root, p->mountpoint, p->mnt_id);

	close(root);
	return fd;
}

int sfs_view_place_open(const struct sfs_view_place *p)
{
	int fd = open_in_namespace(p->ns_dev, p->ns_ino, "root", O_PATH | O_DIRECTORY,
	                           mount_root_from, p);

	return fd < 0 ? -ESTALE : fd;
}

dev_t sfs_view_dev(struct sfs_view *v)
{
	struct sfs_view_place p;
	struct statx sx;
	dev_t dev = (dev_t)atomic_load(&v->dev);
	int fd;

	if (dev)
		return dev;
	sfs_view_place_of(v, &p);
	if ((fd = sfs_view_place_open(&p)) < 0)
		return 0;
	/* DONT_SYNC: the device number is the superblock's, no request needed */
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, 0, &sx) == 0)
		dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	close(fd);
	atomic_store(&v->dev, (unsigned long long)dev);
	return dev;
}

/* What the child that unmounts a view found, as its exit status. */
enum unmount_outcome {
	UNMOUNTED = 0,
	FAILED = 1,
	UNMOUNTED_MOVED = 2, /* not at its path any more: found by its id where it is now */
	NOT_FOUND = 3,       /* the path leads elsewhere and the id to no path */
	GONE = 4,            /* no such mount in the namespace: unmounted already */
};

/* The view's mount at path, if it is there: at once, else (busy, or lazy) detached. */
static int unmount_at(const struct sfs_view *v, const char *path, bool lazy)
{
	int rc = lazy ? -EBUSY : sfs_umount_checked(path, v->mnt_id, 0);

	return rc == -EBUSY ? sfs_umount_checked(path, v->mnt_id, MNT_DETACH) : rc;
}

/* In the child, in the view's namespace. The path the view was mounted at may lead elsewhere
 * now: whoever owns a directory above it can rename that and put a symlink to another mount
 * in its place. Then the view's mount is looked for by its id. */
static enum unmount_outcome unmount_here(const struct sfs_view *v, bool lazy)
{
	char now[PATH_MAX];
	int rc = unmount_at(v, v->mountpoint, lazy);

	if (rc != -ESTALE)
		return rc ? FAILED : UNMOUNTED;
	rc = sfs_mount_describe(v->mnt_id, now, sizeof(now), NULL, 0);
	if (rc == -ENOENT)
		return GONE;
	if (rc)
		return NOT_FOUND;
	rc = unmount_at(v, now, lazy);
	return !rc ? UNMOUNTED_MOVED : rc == -ESTALE ? NOT_FOUND : FAILED;
}

static void log_outcome(const struct sfs_view *v, int status)
{
	int outcome = WIFEXITED(status) ? WEXITSTATUS(status) : FAILED;

	if (outcome == UNMOUNTED_MOVED)
		syslog(LOG_WARNING, "%s: %s no longer leads to the view (a directory above it was "
		       "replaced); its mount was unmounted where it is now", v->source, v->mountpoint);
	else if (outcome == NOT_FOUND)
		syslog(LOG_ERR, "%s: %s no longer leads to the view and its mount was not found: "
		       "nothing unmounted", v->source, v->mountpoint);
	else if (outcome == FAILED)
		syslog(LOG_ERR, "%s: cannot unmount the view at %s", v->source, v->mountpoint);
}

/* A child enters the view's mount namespace and unmounts it there: the daemon itself stays
 * in its own namespace, and setns is per process for a threaded one. */
void sfs_view_unmount(const struct sfs_view *v, bool lazy)
{
	int nsfd = open_namespace_of(v), status = 0;
	pid_t pid;

	if (nsfd < 0)
		return;
	pid = fork();
	if (pid == 0) {
		if (setns(nsfd, CLONE_NEWNS) < 0)
			_exit(FAILED);
		_exit(unmount_here(v, lazy));
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid)
		log_outcome(v, status);
	close(nsfd);
}

void sfs_view_finish(struct sfs_view *v)
{
	if (v->thread_started)
		pthread_join(v->thread, NULL);
	v->thread_started = false;
	if (v->poke_started)
		pthread_join(v->poke, NULL);
	v->poke_started = false;
	sfs_fuse_io_detach(&v->fuse_io); /* its threads use the session */
	if (v->se)
		fuse_session_destroy(v->se);
	v->se = NULL;
}
