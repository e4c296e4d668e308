/* Open directories (see ops.h): opendir, readdir and readdirplus, releasedir, fsyncdir. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coherence.h"
#include "services.h"
#include "view.h"

/* The open directory's record for a successor (handover.h), before the kernel hears of it. */
static void record_dir(struct sfs_view *v, const struct sfs_dir *d, const struct stat *st)
{
	struct sfs_ho_file rec = {.view = v->slot, .fd = d->fd, .node = d->node->id,
	                          .dev = st->st_dev, .ino = st->st_ino};

	atomic_init(&rec.live, SFS_HO_DIR);
	atomic_init(&rec.twin, -1);
	sfs_openfiles_publish(v->svc->files, d->slot, &rec);
}

/* The end of an open directory: its slot is freed once the kernel can no longer send its
 * RELEASEDIR again (sfs_openfiles_released, or sfs_openfiles_free if it never heard of it). */
static int end_dir(struct sfs_view *v, struct sfs_dir *d)
{
	int slot = d->slot;

	sfs_openfiles_releasing(v->svc->files, slot);
	closedir(d->dp);
	free(d);
	return slot;
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	enum sfs_cache_use use = SFS_CACHE_KEEP;
	struct sfs_dir *d = NULL;
	struct held *h;
	struct stat st;
	struct req q;
	int fd = -1, rc;

	if ((rc = req_begin(&q, req)) || (rc = req_hold(&q, ino, &h)))
		goto out;
	fd = open_node(&q.r, h, O_RDONLY | O_DIRECTORY | O_CLOEXEC, &st);
	if ((rc = fd < 0 ? fd : 0))
		goto out;
	use = sfs_policy_open_cache(q.r.view, &st);
	rc = -ENOMEM;
	if (!(d = calloc(1, sizeof(*d))))
		goto out;
	if (!(d->dp = fdopendir(fd))) {
		rc = -errno;
		goto out;
	}
	if ((rc = d->slot = sfs_openfiles_alloc(q.r.view->svc->files, d)) < 0) {
		closedir(d->dp);
		fd = -1;
		goto out;
	}
	d->fd = fd;
	d->node = h->node;
	atomic_init(&d->atime, first_atime(q.r.view, &st));
	fd = -1;
	rc = 0;
	record_dir(q.r.view, d, &st);
	fi->fh = d->slot;
	fi->keep_cache = q.r.view->keep_cache && use == SFS_CACHE_KEEP;
	/* the kernel keeps the listing while the daemon is the only writer: every change of the
	 * directory's names through any view invalidates it in the others (coherence.c), and
	 * the kernel drops it itself on its own view's changes and when the mtime moves */
	fi->cache_readdir = q.r.view->keep_cache && use != SFS_CACHE_NONE;
out:
	if (fd >= 0)
		close(fd);
	if (rc)
		free(d);
	if (req_reply_open(&q, rc, fi) < 0 && !rc)
		sfs_openfiles_free(q.r.view->svc->files, end_dir(q.r.view, d));
}

int sfs_view_adopt_dir(struct sfs_view *v, uint32_t slot, const struct sfs_ho_file *rec)
{
	struct sfs_node *node;
	struct sfs_dir *d;
	struct stat st;

	if (fstat(rec->fd, &st) < 0 || st.st_dev != rec->dev || st.st_ino != rec->ino ||
	    !S_ISDIR(st.st_mode))
		return -ESTALE; /* not the descriptor the record names: never close it */
	if (!(node = sfs_view_adopt_node(v, &st, rec->node)))
		return -ESTALE;
	if (!(d = calloc(1, sizeof(*d))) || !(d->dp = fdopendir(rec->fd))) {
		free(d);
		return -ENOMEM;
	}
	d->fd = rec->fd;
	d->node = node;
	d->offset = -1; /* where the predecessor left the stream is unknown: seek first */
	atomic_init(&d->atime, first_atime(v, &st));
	d->slot = slot;
	sfs_openfiles_adopt(v->svc->files, slot, d);
	return 0;
}

/* readdirplus looks entries up without the kernel having checked search permission on the
 * directory, so it never takes the noacl retry: strictly as the caller. */
static int lookup_for_listing(struct sfs_req *r, struct sfs_node *dir, int dirfd,
                              const char *name, struct fuse_entry_param *e)
{
	return entry_by_name(r, dir, dirfd, name, false, e);
}

/* One directory entry into the reply buffer; with plus, looked up as LOOKUP would (an entry
 * whose lookup fails is still listed, without attributes, as ls expects). Returns the bytes
 * used, or 0 when the buffer is full. */
static size_t add_dirent(struct sfs_req *r, struct sfs_dir *d, bool plus, char *p, size_t rem,
                         off_t nextoff)
{
	struct dirent *de = d->entry;
	struct fuse_entry_param e;
	size_t used;

	memset(&e, 0, sizeof(e));
	e.attr.st_ino = de->d_ino;
	e.attr.st_mode = de->d_type << 12;
	if (!plus)
		return fuse_add_direntry(r->req, p, rem, de->d_name, &e.attr, nextoff);
	if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
	    lookup_for_listing(r, d->node, dirfd(d->dp), de->d_name, &e) < 0) {
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = de->d_ino;
		e.attr.st_mode = de->d_type << 12;
	}
	used = fuse_add_direntry_plus(r->req, p, rem, de->d_name, &e, nextoff);
	if (used > rem && e.ino)
		forget_one(r->view, e.ino);
	return used;
}

/* Fills buf with the entries from offset on; returns the bytes used or -errno. An error after
 * some entries is reported on the next call, as getdents does. */
static ssize_t fill_listing(struct sfs_req *r, struct sfs_dir *d, struct sfs_node *dir,
                            char *buf, size_t size, off_t offset, bool plus)
{
	size_t rem = size;
	char *p = buf;
	int rc = 0;

	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		off_t nextoff;
		size_t used;
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				rc = errno ? -errno : 0;
				break;
			}
		}
		nextoff = d->entry->d_off;
		if (sfs_policy_dirent_visible(r->view, dir, d->entry->d_name)) {
			used = add_dirent(r, d, plus, p, rem, nextoff);
			if (used > rem)
				break;
			p += used;
			rem -= used;
		}
		d->entry = NULL;
		d->offset = nextoff;
	}
	return rc && rem == size ? rc : (ssize_t)(size - rem);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                       struct fuse_file_info *fi, bool plus)
{
	struct sfs_dir *d = dir_of(req, fi);
	struct sfs_node *dir = NULL;
	char *buf = NULL;
	struct req q;
	ssize_t n;

	if (!(n = req_begin(&q, req)) && (!d || !(dir = sfs_node_of(q.r.view, ino))))
		n = d ? -EINVAL : -EBADF;
	if (!n && !(buf = malloc(size)))
		n = -ENOMEM;
	if (!n) {
		/* the entries are looked up as the caller, with no capability the kernel would
		 * not grant it over this directory (an idmapped view's namespace root) */
		struct stat st;
		bool scoped = plus && !fstat(d->fd, &st) && sfs_creds_caps_scope(&st);

		if ((n = fill_listing(&q.r, d, dir, buf, size, offset, plus)) >= 0)
			atime_moved(q.r.view, dir, d->fd, &d->atime);
		if (scoped)
			sfs_creds_caps_unscope();
	}
	req_reply_buf(&q, n < 0 ? n : 0, buf, n < 0 ? 0 : n);
	free(buf);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_dir *d = dir_of(req, fi);
	struct req q;

	(void)ino;
	req_start(&q, req);
	if (d)
		end_dir(q.r.view, d);
	req_reply_err(&q, 0);
	sfs_openfiles_released(q.r.view->svc->files, fi->fh);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct sfs_dir *d = dir_of(req, fi);
	struct req q;

	(void)ino;
	req_start(&q, req);
	if (!d)
		req_reply_err(&q, -EBADF);
	else
		req_reply_err(&q, (datasync ? fdatasync(d->fd) : fsync(d->fd)) < 0 ? -errno : 0);
}
