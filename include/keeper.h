/* The keeper: what holds a daemon's views while no daemon runs (contract §6, "Failover"). A
 * child that shares the daemon's descriptor table (CLONE_FILES), so every descriptor the
 * daemon opens is also the keeper's, with no message per open: the /dev/fuse connections, the
 * backing mount, the open files, the control socket and the state (handover.h). When the
 * daemon ends without stopping it (a crash, SIGKILL, the OOM killer, or a handover for an
 * upgrade), the connections stay alive because the keeper still holds them, and the keeper
 * becomes the successor: it execs the installed binary, which inherits the whole table and
 * takes over.
 *
 * It is made first thing in the daemon's life, while the daemon is a fresh image, so its
 * copy of the memory stays small; it then only waits (poll on a pidfd), allocates nothing,
 * serves no request, ignores every signal but SIGKILL and asks to be the OOM killer's last
 * choice. */
#ifndef SFS_KEEPER_H
#define SFS_KEEPER_H

#include <stdbool.h>
#include <sys/types.h>

struct sfs_keeper {
	pid_t pid;      /* 0: none */
	int pidfd;      /* the keeper's: POLLIN when it has gone */
};

/* Starts a keeper for the calling daemon that, should the daemon end first, execs binary
 * with argv (kept by the caller for the process's life). A binary that is not the daemon's
 * own file must print state_version (sfs_ho_format_version) for `__state-version`, or the
 * keeper execs the daemon's own binary instead. argv[0] of the daemon's own argv (title,
 * "__daemon") reads "__keeper" in the keeper. Returns 0 or -errno. */
int sfs_keeper_start(struct sfs_keeper *k, const char *binary, const char *state_version,
                     char *const argv[], char *title);

/* Whether the keeper went (the control loop then starts another). Reaps it. */
bool sfs_keeper_gone(struct sfs_keeper *k);

/* Stops it, for an exit that must end the views with the daemon. */
void sfs_keeper_stop(struct sfs_keeper *k);

#endif
