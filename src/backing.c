/* The backing (see backing.h): loop attach, the exclusive detached mount with the new mount
 * API, share=existing clones, and reading the effective options back from the kernel. */
#include "backing.h"

#include <blkid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <linux/loop.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util.h"

/* Debian 12's headers stop at FSCONFIG_CMD_RECONFIGURE; the kernel has had this since 6.6. */
#ifndef FSCONFIG_CMD_CREATE_EXCL
#define FSCONFIG_CMD_CREATE_EXCL 8
#endif

/* ext4 settings that the kernel does not show in the mount's options because they are its
 * defaults: asking for them is satisfied when they are absent from the read-back. */
static const char *const hidden_defaults[] = {
	"data=ordered", "barrier", "barrier=1", "delalloc", "auto_da_alloc", "nodiscard",
	"nolazytime", "dioread_nolock", "nogrpid", "sysvgroups", "init_itable",
	"journal_checksum", "block_validity", "noblock_validity", "errors=continue",
};

bool sfs_backing_find_mount(dev_t rdev, char *where, size_t len, char *opts, size_t optslen)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	bool found = false;

	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *root = mnt_fs_get_root(fs);
		if (mnt_fs_get_devno(fs) != rdev)
			continue;
		/* prefer a mount of the filesystem's root over a bind mount of a subtree */
		if (found && !(root && !strcmp(root, "/")))
			continue;
		sfs_strlcpy(where, mnt_fs_get_target(fs), len);
		if (opts)
			sfs_strlcpy(opts, mnt_fs_get_fs_options(fs) ? mnt_fs_get_fs_options(fs) : "",
			            optslen);
		found = true;
		if (root && !strcmp(root, "/"))
			break;
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return found;
}

/* An image already attached (losetup) is reused, as mount(8) does; otherwise a free loop
 * device is configured with autoclear, so it goes when the last user closes it. */
static int find_loop_of(const struct stat *img, char *dev, size_t len)
{
	DIR *dir = opendir("/sys/block");
	struct dirent *de;
	int found = -1;

	while (dir && (de = readdir(dir))) {
		struct loop_info64 info;
		char path[300];
		int fd;
		if (strncmp(de->d_name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && info.lo_device == img->st_dev &&
		    info.lo_inode == img->st_ino && info.lo_offset == 0 && info.lo_sizelimit == 0) {
			sfs_strlcpy(dev, path, len);
			found = fd;
			break;
		}
		close(fd);
	}
	if (dir)
		closedir(dir);
	return found;
}

static int loop_attach(struct sfs_backing *b, const char *file, char *err, size_t errlen)
{
	struct loop_config cfg;
	struct stat st;
	int ctl = -1, ffd, lfd = -1;
	bool ro = false;

	ffd = open(file, O_RDWR | O_CLOEXEC);
	if (ffd < 0 && (errno == EROFS || errno == EACCES)) {
		ro = true;
		ffd = open(file, O_RDONLY | O_CLOEXEC);
	}
	if (ffd < 0 || fstat(ffd, &st) < 0) {
		sfs_errf(err, errlen, file, "%s", strerror(errno));
		goto fail;
	}
	lfd = find_loop_of(&st, b->device, sizeof(b->device));
	if (lfd >= 0) {
		close(ffd);
		b->loop_fd = lfd;
		b->loop_attached = false;
		return 0;
	}
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		sfs_errf(err, errlen, "/dev/loop-control", "%s", strerror(errno));
		goto fail;
	}
	for (int tries = 0; tries < 32; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			sfs_errf(err, errlen, "/dev/loop-control", "no free loop device: %s",
			         strerror(errno));
			goto fail;
		}
		snprintf(b->device, sizeof(b->device), "/dev/loop%d", n);
		lfd = open(b->device, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			continue;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = ffd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (ro ? LO_FLAGS_READ_ONLY : 0);
		snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", file);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			close(ffd);
			b->loop_fd = lfd;
			b->loop_attached = true;
			return 0;
		}
		close(lfd);
		lfd = -1;
		if (errno != EBUSY) {
			sfs_errf(err, errlen, b->device, "cannot attach %s: %s", file, strerror(errno));
			goto fail;
		}
	}
	sfs_errf(err, errlen, file, "no loop device could be attached");
fail:
	if (ctl >= 0)
		close(ctl);
	if (ffd >= 0)
		close(ffd);
	return -EIO;
}

/* The kernel's reason for a failed fsconfig, from the fs context's message queue. */
static void kernel_reason(int fsfd, char *buf, size_t len)
{
	char line[512];
	ssize_t n;

	buf[0] = '\0';
	while ((n = read(fsfd, line, sizeof(line) - 1)) > 0) {
		line[n] = '\0';
		if (line[0] == 'e' || line[0] == 'w')
			snprintf(buf, len, "%s", line + 2);
	}
}

static int set_sb_options(int fsfd, const struct sfs_opts *o, char *err, size_t errlen)
{
	for (int i = 0; i < o->n_sb; i++) {
		char text[96], reason[512];
		char *eq;
		int rc;
		sfs_strlcpy(text, o->sb[i].text, sizeof(text));
		eq = strchr(text, '=');
		if (eq) {
			*eq = '\0';
			rc = fsconfig(fsfd, FSCONFIG_SET_STRING, text, eq + 1, 0);
		} else {
			rc = fsconfig(fsfd, FSCONFIG_SET_FLAG, text, NULL, 0);
		}
		if (rc < 0) {
			int e = errno;
			kernel_reason(fsfd, reason, sizeof(reason));
			sfs_errf(err, errlen, o->sb[i].text, "refused by ext4: %s",
			         *reason ? reason : strerror(e));
			return -e;
		}
	}
	return 0;
}

/* Whether the device offers DAX (sysfs: its queue's dax, a partition's on its disk); false
 * when it cannot be told. */
static bool device_has_dax(dev_t rdev)
{
	static const char *const where[] = {"queue/dax", "../queue/dax"};
	char path[80], v[2] = "";

	for (size_t i = 0; i < ARRAY_SIZE(where); i++) {
		int fd;
		ssize_t n;
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s", major(rdev), minor(rdev),
		         where[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(fd, v, 1);
		close(fd);
		return n == 1 && v[0] == '1';
	}
	return false;
}

/* dax (dax=always) asked for on a device without DAX: ext4 refuses the mount with EINVAL and
 * says why only in the kernel log, so the refusal would name the device, not the option. */
static const struct sfs_sb_opt *dax_refused(const struct sfs_backing *b, const struct sfs_opts *o)
{
	for (int i = 0; i < o->n_sb; i++)
		if (!strcmp(o->sb[i].key, "dax") &&
		    (!strcmp(o->sb[i].value, "1") || !strcmp(o->sb[i].value, "always")))
			return device_has_dax(b->rdev) ? NULL : &o->sb[i];
	return NULL;
}

static int mount_exclusive(struct sfs_backing *b, const struct sfs_opts *o, char *err,
                           size_t errlen)
{
	const struct sfs_sb_opt *dax;
	char reason[512], where[PATH_MAX];
	int fsfd, mfd, rc;

	for (int attempt = 0; attempt < 2; attempt++) {
		bool ro = attempt == 1;
		fsfd = fsopen("ext4", FSOPEN_CLOEXEC);
		if (fsfd < 0) {
			sfs_errf(err, errlen, "ext4", "fsopen: %s", strerror(errno));
			return -errno;
		}
		if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", b->device, 0) < 0) {
			rc = -errno;
			sfs_errf(err, errlen, b->device, "%s", strerror(errno));
			close(fsfd);
			return rc;
		}
		if ((rc = set_sb_options(fsfd, o, err, errlen))) {
			close(fsfd);
			return rc;
		}
		if (ro)
			fsconfig(fsfd, FSCONFIG_SET_FLAG, "ro", NULL, 0);
		if (fsconfig(fsfd, FSCONFIG_CMD_CREATE_EXCL, NULL, NULL, 0) == 0) {
			b->read_only = ro;
			break;
		}
		rc = -errno;
		kernel_reason(fsfd, reason, sizeof(reason));
		close(fsfd);
		fsfd = -1;
		if (rc == -EBUSY) {
			if (sfs_backing_find_mount(b->rdev, where, sizeof(where), NULL, 0))
				sfs_errf(err, errlen, b->device,
				         "already mounted at %s (use share=existing to serve views over "
				         "that mount)", where);
			else
				sfs_errf(err, errlen, b->device,
				         "already in use by a mount in another namespace");
			return rc;
		}
		if (!ro && (rc == -EROFS || rc == -EACCES))
			continue;
		if (rc == -EINVAL && (dax = dax_refused(b, o)))
			sfs_errf(err, errlen, dax->text, "%s does not support DAX (refused by ext4)",
			         b->device);
		else
			sfs_errf(err, errlen, b->device, "cannot mount as ext4: %s",
			         *reason ? reason : strerror(-rc));
		return rc;
	}
	if (fsfd < 0) {
		sfs_errf(err, errlen, b->device, "cannot mount as ext4");
		return -EIO;
	}
	mfd = fsmount(fsfd, FSMOUNT_CLOEXEC,
	              MOUNT_ATTR_NOATIME | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	rc = -errno;
	close(fsfd);
	if (mfd < 0) {
		sfs_errf(err, errlen, b->device, "fsmount: %s", strerror(-rc));
		return rc;
	}
	b->root_fd = mfd;
	b->mode = SFS_SHARE_EXCLUSIVE;
	return 0;
}

static int clone_existing(struct sfs_backing *b, char *err, size_t errlen)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOATIME, .attr_clr = MOUNT_ATTR__ATIME};
	int fd;

	/* the superblock's options as the kernel reports them for the existing mount */
	if (!sfs_backing_find_mount(b->rdev, b->existing_at, sizeof(b->existing_at), b->options,
	                            sizeof(b->options))) {
		sfs_errf(err, errlen, b->device,
		         "share=existing: not mounted in this namespace");
		return -ENOENT;
	}
	fd = open_tree(AT_FDCWD, b->existing_at, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		sfs_errf(err, errlen, b->existing_at, "open_tree: %s", strerror(e));
		return -e;
	}
	/* the clone is ours alone: the daemon's own reads change no atime (sfs_backing_clone) */
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int e = errno;
		close(fd);
		sfs_errf(err, errlen, b->existing_at, "mount_setattr: %s", strerror(e));
		return -e;
	}
	b->root_fd = fd;
	b->mode = SFS_SHARE_EXISTING;
	return 0;
}

/* The child's answer on the pipe: the options, or '!' and why it could not read them (options
 * never start with '!'). */
_Noreturn static void probe_refused(int out, const char *why)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg), "!%s", why);

	if (write(out, msg, n) < 0)
		_exit(1);
	_exit(1);
}

_Noreturn static void probe_failed(int out, const char *what, int err)
{
	char why[160];

	snprintf(why, sizeof(why), "cannot %s: %s", what, strerror(err));
	probe_refused(out, why);
}

/* The options the kernel gave the superblock, read from mountinfo in a private namespace where
 * a copy of the detached backing is attached for the moment it takes. */
_Noreturn static void probe_child(struct sfs_backing *b, const char *probe_dir, int out)
{
	struct libmnt_table *tb;
	struct libmnt_fs *fs;
	char opts[2048];
	int c;

	if (unshare(CLONE_NEWNS) < 0)
		probe_failed(out, "enter a new mount namespace", errno);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		if (errno == EINVAL)
			probe_refused(out, "/ is not a mount point here (a chroot?), so the probe "
			                   "cannot keep its mount private");
		probe_failed(out, "make / private", errno);
	}
	c = open_tree(b->root_fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | OPEN_TREE_CLOEXEC);
	if (c < 0 || move_mount(c, "", AT_FDCWD, probe_dir, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		probe_failed(out, "attach a copy of the backing", errno);
	tb = mnt_new_table_from_file("/proc/self/mountinfo");
	fs = tb ? mnt_table_find_target(tb, probe_dir, MNT_ITER_BACKWARD) : NULL;
	if (!fs)
		probe_failed(out, "find the copy in /proc/self/mountinfo", ENOENT);
	snprintf(opts, sizeof(opts), "%s", mnt_fs_get_fs_options(fs) ? mnt_fs_get_fs_options(fs) : "");
	if (write(out, opts, strlen(opts)) < 0)
		_exit(1);
	_exit(0);
}

/* A detached mount appears in no mount table; a child in a private namespace attaches a
 * clone of it and reads the superblock's options from its own mountinfo (doc/kernel.md §2).
 * 0, or -EIO with why in err. */
static int read_back_options(struct sfs_backing *b, const char *probe_dir, char *err,
                             size_t errlen)
{
	const char *what = "cannot read the backing's options back";
	int p[2];
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		goto no_probe;
	if ((pid = fork()) < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		errno = e;
		goto no_probe;
	}
	if (pid == 0) {
		close(p[0]);
		probe_child(b, probe_dir, p[1]);
	}
	close(p[1]);
	n = read(p[0], b->options, sizeof(b->options) - 1);
	close(p[0]);
	waitpid(pid, NULL, 0);
	b->options[n > 0 ? n : 0] = '\0';
	if (n > 0 && b->options[0] != '!')
		return 0;
	sfs_errf(err, errlen, b->device, "%s%s%s", what, n > 0 ? ": " : "", n > 0 ? b->options + 1 : "");
	b->options[0] = '\0';
	return -EIO;
no_probe:
	sfs_errf(err, errlen, b->device, "%s: %s", what, strerror(errno));
	return -EIO;
}

static bool option_in(const char *list, const char *opt)
{
	char *copy = strdup(list), *save = NULL;
	bool found = false;

	for (char *t = strtok_r(copy, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
		found = !strcmp(t, opt);
	free(copy);
	return found;
}

/* Whether the kernel's list shows the superblock option asked for, in any spelling. */
static bool shown_in(const char *list, const struct sfs_sb_opt *s)
{
	char *copy = strdup(list), *save = NULL;
	bool found = false;

	if (!copy)
		return false;
	for (char *t = strtok_r(copy, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
		found = !strcmp(t, s->text) || sfs_sb_opt_shown(s, t);
	free(copy);
	return found;
}

/* Every superblock-only option asked for must be in effect: shown by the kernel (under any
 * of its names), or a default that the kernel does not show. */
static int check_effective(const struct sfs_backing *b, const struct sfs_opts *o, char *err,
                           size_t errlen)
{
	for (int i = 0; i < o->n_sb; i++) {
		const char *t = o->sb[i].text;
		bool hidden = false;
		if (shown_in(b->options, &o->sb[i]))
			continue;
		for (size_t k = 0; k < ARRAY_SIZE(hidden_defaults); k++)
			hidden |= !strcmp(hidden_defaults[k], t);
		if (hidden)
			continue;
		sfs_errf(err, errlen, t, "not in effect on the backing (the kernel reports %s)",
		         b->options);
		return -EINVAL;
	}
	if (!o->ro && b->read_only) {
		sfs_errf(err, errlen, "rw", "the backing is read-only (use ro)");
		return -EROFS;
	}
	return 0;
}

/* ACLs and user xattrs are probed on the backing root rather than inferred from options. */
static void probe_features(struct sfs_backing *b)
{
	char path[40];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", b->root_fd);
	b->has_acl = getxattr(path, "system.posix_acl_access", NULL, 0) >= 0 || errno == ENODATA;
	b->has_user_xattr = getxattr(path, "user.strictfs.probe", NULL, 0) >= 0 || errno == ENODATA;
}

/* By the low-level probe, as mount(8) reads a device: blkid's cache API would record the
 * device as it is now in blkid's cache, which blkid(8) trusts for 2 seconds, so a label set
 * through a view in that time went unseen by blkid (xfstests generic/492). */
static void read_uuid(struct sfs_backing *b)
{
	blkid_probe pr = blkid_new_probe_from_filename(b->device);
	const char *uuid;

	if (!pr)
		return;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_UUID);
	if (blkid_do_safeprobe(pr) == 0 && blkid_probe_lookup_value(pr, "UUID", &uuid, NULL) == 0)
		sfs_strlcpy(b->uuid, uuid, sizeof(b->uuid));
	blkid_free_probe(pr);
}

int sfs_backing_open(struct sfs_backing *b, const char *source, bool source_is_file,
                     const struct sfs_opts *o, char *err, size_t errlen)
{
	char probe[PATH_MAX];
	struct stat st;
	int rc;

	memset(b, 0, sizeof(*b));
	b->root_fd = b->loop_fd = b->dev_fd = -1;
	if (source_is_file) {
		if ((rc = loop_attach(b, source, err, errlen)))
			return rc;
	} else {
		sfs_strlcpy(b->device, source, sizeof(b->device));
	}
	if (stat(b->device, &st) < 0 || !S_ISBLK(st.st_mode)) {
		sfs_errf(err, errlen, b->device, "not a block device");
		rc = -ENOTBLK;
		goto fail;
	}
	b->rdev = st.st_rdev;
	read_uuid(b);
	rc = o->share == SFS_SHARE_EXISTING ? clone_existing(b, err, errlen)
	                                    : mount_exclusive(b, o, err, errlen);
	if (rc)
		goto fail;
	if (fstat(b->root_fd, &st) < 0) {
		rc = -errno;
		sfs_errf(err, errlen, b->device, "%s", strerror(errno));
		goto fail;
	}
	b->fs_dev = st.st_dev;
	b->dev_fd = open(b->device, O_RDONLY | O_CLOEXEC);
	if (b->mode == SFS_SHARE_EXCLUSIVE) {
		snprintf(probe, sizeof(probe), "%s/.probe-%d", SFS_RUNDIR, getpid());
		mkdir(probe, 0700);
		rc = read_back_options(b, probe, err, errlen);
		rmdir(probe);
		if (rc)
			goto fail;
	} else {
		b->read_only = option_in(b->options, "ro");
	}
	if ((rc = check_effective(b, o, err, errlen)))
		goto fail;
	probe_features(b);
	sfs_backing_read_reserved(b);
	return 0;
fail:
	sfs_backing_close(b);
	return rc;
}

int sfs_backing_clone_set(const struct sfs_clone *c, unsigned attrs)
{
	/* the atime rule is a field, cleared whole and set; the others are bits */
	struct mount_attr attr = {.attr_set = attrs,
	                          .attr_clr = MOUNT_ATTR__ATIME |
	                                      ((MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODIRATIME) & ~attrs)};

	return mount_setattr(c->tree_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ? -errno : 0;
}

int sfs_backing_clone(const struct sfs_backing *b, unsigned attrs, struct sfs_clone *c)
{
	int rc;

	c->fd = -1;
	c->tree_fd = open_tree(b->root_fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | OPEN_TREE_CLOEXEC);
	if (c->tree_fd < 0)
		return -errno;
	if ((rc = sfs_backing_clone_set(c, attrs)) ||
	    (c->fd = openat(c->tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = rc ? rc : -errno;
		sfs_backing_clone_close(c);
		return rc;
	}
	return 0;
}

bool sfs_backing_clone_valid(const struct sfs_backing *b, const struct sfs_clone *c)
{
	struct stat root, tree, fd;

	return fstat(b->root_fd, &root) == 0 && fstat(c->tree_fd, &tree) == 0 &&
	       fstat(c->fd, &fd) == 0 && S_ISDIR(tree.st_mode) && tree.st_dev == root.st_dev &&
	       tree.st_ino == root.st_ino && fd.st_dev == root.st_dev && fd.st_ino == root.st_ino;
}

void sfs_backing_clone_close(struct sfs_clone *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->tree_fd >= 0)
		close(c->tree_fd);
	c->fd = c->tree_fd = -1;
}

void sfs_backing_close(struct sfs_backing *b)
{
	if (b->root_fd >= 0)
		close(b->root_fd);
	if (b->dev_fd >= 0)
		close(b->dev_fd);
	/* autoclear detaches the loop device once the superblock and this fd let go of it */
	if (b->loop_fd >= 0)
		close(b->loop_fd);
	b->root_fd = b->dev_fd = b->loop_fd = -1;
}

/* The value of NAME= in a comma list, or false. */
static bool option_value(const char *list, const char *name, unsigned long long *out)
{
	size_t len = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, len) && p[len] == '=') {
			char *end;
			*out = strtoull(p + len + 1, &end, 10);
			return end != p + len + 1 && (*end == ',' || *end == '\0');
		}
	return false;
}

void sfs_backing_read_reserved(struct sfs_backing *b)
{
	unsigned char sb[1024];
	unsigned long long v;

	b->resuid = 0;
	b->resgid = 0;
	if (b->dev_fd >= 0 && pread(b->dev_fd, sb, sizeof(sb), 1024) == (ssize_t)sizeof(sb) &&
	    sb[0x38] == 0x53 && sb[0x39] == 0xef) {
		b->resuid = sb[0x50] | sb[0x51] << 8; /* s_def_resuid */
		b->resgid = sb[0x52] | sb[0x53] << 8; /* s_def_resgid */
	}
	if (option_value(b->options, "resuid", &v))
		b->resuid = (uid_t)v;
	if (option_value(b->options, "resgid", &v))
		b->resgid = (gid_t)v;
}

/* A block count of the superblock: its low 32 bits at lo, its high ones at hi (64bit). */
static unsigned long long sb_blocks(const struct sfs_backing *b, size_t lo_at, size_t hi_at)
{
	unsigned char sb[1024];
	unsigned long long lo, hi = 0;

	if (b->dev_fd < 0 || pread(b->dev_fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb))
		return 0;
	if (sb[0x38] != 0x53 || sb[0x39] != 0xef)
		return 0; /* not an ext2/3/4 superblock */
	lo = sb[lo_at] | sb[lo_at + 1] << 8 | sb[lo_at + 2] << 16 |
	     (unsigned long long)sb[lo_at + 3] << 24;
	if (sb[0x60] & 0x80) /* INCOMPAT_64BIT */
		hi = sb[hi_at] | sb[hi_at + 1] << 8 | sb[hi_at + 2] << 16 |
		     (unsigned long long)sb[hi_at + 3] << 24;
	return hi << 32 | lo;
}

unsigned long long sfs_backing_total_blocks(const struct sfs_backing *b)
{
	return sb_blocks(b, 0x04, 0x150); /* s_blocks_count */
}

unsigned long long sfs_backing_reserved_blocks(const struct sfs_backing *b)
{
	return sb_blocks(b, 0x08, 0x154); /* s_r_blocks_count */
}
