/* An io_uring entry's reply, written over its request so that a successor can undo it (see
 * uring_entry.h). */
#include "uring_entry.h"

#include <stdatomic.h>
#include <string.h>

void sfs_uring_reply_begin(struct sfs_uring_entry_state *st, const void *header,
                           uint32_t payload_sz, const void *payload, size_t reply_len)
{
	size_t over = reply_len < payload_sz ? reply_len : payload_sz;

	memcpy(st->undo_header, header, sizeof(st->undo_header));
	st->undo_payload_sz = payload_sz;
	if (over <= sizeof(st->undo_payload)) {
		memcpy(st->undo_payload, payload, over);
		st->undo_len = (uint32_t)over;
	} else {
		st->undo_len = UINT32_MAX;
	}
	/* the saved bytes first: a successor that sees WRITING finds them whole */
	atomic_store_explicit(&st->replied, SFS_REPLY_WRITING, memory_order_release);
}

void sfs_uring_reply_end(struct sfs_uring_entry_state *st)
{
	atomic_store_explicit(&st->replied, SFS_REPLY_WHOLE, memory_order_release);
}

bool sfs_uring_reply_undo(struct sfs_uring_entry_state *st, void *header, uint32_t *payload_sz,
                          void *payload)
{
	if (st->undo_len > sizeof(st->undo_payload))
		return false;
	memcpy(header, st->undo_header, sizeof(st->undo_header));
	*payload_sz = st->undo_payload_sz;
	memcpy(payload, st->undo_payload, st->undo_len);
	atomic_store(&st->replied, SFS_REPLY_NONE);
	return true;
}
