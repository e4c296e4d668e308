/* `strictfs status`: the CLI's table of the status document sfs_client_status gathers. */
#ifndef SFS_STATUS_PRINT_H
#define SFS_STATUS_PRINT_H

#include <json-c/json.h>

/* Prints the human table for a whole status document. */
void sfs_status_print(json_object *doc);

#endif
