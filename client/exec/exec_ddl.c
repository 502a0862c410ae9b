/*
 * DDL: CREATE/ALTER/DROP KEYSPACE and TABLE run against the schema,
 * with the checks Cassandra makes when the statement runs (datacenters,
 * replication_factor expansion), and the schema change events.
 */
#define LOG_MODULE "client"
#include "client/exec/exec_internal.h"

#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdlib.h>
#include <string.h>

static int schema_event(struct buf *b, uint8_t version, void *arg)
{
	const struct cql_schema_change *c = arg;
	return cql_encode_event_schema(b, version, c->change, c->target,
				       c->keyspace,
				       c->name[0] ? c->name : NULL);
}

/* NetworkTopologyStrategy's recognized options are the datacenters the
 * node knows (its own and its peers', Datacenters.getValidDatacenters)
 * and replication_factor; Cassandra 4.0+ refuses any other when the
 * statement runs (not when a peer's schema is applied). */
static int check_datacenters(struct job *j, const struct cql_stmt *s)
{
	if ((s->kind != CQL_STMT_CREATE_KEYSPACE &&
	     s->kind != CQL_STMT_ALTER_KEYSPACE) ||
	    !j->e->hooks.node_info)
		return 0;
	const struct cql_keyspace_stmt *ks = &s->u.keyspace;
	const struct cql_term *repl = NULL;
	for (size_t i = 0; i < ks->option_count; i++)
		if (strcmp(ks->options[i].name, "replication") == 0)
			repl = ks->options[i].value;
	if (!repl || repl->kind != CQL_TERM_MAP)
		return 0;
	/* what the statement answers first: already exists, doesn't exist */
	bool exists = cql_schema_keyspace(j->e->schema, ks->name) != NULL;
	if (s->kind == CQL_STMT_CREATE_KEYSPACE ? exists : !exists)
		return 0;
	bool nts = false;
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		const struct cql_term *k = repl->items[i],
				      *v = repl->items[i + 1];
		if (k->kind == CQL_TERM_STRING && k->len == 5 &&
		    memcmp(k->text, "class", 5) == 0 &&
		    v->kind == CQL_TERM_STRING)
			nts = (v->len == 23 &&
			       memcmp(v->text, "NetworkTopologyStrategy", 23) ==
				       0) ||
			      (v->len == 52 &&
			       memcmp(v->text,
				      "org.apache.cassandra.locator."
				      "NetworkTopologyStrategy",
				      52) == 0);
	}
	if (!nts)
		return 0;
	struct cql_node_info node;
	j->e->hooks.node_info(j->e->hooks.arg, &node);
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		const struct cql_term *k = repl->items[i];
		if (k->kind != CQL_TERM_STRING ||
		    (k->len == 5 && memcmp(k->text, "class", 5) == 0) ||
		    (k->len == 18 &&
		     memcmp(k->text, "replication_factor", 18) == 0))
			continue;
		bool known = node.dc && strlen(node.dc) == k->len &&
			     memcmp(node.dc, k->text, k->len) == 0;
		for (size_t p = 0; !known && p < node.peer_count; p++) {
			const char *dc = node.peers[p].dc;
			known = dc && strlen(dc) == k->len &&
				memcmp(dc, k->text, k->len) == 0;
		}
		if (!known)
			return err_set(ERR_CONFIG,
				       "Unrecognized strategy option {%.*s} "
				       "passed to NetworkTopologyStrategy for "
				       "keyspace %s",
				       (int)k->len, k->text, ks->name);
	}
	return 0;
}

/* A map literal's key or value as plain text: 'dc1' -> dc1, 3 -> 3. */
static int plain_text(const struct cql_term *t, char *dst, size_t cap)
{
	if ((t->kind != CQL_TERM_STRING && t->kind != CQL_TERM_INTEGER &&
	     t->kind != CQL_TERM_FLOAT && t->kind != CQL_TERM_BOOLEAN) ||
	    t->len + 2 > cap)
		return -1;
	snprintf(dst, cap, "%s%.*s", t->negative ? "-" : "", (int)t->len,
		 t->text);
	return 0;
}

static void put_quoted(struct buf *b, const char *s, char q)
{
	buf_append(b, &q, 1);
	for (; *s; s++) {
		buf_append(b, s, 1);
		if (*s == q)
			buf_append(b, &q, 1);
	}
	buf_append(b, &q, 1);
}

struct repl_entry {
	char key[128];
	char value[64];
};

static bool repl_has(const struct repl_entry *e, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(e[i].key, key) == 0)
			return true;
	return false;
}

/*
 * NetworkTopologyStrategy's replication_factor (Cassandra 4.0+,
 * NetworkTopologyStrategy.prepareOptions): the default for every known
 * datacenter not named; an ALTER keeps the datacenters the keyspace has;
 * an ALTER from SimpleStrategy that names only the class keeps its
 * factor; datacenters at 0 are left out (replication_factor or not). The
 * statement is rewritten (text and
 * tree) with the expanded map, so every node applies the same options.
 * 0 when nothing changed or it was rewritten, -1 on error.
 */
static int expand_replication_factor(struct job *j, const struct cql_stmt **sp,
				     const char **text, size_t *len)
{
	const struct cql_stmt *s = *sp;
	if ((s->kind != CQL_STMT_CREATE_KEYSPACE &&
	     s->kind != CQL_STMT_ALTER_KEYSPACE) ||
	    !j->e->hooks.node_info)
		return 0;
	const struct cql_keyspace_stmt *ks = &s->u.keyspace;
	const struct cql_term *repl = NULL;
	for (size_t i = 0; i < ks->option_count; i++)
		if (strcmp(ks->options[i].name, "replication") == 0)
			repl = ks->options[i].value;
	if (!repl || repl->kind != CQL_TERM_MAP || repl->count / 2 > 64)
		return 0;
	char klass[128] = "", rf[64] = "";
	struct repl_entry e[96];
	size_t n = 0;
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		char k[128], v[64];
		if (plain_text(repl->items[i], k, sizeof(k)) != 0 ||
		    plain_text(repl->items[i + 1], v, sizeof(v)) != 0)
			return 0; /* the schema's own checks answer */
		if (strcmp(k, "class") == 0)
			snprintf(klass, sizeof(klass), "%s", v);
		else if (strcmp(k, "replication_factor") == 0)
			snprintf(rf, sizeof(rf), "%s", v);
		else if (!repl_has(e, n, k)) {
			snprintf(e[n].key, sizeof(e[n].key), "%s", k);
			snprintf(e[n].value, sizeof(e[n].value), "%s", v);
			n++;
		}
	}
	if (strcmp(klass, "NetworkTopologyStrategy") != 0 &&
	    strcmp(klass, "org.apache.cassandra.locator."
			  "NetworkTopologyStrategy") != 0)
		return 0;
	const struct cql_keyspace *old =
		cql_schema_keyspace(j->e->schema, ks->name);
	const struct storage_keyspace_meta *om =
		s->kind == CQL_STMT_ALTER_KEYSPACE && old
			? cql_keyspace_meta(old)
			: NULL;
	bool rf_given = rf[0] != '\0';
	/* An ALTER from SimpleStrategy naming only the class keeps its
	 * factor, in every datacenter. */
	for (size_t i = 0; !rf_given && !n && om && i < om->replication_count;
	     i++)
		if (strcmp(om->replication_keys[i], "replication_factor") == 0)
			snprintf(rf, sizeof(rf), "%s",
				 om->replication_values[i]);
	bool zero = false;
	for (size_t i = 0; i < n; i++)
		zero |= strcmp(e[i].value, "0") == 0;
	/* Nothing to expand nor to leave out: the statement stands. */
	if (!rf[0] && !zero)
		return 0;
	if (rf_given && om) {
		const struct storage_keyspace_meta *m = om;
		for (size_t i = 0; i < m->replication_count && n < 96; i++)
			if (strcmp(m->replication_keys[i],
				   "replication_factor") != 0 &&
			    !repl_has(e, n, m->replication_keys[i])) {
				snprintf(e[n].key, sizeof(e[n].key), "%s",
					 m->replication_keys[i]);
				snprintf(e[n].value, sizeof(e[n].value), "%s",
					 m->replication_values[i]);
				n++;
			}
	}
	struct cql_node_info node;
	j->e->hooks.node_info(j->e->hooks.arg, &node);
	for (size_t p = 0; rf[0] && p <= node.peer_count && n < 96; p++) {
		const char *dc = p == 0 ? node.dc : node.peers[p - 1].dc;
		if (dc && !repl_has(e, n, dc)) {
			snprintf(e[n].key, sizeof(e[n].key), "%s", dc);
			snprintf(e[n].value, sizeof(e[n].value), "%s", rf);
			n++;
		}
	}
	struct buf b;
	buf_init(&b);
	buf_append(&b, s->kind == CQL_STMT_CREATE_KEYSPACE ? "CREATE" : "ALTER",
		   s->kind == CQL_STMT_CREATE_KEYSPACE ? 6 : 5);
	buf_append(&b, " KEYSPACE ", 10);
	if (ks->if_not_exists)
		buf_append(&b, "IF NOT EXISTS ", 14);
	put_quoted(&b, ks->name, '"');
	buf_append(&b, " WITH replication = {'class': ", 30);
	put_quoted(&b, klass, '\'');
	for (size_t i = 0; i < n; i++) {
		if (strcmp(e[i].value, "0") == 0)
			continue;
		buf_append(&b, ", ", 2);
		put_quoted(&b, e[i].key, '\'');
		buf_append(&b, ": ", 2);
		put_quoted(&b, e[i].value, '\'');
	}
	buf_append(&b, "}", 1);
	for (size_t i = 0; i < ks->option_count; i++) {
		char v[64];
		if (strcmp(ks->options[i].name, "replication") == 0 ||
		    plain_text(ks->options[i].value, v, sizeof(v)) != 0)
			continue;
		buf_append(&b, " AND ", 5);
		buf_append(&b, ks->options[i].name,
			   strlen(ks->options[i].name));
		buf_append(&b, " = ", 3);
		buf_append(&b, v, strlen(v));
	}
	char *copy = b.data ? arena_alloc_aligned(j->a, b.len + 1, 1) : NULL;
	if (!copy) {
		buf_free(&b);
		return err_set(ERR_NOMEM, "out of memory");
	}
	memcpy(copy, b.data, b.len);
	copy[b.len] = '\0';
	size_t n_text = b.len;
	buf_free(&b);
	int binds;
	struct cql_stmt *re = cql_parse(j->a, copy, n_text, &binds, NULL);
	if (!re)
		return -1;
	*sp = re;
	*text = copy;
	*len = n_text;
	return 0;
}

/* The permission a DDL statement needs (Cassandra 4.1's authorize()):
 * CREATE KEYSPACE: CREATE on <all keyspaces>; ALTER/DROP KEYSPACE k: on
 * <keyspace k>; CREATE TABLE: CREATE on its keyspace; ALTER/DROP TABLE:
 * on <table k.t>; CREATE/DROP INDEX: ALTER on the index's table. Without a
 * keyspace (no USE) the schema answers. The local system keyspaces are refused
 * by the schema whoever asks. */
static bool ddl_permitted(struct job *j, const struct cql_stmt *s)
{
	const struct cql_qname *q = NULL;
	uint32_t perm;
	switch (s->kind) {
	case CQL_STMT_CREATE_KEYSPACE:
		return cql_exec_permitted(j, CQL_PERM_CREATE, NULL, NULL);
	case CQL_STMT_ALTER_KEYSPACE:
	case CQL_STMT_DROP_KEYSPACE:
		if (cql_system_keyspace_is_virtual(s->u.keyspace.name))
			return true;
		return cql_exec_permitted(j,
					  s->kind == CQL_STMT_ALTER_KEYSPACE
						  ? CQL_PERM_ALTER
						  : CQL_PERM_DROP,
					  s->u.keyspace.name, NULL);
	case CQL_STMT_CREATE_TABLE:
		q = &s->u.create_table.table;
		perm = CQL_PERM_CREATE;
		break;
	case CQL_STMT_ALTER_TABLE:
		q = &s->u.alter_table.table;
		perm = CQL_PERM_ALTER;
		break;
	case CQL_STMT_DROP_TABLE:
		q = &s->u.drop_table.table;
		perm = CQL_PERM_DROP;
		break;
	case CQL_STMT_CREATE_INDEX: {
		/* CreateIndexStatement: ALTER on the table */
		const struct cql_index_stmt *ix = &s->u.index;
		const char *ks = ix->table.keyspace  ? ix->table.keyspace
				 : ix->name.keyspace ? ix->name.keyspace
						     : j->keyspace;
		if (!ks || cql_system_keyspace_is_virtual(ks))
			return true;
		return cql_exec_permitted(j, CQL_PERM_ALTER, ks,
					  ix->table.name);
	}
	case CQL_STMT_DROP_INDEX: {
		/* DropIndexStatement: ALTER on the index's table (a missing
		 * index is the schema's to answer) */
		const char *ks = s->u.index.name.keyspace
					 ? s->u.index.name.keyspace
					 : j->keyspace;
		const struct cql_keyspace *k =
			ks ? cql_schema_keyspace(j->e->schema, ks) : NULL;
		const struct cql_table *t = NULL;
		if (!k || !cql_keyspace_index(k, s->u.index.name.name, &t))
			return true;
		return cql_exec_permitted(j, CQL_PERM_ALTER, ks,
					  cql_table_meta(t)->name);
	}
	default:
		return true;
	}
	const char *ks = q->keyspace ? q->keyspace : j->keyspace;
	if (!ks || cql_system_keyspace_is_virtual(ks))
		return true;
	return cql_exec_permitted(
		j, perm, ks, s->kind == CQL_STMT_CREATE_TABLE ? NULL : q->name);
}

void cql_exec_run_ddl(struct job *j, const struct cql_stmt *s, const char *text,
		      size_t len)
{
	struct cql_schema_change change;
	uint8_t id[16];
	if (!ddl_permitted(j, s))
		return;
	if (expand_replication_factor(j, &s, &text, &len) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_CONFIG, why);
		return;
	}
	if (check_datacenters(j, s) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_CONFIG, why);
		return;
	}
	if (j->e->hooks.ddl_check &&
	    j->e->hooks.ddl_check(j->e->hooks.arg, s) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_INVALID, why);
		return;
	}
	j->e->hooks.new_table_id(j->e->hooks.arg, id);
	/* A DROP of columns and a change of options get their time here,
	 * once: the record carries it to every node and every replay. */
	struct cql_stmt stamped;
	int64_t time_us = 0;
	if (cql_schema_stmt_timed(s) && j->e->hooks.now_us) {
		stamped = *s;
		time_us = j->e->hooks.now_us(j->e->hooks.arg);
		cql_schema_stmt_set_time(&stamped, time_us);
		s = &stamped;
	}
	enum cql_schema_status st =
		cql_schema_apply(j->e->schema, s, j->keyspace, id, &change);
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	switch (st) {
	case CQL_SCHEMA_OK:
		LOG_INFO("schema: %s %s %s%s%s", change.change, change.target,
			 change.keyspace, change.name[0] ? "." : "",
			 change.name);
		cql_encode_result_schema_change(
			&j->out, j->info->version, j->info->stream,
			change.change, change.target, change.keyspace,
			change.name[0] ? change.name : NULL);
		cql_exec_schema_changed(j->e, &change);
		if (j->e->server)
			cql_server_broadcast(j->e->server, "SCHEMA_CHANGE",
					     schema_event, &change);
		if (j->e->hooks.schema_changed) {
			struct cql_schema_event ev = {
				&change, text, len, j->keyspace, id, time_us};
			j->e->hooks.schema_changed(j->e->hooks.arg, &ev);
		}
		/* the creator's permissions, or the dropped resource's
		 * revoked, before the client hears of it */
		if (j->e->hooks.schema_applied &&
		    j->e->hooks.schema_applied(j->e->hooks.arg, j->req, j->info,
					       &change, j->out.data,
					       j->out.len))
			j->req = NULL;
		return;
	case CQL_SCHEMA_NOOP:
		cql_encode_result_void(&j->out, j->info->version,
				       j->info->stream);
		return;
	case CQL_SCHEMA_ALREADY_EXISTS: {
		const char *ks = "", *table = "";
		if (s->kind == CQL_STMT_CREATE_KEYSPACE) {
			ks = s->u.keyspace.name;
		} else {
			ks = s->u.create_table.table.keyspace
				     ? s->u.create_table.table.keyspace
				     : j->keyspace;
			table = s->u.create_table.table.name;
		}
		cql_encode_already_exists(&j->out, j->info->version,
					  j->info->stream, msg, ks, table);
		return;
	}
	case CQL_SCHEMA_SYNTAX:
		reply_error(j, CQL_ERR_SYNTAX, msg);
		return;
	case CQL_SCHEMA_CONFIG:
		reply_error(j, CQL_ERR_CONFIG, msg);
		return;
	case CQL_SCHEMA_UNAUTHORIZED:
		reply_error(j, CQL_ERR_UNAUTHORIZED, msg);
		return;
	case CQL_SCHEMA_NOMEM:
		reply_error(j, CQL_ERR_SERVER, msg);
		return;
	default:
		reply_error(j, CQL_ERR_INVALID, msg);
	}
}
