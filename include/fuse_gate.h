/* What both transports (fuse_io.h's /dev/fuse, fuse_uring.h's io_uring entries) mark as they
 * serve a request: the handover gate, and the request the calling thread serves. Its own file
 * so that the io_uring entries need nothing of fuse_io.c, which starts and ends them. */
#ifndef SFS_FUSE_GATE_H
#define SFS_FUSE_GATE_H

#include <stdbool.h>
#include <stdint.h>

/* The handover gate (strictfs upgrade): after sfs_fuse_gate_hold, no thread begins a request
 * (a request read from /dev/fuse stays unanswered, for the kernel to resend to the successor;
 * an io_uring entry keeps its request, or its reply, for the successor to finish), and those
 * being served are finished. sfs_fuse_gate_quiet waits up to ms for none to be served.
 * Transport threads call sfs_fuse_gate_begin when they have a request and sfs_fuse_gate_end
 * when it is answered: either may not return once the gate is held. */
void sfs_fuse_gate_hold(void);
bool sfs_fuse_gate_quiet(int ms);
void sfs_fuse_gate_begin(void);
void sfs_fuse_gate_end(void);

/* The kernel's id of the request the calling thread serves, bit 63 set for one it sent again
 * (FUSE_NOTIFY_RESEND); set by the transport as it hands the request to libfuse. */
uint64_t sfs_fuse_gate_unique(void);
void sfs_fuse_gate_set_unique(uint64_t unique);

#endif
