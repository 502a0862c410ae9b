/*
 * Paxos ballots and the acceptor's registers (paxos.h): pure functions, no
 * env, no I/O. The acceptor side of paxos.c drives them and stores the
 * result through paxos_store_ops.
 */
#include "replication/paxos.h"

#include "common/crc.h"
#include "common/err.h"

#include <string.h>

/* 100-ns intervals from 1582-10-15 (the uuid epoch) to 1970-01-01. */
#define UUID_EPOCH_100NS 0x01B21DD213814000ULL
#define STATE_VERSION    1

int paxos_ballot_cmp(const struct paxos_ballot *a, const struct paxos_ballot *b)
{
	if (a->us != b->us)
		return a->us < b->us ? -1 : 1;
	if (a->lsb != b->lsb)
		return a->lsb < b->lsb ? -1 : 1;
	return 0;
}

void paxos_ballot_to_uuid(const struct paxos_ballot *b, uint8_t out[16])
{
	if (paxos_ballot_is_none(b)) {
		memset(out, 0, 16);
		return;
	}
	uint64_t t = (uint64_t)b->us * 10 + UUID_EPOCH_100NS;
	uint64_t msb = ((t & 0xffffffffULL) << 32) |
		       (((t >> 32) & 0xffffULL) << 16) | 0x1000ULL |
		       ((t >> 48) & 0x0fffULL);
	be64_store(out, msb);
	be64_store(out + 8, b->lsb);
}

int paxos_ballot_from_uuid(const uint8_t in[16], struct paxos_ballot *b)
{
	uint64_t msb = be64_load(in), lsb = be64_load(in + 8);
	if (msb == 0 && lsb == 0) {
		*b = (struct paxos_ballot){0, 0};
		return 0;
	}
	if (((msb >> 12) & 0xf) != 1 || (lsb >> 62) != 2)
		return err_set(ERR_PROTOCOL, "ballot is not a version-1 uuid");
	uint64_t t = ((msb & 0x0fffULL) << 48) |
		     (((msb >> 16) & 0xffff) << 32) | (msb >> 32);
	if (t < UUID_EPOCH_100NS || (t - UUID_EPOCH_100NS) % 10 != 0)
		return err_set(ERR_PROTOCOL, "ballot time out of range");
	b->us = (int64_t)((t - UUID_EPOCH_100NS) / 10);
	b->lsb = lsb;
	return 0;
}

void paxos_clock_init(struct paxos_clock *c, uint64_t lsb, int64_t floor_us)
{
	/* the uuid variant (binary 10) in the top bits of the clock sequence */
	c->lsb = (lsb & ~(3ULL << 62)) | (2ULL << 62);
	c->last_us = floor_us;
}

struct paxos_ballot paxos_clock_next(struct paxos_clock *c, int64_t wall_us,
				     const struct paxos_ballot *min)
{
	int64_t us = wall_us;
	if (us <= c->last_us)
		us = c->last_us + 1;
	if (min && us <= min->us)
		us = min->us + 1;
	c->last_us = us;
	return (struct paxos_ballot){us, c->lsb};
}

/* ---- registers ----------------------------------------------------------- */

void paxos_state_init(struct paxos_state *s)
{
	memset(s, 0, sizeof(*s));
}

void paxos_state_free(struct paxos_state *s)
{
	buf_free(&s->accepted_update);
	buf_free(&s->committed_update);
	paxos_state_init(s);
}

static int set_bytes(struct buf *b, struct slice v)
{
	struct buf n = {0};
	if (v.len && buf_append(&n, v.ptr, v.len) < 0)
		return -1;
	buf_free(b);
	*b = n;
	return 0;
}

int paxos_state_copy(struct paxos_state *dst, const struct paxos_state *src)
{
	struct paxos_state n;
	paxos_state_init(&n);
	n.promised = src->promised;
	n.accepted = src->accepted;
	n.committed = src->committed;
	if (set_bytes(&n.accepted_update, buf_slice(&src->accepted_update)) <
		    0 ||
	    set_bytes(&n.committed_update, buf_slice(&src->committed_update)) <
		    0) {
		paxos_state_free(&n);
		return -1;
	}
	*dst = n;
	return 0;
}

int paxos_state_prepare(struct paxos_state *s, const struct paxos_ballot *b)
{
	if (paxos_ballot_cmp(b, &s->promised) <= 0)
		return 0;
	s->promised = *b;
	return 1;
}

int paxos_state_propose(struct paxos_state *s, const struct paxos_ballot *b,
			struct slice update)
{
	if (paxos_ballot_cmp(b, &s->promised) < 0)
		return 0;
	/* a commit at or above b already superseded this instance */
	if (paxos_ballot_cmp(b, &s->committed) <= 0)
		return 0;
	if (set_bytes(&s->accepted_update, update) < 0)
		return -1;
	s->promised = *b;
	s->accepted = *b;
	return 1;
}

int paxos_state_commit(struct paxos_state *s, const struct paxos_ballot *b,
		       struct slice update)
{
	if (paxos_ballot_cmp(b, &s->committed) <= 0)
		return 0;
	if (set_bytes(&s->committed_update, update) < 0)
		return -1;
	s->committed = *b;
	if (paxos_ballot_cmp(&s->accepted, b) <= 0) {
		s->accepted = (struct paxos_ballot){0, 0};
		buf_free(&s->accepted_update);
	}
	return 1;
}

/* ---- stored form --------------------------------------------------------- */

static int put_ballot(struct buf *out, const struct paxos_ballot *b)
{
	uint8_t u[16];
	paxos_ballot_to_uuid(b, u);
	return buf_append(out, u, 16);
}

int paxos_state_encode(const struct paxos_state *s, struct buf *out)
{
	size_t start = out->len;
	if (buf_put_u8(out, STATE_VERSION) < 0 ||
	    put_ballot(out, &s->promised) < 0 ||
	    put_ballot(out, &s->accepted) < 0 ||
	    buf_put_uvarint(out, s->accepted_update.len) < 0 ||
	    buf_append(out, s->accepted_update.data, s->accepted_update.len) <
		    0 ||
	    put_ballot(out, &s->committed) < 0 ||
	    buf_put_uvarint(out, s->committed_update.len) < 0 ||
	    buf_append(out, s->committed_update.data, s->committed_update.len) <
		    0)
		goto fail;
	uint32_t crc = crc32c(0, out->data + start, out->len - start);
	if (buf_put_be32(out, crc) < 0)
		goto fail;
	return 0;
fail:
	out->len = start;
	return -1;
}

static int get_ballot(struct cursor *c, struct paxos_ballot *b)
{
	uint8_t u[16];
	if (cursor_copy(c, u, 16) < 0 || paxos_ballot_from_uuid(u, b) < 0)
		return -1;
	return 0;
}

static int get_bytes(struct cursor *c, struct buf *b)
{
	uint64_t n;
	struct slice v;
	if (cursor_uvarint(c, &n) < 0 || n > PAXOS_UPDATE_MAX ||
	    n > cursor_left(c) || cursor_take(c, (size_t)n, &v) < 0)
		return -1;
	return set_bytes(b, v);
}

int paxos_state_decode(struct slice in, struct paxos_state *s)
{
	paxos_state_init(s);
	if (in.len < 1 + 4)
		return err_set(ERR_CORRUPT, "paxos state: %zu bytes", in.len);
	uint32_t want = be32_load(in.ptr + in.len - 4);
	if (crc32c(0, in.ptr, in.len - 4) != want)
		return err_set(ERR_CORRUPT, "paxos state: checksum mismatch");
	struct cursor c = cursor_make(in.ptr, in.len - 4);
	uint8_t v;
	if (cursor_u8(&c, &v) < 0 || v != STATE_VERSION)
		return err_set(ERR_CORRUPT, "paxos state: version");
	if (get_ballot(&c, &s->promised) < 0 ||
	    get_ballot(&c, &s->accepted) < 0 ||
	    get_bytes(&c, &s->accepted_update) < 0 ||
	    get_ballot(&c, &s->committed) < 0 ||
	    get_bytes(&c, &s->committed_update) < 0 || cursor_left(&c) != 0) {
		paxos_state_free(s);
		return err_set(ERR_CORRUPT, "paxos state: malformed");
	}
	return 0;
}
