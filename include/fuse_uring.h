/* A view's requests over io_uring (FUSE_OVER_IO_URING, kernel 6.14 and later, where the
 * administrator turned fuse.enable_uring on): one queue per possible CPU, the kernel hands a
 * request to an entry of its caller's CPU queue and takes the reply back with the fetch of the
 * next one, one system call per round trip where /dev/fuse needs a read and a write and a
 * wake-up of whichever thread waits. Each entry is a thread with its own small io_uring, so a
 * handler that blocks holds up one entry, never its queue. Requests are still decoded and
 * answered by libfuse (fuse_session_process_buf); only their path changes. FORGET, INTERRUPT
 * and notifications keep using /dev/fuse (doc/kernel.md §4.10). */
#ifndef SFS_FUSE_URING_H
#define SFS_FUSE_URING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* flags2 bit 9 of the INIT exchange (protocol 7.42), newer than Debian 12's <linux/fuse.h> */
#define SFS_FUSE_OVER_IO_URING (1ULL << 41)

/* Entries (threads) per queue: enough that one blocked handler does not stall its CPU's
 * callers, few enough that an idle view costs little. */
#define SFS_URING_DEPTH 2

struct fuse_session;
struct sfs_fuse_uring;

/* Where the entries' buffers are: one memfd, mapped at base, an entry every region bytes.
 * The kernel keeps the buffers' addresses from the registration and copies a request in and
 * its reply out at those addresses of whichever process commits, so a successor daemon maps
 * its predecessor's area at the same address: there it finds the requests the predecessor had
 * taken and not answered (no FUSE_NOTIFY_RESEND covers those, doc/kernel.md §4.11), answers
 * them, and goes on with the same entries. */
struct sfs_uring_area {
	int fd;
	uint64_t base;
	uint64_t region;
	uint32_t entries;
};

/* Sets up, before the INIT reply offers io_uring, everything that could fail: a ring, a
 * buffer and a waiting thread per entry, for every possible CPU. payload is the kernel's
 * max(8 KiB, max_write, max_pages pages). A successor passes its predecessor's area (else
 * NULL). While *failed, every request is answered EIO. NULL with errno set if any of it
 * fails: the reply must then not ask for io_uring. */
struct sfs_fuse_uring *sfs_fuse_uring_prepare(struct fuse_session *se, int fuse_fd,
                                              size_t payload, const struct sfs_uring_area *from,
                                              const atomic_bool *failed);

/* The area of u, for the state a successor takes over. */
void sfs_fuse_uring_area(const struct sfs_fuse_uring *u, struct sfs_uring_area *out);

/* The handover (fuse_gate.h): no entry submits a command any more; each ends with a request
 * or a reply in its buffers (finished by the successor), or waiting for a request, which the
 * kernel withdraws as its thread exits (doc/kernel.md §4.11). */
void sfs_fuse_uring_hold(struct sfs_fuse_uring *u);

/* Requests that reached a queue while it had no entry wait for the next request on that
 * queue (the kernel hands them out only when an entry commits or a request arrives): after a
 * takeover, a statfs from each CPU at mountpoint, in the mount namespace nsfd, wakes them, once
 * every entry is in its queue. It blocks its thread while it waits. */
void sfs_fuse_uring_poke(struct sfs_fuse_uring *u, int nsfd, const char *mountpoint);

/* `strictfs __uring-poke MOUNTPOINT QUEUES`, with the namespace as descriptor 3: the process
 * sfs_fuse_uring_poke starts. */
int sfs_fuse_uring_poke_main(int argc, char *argv[]);

/* The INIT reply asking for io_uring has been accepted: the entries register and serve. */
void sfs_fuse_uring_start(struct sfs_fuse_uring *u);

/* Ends the threads (after the connection has ended, or when the INIT reply was not sent) and
 * frees everything. NULL is ignored. */
void sfs_fuse_uring_destroy(struct sfs_fuse_uring *u);

/* Whether every entry registered; 0, or the errno of the first refused registration (the
 * kernel then serves the connection through /dev/fuse alone). */
int sfs_fuse_uring_error(const struct sfs_fuse_uring *u);
unsigned sfs_fuse_uring_queues(const struct sfs_fuse_uring *u);

/* If the calling thread is serving a ring entry and iov is the reply to its request, the
 * reply is put in the entry (sent with the next fetch): the bytes taken, or -1 with errno
 * (EMSGSIZE: larger than the entry). -2 when the reply is not this thread's entry's. */
ssize_t sfs_fuse_uring_take_reply(const struct iovec *iov, int count);

/* See sfs_fuse_io_wait_begin: 1 when the calling thread serves no io_uring entry. */
int sfs_fuse_uring_wait_begin(void);
void sfs_fuse_uring_wait_end(void);

#endif
