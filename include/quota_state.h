/* Quota arithmetic and the state file, apart from any I/O: per-id usage and limits, soft
 * limits with grace times, and the text format kept in /.strictfs/quota (contract §5.4, §3.5).
 * The daemon's ledger (quota.h) wraps this with locks, the scan and the backing. */
#ifndef SFS_QUOTA_STATE_H
#define SFS_QUOTA_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SFS_QSTATE_VERSION 1
#define SFS_QGRACE_DEFAULT (7 * 24 * 3600) /* as quotatool and Linux's vfsv0 default */
#define SFS_QSTATE_MAX (4u << 20)          /* a state file larger than this is refused */

enum sfs_qtype { SFS_QUSR, SFS_QGRP, SFS_QNTYPES };
enum sfs_qres { SFS_QBYTES, SFS_QINODES, SFS_QNRES };

/* Limits of one id (or one view) per resource: 0 means none. Bytes count st_blocks * 512. */
struct sfs_qlimits {
	uint64_t soft[SFS_QNRES];
	uint64_t hard[SFS_QNRES];
};

struct sfs_qentry {
	uint32_t id;
	struct sfs_qlimits lim;
	int64_t used[SFS_QNRES];
	int64_t reserved[SFS_QNRES]; /* admitted by operations still in flight */
	time_t grace_start[SFS_QNRES]; /* when usage passed the soft limit; 0 while under it */
};

struct sfs_qtable {
	struct sfs_qentry *e; /* sorted by id */
	size_t n, cap;
};

struct sfs_qstate {
	time_t grace[SFS_QNRES]; /* grace periods, seconds */
	struct sfs_qtable t[SFS_QNTYPES];
};

void sfs_qstate_init(struct sfs_qstate *s);
void sfs_qstate_free(struct sfs_qstate *s);

/* The entry of id, or NULL; sfs_qtable_get creates it (NULL only when out of memory). */
struct sfs_qentry *sfs_qtable_find(const struct sfs_qtable *t, uint32_t id);
struct sfs_qentry *sfs_qtable_get(struct sfs_qtable *t, uint32_t id);

/* Whether adding delta[] (plus what is already reserved) to e keeps it within its limits at
 * time now: 0, or -EDQUOT past a hard limit or past a soft limit whose grace has run out.
 * Releases (negative deltas) are always admitted. */
int sfs_qentry_admit(const struct sfs_qentry *e, const int64_t delta[SFS_QNRES], time_t now,
                     const time_t grace[SFS_QNRES]);

/* Adds delta[] to e's usage and starts or clears the grace timers at time now. */
void sfs_qentry_apply(struct sfs_qentry *e, const int64_t delta[SFS_QNRES], time_t now);

/* Whether e holds limits or a running grace timer worth writing to the state file. */
bool sfs_qentry_persistent(const struct sfs_qentry *e);

/* One name of a multiply linked file, as `quota check` finds it. Its count keeps every such
 * name and counts each inode once by sorting them, sharing nothing with the set the ledger's
 * own scans use (inoset.h): a fault of either then shows as a difference. */
struct sfs_qlink {
	uint64_t ino;
	uint32_t uid, gid;
	int64_t bytes;
};

/* Sorts a[0..n) by inode number and keeps one entry per inode: returns how many remain. */
size_t sfs_qlinks_unique(struct sfs_qlink *a, size_t n);

/* Serialises the limits and grace state (not the usage, which a scan rebuilds) into a
 * malloc'd buffer. Returns 0 or -ENOMEM. */
int sfs_qstate_format(const struct sfs_qstate *s, char **buf, size_t *len);

/* Parses a state file into s (initialised by the caller; usage stays 0). Returns 0, or
 * -EINVAL with "line N: reason" in err. */
int sfs_qstate_parse(const char *buf, size_t len, struct sfs_qstate *s, char *err, size_t errlen);

/* "10M", "1G", "4096", "2T" -> bytes or counts (binary multiples, as tmpfs's size=). */
bool sfs_parse_size(const char *s, uint64_t *out);
/* "7d", "12h", "30m", "45s", "90" (seconds) -> seconds. */
bool sfs_parse_duration(const char *s, time_t *out);

#endif
