/*
 * Partition tokens: Cassandra's Murmur3Partitioner.
 *
 * The token of a partition key is the first 64 bits of MurmurHash3_x64_128
 * (seed 0) over the serialized key, computed exactly as Cassandra's Java
 * code does it: tail bytes are sign-extended (Java bytes are signed) and
 * Long.MIN_VALUE is mapped to Long.MAX_VALUE, so the same key has the same
 * token here, in Cassandra and in every driver.
 *
 * Internal to storage: to be replaced by ring/murmur3.h when it lands.
 */
#ifndef CASSINI_STORAGE_TOKEN_H
#define CASSINI_STORAGE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

int64_t storage_token(const uint8_t *key, size_t len);

/* Both 64-bit halves (h1, h2), for the bloom filter's double hashing. */
void storage_murmur3_128(const uint8_t *key, size_t len, uint64_t seed,
			 uint64_t out[2]);

#endif
