/* The daemon's private header: what its four files share. daemon.c is the daemon's life (its
 * services, the control loop, the end), daemon_views.c adds, remounts and drops views,
 * daemon_control.c serves the control socket, and daemon_takeover.c hands the views to a
 * successor and takes them over in it. */
#ifndef SFS_DAEMON_INT_H
#define SFS_DAEMON_INT_H

#include "daemon.h"

struct sfs_msg;

/* Room for a one-line error, which a refused command prints or the log gets. */
#define ERRLEN 1024

/* ---- daemon.c: the daemon's life ------------------------------------------------------- */

/* Services never see the daemon (doc/design.md): a view that ended and the quota ledger wake
 * the control loop through this hook. */
void daemon_wake_cb(void *d);
/* Notices a native mount of the backing device, and its end: the views' caches are trusted
 * only while the daemon is the backing's only writer. */
void check_shared(struct sfs_daemon *d);
/* The tables and threads the views share, for a new daemon and a successor alike: 0, or -1
 * with err set. */
int start_services(struct sfs_daemon *d, char *err, size_t errlen);

/* ---- daemon_views.c: adding, remounting and dropping views ----------------------------- */

/* A view's root node, subdir resolved beneath the backing root, never through a symlink:
 * pinned in *out, or -errno. */
int open_view_root(struct sfs_daemon *d, const char *subdir, struct sfs_node **out,
                   char *err, size_t errlen);
/* -EIO with err set when the daemon kept crashing: nothing new is served, not even handed
 * over. */
int refuse_when_failed(struct sfs_daemon *d, char *err, size_t errlen);
/* The view's own clone of the backing, with its profile's flags: 0 or -errno. */
int make_clone(struct sfs_daemon *d, struct sfs_view *v, char *err, size_t errlen);
/* Keeps the usage of the view's subdir apart when its options limit it: 0 or -errno. */
int track_view_tree(struct sfs_daemon *d, struct sfs_view *v, const struct sfs_opts *o,
                    char *err, size_t errlen);
/* Logs a view's change with the options it asked for and every option in force, so that the
 * log says what the view does. */
void log_view(const struct sfs_daemon *d, const char *what, const struct sfs_view *v);
/* Fills in what every view gets before its session starts, a new one or one taken over. */
void prepare_view(struct sfs_daemon *d, struct sfs_view *v, uint32_t slot, const char *mp,
                  const char *src);
/* Frees a view made but never started, which holds only its profile and its clone. */
void free_unstarted_view(struct sfs_view *v);
/* The add-view request: the view is served, or refused by name (0 or -errno, err set). */
int add_view(struct sfs_daemon *d, struct sfs_msg *req, char *err, size_t errlen);
/* The remount request: the view's options change in place, or nothing changes. */
int remount_view(struct sfs_daemon *d, struct sfs_msg *req, unsigned long *flags,
                 unsigned long *old_flags, uint64_t *mnt_id, char *err, size_t errlen);
/* Drops the views whose session has ended, with everything they held. */
void reap_ended_views(struct sfs_daemon *d);

/* ---- daemon_control.c: the control server ---------------------------------------------- */

/* CLOCK_MONOTONIC in ms: the connections' deadlines and the loop's checks go by it. */
long long now_ms(void);
/* Serves a connection waiting on the listening socket, on a thread of its own. */
void accept_one(struct sfs_daemon *d);
/* Cuts off the connections past their deadline (all of them if all); returns how many are
 * being served, so that the loop stops listening when there is no slot left. */
int conns_watchdog(struct sfs_daemon *d, bool all);
/* Once the loop has ended: cuts off the connections still served and waits for them. */
void conns_drain(struct sfs_daemon *d);

/* ---- daemon_takeover.c: views that outlive the daemon ---------------------------------- */

/* The upgrade request: the views go to the successor at a request boundary, and the process
 * ends once the reply is sent (0), or they stay (-errno, err set). */
int hand_over(struct sfs_daemon *d, char *err, size_t errlen);
/* Opens the daemon's log, at its start and again in a successor. */
void open_log(void);
/* The crash limit a first daemon writes into the state: STRICTFS_CRASH_LIMIT, or 5. */
uint32_t crash_limit_of_environment(void);
/* Writes what a successor needs of the daemon into the state; optstr NULL keeps the recorded
 * options. */
void record_daemon(struct sfs_daemon *d, const char *optstr);
/* Starts the keeper that execs a successor when this daemon ends: 0, or -errno (the views
 * then end with the daemon). */
int start_keeper(struct sfs_daemon *d);
/* A successor: the predecessor's state taken, checked, and everything it served served
 * again. 0, or -1 with err set. */
int take_over(struct sfs_daemon *d, int state_fd, char *err, size_t errlen);

#endif
