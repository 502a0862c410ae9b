/*
 * nodetool toppartitions <keyspace> <table> <duration_ms> and nodetool
 * profileload [<keyspace> [<table>|*]] [<duration_ms>], with [-s capacity]
 * [-k count] [-a samplers]: the tables' samplers (storage/sampler.c)
 * count what this replica reads and writes for the duration (a timer on
 * the loop, the answer deferred), then print Cassandra 4.1's layout
 * (SamplingManager's ResultBuilder through TableBuilder): per sampler, in
 * SamplerType order, its description line, then `Table Partition Count
 * +/-` rows (the largest-figure samplers: `Table Partition Rows` and
 * so on) merged over the tables, or "Nothing recorded during sampling
 * period...". profileload's scheduled samplings (-i) are not kept.
 */
#define LOG_MODULE "admin"
#include "client/cql/cql_json.h"
#include "client/schema/schema.h"
#include "common/arena.h"
#include "common/err.h"
#include "common/log.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "storage/storage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nodetool's defaults */
#define DEFAULT_CAPACITY     256
#define DEFAULT_COUNT        10
#define DEFAULT_DURATION_MS  10000
#define PROFILELOAD_CAPACITY 1024 /* ProfileLoad's bound on -s */

struct window_table {
	uint8_t id[16];
	char name[520]; /* ks.table, the Table column */
};

struct node_toppartitions {
	struct node_toppartitions *next;
	struct node *n;
	struct admin_reply *r;
	struct env_timer *timer;
	const char *cmd; /* the command's name, for its errors */
	char what[520];  /* ks.table, ks.* or *.* */
	bool named;      /* one table named: its drop fails the answer */
	struct window_table *tables;
	size_t ntables;
	unsigned kinds; /* 1 << STORAGE_SAMPLE_* */
	size_t count;
};

/* Cassandra's SamplerType names, descriptions and figure columns; the
 * frequency samplers have a `+/-` column too. */
static const struct {
	const char *name, *description, *column;
	bool frequency;
} samplers[STORAGE_SAMPLERS] = {
	[STORAGE_SAMPLE_READS] = {"READS", "Frequency of reads by partition",
				  "Count", true},
	[STORAGE_SAMPLE_WRITES] = {"WRITES", "Frequency of writes by partition",
				   "Count", true},
	[STORAGE_SAMPLE_READ_ROW_COUNT] = {"READ_ROW_COUNT",
					   "Partitions read with the most "
					   "rows",
					   "Rows", false},
	[STORAGE_SAMPLE_READ_TOMBSTONE_COUNT] = {"READ_TOMBSTONE_COUNT",
						 "Partitions read with the "
						 "most tombstones",
						 "Tombstones", false},
	[STORAGE_SAMPLE_READ_SSTABLE_COUNT] = {"READ_SSTABLE_COUNT",
					       "Partitions read with the most "
					       "sstables",
					       "SSTables", false},
	[STORAGE_SAMPLE_WRITE_SIZE] = {"WRITE_SIZE",
				       "Max mutation size by partition",
				       "Bytes", false},
};

/* A partition key as Cassandra's partitionKeyType.getString writes it:
 * each component's text (strings bare), ':' between a compound key's. */
static int key_text(const struct storage_table_meta *m, const uint8_t *key,
		    size_t len, struct buf *out)
{
	struct arena a;
	arena_create(&a, 0);
	int rc = 0;
	size_t at = 0;
	for (size_t i = 0; !rc && i < m->pk_count; i++) {
		const uint8_t *p = key;
		size_t l = len;
		if (m->pk_count > 1) {
			if (at + 2 > len) {
				rc = err_set(ERR_CORRUPT, "short key");
				break;
			}
			l = (size_t)key[at] << 8 | key[at + 1];
			p = key + at + 2;
			at += 2 + l + 1;
			if (at > len) {
				rc = err_set(ERR_CORRUPT, "short key");
				break;
			}
		}
		if (i)
			rc = buf_append(out, ":", 1);
		const struct cql_json_type *jt =
			cql_json_type_of(&a, m->columns[m->pk[i]].type);
		struct buf j;
		buf_init(&j);
		if (!rc && (!jt || cql_json_format(jt, p, l, &j) != 0))
			rc = -1;
		if (!rc && j.len >= 2 && j.data[0] == '"' &&
		    j.data[j.len - 1] == '"')
			rc = buf_append(out, j.data + 1, j.len - 2);
		else if (!rc)
			rc = buf_append(out, j.data, j.len);
		buf_free(&j);
	}
	arena_destroy(&a);
	return rc;
}

#define COLS 5

/* Cassandra's TableBuilder: each column padded to its widest cell, one
 * space between them; the first column is ResultBuilder's "  ". */
static void print_rows(struct buf *out, char *(*cells)[COLS], size_t rows,
		       int cols)
{
	size_t w[COLS] = {0};
	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			if (strlen(cells[r][c]) > w[c])
				w[c] = strlen(cells[r][c]);
	for (size_t r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++)
			admin_printf(out, c + 1 < cols ? "%-*s " : "%-*s",
				     (int)w[c], cells[r][c]);
		admin_printf(out, "\n");
	}
}

/* One sample of the window, from tables[table]; seq keeps each table's
 * order among equal counts. */
struct row {
	struct storage_sample s;
	size_t table, seq;
};

static int by_count(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->s.count != y->s.count)
		return x->s.count > y->s.count ? -1 : 1;
	if (x->table != y->table)
		return x->table < y->table ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Ends kind's window on every table: each table's top count, merged,
 * the top count of them in *out (as SamplingManager does). A table
 * dropped meanwhile is left out, unless it was the one named. */
static int collect(struct node_toppartitions *t, int kind, struct row **out,
		   size_t *nout)
{
	struct storage *db = cql_service_storage(t->n->cql);
	struct row *rows = NULL;
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; i < t->ntables; i++) {
		struct storage_sample *s = NULL;
		uint64_t got = 0, card;
		bool live = node_table_by_id(t->n, t->tables[i].id) != NULL;
		if (!live && t->named && !rc)
			rc = err_set(ERR_NOT_FOUND, "the table was dropped");
		if (storage_sample_finish(db, t->tables[i].id, kind,
					  rc || !live ? 0 : t->count,
					  rc || !live ? NULL : &s, &got,
					  &card) != 0) {
			if (live && !rc)
				rc = -1;
			continue;
		}
		if (!got) {
			free(s);
			continue;
		}
		struct row *more = realloc(rows, (n + got) * sizeof(*rows));
		if (!more) {
			storage_samples_free(s, got);
			if (!rc)
				rc = err_set(ERR_NOMEM, "samples");
			continue;
		}
		rows = more;
		for (size_t j = 0; j < got; j++) /* the keys move */
			rows[n++] =
				(struct row){.s = s[j], .table = i, .seq = j};
		free(s);
	}
	if (n)
		qsort(rows, n, sizeof(*rows), by_count);
	for (size_t i = t->count; i < n; i++)
		free(rows[i].s.key);
	if (n > t->count)
		n = t->count;
	if (rc) {
		for (size_t i = 0; i < n; i++)
			free(rows[i].s.key);
		free(rows);
		return rc;
	}
	*out = rows;
	*nout = n;
	return 0;
}

/* One sampler's section of the answer. */
static int print_sampler(struct node_toppartitions *t, int kind, bool first,
			 struct buf *out)
{
	struct row *rows = NULL;
	size_t n = 0;
	if (collect(t, kind, &rows, &n))
		return -1;
	if (!first)
		admin_printf(out, "\n");
	admin_printf(out, "%s:\n", samplers[kind].description);
	if (!n) {
		admin_printf(out, "   Nothing recorded during sampling "
				  "period...\n");
		free(rows);
		return 0;
	}
	int cols = samplers[kind].frequency ? 5 : 4;
	char *(*cells)[COLS] = calloc(n + 1, sizeof(*cells));
	int rc = cells ? 0 : err_set(ERR_NOMEM, "samples");
	const char *head[COLS] = {"  ", "Table", "Partition",
				  samplers[kind].column, "+/-"};
	for (int c = 0; cells && c < cols; c++)
		cells[0][c] = (char *)head[c];
	for (size_t i = 0; !rc && i < n; i++) {
		const struct window_table *wt = &t->tables[rows[i].table];
		const struct storage_table_meta *m =
			node_table_by_id(t->n, wt->id);
		struct buf k;
		buf_init(&k);
		if (!m || key_text(m, rows[i].s.key, rows[i].s.key_len, &k) ||
		    buf_put_u8(&k, 0)) {
			buf_free(&k);
			rc = m ? -1 : err_set(ERR_NOT_FOUND, "table dropped");
			break;
		}
		char num[2][24];
		snprintf(num[0], sizeof(num[0]), "%" PRIu64, rows[i].s.count);
		snprintf(num[1], sizeof(num[1]), "%" PRIu64, rows[i].s.error);
		cells[i + 1][0] = strdup("  ");
		cells[i + 1][1] = strdup(wt->name);
		cells[i + 1][2] = (char *)k.data; /* the buffer moves */
		cells[i + 1][3] = strdup(num[0]);
		if (cols > 4)
			cells[i + 1][4] = strdup(num[1]);
		for (int c = 0; c < cols; c++)
			if (!cells[i + 1][c])
				rc = err_set(ERR_NOMEM, "samples");
	}
	if (!rc)
		print_rows(out, cells, n + 1, cols);
	for (size_t i = 1; cells && i <= n; i++)
		for (int c = 0; c < COLS; c++)
			free(cells[i][c]);
	free(cells);
	for (size_t i = 0; i < n; i++)
		free(rows[i].s.key);
	free(rows);
	return rc;
}

static void unlink_pending(struct node_toppartitions *t)
{
	for (struct node_toppartitions **p = &t->n->toppartitions; *p;
	     p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
}

/* Stops kinds' samplers on the window's first `ntables` tables. */
static void stop_samplers(struct node_toppartitions *t, size_t ntables)
{
	struct storage *db = cql_service_storage(t->n->cql);
	for (size_t i = 0; i < ntables; i++)
		for (int k = 0; k < STORAGE_SAMPLERS; k++)
			if (t->kinds & (1u << k)) {
				uint64_t x, c;
				storage_sample_finish(db, t->tables[i].id, k, 0,
						      NULL, &x, &c);
			}
}

static void window_free(struct node_toppartitions *t)
{
	env_timer_free(t->n->env, t->timer);
	free(t->tables);
	free(t);
}

/* The window is over: every sampler asked for, in SamplerType order. */
static void window_done(void *arg)
{
	struct node_toppartitions *t = arg;
	unlink_pending(t);
	struct buf out = {0};
	int rc = 0;
	bool first = true;
	for (int k = 0; k < STORAGE_SAMPLERS; k++) {
		if (!(t->kinds & (1u << k)))
			continue;
		if (rc) { /* still stop it */
			for (size_t i = 0; i < t->ntables; i++) {
				uint64_t n, c;
				storage_sample_finish(
					cql_service_storage(t->n->cql),
					t->tables[i].id, k, 0, NULL, &n, &c);
			}
			continue;
		}
		rc = print_sampler(t, k, first, &out);
		first = false;
	}
	if (rc) {
		char e[700];
		snprintf(e, sizeof(e), "error: %s of %s: %s\n", t->cmd, t->what,
			 err_msg());
		admin_reply_finish(t->r, 2, "", e);
	} else {
		buf_put_u8(&out, 0);
		admin_reply_finish(t->r, 0, (const char *)out.data, "");
	}
	buf_free(&out);
	window_free(t);
}

void node_toppartitions_stop(struct node *n)
{
	while (n->toppartitions) {
		struct node_toppartitions *t = n->toppartitions;
		n->toppartitions = t->next;
		stop_samplers(t, t->ntables);
		admin_reply_finish(t->r, 2, "",
				   "error: the node stopped before the "
				   "sampling period ended\n");
		window_free(t);
	}
}

static bool int_arg(const char *s, long long lo, long long hi, long long *v)
{
	char *end;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return *s && !*end && !errno && *v >= lo && *v <= hi;
}

/* -a's list: *kinds, or false with Cassandra's message in err. */
static bool parse_samplers(const char *v, bool profileload, unsigned *kinds,
			   struct buf *err)
{
	*kinds = 0;
	char list[512];
	snprintf(list, sizeof(list), "%s", v);
	for (char *sv, *s = strtok_r(list, ",", &sv); s;
	     s = strtok_r(NULL, ",", &sv)) {
		char *name = s;
		while (*name == ' ' || *name == '\t')
			name++;
		size_t l = strlen(name);
		while (l && (name[l - 1] == ' ' || name[l - 1] == '\t'))
			name[--l] = 0;
		int k = 0;
		while (k < STORAGE_SAMPLERS &&
		       strcasecmp(name, samplers[k].name) != 0)
			k++;
		if (k < STORAGE_SAMPLERS) {
			*kinds |= 1u << k;
			continue;
		}
		/* Cassandra's LOCAL_READ_TIME and CAS_CONTENTIONS are not
		 * kept here */
		if (profileload)
			admin_printf(err,
				     "error: '%s' sampler is not available "
				     "from: [",
				     s);
		else
			admin_printf(err,
				     "error: %s is not a valid sampler, "
				     "choose one of: ",
				     s);
		for (int j = 0; j < STORAGE_SAMPLERS; j++)
			admin_printf(err, "%s%s", j ? ", " : "",
				     samplers[j].name);
		admin_printf(err, profileload ? "]\n" : "\n");
		return false;
	}
	return true;
}

static int add_table(struct node_toppartitions *t, size_t *cap,
		     const struct cql_table *ct)
{
	if (t->ntables == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct window_table *more =
			realloc(t->tables, c * sizeof(*more));
		if (!more)
			return err_set(ERR_NOMEM, "tables");
		t->tables = more;
		*cap = c;
	}
	const struct storage_table_meta *m = cql_table_meta(ct);
	struct window_table *w = &t->tables[t->ntables++];
	memcpy(w->id, m->id, 16);
	snprintf(w->name, sizeof(w->name), "%s.%s", m->keyspace, m->name);
	return 0;
}

/* Starts a window on ks.table (table NULL: the keyspace's tables; ks
 * NULL: every table), answered in ms. Status as a command's. */
static int start_window(struct node *n, const char *cmd, const char *ks,
			const char *table, unsigned kinds, long long cap,
			long long count, long long ms, struct buf *err)
{
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	const struct cql_schema *schema = cql_service_schema(n->cql);
	if (ks && !cql_schema_keyspace(schema, ks)) {
		admin_printf(err, "error: Keyspace [%s] does not exist.\n", ks);
		return 2;
	}
	const struct cql_table *one =
		ks && table ? cql_schema_table(schema, ks, table) : NULL;
	if (ks && table && !one) {
		admin_printf(err, "error: Unknown table %s in keyspace %s\n",
			     table, ks);
		return 2;
	}
	struct node_toppartitions *t = calloc(1, sizeof(*t));
	if (!t) {
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	t->n = n;
	t->cmd = cmd;
	t->kinds = kinds;
	t->count = (size_t)count;
	t->named = one != NULL;
	snprintf(t->what, sizeof(t->what), "%s.%s", ks ? ks : "*",
		 table ? table : "*");
	size_t tcap = 0;
	int rc = 0;
	if (one) {
		rc = add_table(t, &tcap, one);
	} else {
		for (size_t i = 0; !rc && i < cql_schema_keyspace_count(schema);
		     i++) {
			const struct cql_keyspace *k =
				cql_schema_keyspace_at(schema, i);
			if (ks && strcmp(cql_keyspace_meta(k)->name, ks) != 0)
				continue;
			for (size_t j = 0;
			     !rc && j < cql_keyspace_table_count(k); j++)
				rc = add_table(t, &tcap,
					       cql_keyspace_table_at(k, j));
		}
	}
	t->timer = rc ? NULL : env_timer_new(n->env, window_done, t);
	if (!t->timer) {
		free(t->tables);
		free(t);
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	/* every table's samplers, or none: a table storage does not hold
	 * (the node's own system tables) is left out of the every-table
	 * forms */
	struct storage *db = cql_service_storage(n->cql);
	size_t started = 0;
	for (size_t i = 0; i < t->ntables;) {
		if (storage_sample_begin(db, t->tables[i].id, kinds,
					 (size_t)cap) == 0) {
			t->tables[started++] = t->tables[i++];
			continue;
		}
		if (!t->named && err_code() == ERR_NOT_FOUND) {
			i++;
			continue;
		}
		admin_printf(err, "error: %s of %s: %s\n", cmd,
			     t->tables[i].name, err_msg());
		stop_samplers(t, started);
		window_free(t);
		return 2;
	}
	t->ntables = started;
	t->r = admin_defer(n->admin);
	if (!t->r) {
		stop_samplers(t, t->ntables);
		window_free(t);
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	t->next = n->toppartitions;
	n->toppartitions = t;
	if (t->named)
		LOG_INFO("%s: sampling %s for %lld ms", cmd, t->what, ms);
	else
		LOG_INFO("%s: sampling %s (%zu tables) for %lld ms", cmd,
			 t->what, t->ntables, ms);
	env_timer_arm(n->env, t->timer, (uint64_t)ms * 1000);
	return ADMIN_PENDING;
}

static int cmd_toppartitions(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)out;
	struct node *n = arg;
	static const char synopsis[] =
		"toppartitions [-s capacity] [-k count] [-a samplers] "
		"<keyspace> <table> <duration_ms>";
	long long cap = DEFAULT_CAPACITY, count = DEFAULT_COUNT;
	unsigned kinds =
		1u << STORAGE_SAMPLE_READS | 1u << STORAGE_SAMPLE_WRITES;
	const char *pos[3];
	size_t npos = 0;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !a[1]) {
			if (npos == 3)
				return admin_usage_error(err, synopsis);
			pos[npos++] = a;
			continue;
		}
		if (i + 1 >= argc)
			return admin_usage_error(err, synopsis);
		const char *v = argv[++i];
		if (!strcmp(a, "-s")) {
			if (!int_arg(v, 1, STORAGE_SAMPLE_MAX_CAPACITY, &cap))
				return admin_usage_error(err, synopsis);
		} else if (!strcmp(a, "-k")) {
			if (!int_arg(v, 1, INT32_MAX, &count))
				return admin_usage_error(err, synopsis);
		} else if (!strcmp(a, "-a")) {
			if (!parse_samplers(v, false, &kinds, err))
				return 1;
			if (!kinds)
				return admin_usage_error(err, synopsis);
		} else {
			return admin_usage_error(err, synopsis);
		}
	}
	if (npos != 3) {
		admin_printf(err, "error: toppartitions requires keyspace, "
				  "table name, and duration\n");
		return 1;
	}
	long long ms;
	if (!int_arg(pos[2], 0, INT32_MAX, &ms)) {
		admin_printf(err, "error: For input string: \"%s\"\n", pos[2]);
		return 1;
	}
	if (count >= cap) {
		admin_printf(err, "error: TopK count (-k) option must be "
				  "smaller then the summary capacity (-s)\n");
		return 1;
	}
	return start_window(n, "toppartitions", pos[0], pos[1], kinds, cap,
			    count, ms, err);
}

/* nodetool 4.1's profileload: ProfileLoad's checks in its order. */
static int cmd_profileload(void *arg, size_t argc, const char *const *argv,
			   struct buf *out, struct buf *err)
{
	struct node *n = arg;
	static const char synopsis[] =
		"profileload [-s capacity] [-k count] [-a samplers] [-l] [-t] "
		"[<keyspace> <table|*>] [<duration_ms>]";
	long long cap = DEFAULT_CAPACITY, count = DEFAULT_COUNT;
	long long interval = -1;
	bool stop = false, list = false;
	unsigned kinds = (1u << STORAGE_SAMPLERS) - 1;
	const char *pos[4];
	size_t npos = 0;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !a[1]) {
			if (npos == 4)
				return admin_usage_error(err, synopsis);
			pos[npos++] = a;
			continue;
		}
		if (!strcmp(a, "-t") || !strcmp(a, "--stop")) {
			stop = true;
			continue;
		}
		if (!strcmp(a, "-l") || !strcmp(a, "--list")) {
			list = true;
			continue;
		}
		if (i + 1 >= argc)
			return admin_usage_error(err, synopsis);
		const char *v = argv[++i];
		if (!strcmp(a, "-s")) {
			if (!int_arg(v, INT32_MIN, INT32_MAX, &cap))
				return admin_usage_error(err, synopsis);
		} else if (!strcmp(a, "-k")) {
			if (!int_arg(v, INT32_MIN, INT32_MAX, &count))
				return admin_usage_error(err, synopsis);
		} else if (!strcmp(a, "-i") || !strcmp(a, "--interval")) {
			if (!int_arg(v, INT32_MIN, INT32_MAX, &interval))
				return admin_usage_error(err, synopsis);
		} else if (!strcmp(a, "-a")) {
			if (!parse_samplers(v, true, &kinds, err))
				return 1;
			if (!kinds)
				return admin_usage_error(err, synopsis);
		} else {
			return admin_usage_error(err, synopsis);
		}
	}
	if (npos > 3) {
		admin_printf(err, "error: Invalid arguments, either [keyspace "
				  "table/* duration] or [keyspace table/*] or "
				  "[duration] or no args.\nOptionally, use * "
				  "to represent all tables under the "
				  "keyspace.\n");
		return 1;
	}
	if (count <= 0) {
		admin_printf(err, "error: TopK count (-k) option must have "
				  "positive value\n");
		return 1;
	}
	if (count >= cap) {
		admin_printf(err, "error: TopK count (-k) option must be "
				  "smaller then the summary capacity (-s)\n");
		return 1;
	}
	if (cap > PROFILELOAD_CAPACITY) {
		admin_printf(err, "error: Capacity (-s) cannot exceed 1024.\n");
		return 1;
	}
	const char *ks = npos >= 2 ? pos[0] : NULL;
	const char *table = npos >= 2 ? pos[1] : NULL;
	long long ms = DEFAULT_DURATION_MS;
	const char *d = npos == 3 ? pos[2] : npos == 1 ? pos[0] : NULL;
	if (d && !int_arg(d[0] == '+' ? d + 1 : d, INT32_MIN, INT32_MAX, &ms)) {
		admin_printf(err, "error: For input string: \"%s\"\n", d);
		return 1;
	}
	if (ks && !strcmp(ks, "*"))
		ks = NULL;
	if (table && !strcmp(table, "*"))
		table = NULL;
	if (ms <= 0) {
		admin_printf(err, "error: Duration: %lld must be positive\n",
			     ms);
		return 1;
	}
	if (interval != -1 && interval < ms) {
		admin_printf(err,
			     "error: Invalid scheduled sampling interval. "
			     "Expecting interval >= duration, but "
			     "interval: %lld ms; duration: %lld ms\n",
			     interval, ms);
		return 1;
	}
	if (interval != -1) {
		admin_printf(err, "error: scheduled sampling (-i) is not kept "
				  "by this node: run one window at a time\n");
		return 2;
	}
	if (stop) { /* none is ever scheduled */
		admin_printf(out,
			     "Unable to stop the non-existent scheduled "
			     "sampling for keyspace: %s, table: %s\n",
			     ks ? ks : "null", table ? table : "null");
		return 0;
	}
	if (list) {
		admin_printf(out, "KEYSPACE TABLE\n");
		return 0;
	}
	return start_window(n, "profileload", ks, ks ? table : NULL, kinds, cap,
			    count, ms, err);
}

int node_admin_register_toppartitions(struct node *n)
{
	if (admin_register(n->admin, "toppartitions",
			   "toppartitions [-s capacity] [-k count] "
			   "[-a samplers] <ks> <table> <duration_ms>  "
			   "the partitions this replica read and wrote "
			   "most often meanwhile (sampled)",
			   cmd_toppartitions, n) != 0)
		return -1;
	return admin_register(n->admin, "profileload",
			      "profileload [-s capacity] [-k count] "
			      "[-a samplers] [<ks> <table|*>] [<duration_ms>]  "
			      "toppartitions over every table, a keyspace's "
			      "or one; samplers READS, WRITES, READ_ROW_COUNT, "
			      "READ_TOMBSTONE_COUNT, READ_SSTABLE_COUNT, "
			      "WRITE_SIZE",
			      cmd_profileload, n);
}
