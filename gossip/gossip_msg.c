/*
 * Gossip wire format: protobuf-c (gossip.proto) <-> struct gossip_msg.
 *
 * The only file that sees protobuf-c types. Decoding validates every field
 * before the state machine looks at it: addresses are 4 or 16 bytes with a
 * port, versions and heartbeats are non-negative, generations positive,
 * lists and strings capped. Application-state keys we do not know (a newer
 * peer) are skipped, not rejected.
 */
#include "gossip/gossip_internal.h"

#include "common/err.h"
#include "gossip/gossip.pb-c.h"

#include <stdlib.h>
#include <string.h>

/* ---- decoding ------------------------------------------------------------ */

static int addr_from_pb(const Cassini__Gossip__Endpoint *e,
			struct inet_addr *out)
{
	if (!e)
		return err_set(ERR_PROTOCOL, "endpoint missing");
	memset(out, 0, sizeof(*out));
	if (e->ip.len == 4)
		out->family = INET_V4;
	else if (e->ip.len == 16)
		out->family = INET_V6;
	else
		return err_set(ERR_PROTOCOL, "endpoint address of %zu bytes",
			       e->ip.len);
	if (e->port == 0 || e->port > 65535)
		return err_set(ERR_PROTOCOL, "endpoint port %u", e->port);
	memcpy(out->ip, e->ip.data, e->ip.len);
	out->port = (uint16_t)e->port;
	return 0;
}

static int digests_unpack(const ProtobufCBinaryData *in, struct gossip_msg *m)
{
	/* The smallest digest is 19 bytes: the count is capped before the
	 * allocation. */
	size_t most = in->len / 19;
	if (most > GOSSIP_MAX_ENDPOINTS)
		return err_set(ERR_PROTOCOL, "%zu bytes of digests", in->len);
	if (most == 0) {
		if (in->len)
			return err_set(ERR_PROTOCOL, "truncated digest");
		return 0;
	}
	m->digests = calloc(most, sizeof(*m->digests));
	if (!m->digests)
		return err_set(ERR_NOMEM, "digests");
	struct cursor c = cursor_make(in->data, in->len);
	while (cursor_left(&c) > 0) {
		if (m->digest_count == most)
			return err_set(ERR_PROTOCOL,
				       "bytes after the last digest");
		struct gossip_digest *d = &m->digests[m->digest_count];
		uint8_t family;
		uint16_t port;
		uint64_t gen;
		uint32_t ver;
		memset(&d->addr, 0, sizeof(d->addr));
		if (cursor_u8(&c, &family) != 0 ||
		    (family != INET_V4 && family != INET_V6) ||
		    cursor_copy(&c, d->addr.ip, family == INET_V4 ? 4 : 16) !=
			    0 ||
		    cursor_be16(&c, &port) != 0 || port == 0 ||
		    cursor_be64(&c, &gen) != 0 || cursor_be32(&c, &ver) != 0)
			return err_set(ERR_PROTOCOL, "bad digest %zu",
				       m->digest_count);
		if ((int64_t)gen < 0 || (int32_t)ver < 0)
			return err_set(ERR_PROTOCOL, "negative digest version");
		d->addr.family = family;
		d->addr.port = port;
		d->generation = (int64_t)gen;
		d->max_version = (int32_t)ver;
		m->digest_count++;
	}
	return 0;
}

static int state_from_pb(const Cassini__Gossip__EndpointState *in,
			 struct gossip_wire_state *out)
{
	if (addr_from_pb(in->endpoint, &out->addr) != 0)
		return -1;
	if (in->generation <= 0 || in->heartbeat < 0)
		return err_set(ERR_PROTOCOL, "bad heartbeat state");
	if (in->n_states > 4 * GOSSIP_STATE_COUNT)
		return err_set(ERR_PROTOCOL, "%zu application states",
			       in->n_states);
	out->generation = in->generation;
	out->heartbeat = in->heartbeat;
	out->beats = in->beats;
	out->age_us = in->heartbeat_age_us < GOSSIP_MAX_HEARTBEAT_AGE_US
			      ? in->heartbeat_age_us
			      : GOSSIP_MAX_HEARTBEAT_AGE_US;
	if (in->n_states) {
		out->apps = calloc(in->n_states, sizeof(*out->apps));
		if (!out->apps)
			return err_set(ERR_NOMEM, "application states");
	}
	for (size_t i = 0; i < in->n_states; i++) {
		const Cassini__Gossip__AppState *a = in->states[i];
		if (a->version < 0)
			return err_set(ERR_PROTOCOL, "negative state version");
		if (strlen(a->value) > GOSSIP_MAX_VALUE_LEN)
			return err_set(ERR_PROTOCOL, "state value too long");
		if (a->key >= GOSSIP_STATE_COUNT)
			continue; /* a newer peer's state: not ours to judge */
		out->apps[out->count++] =
			(struct gossip_wire_app){.key = a->key,
						 .value = a->value,
						 .version = a->version};
	}
	return 0;
}

static int states_from_pb(Cassini__Gossip__EndpointState **in, size_t n,
			  struct gossip_msg *m)
{
	if (n > GOSSIP_MAX_ENDPOINTS)
		return err_set(ERR_PROTOCOL, "%zu endpoint states", n);
	if (n == 0)
		return 0;
	m->states = calloc(n, sizeof(*m->states));
	if (!m->states)
		return err_set(ERR_NOMEM, "endpoint states");
	for (size_t i = 0; i < n; i++) {
		m->state_count++;
		if (state_from_pb(in[i], &m->states[i]) != 0)
			return -1;
	}
	return 0;
}

int gossip_msg_decode(uint32_t verb, const uint8_t *data, size_t len,
		      struct gossip_msg *out)
{
	memset(out, 0, sizeof(*out));
	out->verb = verb;
	int rc = -1;
	switch (verb) {
	case GOSSIP_VERB_SYN: {
		Cassini__Gossip__Syn *s =
			cassini__gossip__syn__unpack(NULL, len, data);
		if (!s)
			return err_set(ERR_PROTOCOL, "undecodable SYN");
		out->pb = s;
		if (strlen(s->cluster_name) > GOSSIP_MAX_NAME_LEN ||
		    strlen(s->partitioner) > GOSSIP_MAX_NAME_LEN) {
			err_set(ERR_PROTOCOL, "SYN names too long");
			break;
		}
		out->cluster_name = s->cluster_name;
		out->partitioner = s->partitioner;
		rc = digests_unpack(&s->digests, out);
		break;
	}
	case GOSSIP_VERB_ACK: {
		Cassini__Gossip__Ack *a =
			cassini__gossip__ack__unpack(NULL, len, data);
		if (!a)
			return err_set(ERR_PROTOCOL, "undecodable ACK");
		out->pb = a;
		rc = digests_unpack(&a->requests, out);
		if (rc == 0)
			rc = states_from_pb(a->states, a->n_states, out);
		break;
	}
	case GOSSIP_VERB_ACK2: {
		Cassini__Gossip__Ack2 *a =
			cassini__gossip__ack2__unpack(NULL, len, data);
		if (!a)
			return err_set(ERR_PROTOCOL, "undecodable ACK2");
		out->pb = a;
		rc = states_from_pb(a->states, a->n_states, out);
		break;
	}
	default:
		return err_set(ERR_PROTOCOL, "not a gossip message verb %u",
			       verb);
	}
	if (rc != 0)
		gossip_msg_free(out);
	return rc;
}

void gossip_msg_free(struct gossip_msg *m)
{
	for (size_t i = 0; i < m->state_count; i++)
		free(m->states[i].apps);
	free(m->states);
	free(m->digests);
	if (m->pb) {
		switch (m->verb) {
		case GOSSIP_VERB_SYN:
			cassini__gossip__syn__free_unpacked(m->pb, NULL);
			break;
		case GOSSIP_VERB_ACK:
			cassini__gossip__ack__free_unpacked(m->pb, NULL);
			break;
		default:
			cassini__gossip__ack2__free_unpacked(m->pb, NULL);
			break;
		}
	}
	memset(m, 0, sizeof(*m));
}

/* ---- encoding ------------------------------------------------------------ */

/* Scratch for building one message: protobuf-c structs point into it. */
struct enc {
	Cassini__Gossip__Endpoint *eps;
	Cassini__Gossip__EndpointState *sts;
	Cassini__Gossip__EndpointState **st_ptrs;
	Cassini__Gossip__AppState *apps;
	Cassini__Gossip__AppState **app_ptrs;
};

static void enc_free(struct enc *e)
{
	free(e->eps);
	free(e->sts);
	free(e->st_ptrs);
	free(e->apps);
	free(e->app_ptrs);
}

static void ep_to_pb(const struct inet_addr *a, Cassini__Gossip__Endpoint *e)
{
	cassini__gossip__endpoint__init(e);
	e->ip.data = (uint8_t *)a->ip;
	e->ip.len = a->family == INET_V6 ? 16 : 4;
	e->port = a->port;
}

static int digests_pack(const struct gossip_digest *d, size_t n, struct buf *b)
{
	for (size_t i = 0; i < n; i++) {
		const struct inet_addr *a = &d[i].addr;
		size_t iplen = a->family == INET_V6 ? 16 : 4;
		if (buf_put_u8(b, a->family == INET_V6 ? INET_V6 : INET_V4) ||
		    buf_append(b, a->ip, iplen) || buf_put_be16(b, a->port) ||
		    buf_put_be64(b, (uint64_t)d[i].generation) ||
		    buf_put_be32(b, (uint32_t)d[i].max_version))
			return err_set(ERR_NOMEM, "packing digests");
	}
	return 0;
}

static int enc_states(struct enc *e, const struct gossip_wire_state *st,
		      size_t n)
{
	if (n == 0)
		return 0;
	size_t napps = 0;
	for (size_t i = 0; i < n; i++)
		napps += st[i].count;
	e->eps = calloc(n, sizeof(*e->eps));
	e->sts = calloc(n, sizeof(*e->sts));
	e->st_ptrs = calloc(n, sizeof(*e->st_ptrs));
	e->apps = calloc(napps ? napps : 1, sizeof(*e->apps));
	e->app_ptrs = calloc(napps ? napps : 1, sizeof(*e->app_ptrs));
	if (!e->eps || !e->sts || !e->st_ptrs || !e->apps || !e->app_ptrs)
		return err_set(ERR_NOMEM, "encoding states");
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		Cassini__Gossip__EndpointState *s = &e->sts[i];
		cassini__gossip__endpoint_state__init(s);
		ep_to_pb(&st[i].addr, &e->eps[i]);
		s->endpoint = &e->eps[i];
		s->generation = st[i].generation;
		s->heartbeat = st[i].heartbeat;
		s->beats = st[i].beats;
		s->heartbeat_age_us = st[i].age_us;
		s->states = &e->app_ptrs[k];
		s->n_states = st[i].count;
		for (size_t j = 0; j < st[i].count; j++, k++) {
			cassini__gossip__app_state__init(&e->apps[k]);
			e->apps[k].key = st[i].apps[j].key;
			e->apps[k].value = (char *)st[i].apps[j].value;
			e->apps[k].version = st[i].apps[j].version;
			e->app_ptrs[k] = &e->apps[k];
		}
		e->st_ptrs[i] = s;
	}
	return 0;
}

static int pack_into(const ProtobufCMessage *msg, struct buf *out)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *p = buf_extend(out, n);
	if (!p && n)
		return err_set(ERR_NOMEM, "packing a gossip message");
	if (n)
		protobuf_c_message_pack(msg, p);
	return 0;
}

int gossip_msg_encode_syn(const char *cluster, const char *partitioner,
			  const struct gossip_digest *d, size_t n,
			  struct buf *out)
{
	struct buf dig = {0};
	Cassini__Gossip__Syn s = CASSINI__GOSSIP__SYN__INIT;
	int rc = digests_pack(d, n, &dig);
	if (rc == 0) {
		s.cluster_name = (char *)cluster;
		s.partitioner = (char *)partitioner;
		s.digests.data = dig.data;
		s.digests.len = dig.len;
		rc = pack_into(&s.base, out);
	}
	buf_free(&dig);
	return rc;
}

int gossip_msg_encode_ack(const struct gossip_digest *req, size_t nreq,
			  const struct gossip_wire_state *st, size_t nst,
			  struct buf *out)
{
	struct enc e = {0};
	struct buf dig = {0};
	Cassini__Gossip__Ack a = CASSINI__GOSSIP__ACK__INIT;
	int rc = digests_pack(req, nreq, &dig);
	if (rc == 0)
		rc = enc_states(&e, st, nst);
	if (rc == 0) {
		a.requests.data = dig.data;
		a.requests.len = dig.len;
		a.states = e.st_ptrs;
		a.n_states = nst;
		rc = pack_into(&a.base, out);
	}
	enc_free(&e);
	buf_free(&dig);
	return rc;
}

int gossip_msg_encode_ack2(const struct gossip_wire_state *st, size_t nst,
			   struct buf *out)
{
	struct enc e = {0};
	Cassini__Gossip__Ack2 a = CASSINI__GOSSIP__ACK2__INIT;
	int rc = enc_states(&e, st, nst);
	if (rc == 0) {
		a.states = e.st_ptrs;
		a.n_states = nst;
		rc = pack_into(&a.base, out);
	}
	enc_free(&e);
	return rc;
}
