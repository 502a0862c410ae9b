/*
 * What the files of the data path share (cql_data.c: replies, writes,
 * truncate, life cycle; cql_data_store.c: the local replica;
 * cql_data_read.c: reads and the parallel range walk; cql_data_hints.c:
 * hinted handoff). Not for use outside node/cql_data*.c.
 */
#ifndef CASSINI_NODE_CQL_DATA_INTERNAL_H
#define CASSINI_NODE_CQL_DATA_INTERNAL_H

#include "client/exec/cas.h"
#include "client/exec/data_path.h"
#include "node/cql_data.h"

/* A read reply buffer grown beyond this is freed, not kept for the next. */
#define READ_REPLY_KEEP (256 * 1024)

struct cql_data {
	struct storage *db;
	struct env *env;
	struct loopq *q;
	struct cql_schema *schema; /* pinned by each read while it runs */
	struct workers *workers;
	struct repl *repl;
	struct node_cas *cas; /* lightweight transactions */
	struct hints *hints;  /* NULL when hinted handoff is off */
	struct cql_data_hooks hooks;
	struct cql_timeuuid_gen timeuuids;
	int64_t last_ts;
	uint64_t batch_warn, batch_fail; /* bytes; 0 = no check */
	int64_t unlogged_warn;           /* partitions */
	int64_t tombstone_fail;          /* tombstone_failure_threshold */
	struct buf reply; /* a read's reply is encoded here, then copied out */
	/* runs storage_write_deferred once a turn with writes */
	struct loopq_item write_item;
	bool write_queued;
	struct inet_addr hand_over_to;  /* cql_data_hand_over_hints' node */
	struct node_slow_queries *slow; /* NULL: slow_query_log_timeout 0 */
	struct node_trace *tracer;      /* NULL: trace events dropped */
};

/* cql_data.c */
void cql_data_reply_error(struct cql_request *req, uint8_t version,
			  int16_t stream, uint32_t code, const char *msg);
/* A coordinator outcome as the protocol's answer (Void on success, with
 * `warning` when set), appended to `b`: Read_failure and Write_failure
 * carry the failed replicas' reason map in v5, their count (at least 1)
 * before. */
void cql_data_encode_result(struct buf *b, uint8_t version, int16_t stream,
			    const struct repl_result *res, const char *warning);
/* The same, sent as `req`'s answer. */
void cql_data_reply_result(struct cql_request *req, uint8_t version,
			   int16_t stream, const struct repl_result *res,
			   const char *warning);
uint64_t cql_data_env_rand(void *arg);
const struct ring_strategy *cql_data_strategy_of(const struct cql_data *d,
						 const struct cql_table *t);
void cql_data_offload(void *arg, void (*run)(void *job),
		      void (*done)(void *job), void *job);

/* cql_data_store.c */
extern const struct repl_store_ops cql_data_store_ops;

/* cql_data_read.c */
void cql_data_run_read(struct cql_data *d, const struct cql_data_request *dr);

/* cql_data_hints.c: the hooks of repl_hooks and hints_options. */
int cql_data_hook_hint(void *arg, const uint8_t host_id[16], const char *dc,
		       const uint8_t *mutation, size_t len);
int cql_data_hook_take_hint(void *arg, const uint8_t host_id[16],
			    const uint8_t *mutation, size_t len,
			    int64_t created_us);
int cql_data_hints_send(void *arg, const uint8_t host_id[16],
			const uint8_t *mutation, size_t len, int64_t created_us,
			hints_done_fn done, void *done_arg);
bool cql_data_hints_alive(void *arg, const uint8_t host_id[16]);

#endif
