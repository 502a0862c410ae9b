/*
 * The node's persistent identity: host id, tokens and the last gossip
 * generation, in saved_caches_directory/local_state, so a restarted node
 * keeps its identity and tokens and its generation only grows.
 *
 * Format (text, one key per line, written atomically):
 *   host_id=6f1c...-...
 *   generation=1764477000
 *   tokens=-9150...,-8800...,...
 *   bootstrap=in_progress      (only while the node streams its data:
 *                               a restart then bootstraps again)
 *   decommissioned=true        (it left the ring: it will not start)
 */
#ifndef CASSINI_NODE_LOCAL_STATE_H
#define CASSINI_NODE_LOCAL_STATE_H

#include "common/env.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOCAL_STATE_MAX_TOKENS 1536

struct local_state {
	char host_id[37];
	int64_t generation;
	size_t token_count;
	int64_t *tokens;     /* owned */
	bool bootstrapping;  /* tokens chosen, data not streamed yet */
	bool decommissioned; /* left the ring for good */
};

/*
 * Loads DIR/local_state, or makes a new identity when there is none (a
 * random host id, no tokens yet: the node chooses them once it knows the
 * ring, then calls local_state_save). Then advances the generation to
 * max(now in seconds, saved + 1) and saves the file before returning, so a
 * crash never reuses a generation.
 */
int local_state_load(struct env *env, const char *dir, struct local_state *out);
/* Writes DIR/local_state atomically. */
int local_state_save(struct env *env, const char *dir,
		     const struct local_state *s);
void local_state_free(struct local_state *s);

/* Comma-separated tokens (as gossip's TOKENS carries them); malloc'ed. */
char *local_state_tokens_text(const struct local_state *s);

/* Parses "t1,t2,..." (decimal int64); returns the count or -1. `out` is
 * malloc'ed. */
int node_tokens_parse(const char *text, int64_t **out, size_t *count);

#endif
