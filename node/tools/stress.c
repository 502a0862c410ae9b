/*
 * cassini-stress: a load generator in cassandra-stress's role.
 *
 *   cassini-stress write|read|mixed|counter_write n=N [cl=ONE]
 * [ratio(write=1,read=3)]
 *       [-rate threads=T]
 *       [-mode connectionsPerHost=C timeout=MS compression=lz4|none
 *              user=U password=P]
 *       [-node host[:port],...] [-port P]
 *       [-schema "replication(factor=N)" |
 *                "replication(strategy=NetworkTopologyStrategy, dc1=3)"]
 *       [-col size=BYTES [indexed=yes|no]]
 *       [duration=S|Sm] [ratio(write=W,read=R,delete=D)] [ttl=S]
 *       [ttl_share=PCT] [-log interval=S]
 *
 * It creates keyspace cassini_stress and table standard1 (key blob PRIMARY
 * KEY, c0 blob) if they do not exist (with -col indexed=: table indexed2
 * or plain2, which add c1 int and c2 text, the first with a storage-
 * attached index on each), waits for schema agreement, then runs
 * exactly n operations with T requests in flight (closed loop: each
 * completion issues the next), over min(T, 128) connections per host unless
 * told otherwise. Keys are the decimal key index, zero-padded to 10 bytes:
 * write i writes key i, so `read` after `write` with the same n reads back
 * every key, and checks each value (a value is a function of its key).
 * Mixed reads pick keys uniformly in [0, n). `counter_write` (as
 * cassandra-stress's) increments counter c0 of key i by 1 in table counter1
 * (key blob PRIMARY KEY, c0 counter).
 *
 * A sustained run (`duration=`, with `n` the key space): operations go on
 * until the time is up; writes take keys 0, 1, ... wrapping at n (then
 * overwriting), reads and `delete`s (DELETE of the partition) pick keys
 * uniformly among those written so far (among all n without writes).
 * `ttl_share` percent of the writes carry USING TTL `ttl`. With deletes or TTLs
 * each progress line also gives the live keys (written, not deleted since, not
 * expired): the tool keeps each key's expiry (4 bytes a key).
 *
 * One event loop, one thread: the client costs little CPU, and a single
 * thread keeps it off the server's core as much as the machine allows.
 * Exit status: 0 when every operation succeeded (and, for `read`, found its
 * row with the right value), 1 otherwise, 2 for bad arguments or setup.
 */
#include "client/driver/cql_client.h"
#include "common/err.h"
#include "node/tools/stress_hist.h"

#include <event2/event.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define NODES_MAX       64
#define ERROR_KINDS_MAX 32
#define KEY_LEN         10
#define COL_SIZE_MAX    (1u << 20)

enum stress_op { STRESS_WRITE, STRESS_READ, STRESS_MIXED, STRESS_COUNTER };

struct stress_opts {
	enum stress_op op;
	uint64_t n;
	uint16_t cl;
	int threads;
	int connections; /* per host; 0: min(threads, 128) */
	uint64_t timeout_ms;
	bool lz4;
	char *user, *password; /* -mode user= password= (owned) */
	bool tls;              /* -transport ... */
	char *truststore, *keystore, *keystore_password;
	bool check_hostname;
	const char *nodes[NODES_MAX];
	size_t nnodes;
	uint16_t port;
	char replication[512]; /* CQL map literal */
	size_t col_size;
	/* -col indexed=: 0 standard1; 1 plain2, 2 indexed2 (c1 int and c2
	 * text too; indexed2 has an SAI index on each) */
	int shape;
	unsigned ratio_write, ratio_read, ratio_delete;
	uint64_t duration_s;       /* 0: n operations */
	uint32_t ttl_s, ttl_share; /* percent of writes with USING TTL */
	uint64_t interval_s;       /* progress lines; 1 */
};

static const char *const stress_tables[] = {"standard1", "plain2", "indexed2"};

struct stress_error_kind {
	const char *name; /* static string */
	uint64_t count;
};

struct stress_run;

/* One of the T requests in flight. */
struct stress_slot {
	struct stress_run *run;
	uint64_t start_ns;
	uint64_t key;
	bool read;
	bool del;
};

struct stress_run {
	const struct stress_opts *o;
	struct event_base *base;
	struct cql_client *client;
	struct ssl_ctx_st *tls; /* -transport, or NULL */
	struct cql_client_prepared *insert, *select, *counter, *del,
		*insert_ttl;
	uint32_t *expiry; /* per key: 0 absent, UINT32_MAX live, else the
			   * second of the run it expires at */
	uint64_t end_ns;  /* duration: when to stop issuing */
	bool stopping;
	struct stress_slot *slots;
	uint8_t *value; /* scratch of col_size bytes */
	uint64_t issued, completed, write_seq;
	uint64_t errors, not_found, bad_values, interval_errors;
	uint64_t rng;
	struct stress_error_kind kinds[ERROR_KINDS_MAX];
	size_t nkinds;
	struct stress_hist total, interval;
	uint64_t start_ns, last_ns, last_completed;
	struct event *progress;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cassini-stress write|read|mixed|counter_write n=N "
		   "[cl=ONE] "
		   "[ratio(write=1,read=1)]\n"
		   "         [-rate threads=T] [-mode connectionsPerHost=C "
		   "timeout=MS compression=lz4|none\n"
		   "               user=U password=P]\n"
		   "         [-transport truststore=PEM [keystore=PEM "
		   "keystore-password=P]\n"
		   "                     [check-hostname=true]]\n"
		   "         [-node host[:port],...] [-port P]\n"
		   "         [-schema \"replication(factor=N)\" | "
		   "\"replication(strategy=NetworkTopologyStrategy, dc1=3)\"]\n"
		   "         [-col size=BYTES [indexed=yes|no]]\n"
		   "         [duration=S|Sm ratio(write=W,read=R,delete=D) "
		   "ttl=S ttl_share=PCT] [-log interval=S]\n");
}

/* ---- arguments ----------------------------------------------------------- */

static int parse_u64(const char *text, uint64_t min, uint64_t max,
		     uint64_t *out)
{
	char *end;
	if (!isdigit((unsigned char)*text))
		return -1;
	unsigned long long v = strtoull(text, &end, 10);
	if (*end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static bool safe_word(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' &&
		    s[i] != '-' && s[i] != '.')
			return false;
	return true;
}

/* "replication(factor=3)" or "replication(strategy=X, dc1=3, ...)" into a
 * CQL replication map. */
static int parse_schema(const char *text, struct stress_opts *o)
{
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	if (strncmp(text, "replication", 11) != 0 || !open || !close ||
	    close < open) {
		fprintf(stderr,
			"-schema: expected replication(...), got '%s'\n", text);
		return -1;
	}
	char strategy[128] = "SimpleStrategy";
	char factor[32] = "1";
	char dcs[384] = "";
	const char *p = open + 1;
	while (p < close) {
		while (p < close && (*p == ' ' || *p == ','))
			p++;
		if (p >= close)
			break;
		const char *eq = memchr(p, '=', (size_t)(close - p));
		const char *end =
			eq ? memchr(eq, ',', (size_t)(close - eq)) : NULL;
		if (!end)
			end = close;
		if (!eq) {
			fprintf(stderr, "-schema: expected key=value\n");
			return -1;
		}
		size_t kl = (size_t)(eq - p), vl = (size_t)(end - eq - 1);
		while (kl && p[kl - 1] == ' ')
			kl--;
		const char *v = eq + 1;
		while (vl && *v == ' ')
			v++, vl--;
		while (vl && v[vl - 1] == ' ')
			vl--;
		if (!safe_word(p, kl) || !safe_word(v, vl) || vl > 100) {
			fprintf(stderr, "-schema: bad option '%.*s'\n",
				(int)(end - p), p);
			return -1;
		}
		if (kl == 8 && strncmp(p, "strategy", 8) == 0) {
			snprintf(strategy, sizeof(strategy), "%.*s", (int)vl,
				 v);
		} else if (kl == 6 && strncmp(p, "factor", 6) == 0) {
			snprintf(factor, sizeof(factor), "%.*s", (int)vl, v);
		} else {
			size_t used = strlen(dcs);
			snprintf(dcs + used, sizeof(dcs) - used,
				 ", '%.*s': '%.*s'", (int)kl, p, (int)vl, v);
		}
		p = end;
	}
	if (strstr(strategy, "NetworkTopologyStrategy")) {
		if (!dcs[0]) {
			fprintf(stderr, "-schema: NetworkTopologyStrategy "
					"needs dc=factor options\n");
			return -1;
		}
		snprintf(o->replication, sizeof(o->replication),
			 "{'class': 'NetworkTopologyStrategy'%s}", dcs);
	} else {
		snprintf(o->replication, sizeof(o->replication),
			 "{'class': '%s', 'replication_factor': '%s'}",
			 strategy, factor);
	}
	return 0;
}

/* ratio(write=W,read=R[,delete=D]), in any order. */
static int parse_ratio(const char *text, struct stress_opts *o)
{
	unsigned w = 0, r = 0, d = 0;
	const char *p = text + 6;
	while (*p && *p != ')') {
		char name[16];
		unsigned v;
		int used = 0;
		if (sscanf(p, " %15[a-z] = %u%n", name, &v, &used) != 2 ||
		    v > 1000)
			return -1;
		if (strcmp(name, "write") == 0)
			w = v;
		else if (strcmp(name, "read") == 0)
			r = v;
		else if (strcmp(name, "delete") == 0)
			d = v;
		else
			return -1;
		p += used;
		while (*p == ' ' || *p == ',')
			p++;
	}
	if (*p != ')' || p[1] || w + r + d == 0)
		return -1;
	o->ratio_write = w;
	o->ratio_read = r;
	o->ratio_delete = d;
	return 0;
}

/* "90", "90s" or "3m". */
static int parse_seconds(const char *text, uint64_t *out)
{
	char *end;
	if (!isdigit((unsigned char)*text))
		return -1;
	unsigned long long v = strtoull(text, &end, 10);
	if (strcmp(end, "m") == 0)
		v *= 60;
	else if (*end && strcmp(end, "s") != 0)
		return -1;
	if (v == 0 || v > 7 * 86400)
		return -1;
	*out = v;
	return 0;
}

static int parse_option(const char *group, const char *arg,
			struct stress_opts *o)
{
	const char *eq = strchr(arg, '=');
	const char *val = eq ? eq + 1 : "";
	size_t kl = eq ? (size_t)(eq - arg) : strlen(arg);
	uint64_t v;
#define KEY(k) (kl == strlen(k) && strncasecmp(arg, k, kl) == 0)
	if (strcmp(group, "") == 0) {
		if (KEY("n") && parse_u64(val, 1, UINT64_MAX / 2, &o->n) == 0)
			return 0;
		if (KEY("cl") && cql_client_consistency_parse(val, &o->cl) == 0)
			return 0;
		if (strncmp(arg, "ratio(", 6) == 0 && parse_ratio(arg, o) == 0)
			return 0;
		if (KEY("duration") && parse_seconds(val, &o->duration_s) == 0)
			return 0;
		if (KEY("ttl") && parse_u64(val, 1, 630720000, &v) == 0) {
			o->ttl_s = (uint32_t)v;
			return 0;
		}
		if (KEY("ttl_share") && parse_u64(val, 0, 100, &v) == 0) {
			o->ttl_share = (uint32_t)v;
			return 0;
		}
	} else if (strcmp(group, "log") == 0) {
		if (KEY("interval") && parse_seconds(val, &o->interval_s) == 0)
			return 0;
	} else if (strcmp(group, "rate") == 0) {
		if (KEY("threads") && parse_u64(val, 1, 4096, &v) == 0) {
			o->threads = (int)v;
			return 0;
		}
	} else if (strcmp(group, "mode") == 0) {
		if (KEY("connectionsPerHost") &&
		    parse_u64(val, 1, 1024, &v) == 0) {
			o->connections = (int)v;
			return 0;
		}
		if (KEY("timeout") &&
		    parse_u64(val, 1, 3600 * 1000, &o->timeout_ms) == 0)
			return 0;
		if (KEY("user")) {
			free(o->user);
			o->user = strdup(val);
			return o->user ? 0 : -1;
		}
		if (KEY("password")) {
			free(o->password);
			o->password = strdup(val);
			return o->password ? 0 : -1;
		}
		if (KEY("compression") && (strcasecmp(val, "lz4") == 0 ||
					   strcasecmp(val, "none") == 0)) {
			o->lz4 = strcasecmp(val, "lz4") == 0;
			return 0;
		}
	} else if (strcmp(group, "node") == 0) {
		char *copy = strdup(arg), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			if (o->nnodes == NODES_MAX) {
				free(copy);
				return -1;
			}
			o->nodes[o->nnodes++] = strdup(t);
		}
		free(copy);
		return 0;
	} else if (strcmp(group, "port") == 0) {
		if (KEY("native"))
			arg = val;
		if (parse_u64(arg, 1, 65535, &v) == 0) {
			o->port = (uint16_t)v;
			return 0;
		}
	} else if (strcmp(group, "schema") == 0) {
		return parse_schema(arg, o);
	} else if (strcmp(group, "transport") == 0) {
		/* cassandra-stress's -transport truststore=F keystore=F
		 * keystore-password=P: TLS to the nodes */
		char **dst = KEY("truststore")          ? &o->truststore
			     : KEY("keystore")          ? &o->keystore
			     : KEY("keystore-password") ? &o->keystore_password
							: NULL;
		if (dst) {
			free(*dst);
			*dst = strdup(val);
			o->tls = true;
			return *dst ? 0 : -1;
		}
		/* the drivers' check_hostname: the node's certificate names
		 * the address connected to */
		if (KEY("check-hostname") &&
		    (strcmp(val, "true") == 0 || strcmp(val, "false") == 0)) {
			o->check_hostname = strcmp(val, "true") == 0;
			o->tls = o->tls || o->check_hostname;
			return 0;
		}
	} else if (strcmp(group, "col") == 0) {
		if (KEY("indexed") &&
		    (strcmp(val, "yes") == 0 || strcmp(val, "no") == 0)) {
			o->shape = strcmp(val, "yes") == 0 ? 2 : 1;
			return 0;
		}
		if (KEY("size")) {
			if (strncasecmp(val, "FIXED(", 6) == 0) {
				char num[32];
				snprintf(num, sizeof(num), "%s", val + 6);
				char *rp = strchr(num, ')');
				if (rp && rp[1] == 0)
					*rp = 0;
				val = num;
				if (parse_u64(num, 0, COL_SIZE_MAX, &v) == 0) {
					o->col_size = (size_t)v;
					return 0;
				}
			} else if (parse_u64(val, 0, COL_SIZE_MAX, &v) == 0) {
				o->col_size = (size_t)v;
				return 0;
			}
		}
	}
#undef KEY
	fprintf(stderr, "cassini-stress: bad %s%s option '%s'\n",
		group[0] ? "-" : "", group, arg);
	return -1;
}

static int parse_args(int argc, char **argv, struct stress_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cl = CQL_CL_ONE;
	o->threads = 50;
	o->port = 9042;
	o->col_size = 34; /* cassandra-stress's default column size */
	o->ratio_write = o->ratio_read = 1;
	o->interval_s = 1;
	o->timeout_ms = 12000;
	snprintf(o->replication, sizeof(o->replication),
		 "{'class': 'SimpleStrategy', 'replication_factor': '1'}");
	if (argc < 2)
		return -1;
	if (strcmp(argv[1], "write") == 0)
		o->op = STRESS_WRITE;
	else if (strcmp(argv[1], "read") == 0)
		o->op = STRESS_READ;
	else if (strcmp(argv[1], "mixed") == 0)
		o->op = STRESS_MIXED;
	else if (strcmp(argv[1], "counter_write") == 0)
		o->op = STRESS_COUNTER;
	else
		return -1;
	const char *group = "";
	char schema[1024] = "";
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] == '-' && a[1] && !isdigit((unsigned char)a[1])) {
			group = a + 1;
			if (strcmp(group, "rate") && strcmp(group, "mode") &&
			    strcmp(group, "node") && strcmp(group, "port") &&
			    strcmp(group, "schema") && strcmp(group, "col") &&
			    strcmp(group, "transport") &&
			    strcmp(group, "log")) {
				fprintf(stderr,
					"cassini-stress: unknown option %s\n",
					a);
				return -1;
			}
			continue;
		}
		/* n=, cl=, ratio(...), duration= and the TTL options may
		 * come after the options too. */
		if (strncmp(a, "n=", 2) == 0 || strncasecmp(a, "cl=", 3) == 0 ||
		    strncmp(a, "ratio(", 6) == 0 ||
		    strncmp(a, "duration=", 9) == 0 ||
		    strncmp(a, "ttl=", 4) == 0 ||
		    strncmp(a, "ttl_share=", 10) == 0) {
			if (parse_option("", a, o) != 0)
				return -1;
			continue;
		}
		if (strcmp(group, "schema") == 0) {
			/* May arrive unquoted, split at spaces. */
			size_t used = strlen(schema);
			snprintf(schema + used, sizeof(schema) - used, "%s%s",
				 used ? " " : "", a);
			continue;
		}
		if (parse_option(group, a, o) != 0)
			return -1;
	}
	if (schema[0] && parse_option("schema", schema, o) != 0)
		return -1;
	if (o->n == 0) {
		fprintf(stderr, "cassini-stress: n=N is required\n");
		return -1;
	}
	if (o->nnodes == 0)
		o->nodes[o->nnodes++] = strdup("127.0.0.1");
	if (o->ttl_share && !o->ttl_s) {
		fprintf(stderr, "cassini-stress: ttl_share needs ttl=S\n");
		return -1;
	}
	if ((o->ratio_delete || o->ttl_share) && o->op != STRESS_MIXED) {
		fprintf(stderr, "cassini-stress: deletes and TTLs are for "
				"mixed\n");
		return -1;
	}
	if ((uint64_t)o->threads > o->n && !o->duration_s)
		o->threads = (int)o->n;
	if (o->connections == 0)
		o->connections = o->threads < 128 ? o->threads : 128;
	return 0;
}

/* ---- keys, values, errors ------------------------------------------------ */

static void make_key(uint64_t i, char out[KEY_LEN + 1])
{
	snprintf(out, KEY_LEN + 1, "%010" PRIu64, (uint64_t)(i % 10000000000u));
}

static void make_value(uint64_t key, uint8_t *v, size_t n)
{
	uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x >> 29;
		x *= 0xBF58476D1CE4E5B9ull;
		v[i] = (uint8_t)(x >> 56);
	}
}

static uint64_t next_rand(struct stress_run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

static void count_error(struct stress_run *r, const char *name)
{
	r->errors++;
	r->interval_errors++;
	for (size_t i = 0; i < r->nkinds; i++)
		if (strcmp(r->kinds[i].name, name) == 0) {
			r->kinds[i].count++;
			return;
		}
	if (r->nkinds < ERROR_KINDS_MAX)
		r->kinds[r->nkinds++] = (struct stress_error_kind){name, 1};
}

/* ---- the load ------------------------------------------------------------ */

static void issue(struct stress_slot *s);

static void check_read(struct stress_run *r, struct stress_slot *s,
		       const struct cql_client_response *resp)
{
	const struct cql_client_rows *rows = &resp->rows;
	if (resp->kind != CQL_RESULT_ROWS) {
		count_error(r, "BadResult");
		return;
	}
	if (rows->row_count == 0) {
		r->not_found++;
		if (r->o->op == STRESS_READ)
			count_error(r, "NotFound");
		return;
	}
	if (rows->column_count < 2) {
		count_error(r, "BadResult");
		return;
	}
	const struct cql_value *v = cql_client_rows_cell(rows, 0, 1);
	if (v->len != (int32_t)r->o->col_size) {
		r->bad_values++;
		count_error(r, "BadValue");
		return;
	}
	make_value(s->key, r->value, r->o->col_size);
	if (memcmp(v->ptr, r->value, r->o->col_size) != 0) {
		r->bad_values++;
		count_error(r, "BadValue");
	}
}

static void on_done(void *arg, enum cql_client_status status,
		    const struct cql_client_response *resp, const char *message)
{
	struct stress_slot *s = arg;
	struct stress_run *r = s->run;
	uint64_t lat = now_ns() - s->start_ns;
	(void)message;
	stress_hist_record(&r->interval, lat);
	r->completed++;
	if (status != CQL_CLIENT_OK)
		count_error(r, cql_client_status_name(status));
	else if (resp->opcode == CQL_OP_ERROR)
		count_error(r, cql_client_error_name(resp->error_code));
	else if (resp->opcode != CQL_OP_RESULT)
		count_error(r, "BadResult");
	else if (s->read)
		check_read(r, s, resp);
	if (r->errors == 1 && status == CQL_CLIENT_OK &&
	    resp->opcode == CQL_OP_ERROR)
		fprintf(stderr, "first error: %s: %.*s\n",
			cql_client_error_name(resp->error_code),
			(int)resp->error_message.len,
			(const char *)resp->error_message.ptr);
	else if (r->errors == 1 && status != CQL_CLIENT_OK)
		fprintf(stderr, "first error: %s: %s\n",
			cql_client_status_name(status), message);
	if (r->o->duration_s) {
		if (!r->stopping && now_ns() >= r->end_ns)
			r->stopping = true;
		if (!r->stopping)
			issue(s);
		else if (r->completed == r->issued)
			event_base_loopbreak(r->base);
		return;
	}
	if (r->issued < r->o->n)
		issue(s);
	else if (r->completed == r->o->n)
		event_base_loopbreak(r->base);
}

/* Seconds since the run started (the TTL bookkeeping's clock). */
static uint32_t run_second(const struct stress_run *r, uint64_t ns)
{
	return (uint32_t)((ns - r->start_ns) / 1000000000u);
}

static void issue(struct stress_slot *s)
{
	struct stress_run *r = s->run;
	const struct stress_opts *o = r->o;
	uint64_t i = r->issued++;
	char key[KEY_LEN + 1];
	s->del = false;
	switch (o->op) {
	case STRESS_WRITE:
	case STRESS_COUNTER:
		s->read = false;
		break;
	case STRESS_READ:
		s->read = true;
		break;
	case STRESS_MIXED: {
		unsigned k = (unsigned)(i % (o->ratio_write + o->ratio_read +
					     o->ratio_delete));
		s->read = k >= o->ratio_write &&
			  k < o->ratio_write + o->ratio_read;
		s->del = k >= o->ratio_write + o->ratio_read;
		break;
	}
	}
	/* a sustained run reads and deletes among the keys written */
	uint64_t span = o->duration_s && o->ratio_write
				? (r->write_seq < o->n ? r->write_seq : o->n)
				: o->n;
	if (span == 0)
		span = 1;
	if (s->read)
		s->key = o->op == STRESS_READ ? i % o->n : next_rand(r) % span;
	else if (s->del)
		s->key = next_rand(r) % span;
	else
		s->key = o->duration_s ? r->write_seq++ % o->n : r->write_seq++;
	make_key(s->key, key);
	struct cql_value v[2] = {{KEY_LEN, (const uint8_t *)key}, {0, NULL}};
	s->start_ns = now_ns();
	if (o->op == STRESS_COUNTER) {
		static const uint8_t one[8] = {0, 0, 0, 0, 0, 0, 0, 1};
		struct cql_value cv[2] = {{8, one}, v[0]};
		cql_client_execute(r->client, r->counter, cv, 2, o->cl, on_done,
				   s);
	} else if (s->read) {
		cql_client_execute(r->client, r->select, v, 1, o->cl, on_done,
				   s);
	} else if (s->del) {
		if (r->expiry)
			r->expiry[s->key] = 0;
		cql_client_execute(r->client, r->del, v, 1, o->cl, on_done, s);
	} else {
		make_value(s->key, r->value, o->col_size);
		v[1] = (struct cql_value){(int32_t)o->col_size, r->value};
		/* plain2 / indexed2: c1 = key % 1000, c2 = "g<key % 100>" */
		uint32_t c1 = (uint32_t)(s->key % 1000);
		uint8_t be[4] = {(uint8_t)(c1 >> 24), (uint8_t)(c1 >> 16),
				 (uint8_t)(c1 >> 8), (uint8_t)c1};
		char c2[8];
		int c2len = snprintf(c2, sizeof(c2), "g%02u",
				     (unsigned)(s->key % 100));
		struct cql_value v4[4] = {
			v[0], v[1], {4, be}, {c2len, (const uint8_t *)c2}};
		bool ttl = o->ttl_share && next_rand(r) % 100 < o->ttl_share;
		if (r->expiry)
			r->expiry[s->key] =
				ttl ? run_second(r, s->start_ns) + o->ttl_s
				    : UINT32_MAX;
		cql_client_execute(r->client, ttl ? r->insert_ttl : r->insert,
				   o->shape ? v4 : v, o->shape ? 4 : 2, o->cl,
				   on_done, s);
	}
}

/* Keys written, not deleted since and not expired, now. */
static uint64_t live_keys(const struct stress_run *r, uint64_t now)
{
	uint32_t sec = run_second(r, now);
	uint64_t n = 0, end = r->write_seq < r->o->n ? r->write_seq : r->o->n;
	for (uint64_t k = 0; k < end; k++)
		n += r->expiry[k] > sec;
	return n;
}

static void print_progress(struct stress_run *r)
{
	uint64_t now = now_ns();
	double dt = (double)(now - r->last_ns) / 1e9;
	uint64_t ops = r->completed - r->last_completed;
	printf("%7.1fs %12" PRIu64 " %10.0f %10.3f %10.3f %8" PRIu64,
	       (double)(now - r->start_ns) / 1e9, r->completed,
	       dt > 0 ? (double)ops / dt : 0.0,
	       (double)stress_hist_quantile(&r->interval, 0.5) / 1e6,
	       (double)stress_hist_quantile(&r->interval, 0.99) / 1e6,
	       r->interval_errors);
	if (r->expiry)
		printf(" %12" PRIu64, live_keys(r, now));
	printf("\n");
	fflush(stdout);
	stress_hist_merge(&r->total, &r->interval);
	stress_hist_reset(&r->interval);
	r->last_ns = now;
	r->last_completed = r->completed;
	r->interval_errors = 0;
}

static void on_progress(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	print_progress(arg);
}

static void print_summary(struct stress_run *r, uint64_t end_ns)
{
	double secs = (double)(end_ns - r->start_ns) / 1e9;
	const struct stress_hist *h = &r->total;
	printf("\nResults:\n");
	printf("Op rate                   : %.0f op/s\n",
	       secs > 0 ? (double)r->completed / secs : 0.0);
	printf("Total operations          : %" PRIu64 "\n", r->completed);
	printf("Latency mean              : %.3f ms\n",
	       stress_hist_mean(h) / 1e6);
	printf("Latency median            : %.3f ms\n",
	       (double)stress_hist_quantile(h, 0.5) / 1e6);
	printf("Latency 95th percentile   : %.3f ms\n",
	       (double)stress_hist_quantile(h, 0.95) / 1e6);
	printf("Latency 99th percentile   : %.3f ms\n",
	       (double)stress_hist_quantile(h, 0.99) / 1e6);
	printf("Latency 99.9th percentile : %.3f ms\n",
	       (double)stress_hist_quantile(h, 0.999) / 1e6);
	printf("Latency max               : %.3f ms\n", (double)h->max / 1e6);
	if (r->o->op != STRESS_WRITE && r->o->op != STRESS_COUNTER)
		printf("Rows not found            : %" PRIu64 "\n",
		       r->not_found);
	printf("Total errors              : %" PRIu64 "\n", r->errors);
	for (size_t i = 0; i < r->nkinds; i++)
		printf("  %-24s: %" PRIu64 "\n", r->kinds[i].name,
		       r->kinds[i].count);
	printf("Total operation time      : %.3f s\n", secs);
}

/* ---- setup --------------------------------------------------------------- */

/* Drivers wait for agreement after each schema change: the next statement
 * may reach a node that has not heard of the last one yet. */
static int agree(struct stress_run *r)
{
	if (cql_client_host_count(r->client) > 1 &&
	    cql_client_wait_schema_agreement(r->client, 30000) != 0) {
		fprintf(stderr, "cassini-stress: %s\n", err_msg());
		return -1;
	}
	return 0;
}

static int setup_schema(struct stress_run *r)
{
	char ddl[1024];
	snprintf(ddl, sizeof(ddl),
		 "CREATE KEYSPACE IF NOT EXISTS cassini_stress WITH "
		 "replication = %s",
		 r->o->replication);
	if (cql_client_query_sync(r->client, ddl, CQL_CL_ONE, NULL) != 0) {
		fprintf(stderr, "cassini-stress: schema: %s\n", err_msg());
		return -1;
	}
	if (agree(r) != 0)
		return -1;
	const char *t = stress_tables[r->o->shape];
	snprintf(ddl, sizeof(ddl),
		 "CREATE TABLE IF NOT EXISTS cassini_stress.%s (key blob "
		 "PRIMARY KEY, c0 blob%s)",
		 t, r->o->shape ? ", c1 int, c2 text" : "");
	if (cql_client_query_sync(r->client, ddl, CQL_CL_ONE, NULL) != 0) {
		fprintf(stderr, "cassini-stress: schema: %s\n", err_msg());
		return -1;
	}
	if (agree(r) != 0)
		return -1;
	for (int c = 1; r->o->shape == 2 && c <= 2; c++) {
		snprintf(
			ddl, sizeof(ddl),
			"CREATE INDEX IF NOT EXISTS ON cassini_stress.%s (c%d)",
			t, c);
		if (cql_client_query_sync(r->client, ddl, CQL_CL_ONE, NULL) !=
			    0 ||
		    agree(r) != 0) {
			fprintf(stderr, "cassini-stress: schema: %s\n",
				err_msg());
			return -1;
		}
	}
	snprintf(ddl, sizeof(ddl),
		 "INSERT INTO cassini_stress.%s (key, c0%s) VALUES (?, ?%s)", t,
		 r->o->shape ? ", c1, c2" : "", r->o->shape ? ", ?, ?" : "");
	r->insert = cql_client_prepare_sync(r->client, ddl);
	snprintf(ddl, sizeof(ddl),
		 "SELECT key, c0 FROM cassini_stress.%s WHERE key = ?", t);
	if (r->insert)
		r->select = cql_client_prepare_sync(r->client, ddl);
	if (r->insert && r->o->ratio_delete) {
		snprintf(ddl, sizeof(ddl),
			 "DELETE FROM cassini_stress.%s WHERE key = ?", t);
		r->del = cql_client_prepare_sync(r->client, ddl);
	}
	if (r->insert && r->o->ttl_share) {
		snprintf(ddl, sizeof(ddl),
			 "INSERT INTO cassini_stress.%s (key, c0%s) "
			 "VALUES (?, ?%s) USING TTL %" PRIu32,
			 t, r->o->shape ? ", c1, c2" : "",
			 r->o->shape ? ", ?, ?" : "", r->o->ttl_s);
		r->insert_ttl = cql_client_prepare_sync(r->client, ddl);
	}
	if (!r->insert || !r->select || (r->o->ratio_delete && !r->del) ||
	    (r->o->ttl_share && !r->insert_ttl)) {
		fprintf(stderr, "cassini-stress: prepare: %s\n", err_msg());
		return -1;
	}
	if (r->o->op != STRESS_COUNTER)
		return 0;
	if (cql_client_query_sync(r->client,
				  "CREATE TABLE IF NOT EXISTS "
				  "cassini_stress.counter1 (key blob PRIMARY "
				  "KEY, c0 counter)",
				  CQL_CL_ONE, NULL) != 0 ||
	    agree(r) != 0) {
		fprintf(stderr, "cassini-stress: schema: %s\n", err_msg());
		return -1;
	}
	r->counter = cql_client_prepare_sync(
		r->client, "UPDATE cassini_stress.counter1 SET c0 = c0 + ? "
			   "WHERE key = ?");
	if (!r->counter) {
		fprintf(stderr, "cassini-stress: prepare: %s\n", err_msg());
		return -1;
	}
	return 0;
}

static struct cql_client *connect_client(const struct stress_opts *o,
					 struct event_base *base,
					 struct ssl_ctx_st *tls)
{
	struct inet_addr addrs[NODES_MAX];
	char names[NODES_MAX][256]; /* copied by cql_client_new */
	const char *name_of[NODES_MAX];
	for (size_t i = 0; i < o->nnodes; i++) {
		name_of[i] = names[i];
		if (cql_client_resolve(o->nodes[i], o->port, &addrs[i],
				       names[i], sizeof(names[i])) != 0) {
			fprintf(stderr, "cassini-stress: -node %s: %s\n",
				o->nodes[i], err_msg());
			return NULL;
		}
	}
	struct cql_client_config cfg;
	cql_client_config_defaults(&cfg);
	cfg.contact_points = addrs;
	cfg.contact_count = o->nnodes;
	cfg.connections_per_host = o->connections;
	cfg.request_timeout_ms = o->timeout_ms;
	cfg.lz4 = o->lz4;
	cfg.username = o->user;
	cfg.password = o->password;
	cfg.tls = tls;
	cfg.tls_check_hostname = o->check_hostname;
	cfg.contact_names = name_of;
	struct cql_client *c = cql_client_new(base, &cfg);
	if (!c || cql_client_connect_sync(c) != 0) {
		fprintf(stderr, "cassini-stress: connect: %s\n", err_msg());
		cql_client_delete(c);
		return NULL;
	}
	return c;
}

static const char *op_name(enum stress_op op)
{
	return op == STRESS_WRITE     ? "write"
	       : op == STRESS_READ    ? "read"
	       : op == STRESS_COUNTER ? "counter_write"
				      : "mixed";
}

static int run(const struct stress_opts *o)
{
	struct stress_run *r = calloc(1, sizeof(*r));
	struct event_base *base = event_base_new();
	int rc = 2;
	if (!r || !base)
		goto out;
	r->o = o;
	r->base = base;
	r->rng = 0x2545F4914F6CDD1Dull;
	r->value = malloc(o->col_size + 1);
	r->slots = calloc((size_t)o->threads, sizeof(*r->slots));
	if (!r->value || !r->slots)
		goto out;
	if (o->tls && !(r->tls = cql_client_tls_new(o->truststore, o->keystore,
						    o->keystore_password))) {
		fprintf(stderr, "cassini-stress: -transport: %s\n", err_msg());
		goto out;
	}
	r->client = connect_client(o, base, r->tls);
	if (!r->client || setup_schema(r) != 0)
		goto out;
	if ((o->ratio_delete || o->ttl_share) && o->n <= (1ull << 30) &&
	    !(r->expiry = calloc(o->n, sizeof(*r->expiry))))
		goto out;
	printf("cassini-stress %s n=%" PRIu64 " cl=%s threads=%d "
	       "connections/host=%d hosts=%zu col size=%zu\n",
	       op_name(o->op), o->n, cql_consistency_name(o->cl), o->threads,
	       o->connections, cql_client_host_count(r->client), o->col_size);
	if (o->op == STRESS_MIXED)
		printf("ratio write=%u read=%u delete=%u; ttl %" PRIu32
		       " s on %" PRIu32 "%% of writes; duration %" PRIu64
		       " s\n",
		       o->ratio_write, o->ratio_read, o->ratio_delete, o->ttl_s,
		       o->ttl_share, o->duration_s);
	printf("%8s %12s %10s %10s %10s %8s%s\n", "time", "total ops", "op/s",
	       "p50(ms)", "p99(ms)", "errors",
	       r->expiry ? "    live keys" : "");
	r->progress = event_new(base, -1, EV_PERSIST, on_progress, r);
	struct timeval second = {(time_t)o->interval_s, 0};
	if (!r->progress || event_add(r->progress, &second) != 0)
		goto out;
	r->start_ns = r->last_ns = now_ns();
	r->end_ns = r->start_ns + o->duration_s * 1000000000u;
	for (int i = 0; i < o->threads; i++) {
		r->slots[i].run = r;
		issue(&r->slots[i]);
	}
	event_base_dispatch(base);
	uint64_t end = now_ns();
	print_progress(r);
	print_summary(r, end);
	rc = r->errors ? 1 : 0;
out:
	if (r) {
		if (r->progress)
			event_free(r->progress);
		cql_client_delete(r->client);
		cql_client_tls_free(r->tls);
		free(r->slots);
		free(r->value);
		free(r->expiry);
	}
	free(r);
	if (base)
		event_base_free(base);
	return rc;
}

int main(int argc, char **argv)
{
	struct stress_opts o;
	if (argc >= 2 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	     strcmp(argv[1], "help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (parse_args(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	int rc = run(&o);
	for (size_t i = 0; i < o.nnodes; i++)
		free((void *)o.nodes[i]);
	if (o.password)
		explicit_bzero(o.password, strlen(o.password));
	free(o.user);
	free(o.password);
	free(o.truststore);
	free(o.keystore);
	free(o.keystore_password);
	fflush(stdout);
	return rc;
}
