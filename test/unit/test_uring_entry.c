/* Tests of an io_uring entry's reply written over its request (uring_entry.h): what a
 * successor finds when the daemon died at each step. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "uring_entry.h"

#define PAYLOAD 8192

struct buffers {
	unsigned char header[128];
	uint32_t payload_sz;
	unsigned char payload[PAYLOAD];
};

/* A request as the kernel copies one in: its header and size payload bytes. */
static void request(struct buffers *b, uint32_t size, unsigned char seed)
{
	for (size_t i = 0; i < sizeof(b->header); i++)
		b->header[i] = (unsigned char)(seed + i);
	for (size_t i = 0; i < PAYLOAD; i++)
		b->payload[i] = (unsigned char)(seed * 7 + i);
	b->payload_sz = size;
}

/* The reply's writing, cut short after its header and half its payload. */
static void reply_cut_short(struct buffers *b, size_t reply_len)
{
	memset(b->payload, 0xee, reply_len / 2);
	memset(b->header, 0xdd, 16);
	b->payload_sz = (uint32_t)reply_len;
}

/* A request of size payload bytes in b, and a reply of reply_len payload bytes begun over it. */
static struct sfs_uring_entry_state *replying(struct buffers *b, uint32_t size, unsigned char seed,
                                              size_t reply_len)
{
	struct sfs_uring_entry_state *st = calloc(1, sizeof(*st));

	request(b, size, seed);
	sfs_uring_reply_begin(st, b->header, b->payload_sz, b->payload, reply_len);
	return st;
}

static bool undo(struct sfs_uring_entry_state *st, struct buffers *b)
{
	return sfs_uring_reply_undo(st, b->header, &b->payload_sz, b->payload);
}

static void test_write_undone(void)
{
	struct buffers b, was;
	/* a WRITE of 4096 bytes, answered by an 8-byte count */
	struct sfs_uring_entry_state *st = replying(&b, 4096, 3, 8);

	was = b;
	CHECK(atomic_load(&st->replied) == SFS_REPLY_WRITING, "a reply being written says so");
	reply_cut_short(&b, 8);
	CHECK(undo(st, &b), "the undo is possible");
	CHECK(!memcmp(b.header, was.header, SFS_URING_UNDO_HEADER), "the request's header is back");
	CHECK(b.payload_sz == 4096, "its payload size is back");
	CHECK(!memcmp(b.payload, was.payload, 4096), "its data is back, byte for byte");
	CHECK(atomic_load(&st->replied) == SFS_REPLY_NONE, "and it is unanswered again");
	free(st);
}

static void test_name_under_a_long_reply(void)
{
	struct buffers b, was;
	/* a GETXATTR of a 20-byte name, answered by a 4000-byte value: only the name matters */
	struct sfs_uring_entry_state *st = replying(&b, 20, 9, 4000);

	was = b;
	memset(b.payload, 0xee, 4000);
	CHECK(undo(st, &b), "the undo is possible");
	CHECK(b.payload_sz == 20 && !memcmp(b.payload, was.payload, 20), "the name is back");
	free(st);
}

static void test_too_much_to_undo(void)
{
	struct buffers b;
	struct sfs_uring_entry_state *st = replying(&b, PAYLOAD, 5, PAYLOAD);

	reply_cut_short(&b, PAYLOAD);
	CHECK(!undo(st, &b), "a reply over more of the request than was saved cannot be undone");
	CHECK(atomic_load(&st->replied) == SFS_REPLY_WRITING, "and the entry still says so");
	free(st);
}

static void test_whole_reply(void)
{
	struct buffers b;
	struct sfs_uring_entry_state *st = replying(&b, 100, 1, 8);

	sfs_uring_reply_end(st);
	CHECK(atomic_load(&st->replied) == SFS_REPLY_WHOLE, "a reply written whole says so");
	free(st);
}

int main(void)
{
	test_write_undone();
	test_name_under_a_long_reply();
	test_too_much_to_undo();
	test_whole_reply();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
