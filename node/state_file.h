/*
 * A node's small state file (the repair schedule, the repair history):
 * read once at start; written whole on a worker thread, atomically
 * (env_write_file_atomic: temp file, fsync, rename), one write at a time,
 * the newest state coalesced while one runs; synchronously only at
 * shutdown. A file that does not parse is moved aside to PATH.corrupt.
 */
#ifndef CASSINI_NODE_STATE_FILE_H
#define CASSINI_NODE_STATE_FILE_H

#include <stddef.h>
#include <stdint.h>

struct env;
struct loopq;
struct node_state_file;

/* `path` is copied; `env` and `q` (the loop's) must outlive the object.
 * `thread` names its one worker. NULL with err set. */
struct node_state_file *node_state_file_new(struct env *env, struct loopq *q,
					    const char *path,
					    const char *thread);
/* Finishes the write in flight, then writes the newest pending state
 * synchronously (a failure is logged). */
void node_state_file_delete(struct node_state_file *f);

const char *node_state_file_path(const struct node_state_file *f);
/* Reads the file (before the loop runs): 0 with *data (free it) and
 * *len; -1 with ERR_NOT_FOUND when there is none, another err when it
 * cannot be read or is past `max` bytes. */
int node_state_file_read(struct node_state_file *f, size_t max, uint8_t **data,
			 size_t *len);
/* Moves a file that did not parse to PATH.corrupt (best effort). */
void node_state_file_set_aside(struct node_state_file *f);
/* Reads the file (before the loop runs) and hands it to parse(arg, data,
 * len), which returns 0 or -1 with err set. 1: parsed; 0: no file, or it
 * cannot be read (logged); -1: it does not parse, so it was moved aside
 * and the error logged with `instead` ("starting a new schedule"). */
int node_state_file_load(struct node_state_file *f, size_t max,
			 int (*parse)(void *arg, const uint8_t *data,
				      size_t len),
			 void *arg, const char *instead);
/* Writes `data` (takes ownership) on the worker; a state handed over
 * while a write runs replaces any older one waiting. */
void node_state_file_save(struct node_state_file *f, uint8_t *data, size_t len);

#endif
