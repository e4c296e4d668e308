/* `strictfs status`: the daemon's half builds one JSON object per daemon (contract §2); the CLI
 * gathers them into {"version": 1, "daemons": [...]} (client.h) and prints the table
 * (status_print.h). */
#ifndef SFS_STATUS_H
#define SFS_STATUS_H

#include <json-c/json.h>

struct sfs_daemon;

json_object *sfs_status_daemon(struct sfs_daemon *d);

#endif
