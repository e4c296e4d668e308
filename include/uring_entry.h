/* What a successor must know of an io_uring entry (fuse_uring.h), kept in the entry's own
 * buffers beside the kernel's header, and the steps of a reply that keep it true. A reply is
 * written over the request it answers (the kernel takes it from the same buffers), so a
 * daemon killed while it writes one would leave a request no longer whole for the successor
 * to serve again: what the reply overwrites is saved first, and put back by the successor. */
#ifndef SFS_URING_ENTRY_H
#define SFS_URING_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sfs_uring_reply {
	SFS_REPLY_NONE,    /* the request is whole in the buffers, unanswered */
	SFS_REPLY_WHOLE,   /* its reply is whole in the buffers */
	SFS_REPLY_WRITING, /* the reply is being written over it; the undo puts it back */
};

/* The request's own header, which the reply's header overwrites (a fuse_in_header) */
#define SFS_URING_UNDO_HEADER 40
/* The request's payload bytes a reply may overwrite and still be undone: a reply's payload
 * over a request's is at most a name or two (an entry or a write's count over a name or the
 * data) */
#define SFS_URING_UNDO_PAYLOAD 2048

struct sfs_uring_entry_state {
	_Atomic uint64_t busy;     /* the id of the request taken and not committed, or 0 */
	_Atomic uint32_t replied;  /* enum sfs_uring_reply */
	uint32_t qid;
	uint32_t undo_len;         /* payload bytes saved, or UINT32_MAX: more than fit */
	uint32_t undo_payload_sz;  /* the request's payload size, which the reply's replaces */
	unsigned char undo_header[SFS_URING_UNDO_HEADER];
	unsigned char undo_payload[SFS_URING_UNDO_PAYLOAD];
};

/* Before a reply of reply_len payload bytes is written over the request (header, its
 * payload_sz, and payload). */
void sfs_uring_reply_begin(struct sfs_uring_entry_state *st, const void *header,
                           uint32_t payload_sz, const void *payload, size_t reply_len);

/* The reply is whole in the buffers. */
void sfs_uring_reply_end(struct sfs_uring_entry_state *st);

/* A successor's, for an entry whose reply was being written as its daemon died: puts the
 * request back (header, *payload_sz, payload) and marks it unanswered. False when it cannot
 * (the reply overwrote more than was saved): the request is then to be answered EIO. */
bool sfs_uring_reply_undo(struct sfs_uring_entry_state *st, void *header, uint32_t *payload_sz,
                          void *payload);

#endif
