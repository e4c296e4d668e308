/* Tests of the requests the transport hands libfuse in a form it knows (fuse_adapt.h): a
 * FUSE_TMPFILE becomes a CREATE of "/", a FUSE_STATX an ioctl that carries it, an ioctl
 * from the kernel never passes for one, and nothing else is touched. */
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

/* FUSE_STATX's request (protocol 7.39), as the kernel lays it out, in a buffer with room. */
struct statx_req {
	struct fuse_in_header in;
	struct {
		uint32_t getattr_flags, reserved;
		uint64_t fh;
		uint32_t sx_flags, sx_mask;
	} arg;
	char room[64];
};

static size_t statx_request(struct statx_req *r, uint32_t getattr_flags)
{
	size_t len = sizeof(r->in) + sizeof(r->arg);

	memset(r, 0xee, sizeof(*r));
	r->in.len = (uint32_t)len;
	r->in.opcode = 52;
	r->in.unique = 7;
	r->in.nodeid = 99;
	r->arg.getattr_flags = getattr_flags;
	r->arg.reserved = 0;
	r->arg.fh = 5;
	r->arg.sx_flags = 0x2000; /* AT_STATX_FORCE_SYNC */
	r->arg.sx_mask = 0x00000fff;
	return len;
}

static void check_statx(void)
{
	struct statx_req r;
	const struct fuse_ioctl_in *io = (const void *)&r.arg;
	size_t len = statx_request(&r, FUSE_GETATTR_FH), out;

	out = sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_IOCTL && out == sizeof(r.in) + sizeof(*io) && r.in.len == out,
	      "a STATX becomes an ioctl of the ioctl's length (got op %u, %zu bytes)", r.in.opcode,
	      out);
	CHECK(r.in.unique == 7 && r.in.nodeid == 99, "and keeps its id and node");
	CHECK((io->flags & SFS_IOCTL_STATX) && (io->flags & SFS_IOCTL_STATX_FH) && io->fh == 5,
	      "which says it carries a statx of the open file 5");
	CHECK(SFS_STATX_ARG_FLAGS(io->arg) == 0x2000 && SFS_STATX_ARG_MASK(io->arg) == 0xfff,
	      "with the statx flags and mask asked");
	CHECK(io->in_size == 0 && io->out_size == 0 && io->cmd == 0, "and no ioctl data");

	len = statx_request(&r, 0);
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK((io->flags & SFS_IOCTL_STATX) && !(io->flags & SFS_IOCTL_STATX_FH),
	      "a STATX of a node names no open file");

	len = statx_request(&r, 0);
	out = sfs_fuse_adapt(&r, len, len);
	CHECK(r.in.opcode == 52 && out == len, "with no room for the ioctl it is left alone");
	len = statx_request(&r, 0);
	r.in.len = (uint32_t)len + 8;
	out = sfs_fuse_adapt(&r, len + 8, sizeof(r));
	CHECK(r.in.opcode == 52 && out == len + 8, "a STATX of another length is left alone");
}

static void check_kernel_ioctl(void)
{
	struct {
		struct fuse_in_header in;
		struct fuse_ioctl_in arg;
	} r = {0};
	size_t out;

	r.in.len = sizeof(r);
	r.in.opcode = FUSE_IOCTL;
	r.arg.flags = FUSE_IOCTL_DIR | SFS_IOCTL_STATX | SFS_IOCTL_STATX_FH;
	r.arg.cmd = 0x80086601; /* FS_IOC_GETFLAGS */
	out = sfs_fuse_adapt(&r, sizeof(r), sizeof(r));
	CHECK(out == sizeof(r) && r.arg.flags == FUSE_IOCTL_DIR && r.arg.cmd == 0x80086601,
	      "an ioctl from the kernel never passes for a carried statx (flags %#x)", r.arg.flags);
}

static void check_statx_reply(void)
{
	struct sfs_fuse_statx_out out;
	struct statx stx = {0};

	stx.stx_mask = STATX_BASIC_STATS | STATX_BTIME;
	stx.stx_mode = 0100644;
	stx.stx_ino = 12;
	stx.stx_size = 4096;
	stx.stx_btime.tv_sec = 1700000000;
	stx.stx_btime.tv_nsec = 123;
	stx.stx_attributes = STATX_ATTR_IMMUTABLE;
	stx.stx_attributes_mask = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND;
	stx.stx_mnt_id = 77;
	sfs_fuse_statx_out_fill(&out, &stx, 1.5);
	CHECK(out.attr_valid == 1 && out.attr_valid_nsec == 500000000, "the timeout in two parts");
	CHECK(out.stat.mask == stx.stx_mask && out.stat.mode == 0100644 && out.stat.ino == 12 &&
	              out.stat.size == 4096,
	      "the mask and stat's fields");
	CHECK(out.stat.btime.tv_sec == 1700000000 && out.stat.btime.tv_nsec == 123,
	      "the birth time");
	CHECK(out.stat.attributes == STATX_ATTR_IMMUTABLE &&
	              out.stat.attributes_mask == (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND),
	      "the attributes and which are known");
	CHECK(out.stat.spare2[0] == 0, "nothing after the device numbers (not the mount id)");
}

int main(void)
{
	struct create_req r;
	size_t len;

	len = request(&r, FUSE_TMPFILE, "/");
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_CREATE, "a TMPFILE of \"/\" becomes a CREATE (got %u)", r.in.opcode);
	CHECK(r.in.unique == 42 && r.arg.mode == 0100600 && !strcmp(r.name, "/"),
	      "and keeps its id, mode and name");

	len = request(&r, FUSE_TMPFILE, "x");
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_TMPFILE, "another name is left for libfuse to refuse");

	len = request(&r, FUSE_TMPFILE, "/");
	sfs_fuse_adapt(&r, len - 1, sizeof(r));
	CHECK(r.in.opcode == FUSE_TMPFILE, "a request cut short is left alone");

	len = request(&r, FUSE_TMPFILE, "/");
	r.in.len = (uint32_t)len + 4;
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_TMPFILE, "a header whose length is not the request's is left alone");

	len = request(&r, FUSE_CREATE, "/");
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_CREATE, "a CREATE stays a CREATE");
	len = request(&r, FUSE_MKNOD, "/");
	sfs_fuse_adapt(&r, len, sizeof(r));
	CHECK(r.in.opcode == FUSE_MKNOD, "other opcodes are untouched");

	sfs_fuse_adapt(&r, 3, sizeof(r));
	CHECK(1, "a buffer shorter than a header is not read");

	check_statx();
	check_kernel_ioctl();
	check_statx_reply();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
