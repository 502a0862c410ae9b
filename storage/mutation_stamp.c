/* Re-stamping a mutation (storage_mutation_shift_timestamps): lightweight
 * transactions build their write first and learn its timestamp (the Paxos
 * ballot's time) only when the round that carries it begins. */
#include "storage/mutation_internal.h"
#include "storage/storage.h"

void storage_mutation_shift_timestamps(struct storage_mutation *m,
				       int64_t delta)
{
	if (m->pdel.ts != DELETION_NONE)
		m->pdel.ts += delta;
	for (size_t i = 0; i < m->rt_count; i++)
		if (m->rts[i].del.ts != DELETION_NONE)
			m->rts[i].del.ts += delta;
	for (size_t i = 0; i < m->atom_count; i++)
		m->atoms[i].ts += delta;
}
