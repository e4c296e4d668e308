/* Kernel passthrough of open files (see view_passthrough.h): which backing file an open gets, and
 * what the other views must be told while one is open for writing. */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>

#include "coherence.h"
#include "fuse_io.h"
#include "creds.h"
#include "passthrough.h"
#include "view_passthrough.h"
#include "services.h"
#include "handover.h"
#include "hash.h"

/* The table's first size: it grows with the files a view has open by passthrough. */
#define PT_BUCKETS 64

/* A backing file the view registered, in its table (view_passthrough.h). */
struct sfs_pt_entry {
	struct sfs_hlink link;   /* in the view's table, by the node's backing inode */
	const struct sfs_node *node;
	int id;                  /* the backing id, > 0 */
	unsigned opens;          /* the view's open files that use it */
	unsigned writers;        /* of those, open for writing */
	bool nobody;             /* registered with nobody's credentials (see creds.h) */
	bool moves_atime;        /* the view's reads through it move the atime */
	struct sfs_cred_key key; /* else whose */
};

/* Every view asks the kernel for passthrough, whatever its options say now: a remount may
 * let its files pass through later (the profile decides at each open). Not with
 * cache=writeback, which cannot change live and which the kernel ignores with passthrough. */
void sfs_pt_init(struct sfs_view *v)
{
	pthread_mutex_init(&v->pt.lock, NULL);
	atomic_init(&v->pt.off, NULL);
	atomic_init(&v->pt.backing_files, 0);
	v->fuse_io.want_passthrough = v->prof->opts.cache != SFS_CACHE_WRITEBACK;
}

void sfs_pt_destroy(struct sfs_view *v)
{
	sfs_htab_destroy(&v->pt.table);
}

const char *sfs_pt_off_reason(struct sfs_view *v)
{
	const char *off = atomic_load(&v->pt.off);

	if (off)
		return off;
	if ((off = v->prof->no_passthrough))
		return off;
	return atomic_load(&v->fuse_io.passthrough) ? NULL : "the kernel did not offer it";
}

static struct sfs_pt_entry *entry_at(struct sfs_hlink *l)
{
	return sfs_htab_entry(l, struct sfs_pt_entry, link);
}

unsigned sfs_pt_writers(struct sfs_view *v)
{
	struct sfs_hlink *l, *next;
	unsigned n = 0;

	sfs_htab_for_each_safe(l, next, &v->pt.table)
		n += entry_at(l)->writers > 0;
	return n;
}

static uint64_t hash_of(const struct sfs_node *n)
{
	return sfs_hash_inode(n->dev, n->ino);
}

/* n's backing file in the view, or NULL. Under pt->lock. */
static struct sfs_pt_entry *entry_of(struct sfs_passthrough *pt, const struct sfs_node *n)
{
	uint64_t h = hash_of(n);
	struct sfs_hlink *l;

	if (!sfs_htab_ready(&pt->table))
		return NULL;
	sfs_htab_for_each_match(l, &pt->table, h)
		if (entry_at(l)->node == n)
			return entry_at(l);
	return NULL;
}

/* Whether the view's table is there, made now if this is its first registration. */
static bool table_made(struct sfs_passthrough *pt)
{
	return sfs_htab_ready(&pt->table) || !sfs_htab_init(&pt->table, PT_BUCKETS);
}

static void add_entry(struct sfs_passthrough *pt, struct sfs_pt_entry *e)
{
	sfs_htab_insert(&pt->table, &e->link, hash_of(e->node));
}

static void remove_entry(struct sfs_passthrough *pt, struct sfs_pt_entry *e)
{
	sfs_htab_remove(&pt->table, &e->link);
}

static bool same_key(struct sfs_cred_key a, struct sfs_cred_key b)
{
	return a.uid == b.uid && a.gid == b.gid && a.groups == b.groups;
}

/* Whether the caller's writes to the file open as fd show a privilege (writer_may_share): they
 * then run with the caller's own credentials, everyone else's with nobody's, which write
 * alike. */
static bool writes_privileged(struct sfs_view *v, const struct stat *st)
{
	return sfs_creds_write_privileged(v->svc->backing->resuid, v->svc->backing->resgid, st);
}

/* Whether a registration made by this open should carry the caller's own credentials: a
 * privileged writer's; a privileged reader's too when the file is the caller's and nobody
 * else may write it (a root-owned 0644 file), since then the writers to come are the caller
 * again, who can share it (writer_may_share). Anyone else's: nobody's. */
static bool registers_as_caller(struct sfs_view *v, const struct stat *st, bool writes)
{
	if (!writes_privileged(v, st))
		return false;
	if (writes)
		return true;
	return st->st_uid == sfs_creds_uid() && !(st->st_mode & 022);
}

/* A new backing file for n, open as fd, with the credentials its I/O will run with
 * (registers_as_caller), for the view's table. Off for the view after any failure. */
static struct sfs_pt_entry *register_backing(struct sfs_view *v, const struct sfs_node *n,
                                             int fd, const struct stat *st, bool writes)
{
	struct sfs_pt_entry *e = table_made(&v->pt) ? calloc(1, sizeof(*e)) : NULL;
	bool as_caller = registers_as_caller(v, st, writes);
	int id = e ? sfs_creds_backing_begin(as_caller) : -ENOMEM;

	if (e && !id) {
		id = sfs_fuse_io_backing_open(&v->fuse_io, fd);
		sfs_creds_backing_end();
	}
	if (id <= 0) {
		free(e);
		snprintf(v->pt.error, sizeof(v->pt.error), "the kernel refused a backing file: %s",
		         strerror(-id));
		atomic_store(&v->pt.off, v->pt.error);
		syslog(LOG_WARNING, "%s: view at %s: %s; its files take the daemon path from now on",
		       v->source, v->mountpoint, v->pt.error);
		return NULL;
	}
	e->node = n;
	e->id = id;
	e->nobody = !as_caller;
	e->moves_atime = first_atime(v, &(struct stat){0}) != NO_ATIME;
	e->key = sfs_creds_key();
	atomic_fetch_add(&v->pt.backing_files, 1);
	return e;
}

/* What a privileged writer's write shows that nobody's would not, on a file with no set-id
 * bit: only the blocks ext4 keeps for root, which nobody's write cannot take (ENOSPC sooner,
 * a refusal, never a grant). Both remove security.capability. So such a writer shares a
 * reader's registration rather than being refused (xfstests generic/079: root appending to
 * a file its own process reads). A set-id bit set after the open is cleared by the next of
 * its writes, where root's own would keep it (contract §4.4). */
static bool has_setid_bits(const struct stat *st)
{
	return !st || (st->st_mode & (S_ISUID | S_ISGID));
}

/* The kernel's one backing file per inode is shared by every open of the node in this view,
 * and its I/O runs with the credentials of whoever registered it. A reader registers as
 * nobody, so anyone may share it for reading: reads do the same whoever reads. A writer
 * shares a registration only where its writes give the same result as its own would: one of
 * its own credentials, or nobody's for a writer without a privilege a write can show (root
 * keeps set-id bits, and so does a member of the group of a set-group-ID file without group
 * execute; root and ext4's resuid/resgid use the reserved blocks), or of a privileged writer
 * whose writes would keep nothing nobody's clear (has_setid_bits). Anything else would let
 * one user's writes run with another's power, or root's with less: the open is refused with
 * EBUSY while the other registration is open. */
static bool writer_may_share(struct sfs_view *v, const struct sfs_pt_entry *e,
                             const struct stat *st)
{
	if (!e->nobody)
		return same_key(e->key, sfs_creds_key());
	return !writes_privileged(v, st) || !has_setid_bits(st);
}

/* Whether the node's attributes are lent to a view other than v (attr_timeout_of_made), which
 * v's writer open is about to change unseen: then they are taken back, for the caller to drop. */
static bool attrs_taken_back(const struct sfs_view *v, struct sfs_node *n)
{
	unsigned int lent = atomic_load(&n->attrs_lent);

	return lent && lent != v->slot + 1 && atomic_compare_exchange_strong(&n->attrs_lent, &lent, 0);
}

int pt_open(struct sfs_view *v, struct sfs_node *n, int fd, const struct stat *st, bool writes,
            bool made)
{
	struct sfs_pt_entry *e;
	bool first_writer = false, first_reader = false;
	int id;

	if (!S_ISREG(n->type))
		return 0;
	/* under the lock a remount takes to put a profile without passthrough in force, so no
	 * writer passes through after it counted none (sfs_pt_writers) */
	pthread_mutex_lock(&v->pt.lock);
	e = entry_of(&v->pt, n);
	if (sfs_pt_off_reason(v)) {
		/* the daemon's path, unless a reader opened the node by passthrough before a
		 * remount turned it off: the kernel then takes every open of the inode only by
		 * passthrough, which no write may take past the view's limits now */
		if (e && writes) {
			pthread_mutex_unlock(&v->pt.lock);
			return -EBUSY;
		}
		if (!e) {
			pthread_mutex_unlock(&v->pt.lock);
			return 0;
		}
	}
	if (e && writes && !writer_may_share(v, e, st)) {
		pthread_mutex_unlock(&v->pt.lock);
		return -EBUSY;
	}
	if (!e && (e = register_backing(v, n, fd, st, writes)))
		add_entry(&v->pt, e);
	if (!e) {
		pthread_mutex_unlock(&v->pt.lock);
		return 0;
	}
	e->opens++;
	if (writes) {
		e->writers++;
		first_writer = atomic_fetch_add(&n->pt_writers, 1) == 0;
	}
	if (e->moves_atime)
		first_reader = atomic_fetch_add(&n->pt_atime_opens, 1) == 0;
	id = e->id;
	pthread_mutex_unlock(&v->pt.lock);
	/* the other views' cached pages and attributes are now this open's to change unseen, and
	 * so are the attributes this view's kernel has from before the open (attr_timeout_of),
	 * unless the object is new: its kernel hears of it in this open's reply */
	if (first_writer) {
		sfs_coh_data(v, n, 0, 0);
		if (!made)
			sfs_coh_own_data(v, n, -1, 0);
	} else if (first_reader || (writes && attrs_taken_back(v, n)))
		sfs_coh_attr(v, n);
	return id;
}

void pt_release(struct sfs_view *v, struct sfs_node *n, bool writes)
{
	struct sfs_pt_entry *e;
	bool last_writer = false;

	pthread_mutex_lock(&v->pt.lock);
	if ((e = entry_of(&v->pt, n))) {
		if (writes) {
			e->writers--;
			last_writer = atomic_fetch_sub(&n->pt_writers, 1) == 1;
		}
		if (e->moves_atime)
			atomic_fetch_sub(&n->pt_atime_opens, 1);
		if (--e->opens == 0) {
			remove_entry(&v->pt, e);
			if (v->se) { /* else the connection, and the id with it, is gone */
				/* the kernel asks CAP_SYS_ADMIN, which a thread acting for a user
				 * lacks (creds.h) */
				sfs_priv_begin(SFS_PRIV_ADMIN);
				sfs_fuse_io_backing_close(&v->fuse_io, e->id);
				sfs_priv_end();
			}
			atomic_fetch_sub(&v->pt.backing_files, 1);
			free(e);
		}
	}
	pthread_mutex_unlock(&v->pt.lock);
	if (last_writer)
		sfs_coh_data(v, n, 0, 0);
}

/* A node open by passthrough for writing changes behind every kernel's back, the writer's own
 * included: writes through a shared mapping go to the backing's pages and ext4 moves mtime and
 * ctime at the fault, and no request tells the view (xfstests generic/080, generic/215). So its
 * attributes are not cached anywhere while it is so open. A passthrough read changes only
 * atime, which the reader's own kernel drops itself; other views must ask. */
double attr_timeout_of(const struct sfs_view *v, const struct sfs_node *n)
{
	int atime_opens;
	struct sfs_passthrough *pt = (struct sfs_passthrough *)&v->pt;
	struct sfs_pt_entry *e;

	if (!n)
		return v->attr_timeout;
	if (atomic_load(&n->pt_writers) > 0)
		return 0;
	if (!(atime_opens = atomic_load(&n->pt_atime_opens)))
		return v->attr_timeout;
	pthread_mutex_lock(&pt->lock);
	if ((e = entry_of(pt, n)) && e->moves_atime)
		atime_opens -= e->opens;
	pthread_mutex_unlock(&pt->lock);
	return atime_opens > 0 ? 0 : v->attr_timeout;
}

/* A file this open just made is empty, and nothing but this open has it: what would change its
 * attributes unseen needs data first, and the kernel drops its own attributes at a write or a
 * truncate, and another view's writer open drops them (pt_open, attrs_taken_back). So the
 * reply may let the kernel keep them for the tick of its clock it needs to check the open's
 * permission (MAY_OPEN under default_permissions), which would otherwise cost a GETATTR on
 * every create. */
double attr_timeout_of_made(const struct sfs_view *v, struct sfs_node *n)
{
	double t = attr_timeout_of(v, n);

	if (t != 0 || v->attr_timeout <= 0)
		return t;
	atomic_store(&n->attrs_lent, v->slot + 1);
	return 1e-6;
}

void pt_record(struct sfs_view *v, const struct sfs_node *n, struct sfs_ho_file *rec)
{
	struct sfs_pt_entry *e;

	pthread_mutex_lock(&v->pt.lock);
	if ((e = entry_of(&v->pt, n))) {
		rec->backing = e->id;
		rec->flags |= (e->nobody ? SFS_HO_PT_NOBODY : 0) | (e->moves_atime ? SFS_HO_PT_ATIME : 0);
		rec->key_uid = e->key.uid;
		rec->key_gid = e->key.gid;
		rec->key_groups = e->key.groups;
	}
	pthread_mutex_unlock(&v->pt.lock);
}

void pt_adopt(struct sfs_view *v, struct sfs_node *n, const struct sfs_ho_file *rec)
{
	struct sfs_pt_entry *e;
	bool writes = rec->flags & SFS_HO_WRITES;

	pthread_mutex_lock(&v->pt.lock);
	if (!(e = entry_of(&v->pt, n)) && table_made(&v->pt) && (e = calloc(1, sizeof(*e)))) {
		e->node = n;
		e->id = rec->backing;
		e->nobody = rec->flags & SFS_HO_PT_NOBODY;
		e->moves_atime = rec->flags & SFS_HO_PT_ATIME;
		e->key = (struct sfs_cred_key){rec->key_uid, rec->key_gid, rec->key_groups};
		add_entry(&v->pt, e);
		atomic_fetch_add(&v->pt.backing_files, 1);
	}
	if (e) {
		e->opens++;
		if (writes) {
			e->writers++;
			atomic_fetch_add(&n->pt_writers, 1);
		}
		if (e->moves_atime)
			atomic_fetch_add(&n->pt_atime_opens, 1);
	}
	pthread_mutex_unlock(&v->pt.lock);
}
