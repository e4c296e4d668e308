/* `strictfs status`: the daemon's half builds one JSON object per daemon (contract §2); the CLI
 * gathers them into {"version": 1, "daemons": [...]} and prints the table. */
#ifndef SFS_STATUS_H
#define SFS_STATUS_H

#include <json-c/json.h>

struct sfs_daemon;

#define SFS_STATUS_VERSION 1

json_object *sfs_status_daemon(struct sfs_daemon *d);

/* Prints the human table for a whole status document. */
void sfs_status_print(json_object *doc);

#endif
