/* The state a successor takes over (see handover.h). One memfd, sparse, mapped whole:
 *
 *   page 0        control: magic, version, layout, high-water marks, the lookup table's word
 *   daemon        two copies of struct sfs_ho_daemon
 *   views         two copies of struct sfs_ho_view per registry slot
 *   files         struct sfs_ho_file per slot, written by the open-file table (openfiles.c)
 *   lookups       two halves; one is the open-addressing table of (node id, view) -> count,
 *                 the other is where it is rebuilt when it fills up
 *
 * Only what is touched takes memory (a read of a hole would too, hence the high-water marks:
 * a successor reads no further than its predecessor wrote). */
#include "handover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "util.h"

#define PAGE 4096u
#define ROUND(x) (((size_t)(x) + PAGE - 1) & ~(size_t)(PAGE - 1))
#define MAGIC 0x53465348414e444fULL /* "SFSHANDO" */
#define LK_MIN_BITS 12
#define LK_MAX_BITS 25
#define LK_WORD_TAG (0xA5ULL << 56)
#define TOMB UINT64_MAX

struct control {
	uint64_t magic;
	uint32_t version;
	uint32_t pad;
	uint64_t layout;
	_Atomic uint64_t lk_word;     /* LK_WORD_TAG | half << 8 | bits */
	_Atomic uint32_t views_hwm;   /* view slots ever written + 1 */
	_Atomic uint32_t files_hwm;   /* file slots ever used */
	_Atomic uint32_t intents_hwm; /* intent slots ever used */
};

struct copy {
	_Atomic uint64_t seq;         /* 0: being written */
	uint64_t check;
	unsigned char data[];
};

struct sfs_ho_lookup {
	_Atomic uint64_t id;          /* 0: empty, TOMB: deleted */
	uint32_t view;
	uint32_t check;
	_Atomic uint64_t count;
};

#define DAEMON_COPY ROUND(sizeof(struct copy) + sizeof(struct sfs_ho_daemon))
#define VIEW_COPY ROUND(sizeof(struct copy) + sizeof(struct sfs_ho_view))
#define OFF_DAEMON ((size_t)PAGE)
#define OFF_VIEWS (OFF_DAEMON + 2 * DAEMON_COPY)
#define OFF_FILES (OFF_VIEWS + (size_t)SFS_HO_VIEWS * 2 * VIEW_COPY)
#define OFF_INTENTS ROUND(OFF_FILES + (size_t)SFS_HO_FILES * sizeof(struct sfs_ho_file))
#define OFF_LK ROUND(OFF_INTENTS + (size_t)SFS_HO_INTENTS * sizeof(struct sfs_ho_intent))
#define LK_HALF ((size_t)sizeof(struct sfs_ho_lookup) << LK_MAX_BITS)
#define TOTAL (OFF_LK + 2 * LK_HALF)

static uint64_t layout(void)
{
	return (uint64_t)sizeof(struct sfs_ho_daemon) << 44 ^ (uint64_t)sizeof(struct sfs_ho_view) << 24 ^
	       (uint64_t)sizeof(struct sfs_ho_intent) << 56 ^
	       (uint64_t)sizeof(struct sfs_ho_file) << 12 ^ sizeof(struct sfs_ho_lookup) ^
	       (uint64_t)sizeof(struct sfs_opts) << 32 ^ SFS_HO_FILES ^ (uint64_t)SFS_HO_VIEWS << 50;
}

static uint64_t check_of(uint64_t seq, const void *data, size_t len)
{
	return sfs_hash_record(seq, data, len);
}

void sfs_ho_format_version(char *buf, size_t len)
{
	snprintf(buf, len, "%u %#llx", SFS_HO_VERSION, (unsigned long long)layout());
}

int64_t sfs_ho_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct control *control(struct sfs_handover *h)
{
	return (struct control *)h->map;
}

/* ---- records written twice over ------------------------------------------------------- */

static struct copy *copy_at(struct sfs_handover *h, size_t off, size_t stride, int i)
{
	return (struct copy *)(h->map + off + (size_t)i * stride);
}

/* The newer whole copy of a pair, or NULL. */
static const struct copy *newest(struct sfs_handover *h, size_t off, size_t stride, size_t len)
{
	const struct copy *best = NULL;

	for (int i = 0; i < 2; i++) {
		struct copy *c = copy_at(h, off, stride, i);
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		if (seq && c->check == check_of(seq, c->data, len) &&
		    (!best || seq > atomic_load(&best->seq)))
			best = c;
	}
	return best;
}

/* Writes data over the older copy: the newer one stays whole until this one is. */
static void write_pair(struct sfs_handover *h, size_t off, size_t stride, const void *data,
                       size_t len)
{
	struct copy *a = copy_at(h, off, stride, 0), *b = copy_at(h, off, stride, 1);
	uint64_t sa = atomic_load(&a->seq), sb = atomic_load(&b->seq);
	struct copy *c = sa <= sb ? a : b;
	uint64_t seq = (sa > sb ? sa : sb) + 1;

	atomic_store_explicit(&c->seq, 0, memory_order_release);
	memcpy(c->data, data, len);
	c->check = check_of(seq, data, len);
	atomic_store_explicit(&c->seq, seq, memory_order_release);
}

static void clear_pair(struct sfs_handover *h, size_t off, size_t stride)
{
	atomic_store(&copy_at(h, off, stride, 0)->seq, 0);
	atomic_store(&copy_at(h, off, stride, 1)->seq, 0);
}

void sfs_ho_write_daemon(struct sfs_handover *h)
{
	pthread_mutex_lock(&h->records_lock);
	write_pair(h, OFF_DAEMON, DAEMON_COPY, &h->daemon, sizeof(h->daemon));
	pthread_mutex_unlock(&h->records_lock);
}

void sfs_ho_write_view(struct sfs_handover *h, const struct sfs_ho_view *v)
{
	struct control *c = control(h);
	uint32_t hwm = atomic_load(&c->views_hwm);

	if (v->slot >= SFS_HO_VIEWS)
		return;
	while (hwm <= v->slot && !atomic_compare_exchange_weak(&c->views_hwm, &hwm, v->slot + 1))
		;
	pthread_mutex_lock(&h->records_lock);
	write_pair(h, OFF_VIEWS + (size_t)v->slot * 2 * VIEW_COPY, VIEW_COPY, v, sizeof(*v));
	pthread_mutex_unlock(&h->records_lock);
}

void sfs_ho_drop_view(struct sfs_handover *h, uint32_t slot)
{
	if (slot >= SFS_HO_VIEWS)
		return;
	pthread_mutex_lock(&h->records_lock);
	clear_pair(h, OFF_VIEWS + (size_t)slot * 2 * VIEW_COPY, VIEW_COPY);
	pthread_mutex_unlock(&h->records_lock);
}

bool sfs_ho_read_view(struct sfs_handover *h, uint32_t slot, struct sfs_ho_view *out)
{
	const struct copy *c;

	if (slot >= atomic_load(&control(h)->views_hwm))
		return false;
	c = newest(h, OFF_VIEWS + (size_t)slot * 2 * VIEW_COPY, VIEW_COPY, sizeof(*out));
	if (!c)
		return false;
	memcpy(out, c->data, sizeof(*out));
	return out->slot == slot && out->opts_size == sizeof(struct sfs_opts);
}

/* ---- open files: the table's records (openfiles.h) ----------------------------------- */

struct sfs_openfiles_mem sfs_ho_files_memory(struct sfs_handover *h)
{
	return (struct sfs_openfiles_mem){.records = (struct sfs_ho_file *)(h->map + OFF_FILES),
	                                  .used = &control(h)->files_hwm, .cap = SFS_HO_FILES};
}

/* ---- intents --------------------------------------------------------------------------- */

static struct sfs_ho_intent *intent_at(struct sfs_handover *h, uint32_t slot)
{
	return (struct sfs_ho_intent *)(h->map + OFF_INTENTS) + slot;
}

int sfs_ho_intent_begin(struct sfs_handover *h, const struct sfs_ho_intent *rec)
{
	struct sfs_ho_intent *in;
	int slot = -1;

	pthread_mutex_lock(&h->intents_lock);
	if (h->nfree_intents) {
		slot = h->free_intents[--h->nfree_intents];
	} else if (h->next_intent < SFS_HO_INTENTS) {
		slot = h->next_intent++;
		atomic_store(&control(h)->intents_hwm, h->next_intent);
	}
	pthread_mutex_unlock(&h->intents_lock);
	if (slot < 0)
		return -1;
	in = intent_at(h, slot);
	atomic_store(&in->state, 0);
	memcpy((char *)in + sizeof(in->state), (const char *)rec + sizeof(rec->state),
	       sizeof(*in) - sizeof(in->state));
	atomic_store_explicit(&in->state, SFS_HO_BEGUN, memory_order_release);
	return slot;
}

void sfs_ho_intent_done(struct sfs_handover *h, int slot, int rc)
{
	struct sfs_ho_intent *in = intent_at(h, slot);

	in->rc = rc;
	atomic_store_explicit(&in->state, SFS_HO_DONE, memory_order_release);
}

void sfs_ho_intent_end(struct sfs_handover *h, int slot)
{
	atomic_store_explicit(&intent_at(h, slot)->state, 0, memory_order_release);
	pthread_mutex_lock(&h->intents_lock);
	if (h->nfree_intents < SFS_HO_INTENTS && h->free_intents)
		h->free_intents[h->nfree_intents++] = slot;
	pthread_mutex_unlock(&h->intents_lock);
}

int sfs_ho_intent_find(struct sfs_handover *h, uint32_t view, uint64_t unique,
                       struct sfs_ho_intent *out)
{
	for (uint32_t slot = 0; slot < h->next_intent; slot++) {
		struct sfs_ho_intent *in = intent_at(h, slot);
		if (!atomic_load_explicit(&in->state, memory_order_acquire) || in->view != view ||
		    in->unique != unique)
			continue;
		*out = *in;
		out->name[sizeof(out->name) - 1] = out->name2[sizeof(out->name2) - 1] = '\0';
		return slot;
	}
	return -1;
}

/* ---- lookup counts --------------------------------------------------------------------- */

/* Not htab.h, though it is the tree's one hash table: this one lives in the memfd, where a
 * successor reads it as it was left, and htab's chains are pointers into one process's heap,
 * its buckets malloc'd. So it is open addressing over entries at fixed offsets, each found
 * from its id alone, rebuilt in the other half when it fills. */

static struct sfs_ho_lookup *half_at(struct sfs_handover *h, uint32_t half)
{
	return (struct sfs_ho_lookup *)(h->map + OFF_LK + half * LK_HALF);
}

static uint32_t entry_check(uint64_t id, uint32_t view)
{
	return (uint32_t)sfs_hash_inode(view, id);
}

static void punch(struct sfs_handover *h, uint32_t half)
{
	/* the half's pages go back, and read as zeroes (empty) after */
	fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, OFF_LK + half * LK_HALF, LK_HALF);
}

/* Puts a live entry into table t of 2^bits (no such entry there yet). */
static void place(struct sfs_ho_lookup *t, uint32_t bits, uint64_t id, uint32_t view,
                  uint64_t count)
{
	size_t mask = ((size_t)1 << bits) - 1, i = sfs_hash_inode(0, id) & mask;

	while (atomic_load(&t[i].id) != 0)
		i = (i + 1) & mask;
	t[i].view = view;
	t[i].check = entry_check(id, view);
	atomic_store(&t[i].count, count);
	atomic_store_explicit(&t[i].id, id, memory_order_release);
}

/* Rebuilds the table in the other half with room for live entries (tombstones dropped, and
 * entries that fail their check, which only a predecessor's state can hold), then switches. */
static void rebuild(struct sfs_handover *h, uint32_t bits)
{
	uint32_t other = h->lk_half ^ 1;
	struct sfs_ho_lookup *from = h->lk, *to = half_at(h, other);
	size_t n = (size_t)1 << h->lk_bits, live = 0;

	punch(h, other);
	for (size_t i = 0; i < n; i++) {
		uint64_t id = atomic_load(&from[i].id), count = atomic_load(&from[i].count);
		if (id == 0 || id == TOMB || count == 0 || from[i].check != entry_check(id, from[i].view))
			continue;
		place(to, bits, id, from[i].view, count);
		live++;
	}
	atomic_store(&control(h)->lk_word, LK_WORD_TAG | (uint64_t)other << 8 | bits);
	punch(h, h->lk_half);
	h->lk = to;
	h->lk_half = other;
	h->lk_bits = bits;
	h->lk_used = live;
	h->lk_dead = 0;
}

static void make_room(struct sfs_handover *h)
{
	size_t cap = (size_t)1 << h->lk_bits, live = h->lk_used - h->lk_dead;
	uint32_t bits = h->lk_bits;

	if ((h->lk_used + 1) * 2 <= cap)
		return;
	while ((live + 1) * 4 > ((size_t)1 << bits) && bits < LK_MAX_BITS)
		bits++;
	rebuild(h, bits);
}

void sfs_ho_ref_set(struct sfs_handover *h, uint64_t id, uint32_t view, uint64_t count)
{
	size_t mask = ((size_t)1 << h->lk_bits) - 1, i = sfs_hash_inode(0, id) & mask;
	struct sfs_ho_lookup *t = h->lk, *hole = NULL;
	uint64_t e;

	if (!id || id == TOMB)
		return;
	for (size_t probes = 0; probes <= mask && (e = atomic_load(&t[i].id)) != 0; probes++) {
		if (e == id && t[i].view == view) {
			if (count) {
				atomic_store(&t[i].count, count);
			} else {
				atomic_store(&t[i].count, 0);
				atomic_store(&t[i].id, TOMB);
				h->lk_dead++;
			}
			return;
		}
		if (e == TOMB && !hole)
			hole = &t[i];
		i = (i + 1) & mask;
	}
	if (!count)
		return;
	if (!hole) {
		if ((h->lk_used + 1) * 2 > mask + 1) {
			make_room(h);
			sfs_ho_ref_set(h, id, view, count);
			return;
		}
		hole = &t[i];
		h->lk_used++;
	} else {
		h->lk_dead--;
	}
	hole->view = view;
	hole->check = entry_check(id, view);
	atomic_store(&hole->count, count);
	atomic_store_explicit(&hole->id, id, memory_order_release);
}

size_t sfs_ho_refs_of(struct sfs_handover *h, uint64_t id, struct sfs_ho_ref *out, size_t max)
{
	size_t mask = ((size_t)1 << h->lk_bits) - 1, i = sfs_hash_inode(0, id) & mask, n = 0;
	struct sfs_ho_lookup *t = h->lk;
	uint64_t e;

	for (size_t probes = 0; probes <= mask && (e = atomic_load(&t[i].id)) != 0; probes++) {
		uint64_t count = atomic_load(&t[i].count);
		if (e == id && count) {
			if (n < max)
				out[n] = (struct sfs_ho_ref){t[i].view, count};
			n++;
		}
		i = (i + 1) & mask;
	}
	return n;
}

uint64_t sfs_ho_ref_get(struct sfs_handover *h, uint64_t id, uint32_t view)
{
	size_t mask = ((size_t)1 << h->lk_bits) - 1, i = sfs_hash_inode(0, id) & mask;
	struct sfs_ho_lookup *t = h->lk;
	uint64_t e;

	for (size_t probes = 0; probes <= mask && (e = atomic_load(&t[i].id)) != 0; probes++) {
		if (e == id && t[i].view == view)
			return atomic_load(&t[i].count);
		i = (i + 1) & mask;
	}
	return 0;
}

void sfs_ho_refs_drop_view(struct sfs_handover *h, uint32_t view)
{
	size_t n = (size_t)1 << h->lk_bits;
	struct sfs_ho_lookup *t = h->lk;

	for (size_t i = 0; i < n; i++) {
		uint64_t e = atomic_load(&t[i].id);
		if (e && e != TOMB && t[i].view == view) {
			atomic_store(&t[i].count, 0);
			atomic_store(&t[i].id, TOMB);
			h->lk_dead++;
		}
	}
}

/* ---- the whole ------------------------------------------------------------------------- */

static int map_fd(struct sfs_handover *h, int fd)
{
	h->fd = fd;
	h->size = TOTAL;
	h->map = mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h->map == MAP_FAILED) {
		h->map = NULL;
		return -errno;
	}
	pthread_mutex_init(&h->records_lock, NULL);
	pthread_mutex_init(&h->intents_lock, NULL);
	h->free_intents = calloc(SFS_HO_INTENTS, sizeof(*h->free_intents));
	return h->free_intents ? 0 : -ENOMEM;
}

void sfs_ho_close(struct sfs_handover *h)
{
	if (h->map) {
		munmap(h->map, h->size);
		pthread_mutex_destroy(&h->records_lock);
		pthread_mutex_destroy(&h->intents_lock);
		close(h->fd);
	}
	free(h->free_intents);
	memset(h, 0, sizeof(*h));
}

int sfs_ho_create(struct sfs_handover *h)
{
	struct control *c;
	int fd, rc;

	memset(h, 0, sizeof(*h));
	fd = memfd_create("strictfs-state", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = ftruncate(fd, TOTAL) < 0 ? -errno : map_fd(h, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	c = control(h);
	c->magic = MAGIC;
	c->version = SFS_HO_VERSION;
	c->layout = layout();
	h->lk_half = 0;
	h->lk_bits = LK_MIN_BITS;
	h->lk = half_at(h, 0);
	atomic_store(&c->lk_word, LK_WORD_TAG | LK_MIN_BITS);
	h->daemon.generation = 1;
	h->daemon.started_ms = sfs_ho_now_ms();
	h->daemon.state = SFS_HO_SERVING;
	return 0;
}

/* A predecessor's unused intent slots are free again; only its records of changes still in
 * flight stay, for their requests to be sent again. Without this every generation would take
 * new slots above its predecessor's, and after enough crashes no change could be recorded. */
static void free_unused_intents(struct sfs_handover *h)
{
	for (uint32_t slot = h->next_intent; slot-- > 0;)
		if (!atomic_load(&intent_at(h, slot)->state))
			h->free_intents[h->nfree_intents++] = slot;
}

int sfs_ho_adopt(struct sfs_handover *h, int fd, char *err, size_t errlen)
{
	const struct copy *d;
	struct control *c;
	struct stat st;
	uint64_t word;
	int rc;

	memset(h, 0, sizeof(*h));
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != TOTAL) {
		sfs_errf(err, errlen, "state", "not a strictfs state of this version (size)");
		return -EINVAL;
	}
	if ((rc = map_fd(h, fd))) {
		sfs_errf(err, errlen, "state", "cannot map it: %s", strerror(-rc));
		return rc;
	}
	h->resumed = true;
	c = control(h);
	if (c->magic != MAGIC || c->version != SFS_HO_VERSION || c->layout != layout()) {
		sfs_errf(err, errlen, "state", "version %u, layout %#llx: this binary reads version %u, "
		         "layout %#llx", c->version, (unsigned long long)c->layout, SFS_HO_VERSION,
		         (unsigned long long)layout());
		return -EINVAL;
	}
	if (!(d = newest(h, OFF_DAEMON, DAEMON_COPY, sizeof(h->daemon)))) {
		sfs_errf(err, errlen, "state", "the daemon's record fails its checksum");
		return -EINVAL;
	}
	memcpy(&h->daemon, d->data, sizeof(h->daemon));
	word = atomic_load(&c->lk_word);
	if ((word & ~0xffffULL) != LK_WORD_TAG || (word >> 8 & 0xff) > 1 ||
	    (word & 0xff) < LK_MIN_BITS || (word & 0xff) > LK_MAX_BITS) {
		sfs_errf(err, errlen, "state", "the lookup table's word is damaged");
		return -EINVAL;
	}
	h->lk_half = word >> 8 & 0xff;
	h->lk_bits = word & 0xff;
	h->lk = half_at(h, h->lk_half);
	rebuild(h, h->lk_bits); /* checks every entry, and counts them */
	h->next_intent = atomic_load(&c->intents_hwm);
	if (h->next_intent > SFS_HO_INTENTS)
		h->next_intent = SFS_HO_INTENTS;
	free_unused_intents(h);
	return 0;
}

/* ---- the descriptors a successor keeps ------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

struct fdset {
	int *fd;
	size_t n, cap;
};

static void add_fd(struct fdset *s, int fd)
{
	if (fd < 0)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		int *p = realloc(s->fd, cap * sizeof(*p));
		if (!p)
			return;
		s->fd = p;
		s->cap = cap;
	}
	s->fd[s->n++] = fd;
}

void sfs_ho_close_unnamed(struct sfs_handover *h, const struct sfs_openfiles *files, int keep)
{
	const struct sfs_ho_daemon *d = &h->daemon;
	struct fdset s = {0};
	struct sfs_ho_view v;
	struct sfs_ho_file f;
	struct dirent *de;
	DIR *dir;

	add_fd(&s, h->fd);
	add_fd(&s, keep);
	add_fd(&s, d->listen_fd);
	add_fd(&s, d->lock_fd);
	add_fd(&s, d->backing.root_fd);
	add_fd(&s, d->backing.loop_fd);
	add_fd(&s, d->backing.dev_fd);
	for (uint32_t slot = 0; slot < SFS_HO_VIEWS; slot++)
		if (sfs_ho_read_view(h, slot, &v)) {
			add_fd(&s, v.fuse_fd);
			add_fd(&s, v.uring_fd);
			add_fd(&s, v.clone_tree_fd);
			add_fd(&s, v.clone_fd);
		}
	for (uint32_t slot = 0; slot < sfs_openfiles_used(files); slot++)
		if (sfs_openfiles_record(files, slot, &f)) {
			add_fd(&s, f.fd);
			add_fd(&s, atomic_load(&f.twin));
		}
	qsort(s.fd, s.n, sizeof(int), cmp_int);
	if (!(dir = opendir("/proc/self/fd")))
		goto out;
	{
		struct fdset doomed = {0};
		while ((de = readdir(dir))) {
			int fd = atoi(de->d_name);
			if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd <= 2 || fd == dirfd(dir))
				continue;
			if (!s.n || !bsearch(&fd, s.fd, s.n, sizeof(int), cmp_int))
				add_fd(&doomed, fd);
		}
		closedir(dir);
		for (size_t i = 0; i < doomed.n; i++)
			close(doomed.fd[i]);
		free(doomed.fd);
	}
out:
	free(s.fd);
}
