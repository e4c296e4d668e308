/* Quota arithmetic and the state file format: pure logic, unit-tested and fuzzed apart from
 * the daemon. Usage is never stored: the daemon rebuilds it by a scan at every start. */
#include "quota_state.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const type_word[SFS_QNTYPES] = {"user", "group"};

void sfs_qstate_init(struct sfs_qstate *s)
{
	memset(s, 0, sizeof(*s));
	s->grace[SFS_QBYTES] = s->grace[SFS_QINODES] = SFS_QGRACE_DEFAULT;
}

void sfs_qstate_free(struct sfs_qstate *s)
{
	for (int t = 0; t < SFS_QNTYPES; t++)
		free(s->t[t].e);
	memset(s->t, 0, sizeof(s->t));
}

static size_t lower_bound(const struct sfs_qtable *t, uint32_t id)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->e[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct sfs_qentry *sfs_qtable_find(const struct sfs_qtable *t, uint32_t id)
{
	size_t i = lower_bound(t, id);

	return i < t->n && t->e[i].id == id ? &t->e[i] : NULL;
}

struct sfs_qentry *sfs_qtable_get(struct sfs_qtable *t, uint32_t id)
{
	size_t i = lower_bound(t, id);

	if (i < t->n && t->e[i].id == id)
		return &t->e[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct sfs_qentry *e = realloc(t->e, cap * sizeof(*e));
		if (!e)
			return NULL;
		t->e = e;
		t->cap = cap;
	}
	memmove(&t->e[i + 1], &t->e[i], (t->n - i) * sizeof(*t->e));
	t->n++;
	memset(&t->e[i], 0, sizeof(t->e[i]));
	t->e[i].id = id;
	return &t->e[i];
}

int sfs_qentry_admit(const struct sfs_qentry *e, const int64_t delta[SFS_QNRES], time_t now,
                     const time_t grace[SFS_QNRES])
{
	for (int r = 0; r < SFS_QNRES; r++) {
		int64_t after;

		if (delta[r] <= 0)
			continue;
		after = e->used[r] + e->reserved[r] + delta[r];
		if (e->lim.hard[r] && after > (int64_t)e->lim.hard[r])
			return -EDQUOT;
		/* past the soft limit: allowed until the grace time, counted from when usage first
		 * went over, has run out */
		if (e->lim.soft[r] && after > (int64_t)e->lim.soft[r] && e->grace_start[r] &&
		    now >= e->grace_start[r] + grace[r])
			return -EDQUOT;
	}
	return 0;
}

void sfs_qentry_apply(struct sfs_qentry *e, const int64_t delta[SFS_QNRES], time_t now)
{
	for (int r = 0; r < SFS_QNRES; r++) {
		e->used[r] += delta[r];
		if (e->lim.soft[r] && e->used[r] > (int64_t)e->lim.soft[r]) {
			if (!e->grace_start[r])
				e->grace_start[r] = now;
		} else {
			e->grace_start[r] = 0;
		}
	}
}

bool sfs_qentry_persistent(const struct sfs_qentry *e)
{
	for (int r = 0; r < SFS_QNRES; r++)
		if (e->lim.soft[r] || e->lim.hard[r] || e->grace_start[r])
			return true;
	return false;
}

static int by_ino(const void *a, const void *b)
{
	uint64_t x = ((const struct sfs_qlink *)a)->ino, y = ((const struct sfs_qlink *)b)->ino;

	return (x > y) - (x < y);
}

size_t sfs_qlinks_unique(struct sfs_qlink *a, size_t n)
{
	size_t kept = 0;

	if (n)
		qsort(a, n, sizeof(*a), by_ino);
	for (size_t i = 0; i < n; i++)
		if (!kept || a[i].ino != a[kept - 1].ino)
			a[kept++] = a[i];
	return kept;
}

/* A growing text buffer. */
struct out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < o->cap - o->len)
			break;
		size_t cap = o->cap * 2 + (size_t)n + 256;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->oom = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	o->len += n;
}

int sfs_qstate_format(const struct sfs_qstate *s, char **buf, size_t *len)
{
	struct out o = {.buf = malloc(256), .cap = 256};

	if (!o.buf)
		return -ENOMEM;
	o.buf[0] = '\0';
	outf(&o, "# strictfs quota limits and grace times; the daemon rewrites this file\n");
	outf(&o, "version %d\n", SFS_QSTATE_VERSION);
	outf(&o, "grace blocks=%lld inodes=%lld\n", (long long)s->grace[SFS_QBYTES],
	     (long long)s->grace[SFS_QINODES]);
	for (int t = 0; t < SFS_QNTYPES; t++) {
		for (size_t i = 0; i < s->t[t].n; i++) {
			const struct sfs_qentry *e = &s->t[t].e[i];
			if (!sfs_qentry_persistent(e))
				continue;
			outf(&o,
			     "%s %" PRIu32 " bsoft=%" PRIu64 " bhard=%" PRIu64 " isoft=%" PRIu64
			     " ihard=%" PRIu64 " bgrace=%lld igrace=%lld\n",
			     type_word[t], e->id, e->lim.soft[SFS_QBYTES], e->lim.hard[SFS_QBYTES],
			     e->lim.soft[SFS_QINODES], e->lim.hard[SFS_QINODES],
			     (long long)e->grace_start[SFS_QBYTES],
			     (long long)e->grace_start[SFS_QINODES]);
		}
	}
	if (o.oom) {
		free(o.buf);
		return -ENOMEM;
	}
	*buf = o.buf;
	*len = o.len;
	return 0;
}

/* One "key=value" field with an unsigned decimal value into *out. */
static bool field(const char *tok, const char *key, unsigned long long *out)
{
	size_t k = strlen(key);

	return !strncmp(tok, key, k) && tok[k] == '=' && sfs_parse_uint(tok + k + 1, out);
}

static bool time_value(unsigned long long v)
{
	return v <= (unsigned long long)INT64_MAX / 2;
}

/* "grace blocks=N inodes=N" */
static int parse_grace(char **save, struct sfs_qstate *s)
{
	unsigned long long b, i;
	char *t1 = strtok_r(NULL, " ", save), *t2 = strtok_r(NULL, " ", save);

	if (!t1 || !t2 || strtok_r(NULL, " ", save) || !field(t1, "blocks", &b) ||
	    !field(t2, "inodes", &i) || !time_value(b) || !time_value(i))
		return -EINVAL;
	s->grace[SFS_QBYTES] = (time_t)b;
	s->grace[SFS_QINODES] = (time_t)i;
	return 0;
}

/* "user|group ID bsoft=N bhard=N isoft=N ihard=N bgrace=T igrace=T" */
static int parse_entry(char **save, struct sfs_qtable *t)
{
	static const char *const keys[6] = {"bsoft", "bhard", "isoft", "ihard", "bgrace", "igrace"};
	unsigned long long id, v[6];
	struct sfs_qentry *e;
	char *tok = strtok_r(NULL, " ", save);

	if (!tok || !sfs_parse_uint(tok, &id) || id >= UINT32_MAX)
		return -EINVAL;
	for (int k = 0; k < 6; k++) {
		tok = strtok_r(NULL, " ", save);
		if (!tok || !field(tok, keys[k], &v[k]) || (k >= 4 && !time_value(v[k])))
			return -EINVAL;
	}
	if (strtok_r(NULL, " ", save))
		return -EINVAL;
	if (sfs_qtable_find(t, (uint32_t)id))
		return -EEXIST;
	if (!(e = sfs_qtable_get(t, (uint32_t)id)))
		return -ENOMEM;
	e->lim.soft[SFS_QBYTES] = v[0];
	e->lim.hard[SFS_QBYTES] = v[1];
	e->lim.soft[SFS_QINODES] = v[2];
	e->lim.hard[SFS_QINODES] = v[3];
	e->grace_start[SFS_QBYTES] = (time_t)v[4];
	e->grace_start[SFS_QINODES] = (time_t)v[5];
	return 0;
}

static int parse_line(char *line, struct sfs_qstate *s, bool *have_version)
{
	char *save = NULL, *word = strtok_r(line, " ", &save);
	unsigned long long version;

	if (!word || word[0] == '#')
		return 0;
	if (!strcmp(word, "version")) {
		char *v = strtok_r(NULL, " ", &save);
		if (*have_version || !v || !sfs_parse_uint(v, &version) || strtok_r(NULL, " ", &save))
			return -EINVAL;
		if (version != SFS_QSTATE_VERSION)
			return -EPROTO;
		*have_version = true;
		return 0;
	}
	if (!*have_version)
		return -ENOMSG;
	if (!strcmp(word, "grace"))
		return parse_grace(&save, s);
	for (int t = 0; t < SFS_QNTYPES; t++)
		if (!strcmp(word, type_word[t]))
			return parse_entry(&save, &s->t[t]);
	return -EINVAL;
}

static const char *parse_error(int rc)
{
	switch (rc) {
	case -EPROTO: return "unknown format version";
	case -ENOMSG: return "no version line first";
	case -EEXIST: return "id listed twice";
	case -ENOMEM: return "out of memory";
	default: return "malformed line";
	}
}

int sfs_qstate_parse(const char *buf, size_t len, struct sfs_qstate *s, char *err, size_t errlen)
{
	bool have_version = false;
	size_t start = 0, lineno = 0;
	char line[512];
	int rc = 0;

	if (len > SFS_QSTATE_MAX) {
		snprintf(err, errlen, "larger than %u bytes", SFS_QSTATE_MAX);
		return -EINVAL;
	}
	while (start < len && !rc) {
		const char *nl = memchr(buf + start, '\n', len - start);
		size_t n = (nl ? (size_t)(nl - buf) : len) - start;

		lineno++;
		if (n >= sizeof(line) || memchr(buf + start, '\0', n)) {
			rc = -EINVAL;
			break;
		}
		memcpy(line, buf + start, n);
		line[n] = '\0';
		rc = parse_line(line, s, &have_version);
		start += n + 1;
	}
	if (!rc && !have_version) {
		lineno = 1;
		rc = -ENOMSG;
	}
	if (rc)
		snprintf(err, errlen, "line %zu: %s", lineno, parse_error(rc));
	return rc ? -EINVAL : 0;
}

static bool scaled(const char *s, const char *units, const unsigned long long *mult,
                   unsigned long long *out)
{
	char num[32];
	size_t n = strlen(s);
	unsigned long long v, m = 1;
	const char *u;

	if (!n || n >= sizeof(num))
		return false;
	memcpy(num, s, n + 1);
	if ((u = strchr(units, num[n - 1])) && num[n - 1]) {
		m = mult[u - units];
		num[--n] = '\0';
	}
	if (!sfs_parse_uint(num, &v) || (v && m > ULLONG_MAX / v))
		return false;
	*out = v * m;
	return true;
}

bool sfs_parse_size(const char *s, uint64_t *out)
{
	static const unsigned long long mult[] = {1ULL << 10, 1ULL << 10, 1ULL << 20, 1ULL << 20,
	                                          1ULL << 30, 1ULL << 30, 1ULL << 40, 1ULL << 40};
	unsigned long long v;

	if (!scaled(s, "kKmMgGtT", mult, &v) || v > INT64_MAX)
		return false;
	*out = v;
	return true;
}

bool sfs_parse_duration(const char *s, time_t *out)
{
	static const unsigned long long mult[] = {1, 60, 3600, 86400, 604800};
	unsigned long long v;

	if (!scaled(s, "smhdw", mult, &v) || !time_value(v))
		return false;
	*out = (time_t)v;
	return true;
}
