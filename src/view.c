/* One view: its FUSE session, the thread serving it, and its removal in its own mount
 * namespace. The mount itself was made by the requesting strictfs process (contract §6); the
 * session adopts the /dev/fuse descriptor it sent. */
#include "view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "services.h"

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
	v->negative_timeout = v->opts.casefold != SFS_CASEFOLD_OFF ? 0 : v->entry_timeout;
	v->keep_cache = sole_writer;
}

struct sfs_node *sfs_node_of(const struct sfs_view *v, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? v->root : sfs_itab_find_id(&v->svc->itab, ino);
}

fuse_ino_t sfs_ino_of(const struct sfs_view *v, const struct sfs_node *n)
{
	return n == v->root ? FUSE_ROOT_ID : n->id;
}

struct sfs_fuse_io *sfs_view_fuse_io(void *view)
{
	return &((struct sfs_view *)view)->fuse_io;
}

int sfs_view_start(struct sfs_view *v, int fuse_fd)
{
	char *argv[] = {"strictfs", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	int rc;

	pthread_mutex_init(&v->files_lock, NULL);
	sfs_list_init(&v->files);
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
	rc = pthread_create(&v->thread, NULL, serve, v);
	if (rc) {
		fuse_session_destroy(v->se);
		v->se = NULL;
		return -rc;
	}
	v->thread_started = true;
	return 0;
}

/* A process living in the view's mount namespace, found by the namespace's identity; its
 * namespace file, opened. -1 when no process lives there any more (the namespace, and the
 * view with it, are then gone). */
static int open_namespace_of(const struct sfs_view *v)
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
		if (stat(path, &st) == 0 && st.st_ino == v->ns_ino && st.st_dev == v->ns_dev)
			fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (proc)
		closedir(proc);
	return fd;
}

/* A child enters the view's mount namespace and unmounts it there: the daemon itself stays
 * in its own namespace, and setns is per process for a threaded one. */
void sfs_view_unmount(const struct sfs_view *v)
{
	int nsfd = open_namespace_of(v);
	pid_t pid;

	if (nsfd < 0)
		return;
	pid = fork();
	if (pid == 0) {
		if (setns(nsfd, CLONE_NEWNS) < 0)
			_exit(1);
		if (umount2(v->mountpoint, UMOUNT_NOFOLLOW) < 0 &&
		    umount2(v->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			_exit(1);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	close(nsfd);
}

void sfs_view_finish(struct sfs_view *v)
{
	if (v->thread_started)
		pthread_join(v->thread, NULL);
	v->thread_started = false;
	sfs_fuse_io_detach(&v->fuse_io); /* its threads use the session */
	if (v->se)
		fuse_session_destroy(v->se);
	v->se = NULL;
}
