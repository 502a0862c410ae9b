/*
 * Online verification of a table's SSTables (nodetool verify): each live
 * SSTable, pinned by a reference to the table's current version so that
 * compaction cannot delete it meanwhile, is checked as the offline
 * sstableverify checks it (storage/sstable_tool.c).
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"
#include "storage/sstable_internal.h"
#include "storage/sstable_tool.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int storage_verify(struct storage *db, const uint8_t table_id[16],
		   size_t *sstables, size_t *corrupt)
{
	*sstables = *corrupt = 0;
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	pthread_mutex_lock(&db->mu);
	struct version *v = t->version;
	storage_version_ref(v);
	pthread_mutex_unlock(&db->mu);
	int rc = 0;
	for (size_t i = 0; i < v->count; i++) {
		const struct sstable *s = v->ssts[i];
		char *path = sst_path(s->dir, s->gen, "Data.db", false);
		if (!path) {
			rc = err_set(ERR_NOMEM, "verify");
			break;
		}
		char problems[1024];
		uint64_t partitions;
		(*sstables)++;
		if (storage_sstable_verify(db->o.env, path, &partitions,
					   problems, sizeof(problems)) != 0) {
			(*corrupt)++;
			LOG_ERROR("Corrupted SSTable %s: %s", path, problems);
		} else {
			LOG_INFO("Verified %s: %" PRIu64 " partitions", path,
				 partitions);
		}
		free(path);
	}
	storage_version_unref(v);
	storage_engine_table_unref(t);
	if (rc == 0 && *corrupt)
		rc = err_set(ERR_CORRUPT, "%zu of %zu SSTables are corrupt",
			     *corrupt, *sstables);
	return rc;
}
