/*
 * Cassandra's Murmur3Partitioner token function.
 *
 * token = the first 64 bits (h1) of MurmurHash3_x64_128(key, seed 0), with
 * one Java quirk kept on purpose: the tail bytes (len % 16) are read as
 * signed Java bytes and sign-extended before being xor-ed in, so keys whose
 * tail holds a byte >= 0x80 hash differently from the reference MurmurHash3.
 * Long.MIN_VALUE is reserved (it is the partitioner's minimum token), so a
 * hash of INT64_MIN is reported as INT64_MAX, as Cassandra and the drivers do.
 *
 * Compound partition keys (several columns) are hashed over the routing key
 * built from each component as (u16 big-endian length, bytes, 0x00).
 *
 * Empty partition keys are not rejected here; the layers above refuse them
 * (Cassandra's rule). No allocation, no error slot: these are pure functions.
 */
#ifndef CASSINI_COMMON_MURMUR3_H
#define CASSINI_COMMON_MURMUR3_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Token of a partition key. `key` may be NULL when len is 0. */
int64_t murmur3_token(const void *key, size_t len);

/* The token of a key whose murmur3_hash128 (seed 0) is `hash`: a reader
 * that needs both (bloom filters take the whole hash) hashes once. */
int64_t murmur3_token_of_hash(const uint64_t hash[2]);

/* Raw MurmurHash3_x64_128 with Cassandra's signed-tail quirk and the given
 * seed; writes h1, h2 to out[0], out[1]. No MIN normalisation. */
void murmur3_hash128(const void *key, size_t len, uint64_t seed,
		     uint64_t out[2]);

/* Appends the compound routing key of `n` components to `dst`:
 * per component u16 BE length, bytes, 0x00. Fails (-1, ERR_INVALID) when a
 * component is longer than 65535 bytes, or ERR_NOMEM; dst is unchanged then. */
int murmur3_compound_key(struct buf *dst, const struct slice *parts, size_t n);

/* Token of a compound partition key (same as hashing the routing key built
 * by murmur3_compound_key). Returns 0 and sets *token, or -1 (ERR_INVALID when
 * a component exceeds 65535 bytes). Needs no allocation. */
int murmur3_compound_token(const struct slice *parts, size_t n, int64_t *token);

#endif
