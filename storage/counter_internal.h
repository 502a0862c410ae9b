/*
 * Counter shards inside the engine (storage/counter.c; the model is in
 * storage.h, counters).
 */
#ifndef CASSINI_STORAGE_COUNTER_INTERNAL_H
#define CASSINI_STORAGE_COUNTER_INTERNAL_H

#include "storage/atom_internal.h"
#include "storage/schema.h"

/* A live atom or cell tombstone of counter column `col`: a 16-byte host
 * id path (not zero: deltas are never stored), an 8-byte count, no TTL.
 * 0, or -1 with ERR_INVALID. */
int storage_counter_atom_check(const struct storage_column *col,
			       const struct atom *a);

#endif
