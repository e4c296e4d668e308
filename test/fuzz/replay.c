/* Replays fuzz inputs without libFuzzer: every file named, and every file in every directory
 * named, goes once through the harness's LLVMFuzzerTestOneInput. A harness reports a broken
 * invariant by aborting, so a corpus that replays cleanly is a passing regression test. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	long size;

	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	data = malloc(size ? (size_t)size : 1);
	if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	fuzz_current_input = path;
	LLVMFuzzerTestOneInput(data, (size_t)size);
	free(data);
	return 0;
}


/* Files of a directory in name order, so runs are reproducible. */
static int replay_dir(const char *dir, int *count)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort), rc = 0;

	if (n < 0) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (ents[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path))
				rc = -1;
			else
				(*count)++;
		}
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int main(int argc, char **argv)
{
	int count = 0, rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR-OR-FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (replay_dir(argv[i], &count))
				rc = 1;
		} else if (replay_file(argv[i])) {
			rc = 1;
		} else {
			count++;
		}
	}
	printf("%d inputs replayed%s\n", count, rc ? ", some unreadable" : "");
	if (count == 0)
		rc = 1;
	return rc;
}
