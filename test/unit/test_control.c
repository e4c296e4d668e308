/* Tests of the control protocol's framing and bounds. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "control.h"

struct raw_header {
	unsigned magic;
	unsigned short version, type;
	unsigned len;
};

int main(void)
{
	struct sfs_msg m, r;
	int sv[2], p[2];

	CHECK(sfs_msg_validate("a=b\0c=\0", 7) == 0, "valid fields");
	CHECK(sfs_msg_validate("ab\0", 3) == -EPROTO, "field without =");
	CHECK(sfs_msg_validate("=b\0", 3) == -EPROTO, "empty key");
	CHECK(sfs_msg_validate("a=b", 3) == -EPROTO, "unterminated");

	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pipe(p);
	sfs_msg_init(&m, SFS_REQ_ADD_VIEW);
	sfs_msg_add(&m, "mountpoint", "/srv/a");
	sfs_msg_add(&m, "options", "noacl,nouser_xattr");
	m.fds[0] = p[0];
	m.fds[1] = p[1];
	m.nfds = 2;
	CHECK(sfs_msg_send(sv[0], &m) == 0, "send");
	CHECK(sfs_msg_recv(sv[1], &r) == 0, "recv");
	CHECK(r.type == SFS_REQ_ADD_VIEW, "type");
	CHECK(r.nfds == 2, "two descriptors passed");
	CHECK(!strcmp(sfs_msg_get(&r, "options"), "noacl,nouser_xattr"), "field");
	CHECK(sfs_msg_get(&r, "option") == NULL, "no prefix match");
	sfs_msg_free(&r);
	sfs_msg_free(&m);

	/* a bad magic, an unknown version, an oversized body are refused */
	struct raw_header h = {0x12345678, 1, 1, 0};
	write(sv[0], &h, sizeof(h));
	CHECK(sfs_msg_recv(sv[1], &r) == -EPROTO, "bad magic");
	h.magic = SFS_PROTO_MAGIC;
	h.version = 99;
	write(sv[0], &h, sizeof(h));
	CHECK(sfs_msg_recv(sv[1], &r) == -EPROTO, "bad version");
	h.version = SFS_PROTO_VERSION;
	h.len = SFS_MSG_MAX + 1;
	write(sv[0], &h, sizeof(h));
	CHECK(sfs_msg_recv(sv[1], &r) == -EMSGSIZE, "oversized");
	h.len = 3;
	write(sv[0], &h, sizeof(h));
	write(sv[0], "abc", 3);
	CHECK(sfs_msg_recv(sv[1], &r) == -EPROTO, "malformed body");
	close(sv[0]);
	CHECK(sfs_msg_recv(sv[1], &r) == -ECONNRESET, "peer gone");

	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
