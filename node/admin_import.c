/*
 * nodetool import and refresh (Cassandra 4.1's Import and Refresh): the
 * arguments are checked on the loop, the work (storage_import: checks,
 * links, the import log) runs on the maintenance worker, and the answer
 * comes back to the loop:
 *
 *   import [-l] [-r] [-v] [-t] [-c] [-q] [-e] [--copy-data]
 *          <keyspace> <table> <directory>...
 *   refresh <keyspace> <table>
 *
 * A directory an SSTable of which fails verification, or holds a token
 * this node does not own (unless -t), is not imported; nodetool's
 * "Some directories failed to import, check server logs for details:"
 * then lists them on stderr (exit 1). Refresh prints nodetool's
 * deprecation notice, then loads the SSTables found in the table's own
 * directory that are not live (no checks, the level reset, as
 * Cassandra's loadNewSSTables). There is no row cache: -c changes
 * nothing.
 */
#define LOG_MODULE "admin"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/workers.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/messaging_msg.h"
#include "node/node_internal.h"
#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct import_job {
	struct admin_reply *r;
	struct storage *db;
	uint8_t id[16];
	struct storage_import_options o;
	bool refresh;
	char **dirs;
	bool *failed;
	struct storage_token_range *owned;
	size_t imported;
	int status;
	char msg[512];
};

static void job_free(struct import_job *j)
{
	for (size_t i = 0; i < j->o.ndirs; i++)
		free(j->dirs[i]);
	free(j->dirs);
	free(j->failed);
	free(j->owned);
	free(j);
}

static void import_run(void *arg)
{
	struct import_job *j = arg;
	j->status =
		storage_import(j->db, j->id, &j->o, j->failed, &j->imported);
	if (j->status)
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
}

static void import_done(void *arg)
{
	struct import_job *j = arg;
	struct buf out = {0}, err = {0};
	int status = 0;
	if (j->status) {
		admin_printf(&err, "error: %s\n", j->msg);
		status = 2;
	} else {
		size_t nf = 0;
		for (size_t i = 0; i < j->o.ndirs; i++)
			nf += j->failed[i];
		if (nf) {
			admin_printf(&err, "Some directories failed to import, "
					   "check server logs for details:\n");
			for (size_t i = 0; i < j->o.ndirs; i++)
				if (j->failed[i])
					admin_printf(&err, "%s\n", j->dirs[i]);
			status = 1;
		}
	}
	buf_put_u8(&out, 0);
	buf_put_u8(&err, 0);
	admin_reply_finish(j->r, status, (const char *)out.data,
			   (const char *)err.data);
	buf_free(&out);
	buf_free(&err);
	job_free(j);
}

/* Queues the job; the answer comes from import_done. */
static int submit(struct node *n, struct import_job *j, const char *notice,
		  struct buf *err)
{
	struct workers *w = cql_service_maintenance(n->cql);
	if (!w || !(j->r = admin_defer(n->admin))) {
		admin_printf(err, "error: %s\n", err_msg());
		job_free(j);
		return 2;
	}
	/* what nodetool prints before the call; a progress frame also
	 * tells the tool the answer may take long */
	admin_reply_progress(j->r, notice);
	j->db = cql_service_storage(n->cql);
	workers_offload(w, cql_service_loopq(n->cql), import_run, import_done,
			j);
	return ADMIN_PENDING;
}

static const struct storage_table_meta *
table_or_err(struct node *n, const char *ks, const char *tb, bool refresh,
	     struct buf *err)
{
	const struct cql_schema *schema = cql_service_schema(n->cql);
	if (refresh && !cql_schema_keyspace(schema, ks)) {
		admin_printf(err, "error: Keyspace %s does not exist\n", ks);
		return NULL;
	}
	const struct cql_table *ct = cql_schema_table(schema, ks, tb);
	if (!ct) {
		if (refresh)
			admin_printf(
				err,
				"error: Unknown keyspace/cf pair (%s.%s)\n", ks,
				tb);
		else
			admin_printf(err,
				     "ColumnFamilyStore for %s/%s not found.\n",
				     ks, tb);
	}
	return ct ? cql_table_meta(ct) : NULL;
}

static int cmd_import(void *arg, size_t argc, const char *const *argv,
		      struct buf *out, struct buf *err)
{
	(void)out;
	struct node *n = arg;
	bool keep_level = false, keep_repaired = false, no_verify = false,
	     no_tokens = false, quick = false, extended = false, copy = false;
	const char *pos[ADMIN_MAX_ARGS];
	size_t np = 0;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-l") || !strcmp(a, "--keep-level"))
			keep_level = true;
		else if (!strcmp(a, "-r") || !strcmp(a, "--keep-repaired"))
			keep_repaired = true;
		else if (!strcmp(a, "-v") || !strcmp(a, "--no-verify"))
			no_verify = true;
		else if (!strcmp(a, "-t") || !strcmp(a, "--no-tokens"))
			no_tokens = true;
		else if (!strcmp(a, "-c") ||
			 !strcmp(a, "--no-invalidate-caches"))
			; /* no row cache */
		else if (!strcmp(a, "-q") || !strcmp(a, "--quick"))
			quick = true;
		else if (!strcmp(a, "-e") || !strcmp(a, "--extended-verify"))
			extended = true;
		else if (!strcmp(a, "--copy-data"))
			copy = true;
		else if (a[0] == '-' && a[1])
			return admin_usage_error(
				err, "import [-l] [-r] [-v] [-t] [-c] [-q] "
				     "[-e] [--copy-data] <keyspace> <table> "
				     "<directory> ...");
		else if (np < ADMIN_MAX_ARGS)
			pos[np++] = a;
	}
	if (np < 3) {
		admin_printf(err, "error: import requires keyspace, table name "
				  "and directories\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	const struct storage_table_meta *m =
		table_or_err(n, pos[0], pos[1], false, err);
	if (!m)
		return 1;
	if (quick) {
		no_tokens = no_verify = true;
		extended = false;
	}
	struct import_job *j = calloc(1, sizeof(*j));
	size_t nd = np - 2;
	if (j) {
		j->dirs = calloc(nd, sizeof(*j->dirs));
		j->failed = calloc(nd, sizeof(*j->failed));
	}
	if (!j || !j->dirs || !j->failed) {
		admin_printf(err, "error: out of memory\n");
		if (j)
			job_free(j);
		return 2;
	}
	/* a directory named twice is imported once (nodetool's set) */
	for (size_t i = 0; i < nd; i++) {
		bool dup = false;
		for (size_t k = 0; k < j->o.ndirs && !dup; k++)
			dup = strcmp(j->dirs[k], pos[2 + i]) == 0;
		if (dup)
			continue;
		if (!(j->dirs[j->o.ndirs] = strdup(pos[2 + i]))) {
			admin_printf(err, "error: out of memory\n");
			job_free(j);
			return 2;
		}
		j->o.ndirs++;
	}
	memcpy(j->id, m->id, 16);
	j->o.dirs = (const char *const *)j->dirs;
	j->o.keep_level = keep_level;
	j->o.keep_repaired = keep_repaired;
	j->o.verify = !no_verify;
	j->o.extended = extended;
	j->o.copy = copy;
	j->o.check_tokens = !no_tokens;
	if (j->o.check_tokens) {
		size_t cap = 0;
		if (node_owned_ranges(n, m, &j->owned, &j->o.nowned, &cap,
				      err) != 0) {
			job_free(j);
			return 2;
		}
		j->o.owned = j->owned;
	}
	return submit(n, j,
		      quick ? "Doing a quick import - skipping sstable "
			      "verification and row cache invalidation\n"
			    : "",
		      err);
}

static int cmd_refresh(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (argc != 2) {
		admin_printf(out, "nodetool refresh is deprecated, use "
				  "nodetool import instead\n");
		admin_printf(err, "error: refresh requires ks and cf args\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	const struct storage_table_meta *m =
		table_or_err(n, argv[0], argv[1], true, err);
	if (!m) {
		admin_printf(out, "nodetool refresh is deprecated, use "
				  "nodetool import instead\n");
		return 2;
	}
	struct import_job *j = calloc(1, sizeof(*j));
	if (!j) {
		admin_printf(err, "error: out of memory\n");
		return 2;
	}
	memcpy(j->id, m->id, 16);
	j->refresh = true;
	j->o.keep_repaired = true; /* loadNewSSTables resets the level only */
	return submit(n, j,
		      "nodetool refresh is deprecated, use nodetool import "
		      "instead\n",
		      err);
}

int node_admin_register_import(struct node *n)
{
	if (admin_register(n->admin, "import",
			   "import [-l] [-r] [-v] [-t] [-c] [-q] [-e] "
			   "[--copy-data] <ks> <table> <dir>...  load "
			   "SSTables from directories",
			   cmd_import, n) != 0)
		return -1;
	return admin_register(n->admin, "refresh",
			      "refresh <ks> <table>  load SSTables placed in "
			      "the table's directory (deprecated: import)",
			      cmd_refresh, n);
}
