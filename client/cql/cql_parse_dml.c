/*
 * CQL parser, DML and SELECT: INSERT, UPDATE, DELETE (USING, WHERE
 * relations, assignments) and SELECT (selectors, ORDER BY, limits).
 */
#include "client/cql/cql_parse_internal.h"

/* ---- DML ----------------------------------------------------------------- */

int cql_parse_using_clause(struct parser *p, struct cql_using *u, bool ttl_ok)
{
	if (!accept_kw(p, "using"))
		return 0;
	do {
		if (ttl_ok && accept_kw(p, "ttl")) {
			if (!(u->ttl = cql_parse_term(p)))
				return -1;
		} else if (accept_kw(p, "timestamp")) {
			if (!(u->timestamp = cql_parse_term(p)))
				return -1;
		} else {
			return syntax_error(p, ttl_ok ? NULL : "K_TIMESTAMP");
		}
	} while (accept_kw(p, "and"));
	return 0;
}

/* relationType: = < <= > >= != (never IN: Cassandra's grammar has IN in
 * the relation shapes that allow it). */
static bool relation_type(struct parser *p, enum cql_op *op)
{
	static const struct {
		const char *text;
		enum cql_op op;
	} ops[] = {{"=", CQL_OP_EQ}, {"<", CQL_OP_LT},   {"<=", CQL_OP_LTE},
		   {">", CQL_OP_GT}, {">=", CQL_OP_GTE}, {"!=", CQL_OP_NEQ}};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (accept_punct(p, ops[i].text)) {
			*op = ops[i].op;
			return true;
		}
	}
	return false;
}

static bool is_marker(struct parser *p)
{
	return is_punct(p, "?") || is_punct(p, ":");
}

/* The source text of tokens [from, p->pos). */
static int source_len(struct parser *p, size_t from, const char **at)
{
	const struct cql_token *a = &p->toks[from], *z = &p->toks[p->pos - 1];
	*at = a->raw;
	return (int)(z->raw + z->raw_len - a->raw);
}

/* token(a, b) != v: Cassandra's Relation.toRestriction refuses it as an
 * invalid request, naming the relation as TokenRelation prints it. */
static int token_neq(struct parser *p, const struct cql_relation *r,
		     size_t value_at)
{
	char cols[256];
	size_t n = 0;
	cols[0] = '\0';
	for (size_t i = 0; i < r->column_count && n < sizeof(cols); i++)
		n += (size_t)snprintf(cols + n, sizeof(cols) - n, "%s%s",
				      i ? ", " : "", r->columns[i]);
	const char *v;
	int vlen = source_len(p, value_at, &v);
	return err_set(ERR_REFUSED,
		       "Unsupported \"!=\" relation: token(%s) != %.*s", cols,
		       vlen > 200 ? 200 : vlen, v);
}

/* After `(a, b)`: IN multiColumnInValues, or relationType and a tuple
 * literal or marker (Parser.g's relation, its tupleOfIdentifiers shape). */
static int tuple_relation(struct parser *p, struct cql_relation *r)
{
	if (accept_kw(p, "in")) {
		r->op = CQL_OP_IN;
		/* '(' ')' | marker | '(' tuple, ... ')' | '(' marker, ... ')'
		 */
		if (is_punct(p, "(")) {
			const struct cql_token *n = tok_at(p, 1);
			if (!tok_is_punct(n, ")") && !tok_is_punct(n, "(") &&
			    !tok_is_punct(n, "?") && !tok_is_punct(n, ":")) {
				size_t at = p->pos;
				advance(p);
				return syntax_error_from(p, at);
			}
		} else if (!is_marker(p)) {
			return syntax_error(p, NULL);
		}
	} else if (relation_type(p, &r->op)) {
		if (!is_punct(p, "(") && !is_marker(p))
			return syntax_error_from(p, p->pos - 1);
	} else {
		return syntax_error(p, NULL);
	}
	r->value = cql_parse_term(p);
	return r->value ? 0 : -1;
}

/* Whether `(` at the current token opens a tuple of identifiers rather
 * than a parenthesized relation: `(` name `,` or `(` name `)`. */
static bool opens_tuple(struct parser *p)
{
	const struct cql_token *n = tok_at(p, 1), *after = tok_at(p, 2);
	return (n->kind == CQL_TOK_QIDENT ||
		(n->kind == CQL_TOK_IDENT && !cql_parse_is_reserved(n))) &&
	       (tok_is_punct(after, ",") || tok_is_punct(after, ")"));
}

/*
 * Parser.g's relation (Cassandra 4.1), each shape as its grammar has it:
 *   name relationType term | name LIKE term | name IS NOT NULL
 *   | name IN (marker | '(' terms ')') | name CONTAINS [KEY] term
 *   | name '[' term ']' relationType term
 *   | TOKEN '(' names ')' relationType term
 *   | '(' names ')' (IN ... | relationType (tuple | marker))
 *   | '(' relation ')'
 * Cassandra tells the shapes starting with a name apart by reading ahead
 * from it, so a wrong second word brackets the name in the snippet.
 */
static int relation(struct parser *p, struct cql_relation *r)
{
	size_t start = p->pos;
	if (accept_kw(p, "token")) {
		r->kind = CQL_REL_TOKEN;
		if (expect_punct(p, "(") != 0 ||
		    cql_parse_ident_list(p, &r->columns, &r->column_count) !=
			    0 ||
		    expect_punct(p, ")") != 0)
			return -1;
		if (!relation_type(p, &r->op)) /* token(k) IN: not in 4.1 */
			return syntax_error(p, NULL);
		size_t value_at = p->pos;
		if (!(r->value = cql_parse_term(p)))
			return -1;
		return r->op == CQL_OP_NEQ ? token_neq(p, r, value_at) : 0;
	}
	if (is_punct(p, "(")) {
		if (!opens_tuple(p)) { /* '(' relation ')' */
			advance(p);
			if (enter(p) != 0)
				return -1;
			int rc = relation(p, r);
			leave(p);
			return rc != 0 ? -1 : expect_punct(p, ")");
		}
		advance(p);
		r->kind = CQL_REL_TUPLE;
		if (cql_parse_ident_list(p, &r->columns, &r->column_count) !=
			    0 ||
		    expect_punct(p, ")") != 0)
			return -1;
		return tuple_relation(p, r);
	}
	const char **one = arena_alloc(p->a, sizeof(*one));
	if (!one || !(one[0] = cql_parse_ident(p)))
		return -1;
	r->kind = CQL_REL_COLUMN;
	r->columns = one;
	r->column_count = 1;
	if (accept_punct(p, "[")) { /* m[k] op v (Cassandra's grammar) */
		if (!(r->element = cql_parse_term(p)) ||
		    expect_punct(p, "]") != 0)
			return -1;
		if (!relation_type(p, &r->op))
			return syntax_error(p, NULL);
		r->value = cql_parse_term(p);
		return r->value ? 0 : -1;
	}
	if (accept_kw(p, "contains")) {
		r->op = accept_kw(p, "key") ? CQL_OP_CONTAINS_KEY
					    : CQL_OP_CONTAINS;
	} else if (accept_kw(p, "like")) {
		return unsupported("LIKE relations (they need an index)");
	} else if (accept_kw(p, "is")) {
		/* parses; StatementRestrictions refuses it outside a view */
		if (expect_kw(p, "not") != 0 || expect_kw(p, "null") != 0)
			return -1;
		return err_set(ERR_REFUSED,
			       "Unsupported restriction: %s IS NOT NULL",
			       one[0]);
	} else if (accept_kw(p, "in")) {
		r->op = CQL_OP_IN;
		if (!is_punct(p, "(") && !is_marker(p))
			return syntax_error_from(p, start);
	} else if (!relation_type(p, &r->op)) {
		return syntax_error_from(p, start);
	}
	r->value = cql_parse_term(p);
	return r->value ? 0 : -1;
}

static int where_clause(struct parser *p, struct cql_relation **out,
			size_t *count)
{
	struct vec rels = VEC(struct cql_relation);
	do {
		struct cql_relation *r = vec_push(p, &rels);
		if (!r || relation(p, r) != 0)
			return -1;
	} while (accept_kw(p, "and"));
	*out = rels.items;
	*count = rels.count;
	return 0;
}

static int column_ref(struct parser *p, struct cql_column_ref *c)
{
	if (!(c->name = cql_parse_ident(p)))
		return -1;
	if (accept_punct(p, ".")) /* u.f */
		return (c->field = cql_parse_ident(p)) ? 0 : -1;
	if (accept_punct(p, "[")) {
		if (!(c->element = cql_parse_term(p)) ||
		    expect_punct(p, "]") != 0)
			return -1;
	}
	return 0;
}

/* IF EXISTS | IF c op v [AND ...] after UPDATE's or DELETE's WHERE. */
static int conditions(struct parser *p, bool *has, bool *if_exists,
		      struct cql_condition **out, size_t *count)
{
	if (!accept_kw(p, "if"))
		return 0;
	*has = true;
	if (accept_kw(p, "exists")) {
		*if_exists = true;
		return 0;
	}
	struct vec conds = VEC(struct cql_condition);
	do {
		struct cql_condition *c = vec_push(p, &conds);
		if (!c || column_ref(p, &c->column) != 0)
			return -1;
		if (accept_kw(p, "in"))
			c->op = CQL_OP_IN;
		else if (!relation_type(p, &c->op))
			return syntax_error(p, NULL);
		if (!(c->value = cql_parse_term(p)))
			return -1;
	} while (accept_kw(p, "and"));
	*out = conds.items;
	*count = conds.count;
	return 0;
}

/* INSERT INTO t JSON ('...' | ? | :name) [DEFAULT (NULL | UNSET)]
 * [IF NOT EXISTS] [USING ...], Cassandra's jsonInsertStatement. */
static int insert_json(struct parser *p, struct cql_insert *in)
{
	const struct cql_token *t = tok(p);
	if (t->kind != CQL_TOK_STRING && !tok_is_punct(t, "?") &&
	    !tok_is_punct(t, ":"))
		return syntax_error(p, NULL);
	if (!(in->json = cql_parse_term(p)))
		return -1;
	if (in->json->kind != CQL_TERM_STRING &&
	    in->json->kind != CQL_TERM_BIND)
		return syntax_error(p, NULL);
	if (accept_kw(p, "default")) {
		if (accept_kw(p, "unset"))
			in->default_unset = true;
		else if (expect_kw(p, "null") != 0)
			return -1;
	}
	if (accept_kw(p, "if")) {
		if (expect_kw(p, "not") != 0 || expect_kw(p, "exists") != 0)
			return -1;
		in->if_not_exists = true;
	}
	return cql_parse_using_clause(p, &in->using, true);
}

int cql_parse_insert(struct parser *p, struct cql_stmt *s)
{
	struct cql_insert *in = &s->u.insert;
	s->kind = CQL_STMT_INSERT;
	if (expect_kw(p, "into") != 0 || cql_parse_qname(p, &in->table) != 0)
		return -1;
	if (accept_kw(p, "json"))
		return insert_json(p, in);
	if (expect_punct(p, "(") != 0 ||
	    cql_parse_ident_list(p, &in->columns, &in->column_count) != 0 ||
	    expect_punct(p, ")") != 0 || expect_kw(p, "values") != 0 ||
	    expect_punct(p, "(") != 0)
		return -1;
	struct vec values = VEC(struct cql_term *);
	do {
		struct cql_term **slot = vec_push(p, &values);
		if (!slot || !(*slot = cql_parse_term(p)))
			return -1;
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	in->values = values.items;
	if (values.count != in->column_count)
		return err_set(ERR_REFUSED, "Unmatched column names/values");
	if (accept_kw(p, "if")) {
		if (expect_kw(p, "not") != 0 || expect_kw(p, "exists") != 0)
			return -1;
		in->if_not_exists = true;
	}
	return cql_parse_using_clause(p, &in->using, true);
}

/* c = v | c[k] = v | c = c + v | c = c - v | c = v + c */
static int assignment(struct parser *p, struct cql_assignment *a)
{
	if (column_ref(p, &a->target) != 0 || expect_punct(p, "=") != 0)
		return -1;
	a->kind = CQL_ASSIGN_SET;
	struct cql_token *t = tok(p);
	if ((t->kind == CQL_TOK_IDENT || t->kind == CQL_TOK_QIDENT) &&
	    !a->target.element &&
	    (tok_is_punct(tok_at(p, 1), "+") ||
	     tok_is_punct(tok_at(p, 1), "-"))) {
		const char *name = cql_parse_ident(p);
		if (!name)
			return -1;
		if (strcmp(name, a->target.name) != 0)
			return err_set(ERR_INVALID,
				       "Only expressions of the form X = X %s "
				       "<value> are supported",
				       is_punct(p, "+") ? "+" : "-");
		a->kind = accept_punct(p, "+") ? CQL_ASSIGN_ADD
					       : CQL_ASSIGN_REMOVE;
		if (a->kind == CQL_ASSIGN_REMOVE)
			advance(p);
		a->value = cql_parse_term(p);
		return a->value ? 0 : -1;
	}
	if (!(a->value = cql_parse_term(p)))
		return -1;
	if (accept_punct(p, "+")) {
		const char *name = cql_parse_ident(p);
		if (!name)
			return -1;
		if (strcmp(name, a->target.name) != 0)
			return err_set(
				ERR_INVALID,
				"Only expressions of the form X = <value> "
				"+ X are supported");
		a->kind = CQL_ASSIGN_PREPEND;
	}
	return 0;
}

int cql_parse_update(struct parser *p, struct cql_stmt *s)
{
	struct cql_update *up = &s->u.update;
	struct vec sets = VEC(struct cql_assignment);
	s->kind = CQL_STMT_UPDATE;
	if (cql_parse_qname(p, &up->table) != 0 ||
	    cql_parse_using_clause(p, &up->using, true) != 0 ||
	    expect_kw(p, "set") != 0)
		return -1;
	do {
		struct cql_assignment *a = vec_push(p, &sets);
		if (!a || assignment(p, a) != 0)
			return -1;
	} while (accept_punct(p, ","));
	up->assignments = sets.items;
	up->assignment_count = sets.count;
	if (expect_kw(p, "where") != 0 ||
	    where_clause(p, &up->where, &up->where_count) != 0)
		return -1;
	return conditions(p, &up->has_conditions, &up->if_exists,
			  &up->conditions, &up->condition_count);
}

int cql_parse_delete_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_delete *d = &s->u.del;
	s->kind = CQL_STMT_DELETE;
	if (!is_kw(p, "from")) {
		struct vec cols = VEC(struct cql_column_ref);
		do {
			struct cql_column_ref *c = vec_push(p, &cols);
			if (!c || column_ref(p, c) != 0)
				return -1;
		} while (accept_punct(p, ","));
		d->columns = cols.items;
		d->column_count = cols.count;
	}
	if (expect_kw(p, "from") != 0 || cql_parse_qname(p, &d->table) != 0 ||
	    cql_parse_using_clause(p, &d->using, false) != 0 ||
	    expect_kw(p, "where") != 0 ||
	    where_clause(p, &d->where, &d->where_count) != 0)
		return -1;
	return conditions(p, &d->has_conditions, &d->if_exists, &d->conditions,
			  &d->condition_count);
}

/* ---- SELECT -------------------------------------------------------------- */

static int selector(struct parser *p, struct cql_selector *sel);

static int selector_args(struct parser *p, struct cql_selector *sel)
{
	struct vec args = VEC(struct cql_selector);
	if (!accept_punct(p, ")")) {
		do {
			struct cql_selector *a = vec_push(p, &args);
			if (!a || selector(p, a) != 0)
				return -1;
		} while (accept_punct(p, ","));
		if (expect_punct(p, ")") != 0)
			return -1;
	}
	sel->args = args.items;
	sel->arg_count = args.count;
	return 0;
}

static int selector_inner(struct parser *p, struct cql_selector *sel);

static int selector(struct parser *p, struct cql_selector *sel)
{
	if (enter(p) != 0)
		return -1;
	int rc = selector_inner(p, sel);
	leave(p);
	return rc;
}

static int selector_inner(struct parser *p, struct cql_selector *sel)
{
	struct cql_token *t = tok(p);
	bool name_tok = t->kind == CQL_TOK_QIDENT ||
			(t->kind == CQL_TOK_IDENT && !tok_is_kw(t, "null") &&
			 !tok_is_kw(t, "true") && !tok_is_kw(t, "false") &&
			 !tok_is_kw(t, "nan") && !tok_is_kw(t, "infinity"));
	if (name_tok && tok_is_punct(tok_at(p, 1), "(")) {
		/* Function names may be keywords (token, ttl, writetime). */
		sel->kind = CQL_SEL_FUNCTION;
		if (!(sel->name = cql_parse_lower_name(p, t)))
			return -1;
		advance(p); /* name */
		advance(p); /* ( */
		if (strcmp(sel->name, "cast") == 0 &&
		    t->kind == CQL_TOK_IDENT) {
			/* CAST(selector AS type) */
			sel->kind = CQL_SEL_CAST;
			sel->args = node(p, sizeof(*sel->args));
			sel->arg_count = 1;
			if (!sel->args || selector(p, sel->args) != 0 ||
			    expect_kw(p, "as") != 0 ||
			    !(sel->type = cql_parse_type_ast(p)))
				return -1;
			return expect_punct(p, ")");
		}
		if (strcmp(sel->name, "count") == 0 && is_punct(p, "*")) {
			advance(p);
			sel->kind = CQL_SEL_COUNT_STAR;
			return expect_punct(p, ")");
		}
		return selector_args(p, sel);
	}
	if (name_tok) {
		sel->kind = CQL_SEL_COLUMN;
		if (!(sel->name = cql_parse_ident(p)))
			return -1;
		while (accept_punct(p, ".")) { /* u.f, u.f.g */
			struct cql_selector *inner = node(p, sizeof(*inner));
			if (!inner)
				return -1;
			*inner = *sel;
			memset(sel, 0, sizeof(*sel));
			sel->kind = CQL_SEL_FIELD;
			sel->args = inner;
			sel->arg_count = 1;
			if (!(sel->name = cql_parse_ident(p)))
				return -1;
		}
		if (sel->kind == CQL_SEL_FIELD || !accept_punct(p, "["))
			return 0;
		sel->kind = CQL_SEL_ELEMENT;
		if (!(sel->term = cql_parse_term(p)))
			return -1;
		if (is_punct(p, "."))
			return unsupported(
				"Slices of collections in selections");
		return expect_punct(p, "]");
	}
	sel->kind = CQL_SEL_TERM;
	sel->term = cql_parse_term(p);
	return sel->term ? 0 : -1;
}

static int order_by(struct parser *p, struct cql_select *q)
{
	struct vec order = VEC(struct cql_ordering);
	do {
		struct cql_ordering *o = vec_push(p, &order);
		if (!o || !(o->column = cql_parse_ident(p)))
			return -1;
		if (accept_kw(p, "desc"))
			o->descending = true;
		else
			accept_kw(p, "asc");
	} while (accept_punct(p, ","));
	q->order = order.items;
	q->order_count = order.count;
	return 0;
}

/* GROUP BY a, b, floor(c, 1h[, '2016-01-01']): columns, or a function of
 * a column and constant terms (Cassandra 5.0's time windows). */
static int group_by(struct parser *p, struct cql_select *q)
{
	struct vec cols = VEC(const char *);
	struct vec fns = VEC(struct cql_group_fn);
	bool any_fn = false;
	do {
		const char **col = vec_push(p, &cols);
		struct cql_group_fn *fn = vec_push(p, &fns);
		const char *name = col && fn ? cql_parse_ident(p) : NULL;
		if (!name)
			return -1;
		if (!accept_punct(p, "(")) {
			*col = name;
			continue;
		}
		any_fn = true;
		fn->name = name;
		if (!(*col = cql_parse_ident(p)))
			return -1;
		while (accept_punct(p, ",")) {
			if (fn->nargs == 2)
				return syntax_error(p, "')'");
			if (!(fn->args[fn->nargs++] = cql_parse_term(p)))
				return -1;
		}
		if (expect_punct(p, ")") != 0)
			return -1;
	} while (accept_punct(p, ","));
	q->has_group_by = true;
	q->group_by = cols.items;
	q->group_by_count = cols.count;
	q->group_fns = any_fn ? fns.items : NULL;
	return 0;
}

static int select_tail(struct parser *p, struct cql_select *q)
{
	if (accept_kw(p, "where") &&
	    where_clause(p, &q->where, &q->where_count) != 0)
		return -1;
	if (accept_kw(p, "group")) {
		if (expect_kw(p, "by") != 0 || group_by(p, q) != 0)
			return -1;
	}
	if (accept_kw(p, "order") &&
	    (expect_kw(p, "by") != 0 || order_by(p, q) != 0))
		return -1;
	if (accept_kw(p, "per")) {
		if (expect_kw(p, "partition") != 0 ||
		    expect_kw(p, "limit") != 0 ||
		    !(q->per_partition_limit = cql_parse_term(p)))
			return -1;
	}
	if (accept_kw(p, "limit") && !(q->limit = cql_parse_term(p)))
		return -1;
	if (accept_kw(p, "allow")) {
		if (expect_kw(p, "filtering") != 0)
			return -1;
		q->allow_filtering = true;
	}
	return 0;
}

int cql_parse_select_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_select *q = &s->u.select;
	s->kind = CQL_STMT_SELECT;
	/* json is also a column name: SELECT json FROM t, SELECT json, k */
	if (is_kw(p, "json") && !tok_is_kw(tok_at(p, 1), "from") &&
	    !tok_is_kw(tok_at(p, 1), "as") &&
	    !tok_is_punct(tok_at(p, 1), ",")) {
		advance(p);
		q->json = true;
	}
	if (is_kw(p, "distinct") && !tok_is_kw(tok_at(p, 1), "from") &&
	    !tok_is_punct(tok_at(p, 1), ",")) {
		advance(p);
		q->distinct = true;
	}
	if (accept_punct(p, "*")) {
		q->star = true;
	} else {
		struct vec sels = VEC(struct cql_selector);
		do {
			struct cql_selector *sel = vec_push(p, &sels);
			if (!sel || selector(p, sel) != 0)
				return -1;
			if (accept_kw(p, "as") &&
			    !(sel->alias = cql_parse_ident(p)))
				return -1;
		} while (accept_punct(p, ","));
		q->selectors = sels.items;
		q->selector_count = sels.count;
	}
	if (expect_kw(p, "from") != 0 || cql_parse_qname(p, &q->table) != 0)
		return -1;
	return select_tail(p, q);
}
