/* The tree's two hashes. Tables and lock stripes keyed by a backing inode take
 * sfs_hash_inode: (dev, ino) to 64 bits mixed well enough that both the low bits (a table
 * index under a power-of-two mask) and the top bits (a stripe) spread (splitmix64's
 * finaliser). Tables keyed by names take sfs_hash_bytes, SipHash-1-3 (as in Rust's and
 * Python's tables) under a random key per table: users choose the names, and a flood of
 * names that collide would otherwise turn each lookup into a scan. */
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

#endif
