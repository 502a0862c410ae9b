/*
 * The storage-attached index component: one per SSTable and indexed column
 * (`<gen>-SAI_<index>.db`), sorted terms -> partition keys, in blocks that
 * each carry a crc32c. See docs/sstable-format.md, "SAI component".
 *
 * The builder collects (term, key) pairs in any order; sai_build sorts and
 * deduplicates them and lays them out. With sai_builder_spill it holds a
 * bounded number of them, the rest in sorted runs on disk that the build
 * merges (see sai_component.c). A struct sai_file reads a component
 * on disk a block at a time: the header and the block directory are read
 * once (checksummed) and stay resident, each block a lookup needs is read
 * (or taken from the block cache) and its crc32c checked. sai_lookup does
 * the same over bytes in memory. A checksum that does not match is
 * SAI_CORRUPT, never a partial or wrong answer.
 */
#ifndef CASSINI_STORAGE_SAI_COMPONENT_H
#define CASSINI_STORAGE_SAI_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { SAI_OK = 0, SAI_CORRUPT = -1, SAI_NOMEM = -2, SAI_IO = -3 };

/* Entries per block. */
#define SAI_BLOCK_ENTRIES 64

struct sai_entry {
	uint8_t *term;
	uint32_t term_len;
	uint8_t *key;
	uint32_t key_len;
};

struct env;
struct env_file;
struct sai_run;

struct sai_builder {
	struct sai_entry *v; /* held since the last spill */
	size_t n, cap;
	size_t bytes; /* their terms' and keys' */
	/* spilling (sai_builder_spill) */
	struct env *env;
	char *prefix;
	size_t hold, hold_bytes;
	struct sai_run *runs;
	size_t nruns, runs_cap;
	uint32_t next_run;
	size_t peak;      /* most pairs held at once */
	uint64_t spilled; /* pairs written to runs */
};

/* What a builder of the SSTable writer and the index builder holds at
 * most: pairs, and their bytes. */
#define SAI_BUILDER_HOLD       65536
#define SAI_BUILDER_HOLD_BYTES (8u << 20)

void sai_builder_init(struct sai_builder *b);
/* Bounds what b holds: past `hold` pairs or `hold_bytes` of their bytes
 * (0: no byte bound) the pairs held go, sorted, to a run file
 * `<prefix>-<n>` through e; the build merges the runs. Runs are removed
 * by the build and by sai_builder_free. SAI_OK or SAI_NOMEM. */
int sai_builder_spill(struct sai_builder *b, struct env *e, const char *prefix,
		      size_t hold, size_t hold_bytes);
/* SAI_OK; SAI_NOMEM; SAI_IO when a spill fails (the env's error in
 * err.h). */
int sai_builder_add(struct sai_builder *b, const void *term, uint32_t term_len,
		    const void *key, uint32_t key_len);
/* Frees what b holds and removes its runs. */
void sai_builder_free(struct sai_builder *b);

/* Lays the component out in a malloc'ed buffer (*out, *out_len). */
int sai_build(struct sai_builder *b, uint8_t **out, size_t *out_len);

/* sai_build with an identity of what was indexed (opaque bytes, kept in
 * the checksummed header; sai_file_ident reads it back): a component of an
 * index dropped and created again under the same name over another
 * column is then told apart. */
int sai_build_ident(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, uint8_t **out, size_t *out_len);

/* sai_build_ident appending the component to f (not synced), holding a
 * buffer, the runs' read buffers and the directory, not the component.
 * *out_len (may be NULL): the bytes appended. SAI_OK, SAI_NOMEM, SAI_IO
 * (the env's error), SAI_CORRUPT (a run read back does not match its
 * checksum). */
int sai_build_write(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, struct env_file *f, uint64_t *out_len);

/* Called once per key holding `term`, in key order. */
typedef void (*sai_key_fn)(void *arg, const uint8_t *key, uint32_t key_len);

/* Finds every key of `term`. SAI_CORRUPT when any checksum it needs (the
 * directory, a block it reads) fails or a length runs past the buffer;
 * keys already reported before a corrupt block must then be discarded. */
int sai_lookup(const uint8_t *buf, size_t len, const void *term,
	       uint32_t term_len, sai_key_fn fn, void *arg);

/* A bound of a term range. */
struct sai_bound {
	const void *term;
	uint32_t len;
	bool incl;
};
/* Every key of every term within [lo, hi] (each bound NULL: unbounded;
 * incl false: exclusive), in (term, key) order. Errors as sai_lookup. */
int sai_lookup_range(const uint8_t *buf, size_t len, const struct sai_bound *lo,
		     const struct sai_bound *hi, sai_key_fn fn, void *arg);

/* Verifies every block and the directory (for a scrub / at load). */
int sai_verify(const uint8_t *buf, size_t len);

struct block_cache;

/* A component on disk, read a block at a time (see above). Lookups may
 * run on several threads at once. */
struct sai_file;

/* Opens `path`, reads and checks its header and directory. SAI_OK;
 * SAI_CORRUPT when they fail their checks; SAI_IO (a missing file, the
 * env's error in err.h); SAI_NOMEM. `cache` (may be NULL): the engine's
 * block cache, which verified blocks enter on their second miss. */
int sai_file_open(struct env *e, const char *path, struct block_cache *cache,
		  struct sai_file **out);
void sai_file_close(struct sai_file *f);
/* The identity (sai_build_ident; empty for version 1); lives with f. */
void sai_file_ident(const struct sai_file *f, const uint8_t **ident,
		    uint32_t *ident_len);
/* The bytes the open component holds (its directory; no blocks). */
size_t sai_file_resident_bytes(const struct sai_file *f);

/* Called once per key, in key order within each term (`first`: the first
 * key given of a term); false skips the rest of that term's keys. */
typedef bool (*sai_visit_fn)(void *arg, bool first, const uint8_t *key,
			     uint32_t key_len);

/* Every key of every term within [lo, hi] (as sai_lookup_range), each
 * term's keys from the first not below `from` (bytewise; NULL: all). The
 * start of each term's keys is found by binary search over the block
 * directory, so a step of a paged lookup reads the blocks holding what it
 * visits, not the term's earlier ones (components of versions 1 and 2,
 * whose directory has no first keys, are walked from the run's start).
 * SAI_CORRUPT when a block it reads fails its checks (keys reported
 * before then must be discarded), SAI_IO, SAI_NOMEM. *visited (may be
 * NULL) grows by the entries it decoded. */
int sai_file_lookup(struct sai_file *f, const struct sai_bound *lo,
		    const struct sai_bound *hi, const void *from,
		    uint32_t from_len, sai_visit_fn fn, void *arg,
		    uint64_t *visited);
/* Reads and checks every block (scrub, verify, tests), bypassing the
 * cache: crcs, lengths, the directory's first entries, the order. */
int sai_file_verify(struct sai_file *f);

struct sai_file_stats {
	uint32_t blocks;      /* in the component */
	uint64_t block_gets;  /* blocks lookups and verifies needed */
	uint64_t block_reads; /* of them, read from the file (cache misses) */
	uint64_t entries;     /* entries lookups decoded */
};
void sai_file_stats(const struct sai_file *f, struct sai_file_stats *out);

/* Writes a built component to `path` atomically and durably. SAI_OK, or
 * the env's error. */
int sai_component_save(struct env *e, const char *path, const uint8_t *buf,
		       size_t len);

/* Reads and verifies a whole component (tests, tools). SAI_OK with *out
 * malloc'ed; SAI_CORRUPT (nothing returned) when any checksum fails; else
 * the env's error (a missing file). */
int sai_component_load(struct env *e, const char *path, uint8_t **out,
		       size_t *out_len);

#endif
