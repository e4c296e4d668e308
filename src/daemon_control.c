/* The control socket's server (the protocol is control.c's): each connection is served by a
 * thread of its own, which reads the request and sends the reply without control_lock and
 * answers under it, so that a client that stalls holds up only itself; the control loop's
 * watchdog cuts a connection off past its deadline. */
#include "daemon_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "control.h"
#include "status.h"
#include "util.h"

/* How long a control client may take to send its request, and to read the reply. */
#define CONN_TIMEOUT_MS 2000
#define QUOTA_SCAN_WAIT_MS 5000 /* the command waits 10 s for an answer (client.c) */

/* A reply: rc (0 or errno), the one-line error, and one more field if key is set. */
static void reply_fields(struct sfs_msg *m, int rc, const char *msg, const char *key,
                         const char *value)
{
	char num[16];

	sfs_msg_init(m, SFS_REPLY);
	snprintf(num, sizeof(num), "%d", rc < 0 ? -rc : rc);
	sfs_msg_add(m, "rc", num);
	if (msg)
		sfs_msg_add(m, "msg", msg);
	if (key && value)
		sfs_msg_add(m, key, value);
}

static void reply(struct sfs_msg *m, int rc, const char *msg, const char *json)
{
	reply_fields(m, rc, msg, "json", json);
}

/* Reads the optional limit fields of a quota set request; false on a malformed value. */
static bool limit_fields(const struct sfs_msg *req, uint64_t soft[SFS_QNRES],
                         uint64_t hard[SFS_QNRES], unsigned *which)
{
	static const struct { const char *key; unsigned bit; bool hard; int res; } f[] = {
		{"bsoft", SFS_QSET_BSOFT, false, SFS_QBYTES}, {"bhard", SFS_QSET_BHARD, true, SFS_QBYTES},
		{"isoft", SFS_QSET_ISOFT, false, SFS_QINODES}, {"ihard", SFS_QSET_IHARD, true, SFS_QINODES}};
	unsigned long long v;

	*which = 0;
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		const char *s = sfs_msg_get(req, f[i].key);
		if (!s)
			continue;
		if (!sfs_parse_uint(s, &v) || v > INT64_MAX)
			return false;
		(f[i].hard ? hard : soft)[f[i].res] = v;
		*which |= f[i].bit;
	}
	return true;
}

/* Each view's tree: its usage (the whole backing's, or its subdir's when kept apart) and
 * its own limits. */
static json_object *views_usage(struct sfs_daemon *d)
{
	json_object *a = json_object_new_array();
	struct sfs_view *v;

	sfs_registry_read_lock(&d->views);
	sfs_for_each_view(&d->views, v) {
		json_object *o;
		struct sfs_qentry e;
		if (atomic_load(&v->ended))
			continue;
		const struct sfs_opts *vo = &v->prof->opts;
		o = json_object_new_object();
		json_object_object_add(o, "mountpoint", json_object_new_string(v->mountpoint));
		json_object_object_add(o, "subdir", json_object_new_string(vo->subdir));
		if (v->qroot >= 0 || !strcmp(vo->subdir, "/")) {
			sfs_quota_tree(&d->svc.quota, v->qroot, &e);
			json_object_object_add(o, "bytes", json_object_new_int64(e.used[SFS_QBYTES]));
			json_object_object_add(o, "inodes", json_object_new_int64(e.used[SFS_QINODES]));
		}
		json_object_object_add(o, "size", json_object_new_int64((int64_t)vo->size_limit));
		json_object_object_add(o, "inode_limit",
		                       json_object_new_int64((int64_t)vo->inode_limit));
		json_object_array_add(a, o);
	}
	sfs_registry_read_unlock(&d->views);
	return a;
}

/* `strictfs quota set|grace|report|check`: rc, and a JSON answer for report and check. */
static int quota_request(struct sfs_daemon *d, const struct sfs_msg *req, json_object **out,
                         char *err, size_t errlen)
{
	const char *op = sfs_msg_get(req, "op"), *type = sfs_msg_get(req, "type");
	const char *id = sfs_msg_get(req, "id");
	uint64_t soft[SFS_QNRES] = {0}, hard[SFS_QNRES] = {0};
	unsigned long long n;
	unsigned which;

	if (op && !strcmp(op, "report")) {
		*out = sfs_quota_report(&d->svc.quota);
		json_object_object_add(*out, "views", views_usage(d));
		return 0;
	}
	if (op && !strcmp(op, "check")) {
		bool same;
		*out = sfs_quota_check(&d->svc.quota, &same);
		json_object_object_add(*out, "same", json_object_new_boolean(same));
		return 0;
	}
	if (op && !strcmp(op, "set") && type && id && sfs_parse_uint(id, &n) && n < UINT32_MAX &&
	    (!strcmp(type, "user") || !strcmp(type, "group")) && limit_fields(req, soft, hard, &which))
		return sfs_quota_set(&d->svc.quota, strcmp(type, "user") ? SFS_QGRP : SFS_QUSR, (uint32_t)n,
		                     soft, hard, which, err, errlen) ? -EINVAL : 0;
	if (op && !strcmp(op, "grace")) {
		time_t grace[SFS_QNRES] = {0, 0};
		const char *b = sfs_msg_get(req, "bgrace"), *i = sfs_msg_get(req, "igrace");
		which = 0;
		if (b && sfs_parse_duration(b, &grace[SFS_QBYTES]))
			which |= SFS_QSET_BGRACE;
		if (i && sfs_parse_duration(i, &grace[SFS_QINODES]))
			which |= SFS_QSET_IGRACE;
		if ((b && !(which & SFS_QSET_BGRACE)) || (i && !(which & SFS_QSET_IGRACE)))
			goto malformed;
		return sfs_quota_set_grace(&d->svc.quota, grace, which, err, errlen) ? -EINVAL : 0;
	}
malformed:
	sfs_errf(err, errlen, "control", "malformed quota request");
	return -EPROTO;
}

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The watchdog cuts the connection off ms from now (0: never). */
static void conn_deadline(struct sfs_daemon *d, int slot, int ms)
{
	pthread_mutex_lock(&d->conns_lock);
	d->conns[slot].deadline_ms = ms ? now_ms() + ms : 0;
	pthread_mutex_unlock(&d->conns_lock);
}

/* Answers one request under control_lock; the reply goes out after. */
static void answer(struct sfs_daemon *d, struct sfs_msg *req, struct sfs_msg *rep)
{
	char err[ERRLEN] = "";
	int rc;

	if (d->closing) {
		reply(rep, ESHUTDOWN, "strictfs: control: the daemon is shutting down", NULL);
		return;
	}
	switch (req->type) {
	case SFS_REQ_ADD_VIEW:
		rc = add_view(d, req, err, sizeof(err));
		reply(rep, rc, rc ? err : NULL, NULL);
		break;
	case SFS_REQ_STATUS: {
		json_object *o = sfs_status_daemon(d);
		reply(rep, 0, NULL, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
		break;
	}
	case SFS_REQ_REMOUNT: {
		unsigned long flags = 0, old_flags = 0;
		uint64_t mnt_id = 0;
		char num[32];
		rc = remount_view(d, req, &flags, &old_flags, &mnt_id, err, sizeof(err));
		snprintf(num, sizeof(num), "%lu", flags);
		reply_fields(rep, rc, rc ? err : NULL, "mount_flags", num);
		snprintf(num, sizeof(num), "%lu", old_flags);
		sfs_msg_add(rep, "old_mount_flags", num);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)mnt_id);
		sfs_msg_add(rep, "mnt_id", num);
		break;
	}
	case SFS_REQ_QUOTA: {
		json_object *o = NULL;
		rc = quota_request(d, req, &o, err, sizeof(err));
		reply(rep, rc, rc ? err : NULL,
		      o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL);
		json_object_put(o);
		break;
	}
	case SFS_REQ_UPGRADE: {
		char gen[32], pid[32];
		snprintf(gen, sizeof(gen), "%llu", (unsigned long long)d->ho.daemon.generation);
		snprintf(pid, sizeof(pid), "%d", getpid());
		rc = hand_over(d, err, sizeof(err));
		reply_fields(rep, rc, rc ? err : NULL, "generation", gen);
		sfs_msg_add(rep, "pid", pid);
		break;
	}
	case SFS_REQ_STOP:
		atomic_store(&d->stopping, true);
		sfs_daemon_wake(d);
		reply(rep, 0, NULL, NULL);
		break;
	default:
		reply(rep, EPROTO, "strictfs: control: unknown request", NULL);
	}
}

/* A view that would enforce limits is answered once the start-up scan has ended, so that a
 * scan that failed refuses it (sfs_quota_enforceable) rather than a race deciding. Waited for
 * here, outside control_lock, and for less than the command waits for its answer; a longer
 * scan goes on behind the view, whose changes wait for it. */
static void settle_quota_scan(struct sfs_daemon *d, const struct sfs_msg *req)
{
	const char *optstr = sfs_msg_get(req, "options");
	char err[ERRLEN];
	struct sfs_opts o;

	if ((req->type != SFS_REQ_ADD_VIEW && req->type != SFS_REQ_REMOUNT) || !optstr ||
	    sfs_opts_parse(optstr, &o, err, sizeof(err)) || !sfs_opts_enforce_quota(&o))
		return;
	sfs_quota_wait_scan(&d->svc.quota, QUOTA_SCAN_WAIT_MS);
}

static void serve_connection(struct sfs_daemon *d, int slot, int conn)
{
	struct timeval tv = {CONN_TIMEOUT_MS / 1000, 0};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct sfs_msg req, rep;
	int rc;

	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
		syslog(LOG_WARNING, "%s: control request from uid %d refused", d->source,
		       (int)cred.uid);
		reply(&rep, EPERM, "strictfs: control: only root may use the control socket", NULL);
		goto send;
	}
	rc = sfs_msg_recv(conn, &req);
	if (rc == -ECONNRESET)
		return; /* a command that only checked the daemon is there */
	if (rc) {
		syslog(LOG_WARNING, "%s: malformed control request: %s", d->source, strerror(-rc));
		reply(&rep, -rc, "strictfs: control: malformed request", NULL);
		goto send;
	}
	conn_deadline(d, slot, 0); /* adding a view may take its time; the client waits */
	settle_quota_scan(d, &req);
	pthread_mutex_lock(&d->control_lock);
	answer(d, &req, &rep);
	pthread_mutex_unlock(&d->control_lock);
	for (int i = 0; i < req.nfds; i++)
		if (req.fds[i] >= 0)
			close(req.fds[i]);
	sfs_msg_free(&req);
	conn_deadline(d, slot, CONN_TIMEOUT_MS);
send:
	sfs_msg_send(conn, &rep);
	sfs_msg_free(&rep);
	if (d->handed_over)
		_exit(0); /* the keeper execs the successor; nothing here is to be undone */
}

struct conn_start {
	struct sfs_daemon *d;
	int slot, fd;
};

static void *conn_thread(void *arg)
{
	struct conn_start *c = arg;
	struct sfs_daemon *d = c->d;

	serve_connection(d, c->slot, c->fd);
	pthread_mutex_lock(&d->conns_lock);
	close(c->fd); /* under the lock: the watchdog never shuts down a reused number */
	d->conns[c->slot].fd = -1;
	d->nconns--;
	pthread_cond_broadcast(&d->conns_idle);
	pthread_mutex_unlock(&d->conns_lock);
	sfs_daemon_wake(d); /* a slot is free: the loop listens again */
	free(c);
	return NULL;
}

/* Each connection is served by its own thread, so that a client that stalls before or while
 * sending its request (or does not read the reply) holds up only itself. */
void accept_one(struct sfs_daemon *d)
{
	int conn = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	struct conn_start *c;
	pthread_attr_t attr;
	pthread_t t;
	int slot = -1;

	if (conn < 0)
		return;
	pthread_mutex_lock(&d->conns_lock);
	for (int i = 0; i < SFS_MAX_CONNS && slot < 0; i++)
		if (d->conns[i].fd < 0)
			slot = i;
	if (slot >= 0) {
		d->conns[slot].fd = conn;
		d->conns[slot].deadline_ms = now_ms() + CONN_TIMEOUT_MS;
		d->nconns++;
	}
	pthread_mutex_unlock(&d->conns_lock);
	c = slot >= 0 ? malloc(sizeof(*c)) : NULL;
	if (c) {
		*c = (struct conn_start){d, slot, conn};
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		if (pthread_create(&t, &attr, conn_thread, c) == 0) {
			pthread_attr_destroy(&attr);
			return;
		}
		pthread_attr_destroy(&attr);
		free(c);
	}
	syslog(LOG_WARNING, "%s: cannot serve a control connection", d->source);
	pthread_mutex_lock(&d->conns_lock);
	if (slot >= 0) {
		d->conns[slot].fd = -1;
		d->nconns--;
	}
	close(conn);
	pthread_mutex_unlock(&d->conns_lock);
}

/* Shuts down the connections past their deadline (all of them if all): their thread's read
 * or write then fails at once. Returns how many are being served. */
int conns_watchdog(struct sfs_daemon *d, bool all)
{
	long long now = now_ms();
	int n;

	pthread_mutex_lock(&d->conns_lock);
	for (int i = 0; i < SFS_MAX_CONNS; i++) {
		struct sfs_conn *c = &d->conns[i];
		if (c->fd >= 0 && (all || (c->deadline_ms && now >= c->deadline_ms))) {
			shutdown(c->fd, SHUT_RDWR);
			c->deadline_ms = 0;
		}
	}
	n = d->nconns;
	pthread_mutex_unlock(&d->conns_lock);
	return n;
}

/* The loop has ended (closing is set): connections still served are cut off and waited for. */
void conns_drain(struct sfs_daemon *d)
{
	conns_watchdog(d, true);
	pthread_mutex_lock(&d->conns_lock);
	while (d->nconns > 0)
		pthread_cond_wait(&d->conns_idle, &d->conns_lock);
	pthread_mutex_unlock(&d->conns_lock);
}
