/*
 * CQL parser, DDL: CREATE/ALTER/DROP KEYSPACE and TABLE, their column
 * definitions, primary keys and WITH options.
 */
#include "client/cql/cql_parse_internal.h"

/* name = value, where value is a constant or a map literal. */
static int option(struct parser *p, struct vec *opts)
{
	struct cql_option *o = vec_push(p, opts);
	if (!o || !(o->name = cql_parse_ident(p)) || expect_punct(p, "=") != 0)
		return -1;
	o->value = cql_parse_term(p);
	return o->value ? 0 : -1;
}

static int keyspace_options(struct parser *p, struct cql_keyspace_stmt *ks)
{
	struct vec opts = VEC(struct cql_option);
	if (expect_kw(p, "with") != 0)
		return -1;
	do {
		if (option(p, &opts) != 0)
			return -1;
	} while (accept_kw(p, "and"));
	ks->options = opts.items;
	ks->option_count = opts.count;
	return 0;
}

/* CLUSTERING ORDER BY (a DESC, b ASC) */
static int clustering_order(struct parser *p, struct cql_create_table *ct)
{
	struct vec order = VEC(struct cql_clustering_order);
	if (expect_kw(p, "order") != 0 || expect_kw(p, "by") != 0 ||
	    expect_punct(p, "(") != 0)
		return -1;
	do {
		struct cql_clustering_order *o = vec_push(p, &order);
		if (!o || !(o->column = cql_parse_ident(p)))
			return -1;
		if (accept_kw(p, "desc"))
			o->descending = true;
		else
			accept_kw(p, "asc");
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	ct->order = order.items;
	ct->order_count = order.count;
	return 0;
}

static int table_options(struct parser *p, struct cql_create_table *ct,
			 struct vec *opts)
{
	do {
		if (accept_kw(p, "clustering")) {
			if (clustering_order(p, ct) != 0)
				return -1;
		} else if (is_kw(p, "compact")) {
			return unsupported("COMPACT STORAGE tables");
		} else if (option(p, opts) != 0) {
			return -1;
		}
	} while (accept_kw(p, "and"));
	return 0;
}

/* ---- DDL ----------------------------------------------------------------- */

static int if_not_exists(struct parser *p, bool *out)
{
	*out = false;
	if (!accept_kw(p, "if"))
		return 0;
	if (expect_kw(p, "not") != 0 || expect_kw(p, "exists") != 0)
		return -1;
	*out = true;
	return 0;
}

static int if_exists(struct parser *p, bool *out)
{
	*out = false;
	if (!accept_kw(p, "if"))
		return 0;
	if (expect_kw(p, "exists") != 0)
		return -1;
	*out = true;
	return 0;
}

static int column_def(struct parser *p, struct cql_column_def *c)
{
	if (!(c->name = cql_parse_ident(p)) ||
	    !(c->type = cql_parse_type_ast(p)))
		return -1;
	if (accept_kw(p, "static"))
		c->is_static = true;
	if (accept_kw(p, "primary")) {
		if (expect_kw(p, "key") != 0)
			return -1;
		c->primary_key = true;
	}
	return 0;
}

int cql_parse_ident_list(struct parser *p, const char ***out, size_t *count)
{
	struct vec v = VEC(const char *);
	do {
		const char **slot = vec_push(p, &v);
		if (!slot || !(*slot = cql_parse_ident(p)))
			return -1;
	} while (accept_punct(p, ","));
	*out = v.items;
	*count = v.count;
	return 0;
}

/* PRIMARY KEY ((a, b), c, d) or PRIMARY KEY (a, c) */
static int primary_key(struct parser *p, struct cql_create_table *ct)
{
	if (expect_kw(p, "key") != 0 || expect_punct(p, "(") != 0)
		return -1;
	if (accept_punct(p, "(")) {
		if (cql_parse_ident_list(p, &ct->partition_key,
					 &ct->partition_key_count) != 0 ||
		    expect_punct(p, ")") != 0)
			return -1;
	} else {
		const char **one = arena_alloc(p->a, sizeof(*one));
		if (!one || !(one[0] = cql_parse_ident(p)))
			return -1;
		ct->partition_key = one;
		ct->partition_key_count = 1;
	}
	if (accept_punct(p, ",") &&
	    cql_parse_ident_list(p, &ct->clustering, &ct->clustering_count) !=
		    0)
		return -1;
	return expect_punct(p, ")");
}

static int create_table(struct parser *p, struct cql_stmt *s)
{
	struct cql_create_table *ct = &s->u.create_table;
	struct vec cols = VEC(struct cql_column_def);
	struct vec opts = VEC(struct cql_option);
	bool pk_clause = false;
	s->kind = CQL_STMT_CREATE_TABLE;
	if (if_not_exists(p, &ct->if_not_exists) != 0 ||
	    cql_parse_qname(p, &ct->table) != 0 || expect_punct(p, "(") != 0)
		return -1;
	bool first = true;
	do {
		/* Cassandra's grammar: '(' column (',' column?)* ')', so
		 * empty entries after a comma (a trailing one) are fine */
		if (!first && (is_punct(p, ",") || is_punct(p, ")")))
			continue;
		first = false;
		if (accept_kw(p, "primary")) {
			if (pk_clause)
				return err_set(ERR_REFUSED,
					       "Multiple PRIMARY KEYs specifed "
					       "(exactly one required)");
			pk_clause = true;
			if (primary_key(p, ct) != 0)
				return -1;
			continue;
		}
		struct cql_column_def *c = vec_push(p, &cols);
		if (!c || column_def(p, c) != 0)
			return -1;
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	ct->columns = cols.items;
	ct->column_count = cols.count;
	for (size_t i = 0; i < ct->column_count; i++) {
		if (!ct->columns[i].primary_key)
			continue;
		if (pk_clause || ct->partition_key_count)
			return err_set(
				ERR_REFUSED,
				"Multiple PRIMARY KEYs specifed (exactly "
				"one required)");
		const char **one = arena_alloc(p->a, sizeof(*one));
		if (!one)
			return -1;
		one[0] = ct->columns[i].name;
		ct->partition_key = one;
		ct->partition_key_count = 1;
	}
	if (!ct->partition_key_count)
		return err_set(ERR_REFUSED,
			       "No PRIMARY KEY specifed for table '%s%s%s' "
			       "(exactly one required)",
			       ct->table.keyspace ? ct->table.keyspace : "",
			       ct->table.keyspace ? "." : "", ct->table.name);
	if (accept_kw(p, "with") && table_options(p, ct, &opts) != 0)
		return -1;
	ct->options = opts.items;
	ct->option_count = opts.count;
	return 0;
}

/* ALTER TABLE ... DROP c [USING TIMESTAMP <integer>] */
static int drop_timestamp(struct parser *p, struct cql_alter_table *at)
{
	if (!accept_kw(p, "using"))
		return 0;
	if (expect_kw(p, "timestamp") != 0)
		return -1;
	struct cql_term *t = cql_parse_term(p);
	if (!t)
		return -1;
	if (t->kind != CQL_TERM_INTEGER || t->len > 18)
		return err_set(ERR_INVALID,
			       "ALTER TABLE ... DROP USING TIMESTAMP takes an "
			       "integer literal");
	int64_t v = 0;
	for (size_t i = 0; i < t->len; i++)
		v = v * 10 + (t->text[i] - '0');
	at->has_timestamp = true;
	at->timestamp = t->negative ? -v : v;
	return 0;
}

static int alter_table(struct parser *p, struct cql_stmt *s)
{
	struct cql_alter_table *at = &s->u.alter_table;
	s->kind = CQL_STMT_ALTER_TABLE;
	if (cql_parse_qname(p, &at->table) != 0)
		return -1;
	if (accept_kw(p, "add")) {
		struct vec cols = VEC(struct cql_column_def);
		bool paren = accept_punct(p, "(");
		do {
			struct cql_column_def *c = vec_push(p, &cols);
			if (!c || column_def(p, c) != 0)
				return -1;
		} while (paren && accept_punct(p, ","));
		if (paren && expect_punct(p, ")") != 0)
			return -1;
		at->kind = CQL_ALTER_ADD;
		at->columns = cols.items;
		at->column_count = cols.count;
		return 0;
	}
	if (accept_kw(p, "drop")) {
		at->kind = CQL_ALTER_DROP;
		if (accept_punct(p, "(")) {
			if (cql_parse_ident_list(p, &at->names,
						 &at->name_count) ||
			    expect_punct(p, ")"))
				return -1;
		} else {
			const char **one = arena_alloc(p->a, sizeof(*one));
			if (!one || !(one[0] = cql_parse_ident(p)))
				return -1;
			at->names = one;
			at->name_count = 1;
		}
		return drop_timestamp(p, at);
	}
	if (accept_kw(p, "rename")) {
		struct vec names = VEC(const char *);
		at->kind = CQL_ALTER_RENAME;
		do {
			const char **from = vec_push(p, &names);
			if (!from || !(*from = cql_parse_ident(p)) ||
			    expect_kw(p, "to") != 0)
				return -1;
			const char **to = vec_push(p, &names);
			if (!to || !(*to = cql_parse_ident(p)))
				return -1;
		} while (accept_kw(p, "and"));
		at->names = names.items;
		at->name_count = names.count;
		return 0;
	}
	if (accept_kw(p, "with")) {
		struct cql_create_table tmp = {0};
		struct vec opts = VEC(struct cql_option);
		if (table_options(p, &tmp, &opts) != 0)
			return -1;
		if (tmp.order_count)
			return err_set(ERR_INVALID,
				       "Cannot change the clustering order of "
				       "an existing table");
		at->kind = CQL_ALTER_WITH;
		at->options = opts.items;
		at->option_count = opts.count;
		return 0;
	}
	if (is_kw(p, "alter"))
		return err_set(ERR_INVALID,
			       "Altering column types is no longer "
			       "supported");
	return syntax_error(p, NULL);
}

/* ---- indexes ------------------------------------------------------------ */

/* (col), (keys(col)), (values(col)), (entries(col)), (full(col)) */
static int index_target(struct parser *p, struct cql_index_stmt *ix)
{
	static const struct {
		const char *kw;
		enum cql_index_target target;
	} fns[] = {
		{"keys", CQL_INDEX_KEYS},
		{"values", CQL_INDEX_VALUES},
		{"entries", CQL_INDEX_ENTRIES},
		{"full", CQL_INDEX_FULL},
	};
	if (expect_punct(p, "(") != 0)
		return -1;
	ix->target = CQL_INDEX_SIMPLE;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (is_kw(p, fns[i].kw) && tok_is_punct(tok_at(p, 1), "(")) {
			advance(p);
			advance(p);
			ix->target = fns[i].target;
			break;
		}
	if (!(ix->column = cql_parse_ident(p)))
		return -1;
	if (ix->target != CQL_INDEX_SIMPLE && expect_punct(p, ")") != 0)
		return -1;
	if (is_punct(p, ","))
		return err_set(ERR_REFUSED,
			       "Only CUSTOM indexes support multiple columns");
	return expect_punct(p, ")");
}

/* CREATE [CUSTOM] INDEX [IF NOT EXISTS] [[ks.]name] ON [ks.]t (target)
 * [USING 'class'] [WITH OPTIONS = {...}] */
static int create_index(struct parser *p, struct cql_stmt *s)
{
	struct cql_index_stmt *ix = &s->u.index;
	s->kind = CQL_STMT_CREATE_INDEX;
	ix->custom = accept_kw(p, "custom");
	if (expect_kw(p, "index") != 0 ||
	    if_not_exists(p, &ix->if_not_exists) != 0)
		return -1;
	if (!is_kw(p, "on") && cql_parse_qname(p, &ix->name) != 0)
		return -1;
	if (expect_kw(p, "on") != 0 || cql_parse_qname(p, &ix->table) != 0 ||
	    index_target(p, ix) != 0)
		return -1;
	if (accept_kw(p, "using")) {
		struct cql_token *t = tok(p);
		if (t->kind != CQL_TOK_STRING)
			return syntax_error(p, "STRING_LITERAL");
		ix->using = t->text;
		advance(p);
	}
	if (accept_kw(p, "with")) {
		struct vec opts = VEC(struct cql_option);
		do {
			if (option(p, &opts) != 0)
				return -1;
		} while (accept_kw(p, "and"));
		const struct cql_option *o = opts.items;
		for (size_t i = 0; i < opts.count; i++) {
			if (strcmp(o[i].name, "options") != 0) {
				ix->other_properties = true;
				continue;
			}
			if (o[i].value->kind != CQL_TERM_MAP)
				return err_set(ERR_INVALID,
					       "Invalid value for property "
					       "'options'. It should be a "
					       "map.");
			ix->options = o[i].value;
		}
	}
	return 0;
}

/* CREATE ... : the object kind decides. */
/* CREATE, ALTER or DROP of anything but a keyspace or a table: a clear
 * "not supported" for the schema objects Cassini lacks, else a syntax
 * error. */
static int other_schema_object(struct parser *p)
{
	static const struct {
		const char *kw, *what;
	} objects[] = {
		{"index", "Secondary indexes"},
		{"materialized", "Materialized views"},
		{"function", "User-defined functions and aggregates"},
		{"aggregate", "User-defined functions and aggregates"},
		{"trigger", "Triggers"},
		{"role", "Roles and users"},
		{"user", "Roles and users"},
	};
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++)
		if (is_kw(p, objects[i].kw))
			return unsupported(objects[i].what);
	return syntax_error_from(p, p->stmt_start);
}

/* CREATE MATERIALIZED VIEW, CREATE [OR REPLACE] FUNCTION / AGGREGATE:
 * Cassandra 4.1's answers on a node where they are disabled, its default
 * (materialized_views_enabled, user_defined_functions_enabled). A user
 * defined aggregate needs a user defined state function, so it is refused
 * with the functions. ERR_UNSUPPORTED: answered as Invalid (cql_parse.h). */
static int disabled_schema_object(struct parser *p, bool or_replace)
{
	if (!or_replace && is_kw(p, "materialized"))
		return err_set(ERR_UNSUPPORTED,
			       "Materialized views are disabled. "
			       "Enable in cassandra.yaml to use.");
	if (!accept_kw(p, "function") && !accept_kw(p, "aggregate"))
		return or_replace ? syntax_error_from(p, p->stmt_start)
				  : other_schema_object(p);
	bool ine;
	if (if_not_exists(p, &ine) != 0)
		return -1;
	if (ine && or_replace)
		return err_set(ERR_UNSUPPORTED,
			       "Cannot use both 'OR REPLACE' and "
			       "'IF NOT EXISTS' directives");
	return err_set(ERR_UNSUPPORTED,
		       "User-defined functions are disabled in cassandra.yaml "
		       "- set user_defined_functions_enabled=true to enable");
}

int cql_parse_create(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_CREATE_KEYSPACE;
		if (if_not_exists(p, &s->u.keyspace.if_not_exists) != 0 ||
		    !(s->u.keyspace.name = cql_parse_ident(p)))
			return -1;
		return keyspace_options(p, &s->u.keyspace);
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily"))
		return create_table(p, s);
	if (is_kw(p, "custom") || is_kw(p, "index"))
		return create_index(p, s);
	if (accept_kw(p, "or")) /* CREATE OR REPLACE FUNCTION */
		return expect_kw(p, "replace") != 0
			       ? -1
			       : disabled_schema_object(p, true);
	return disabled_schema_object(p, false);
}

int cql_parse_alter(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_ALTER_KEYSPACE;
		if (!(s->u.keyspace.name = cql_parse_ident(p)))
			return -1;
		return keyspace_options(p, &s->u.keyspace);
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily"))
		return alter_table(p, s);
	return other_schema_object(p);
}

int cql_parse_drop(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_DROP_KEYSPACE;
		if (if_exists(p, &s->u.keyspace.if_exists) != 0)
			return -1;
		s->u.keyspace.name = cql_parse_ident(p);
		return s->u.keyspace.name ? 0 : -1;
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily")) {
		s->kind = CQL_STMT_DROP_TABLE;
		return if_exists(p, &s->u.drop_table.if_exists) ||
		       cql_parse_qname(p, &s->u.drop_table.table);
	}
	if (accept_kw(p, "index")) {
		s->kind = CQL_STMT_DROP_INDEX;
		return if_exists(p, &s->u.index.if_exists) ||
		       cql_parse_qname(p, &s->u.index.name);
	}
	return other_schema_object(p);
}
