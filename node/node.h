/*
 * The cassinid node: owns the configuration, the event loop, the env and
 * (as later issues land) every module instance. The only place that knows
 * all modules; nothing includes node/.
 *
 * Lifecycle: node_new() validates and prepares the directories, node_run()
 * serves until SIGTERM/SIGINT (or node_stop()), node_delete() frees.
 */
#ifndef CASSINI_NODE_NODE_H
#define CASSINI_NODE_NODE_H

#include "conf/conf.h"

#define CASSINI_VERSION "0.1.0"

struct node;

/* Exit codes of cassinid. */
enum node_exit {
	NODE_EXIT_OK = 0,
	NODE_EXIT_FAILURE = 1, /* runtime failure: I/O, port in use, ... */
	NODE_EXIT_CONFIG = 2,  /* bad arguments or configuration */
};

/*
 * Takes ownership of `conf` (it is freed by node_delete, or here on
 * failure). Opens the log, creates the data directories, checks they belong
 * to this cluster and locks them. On failure returns NULL with err set; the
 * error code is ERR_CONFIG when the configuration is at fault.
 */
struct node *node_new(struct conf *conf);
/* Checks what conf/ leaves to the modules that read it (the
 * repair_scheduler windows and per-table settings); node_new makes the
 * same checks. 0 or -1 with a message naming the key. */
int node_check_conf(const struct conf *conf);

/* Runs the event loop until a stop signal; returns a node_exit code. */
int node_run(struct node *n);

/* Asks the loop to stop (from the loop thread). */
void node_stop(struct node *n, const char *reason);
/* node_stop after a failure the node cannot run past (no tokens, the CQL
 * port taken): the process then exits NODE_EXIT_FAILURE. */
void node_fail(struct node *n, const char *reason);

void node_delete(struct node *n);

#endif
