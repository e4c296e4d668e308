/* Tests of the requests the transport hands libfuse in a form it knows (fuse_adapt.h): a
 * FUSE_TMPFILE becomes a CREATE of "/", and nothing else is touched. */
#include <linux/fuse.h>
#include <string.h>

#include "check.h"
#include "fuse_adapt.h"

struct create_req {
	struct fuse_in_header in;
	struct fuse_create_in arg;
	char name[8];
};

/* A request of opcode op carrying name, as the kernel lays it out; its length. */
static size_t request(struct create_req *r, uint32_t op, const char *name)
{
	size_t len = sizeof(r->in) + sizeof(r->arg) + strlen(name) + 1;

	memset(r, 0, sizeof(*r));
	r->in.len = (uint32_t)len;
	r->in.opcode = op;
	r->in.unique = 42;
	r->arg.mode = 0100600;
	strcpy(r->name, name);
	return len;
}

int main(void)
{
	struct create_req r;
	size_t len;

	len = request(&r, FUSE_TMPFILE, "/");
	sfs_fuse_adapt(&r, len);
	CHECK(r.in.opcode == FUSE_CREATE, "a TMPFILE of \"/\" becomes a CREATE (got %u)", r.in.opcode);
	CHECK(r.in.unique == 42 && r.arg.mode == 0100600 && !strcmp(r.name, "/"),
	      "and keeps its id, mode and name");

	len = request(&r, FUSE_TMPFILE, "x");
	sfs_fuse_adapt(&r, len);
	CHECK(r.in.opcode == FUSE_TMPFILE, "another name is left for libfuse to refuse");

	len = request(&r, FUSE_TMPFILE, "/");
	sfs_fuse_adapt(&r, len - 1);
	CHECK(r.in.opcode == FUSE_TMPFILE, "a request cut short is left alone");

	len = request(&r, FUSE_TMPFILE, "/");
	r.in.len = (uint32_t)len + 4;
	sfs_fuse_adapt(&r, len);
	CHECK(r.in.opcode == FUSE_TMPFILE, "a header whose length is not the request's is left alone");

	len = request(&r, FUSE_CREATE, "/");
	sfs_fuse_adapt(&r, len);
	CHECK(r.in.opcode == FUSE_CREATE, "a CREATE stays a CREATE");
	len = request(&r, FUSE_MKNOD, "/");
	sfs_fuse_adapt(&r, len);
	CHECK(r.in.opcode == FUSE_MKNOD, "other opcodes are untouched");

	sfs_fuse_adapt(&r, 3);
	CHECK(1, "a buffer shorter than a header is not read");
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
