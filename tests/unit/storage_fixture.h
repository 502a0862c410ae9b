/*
 * The storage suites' engine fixture: a real env under a fault_env
 * (tests/unit/storage_fault_env.h), a fresh directory with data/ and
 * commitlog/, default storage options with auto compaction off, up to
 * two tables and the engine over them.
 *
 *   storage_fx_prepare(&f, "tag");      env, directory, options
 *   f.o.commitlog_segment_size = ...;   the suite's own options
 *   f.t = storage_fx_kv_table("t", 0xab, 1);
 *   storage_fx_open(&f);                the engine, its tables, started
 *   ...
 *   storage_fx_free(&f);                engine, tables, directory, envs
 *
 * storage_fx_init does the usual in one call: tables ks.t and ks.u (pk
 * text, v blob). Failures abort the test (Check).
 */
#ifndef CASSINI_TESTS_STORAGE_FIXTURE_H
#define CASSINI_TESTS_STORAGE_FIXTURE_H

#include "storage/storage.h"
#include "tests/unit/storage_fault_env.h"

#include <stdint.h>

struct storage_fx {
	struct env *real;
	struct fault_env *fe;
	struct env *env; /* the fault env's: the engine's */
	char dir[512], data[600], log[600];
	struct storage_table_meta *t, *u; /* either may be NULL */
	struct storage *db;
	struct storage_options o;
	int64_t ts; /* the suite's next write timestamp (1000 at first) */
};

/* Zeroes `f`, makes the envs, a directory named after `tag` and the
 * options; no tables, no engine yet. */
void storage_fx_prepare(struct storage_fx *f, const char *tag);
/* The engine over f->o with f->t and f->u (those not NULL), started. */
void storage_fx_open(struct storage_fx *f);
/* prepare, tables ks.t and ks.u (storage_fx_kv_table, ids {id0, 1} and
 * {id0, 2}), open. */
void storage_fx_init(struct storage_fx *f, const char *tag, uint8_t id0);
/* The engine deleted (no drain: what is not flushed comes back from the
 * commitlog) and opened again. */
void storage_fx_restart(struct storage_fx *f);
/* The engine, the tables, the directory and the envs, freed. */
void storage_fx_free(struct storage_fx *f);

/* Table ks.<name> (pk text, v blob), id {id0, tag, 0...}. */
struct storage_table_meta *storage_fx_kv_table(const char *name, uint8_t id0,
					       uint8_t tag);

#endif
