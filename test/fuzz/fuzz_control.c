/* Fuzzes the control protocol's decoder (control.c): sfs_msg_validate on the input as a body,
 * and sfs_msg_recv on the input as the byte stream a client sends, written in chunks of
 * input-chosen size (by another thread when it exceeds the socket's buffer), with input-chosen
 * descriptors attached. The harness predicts the
 * result from a reference decoder of its own and checks that recv returns exactly that: never a
 * frame over SFS_MSG_MAX, never a malformed body; descriptors at most SFS_MSG_FDS, close-on-exec,
 * and none leaked on failure. A valid body also round-trips through sfs_msg_add and
 * sfs_msg_send/recv byte for byte.
 *
 * Input: byte 0 flags (bits 0-1: descriptors to attach, 0-3; bits 2-6 all set: "big": the
 * header's length is moved next to SFS_MSG_MAX and the body repeats the rest of the input to
 * that length; one input in 32, as a megabyte costs a thousand small ones),
 * byte 1 the chunk size of the writes (1-256), then the stream (or, for validate, the body). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "fuzz.h"

struct wire_header { /* as control.c sends it */
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
};

/* The protocol's body rule, written independently of control.c. */
static int ref_validate(const uint8_t *b, size_t len)
{
	size_t start = 0;
	bool eq = false;

	if (len > SFS_MSG_MAX)
		return -EMSGSIZE;
	for (size_t i = 0; i < len; i++) {
		if (b[i] == '\0') {
			if (!eq)
				return -EPROTO;
			start = i + 1;
			eq = false;
		} else if (b[i] == '=' && !eq) {
			if (i == start)
				return -EPROTO;
			eq = true;
		}
	}
	return start == len ? 0 : -EPROTO;
}

/* What sfs_msg_recv must return for this stream, followed by end of stream. */
static int ref_recv(const uint8_t *s, size_t len)
{
	struct wire_header h;

	if (len == 0)
		return -ECONNRESET; /* closed before sending anything */
	if (len < sizeof(h))
		return -EPROTO;
	memcpy(&h, s, sizeof(h));
	if (h.magic != SFS_PROTO_MAGIC || h.version != SFS_PROTO_VERSION)
		return -EPROTO;
	if (h.len > SFS_MSG_MAX)
		return -EMSGSIZE;
	if (len - sizeof(h) < h.len)
		return -EPROTO;
	return ref_validate(s + sizeof(h), h.len);
}

/* Every field re-added with sfs_msg_add gives back the same bytes; sfs_msg_get finds the
 * first field of each key. */
static void check_fields(const uint8_t *body, size_t len)
{
	struct sfs_msg m, r;
	int sv[2];

	sfs_msg_init(&m, SFS_REPLY);
	for (size_t off = 0; off < len;) {
		const char *f = (const char *)body + off, *eq = strchr(f, '=');
		char key[4096];
		size_t klen = (size_t)(eq - f), flen = strlen(f);
		FUZZ_CHECK(eq && klen > 0, "validated field without key");
		if (klen < sizeof(key)) {
			memcpy(key, f, klen);
			key[klen] = '\0';
			FUZZ_CHECK(sfs_msg_add(&m, key, eq + 1) == 0, "sfs_msg_add refused a field");
		}
		off += flen + 1;
	}
	if (m.len != len || (len && memcmp(m.buf, body, len))) { /* a key too long for the buffer above */
		sfs_msg_free(&m);
		return;
	}
	for (size_t off = 0; off < len; off += strlen(m.buf + off) + 1) {
		char key[4096];
		const char *f = m.buf + off, *eq = strchr(f, '='), *got;
		size_t klen = (size_t)(eq - f);
		memcpy(key, f, klen);
		key[klen] = '\0';
		got = sfs_msg_get(&m, key);
		FUZZ_CHECK(got && got <= eq + 1 && !strncmp(got - klen - 1, key, klen),
		           "sfs_msg_get('%s') did not find the first field of that key", key);
	}
	if (len < 65536 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		FUZZ_CHECK(sfs_msg_send(sv[0], &m) == 0, "send of a valid message");
		FUZZ_CHECK(sfs_msg_recv(sv[1], &r) == 0, "recv of a sent message");
		FUZZ_CHECK(r.type == SFS_REPLY && r.len == len && !memcmp(r.buf, body, len),
		           "message changed on the way");
		sfs_msg_free(&r);
		close(sv[0]);
		close(sv[1]);
	}
	sfs_msg_free(&m);
}

struct writer {
	int sock;
	const uint8_t *s;
	size_t len, chunk, off;
	int nfds;
	int fds[3];
};

/* Sends from w->off on, the descriptors with the first chunk. Returns false when the socket
 * is full (non-blocking) and the rest is left; true when all is sent, or the reader stopped. */
static bool write_some(struct writer *w)
{
	if (w->nfds && w->len && w->off == 0) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 3)];
			struct cmsghdr align;
		} u;
		struct iovec iov = {(void *)w->s, w->chunk < w->len ? w->chunk : w->len};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		                    .msg_controllen = CMSG_SPACE(sizeof(int) * w->nfds)};
		struct cmsghdr *c;
		ssize_t n;
		memset(&u, 0, sizeof(u));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * w->nfds);
		memcpy(CMSG_DATA(c), w->fds, sizeof(int) * w->nfds);
		n = sendmsg(w->sock, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN)
			return false;
		w->off = n > 0 ? (size_t)n : w->len;
	}
	while (w->off < w->len) {
		size_t n = w->len - w->off < w->chunk ? w->len - w->off : w->chunk;
		ssize_t r = send(w->sock, w->s + w->off, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EAGAIN)
			return false;
		if (r <= 0)
			return true; /* the reader has stopped: EPIPE */
		w->off += (size_t)r;
	}
	return true;
}

/* The rest of a stream larger than the socket holds, written while the reader reads. */
static void *write_rest(void *arg)
{
	struct writer *w = arg;

	write_some(w);
	shutdown(w->sock, SHUT_WR);
	return NULL;
}

static int lowest_free_fd(void)
{
	int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);

	if (fd >= 0)
		close(fd);
	return fd;
}

static void check_recv(const uint8_t *stream, size_t len, int nfds, size_t chunk)
{
	struct writer w = {.s = stream, .len = len, .chunk = chunk, .nfds = nfds};
	int sv[2], expect = ref_recv(stream, len), rc, before = lowest_free_fd();
	struct sfs_msg m;
	bool threaded = false;
	pthread_t t;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	for (int i = 0; i < nfds; i++)
		w.fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	w.sock = sv[0];
	/* Most streams fit in the socket: written first, in this thread, so that runs are
	 * reproducible; a larger one is finished by a writer thread while recv reads. */
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	if (write_some(&w)) {
		shutdown(sv[0], SHUT_WR);
	} else {
		fcntl(sv[0], F_SETFL, 0);
		if (pthread_create(&t, NULL, write_rest, &w)) {
			close(sv[0]);
			close(sv[1]);
			for (int i = 0; i < nfds; i++)
				close(w.fds[i]);
			return;
		}
		threaded = true;
	}
	rc = sfs_msg_recv(sv[1], &m);
	close(sv[1]); /* a writer still writing gets EPIPE */
	if (threaded)
		pthread_join(t, NULL);
	close(sv[0]);
	for (int i = 0; i < nfds; i++)
		close(w.fds[i]);
	FUZZ_CHECK(rc == expect, "recv returned %d, expected %d (stream of %zu bytes)", rc, expect,
	           len);
	if (rc == 0) {
		struct wire_header h;
		memcpy(&h, stream, sizeof(h));
		FUZZ_CHECK(m.len <= SFS_MSG_MAX && m.len == h.len && m.type == h.type,
		           "accepted frame: len %u type %u", m.len, m.type);
		FUZZ_CHECK(!memcmp(m.buf, stream + sizeof(h), m.len), "body changed");
		FUZZ_CHECK(sfs_msg_validate(m.buf, m.len) == 0, "accepted an invalid body");
		FUZZ_CHECK(m.nfds == (nfds > SFS_MSG_FDS ? SFS_MSG_FDS : nfds),
		           "%d descriptors received of %d sent", m.nfds, nfds);
		for (int i = 0; i < m.nfds; i++) {
			FUZZ_CHECK(fcntl(m.fds[i], F_GETFD) == FD_CLOEXEC, "received fd not close-on-exec");
			close(m.fds[i]);
		}
		sfs_msg_free(&m);
	} else {
		FUZZ_CHECK(m.nfds == 0 && m.buf == NULL, "a refused message kept its parts");
	}
	FUZZ_CHECK(lowest_free_fd() == before, "descriptors leaked (lowest free %d, was %d)",
	           lowest_free_fd(), before);
}

/* The stream of a "big" input: its header with the length moved to within 32 bytes of the
 * bound, then a body repeating the rest of the input (or "a=b\0"). */
static uint8_t *big_stream(const uint8_t *s, size_t len, size_t *outlen)
{
	static const uint8_t fill[] = "a=b";
	struct wire_header h = {SFS_PROTO_MAGIC, SFS_PROTO_VERSION, SFS_REQ_STATUS, 0};
	const uint8_t *pat = fill;
	size_t plen = sizeof(fill), body;
	uint8_t *out;

	if (len >= sizeof(h)) {
		memcpy(&h, s, sizeof(h));
		s += sizeof(h);
		len -= sizeof(h);
	}
	h.len = SFS_MSG_MAX - 32 + h.len % 64;
	if (len) {
		pat = s;
		plen = len;
	}
	body = h.len;
	out = malloc(sizeof(h) + body);
	if (!out)
		return NULL;
	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), pat, body < plen ? body : plen);
	for (size_t done = plen; done < body; done *= 2) /* the pattern, doubled until full */
		memcpy(out + sizeof(h) + done, out + sizeof(h), body - done < done ? body - done : done);
	*outlen = sizeof(h) + (h.len > SFS_MSG_MAX ? 0 : body);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int nfds, vrc;
	size_t chunk, len = size - 2;
	const uint8_t *s = data + 2;

	if (size < 2)
		return 0;
	nfds = data[0] & 3;
	chunk = (size_t)data[1] + 1;
	vrc = sfs_msg_validate((const char *)s, len);
	FUZZ_CHECK(vrc == ref_validate(s, len), "validate %d, reference %d", vrc,
	           ref_validate(s, len));
	if (vrc == 0)
		check_fields(s, len);
	if ((data[0] & 0x7c) == 0x7c) {
		size_t blen;
		uint8_t *big = big_stream(s, len, &blen);
		if (big) {
			check_recv(big, blen, nfds, 65536);
			free(big);
		}
	} else {
		check_recv(s, len, nfds, chunk);
	}
	return 0;
}
