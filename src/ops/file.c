/* Open files (see ops.h): open and create, the data path (read, write, fallocate,
 * copy_file_range, lseek, fsync), release, and the view's table of open files. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "coherence.h"
#include "creds.h"
#include "services.h"
#include "view.h"
#include "fdcache.h"
#include "names.h"

/* How the view's kernel caches what a daemon-path open reads (policy.h, open_cache). A file
 * that another view writes by passthrough changes unseen: read around the page cache. */
static void set_file_cache(struct sfs_view *v, struct sfs_node *node, const struct stat *st,
                           struct fuse_file_info *fi)
{
	enum sfs_cache_use use = sfs_policy_open_cache(v, st);

	if (node && atomic_load(&node->pt_writers))
		use = SFS_CACHE_NONE;
	fi->keep_cache = v->keep_cache && use == SFS_CACHE_KEEP;
	fi->direct_io = use == SFS_CACHE_NONE && (fi->flags & O_ACCMODE) != O_WRONLY;
}

struct sfs_file sfs_no_file = {.fd = -1, .twin = -1, .slot = -1};

/* What the backing descriptor's open flags decide about the file (see struct sfs_file). */
static void take_open_flags(struct sfs_file *f, int flags)
{
	f->direct = flags & O_DIRECT;
	f->needs_twin = (flags & (O_DIRECT | O_APPEND)) && (flags & O_ACCMODE) != O_RDONLY;
	f->append = flags & O_APPEND;
}

/* The file joins the view's open files. */
static void enlist_file(struct sfs_view *v, struct sfs_file *f)
{
	pthread_mutex_lock(&v->files_lock);
	sfs_list_add(&f->link, &v->files);
	pthread_mutex_unlock(&v->files_lock);
	atomic_fetch_add(&v->open_files, 1);
}

/* The open file's record for a successor (handover.h), published before the kernel hears of
 * the file. */
static void record_file(struct sfs_view *v, struct sfs_file *f, const struct stat *st)
{
	struct sfs_ho_file rec = {.view = v->slot, .fd = f->fd, .node = f->node ? f->node->id : 0,
	                          .dev = st->st_dev, .ino = st->st_ino};

	atomic_init(&rec.live, SFS_HO_FILE);
	atomic_init(&rec.twin, -1);
	rec.flags = (f->writes ? SFS_HO_WRITES : 0) | (f->cached ? SFS_HO_CACHED : 0);
	if (f->backing)
		pt_record(v, f->node, &rec);
	sfs_openfiles_publish(v->svc->files, f->slot, &rec);
}

/* The node has one more open file. One with no name (O_TMPFILE, or unlinked between the
 * open's stat and now) is counted by the ledger from here on: ext4 charges it until its last
 * close. The count goes up before the ledger looks, so an unlink that races sees it. */
static void count_open(struct sfs_view *v, struct sfs_node *node, int fd, const struct stat *st)
{
	if (node && atomic_fetch_add(&node->opens, 1) == 0 && st->st_nlink == 0)
		sfs_quota_sync(&v->svc->quota, node, NULL, fd);
}

/* The node's open file fd ends: the last one of an object with no name leaves the ledger. */
static void uncount_open(struct sfs_view *v, struct sfs_node *node, int fd)
{
	struct stat st;

	if (node && atomic_fetch_sub(&node->opens, 1) == 1 && fstat(fd, &st) == 0 && st.st_nlink == 0)
		sfs_quota_sync(&v->svc->quota, node, NULL, fd);
}

/* A new open file of the view for backing descriptor fd (taken over, opened with fi's flags as
 * open_flags_for_backing gives them), into fi: handed to the kernel's passthrough where the
 * view has it, else served by the daemon. As the caller. made: the request made the object. */
static int new_file(struct sfs_view *v, struct sfs_node *node, int fd, const struct stat *st,
                    bool made, struct fuse_file_info *fi)
{
	struct sfs_file *f = malloc(sizeof(*f));
	int flags = open_flags_for_backing(v, fi->flags);
	bool writes = (flags & O_ACCMODE) != O_RDONLY;
	int slot = f ? sfs_openfiles_alloc(v->svc->files, f) : -ENOMEM;
	int backing = node && slot >= 0 ? pt_open(v, node, fd, st, writes, made) : 0;

	if (slot < 0 || backing < 0) {
		if (slot >= 0)
			sfs_openfiles_free(v->svc->files, slot);
		free(f);
		close(fd);
		return slot < 0 ? slot : backing;
	}
	f->slot = slot;
	f->fd = fd;
	f->backing = backing;
	f->node = node;
	f->writes = writes;
	take_open_flags(f, flags);
	atomic_init(&f->twin, -1);
	atomic_init(&f->atime, first_atime(v, st));
	fi->fh = slot;
	fi->keep_cache = fi->direct_io = 0;
	if (!backing)
		set_file_cache(v, node, st, fi);
	f->cached = !fi->direct_io;
	record_file(v, f, st);
	enlist_file(v, f);
	count_open(v, node, fd, st);
	return 0;
}

int sfs_view_adopt_file(struct sfs_view *v, uint32_t slot, const struct sfs_ho_file *rec)
{
	struct sfs_node *node = NULL;
	struct sfs_file *f;
	struct stat st;
	int flags, twin;

	if (fstat(rec->fd, &st) < 0 || st.st_dev != rec->dev || st.st_ino != rec->ino)
		return -ESTALE; /* not the descriptor the record names: never close it */
	if (rec->node && !(node = sfs_view_adopt_node(v, &st, rec->node)))
		return -ESTALE;
	if (!(f = calloc(1, sizeof(*f))))
		return -ENOMEM;
	flags = fcntl(rec->fd, F_GETFL);
	f->slot = slot;
	f->fd = rec->fd;
	f->node = node;
	f->writes = rec->flags & SFS_HO_WRITES;
	f->backing = rec->backing;
	if (f->writes && !f->backing)
		sfs_fuse_io_expect_writes(&v->fuse_io);
	if (f->backing && node)
		pt_adopt(v, node, rec);
	take_open_flags(f, flags);
	twin = atomic_load(&rec->twin);
	atomic_init(&f->twin, twin >= 0 && fstat(twin, &st) == 0 && st.st_ino == rec->ino ? twin : -1);
	atomic_init(&f->atime, first_atime(v, &st));
	f->cached = rec->flags & SFS_HO_CACHED;
	sfs_openfiles_adopt(v->svc->files, slot, f);
	enlist_file(v, f);
	count_open(v, node, f->fd, &st);
	return 0;
}

/* The end of an open file: released (its slot is freed once the RELEASE is answered,
 * sfs_openfiles_released), or its open could not be answered. Returns the slot, or -1. */
static int end_file(struct sfs_view *v, struct sfs_file *f)
{
	int slot = f->slot;

	if (f == &sfs_no_file)
		return -1;
	sfs_openfiles_releasing(v->svc->files, slot);
	pthread_mutex_lock(&v->files_lock);
	sfs_list_del(&f->link);
	pthread_mutex_unlock(&v->files_lock);
	if (f->backing)
		pt_release(v, f->node, f->writes);
	uncount_open(v, f->node, f->fd);
	if (atomic_load(&f->twin) >= 0)
		close(atomic_load(&f->twin));
	close(f->fd);
	free(f);
	atomic_fetch_sub(&v->open_files, 1);
	return slot;
}

/* The end of an open file the kernel no longer names (or never heard of). */
static void drop_file(struct sfs_view *v, struct sfs_file *f)
{
	int slot = end_file(v, f);

	if (slot >= 0)
		sfs_openfiles_free(v->svc->files, slot);
}

void sfs_view_close_files(struct sfs_view *v)
{
	while (!sfs_list_empty(&v->files))
		drop_file(v, sfs_list_first(&v->files, struct sfs_file, link));
}

static void open_now(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	bool writes = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	struct held *h;
	struct stat st;
	struct req q;
	int fd, rc;

	rc = req_begin(&q, req);
	if (fi->flags & O_TRUNC)
		req_charge(&q);
	if (rc || (rc = req_hold(&q, ino, &h)) ||
	    (writes && ((rc = sfs_policy_modify(q.r.view)) || (rc = req_refuse_unmapped(&q, h, -EACCES)))))
		goto out;
	fd = open_node(&q.r, h, open_flags_for_backing(q.r.view, fi->flags), &st);
	rc = fd < 0 ? fd : new_file(q.r.view, h->node, fd, &st, false, fi);
	if (!rc && (fi->flags & O_TRUNC)) {
		sfs_quota_sync(req_ledger(&q), h->node, NULL, h->fd);
		sfs_coh_data(q.r.view, h->node, 0, 0);
	}
out:
	if (req_reply_open(&q, rc, fi) < 0 && !rc)
		drop_file(q.r.view, file_in(q.r.view, fi));
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (lease_breaker(req)) {
		req_fail(req, -ECANCELED);
		return;
	}
	if (!lease_break_first(req, ino, fi->flags, &(struct lease_then){.open = open_now, .fi = *fi}))
		open_now(req, ino, fi);
}

/* A name that appeared between the kernel's lookup and its create: the kernel has checked no
 * permission on what is there now, so it is opened strictly as the caller (never with the
 * noacl view's retry), and only if it is a regular file: opening a FIFO would block the worker
 * for good, a device would bypass the view's nodev. fs.protected_regular is checked before the
 * open: the kernel checks it only after the reply, when an O_TRUNC has emptied another's file.
 * Returns the descriptor or -errno. */
static int open_raced(int dirfd, const char *name, int flags)
{
	int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd;
	struct stat st, dir;
	char path[40];

	if (pfd < 0)
		return -errno;
	if ((fd = stat_fd(pfd, &st)) == 0 && !S_ISREG(st.st_mode))
		fd = S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST;
	if (fd == 0 && (fd = stat_fd(dirfd, &dir)) == 0 && sfs_creds_sticky_refuses(&dir, &st))
		fd = -EACCES;
	if (fd == 0) {
		fd_path(path, pfd);
		fd = open(path, flags & ~O_NOFOLLOW);
		fd = fd < 0 ? -errno : fd;
	}
	close(pfd);
	return fd;
}

/* A file made by create is open on the backing's own mount, which updates no atime; the open
 * file moves to the view's clone, whose flags (atime rule, and those a later remount gives it)
 * its reads then follow. A file created write-only is never read through, and stays. Returns
 * the descriptor to keep (fd is closed if another replaces it). */
static int reopen_in_view(struct req *q, struct sfs_node *node, int fd, int flags)
{
	struct sfs_view *v = q->r.view;
	int nfd;

	if ((flags & O_ACCMODE) == O_WRONLY)
		return fd;
	flags = open_flags_for_backing(v, flags) & ~(O_TRUNC | O_TMPFILE);
	sfs_priv_begin(SFS_PRIV_SEARCH);
	nfd = sfs_node_open(node, v->clone.fd, flags | O_NOFOLLOW);
	sfs_priv_end();
	if (nfd < 0)
		return fd; /* the first descriptor still serves, only without atime */
	close(fd);
	return nfd;
}

/* Creates the name exclusively, or opens what another view made there since the kernel's
 * lookup (open(2) without O_EXCL would); c->made says which. Returns the fd or -errno. */
static int create_or_open(struct req *q, struct change *c, mode_t mode, int flags, bool excl)
{
	int fd;

	sfs_creds_umask(q->r.ctx->umask);
	if (change_begin(q, c, &fd))
		fd = BACKING(&q->r, openat(c->dir->fd, c->name, flags | O_CREAT | O_EXCL, mode));
	else if (!fd) /* the predecessor made it, and the kernel never had its answer */
		fd = open_raced(c->dir->fd, c->name, flags & ~O_TRUNC);
	change_done(q, c, fd < 0 ? fd : 0);
	if (fd == -EEXIST && !excl)
		fd = open_raced(c->dir->fd, c->name, flags);
	return fd;
}

/* The open file of a created (or raced, or O_TMPFILE) file: its node entered, its descriptor
 * moved to the view's clone, handed to the kernel. Takes fd. */
static int open_created(struct req *q, struct change *c, int fd, mode_t mode,
                        struct fuse_entry_param *e, struct fuse_file_info *fi)
{
	struct sfs_node *node;
	int rc;

	if ((rc = change_entry(q, c, fd, mode, e))) {
		close(fd);
		return rc;
	}
	if (!(node = sfs_node_of(q->r.view, e->ino))) {
		close(fd);
		return -ESTALE;
	}
	fd = reopen_in_view(q, node, fd, fi->flags);
	if ((rc = new_file(q->r.view, node, fd, &e->attr, c->made, fi)))
		return rc; /* new_file closed fd */
	e->attr_timeout = c->made ? attr_timeout_of_made(q->r.view, node)
	                          : attr_timeout_of(q->r.view, node);
	return 0;
}

/* FUSE_TMPFILE, which the transport hands over as a CREATE of "/" (fuse_adapt.h): a file with
 * no name in the directory, open, counted by the ledger from its birth as ext4 counts it. */
static void create_tmpfile(struct req *q, fuse_ino_t parent, mode_t mode,
                           struct fuse_file_info *fi)
{
	struct fuse_entry_param e = {0};
	struct change c = {.kind = CHANGE_TMPFILE, .made = true};
	int flags = (open_flags_for_backing(q->r.view, fi->flags) & ~(O_TRUNC | O_TMPFILE)) |
	            (fi->flags & O_EXCL) | O_TMPFILE; /* O_EXCL: never to be linked */
	int rc, fd;

	if (!(rc = req_hold(q, parent, &c.dir)) && !(rc = req_refuse_unmapped(q, c.dir, -EACCES)) &&
	    !(rc = reserve_new(q, c.dir, MAKE_NODE, NULL))) {
		sfs_creds_umask(q->r.ctx->umask);
		fd = BACKING(&q->r, openat(c.dir->fd, ".", flags, mode));
		rc = fd < 0 ? fd : open_created(q, &c, fd, mode, &e, fi);
	}
	if (req_reply_create(q, rc, &e, fi) < 0 && !rc) {
		drop_file(q->r.view, file_in(q->r.view, fi));
		forget_one(q->r.view, e.ino);
	}
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
	struct fuse_entry_param e = {0};
	struct change c = {.kind = CHANGE_MAKE, .asked = name};
	struct req q;
	int fd, rc;

	if (!strcmp(name, "/")) {
		if ((rc = req_begin_change(&q, req)))
			req_reply_err(&q, rc);
		else
			create_tmpfile(&q, parent, mode, fi);
		return;
	}
	if ((rc = begin_dir_change(&q, req, parent, name, true, &c.dir)) ||
	    (rc = reserve_new(&q, c.dir, MAKE_NODE, NULL)))
		goto out;
	fd = create_or_open(&q, &c, mode, open_flags_for_backing(q.r.view, fi->flags) | O_NOFOLLOW,
	                    fi->flags & O_EXCL);
	rc = fd < 0 ? fd : open_created(&q, &c, fd, mode, &e, fi);
out:
	if (req_reply_create(&q, rc, &e, fi) < 0 && !rc) {
		drop_file(q.r.view, file_in(q.r.view, fi)); /* unpins before the forget */
		forget_one(q.r.view, e.ino);
	}
}

/* The data is read into memory (page-aligned, as an O_DIRECT backing descriptor wants), then
 * the other views are told if the read moved the atime, then the reply goes: after it the file
 * may be released at any moment. (libfuse 3.14 copies through memory here too: the daemon does
 * not ask for FUSE_CAP_SPLICE_WRITE.) */
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct sfs_file *f = file_of(req, fi);
	void *buf = NULL;
	struct req q;
	ssize_t n;

	req_start(&q, req);
	if (posix_memalign(&buf, 4096, size ? size : 1)) {
		buf = NULL;
		n = -ENOMEM;
	} else if ((n = pread(f->fd, buf, size, off)) < 0) {
		n = -errno;
	} else {
		atime_moved(q.r.view, sfs_node_of(q.r.view, ino), f->fd, &f->atime);
		/* pages this read fills may be changed by another view's passthrough writer
		 * unseen: they go again once the read is answered (it holds them locked) */
		if (f->cached && f->node && atomic_load(&f->node->pt_writers))
			sfs_coh_own_data_later(q.r.view, f->node, off, n);
	}
	req_reply_buf(&q, n < 0 ? n : 0, buf, n < 0 ? 0 : n);
	free(buf);
}

/* An O_DIRECT backing file takes only page-aligned memory: the request is gathered into an
 * aligned bounce buffer first (the kernel has checked the caller's own alignment). */
static ssize_t write_direct(int fd, struct fuse_bufvec *in, off_t off)
{
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(size);
	void *buf;
	ssize_t n;

	if (posix_memalign(&buf, 4096, size ? size : 1))
		return -ENOMEM;
	mem.buf[0].mem = buf;
	n = fuse_buf_copy(&mem, in, 0);
	if (n > 0 && (n = pwrite(fd, buf, n, off)) < 0)
		n = -errno;
	free(buf);
	return n;
}

/* The descriptor a write of the kernel's page cache goes to (see struct sfs_file): the
 * file's own, or its twin without O_DIRECT and O_APPEND, reopened from it. The file is open
 * for writing already, so the twin is opened with the DAC capabilities: it may be read-only
 * by its mode by now, as an open file still writes. Returns the fd or -errno. */
static int writeback_fd(struct sfs_view *v, struct sfs_file *f, bool writepage)
{
	int fd, none = -1;
	char path[40];

	if (!writepage || !f->needs_twin)
		return f->fd;
	if ((fd = atomic_load(&f->twin)) >= 0)
		return fd;
	fd_path(path, f->fd);
	sfs_priv_begin(SFS_PRIV_DAC);
	fd = open(path, (fcntl(f->fd, F_GETFL) & ~(O_DIRECT | O_APPEND | O_NOFOLLOW)) | O_CLOEXEC);
	fd = fd < 0 ? -errno : fd;
	sfs_priv_end();
	if (fd >= 0 && !atomic_compare_exchange_strong(&f->twin, &none, fd)) {
		close(fd); /* another writer's twin won */
		fd = none;
	} else if (fd >= 0) {
		sfs_openfiles_set_twin(v->svc->files, f->slot, fd);
	}
	return fd;
}

static ssize_t write_to(struct sfs_file *f, int fd, struct fuse_bufvec *in, off_t off)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));

	if (fd == f->fd && f->direct)
		return write_direct(fd, in, off);
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fd;
	out.buf[0].pos = off;
	return fuse_buf_copy(&out, in, 0);
}

/* As the caller: the backing clears set-id bits on write unless the writer may keep them. */
void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                  struct fuse_file_info *fi)
{
	struct sfs_file *f = file_of(req, fi);
	struct sfs_node *node = NULL;
	struct req q;
	ssize_t n;
	int fd;

	n = req_begin(&q, req);
	req_charge(&q);
	if (!n && !(node = sfs_node_of(q.r.view, ino)))
		n = -EINVAL;
	if (!n)
		n = req_reserve_alloc(&q, node, f->fd, off, fuse_buf_size(in));
	if (!n && (n = fd = writeback_fd(q.r.view, f, fi->writepage)) >= 0) {
		bool appends = fd == f->fd && f->append;
		if (!appends || !intent_start_append(&q, fd, fuse_buf_size(in), &n)) {
			n = sfs_creds_for_data();
			n = n ? n : write_to(f, fd, in, off);
			if (appends)
				intent_done(&q, (int)n);
		}
	}
	if (n > 0) {
		sfs_quota_sync(req_ledger(&q), node, NULL, f->fd);
		/* an O_DIRECT write the kernel completes asynchronously (AIO) leaves the writer's
		 * own cached pages of the range as they were: they go now, before the answer */
		if (f->direct && !fi->writepage)
			sfs_coh_own_data(q.r.view, node, off, n);
		sfs_coh_data(q.r.view, node, off, n);
	}
	req_reply_write(&q, n);
}

/* The open file's OFD and flock locks go with it (lock.c), as natively. */
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct req q;

	struct sfs_file *f = file_of(req, fi);

	(void)ino;
	req_start(&q, req);
	/* what a passthrough writer allocated, the ledger has not seen yet */
	if (f->backing && f->writes)
		sfs_quota_sync(req_ledger(&q), f->node, NULL, f->fd);
	sfs_view_release_locks(q.r.view, f, (uint32_t)fi->fh);
	end_file(q.r.view, f);
	req_reply_err(&q, 0);
	sfs_openfiles_released(q.r.view->svc->files, fi->fh);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct sfs_file *f = file_of(req, fi);
	struct sfs_node *node;
	struct req q;
	int rc;

	req_start(&q, req);
	rc = (datasync ? fdatasync(f->fd) : fsync(f->fd)) < 0 ? -errno : 0;
	/* writeback may have allocated extent blocks the last write could not see */
	if ((node = sfs_node_of(q.r.view, ino)))
		sfs_quota_sync(req_ledger(&q), node, NULL, f->fd);
	req_reply_err(&q, rc);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  struct fuse_file_info *fi)
{
	struct sfs_file *f = file_of(req, fi);
	struct sfs_node *n;
	struct req q;
	int rc;

	if ((rc = req_begin_change(&q, req)))
		goto out;
	if (!(n = sfs_node_of(q.r.view, ino))) {
		rc = -EINVAL;
		goto out;
	}
	/* punching and collapsing free blocks; every other mode may allocate the range */
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)) &&
	    (rc = req_reserve_alloc(&q, n, f->fd, off, len)))
		goto out;
	if (!(rc = sfs_creds_for_data()))
		rc = fallocate(f->fd, mode, off, len) < 0 ? -errno : 0;
	sfs_quota_sync(req_ledger(&q), n, NULL, f->fd);
	if (!rc)
		sfs_coh_data(q.r.view, n, off, len);
out:
	req_reply_err(&q, rc);
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	struct req q;
	off_t res;

	(void)ino;
	req_start(&q, req);
	res = lseek(file_of(req, fi)->fd, off, whence);
	req_reply_lseek(&q, res < 0 ? -errno : res);
}

void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                        struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                        struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct sfs_file *in = file_of(req, fi_in), *out = file_of(req, fi_out);
	struct sfs_node *node = NULL;
	off_t start = off_out;
	struct req q;
	ssize_t n;

	(void)ino_in;
	if (!(n = req_begin_change(&q, req)) && !(node = sfs_node_of(q.r.view, ino_out)))
		n = -EINVAL;
	if (!n)
		n = req_reserve_alloc(&q, node, out->fd, off_out, len);
	if (!n && !(n = sfs_creds_for_data())) {
		n = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, flags);
		n = n < 0 ? -errno : n;
	}
	if (n > 0) {
		sfs_quota_sync(req_ledger(&q), node, NULL, out->fd);
		sfs_coh_data(q.r.view, node, start, n);
	}
	req_reply_write(&q, n);
}
