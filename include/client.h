/* The CLI's half of the control protocol: finding, starting and asking daemons. */
#ifndef SFS_CLIENT_H
#define SFS_CLIENT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "control.h"

/* Connects to the daemon of key; -errno (-ENOENT / -ECONNREFUSED: none running). */
int sfs_client_connect(const char *key);

/* Connects to the daemon of key, as sfs_client_connect. When the connection fails but a daemon
 * for key is running (its socket was removed: it makes it again within seconds), waits for it
 * rather than let a second daemon start. -ESRCH: no daemon runs for key; another -errno: one
 * runs but does not answer, and err names it (object: source). */
int sfs_client_connect_running(const char *key, const char *source, char *err, size_t errlen);

/* Sends req and receives the reply on a fresh connection to the daemon of key. */
int sfs_client_call(const char *key, struct sfs_msg *req, struct sfs_msg *reply);

/* Starts the daemon of a source and waits until it is ready. On success *pid is its pid;
 * on failure err holds the daemon's one-line reason. */
int sfs_client_start_daemon(const char *key, const char *source, bool is_file,
                            const char *options, pid_t *pid, char *err, size_t errlen);

/* {"version": 1, "daemons": [...]} from every daemon answering under /run/strictfs. A running
 * daemon whose socket is missing is waited for a few seconds, then named on stderr. */
json_object *sfs_client_status(void);

/* Waits until pid has exited, at most ms milliseconds; true if it did. */
bool sfs_wait_pid_gone(pid_t pid, int ms);

#endif
