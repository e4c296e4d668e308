/* The control protocol between the CLI and a daemon: a versioned, size-bounded message of
 * "key=value\0" fields over a Unix stream socket, with up to two descriptors (SCM_RIGHTS). */
#ifndef SFS_CONTROL_H
#define SFS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define SFS_PROTO_MAGIC 0x43534653u /* "SFSC" */
#define SFS_PROTO_VERSION 1
#define SFS_MSG_MAX (1u << 20)
#define SFS_MSG_FDS 2
/* The "version" of the status document a CLI gathers from the daemons' SFS_REQ_STATUS
 * replies (contract §2) */
#define SFS_STATUS_VERSION 1

enum sfs_msg_type {
	SFS_REQ_ADD_VIEW = 1, /* fields: mountpoint, source, options; fds: /dev/fuse, mnt ns */
	SFS_REQ_STATUS = 2,   /* no fields; reply carries "json" */
	SFS_REQ_STOP = 3,     /* unmount every view and exit, as on SIGTERM */
	SFS_REQ_REMOUNT = 4,  /* fields: mountpoint, options, check ("1": validate only); fd: mnt ns;
	                         reply: mount_flags (MS_* of the result) */
	SFS_REQ_QUOTA = 5,    /* fields: op (set, grace, report, check) and its arguments
	                         (type, id, bsoft, bhard, isoft, ihard, bgrace, igrace,
	                         mountpoint); reply: json */
	SFS_REQ_UPGRADE = 6,  /* no fields: hand the views over to the installed binary; reply:
	                         generation (the one handing over), pid */
	SFS_REPLY = 100,      /* fields: rc (0 or errno), msg (one error line), more per request */
};

struct sfs_msg {
	uint16_t type;
	uint32_t len;
	int nfds;
	int fds[SFS_MSG_FDS];
	char *buf; /* len bytes of fields, owned by the message */
	size_t cap;
};

void sfs_msg_init(struct sfs_msg *m, uint16_t type);
void sfs_msg_free(struct sfs_msg *m); /* frees the fields; received descriptors stay the caller's */
int sfs_msg_add(struct sfs_msg *m, const char *key, const char *value);
const char *sfs_msg_get(const struct sfs_msg *m, const char *key);

/* Checks that buf holds only well-formed "key=value\0" fields. */
int sfs_msg_validate(const char *buf, size_t len);

/* Send and receive one message; 0 or -errno. Receive rejects a bad magic, an unknown
 * version, an oversized or malformed body, a frame cut short (-EPROTO / -EMSGSIZE); -ECONNRESET
 * only when the peer closed before sending anything. */
int sfs_msg_send(int sock, const struct sfs_msg *m);
int sfs_msg_recv(int sock, struct sfs_msg *m);

/* "/run/strictfs/KEY.sock" and ".lock". */
void sfs_socket_path(const char *key, char *buf, size_t len);
void sfs_lock_path(const char *key, char *buf, size_t len);

#endif
