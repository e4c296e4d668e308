/* The tree's hashes. Tables and lock stripes keyed by a backing inode take
 * sfs_hash_inode: (dev, ino) to 64 bits mixed well enough that both the low bits (a table
 * index under a power-of-two mask) and the top bits (a stripe) spread (splitmix64's
 * finaliser). Tables keyed by names take sfs_hash_bytes, SipHash-1-3 (as in Rust's and
 * Python's tables) under a random key per table: users choose the names, and a flood of
 * names that collide would otherwise turn each lookup into a scan. The records a successor
 * daemon reads (handover.h, openfiles.h) carry sfs_hash_record, FNV-1a over a sequence number
 * and the bytes: unkeyed, since the successor must compute it again. */
#ifndef SFS_HASH_H
#define SFS_HASH_H

#include <stddef.h>
#include <stdint.h>

struct sfs_hash_key {
	uint64_t k0, k1;
};

/* A random key (from getrandom; without entropy yet, from the clock and salt). */
void sfs_hash_key_init(struct sfs_hash_key *k, const void *salt);

uint64_t sfs_hash_bytes(const struct sfs_hash_key *k, const void *s, size_t len);

static inline uint64_t sfs_hash_inode(uint64_t dev, uint64_t ino)
{
	uint64_t x = ino ^ (dev * 0x9E3779B97F4A7C15ULL);

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

/* FNV-1a: enough to tell a whole record from a torn or foreign one. */
static inline uint64_t sfs_hash_record(uint64_t seq, const void *data, size_t len)
{
	const unsigned char *s = (const unsigned char *)&seq, *b = data;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < sizeof(seq); i++)
		h = (h ^ s[i]) * 0x100000001b3ULL;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

#endif
