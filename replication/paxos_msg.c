/*
 * paxos.proto <-> struct paxos_msg. Every field from a peer is checked:
 * ballots are 16-byte version-1 uuids (or empty: none), keys and updates
 * capped; anything else is ERR_PROTOCOL and the message is dropped.
 */
#include "replication/paxos_internal.h"

#include "common/err.h"
#include "replication/paxos.pb-c.h"

#include <stdlib.h>

static ProtobufCBinaryData bin(struct slice s)
{
	return (ProtobufCBinaryData){s.len, (uint8_t *)s.ptr};
}

static struct slice sl(ProtobufCBinaryData b)
{
	return slice_make(b.data, b.len);
}

static int put(const ProtobufCMessage *pm, struct buf *out)
{
	size_t n = protobuf_c_message_get_packed_size(pm);
	uint8_t *p = buf_extend(out, n);
	if (!p)
		return -1;
	protobuf_c_message_pack(pm, p);
	return 0;
}

int paxos_msg_encode(uint32_t verb, const struct paxos_msg *m, struct buf *out)
{
	if (paxos_verb_is_request(verb)) {
		uint8_t b[16];
		paxos_ballot_to_uuid(&m->ballot, b);
		Cassini__Paxos__PaxosReq q = CASSINI__PAXOS__PAXOS_REQ__INIT;
		q.id = m->id;
		q.round = m->round;
		q.deadline_us = m->deadline_us;
		q.key = bin(m->key);
		q.ballot = (ProtobufCBinaryData){16, b};
		q.update = bin(m->update);
		if (m->trace)
			q.trace_session =
				(ProtobufCBinaryData){16, (uint8_t *)m->trace};
		return put(&q.base, out);
	}
	uint8_t pr[16], ac[16], co[16];
	paxos_ballot_to_uuid(&m->promised, pr);
	paxos_ballot_to_uuid(&m->accepted, ac);
	paxos_ballot_to_uuid(&m->committed, co);
	Cassini__Paxos__PaxosRsp r = CASSINI__PAXOS__PAXOS_RSP__INIT;
	r.id = m->id;
	r.round = m->round;
	r.ok = m->ok;
	r.promised = (ProtobufCBinaryData){16, pr};
	r.accepted = (ProtobufCBinaryData){16, ac};
	r.accepted_update = bin(m->accepted_update);
	r.committed = (ProtobufCBinaryData){16, co};
	r.committed_update = bin(m->committed_update);
	r.read = bin(m->read);
	return put(&r.base, out);
}

static int ballot(ProtobufCBinaryData b, struct paxos_ballot *out)
{
	if (b.len == 0) {
		*out = (struct paxos_ballot){0, 0};
		return 0;
	}
	if (b.len != 16)
		return err_set(ERR_PROTOCOL, "ballot of %zu bytes", b.len);
	return paxos_ballot_from_uuid(b.data, out);
}

static int capped(ProtobufCBinaryData b, size_t cap)
{
	if (b.len > cap)
		return err_set(ERR_PROTOCOL, "paxos field of %zu bytes", b.len);
	return 0;
}

int paxos_msg_decode(uint32_t verb, const uint8_t *msg, size_t len,
		     struct paxos_msg *m, void **owner)
{
	*m = (struct paxos_msg){0};
	*owner = NULL;
	if (verb < PAXOS_VERB_FIRST || verb > PAXOS_VERB_LAST)
		return err_set(ERR_PROTOCOL, "not a paxos verb: %u", verb);
	if (paxos_verb_is_request(verb)) {
		Cassini__Paxos__PaxosReq *q =
			cassini__paxos__paxos_req__unpack(NULL, len, msg);
		if (!q)
			return err_set(ERR_PROTOCOL,
				       "undecodable paxos request");
		*owner = q;
		if (ballot(q->ballot, &m->ballot) < 0 ||
		    paxos_ballot_is_none(&m->ballot) ||
		    capped(q->key, PAXOS_KEY_MAX) < 0 || q->key.len == 0 ||
		    capped(q->update, PAXOS_UPDATE_MAX) < 0)
			goto bad;
		m->id = q->id;
		m->round = q->round;
		m->deadline_us = q->deadline_us;
		m->key = sl(q->key);
		m->update = sl(q->update);
		m->trace = q->trace_session.len == 16 ? q->trace_session.data
						      : NULL;
		return 0;
	}
	Cassini__Paxos__PaxosRsp *r =
		cassini__paxos__paxos_rsp__unpack(NULL, len, msg);
	if (!r)
		return err_set(ERR_PROTOCOL, "undecodable paxos answer");
	*owner = r;
	if (ballot(r->promised, &m->promised) < 0 ||
	    ballot(r->accepted, &m->accepted) < 0 ||
	    ballot(r->committed, &m->committed) < 0 ||
	    capped(r->accepted_update, PAXOS_UPDATE_MAX) < 0 ||
	    capped(r->committed_update, PAXOS_UPDATE_MAX) < 0 ||
	    capped(r->read, PAXOS_UPDATE_MAX) < 0)
		goto bad;
	m->id = r->id;
	m->round = r->round;
	m->ok = r->ok;
	m->accepted_update = sl(r->accepted_update);
	m->committed_update = sl(r->committed_update);
	m->read = sl(r->read);
	return 0;
bad:
	paxos_msg_free(verb, *owner);
	*owner = NULL;
	if (err_code() != ERR_PROTOCOL)
		err_set(ERR_PROTOCOL, "malformed paxos message");
	return -1;
}

void paxos_msg_free(uint32_t verb, void *owner)
{
	if (!owner)
		return;
	if (paxos_verb_is_request(verb))
		cassini__paxos__paxos_req__free_unpacked(owner, NULL);
	else
		cassini__paxos__paxos_rsp__free_unpacked(owner, NULL);
}
