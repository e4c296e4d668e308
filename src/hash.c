/* The keyed hash of names (see hash.h). */
#include "hash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sipround(uint64_t v[4])
{
	v[0] += v[1], v[1] = ROTL(v[1], 13), v[1] ^= v[0], v[0] = ROTL(v[0], 32);
	v[2] += v[3], v[3] = ROTL(v[3], 16), v[3] ^= v[2];
	v[0] += v[3], v[3] = ROTL(v[3], 21), v[3] ^= v[0];
	v[2] += v[1], v[1] = ROTL(v[1], 17), v[1] ^= v[2], v[2] = ROTL(v[2], 32);
}

uint64_t sfs_hash_bytes(const struct sfs_hash_key *k, const void *data, size_t len)
{
	uint64_t v[4] = {k->k0 ^ 0x736f6d6570736575ULL, k->k1 ^ 0x646f72616e646f6dULL,
	                 k->k0 ^ 0x6c7967656e657261ULL, k->k1 ^ 0x7465646279746573ULL};
	const unsigned char *s = data;
	uint64_t m, last = (uint64_t)len << 56;
	size_t i, j;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, s + i, 8); /* host order: the hash never leaves the process */
		v[3] ^= m, sipround(v), v[0] ^= m;
	}
	for (j = 0; i + j < len; j++)
		last |= (uint64_t)s[i + j] << (8 * j);
	v[3] ^= last, sipround(v), v[0] ^= last;
	v[2] ^= 0xff;
	sipround(v), sipround(v), sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

void sfs_hash_key_init(struct sfs_hash_key *k, const void *salt)
{
	uint64_t r[2];
	struct timespec ts;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) {
		k->k0 = r[0], k->k1 = r[1];
		return;
	}
	/* No entropy yet (early boot): unpredictable enough to spread names, not to resist attack. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	k->k0 = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)salt;
	k->k1 = (uint64_t)ts.tv_sec * 0xBF58476D1CE4E5B9ULL ^ (uint64_t)getpid();
}
