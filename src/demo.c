/* strictfs demo: the seed scenario end to end (contract §8), as a shell script run with the real
 * tools, so what it shows is what a user would type. Everything it makes is under one
 * temporary directory and removed by its trap. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

static const char script[] =
"set -u\n"
"S=\"$1\"\n"
"T=$(mktemp -d /tmp/strictfs-demo.XXXXXX)\n"
"LOOP=\n"
"cleanup() {\n"
"  for m in \"$T/a\" \"$T/b\"; do mountpoint -q \"$m\" 2>/dev/null && \"$S\" umount \"$m\"; done\n"
"  for m in \"$T/k1\" \"$T/k2\"; do mountpoint -q \"$m\" 2>/dev/null && umount \"$m\"; done\n"
"  [ -n \"$LOOP\" ] && losetup -d \"$LOOP\" 2>/dev/null\n"
"  rm -rf \"$T\"\n"
"}\n"
"trap cleanup EXIT\n"
"say() { printf '\\n== %s\\n' \"$*\"; }\n"
"run() { printf '$ %s\\n' \"$*\"; \"$@\" 2>&1 | sed 's/^/  /'; return ${PIPESTATUS[0]}; }\n"
"mkdir -p \"$T/a\" \"$T/b\" \"$T/k1\" \"$T/k2\"\n"
"truncate -s 256M \"$T/disk.img\" && mkfs.ext4 -q -F -b 4096 \"$T/disk.img\" || exit 1\n"
"LOOP=$(losetup -f --show \"$T/disk.img\") || exit 1\n"
"say \"The kernel alone, on $LOOP: a second mount with other options silently gets the first's\"\n"
"run mount -o noacl \"$LOOP\" \"$T/k1\"\n"
"run mount -o nodelalloc \"$LOOP\" \"$T/k1\"\n"
"run mount -o delalloc \"$LOOP\" \"$T/k2\"\n"
"run findmnt -n -o TARGET,OPTIONS \"$T/k1\"\n"
"run findmnt -n -o TARGET,OPTIONS \"$T/k2\"\n"
"echo '  (asked for delalloc on k2, got nodelalloc; and ext4 has no noacl at all)'\n"
"umount \"$T/k2\"; umount \"$T/k1\"\n"
"say 'strictfs: one daemon, one backing, two views that each honour their options'\n"
"run \"$S\" mount -o noacl,nouser_xattr \"$LOOP\" \"$T/a\" || exit 1\n"
"run \"$S\" mount -o acl,user_xattr \"$LOOP\" \"$T/b\" || exit 1\n"
"run touch \"$T/a/file\"\n"
"say 'In the noacl,nouser_xattr view'\n"
"run setfacl -m u:nobody:r \"$T/a/file\"\n"
"run setfattr -n user.colour -v blue \"$T/a/file\"\n"
"run getfattr --absolute-names -d -m - \"$T/a/file\"\n"
"say 'In the acl,user_xattr view, the same file'\n"
"run setfacl -m u:nobody:r \"$T/b/file\"\n"
"run setfattr -n user.colour -v blue \"$T/b/file\"\n"
"run getfacl -p \"$T/b/file\"\n"
"run getfattr --absolute-names -d -m - \"$T/b/file\"\n"
"say 'Status'\n"
"run \"$S\" status \"$LOOP\"\n"
"say 'Tear down: the last view ends the daemon and frees the device'\n"
"run \"$S\" umount \"$T/a\"\n"
"run \"$S\" umount \"$T/b\"\n"
"run mount \"$LOOP\" \"$T/k1\" && echo '  (a plain mount of the device works again)' && umount \"$T/k1\"\n"
"exit 0\n";

int sfs_demo(const char *self)
{
	char exe[PATH_MAX];
	ssize_t n = readlink(self, exe, sizeof(exe) - 1);

	if (n < 0) {
		perror("strictfs: demo");
		return SFS_EXIT_FAIL;
	}
	exe[n] = '\0';
	execl("/bin/bash", "bash", "-c", script, "strictfs-demo", exe, (char *)NULL);
	perror("strictfs: demo: /bin/bash");
	return SFS_EXIT_FAIL;
}
