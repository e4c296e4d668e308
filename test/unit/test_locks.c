/* Tests of the lock table (locks.h) without a kernel's FUSE: owners of two "views" lock one
 * file in a temporary directory through carriers, as the request layer would ask. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "locks.h"
#include "openfiles.h"

static int reopen_path(int fd, int flags)
{
	char path[40];
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, flags | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

static struct flock range(short type, off_t start, off_t len)
{
	return (struct flock){.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
}

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* Slots enough for the carriers of these tests. */
#define RECORDS 256

struct fixture {
	struct sfs_ho_file *records;  /* as the handover state keeps them (handover.h) */
	_Atomic uint32_t used;
	struct sfs_openfiles files;
	struct sfs_locks *L;
	char dir[64], file[96];
	int fd;
	uint64_t ino;
};

static void setup(struct fixture *x)
{
	struct stat st;

	strcpy(x->dir, "/tmp/sfs-test-locks.XXXXXX");
	CHECK(mkdtemp(x->dir) != NULL, "a temporary directory");
	snprintf(x->file, sizeof(x->file), "%s/f", x->dir);
	x->fd = open(x->file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(x->fd >= 0 && fstat(x->fd, &st) == 0, "a file to lock");
	x->ino = st.st_ino;
	x->records = calloc(RECORDS, sizeof(*x->records));
	atomic_init(&x->used, 0);
	CHECK(x->records && sfs_openfiles_init(&x->files, (struct sfs_openfiles_mem){
	      .records = x->records, .used = &x->used, .cap = RECORDS}) == 0,
	      "slots and records for the carriers");
	CHECK(sfs_locks_init(&x->L, &x->files) == 0, "the table");
}

static void teardown(struct fixture *x)
{
	sfs_locks_destroy(x->L);
	sfs_openfiles_destroy(&x->files);
	free(x->records);
	close(x->fd);
	unlink(x->file);
	rmdir(x->dir);
}

/* Two views' owners of one file exclude each other as two processes would; the FLUSH of the
 * holder lets the other in; a read-only carrier is upgraded for a write lock. */
static void test_posix_between_views(void)
{
	struct fixture x;
	struct sfs_lock_key a = {.view = 1, .owner = 100}, b = {.view = 2, .owner = 100};
	struct sfs_lock_via via = {.reopen = reopen_path};
	struct flock fl;

	setup(&x);
	a.ino = b.ino = x.ino;
	via.fd = x.fd;
	fl = range(F_WRLCK, 0, 10);
	CHECK(sfs_locks_set(x.L, &a, &via, &fl, 11, NULL) == 0, "a write lock through view 1");
	fl = range(F_WRLCK, 5, 1);
	CHECK(sfs_locks_set(x.L, &b, &via, &fl, 22, NULL) == -EAGAIN,
	      "the same owner number of view 2 is another owner, and conflicts");
	fl = range(F_WRLCK, 20, 1);
	CHECK(sfs_locks_set(x.L, &b, &via, &fl, 22, NULL) == 0, "outside the range it is granted");
	fl = range(F_RDLCK, 0, 1);
	CHECK(sfs_locks_test(x.L, &b, &via, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_start == 0 &&
	      fl.l_len == 10 && fl.l_pid == 11, "F_GETLK names the holder's range and pid (%d)",
	      fl.l_pid);
	fl = range(F_UNLCK, 2, 3);
	CHECK(sfs_locks_set(x.L, &a, &via, &fl, 11, NULL) == 0, "an unlock in the middle splits it");
	fl = range(F_WRLCK, 2, 3);
	CHECK(sfs_locks_set(x.L, &b, &via, &fl, 22, NULL) == 0, "the hole is free");
	fl = range(F_WRLCK, 0, 1);
	CHECK(sfs_locks_set(x.L, &b, &via, &fl, 22, NULL) == -EAGAIN, "the rest is still held");
	CHECK(sfs_locks_count(x.L) == 2, "one carrier per owner (%zu)", sfs_locks_count(x.L));
	sfs_locks_flush(x.L, 1, x.ino, 100);
	CHECK(sfs_locks_set(x.L, &b, &via, &fl, 22, NULL) == 0, "the holder's FLUSH ends its locks");
	CHECK(sfs_locks_count(x.L) == 1, "and its carrier");
	sfs_locks_view_ended(x.L, 2);
	CHECK(sfs_locks_count(x.L) == 0, "a view's end ends its owners' carriers");
	teardown(&x);
}

/* flock locks and fcntl locks never meet (as on ext4); flock owners end at the RELEASE of
 * the open file they came through. */
static void test_flock_and_release(void)
{
	struct fixture x;
	struct sfs_lock_key a = {.view = 1, .owner = 7, .flock = true};
	struct sfs_lock_key b = {.view = 2, .owner = 8, .flock = true};
	struct sfs_lock_key p = {.view = 2, .owner = 9};
	struct sfs_lock_via va = {.fh = 3, .reopen = reopen_path}, vb = va;
	struct flock fl = range(F_WRLCK, 0, 0);

	setup(&x);
	a.ino = b.ino = p.ino = x.ino;
	va.fd = vb.fd = x.fd;
	vb.fh = 4;
	CHECK(sfs_locks_flock(x.L, &a, &va, LOCK_EX, NULL) == 0, "flock -x through view 1");
	CHECK(sfs_locks_flock(x.L, &b, &vb, LOCK_SH, NULL) == -EAGAIN, "flock -s through view 2 waits");
	CHECK(sfs_locks_set(x.L, &p, &vb, &fl, 33, NULL) == 0, "an fcntl lock does not meet it");
	sfs_locks_release(x.L, 1, x.ino, 3);
	CHECK(sfs_locks_flock(x.L, &b, &vb, LOCK_SH, NULL) == 0,
	      "the RELEASE of the holder's open file ends its flock lock");
	sfs_locks_view_ended(x.L, 2);
	CHECK(sfs_locks_count(x.L) == 0, "nothing left (%zu)", sfs_locks_count(x.L));
	teardown(&x);
}

struct waiting {
	struct fixture *x;
	struct sfs_lock_key k;
	struct sfs_lock_via via;
	struct sfs_lock_wait w;
	int rc;
};

static void *wait_for_write_lock(void *arg)
{
	struct waiting *t = arg;
	struct flock fl = range(F_WRLCK, 0, 1);

	t->rc = sfs_locks_set(t->x->L, &t->k, &t->via, &fl, 44, &t->w);
	return NULL;
}

/* Joins the waiter within secs; else ends its wait (so the test goes on) and says so. */
static bool joined_within(pthread_t th, struct waiting *t, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	if (pthread_timedjoin_np(th, NULL, &until) == 0)
		return true;
	sfs_lock_wait_interrupt(&t->w);
	pthread_join(th, NULL);
	return false;
}

static void settle(void)
{
	struct timespec tick = {0, 50 * 1000 * 1000};
	nanosleep(&tick, NULL);
}

/* A waiter is granted when the holder's lock goes, and an interrupted one gets EINTR. */
static void test_waits(void)
{
	struct fixture x;
	struct sfs_lock_key a = {.view = 1, .owner = 1};
	struct sfs_lock_via via = {.reopen = reopen_path};
	struct flock fl = range(F_WRLCK, 0, 1);
	struct waiting t = {.k = {.view = 2, .owner = 2}};
	pthread_t th;

	setup(&x);
	a.ino = t.k.ino = x.ino;
	via.fd = x.fd;
	t.x = &x;
	t.via = via;
	pthread_mutex_init(&t.w.lock, NULL);
	CHECK(sfs_locks_set(x.L, &a, &via, &fl, 1, NULL) == 0, "held through view 1");
	pthread_create(&th, NULL, wait_for_write_lock, &t);
	settle();
	sfs_locks_flush(x.L, 1, x.ino, 1);
	CHECK(joined_within(th, &t, 5), "the waiter is woken once the holder's locks go");
	CHECK(t.rc == 0, "and granted (%d)", t.rc);

	CHECK(sfs_locks_set(x.L, &a, &via, &fl, 1, NULL) == -EAGAIN, "now view 2 holds it");
	sfs_locks_flush(x.L, 2, x.ino, 2);
	CHECK(sfs_locks_set(x.L, &a, &via, &fl, 1, NULL) == 0, "held through view 1 again");
	memset(&t.w, 0, sizeof(t.w));
	pthread_mutex_init(&t.w.lock, NULL);
	t.rc = 1;
	pthread_create(&th, NULL, wait_for_write_lock, &t);
	settle();
	sfs_lock_wait_interrupt(&t.w);
	CHECK(joined_within(th, &t, 5), "an interrupted waiter stops waiting");
	CHECK(t.rc == -EINTR, "with EINTR (%d)", t.rc);
	sfs_locks_view_ended(x.L, 1);
	sfs_locks_view_ended(x.L, 2);
	pthread_mutex_destroy(&t.w.lock);
	teardown(&x);
}

/* Carriers are bounded by the owners holding locks: 10,000 lock and unlock cycles of many
 * owners leave the descriptors where they were. */
static void test_descriptors_bounded(void)
{
	struct fixture x;
	struct sfs_lock_via via = {.reopen = reopen_path};
	size_t before;

	setup(&x);
	via.fd = x.fd;
	before = open_fds();
	for (int i = 0; i < 10000; i++) {
		struct sfs_lock_key k = {.view = (uint32_t)(i % 3), .ino = x.ino,
		                         .owner = (uint64_t)(i % 50)};
		struct flock fl = range(F_RDLCK, i % 100, 1);
		sfs_locks_set(x.L, &k, &via, &fl, 5, NULL);
		fl.l_type = F_UNLCK;
		sfs_locks_set(x.L, &k, &via, &fl, 5, NULL);
		if (i % 7 == 0)
			sfs_locks_flush(x.L, k.view, x.ino, k.owner);
	}
	for (uint32_t v = 0; v < 3; v++)
		sfs_locks_view_ended(x.L, v);
	CHECK(sfs_locks_count(x.L) == 0, "no carrier left (%zu)", sfs_locks_count(x.L));
	CHECK(open_fds() == before, "descriptors as before: %zu, %zu", before, open_fds());
	teardown(&x);
}

int main(void)
{
	test_posix_between_views();
	test_flock_and_release();
	test_waits();
	test_descriptors_bounded();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
