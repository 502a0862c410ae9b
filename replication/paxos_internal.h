/*
 * Internal to replication/'s Paxos (paxos.c, paxos_msg.c): the decoded form
 * of paxos.proto's messages. protobuf-c types stay in paxos_msg.c.
 */
#ifndef CASSINI_REPLICATION_PAXOS_INTERNAL_H
#define CASSINI_REPLICATION_PAXOS_INTERNAL_H

#include "common/buf.h"
#include "replication/paxos.h"

#include <stdbool.h>
#include <stdint.h>

/* Caps on what a peer may send us. */
#define PAXOS_KEY_MAX (1u << 20)

/* A request (PREPARE, PROPOSE, COMMIT) or an answer; slices borrow from
 * the decoded message (paxos_msg_free). */
struct paxos_msg {
	uint64_t id;
	uint32_t round;
	/* requests */
	int64_t deadline_us;
	struct slice key;
	struct paxos_ballot ballot;
	struct slice update;
	const uint8_t *trace; /* the trace session (16 bytes), or NULL */
	/* answers */
	bool ok;
	struct paxos_ballot promised, accepted, committed;
	struct slice accepted_update, committed_update, read;
};

static inline bool paxos_verb_is_request(uint32_t verb)
{
	return verb == PAXOS_VERB_PREPARE || verb == PAXOS_VERB_PROPOSE ||
	       verb == PAXOS_VERB_COMMIT;
}

/* Appends the wire form of `m` for `verb` to `out`. 0 or -1 (ERR_NOMEM). */
int paxos_msg_encode(uint32_t verb, const struct paxos_msg *m, struct buf *out);
/* Decodes and validates (every ballot a well-formed timeuuid, lengths
 * capped); *owner keeps the slices alive until paxos_msg_free. 0, or -1
 * (ERR_PROTOCOL). */
int paxos_msg_decode(uint32_t verb, const uint8_t *msg, size_t len,
		     struct paxos_msg *m, void **owner);
void paxos_msg_free(uint32_t verb, void *owner);

#endif
