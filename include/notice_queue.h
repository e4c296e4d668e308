/* The queue of coherence notices (coherence.h) and its one notifier thread: notices are
 * delivered in the order they were queued, by a callback the owner gives, and a request waits
 * for the ones it queued with a bound (sfs_noticeq_flush). It knows nothing of views or FUSE:
 * a notice names a view by its slot, and the callback does the rest. */
#ifndef SFS_NOTICE_QUEUE_H
#define SFS_NOTICE_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* SFS_NOTICE_DELETE: an entry whose object went with it (FUSE_NOTIFY_DELETE), its node in
 * off. */
enum sfs_notice_kind { SFS_NOTICE_INODE, SFS_NOTICE_ENTRY, SFS_NOTICE_DELETE };

struct sfs_notice {
	uint32_t slot;              /* the view to tell */
	enum sfs_notice_kind kind;
	uint64_t ino;               /* the inode, or the parent of the entry */
	off_t off, len;             /* SFS_NOTICE_INODE: off < 0 means attributes only */
	const char *name;           /* the entry's; "" for an inode */
};

/* Tells one notice, on the notifier thread, holding no lock of the queue. */
typedef void sfs_notice_deliver_fn(void *arg, const struct sfs_notice *n);

struct sfs_noticeq;

/* A queue for views of slots below slots, and its notifier, which hands each notice to
 * deliver(arg, notice). 0 or -errno. */
int sfs_noticeq_start(struct sfs_noticeq **out, uint32_t slots, sfs_notice_deliver_fn *deliver,
                      void *arg);
/* Delivers what is queued, then ends the notifier and frees the queue. */
void sfs_noticeq_stop(struct sfs_noticeq *q);

/* Queues a copy of n. wait: the calling thread's next sfs_noticeq_flush waits for it. Out of
 * memory, the notice is lost: the view then sees the change when its timeouts expire. */
void sfs_noticeq_push(struct sfs_noticeq *q, const struct sfs_notice *n, bool wait);

/* Waits until what this thread queued with wait has been delivered, by a request of the view
 * at slot. Bounded: it gives up when the notifier has delivered nothing for the stall bound,
 * or at once when the delivery in progress is to a view with a request waiting here, past
 * the cycle bound (that delivery then waits for a lock the request holds in its kernel). */
void sfs_noticeq_flush(struct sfs_noticeq *q, uint32_t slot);

#endif
