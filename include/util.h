/* Small helpers shared by the CLI and the daemon: error lines, strings, safe file writes. */
#ifndef SFS_UTIL_H
#define SFS_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define SFS_RUNDIR "/run/strictfs"
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Formats "strictfs: OBJECT: reason" into buf (the one-line error of contract §2). An object
 * too long for buf (a 100 KB option) is cut in its middle ("..."), so the reason still fits. */
void sfs_errf(char *buf, size_t len, const char *object, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The longest error line strictfs prints, in bytes, its newline not counted (contract §2). */
#define SFS_ERR_LINE_MAX 512

/* line made one printable line of at most SFS_ERR_LINE_MAX bytes, in out (outlen bytes, at
 * most that line, always terminated): control characters, DEL, the backslash and bytes that are
 * not UTF-8 are escaped (\n, \t, \r, \\, \xHH), and a longer line is cut in its middle ("..."),
 * so that its start (the object) and its end (the reason) both show. */
void sfs_err_clean(char *out, size_t outlen, const char *line);

/* Prints an error line on stderr, made one line by sfs_err_clean: every error line of the
 * commands goes out through these two. */
void sfs_err_print(const char *line);
void sfs_err_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies src into dst, truncating; returns false if it did not fit. */
bool sfs_strlcpy(char *dst, const char *src, size_t len);

/* The start of a small file (a /proc one) into buf, NUL-terminated: at most len - 1 bytes in
 * one read. Returns the bytes read, or -1 with errno set. */
#include <sys/types.h>
ssize_t sfs_read_text(const char *path, char *buf, size_t len);

/* Appends ",item" (or "item" when dst is empty); false if it did not fit. */
bool sfs_list_append(char *dst, size_t len, const char *item);

/* The time ms milliseconds from now on clock (for a timed wait on that clock). */
void sfs_deadline_in(clockid_t clock, long ms, struct timespec *t);

/* Parses a decimal unsigned number with no sign or trailing garbage. */
bool sfs_parse_uint(const char *s, unsigned long long *out);

/* Whether process pid is in this process's namespace of type ("mnt", "user", ...). */
bool sfs_same_namespace(int pid, const char *type);

/* The key that names one source's daemon: "b-MAJ-MIN" or "f-DEV-INO". Fills the resolved
 * path too. Returns 0 or -errno; on failure err holds the one-line reason. */
int sfs_source_key(const char *source, char *key, size_t keylen, char *path, size_t pathlen,
                   bool *is_file, char *err, size_t errlen);

/* Calls fn for every running strictfs daemon other than the caller (a process whose command
 * line is `strictfs __daemon KEY ...`), with its pid and key. Found through /proc, so a
 * daemon whose control socket is gone is found too. */
void sfs_each_daemon(void (*fn)(pid_t pid, const char *key, void *arg), void *arg);

/* The pid of a running daemon serving key, other than the caller; 0 if there is none. */
pid_t sfs_daemon_pid(const char *key);

/* Formats the one-line error for a mountpoint that failed with errno e. A dead view
 * (ENOTCONN: its daemon is gone) also says how to clear it. */
void sfs_mountpoint_errf(char *buf, size_t len, const char *mp, int e);

#endif
