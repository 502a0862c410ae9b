/*
 * An in-memory partition store for repair simulations: one replica's data
 * as canonical fragments, sorted by (token, key), merged on apply as the
 * engine would. Shared by the repair and repair-scheduler suites.
 */
#ifndef CASSINI_TESTS_SIM_MEM_STORE_H
#define CASSINI_TESTS_SIM_MEM_STORE_H

#include "repair/repair.h"
#include "storage/storage.h"

#include <stdbool.h>
#include <stddef.h>

#define MEM_STORE_MAX 2048

struct mem_store {
	const struct storage_table_meta *meta; /* borrowed */
	struct storage_mutation *parts[MEM_STORE_MAX];
	size_t nparts;
};

/* The partition with this key, or NULL. */
struct storage_mutation **mem_store_find(struct mem_store *s, struct slice key);
/* Merges `m` into its partition (a new one is inserted in order); a test
 * failure when the store is full. */
void mem_store_apply(struct mem_store *s, const struct storage_mutation *m);
/* each(arg, fragment) for the non-empty partitions of (start, end] in
 * token order; 0, or -1 when `each` failed (err set by it). */
int mem_store_scan(const struct mem_store *s, int64_t start, int64_t end,
		   repair_scan_each_fn each, void *arg);
void mem_store_clear(struct mem_store *s);
/* Whether a and b hold the same partitions (their fragments' digests). */
bool mem_store_same(const struct mem_store *a, const struct mem_store *b);

/* The repair simulations' table: ks.t (pk text, ck int, v text), PRIMARY
 * KEY (pk, ck), with this id. The caller deletes it. */
struct storage_table_meta *mem_store_table_new(const uint8_t id[16]);

#endif
