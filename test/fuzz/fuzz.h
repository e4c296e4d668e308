/* What the fuzz harnesses share: the libFuzzer entry point and an invariant check that
 * names the input it failed on (in replay) and aborts, so libFuzzer keeps the input. */
#ifndef SFS_FUZZ_H
#define SFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Set by replay.c to the file being replayed; NULL under libFuzzer (which names it itself).
 * Weak, so that the harness and replay.c may both define it. */
__attribute__((weak)) const char *fuzz_current_input;

#define FUZZ_CHECK(cond, ...)                                                          \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: invariant broken: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                  \
			if (fuzz_current_input)                                        \
				fprintf(stderr, " (input %s)", fuzz_current_input);    \
			fprintf(stderr, "\n");                                        \
			abort();                                                       \
		}                                                                      \
	} while (0)

#endif
