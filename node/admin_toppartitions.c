/*
 * nodetool toppartitions <keyspace> <table> <duration_ms> [-s capacity]
 * [-k count] [-a READS,WRITES]: the table's samplers (storage/sampler.c)
 * count the partitions this replica reads and writes for the duration
 * (a timer on the loop, the answer deferred), then print Cassandra 4.1's
 * layout (SamplingManager's ResultBuilder through TableBuilder): per
 * sampler its description line, then `Table Partition Count +/-` rows,
 * or "Nothing recorded during sampling period...".
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
#define DEFAULT_CAPACITY 256
#define DEFAULT_COUNT    10

struct node_toppartitions {
	struct node_toppartitions *next;
	struct node *n;
	struct admin_reply *r;
	struct env_timer *timer;
	uint8_t id[16];
	char ks[256], table[256];
	unsigned kinds; /* 1 << STORAGE_SAMPLE_* */
	size_t count;
};

static const char *const descriptions[STORAGE_SAMPLERS] = {
	[STORAGE_SAMPLE_READS] = "Frequency of reads by partition",
	[STORAGE_SAMPLE_WRITES] = "Frequency of writes by partition",
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
static void print_rows(struct buf *out, char *(*cells)[COLS], size_t rows)
{
	size_t w[COLS] = {0};
	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < COLS; c++)
			if (strlen(cells[r][c]) > w[c])
				w[c] = strlen(cells[r][c]);
	for (size_t r = 0; r < rows; r++) {
		for (int c = 0; c < COLS; c++)
			admin_printf(out, c + 1 < COLS ? "%-*s " : "%-*s",
				     (int)w[c], cells[r][c]);
		admin_printf(out, "\n");
	}
}

/* One sampler's section of the answer. */
static int print_sampler(struct node_toppartitions *t,
			 const struct storage_table_meta *m, int kind,
			 bool first, struct buf *out)
{
	struct storage *db = cql_service_storage(t->n->cql);
	struct storage_sample *s;
	uint64_t n, card;
	if (storage_sample_finish(db, t->id, kind, t->count, &s, &n, &card))
		return -1;
	if (!first)
		admin_printf(out, "\n");
	admin_printf(out, "%s:\n", descriptions[kind]);
	if (!n) {
		admin_printf(out, "   Nothing recorded during sampling "
				  "period...\n");
		storage_samples_free(s, n);
		return 0;
	}
	char *(*cells)[COLS] = calloc(n + 1, sizeof(*cells));
	char name[520];
	snprintf(name, sizeof(name), "%s.%s", t->ks, t->table);
	int rc = cells ? 0 : err_set(ERR_NOMEM, "toppartitions");
	static const char *const head[COLS] = {"  ", "Table", "Partition",
					       "Count", "+/-"};
	for (int c = 0; cells && c < COLS; c++)
		cells[0][c] = (char *)head[c];
	for (size_t i = 0; !rc && i < n; i++) {
		struct buf k;
		buf_init(&k);
		if (key_text(m, s[i].key, s[i].key_len, &k) ||
		    buf_put_u8(&k, 0)) {
			buf_free(&k);
			rc = -1;
			break;
		}
		char num[2][24];
		snprintf(num[0], sizeof(num[0]), "%" PRIu64, s[i].count);
		snprintf(num[1], sizeof(num[1]), "%" PRIu64, s[i].error);
		cells[i + 1][0] = strdup("  ");
		cells[i + 1][1] = strdup(name);
		cells[i + 1][2] = (char *)k.data; /* the buffer moves */
		cells[i + 1][3] = strdup(num[0]);
		cells[i + 1][4] = strdup(num[1]);
		for (int c = 0; c < COLS; c++)
			if (!cells[i + 1][c])
				rc = err_set(ERR_NOMEM, "toppartitions");
	}
	if (!rc)
		print_rows(out, cells, n + 1);
	for (size_t i = 1; cells && i <= n; i++)
		for (int c = 0; c < COLS; c++)
			free(cells[i][c]);
	free(cells);
	storage_samples_free(s, n);
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

/* The window is over: every sampler asked for, in nodetool's order. */
static void window_done(void *arg)
{
	struct node_toppartitions *t = arg;
	unlink_pending(t);
	struct buf out = {0};
	const struct storage_table_meta *m = node_table_by_id(t->n, t->id);
	int rc = m ? 0 : err_set(ERR_NOT_FOUND, "the table was dropped");
	bool first = true;
	static const int order[] = {STORAGE_SAMPLE_READS,
				    STORAGE_SAMPLE_WRITES};
	for (size_t i = 0; i < 2; i++) {
		int k = order[i];
		if (!(t->kinds & (1u << k)))
			continue;
		if (rc) { /* still stop it */
			uint64_t n, c;
			storage_sample_finish(cql_service_storage(t->n->cql),
					      t->id, k, 0, NULL, &n, &c);
			continue;
		}
		rc = print_sampler(t, m, k, first, &out);
		first = false;
	}
	if (rc) {
		char e[600];
		snprintf(e, sizeof(e), "error: toppartitions of %s.%s: %s\n",
			 t->ks, t->table, err_msg());
		admin_reply_finish(t->r, 2, "", e);
	} else {
		buf_put_u8(&out, 0);
		admin_reply_finish(t->r, 0, (const char *)out.data, "");
	}
	buf_free(&out);
	env_timer_free(t->n->env, t->timer);
	free(t);
}

void node_toppartitions_stop(struct node *n)
{
	while (n->toppartitions) {
		struct node_toppartitions *t = n->toppartitions;
		n->toppartitions = t->next;
		for (int k = 0; k < STORAGE_SAMPLERS; k++)
			if (t->kinds & (1u << k)) {
				uint64_t x, c;
				storage_sample_finish(
					cql_service_storage(n->cql), t->id, k,
					0, NULL, &x, &c);
			}
		admin_reply_finish(t->r, 2, "",
				   "error: the node stopped before the "
				   "sampling period ended\n");
		env_timer_free(n->env, t->timer);
		free(t);
	}
}

static bool int_arg(const char *s, long long lo, long long hi, long long *v)
{
	char *end;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return *s && !*end && !errno && *v >= lo && *v <= hi;
}

static int cmd_toppartitions(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)out;
	struct node *n = arg;
	static const char synopsis[] =
		"toppartitions [-s capacity] [-k count] [-a READS,WRITES] "
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
			kinds = 0;
			char list[256];
			snprintf(list, sizeof(list), "%s", v);
			for (char *sv, *s = strtok_r(list, ",", &sv); s;
			     s = strtok_r(NULL, ",", &sv)) {
				if (!strcasecmp(s, "READS"))
					kinds |= 1u << STORAGE_SAMPLE_READS;
				else if (!strcasecmp(s, "WRITES"))
					kinds |= 1u << STORAGE_SAMPLE_WRITES;
				else {
					/* Cassandra's other samplers
					 * (LOCAL_READ_TIME, WRITE_SIZE, ...)
					 * are not kept here */
					admin_printf(err,
						     "error: %s is not a valid "
						     "sampler, choose one of: "
						     "READS, WRITES\n",
						     s);
					return 1;
				}
			}
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
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	const struct cql_schema *schema = cql_service_schema(n->cql);
	if (!cql_schema_keyspace(schema, pos[0])) {
		admin_printf(err, "error: Keyspace [%s] does not exist.\n",
			     pos[0]);
		return 2;
	}
	const struct cql_table *ct = cql_schema_table(schema, pos[0], pos[1]);
	if (!ct) {
		admin_printf(err, "error: Unknown table %s in keyspace %s\n",
			     pos[1], pos[0]);
		return 2;
	}
	struct node_toppartitions *t = calloc(1, sizeof(*t));
	if (!t) {
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	t->n = n;
	t->kinds = kinds;
	t->count = (size_t)count;
	memcpy(t->id, cql_table_meta(ct)->id, 16);
	snprintf(t->ks, sizeof(t->ks), "%s", pos[0]);
	snprintf(t->table, sizeof(t->table), "%s", pos[1]);
	t->timer = env_timer_new(n->env, window_done, t);
	if (!t->timer) {
		free(t);
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	if (storage_sample_begin(cql_service_storage(n->cql), t->id, kinds,
				 (size_t)cap) != 0) {
		admin_printf(err, "error: toppartitions of %s.%s: %s\n", pos[0],
			     pos[1], err_msg());
		env_timer_free(n->env, t->timer);
		free(t);
		return 2;
	}
	t->r = admin_defer(n->admin);
	if (!t->r) {
		for (int k = 0; k < STORAGE_SAMPLERS; k++)
			if (kinds & (1u << k)) {
				uint64_t x, c;
				storage_sample_finish(
					cql_service_storage(n->cql), t->id, k,
					0, NULL, &x, &c);
			}
		env_timer_free(n->env, t->timer);
		free(t);
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	t->next = n->toppartitions;
	n->toppartitions = t;
	LOG_INFO("toppartitions: sampling %s.%s for %lld ms", t->ks, t->table,
		 ms);
	env_timer_arm(n->env, t->timer, (uint64_t)ms * 1000);
	return ADMIN_PENDING;
}

int node_admin_register_toppartitions(struct node *n)
{
	return admin_register(n->admin, "toppartitions",
			      "toppartitions [-s capacity] [-k count] "
			      "[-a READS,WRITES] <ks> <table> <duration_ms>  "
			      "the partitions this replica read and wrote "
			      "most often meanwhile (sampled)",
			      cmd_toppartitions, n);
}
