/* The strictfs command and the mount.strictfs helper (util-linux conventions). */
#ifndef SFS_CLI_H
#define SFS_CLI_H

#include <stdbool.h>

/* Exit statuses of strictfs (SPEC §2). */
#define SFS_EXIT_OK 0
#define SFS_EXIT_FAIL 1
#define SFS_EXIT_USAGE 2

int sfs_cli_main(int argc, char **argv);
int sfs_mount_helper_main(int argc, char **argv);
int sfs_demo(const char *self);

/* Adds a view; returns 0 or -1 with the one-line error already printed. */
int sfs_cli_mount(const char *source, const char *mountpoint, const char *options, bool verbose);

#endif
