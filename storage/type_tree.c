/*
 * Type nodes: static leaves, counted composite nodes, their text.
 * (Ownership rules in types.h.)
 */
#include "storage/types.h"

#include "common/buf.h"
#include "common/err.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A counted node: its reference count, then the node; the child array
 * and the strings follow in the same allocation. */
struct counted {
	_Atomic unsigned refs;
	struct storage_type t;
};

static struct counted *counted_of(const struct storage_type *t)
{
	return (struct counted *)((char *)(uintptr_t)t -
				  offsetof(struct counted, t));
}

bool storage_type_is_collection(uint16_t kind)
{
	return kind == STORAGE_TYPE_LIST || kind == STORAGE_TYPE_SET ||
	       kind == STORAGE_TYPE_MAP;
}

bool storage_type_is_multicell(const struct storage_type *t)
{
	return (storage_type_is_collection(t->kind) ||
		t->kind == STORAGE_TYPE_UDT) &&
	       !t->frozen;
}

const char *storage_type_kind_name(uint16_t kind)
{
	switch (kind) {
	case STORAGE_TYPE_ASCII:
		return "ascii";
	case STORAGE_TYPE_BIGINT:
		return "bigint";
	case STORAGE_TYPE_BLOB:
		return "blob";
	case STORAGE_TYPE_BOOLEAN:
		return "boolean";
	case STORAGE_TYPE_COUNTER:
		return "counter";
	case STORAGE_TYPE_DECIMAL:
		return "decimal";
	case STORAGE_TYPE_DOUBLE:
		return "double";
	case STORAGE_TYPE_FLOAT:
		return "float";
	case STORAGE_TYPE_INT:
		return "int";
	case STORAGE_TYPE_TIMESTAMP:
		return "timestamp";
	case STORAGE_TYPE_UUID:
		return "uuid";
	case STORAGE_TYPE_TEXT:
		return "text";
	case STORAGE_TYPE_VARINT:
		return "varint";
	case STORAGE_TYPE_TIMEUUID:
		return "timeuuid";
	case STORAGE_TYPE_INET:
		return "inet";
	case STORAGE_TYPE_DATE:
		return "date";
	case STORAGE_TYPE_TIME:
		return "time";
	case STORAGE_TYPE_SMALLINT:
		return "smallint";
	case STORAGE_TYPE_TINYINT:
		return "tinyint";
	case STORAGE_TYPE_DURATION:
		return "duration";
	case STORAGE_TYPE_LIST:
		return "list";
	case STORAGE_TYPE_MAP:
		return "map";
	case STORAGE_TYPE_SET:
		return "set";
	case STORAGE_TYPE_UDT:
		return "udt";
	case STORAGE_TYPE_TUPLE:
		return "tuple";
	case STORAGE_TYPE_VECTOR:
		return "vector";
	default:
		return NULL;
	}
}

bool storage_type_kind_valid(uint16_t kind)
{
	return storage_type_simple(kind) != NULL;
}

#define LEAF(k) [k] = {.kind = k, .origin = STORAGE_TYPE_STATIC}
static const struct storage_type leaves[STORAGE_TYPE_DURATION + 1] = {
	LEAF(STORAGE_TYPE_ASCII),   LEAF(STORAGE_TYPE_BIGINT),
	LEAF(STORAGE_TYPE_BLOB),    LEAF(STORAGE_TYPE_BOOLEAN),
	LEAF(STORAGE_TYPE_COUNTER), LEAF(STORAGE_TYPE_DECIMAL),
	LEAF(STORAGE_TYPE_DOUBLE),  LEAF(STORAGE_TYPE_FLOAT),
	LEAF(STORAGE_TYPE_INT),     LEAF(STORAGE_TYPE_TIMESTAMP),
	LEAF(STORAGE_TYPE_UUID),    LEAF(STORAGE_TYPE_TEXT),
	LEAF(STORAGE_TYPE_VARINT),  LEAF(STORAGE_TYPE_TIMEUUID),
	LEAF(STORAGE_TYPE_INET),    LEAF(STORAGE_TYPE_DATE),
	LEAF(STORAGE_TYPE_TIME),    LEAF(STORAGE_TYPE_SMALLINT),
	LEAF(STORAGE_TYPE_TINYINT), LEAF(STORAGE_TYPE_DURATION),
};

const struct storage_type *storage_type_simple(uint16_t kind)
{
	if (kind >= sizeof(leaves) / sizeof(leaves[0]) ||
	    leaves[kind].kind == 0)
		return NULL;
	return &leaves[kind];
}

static void ref(const struct storage_type *t)
{
	if (t && t->origin == STORAGE_TYPE_COUNTED)
		atomic_fetch_add(&counted_of(t)->refs, 1);
}

void storage_type_unref(const struct storage_type *t)
{
	if (!t || t->origin != STORAGE_TYPE_COUNTED)
		return;
	struct counted *c = counted_of(t);
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	for (size_t i = 0; i < t->count; i++)
		storage_type_unref(t->sub[i]);
	free(c);
}

static size_t depth_of(const struct storage_type *t)
{
	size_t d = 0;
	for (size_t i = 0; i < t->count; i++) {
		size_t s = depth_of(t->sub[i]);
		if (s > d)
			d = s;
	}
	return d + 1;
}

/* Allocates a counted node shaped like `shape` (kind, frozen, count,
 * dimension, names), holding a reference to each of `children`. */
static struct storage_type *build(const struct storage_type *shape,
				  const struct storage_type *const *children)
{
	size_t n = shape->count;
	if (n > STORAGE_TYPE_MAX_CHILDREN) {
		err_set(ERR_INVALID, "too many type components (%zu)", n);
		return NULL;
	}
	bool udt = shape->kind == STORAGE_TYPE_UDT;
	size_t strings = 0;
	if (udt) {
		strings += strlen(shape->keyspace ? shape->keyspace : "") + 1;
		strings += strlen(shape->name ? shape->name : "") + 1;
		for (size_t i = 0; i < n; i++)
			strings += strlen(shape->field_names[i]) + 1;
	}
	size_t size = sizeof(struct counted) +
		      n * sizeof(const struct storage_type *) +
		      (udt ? n * sizeof(const char *) : 0) + strings;
	struct counted *c = calloc(1, size);
	const struct storage_type **held = calloc(n ? n : 1, sizeof(*held));
	if (!c || !held) {
		free(c);
		free(held);
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	/* Reserve before mutating: hold every child first. */
	for (size_t i = 0; i < n; i++) {
		if (!children[i] ||
		    !(held[i] = storage_type_hold(children[i]))) {
			for (size_t j = 0; j < i; j++)
				storage_type_unref(held[j]);
			free(c);
			free(held);
			if (!children[i])
				err_set(ERR_INVALID, "missing type component");
			return NULL;
		}
	}
	atomic_init(&c->refs, 1);
	struct storage_type *t = &c->t;
	t->kind = shape->kind;
	t->frozen = shape->frozen;
	t->origin = STORAGE_TYPE_COUNTED;
	t->count = (uint16_t)n;
	t->dimension = shape->dimension;
	char *p = (char *)(c + 1);
	const struct storage_type **sub = (const struct storage_type **)p;
	memcpy(sub, held, n * sizeof(*sub));
	t->sub = sub;
	p += n * sizeof(*sub);
	free(held);
	if (udt) {
		const char **names = (const char **)p;
		p += n * sizeof(*names);
		const char *src[2] = {shape->keyspace ? shape->keyspace : "",
				      shape->name ? shape->name : ""};
		for (int k = 0; k < 2; k++) {
			size_t l = strlen(src[k]) + 1;
			memcpy(p, src[k], l);
			if (k == 0)
				t->keyspace = p;
			else
				t->name = p;
			p += l;
		}
		for (size_t i = 0; i < n; i++) {
			size_t l = strlen(shape->field_names[i]) + 1;
			memcpy(p, shape->field_names[i], l);
			names[i] = p;
			p += l;
		}
		t->field_names = names;
	}
	return t;
}

const struct storage_type *storage_type_hold(const struct storage_type *t)
{
	if (!t)
		return NULL;
	if (t->origin == STORAGE_TYPE_STATIC)
		return t;
	if (t->origin == STORAGE_TYPE_COUNTED) {
		ref(t);
		return t;
	}
	if (t->count == 0 && storage_type_simple(t->kind))
		return storage_type_simple(t->kind);
	if (depth_of(t) > STORAGE_TYPE_MAX_DEPTH) {
		err_set(ERR_INVALID, "type nested too deeply");
		return NULL;
	}
	return build(t, t->sub);
}

struct storage_type *
storage_type_new_collection(uint16_t kind, bool frozen,
			    const struct storage_type *elem,
			    const struct storage_type *value)
{
	if (!storage_type_is_collection(kind) || !elem ||
	    (kind == STORAGE_TYPE_MAP) != (value != NULL)) {
		err_set(ERR_INVALID, "bad collection type");
		return NULL;
	}
	const struct storage_type *children[2] = {elem, value};
	struct storage_type shape = {
		.kind = kind, .frozen = frozen, .count = value ? 2 : 1};
	return build(&shape, children);
}

struct storage_type *
storage_type_new_tuple(const struct storage_type *const *components, size_t n)
{
	if (n == 0 || n > STORAGE_TYPE_MAX_CHILDREN) {
		err_set(ERR_INVALID, "a tuple takes 1 to %d types",
			STORAGE_TYPE_MAX_CHILDREN);
		return NULL;
	}
	struct storage_type shape = {.kind = STORAGE_TYPE_TUPLE,
				     .frozen = true,
				     .count = (uint16_t)n};
	return build(&shape, components);
}

struct storage_type *storage_type_new_udt(
	const char *keyspace, const char *name, const char *const *field_names,
	const struct storage_type *const *fields, size_t n, bool frozen)
{
	if (n > STORAGE_TYPE_MAX_CHILDREN || (n && !field_names)) {
		err_set(ERR_INVALID, "bad user type");
		return NULL;
	}
	struct storage_type shape = {.kind = STORAGE_TYPE_UDT,
				     .frozen = frozen,
				     .count = (uint16_t)n,
				     .keyspace = keyspace,
				     .name = name,
				     .field_names = field_names};
	return build(&shape, fields);
}

struct storage_type *storage_type_new_vector(const struct storage_type *elem,
					     uint32_t dimension)
{
	if (dimension == 0 || dimension > STORAGE_TYPE_MAX_DIMENSION) {
		err_set(ERR_INVALID,
			"vectors may only have positive dimentions; given %u",
			dimension);
		return NULL;
	}
	const struct storage_type *children[1] = {elem};
	struct storage_type shape = {.kind = STORAGE_TYPE_VECTOR,
				     .frozen = true,
				     .count = 1,
				     .dimension = dimension};
	return build(&shape, children);
}

const struct storage_type *
storage_type_with_frozen(const struct storage_type *t, bool frozen)
{
	bool can = storage_type_is_collection(t->kind) ||
		   t->kind == STORAGE_TYPE_UDT;
	if (!can || t->frozen == frozen)
		return storage_type_hold(t);
	struct storage_type shape = *t;
	shape.frozen = frozen;
	return build(&shape, t->sub);
}

const struct storage_type *storage_type_path_type(const struct storage_type *t)
{
	switch (t->kind) {
	case STORAGE_TYPE_LIST:
		return storage_type_simple(STORAGE_TYPE_TIMEUUID);
	case STORAGE_TYPE_SET:
	case STORAGE_TYPE_MAP:
		return t->sub[0];
	case STORAGE_TYPE_UDT:
		return storage_type_simple(STORAGE_TYPE_SMALLINT);
	default:
		return storage_type_simple(STORAGE_TYPE_BLOB);
	}
}

const struct storage_type *
storage_type_cell_value_type(const struct storage_type *t, const uint8_t *path,
			     size_t path_len)
{
	switch (t->kind) {
	case STORAGE_TYPE_LIST:
		return t->sub[0];
	case STORAGE_TYPE_MAP:
		return t->sub[1];
	case STORAGE_TYPE_UDT: {
		if (path_len != 2)
			return NULL;
		size_t i = (size_t)path[0] << 8 | path[1];
		return i < t->count ? t->sub[i] : NULL;
	}
	default:
		return NULL;
	}
}

bool storage_type_equal(const struct storage_type *a,
			const struct storage_type *b)
{
	if (a == b)
		return true;
	if (!a || !b || a->kind != b->kind || a->frozen != b->frozen ||
	    a->count != b->count || a->dimension != b->dimension)
		return false;
	if (a->kind == STORAGE_TYPE_UDT) {
		if (strcmp(a->keyspace, b->keyspace) != 0 ||
		    strcmp(a->name, b->name) != 0)
			return false;
		for (size_t i = 0; i < a->count; i++)
			if (strcmp(a->field_names[i], b->field_names[i]) != 0)
				return false;
	}
	for (size_t i = 0; i < a->count; i++)
		if (!storage_type_equal(a->sub[i], b->sub[i]))
			return false;
	return true;
}

bool storage_type_contains(const struct storage_type *t, uint16_t kind)
{
	if (t->kind == kind)
		return true;
	for (size_t i = 0; i < t->count; i++)
		if (storage_type_contains(t->sub[i], kind))
			return true;
	return false;
}

size_t storage_type_fixed_length(const struct storage_type *t)
{
	switch (t->kind) {
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_DOUBLE:
		return 8;
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_FLOAT:
		return 4;
	case STORAGE_TYPE_BOOLEAN:
		return 1;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		return 16;
	case STORAGE_TYPE_VECTOR: {
		size_t e = storage_type_fixed_length(t->sub[0]);
		return e * t->dimension;
	}
	default:
		return 0;
	}
}

/* ---- text ------------------------------------------------------------ */

static bool plain_ident(const char *s)
{
	if (!*s || !((*s >= 'a' && *s <= 'z')))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_'))
			return false;
	return true;
}

static int put_ident(struct buf *out, const char *s)
{
	if (plain_ident(s))
		return buf_append(out, s, strlen(s));
	if (buf_append(out, "\"", 1))
		return -1;
	for (; *s; s++)
		if ((*s == '"' && buf_append(out, "\"", 1)) ||
		    buf_append(out, s, 1))
			return -1;
	return buf_append(out, "\"", 1);
}

static int put_str(struct buf *out, const char *s)
{
	return buf_append(out, s, strlen(s));
}

/* `top`: the column's own type, whose frozen<> is written. Inside a
 * collection every frozen collection/UDT is written frozen too. */
static int format(const struct storage_type *t, struct buf *out)
{
	bool wrap = t->frozen && (storage_type_is_collection(t->kind) ||
				  t->kind == STORAGE_TYPE_UDT ||
				  t->kind == STORAGE_TYPE_TUPLE);
	if (wrap && put_str(out, "frozen<"))
		return -1;
	int rc = 0;
	switch (t->kind) {
	case STORAGE_TYPE_UDT:
		rc = put_ident(out, t->name ? t->name : "");
		break;
	case STORAGE_TYPE_VECTOR: {
		char dim[16];
		snprintf(dim, sizeof(dim), ", %u>", t->dimension);
		rc = put_str(out, "vector<") || format(t->sub[0], out) ||
		     put_str(out, dim);
		break;
	}
	case STORAGE_TYPE_LIST:
	case STORAGE_TYPE_SET:
	case STORAGE_TYPE_MAP:
	case STORAGE_TYPE_TUPLE:
		rc = put_str(out, storage_type_kind_name(t->kind)) ||
		     put_str(out, "<");
		for (size_t i = 0; rc == 0 && i < t->count; i++)
			rc = (i && put_str(out, ", ")) ||
			     format(t->sub[i], out);
		rc = rc || put_str(out, ">");
		break;
	default: {
		const char *n = storage_type_kind_name(t->kind);
		rc = put_str(out, n ? n : "blob");
	}
	}
	if (rc == 0 && wrap)
		rc = put_str(out, ">");
	return rc ? -1 : 0;
}

int storage_type_format(const struct storage_type *t, struct buf *out)
{
	size_t mark = out->len;
	if (format(t, out) != 0) {
		out->len = mark;
		return err_set(ERR_NOMEM, "out of memory");
	}
	return 0;
}
