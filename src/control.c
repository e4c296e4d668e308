/* The control protocol: framing, validation and descriptor passing. Both halves (CLI and
 * daemon) use these functions, so the bounds are checked in one place. */
#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

struct wire_header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
};

void sfs_msg_init(struct sfs_msg *m, uint16_t type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->fds[0] = m->fds[1] = -1;
}

void sfs_msg_free(struct sfs_msg *m)
{
	free(m->buf);
	m->buf = NULL;
	m->len = m->cap = 0;
}

int sfs_msg_add(struct sfs_msg *m, const char *key, const char *value)
{
	size_t need = strlen(key) + 1 + strlen(value) + 1;

	if (strchr(key, '=') || m->len + need > SFS_MSG_MAX)
		return -EMSGSIZE;
	if (m->len + need > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 4096;
		char *nb;
		while (cap < m->len + need)
			cap *= 2;
		nb = realloc(m->buf, cap);
		if (!nb)
			return -ENOMEM;
		m->buf = nb;
		m->cap = cap;
	}
	m->len += sprintf(m->buf + m->len, "%s=%s", key, value) + 1;
	return 0;
}

const char *sfs_msg_get(const struct sfs_msg *m, const char *key)
{
	size_t klen = strlen(key);

	for (size_t off = 0; off < m->len; off += strlen(m->buf + off) + 1)
		if (!strncmp(m->buf + off, key, klen) && m->buf[off + klen] == '=')
			return m->buf + off + klen + 1;
	return NULL;
}

int sfs_msg_validate(const char *buf, size_t len)
{
	size_t off = 0;

	if (len > SFS_MSG_MAX)
		return -EMSGSIZE;
	while (off < len) {
		const char *end = memchr(buf + off, '\0', len - off);
		const char *eq;
		if (!end)
			return -EPROTO;
		eq = memchr(buf + off, '=', end - (buf + off));
		if (!eq || eq == buf + off)
			return -EPROTO;
		off = end - buf + 1;
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		c += w;
		n -= w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = recv(fd, c, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		c += r;
		n -= r;
	}
	return 0;
}

int sfs_msg_send(int sock, const struct sfs_msg *m)
{
	struct wire_header h = {SFS_PROTO_MAGIC, SFS_PROTO_VERSION, m->type, m->len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * SFS_MSG_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t w;

	if (m->nfds > 0) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * m->nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * m->nfds);
		memcpy(CMSG_DATA(c), m->fds, sizeof(int) * m->nfds);
	}
	do
		w = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	if ((size_t)w < sizeof(h)) {
		int rc = write_all(sock, (char *)&h + w, sizeof(h) - w);
		if (rc)
			return rc;
	}
	return write_all(sock, m->buf, m->len);
}

static void take_fds(struct sfs_msg *m, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		int n;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->nfds < SFS_MSG_FDS)
				m->fds[m->nfds++] = fd;
			else
				close(fd); /* more than the protocol allows: never keep it */
		}
	}
}

int sfs_msg_recv(int sock, struct sfs_msg *m)
{
	struct wire_header h;
	union {
		char buf[CMSG_SPACE(sizeof(int) * (SFS_MSG_FDS + 2))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	                    .msg_controllen = sizeof(u.buf)};
	ssize_t r;
	int rc;

	sfs_msg_init(m, 0);
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ECONNRESET;
	take_fds(m, &mh);
	if ((size_t)r < sizeof(h) && (rc = read_all(sock, (char *)&h + r, sizeof(h) - r)))
		goto fail;
	rc = -EPROTO;
	if (h.magic != SFS_PROTO_MAGIC || h.version != SFS_PROTO_VERSION)
		goto fail;
	rc = -EMSGSIZE;
	if (h.len > SFS_MSG_MAX)
		goto fail;
	m->type = h.type;
	m->buf = malloc(h.len + 1);
	rc = -ENOMEM;
	if (!m->buf)
		goto fail;
	m->cap = h.len + 1;
	if ((rc = read_all(sock, m->buf, h.len)))
		goto fail;
	m->len = h.len;
	if ((rc = sfs_msg_validate(m->buf, m->len)))
		goto fail;
	return 0;
fail:
	if (rc == -ECONNRESET)
		rc = -EPROTO; /* the peer ended mid-frame: a truncated message, not a mere probe */
	for (int i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	m->nfds = 0;
	sfs_msg_free(m);
	return rc;
}

void sfs_socket_path(const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.sock", SFS_RUNDIR, key);
}

void sfs_lock_path(const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.lock", SFS_RUNDIR, key);
}
