/* One program, three faces: strictfs (the command), mount.strictfs (mount(8)'s helper), and
 * the daemon it starts for a source (`strictfs __daemon`, internal; `strictfs __state-version`
 * says which handover state the binary reads, for an upgrade to check first; `strictfs
 * __uring-poke` is a successor's helper, fuse_uring.h). */
#include <libgen.h>
#include <string.h>

#include "cli.h"
#include "daemon.h"
#include "fuse_uring.h"

int main(int argc, char **argv)
{
	char *name = basename(argv[0]);

	/* whatever the name: a daemon started by the helper runs, and is upgraded from, the
	 * helper's binary (the helper itself never has fewer than two arguments) */
	if (argc == 2 && !strcmp(argv[1], "__state-version"))
		return sfs_daemon_state_version();
	/* mount(8) runs mount.strictfs for -t strictfs, mount.fuse.strictfs for a remount */
	if (!strncmp(name, "mount.", 6))
		return sfs_mount_helper_main(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "__uring-poke"))
		return sfs_fuse_uring_poke_main(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "__daemon"))
		return sfs_daemon_main(argc - 1, argv + 1);
	return sfs_cli_main(argc, argv);
}
