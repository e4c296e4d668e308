/* The unit tests' one assertion: counts, and prints the failing condition's message. */
#ifndef SFS_TEST_CHECK_H
#define SFS_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                        \
	do {                                                    \
		checks++;                                       \
		if (!(cond)) {                                  \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                    \
			printf("\n");                           \
			failures++;                             \
		}                                               \
	} while (0)

#endif
