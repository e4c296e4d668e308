/* mount.strictfs: what mount(8) runs for `-t strictfs` and fstab lines. The helper argv is
 * SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS] [-N NS]; exit codes are util-linux's MNT_EX_*.
 * -s (sloppy) is accepted but changes nothing: an option strictfs cannot honour is always
 * refused. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "util.h"

#define MNT_EX_SUCCESS 0
#define MNT_EX_USAGE 1
#define MNT_EX_SYSERR 2
#define MNT_EX_FAIL 32

int sfs_mount_helper_main(int argc, char **argv)
{
	char options[SFS_OPTSTR_MAX] = "", err[512];
	const char *ns = NULL;
	bool verbose = false, fake = false;
	int c;

	if (argc < 3) {
		fprintf(stderr, "Usage: mount.strictfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]\n");
		return MNT_EX_USAGE;
	}
	optind = 3;
	while ((c = getopt(argc, argv, "sfnvo:t:N:")) != -1) {
		switch (c) {
		case 'o':
			if (sfs_opts_join(options, optarg, err, sizeof(err))) {
				sfs_err_print(err);
				return MNT_EX_USAGE;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'f':
			fake = true;
			break;
		case 'N':
			/* mount -N: util-linux runs its helper in the original namespace and names
			 * the target as /proc/PID/fd/N */
			ns = optarg;
			break;
		case 's':
		case 'n':
		case 't':
			break;
		default:
			fprintf(stderr, "Usage: mount.strictfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]\n");
			return MNT_EX_USAGE;
		}
	}
	if (geteuid() != 0) {
		sfs_err_printf("strictfs: %s: must be run as root", argv[2]);
		return MNT_EX_USAGE;
	}
	if (fake)
		return MNT_EX_SUCCESS;
	return sfs_cli_mount_ns(argv[1], argv[2], options, verbose, ns) ? MNT_EX_FAIL
	                                                                 : MNT_EX_SUCCESS;
}
