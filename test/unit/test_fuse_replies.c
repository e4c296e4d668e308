/* Tests of the OPEN and CREATE replies the transport makes itself (fuse_adapt.h) against the
 * ones libfuse makes: libfuse runs here for real, on requests fed through its custom I/O, and
 * its reply bytes are compared with ours for the same file info and entry. Without a backing
 * id they must be the same bytes; with one, the same but for the passthrough flag, the id,
 * and the page-cache flags the kernel refuses beside them. */
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "fuse_adapt.h"

/* What the handlers answer with, and libfuse's last reply (after its header). */
static struct fuse_file_info want_fi;
static struct fuse_entry_param want_entry;
static unsigned char got[256];
static size_t got_len;

static ssize_t capture(int fd, struct iovec *iov, int count, void *userdata)
{
	size_t total = 0;

	(void)fd;
	(void)userdata;
	got_len = 0;
	for (int i = 0; i < count; i++) {
		if (i > 0 && got_len + iov[i].iov_len <= sizeof(got)) {
			memcpy(got + got_len, iov[i].iov_base, iov[i].iov_len);
			got_len += iov[i].iov_len;
		}
		total += iov[i].iov_len;
	}
	return (ssize_t)total;
}

static ssize_t no_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)fd, (void)buf, (void)len, (void)userdata;
	return 0;
}

static void on_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_open(req, &want_fi);
}

static void on_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fuse_reply_create(req, &want_entry, &want_fi);
}

/* Feeds one request (header and argument) to libfuse. */
static void feed(struct fuse_session *se, uint32_t opcode, uint64_t unique, const void *arg,
                 size_t arg_len)
{
	static unsigned char buf[512];
	struct fuse_in_header in = {.len = (uint32_t)(sizeof(in) + arg_len), .opcode = opcode,
	                            .unique = unique, .nodeid = 1};
	struct fuse_buf fb = {.size = sizeof(in) + arg_len, .mem = buf};

	memcpy(buf, &in, sizeof(in));
	memcpy(buf + sizeof(in), arg, arg_len);
	got_len = 0;
	fuse_session_process_buf(se, &fb);
}

static void set_fi(unsigned bits)
{
	memset(&want_fi, 0, sizeof(want_fi));
	want_fi.fh = 0x1122334455667788ull + bits;
	want_fi.direct_io = !!(bits & 1);
	want_fi.keep_cache = !!(bits & 2);
	want_fi.cache_readdir = !!(bits & 4);
	want_fi.nonseekable = !!(bits & 8);
	want_fi.noflush = !!(bits & 16);
}

static void set_entry(double timeout)
{
	memset(&want_entry, 0, sizeof(want_entry));
	want_entry.ino = 0xabcdef0012345678ull;
	want_entry.generation = 77;
	want_entry.entry_timeout = timeout;
	want_entry.attr_timeout = timeout / 3;
	want_entry.attr.st_ino = 12;
	want_entry.attr.st_mode = 0100640;
	want_entry.attr.st_nlink = 1;
	want_entry.attr.st_uid = 1000;
	want_entry.attr.st_gid = 100;
	want_entry.attr.st_rdev = 0x0801;
	want_entry.attr.st_size = 123456789;
	want_entry.attr.st_blksize = 4096;
	want_entry.attr.st_blocks = 2048;
	want_entry.attr.st_atim = (struct timespec){1700000001, 11};
	want_entry.attr.st_mtim = (struct timespec){1700000002, 22};
	want_entry.attr.st_ctim = (struct timespec){1700000003, 999999999};
}

/* The open reply's fields, from a reply's last 16 bytes. */
static struct fuse_open_out open_part(const unsigned char *reply, size_t len, uint32_t *id)
{
	struct fuse_open_out o;

	memcpy(&o, reply + len - sizeof(o), sizeof(o));
	memcpy(id, reply + len - sizeof(o) + offsetof(struct fuse_open_out, open_flags) + 4,
	       sizeof(*id));
	return o;
}

int main(void)
{
	struct fuse_lowlevel_ops ops = {.open = on_open, .create = on_create};
	static const struct fuse_custom_io io = {.writev = capture, .read = no_read};
	char *argv[] = {"test_fuse_replies", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse_init_in init = {.major = FUSE_KERNEL_VERSION, .minor = 38,
	                            .max_readahead = 131072};
	struct fuse_open_in open_in = {.flags = O_RDWR};
	struct {
		struct fuse_create_in c;
		char name[4];
	} create_in = {.c = {.flags = O_RDWR | O_CREAT, .mode = 0100644}, .name = "f"};
	struct sfs_fuse_open_reply ours;
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	uint64_t unique = 1;

	fuse_opt_free_args(&args); /* libfuse copies argv while parsing; the session keeps none */

	CHECK(se && null >= 0 && fuse_session_custom_io(se, &io, null) == 0, "a session to feed");
	if (!se)
		return 1;
	feed(se, FUSE_INIT, unique++, &init, sizeof(init));
	CHECK(got_len >= 24, "libfuse answered INIT");

	for (unsigned bits = 0; bits < 32; bits++) {
		set_fi(bits);
		feed(se, FUSE_OPEN, unique++, &open_in, sizeof(open_in));
		sfs_fuse_open_reply(&ours, &want_fi, 0);
		CHECK(got_len == ours.len && !memcmp(got, ours.bytes, ours.len),
		      "OPEN, file info %#x: libfuse's bytes", bits);

		set_entry(bits * 0.37 + (bits & 1 ? 1e12 : 0));
		feed(se, FUSE_CREATE, unique++, &create_in, sizeof(create_in));
		sfs_fuse_create_reply(&ours, &want_entry, &want_fi, 0);
		CHECK(got_len == ours.len && !memcmp(got, ours.bytes, ours.len),
		      "CREATE, file info %#x, timeout %g: libfuse's bytes", bits,
		      want_entry.entry_timeout);

		/* with a backing id: libfuse's reply but for the open flags and the id */
		unsigned char libfuse_reply[sizeof(got)];
		size_t libfuse_len = got_len;
		uint32_t id, lib_id;
		memcpy(libfuse_reply, got, got_len);
		sfs_fuse_create_reply(&ours, &want_entry, &want_fi, 41);
		struct fuse_open_out o = open_part(ours.bytes, ours.len, &id);
		struct fuse_open_out lo = open_part(libfuse_reply, libfuse_len, &lib_id);
		CHECK(ours.len == libfuse_len &&
		              !memcmp(ours.bytes, libfuse_reply, libfuse_len - sizeof(o)),
		      "CREATE with a backing id, file info %#x: the same entry", bits);
		CHECK(id == 41 && o.fh == lo.fh &&
		              o.open_flags == ((lo.open_flags & ~(uint32_t)(FOPEN_KEEP_CACHE |
		                                                            FOPEN_DIRECT_IO |
		                                                            FOPEN_CACHE_DIR)) |
		                               (1u << 7)),
		      "CREATE with a backing id, file info %#x: passthrough, no page-cache flag "
		      "(flags %#x from %#x)", bits, o.open_flags, lo.open_flags);
		sfs_fuse_open_reply(&ours, &want_fi, 41);
		o = open_part(ours.bytes, ours.len, &id);
		CHECK(ours.len == sizeof(o) && id == 41 && (o.open_flags & (1u << 7)) &&
		              !(o.open_flags & FOPEN_KEEP_CACHE),
		      "OPEN with a backing id, file info %#x", bits);
	}
	sfs_fuse_open_reply(&ours, &want_fi, -5);
	{
		uint32_t id;
		struct fuse_open_out o = open_part(ours.bytes, ours.len, &id);
		CHECK(id == 0 && !(o.open_flags & (1u << 7)), "a negative id hands nothing over");
	}
	fuse_session_destroy(se);
	close(null);
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
