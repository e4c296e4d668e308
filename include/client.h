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

/* Sends req and receives the reply on a fresh connection to the daemon of key. */
int sfs_client_call(const char *key, struct sfs_msg *req, struct sfs_msg *reply);

/* Starts the daemon of a source and waits until it is ready. On success *pid is its pid;
 * on failure err holds the daemon's one-line reason. */
int sfs_client_start_daemon(const char *key, const char *source, bool is_file,
                            const char *options, pid_t *pid, char *err, size_t errlen);

/* {"version": 1, "daemons": [...]} from every daemon answering under /run/strictfs. */
json_object *sfs_client_status(void);

/* Waits until pid has exited, at most ms milliseconds; true if it did. */
bool sfs_wait_pid_gone(pid_t pid, int ms);

#endif
