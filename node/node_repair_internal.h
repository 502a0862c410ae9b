/*
 * What the files of the node's repair share (node_repair.c: the repair
 * command and the life cycle; node_repair_store.c: the store repair/ sees;
 * node_repair_admin.c: repair_admin and netstats).
 */
#ifndef CASSINI_NODE_NODE_REPAIR_INTERNAL_H
#define CASSINI_NODE_NODE_REPAIR_INTERNAL_H

#include "common/buf.h"
#include "repair/repair.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node;
struct repair_cmd;
struct paxos_cmd;
struct node_repair_sched;
struct repair_history;
struct node_state_file;
struct storage;
struct loopq;
struct workers;

/* A finished session, for `repair_admin list`. */
struct repair_record {
	uint64_t session;
	char keyspace[64];
	int64_t started_s; /* wall clock */
	uint64_t duration_us;
	bool ok, preview;
	char error[256];
	uint64_t ranges, mismatched, rows_streamed, bytes_streamed;
};

#define HISTORY 64

#define HISTORY_FILE  "repair_history"
#define SESSIONS_FILE "repair_sessions" /* participant sessions */
#define HISTORY_MAX   (16u << 20)       /* a file past this is refused */

struct node_repair {
	struct node *n;
	struct repair_record history[HISTORY]; /* a ring, oldest overwritten */
	size_t nhistory;                       /* ever recorded */
	struct storage *db;
	struct loopq *q;
	struct workers *workers;
	atomic_bool stopping; /* scans in flight give up (shutdown) */
	struct repair *repair;
	struct repair_cmd *cmd; /* the running admin command, or NULL */
	struct paxos_cmd *pcmd; /* the running --paxos-only, or NULL */
	struct node_repair_sched *sched;
	struct repair_history *tasks; /* every manual task, persisted */
	struct node_state_file *tasks_file;
	bool tasks_dirty; /* entries not yet handed to tasks_file */
	struct node_state_file *locals_file; /* repair_locals_encode's */
};

/* node_repair_store.c */
extern const struct repair_store_ops node_repair_store_ops;

/* node_repair.c: a session id as text and back (-1 when malformed). */
void node_repair_uuid_str(const uint8_t x[16], char out[40]);
int node_repair_uuid_parse(const char *s, uint8_t out[16]);

/* node_repair.c: settles the data pending for sessions that ended (on the
 * repair worker): a finalized session's becomes repaired, a failed one's
 * unrepaired; with `unknown`, also data pending for sessions this node
 * does not know (at start: the previous run's it did not persist). With
 * `reply` (an admin_defer handle), answers it with the counts. */
struct admin_reply;
int node_repair_cleanup(struct node_repair *nr, bool unknown,
			struct admin_reply *reply);

/* node_repair_admin.c: the admin commands (arg: the node_repair) and
 * repair_admin's synopsis. */
extern const char node_repair_admin_usage[];
int node_repair_cmd_admin(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err);
int node_repair_cmd_netstats(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err);
/* getstreamthroughput [-m] / setstreamthroughput [-m] <value>: the
 * outbound stream throttle (stream_throughput_outbound). */
int node_repair_cmd_getstreamthroughput(void *arg, size_t argc,
					const char *const *argv,
					struct buf *out, struct buf *err);
int node_repair_cmd_setstreamthroughput(void *arg, size_t argc,
					const char *const *argv,
					struct buf *out, struct buf *err);

#endif
