/* One daemon per source: it owns the backing, the inode table, the descriptor cache and the
 * registry of views, and answers the control socket (contract §6). */
#ifndef SFS_DAEMON_H
#define SFS_DAEMON_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "backing.h"
#include "handover.h"
#include "keeper.h"
#include "openfiles.h"
#include "options.h"
#include "registry.h"
#include "services.h"
#include "view.h"

/* Control connections served at once, each by its own thread; more wait in the backlog. */
#define SFS_MAX_CONNS 64

/* A control connection being served, and when the watchdog cuts it off (0: never). */
struct sfs_conn {
	int fd;                          /* -1: a free slot */
	long long deadline_ms;           /* CLOCK_MONOTONIC */
};

struct sfs_daemon {
	char key[64];
	char source[PATH_MAX];
	bool source_is_file;
	struct sfs_backing backing;
	struct sfs_services svc;         /* what the views share (services.h) */
	struct sfs_registry views;       /* the views served (registry.h); svc.views points here */
	size_t itab_peak;                /* most nodes since memory was last given back */
	struct sfs_opts in_force;        /* first view's options: superblock-only and share */
	time_t started;
	int listen_fd;
	int event_fd;                    /* wakes the control loop: a view ended, a signal came */
	int lock_fd;
	int handle_fd;                   /* the backing root opened O_RDONLY: open_by_handle_at's mount fd */
	size_t fd_limit;
	atomic_bool stopping;
	int mountinfo_fd;                /* POLLPRI when the mount table changes */
	char shared_with[1024];          /* native mounts of the backing device, comma list */
	/* The control loop and the connection threads take turns under control_lock: views[]
	 * changes, the registry, shared_with and everything a request reads or changes. A connection's
	 * thread reads its request and sends its reply without it, so a stalled client holds up
	 * no one; the loop's watchdog shuts a connection down past its deadline. */
	pthread_mutex_t control_lock;
	pthread_mutex_t conns_lock;      /* conns[], nconns (lock order: doc/design.md, "Locks") */
	pthread_cond_t conns_idle;       /* nconns dropped */
	struct sfs_conn conns[SFS_MAX_CONNS];
	int nconns;
	bool closing;                    /* under control_lock: the loop has ended */
	/* Views that outlive the daemon (contract §6, "Failover"): the state a successor takes
	 * over, the keeper that starts it, and what the keeper execs. */
	struct sfs_handover ho;
	struct sfs_openfiles files;      /* its records are in ho's memory */
	struct sfs_keeper keeper;
	char binary[PATH_MAX];
	char state_arg[16];
	char *keeper_argv[9];
	char *title;                     /* our argv "__daemon", which the keeper retitles */
	bool handed_over;                /* the views are the successor's: exit once the reply is sent */
};

/* `strictfs __daemon KEY SOURCE FILE? OPTIONS READY_FD`: the daemon's entry point; a
 * successor is `strictfs __daemon KEY SOURCE FILE? - -1 STATE_FD` (keeper.h). */
int sfs_daemon_main(int argc, char **argv);

/* `strictfs __state-version`: prints the version and layout of the handover state this binary
 * reads (handover.h). */
int sfs_daemon_state_version(void);

/* Tells the control loop that something changed (a view ended). */
void sfs_daemon_wake(struct sfs_daemon *d);

#endif
