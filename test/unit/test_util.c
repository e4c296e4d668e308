/* Tests of the error line (util.h): one printable line of bounded length whatever the object,
 * control characters escaped, the reason kept when the object is too long (contract §2). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

static const struct {
	const char *in, *out;
} cleaned[] = {
	{"strictfs: bogus: unknown option", "strictfs: bogus: unknown option"},
	{"strictfs: subdir=/a\nb: No such file", "strictfs: subdir=/a\\nb: No such file"},
	{"tab\there, cr\r, bs\\", "tab\\there, cr\\r, bs\\\\"},
	{"esc \033[31mred\177", "esc \\x1b[31mred\\x7f"},
	{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
	{"bad \xe9 \xc3 \xed\xa0\x80", "bad \\xe9 \\xc3 \\xed\\xa0\\x80"},
	{"c1 \xc2\x9b", "c1 \\xc2\\x9b"},
};

static void test_clean(void)
{
	char out[SFS_ERR_LINE_MAX + 1];

	for (size_t i = 0; i < sizeof(cleaned) / sizeof(cleaned[0]); i++) {
		sfs_err_clean(out, sizeof(out), cleaned[i].in);
		CHECK(!strcmp(out, cleaned[i].out), "clean #%zu: '%s', expected '%s'", i, out,
		      cleaned[i].out);
	}
}

/* A 100 KB object: the line is cut in its middle to the bound, start and end kept. */
static void test_cut(void)
{
	size_t n = 100000;
	char *line = malloc(n + 64), out[SFS_ERR_LINE_MAX + 1];
	const char *end = ": unknown option";

	strcpy(line, "strictfs: ");
	memset(line + 10, 'x', n);
	strcpy(line + 10 + n, end);
	sfs_err_clean(out, sizeof(out), line);
	CHECK(strlen(out) == SFS_ERR_LINE_MAX, "cut to %d bytes: %zu", SFS_ERR_LINE_MAX, strlen(out));
	CHECK(!strncmp(out, "strictfs: xxx", 13), "the start kept: %.20s", out);
	CHECK(strstr(out, "x...x") != NULL, "the cut marked");
	CHECK(strlen(out) > strlen(end) && !strcmp(out + strlen(out) - strlen(end), end),
	      "the end kept: %s", out + strlen(out) - 20);
	/* escapes are never split by the cut, and count in the bound */
	for (size_t i = 10; i < 10 + n; i++)
		line[i] = '\n';
	sfs_err_clean(out, sizeof(out), line);
	CHECK(strlen(out) <= SFS_ERR_LINE_MAX && !strchr(out, '\n'), "escaped newlines, bounded");
	CHECK(strstr(out, "\\n...\\n") != NULL, "cut between escapes: %.40s", out + 240);
	/* a small buffer bounds the line too */
	sfs_err_clean(out, 40, line);
	CHECK(strlen(out) <= 39 && strstr(out, "...") && strstr(out, "option"), "small: %s", out);
	free(line);
}

/* sfs_errf keeps the reason when the object does not fit. */
static void test_errf(void)
{
	char buf[256], *obj = malloc(100001);

	memset(obj, 'y', 100000);
	obj[100000] = '\0';
	sfs_errf(buf, sizeof(buf), obj, "%s", "No such file or directory");
	CHECK(strlen(buf) < sizeof(buf) && !strncmp(buf, "strictfs: yyy", 13) && strstr(buf, "y...y") &&
	      strstr(buf, "y: No such file or directory"), "long object: %s", buf);
	sfs_errf(buf, sizeof(buf), "bogus", "unknown option");
	CHECK(!strcmp(buf, "strictfs: bogus: unknown option"), "short: %s", buf);
	free(obj);
}

int main(void)
{
	test_clean();
	test_cut();
	test_errf();
	printf("%s (%d checks)\n", failures ? "FAILED" : "ok", checks);
	return failures != 0;
}
