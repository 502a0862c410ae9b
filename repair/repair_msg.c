/*
 * Repair wire format: protobuf-c (repair.proto) <-> struct repair_msg.
 *
 * The only file that sees protobuf-c types. Encoding points the protobuf
 * structs at the caller's bytes (no copies); decoding checks every length
 * and count against the caps of repair_internal.h before the state machine
 * looks at it, and keeps the unpacked message alive for the slices.
 */
#include "repair/repair_internal.h"

#include "common/err.h"
#include "repair/repair.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Cassini__Repair__Range PbRange;
typedef Cassini__Repair__Row PbRow;
typedef Cassini__Repair__Request PbRequest;
typedef Cassini__Repair__Response PbResponse;

static ProtobufCBinaryData bin(const void *p, size_t len)
{
	ProtobufCBinaryData b = {len, (uint8_t *)p};
	return b;
}

/* ---- node lists ---------------------------------------------------------- */

int repair_nodes_encode(const uint32_t *v, size_t n, struct buf *out)
{
	uint64_t prev_end = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && v[j] == v[j - 1] + 1)
			j++;
		uint64_t gap = v[i] - prev_end, count = j - i;
		if (buf_put_uvarint(out, gap << 1 | (count > 1)) ||
		    (count > 1 && buf_put_uvarint(out, count - 2)))
			return err_set(ERR_NOMEM, "node list");
		prev_end = (uint64_t)v[j - 1] + 1;
		i = j;
	}
	return 0;
}

int repair_nodes_decode(const uint8_t *p, size_t len, uint32_t level,
			uint32_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!len)
		return 0;
	if (level > MERKLE_MAX_DEPTH)
		return err_set(ERR_PROTOCOL, "nodes of level %u", level);
	uint64_t limit = (uint64_t)1 << level;
	/* every run takes a byte at least: len bounds the runs, not the
	 * nodes; count first, then fill */
	uint32_t *v = NULL;
	size_t cap = 0, k = 0;
	struct cursor c = cursor_make(p, len);
	uint64_t end = 0;
	while (cursor_left(&c)) {
		uint64_t head, count = 1;
		if (cursor_uvarint(&c, &head))
			goto bad;
		if (head & 1) {
			if (cursor_uvarint(&c, &count) || count > limit)
				goto bad;
			count += 2;
		}
		uint64_t gap = head >> 1;
		if (gap > limit || end + gap + count > limit ||
		    k + count > REPAIR_MAX_NODES)
			goto bad;
		if (k + count > cap) {
			size_t nc = cap ? cap : 64;
			while (nc < k + count)
				nc *= 2;
			uint32_t *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				free(v);
				return err_set(ERR_NOMEM, "node list");
			}
			v = nv;
			cap = nc;
		}
		for (uint64_t i = 0; i < count; i++)
			v[k++] = (uint32_t)(end + gap + i);
		end += gap + count;
	}
	*out = v;
	*n = k;
	return 0;
bad:
	free(v);
	return err_set(ERR_PROTOCOL, "malformed node list");
}

/* The pb arrays of a message being packed. */
struct pack {
	PbRange *ranges;
	PbRange **range_ptrs;
	PbRow *rows;
	PbRow **row_ptrs;
	ProtobufCBinaryData *frags;
	struct buf nodes;
};

static void pack_free(struct pack *k)
{
	buf_free(&k->nodes);
	free(k->ranges);
	free(k->range_ptrs);
	free(k->rows);
	free(k->row_ptrs);
	free(k->frags);
}

static int pack_lists(const struct repair_msg *m, struct pack *k)
{
	memset(k, 0, sizeof(*k));
	buf_init(&k->nodes);
	if (m->nnodes && repair_nodes_encode(m->nodes, m->nnodes, &k->nodes))
		goto nomem;
	if (m->nranges) {
		k->ranges = calloc(m->nranges, sizeof(*k->ranges));
		k->range_ptrs = calloc(m->nranges, sizeof(*k->range_ptrs));
		if (!k->ranges || !k->range_ptrs)
			goto nomem;
		for (size_t i = 0; i < m->nranges; i++) {
			cassini__repair__range__init(&k->ranges[i]);
			k->ranges[i].start = m->ranges[i].start;
			k->ranges[i].end = m->ranges[i].end;
			k->range_ptrs[i] = &k->ranges[i];
		}
	}
	if (m->nrows) {
		k->rows = calloc(m->nrows, sizeof(*k->rows));
		k->row_ptrs = calloc(m->nrows, sizeof(*k->row_ptrs));
		if (!k->rows || !k->row_ptrs)
			goto nomem;
		for (size_t i = 0; i < m->nrows; i++) {
			const struct repair_row *r = &m->rows[i];
			cassini__repair__row__init(&k->rows[i]);
			k->rows[i].key = bin(r->key.ptr, r->key.len);
			k->rows[i].id = bin(r->id.ptr, r->id.len);
			k->rows[i].digest = bin(r->digest, 16);
			k->row_ptrs[i] = &k->rows[i];
		}
	}
	if (m->nfrags) {
		k->frags = calloc(m->nfrags, sizeof(*k->frags));
		if (!k->frags)
			goto nomem;
		for (size_t i = 0; i < m->nfrags; i++)
			k->frags[i] = bin(m->frags[i].ptr, m->frags[i].len);
	}
	return 0;
nomem:
	pack_free(k);
	return err_set(ERR_NOMEM, "repair message");
}

static int pack_out(const ProtobufCMessage *pm, struct buf *out)
{
	size_t len = protobuf_c_message_get_packed_size(pm);
	uint8_t *dst = buf_extend(out, len);
	if (!dst)
		return err_set(ERR_NOMEM, "repair message of %zu bytes", len);
	protobuf_c_message_pack(pm, dst);
	return 0;
}

int repair_msg_pack_request(const struct repair_msg *m, struct buf *out)
{
	struct pack k;
	if (pack_lists(m, &k))
		return -1;
	PbRequest q;
	cassini__repair__request__init(&q);
	q.session = m->session;
	q.task = m->task;
	q.table_id = bin(m->table_id, 16);
	q.n_ranges = m->nranges;
	q.ranges = k.range_ptrs;
	q.max_depth = m->max_depth;
	q.exclusive = m->exclusive;
	q.n_rows = m->nrows;
	q.rows = k.row_ptrs;
	q.n_fragments = m->nfrags;
	q.fragments = k.frags;
	q.levels = m->levels;
	q.level = m->level;
	q.nodes = bin(k.nodes.data, k.nodes.len);
	q.tree_version = m->tree_version;
	q.incremental = m->incremental;
	q.repaired_at = m->repaired_at;
	q.table_ids = bin(m->table_ids.ptr, m->table_ids.len);
	int rc = pack_out(&q.base, out);
	pack_free(&k);
	return rc;
}

int repair_msg_pack_response(const struct repair_msg *m, struct buf *out)
{
	struct pack k;
	if (pack_lists(m, &k))
		return -1;
	PbResponse r;
	cassini__repair__response__init(&r);
	r.session = m->session;
	r.task = m->task;
	r.ok = m->ok;
	r.error = (char *)(m->ok ? "" : m->error);
	r.partitions = m->partitions;
	r.tree_version = m->tree_version;
	r.depth = m->depth;
	r.levels = m->levels;
	r.hashes = bin(m->hashes.ptr, m->hashes.len);
	r.sstables = m->sstables;
	r.n_rows = m->nrows;
	r.rows = k.row_ptrs;
	r.n_fragments = m->nfrags;
	r.fragments = k.frags;
	int rc = pack_out(&r.base, out);
	pack_free(&k);
	return rc;
}

/* ---- decoding ------------------------------------------------------------ */

static int unpack_ranges(PbRange **in, size_t n, struct repair_msg *m)
{
	if (n > REPAIR_MAX_RANGES)
		return err_set(ERR_PROTOCOL, "%zu ranges", n);
	if (!n)
		return 0;
	m->ranges = calloc(n, sizeof(*m->ranges));
	if (!m->ranges)
		return err_set(ERR_NOMEM, "ranges");
	for (size_t i = 0; i < n; i++) {
		m->ranges[i].start = in[i]->start;
		m->ranges[i].end = in[i]->end;
	}
	m->nranges = n;
	return 0;
}

static int unpack_rows(PbRow **in, size_t n, bool digests, struct repair_msg *m)
{
	if (n > REPAIR_MAX_ROWS)
		return err_set(ERR_PROTOCOL, "%zu rows", n);
	if (!n)
		return 0;
	m->rows = calloc(n, sizeof(*m->rows));
	if (!m->rows)
		return err_set(ERR_NOMEM, "rows");
	for (size_t i = 0; i < n; i++) {
		const PbRow *r = in[i];
		if (r->key.len == 0 || r->key.len > REPAIR_ID_MAX ||
		    r->id.len == 0 || r->id.len > REPAIR_ID_MAX)
			return err_set(ERR_PROTOCOL, "row %zu: bad key or id",
				       i);
		if (digests && r->digest.len != 16)
			return err_set(ERR_PROTOCOL,
				       "row %zu: digest of %zu "
				       "bytes",
				       i, r->digest.len);
		m->rows[i].key = slice_make(r->key.data, r->key.len);
		m->rows[i].id = slice_make(r->id.data, r->id.len);
		if (digests)
			memcpy(m->rows[i].digest, r->digest.data, 16);
	}
	m->nrows = n;
	return 0;
}

static int unpack_frags(ProtobufCBinaryData *in, size_t n, struct repair_msg *m)
{
	if (n > REPAIR_MAX_ROWS)
		return err_set(ERR_PROTOCOL, "%zu fragments", n);
	if (!n)
		return 0;
	m->frags = calloc(n, sizeof(*m->frags));
	if (!m->frags)
		return err_set(ERR_NOMEM, "fragments");
	for (size_t i = 0; i < n; i++)
		m->frags[i] = slice_make(in[i].data, in[i].len);
	m->nfrags = n;
	return 0;
}

int repair_msg_unpack_request(const uint8_t *p, size_t len,
			      struct repair_msg *out)
{
	memset(out, 0, sizeof(*out));
	PbRequest *q = cassini__repair__request__unpack(NULL, len, p);
	if (!q)
		return err_set(ERR_PROTOCOL, "malformed repair request");
	out->pb = q;
	if (q->table_id.len != 16)
		return err_set(ERR_PROTOCOL, "table id of %zu bytes",
			       q->table_id.len);
	memcpy(out->table_id, q->table_id.data, 16);
	out->session = q->session;
	out->task = q->task;
	out->max_depth = q->max_depth;
	out->exclusive = q->exclusive;
	out->levels = q->levels;
	out->level = q->level;
	out->tree_version = q->tree_version;
	out->incremental = q->incremental;
	out->repaired_at = q->repaired_at;
	if (q->table_ids.len % 16 || q->table_ids.len > 16 * 4096)
		return err_set(ERR_PROTOCOL, "table ids of %zu bytes",
			       q->table_ids.len);
	out->table_ids = slice_make(q->table_ids.data, q->table_ids.len);
	if (q->levels > MERKLE_MAX_DEPTH || q->level > MERKLE_MAX_DEPTH)
		return err_set(ERR_PROTOCOL, "level %u, %u levels", q->level,
			       q->levels);
	if (repair_nodes_decode(q->nodes.data, q->nodes.len, q->level,
				&out->nodes, &out->nnodes) ||
	    unpack_ranges(q->ranges, q->n_ranges, out) ||
	    unpack_rows(q->rows, q->n_rows, false, out) ||
	    unpack_frags(q->fragments, q->n_fragments, out))
		return -1;
	return 0;
}

int repair_msg_unpack_response(const uint8_t *p, size_t len,
			       struct repair_msg *out)
{
	memset(out, 0, sizeof(*out));
	PbResponse *r = cassini__repair__response__unpack(NULL, len, p);
	if (!r)
		return err_set(ERR_PROTOCOL, "malformed repair response");
	out->pb = r;
	out->session = r->session;
	out->task = r->task;
	out->ok = r->ok;
	snprintf(out->error, sizeof(out->error), "%s",
		 r->error ? r->error : "");
	out->partitions = r->partitions;
	out->tree_version = r->tree_version;
	out->depth = r->depth;
	out->levels = r->levels;
	out->sstables = r->sstables;
	if (r->depth > MERKLE_MAX_DEPTH || r->levels > r->depth ||
	    r->hashes.len % 8)
		return err_set(ERR_PROTOCOL,
			       "tree of depth %u, %u levels, "
			       "%zu bytes of hashes",
			       r->depth, r->levels, r->hashes.len);
	out->hashes = slice_make(r->hashes.data, r->hashes.len);
	if (unpack_rows(r->rows, r->n_rows, true, out) ||
	    unpack_frags(r->fragments, r->n_fragments, out))
		return -1;
	return 0;
}

void repair_msg_free(struct repair_msg *m)
{
	free(m->nodes);
	free(m->ranges);
	free(m->rows);
	free(m->frags);
	if (m->pb) {
		/* both kinds free through their descriptor */
		protobuf_c_message_free_unpacked(m->pb, NULL);
	}
	memset(m, 0, sizeof(*m));
}
