/* Stepping into a container's mount namespace and back (see mntns.h). The source, the lock
 * and the control socket are reached from this namespace; only the mountpoint is resolved and
 * the view mounted in the target's, as util-linux mount -N does. */
#include "mntns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util.h"

int sfs_mntns_open(struct sfs_mntns *ns, const char *spec, char *err, size_t errlen)
{
	char object[300], path[PATH_MAX];
	unsigned long long pid;
	int type;

	ns->target = ns->orig = ns->cwd = -1;
	snprintf(object, sizeof(object), "--namespace %s", spec);
	if (sfs_parse_uint(spec, &pid)) {
		if (pid == 0 || pid > 4194304) {
			sfs_errf(err, errlen, object, "not a process id");
			return -1;
		}
		snprintf(path, sizeof(path), "/proc/%llu/ns/mnt", pid);
	} else if (spec[0] == '/') {
		sfs_strlcpy(path, spec, sizeof(path));
	} else {
		sfs_errf(err, errlen, object, "not a PID or a namespace file");
		return -1;
	}
	ns->target = open(path, O_RDONLY | O_CLOEXEC);
	if (ns->target < 0) {
		int e = errno;
		sfs_errf(err, errlen, object, "%s",
		         e == ENOENT && spec[0] != '/' ? "no such process" : strerror(e));
		return -1;
	}
	type = ioctl(ns->target, NS_GET_NSTYPE);
	if (type != CLONE_NEWNS) {
		sfs_errf(err, errlen, object, "not a mount namespace");
		goto fail;
	}
	ns->orig = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	ns->cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ns->orig < 0 || ns->cwd < 0) {
		sfs_errf(err, errlen, object, "cannot keep the way back: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	sfs_mntns_close(ns);
	return -1;
}

int sfs_mntns_enter(struct sfs_mntns *ns, char *err, size_t errlen)
{
	if (ns->target < 0)
		return 0;
	if (setns(ns->target, CLONE_NEWNS) < 0) {
		sfs_errf(err, errlen, "--namespace", "cannot enter the mount namespace: %s",
		         strerror(errno));
		return -1;
	}
	return 0;
}

int sfs_mntns_leave(struct sfs_mntns *ns, char *err, size_t errlen)
{
	if (ns->target < 0)
		return 0;
	if (setns(ns->orig, CLONE_NEWNS) < 0 || fchdir(ns->cwd) < 0) {
		sfs_errf(err, errlen, "--namespace", "cannot return to the own mount namespace: %s",
		         strerror(errno));
		return -1;
	}
	return 0;
}

void sfs_mntns_close(struct sfs_mntns *ns)
{
	if (ns->target >= 0)
		close(ns->target);
	if (ns->orig >= 0)
		close(ns->orig);
	if (ns->cwd >= 0)
		close(ns->cwd);
	ns->target = ns->orig = ns->cwd = -1;
}
