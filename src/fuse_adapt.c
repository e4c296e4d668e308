/* Requests libfuse 3.14 cannot dispatch, as ones it can (see fuse_adapt.h). */
#include "fuse_adapt.h"

#include <linux/fuse.h>
#include <string.h>

#define TMPFILE_NAME "/"

void sfs_fuse_adapt(void *buf, size_t len)
{
	struct fuse_in_header *in = buf;
	const size_t name_at = sizeof(*in) + sizeof(struct fuse_create_in);

	if (len < sizeof(*in) || in->opcode != FUSE_TMPFILE || in->len != len ||
	    len != name_at + sizeof(TMPFILE_NAME) ||
	    memcmp((const char *)buf + name_at, TMPFILE_NAME, sizeof(TMPFILE_NAME)))
		return;
	in->opcode = FUSE_CREATE;
}
