/*
 * A mutation: every change to one partition of one table, applied
 * atomically. Built by the storage_mutation_* calls of storage.h, or
 * decoded from the one serialized form (mutation.c) that the commitlog,
 * hints, internode messages and streaming share.
 */
#ifndef CASSINI_STORAGE_MUTATION_INTERNAL_H
#define CASSINI_STORAGE_MUTATION_INTERNAL_H

#include "common/arena.h"
#include "storage/atom_internal.h"

struct storage_mutation {
	struct arena arena; /* all bytes the slices below point at */
	uint8_t table_id[16];
	const struct storage_table_meta *meta; /* borrowed; NULL if decoded */
	struct slice key;                      /* serialized partition key */
	int64_t token;
	struct deletion pdel; /* partition deletion, or DELETION_NONE */
	struct rtomb *rts;
	size_t rt_count, rt_cap;
	struct atom *atoms;
	size_t atom_count, atom_cap;
	struct slice row; /* builder: the current row's clustering */
};

/* storage_mutation_new for a key whose token the caller has already. */
struct storage_mutation *
storage_mutation_new_token(const struct storage_table_meta *t,
			   const uint8_t *key, size_t len, int64_t token);

/* Append a copy (bytes into the mutation's arena), unchecked. */
int storage_mutation_push_atom(struct storage_mutation *m,
			       const struct atom *a);
int storage_mutation_push_rtomb(struct storage_mutation *m,
				const struct rtomb *r);

/* Bytes the mutation's content takes, for memory and size limits. */
size_t storage_mutation_data_size(const struct storage_mutation *m);

#endif
