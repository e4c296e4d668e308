/* fsops — the metadata loops of the strictfs benchmark (bench/run compiles it at run time).
 *
 * Each command does one loop of plain system calls on a directory tree and prints the elapsed
 * wall-clock time in seconds (CLOCK_MONOTONIC, around the loop only) on stdout. Any failing call
 * prints the call, the path and the error on stderr and exits 1: a benchmark that silently counts
 * failed calls as fast ones is worse than none.
 *
 *   fsops create  DIR NDIRS NFILES      mkdir DIR/dNN, then open(O_CREAT|O_EXCL)+close NFILES
 *                                       files per directory (fNNNNNN), round-robin over the dirs
 *   fsops stat    DIR NDIRS NFILES      stat() every file made by create, same order
 *   fsops readdir DIR NDIRS NFILES PASSES
 *                                       opendir/readdir/closedir every dNN, PASSES times; checks
 *                                       that each listing has NFILES entries
 *   fsops lsl     DIR NDIRS NFILES      what ls -l does: readdir every dNN and lstat (fstatat,
 *                                       AT_SYMLINK_NOFOLLOW) each entry as it is listed
 *   fsops unlink  DIR NDIRS NFILES      unlink() every file, then rmdir() every dNN
 *   fsops mkbig   DIR N                 N empty files in one directory, names big_name(i)
 *   fsops statbig DIR N COUNT SEED exact|rcase
 *                                       stat() COUNT distinct names out of the N (a seeded random
 *                                       choice); rcase gives each letter a random case first (for
 *                                       case-insensitive targets)
 *   fsops rmbig   DIR N                 unlink the N files (not timed by bench/run's tables)
 *   fsops excl    DEV                   exit 0 if DEV can be opened O_EXCL (nobody holds it)
 *   fsops locks   FILE COUNT            open FILE, then COUNT uncontended pairs of fcntl F_SETLK:
 *                                       a write lock on its first byte, and its unlock
 *   fsops roundtrip FILE COUNT          COUNT getxattr(FILE, "user.fsops-none"): the kernel caches
 *                                       no xattr, so each is one request to the daemon and back,
 *                                       answered ENODATA (any other answer is a failure)
 *   fsops statfs  DIR COUNT             COUNT statfs(DIR) after one untimed: a FUSE kernel caches
 *                                       no statfs, so each is one request to the daemon and back
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *call, const char *path)
{
	fprintf(stderr, "fsops: %s %s: %s\n", call, path, strerror(errno));
	exit(1);
}

static long num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "fsops: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static uint64_t rng_state;

static uint64_t rng(void) /* xorshift64* */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* Mixed-case names, so that a random-case spelling usually differs from the stored one. */
static void big_name(char *buf, size_t len, long i)
{
	snprintf(buf, len, "Entry-%07ld-Data.Txt", i);
}

static void file_path(char *buf, size_t len, const char *dir, long d, long f)
{
	snprintf(buf, len, "%s/d%02ld/f%06ld", dir, d, f);
}

static int cmd_create(const char *dir, long nd, long nf)
{
	char p[4096];
	double t0 = now();
	for (long d = 0; d < nd; d++) {
		snprintf(p, sizeof p, "%s/d%02ld", dir, d);
		if (mkdir(p, 0755) < 0)
			die("mkdir", p);
	}
	for (long f = 0; f < nf; f++)
		for (long d = 0; d < nd; d++) {
			file_path(p, sizeof p, dir, d, f);
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0)
				die("open(O_CREAT)", p);
			if (close(fd) < 0)
				die("close", p);
		}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_stat(const char *dir, long nd, long nf)
{
	char p[4096];
	struct stat st;
	double t0 = now();
	for (long f = 0; f < nf; f++)
		for (long d = 0; d < nd; d++) {
			file_path(p, sizeof p, dir, d, f);
			if (stat(p, &st) < 0)
				die("stat", p);
		}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_readdir(const char *dir, long nd, long nf, long passes)
{
	char p[4096];
	double t0 = now();
	for (long r = 0; r < passes; r++)
		for (long d = 0; d < nd; d++) {
			snprintf(p, sizeof p, "%s/d%02ld", dir, d);
			DIR *dp = opendir(p);
			if (!dp)
				die("opendir", p);
			long n = 0;
			struct dirent *de;
			errno = 0;
			while ((de = readdir(dp)) != NULL)
				if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
					n++;
			if (errno)
				die("readdir", p);
			closedir(dp);
			if (n != nf) {
				fprintf(stderr, "fsops: readdir %s: %ld entries, expected %ld\n", p, n, nf);
				exit(1);
			}
		}
	printf("%.6f\n", now() - t0);
	return 0;
}

/* What `ls -l` does: list each directory and lstat every entry in it. */
static int cmd_lsl(const char *dir, long nd, long nf)
{
	char p[4096];
	struct stat st;
	double t0 = now();
	for (long d = 0; d < nd; d++) {
		snprintf(p, sizeof p, "%s/d%02ld", dir, d);
		DIR *dp = opendir(p);
		if (!dp)
			die("opendir", p);
		long n = 0;
		struct dirent *de;
		errno = 0;
		while ((de = readdir(dp)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				die("fstatat", de->d_name);
			n++;
			errno = 0;
		}
		if (errno)
			die("readdir", p);
		closedir(dp);
		if (n != nf) {
			fprintf(stderr, "fsops: lsl %s: %ld entries, expected %ld\n", p, n, nf);
			exit(1);
		}
	}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_unlink(const char *dir, long nd, long nf)
{
	char p[4096];
	double t0 = now();
	for (long f = 0; f < nf; f++)
		for (long d = 0; d < nd; d++) {
			file_path(p, sizeof p, dir, d, f);
			if (unlink(p) < 0)
				die("unlink", p);
		}
	for (long d = 0; d < nd; d++) {
		snprintf(p, sizeof p, "%s/d%02ld", dir, d);
		if (rmdir(p) < 0)
			die("rmdir", p);
	}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_mkbig(const char *dir, long n)
{
	char p[4096], name[64];
	double t0 = now();
	for (long i = 0; i < n; i++) {
		big_name(name, sizeof name, i);
		snprintf(p, sizeof p, "%s/%s", dir, name);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			die("open(O_CREAT)", p);
		if (close(fd) < 0)
			die("close", p);
	}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_rmbig(const char *dir, long n)
{
	char p[4096], name[64];
	double t0 = now();
	for (long i = 0; i < n; i++) {
		big_name(name, sizeof name, i);
		snprintf(p, sizeof p, "%s/%s", dir, name);
		if (unlink(p) < 0)
			die("unlink", p);
	}
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_statbig(const char *dir, long n, long count, long seed, const char *mode)
{
	int rcase;
	if (strcmp(mode, "exact") == 0)
		rcase = 0;
	else if (strcmp(mode, "rcase") == 0)
		rcase = 1;
	else {
		fprintf(stderr, "fsops: statbig: mode must be exact or rcase\n");
		return 2;
	}
	if (count > n) {
		fprintf(stderr, "fsops: statbig: COUNT > N\n");
		return 2;
	}
	long *idx = malloc((size_t)n * sizeof *idx);
	if (!idx)
		die("malloc", "");
	for (long i = 0; i < n; i++)
		idx[i] = i;
	rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed;
	for (long i = 0; i < count; i++) { /* partial Fisher-Yates: COUNT distinct names */
		long j = i + (long)(rng() % (uint64_t)(n - i));
		long t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
	}
	/* All paths are made before the clock starts: only the stat() calls are timed. */
	size_t plen = strlen(dir) + 64;
	char *paths = malloc((size_t)count * plen);
	if (!paths)
		die("malloc", "");
	for (long i = 0; i < count; i++) {
		char name[64];
		big_name(name, sizeof name, idx[i]);
		if (rcase)
			for (char *c = name; *c; c++)
				if (isalpha((unsigned char)*c))
					*c = (rng() & 1) ? (char)toupper((unsigned char)*c) : (char)tolower((unsigned char)*c);
		snprintf(paths + (size_t)i * plen, plen, "%s/%s", dir, name);
	}
	struct stat st;
	double t0 = now();
	for (long i = 0; i < count; i++)
		if (stat(paths + (size_t)i * plen, &st) < 0)
			die("stat", paths + (size_t)i * plen);
	printf("%.6f\n", now() - t0);
	free(paths);
	free(idx);
	return 0;
}

static int cmd_excl(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}

static int cmd_roundtrip(const char *file, long count)
{
	char v[16];
	double t0 = now();

	for (long i = 0; i < count; i++)
		if (getxattr(file, "user.fsops-none", v, sizeof(v)) >= 0 || errno != ENODATA)
			die("getxattr", file);
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_statfs(const char *dir, long count)
{
	struct statfs sf;
	double t0;

	if (statfs(dir, &sf) < 0) /* the first may find the mount still starting */
		die("statfs", dir);
	t0 = now();
	for (long i = 0; i < count; i++)
		if (statfs(dir, &sf) < 0)
			die("statfs", dir);
	printf("%.6f\n", now() - t0);
	return 0;
}

static int cmd_locks(const char *file, long count)
{
	struct flock lk = {.l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
	int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	double t0;

	if (fd < 0)
		die("open", file);
	t0 = now();
	for (long i = 0; i < count; i++) {
		lk.l_type = F_WRLCK;
		if (fcntl(fd, F_SETLK, &lk) < 0)
			die("fcntl F_WRLCK", file);
		lk.l_type = F_UNLCK;
		if (fcntl(fd, F_SETLK, &lk) < 0)
			die("fcntl F_UNLCK", file);
	}
	printf("%.6f\n", now() - t0);
	close(fd);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: fsops create|stat|lsl|unlink DIR NDIRS NFILES\n"
			"       fsops readdir DIR NDIRS NFILES PASSES\n"
			"       fsops mkbig|rmbig DIR N\n"
			"       fsops statbig DIR N COUNT SEED exact|rcase\n"
			"       fsops excl DEV\n"
			"       fsops locks|roundtrip FILE COUNT\n"
			"       fsops statfs DIR COUNT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		usage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "excl") == 0 && argc == 3)
		return cmd_excl(argv[2]);
	if (strcmp(cmd, "create") == 0 && argc == 5)
		return cmd_create(argv[2], num(argv[3]), num(argv[4]));
	if (strcmp(cmd, "stat") == 0 && argc == 5)
		return cmd_stat(argv[2], num(argv[3]), num(argv[4]));
	if (strcmp(cmd, "readdir") == 0 && argc == 6)
		return cmd_readdir(argv[2], num(argv[3]), num(argv[4]), num(argv[5]));
	if (strcmp(cmd, "lsl") == 0 && argc == 5)
		return cmd_lsl(argv[2], num(argv[3]), num(argv[4]));
	if (strcmp(cmd, "unlink") == 0 && argc == 5)
		return cmd_unlink(argv[2], num(argv[3]), num(argv[4]));
	if (strcmp(cmd, "mkbig") == 0 && argc == 4)
		return cmd_mkbig(argv[2], num(argv[3]));
	if (strcmp(cmd, "rmbig") == 0 && argc == 4)
		return cmd_rmbig(argv[2], num(argv[3]));
	if (strcmp(cmd, "locks") == 0 && argc == 4)
		return cmd_locks(argv[2], num(argv[3]));
	if (strcmp(cmd, "roundtrip") == 0 && argc == 4)
		return cmd_roundtrip(argv[2], num(argv[3]));
	if (strcmp(cmd, "statfs") == 0 && argc == 4)
		return cmd_statfs(argv[2], num(argv[3]));
	if (strcmp(cmd, "statbig") == 0 && argc == 7)
		return cmd_statbig(argv[2], num(argv[3]), num(argv[4]), num(argv[5]), argv[6]);
	usage();
	return 2;
}
