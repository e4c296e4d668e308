/* status: the JSON a daemon reports about itself (the CLI prints it: status_print.c). */
#include "status.h"

#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "locks.h"
#include "names.h"
#include "passthrough.h"
#include "util.h"
#include "profile.h"

static json_object *split_list(const char *list)
{
	json_object *a = json_object_new_array();
	char *copy = strdup(list ? list : ""), *save = NULL;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_object_array_add(a, json_object_new_string(t));
	free(copy);
	return a;
}

/* Where the view's open files' data goes, and why not to the kernel's passthrough. */
static json_object *data_path_json(struct sfs_view *v)
{
	json_object *o = json_object_new_object();
	const char *off = sfs_pt_off_reason(v);

	json_object_object_add(o, "passthrough", json_object_new_boolean(!off));
	if (off)
		json_object_object_add(o, "why_not", json_object_new_string(off));
	json_object_object_add(o, "backing_files",
	                       json_object_new_int(atomic_load(&v->pt.backing_files)));
	return o;
}

/* How the view's requests reach the daemon, and why not through io_uring. */
static json_object *transport_json(struct sfs_view *v)
{
	json_object *o = json_object_new_object();
	char why[160];
	const char *kind = sfs_fuse_io_transport(&v->fuse_io, why, sizeof(why));

	json_object_object_add(o, "kind", json_object_new_string(kind));
	if (strcmp(kind, "io_uring"))
		json_object_object_add(o, "why_not", json_object_new_string(why));
	else
		json_object_object_add(o, "queues",
		                       json_object_new_int((int)sfs_fuse_io_uring_queues(&v->fuse_io)));
	return o;
}

/* An idmapped view's map, one object per extent: which ids, first on disk, first shown, how
 * many. */
static json_object *idmap_json(const struct sfs_idmap *m)
{
	json_object *list = json_object_new_array();
	const struct { const char *ids; const struct sfs_idmap_extent *e; int n; } kinds[] = {
		{"uid", m->uid, m->nuid}, {"gid", m->gid, m->ngid}};

	for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
		for (int i = 0; i < kinds[k].n; i++) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "ids", json_object_new_string(kinds[k].ids));
			json_object_object_add(o, "disk", json_object_new_int64(kinds[k].e[i].disk));
			json_object_object_add(o, "shown", json_object_new_int64(kinds[k].e[i].host));
			json_object_object_add(o, "count", json_object_new_int64(kinds[k].e[i].count));
			json_object_array_add(list, o);
		}
	return list;
}

/* The options as fields (contract §2). */
static json_object *options_json(const struct sfs_opts *vo)
{
	json_object *opts = json_object_new_object();

	json_object_object_add(opts, "acl", json_object_new_boolean(vo->acl));
	json_object_object_add(opts, "user_xattr", json_object_new_boolean(vo->user_xattr));
	json_object_object_add(opts, "casefold",
	                       json_object_new_string(sfs_casefold_name(vo->casefold)));
	json_object_object_add(opts, "quota", json_object_new_string(
		vo->usrquota && vo->grpquota ? "quota" :
		vo->usrquota ? "usrquota" : vo->grpquota ? "grpquota" : "none"));
	if (vo->size_limit)
		json_object_object_add(opts, "size", json_object_new_uint64(vo->size_limit));
	if (vo->inode_limit)
		json_object_object_add(opts, "inodes", json_object_new_uint64(vo->inode_limit));
	json_object_object_add(opts, "ro", json_object_new_boolean(vo->ro));
	json_object_object_add(opts, "subdir", json_object_new_string(vo->subdir));
	if (sfs_idmap_active(&vo->idmap))
		json_object_object_add(opts, "idmap", idmap_json(&vo->idmap));
	json_object_object_add(opts, "df", json_object_new_string(sfs_df_name(vo->df)));
	json_object_object_add(opts, "cache", json_object_new_string(
		vo->cache == SFS_CACHE_WRITEBACK ? "writeback" : "strict"));
	json_object_object_add(opts, "mount_flags", split_list(vo->flag_names));
	return opts;
}

/* What the options in force mean (profile.h): the flags of the view's mount and of its clone
 * of the backing, whether its files may pass through (and which option says no), whether it
 * holds requests to limits. Always what a fresh mount with the same options has. */
static json_object *profile_json(const struct sfs_profile *p)
{
	json_object *o = json_object_new_object();
	char names[128];

	json_object_object_add(o, "mount", split_list(
		sfs_profile_attr_names(p->mount_attrs, names, sizeof(names))));
	json_object_object_add(o, "backing", split_list(
		sfs_profile_attr_names(p->backing_attrs, names, sizeof(names))));
	json_object_object_add(o, "passthrough", json_object_new_boolean(!p->no_passthrough));
	if (p->no_passthrough)
		json_object_object_add(o, "daemon_path_for", json_object_new_string(p->no_passthrough));
	json_object_object_add(o, "limits", json_object_new_boolean(p->limits));
	return o;
}

static json_object *view_json(const struct sfs_view *v)
{
	const struct sfs_profile *p = v->prof; /* one profile for the whole answer */
	json_object *o = json_object_new_object();
	char ns[48], effective[SFS_EFFECTIVE_MAX];

	json_object_object_add(o, "mountpoint", json_object_new_string(v->mountpoint));
	json_object_object_add(o, "requested", json_object_new_string(p->opts.requested));
	json_object_object_add(o, "effective", json_object_new_string(
		sfs_opts_format(&p->opts, effective, sizeof(effective))));
	json_object_object_add(o, "options", options_json(&p->opts));
	json_object_object_add(o, "profile", profile_json(p));
	json_object_object_add(o, "open_files", json_object_new_int(atomic_load(&v->open_files)));
	json_object_object_add(o, "data_path", data_path_json((struct sfs_view *)v));
	json_object_object_add(o, "transport", transport_json((struct sfs_view *)v));
	json_object_object_add(o, "requests", json_object_new_uint64(atomic_load(&v->requests)));
	/* as readlink /proc/PID/ns/mnt names it, so a container manager can find its views */
	snprintf(ns, sizeof(ns), "mnt:[%llu]", (unsigned long long)v->ns_ino);
	json_object_object_add(o, "mount_ns", json_object_new_string(ns));
	return o;
}

/* A CLOCK_REALTIME time in ms as ISO 8601 UTC, to the millisecond. */
static json_object *iso_time(int64_t ms)
{
	time_t t = ms / 1000;
	char buf[64], full[80];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(full, sizeof(full), "%s.%03dZ", buf, (int)(ms % 1000));
	return json_object_new_string(full);
}

json_object *sfs_status_daemon(struct sfs_daemon *d)
{
	json_object *o = json_object_new_object(), *b = json_object_new_object();
	json_object *cache = json_object_new_object(), *views = json_object_new_array();
	const struct sfs_backing *bk = &d->backing;
	struct sfs_view *v;
	char buf[64];
		json_object_object_add(o, "source", json_object_new_string(d->source));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "started", iso_time(d->ho.daemon.started_ms));
	json_object_object_add(o, "generation", json_object_new_uint64(d->ho.daemon.generation));
	json_object_object_add(o, "took_over", d->ho.daemon.took_over_ms ?
	                       iso_time(d->ho.daemon.took_over_ms) : NULL);
	json_object_object_add(o, "keeper", d->keeper.pid ? json_object_new_int(d->keeper.pid) : NULL);
	json_object_object_add(o, "crashes", json_object_new_uint64(d->ho.daemon.crashes_total));
	json_object_object_add(o, "failed", d->ho.daemon.failed[0] ?
	                       json_object_new_string(d->ho.daemon.failed) : NULL);
	snprintf(buf, sizeof(buf), "%u:%u", major(bk->rdev), minor(bk->rdev));
	json_object_object_add(b, "device", json_object_new_string(buf));
	json_object_object_add(b, "path", json_object_new_string(bk->device));
	json_object_object_add(b, "fstype", json_object_new_string("ext4"));
	json_object_object_add(b, "uuid", json_object_new_string(bk->uuid));
	json_object_object_add(b, "mode", json_object_new_string(
		bk->mode == SFS_SHARE_EXISTING ? "shared-existing" : "exclusive"));
	json_object_object_add(b, "loop", bk->loop_fd >= 0 ? json_object_new_string(bk->device)
	                                                   : NULL);
	json_object_object_add(b, "options", split_list(bk->options));
	json_object_object_add(o, "shared_with", split_list(d->shared_with));
	if (bk->mode == SFS_SHARE_EXISTING)
		json_object_object_add(b, "existing_at", json_object_new_string(bk->existing_at));
	json_object_object_add(o, "backing", b);
	json_object_object_add(cache, "inodes", json_object_new_uint64(sfs_itab_count(&d->svc.itab)));
	pthread_mutex_lock(&d->svc.fdc.lock);
	json_object_object_add(cache, "fds_open", json_object_new_uint64(sfs_lru_count(&d->svc.fdc.lru)));
	pthread_mutex_unlock(&d->svc.fdc.lock);
	json_object_object_add(cache, "fd_limit", json_object_new_uint64(d->svc.fdc.limit));
	json_object_object_add(o, "cache", cache);
	json_object_object_add(o, "casefold_collisions",
	                       json_object_new_uint64(sfs_names_collisions(&d->svc)));
	json_object_object_add(o, "quota", sfs_quota_status(&d->svc.quota));
	/* the lock owners it keeps a backing description for (locks.h) */
	json_object_object_add(o, "lock_owners", json_object_new_uint64(sfs_locks_count(d->svc.locks)));
	sfs_registry_read_lock(&d->views);
	sfs_for_each_view(&d->views, v)
		if (!atomic_load(&v->ended))
			json_object_array_add(views, view_json(v));
	sfs_registry_read_unlock(&d->views);
	json_object_object_add(o, "views", views);
	return o;
}
