/*
 * The storage-attached index component: one per SSTable and indexed column
 * (`<gen>-SAI_<index>.db`), sorted terms -> partition keys, in blocks that
 * each carry a crc32c. See docs/sstable-format.md, "SAI component".
 *
 * The builder collects (term, key) pairs in any order; sai_build sorts and
 * deduplicates them and lays them out. sai_lookup answers one term from the
 * bytes, verifying every block it reads and the directory: a checksum that
 * does not match is SAI_CORRUPT, never a partial or wrong answer.
 */
#ifndef CASSINI_STORAGE_SAI_COMPONENT_H
#define CASSINI_STORAGE_SAI_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { SAI_OK = 0, SAI_CORRUPT = -1, SAI_NOMEM = -2 };

/* Entries per block. */
#define SAI_BLOCK_ENTRIES 64

struct sai_entry {
	uint8_t *term;
	uint32_t term_len;
	uint8_t *key;
	uint32_t key_len;
};

struct sai_builder {
	struct sai_entry *v;
	size_t n, cap;
};

void sai_builder_init(struct sai_builder *b);
int sai_builder_add(struct sai_builder *b, const void *term, uint32_t term_len,
		    const void *key, uint32_t key_len);
void sai_builder_free(struct sai_builder *b);

/* Lays the component out in a malloc'ed buffer (*out, *out_len). */
int sai_build(struct sai_builder *b, uint8_t **out, size_t *out_len);

/* sai_build with an identity of what was indexed (opaque bytes, kept in
 * the checksummed header; sai_ident reads it back): a component of an
 * index dropped and created again under the same name over another
 * column is then told apart. */
int sai_build_ident(struct sai_builder *b, const void *ident,
		    uint32_t ident_len, uint8_t **out, size_t *out_len);
/* The identity of a component (empty for version 1 ones). */
int sai_ident(const uint8_t *buf, size_t len, const uint8_t **ident,
	      uint32_t *ident_len);

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

struct env;

/* Writes a built component to `path` atomically and durably. SAI_OK, or
 * the env's error. */
int sai_component_save(struct env *e, const char *path, const uint8_t *buf,
		       size_t len);

/* Reads and verifies a component (e.g. at startup). SAI_OK with *out
 * malloc'ed; SAI_CORRUPT (nothing returned) when any checksum fails; else
 * the env's error (a missing file). */
int sai_component_load(struct env *e, const char *path, uint8_t **out,
		       size_t *out_len);

#endif
