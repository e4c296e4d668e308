/* One daemon per source (contract §6): sets up the backing and the services its views share,
 * runs the control loop, and ends when the last view is gone or on SIGTERM. The control loop
 * is one thread, each control connection has its own (they take turns under control_lock:
 * daemon_control.c), and each view's session has its own threads (view.c). Views are added,
 * remounted and dropped in daemon_views.c; a successor takes them over in daemon_takeover.c. */
#include "daemon_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <libmount.h>

#include "coherence.h"
#include "control.h"
#include "locks.h"
#include "names.h"
#include "util.h"

#define SHUTDOWN_WAIT_MS 5000
#define NAMESPACE_CHECK_MS 2000
#define WATCHDOG_MS 100

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

void daemon_wake_cb(void *d)
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
		.wake = daemon_wake_cb, .wake_arg = d,
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

static void wait_views_ended(struct sfs_daemon *d, int ms)
{
	struct sfs_view *v;

	for (int waited = 0; waited < ms; waited += 50) {
		bool all = true;
		sfs_for_each_view(&d->views, v)
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

	sfs_for_each_view(&d->views, v)
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
	return sfs_registry_count(&d->views) == 0 && conns == 0 && flock(d->lock_fd, LOCK_EX | LOCK_NB) == 0;
}

/* The kernel checks exclusivity only when the backing is created: root can still mount the
 * device natively and share the superblock (doc/kernel.md §2). Such a mount is noticed, logged
 * and shown; the daemon is then not the only writer, so views stop trusting their caches. */
void check_shared(struct sfs_daemon *d)
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
	sfs_registry_read_lock(&d->views);
	sfs_for_each_view(&d->views, v)
		sfs_view_set_caching(v, !*now && d->backing.mode == SFS_SHARE_EXCLUSIVE);
	sfs_registry_read_unlock(&d->views);
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
	sfs_for_each_view(&d->views, v) {
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

static void control_loop(struct sfs_daemon *d)
{
	long long last_check = 0;
	bool done = false;

	while (!done) {
		int busy = conns_watchdog(d, false);
		struct pollfd pf[4] = {{busy < SFS_MAX_CONNS ? d->listen_fd : -1, POLLIN, 0},
		                       {d->event_fd, POLLIN, 0}, {d->mountinfo_fd, POLLPRI, 0},
		                       {d->keeper.pidfd, POLLIN, 0}};
		int timeout = busy ? WATCHDOG_MS : sfs_registry_count(&d->views) ? NAMESPACE_CHECK_MS : 200;
		bool wait_source = false;
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
		if (sfs_registry_count(&d->views) && now - last_check >= NAMESPACE_CHECK_MS) {
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
			wait_source = sfs_registry_count(&d->views) == 0;
			done = true;
		} else {
			if (pf[0].revents & POLLIN)
				accept_one(d);
			keep_control_paths(d);
			done = may_exit(d);
		}
		d->closing = done;
		pthread_mutex_unlock(&d->control_lock);
		/* outside control_lock: a command holding the source lock waits for an answer that
		 * is given under it, "shutting down" now (doc/design.md, "Locks") */
		if (wait_source)
			flock(d->lock_fd, LOCK_EX);
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
int start_services(struct sfs_daemon *d, char *err, size_t errlen)
{
	struct sfs_node *root;
	struct stat st;
	pthread_t sig;
	int fd, rc;

	const struct sfs_itab_hooks node_hooks = {
		.created = node_created, .freed = sfs_names_node_freed, .arg = &d->svc,
		.fds = &sfs_fdcache_fds};

	if (sfs_itab_init(&d->svc.itab, &node_hooks)) {
		sfs_errf(err, errlen, d->source, "out of memory");
		return -1;
	}
	d->svc.itab.ho = d->svc.ho = &d->ho;
	d->svc.files = &d->files;
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
	if (sfs_locks_init(&d->svc.locks, &d->files)) {
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

static void teardown(struct sfs_daemon *d)
{
	char path[PATH_MAX];

	sfs_keeper_stop(&d->keeper); /* the views end with this daemon now */
	if (d->listen_fd >= 0) {
		sfs_socket_path(d->key, path, sizeof(path));
		unlink(path);
		close(d->listen_fd);
	}
	if (sfs_registry_count(&d->views)) {
		/* views unmounted lazily while files in them are open keep serving until this
		 * process ends; their threads use the tables, so nothing is freed under them. The
		 * exit ends their connections (callers get ECONNABORTED) and releases the backing. */
		sfs_quota_flush(&d->svc.quota);
		syslog(LOG_WARNING, "%s: %zu view(s) still in use after unmounting; their open "
		       "files fail as the daemon exits", d->source, sfs_registry_count(&d->views));
		return;
	}
	sfs_quota_stop(&d->svc.quota);
	sfs_coh_stop(&d->svc);
	sfs_locks_destroy(d->svc.locks);
	sfs_names_destroy(&d->svc);
	if (sfs_htab_ready(&d->svc.itab.nodes))
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
	/* One malloc arena for every thread, so that give_back_forgotten_nodes can give it all
	 * back: malloc_trim shrinks only the main arena's top, and a node freed into a worker's
	 * own arena stayed resident there by megabytes (t_walk.sh). */
	mallopt(M_ARENA_MAX, 1);
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
	sfs_registry_init(&d->views);
	d->svc.views = &d->views;
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
		if ((rc = sfs_ho_create(&d->ho)) ||
		    (rc = sfs_openfiles_init(&d->files, sfs_ho_files_memory(&d->ho))))
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
