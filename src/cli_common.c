/* What the strictfs commands share, strictfs quota's among them: the daemon that serves a
 * source or a view and one request to it, a view's source as the mount table names it, the
 * remount of a view, and the name of the option getopt refused. It calls no command, so that
 * quota_cli.c, to which cli.c dispatches, depends on nothing of cli.c. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "client.h"
#include "control.h"
#include "mountid.h"
#include "options.h"
#include "util.h"

#define ERRLEN 1024

const char *sfs_cli_bad_option(char **argv, char buf[3])
{
	const char *word = argv[optind > 0 ? optind - 1 : 0];

	/* a long option's optopt is 0 (unknown) or its value (an argument missing) */
	if (optopt <= 0 || optopt >= 127 || !strncmp(word, "--", 2))
		return word;
	buf[0] = '-';
	buf[1] = (char)optopt;
	buf[2] = '\0';
	return buf;
}

/* One request to the daemon of key. Returns 0 with the reply (to be freed), or -1 with the
 * one-line error: the daemon's refusal, or that it did not answer (naming object). */
int sfs_cli_call_daemon(const char *key, struct sfs_msg *req, struct sfs_msg *rep,
                        const char *object, char *err, size_t errlen)
{
	const char *rc, *msg;
	int r = sfs_client_call(key, req, rep);

	if (r) {
		sfs_errf(err, errlen, object, "the daemon did not answer: %s", strerror(-r));
		return -1;
	}
	rc = sfs_msg_get(rep, "rc");
	if (rc && !strcmp(rc, "0"))
		return 0;
	msg = sfs_msg_get(rep, "msg");
	if (msg)
		sfs_strlcpy(err, msg, errlen);
	else
		sfs_errf(err, errlen, object, "refused by the daemon");
	sfs_msg_free(rep);
	return -1;
}

int sfs_cli_running_key(const char *what, char *key, size_t keylen, char *err, size_t errlen)
{
	char path[PATH_MAX], src[PATH_MAX], real[PATH_MAX];
	bool is_file;
	int conn;

	if (realpath(what, real) && sfs_cli_view_source(real, src, sizeof(src)))
		what = src;
	if (sfs_source_key(what, key, keylen, path, sizeof(path), &is_file, err, errlen))
		return -1;
	if ((conn = sfs_client_connect(key)) < 0) {
		sfs_errf(err, errlen, what, "no strictfs daemon serves it (mount a view of it first)");
		return -1;
	}
	close(conn);
	return 0;
}

static int remount_call(const char *key, const char *mp, const char *options, bool check,
                        unsigned long flags[2], uint64_t *mnt_id, char *err, size_t errlen)
{
	struct sfs_msg req, rep;
	const char *fl;
	int ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC), r;

	sfs_msg_init(&req, SFS_REQ_REMOUNT);
	sfs_msg_add(&req, "mountpoint", mp);
	sfs_msg_add(&req, "options", options);
	sfs_msg_add(&req, "check", check ? "1" : "0");
	req.fds[0] = ns;
	req.nfds = ns >= 0;
	r = sfs_cli_call_daemon(key, &req, &rep, mp, err, errlen);
	sfs_msg_free(&req);
	if (ns >= 0)
		close(ns);
	if (r)
		return r;
	if ((fl = sfs_msg_get(&rep, "mount_flags")))
		flags[0] = strtoul(fl, NULL, 10);
	if ((fl = sfs_msg_get(&rep, "old_mount_flags")))
		flags[1] = strtoul(fl, NULL, 10);
	if ((fl = sfs_msg_get(&rep, "mnt_id")))
		*mnt_id = strtoull(fl, NULL, 10);
	sfs_msg_free(&rep);
	return 0;
}

/* The view's source as its mount table entry names it. */
bool sfs_cli_view_source(const char *mp, char *src, size_t len)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, mp, MNT_ITER_BACKWARD) : NULL;
	bool yes = fs && mnt_fs_get_fstype(fs) && !strcmp(mnt_fs_get_fstype(fs), "fuse.strictfs") &&
	           mnt_fs_get_source(fs);

	if (yes)
		sfs_strlcpy(src, mnt_fs_get_source(fs), len);
	mnt_unref_table(tb);
	return yes;
}

/* remount: the daemon validates the change (and refuses by name what cannot change live),
 * the kernel's per-mount flags change with mount_setattr, then the daemon applies it. Should
 * the daemon refuse at the last step (a file opened for writing meanwhile), the mount's flags
 * go back: a refused remount changes nothing. */
/* The view's mount (unique id mnt_id, found at mp through no symlink: mountid.h) gets the
 * per-mount flags of ms_flags; a path that leads elsewhere by now changes nothing. */
static int set_view_flags(const char *mp, uint64_t mnt_id, unsigned long ms_flags, char *err,
                          size_t errlen)
{
	struct mount_attr attr;
	int fd = sfs_mount_open_checked(mp, mnt_id), rc = 0;

	if (fd < 0) {
		sfs_errf(err, errlen, mp, "%s", fd == -ESTALE ? "no longer leads to the view it named "
		         "(a directory on the way was replaced); nothing changed" : strerror(-fd));
		return -1;
	}
	sfs_opts_mount_attr(ms_flags, &attr);
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		rc = -1;
		if (errno == EBUSY && (ms_flags & MS_RDONLY))
			sfs_errf(err, errlen, "ro", "files are open for writing through %s", mp);
		else
			sfs_errf(err, errlen, mp, "%s", strerror(errno));
	}
	close(fd);
	return rc;
}

int sfs_cli_remount(const char *mountpoint, const char *options)
{
	char err[ERRLEN] = "", mp[PATH_MAX], src[PATH_MAX], key[128], path[PATH_MAX];
	unsigned long flags[2] = {0, 0}; /* the view's mount flags after and before */
	uint64_t mnt_id = 0;
	bool is_file;

	if (!realpath(mountpoint, mp)) {
		sfs_errf(err, sizeof(err), mountpoint, "%s", strerror(errno));
		goto fail;
	}
	if (!sfs_cli_view_source(mp, src, sizeof(src))) {
		sfs_errf(err, sizeof(err), mp, "not a strictfs view");
		goto fail;
	}
	if (sfs_source_key(src, key, sizeof(key), path, sizeof(path), &is_file, err, sizeof(err)) ||
	    remount_call(key, mp, options, true, flags, &mnt_id, err, sizeof(err)) ||
	    set_view_flags(mp, mnt_id, flags[0], err, sizeof(err)))
		goto fail;
	if (remount_call(key, mp, options, false, flags, &mnt_id, err, sizeof(err))) {
		set_view_flags(mp, mnt_id, flags[1], NULL, 0);
		goto fail;
	}
	return 0;
fail:
	sfs_err_print(err);
	return -1;
}
