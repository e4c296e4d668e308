/* Fuzzes the quota state file reader (sfs_qstate_parse). Beyond not crashing, the harness
 * checks: a refusal is -EINVAL with "line N: reason"; an accepted file holds sorted, unique ids
 * and grace times in range, and formatting it then parsing and formatting again gives the same
 * text (nothing lost or invented between the daemon's writes and reads). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "quota_state.h"

static void check_table(const struct sfs_qtable *t)
{
	for (size_t i = 1; i < t->n; i++)
		FUZZ_CHECK(t->e[i - 1].id < t->e[i].id, "ids not sorted or not unique at %zu", i);
	for (size_t i = 0; i < t->n; i++)
		for (int r = 0; r < SFS_QNRES; r++)
			FUZZ_CHECK(t->e[i].used[r] == 0 && t->e[i].reserved[r] == 0,
			           "usage read from a state file");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_qstate s, again;
	char err[128] = "", *text, *text2;
	size_t len, len2;
	int rc;

	sfs_qstate_init(&s);
	rc = sfs_qstate_parse((const char *)data, size, &s, err, sizeof(err));
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL, "rc %d", rc);
		FUZZ_CHECK(!strncmp(err, "line ", 5) || !strncmp(err, "larger than", 11),
		           "error '%s' names no line", err);
		sfs_qstate_free(&s);
		return 0;
	}
	for (int t = 0; t < SFS_QNTYPES; t++)
		check_table(&s.t[t]);
	for (int r = 0; r < SFS_QNRES; r++)
		FUZZ_CHECK(s.grace[r] >= 0, "negative grace");
	FUZZ_CHECK(sfs_qstate_format(&s, &text, &len) == 0, "format failed");
	sfs_qstate_init(&again);
	rc = sfs_qstate_parse(text, len, &again, err, sizeof(err));
	FUZZ_CHECK(rc == 0, "the daemon's own output is refused: %s", err);
	FUZZ_CHECK(sfs_qstate_format(&again, &text2, &len2) == 0, "format failed");
	FUZZ_CHECK(len == len2 && !memcmp(text, text2, len), "format/parse round trip differs");
	free(text);
	free(text2);
	sfs_qstate_free(&again);
	sfs_qstate_free(&s);
	return 0;
}
