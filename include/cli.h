/* The strictfs command and the mount.strictfs helper (util-linux conventions). */
#ifndef SFS_CLI_H
#define SFS_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* Exit statuses of strictfs (contract §2). */
#define SFS_EXIT_OK 0
#define SFS_EXIT_FAIL 1
#define SFS_EXIT_USAGE 2

int sfs_cli_main(int argc, char **argv);
int sfs_mount_helper_main(int argc, char **argv);
int sfs_demo(const char *self);

/* The option getopt refused (or found without its argument), for the usage line: "-x" for a
 * short one (written into buf), the word as given for a long one. getopt's own message is off (opterr = 0): it would echo
 * an option of any length and any bytes, where ours goes through sfs_err_printf. */
const char *sfs_cli_bad_option(char **argv, char buf[3]);

/* Adds a view; returns 0 or -1 with the one-line error already printed. */
int sfs_cli_mount(const char *source, const char *mountpoint, const char *options, bool verbose);
/* `mount -o remount,OPTIONS MOUNTPOINT`: 0 or -1 with the error printed. */
int sfs_cli_remount(const char *mountpoint, const char *options);
/* `strictfs quota ...` (quota_cli.c). */
int sfs_cli_quota(int argc, char **argv);
/* The source a strictfs view's mount table entry names. */
bool sfs_cli_view_source(const char *mp, char *src, size_t len);
/* The key of the daemon serving what (a source, or a view's mountpoint): 0, or -1 with the
 * one-line error in err when no daemon serves it. */
int sfs_cli_running_key(const char *what, char *key, size_t keylen, char *err, size_t errlen);
struct sfs_msg;
/* One request to the daemon of key: 0, or -1 with its one-line refusal in err (the reply is
 * then freed). */
int sfs_cli_call_daemon(const char *key, struct sfs_msg *req, struct sfs_msg *rep,
                        const char *object, char *err, size_t errlen);

/* As sfs_cli_mount, with the view mounted in the mount namespace ns_spec names (a PID or a
 * namespace file; NULL: this process's own). */
int sfs_cli_mount_ns(const char *source, const char *mountpoint, const char *options, bool verbose,
                     const char *ns_spec);

#endif
