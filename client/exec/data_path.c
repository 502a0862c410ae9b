/*
 * What every data path of a node shares (see data_path.h): building the
 * mutations of a CQL write, its timestamp, and storage completions handed
 * back to the loop.
 */
#include "client/exec/data_path.h"

#include "client/exec/dml.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- storage completions onto the loop ----------------------------------- */

struct posted {
	struct loopq_item item;
	storage_done_fn fn;
	void *arg;
	int status;
	enum err_code code;
};

static void posted_run(struct loopq_item *it)
{
	struct posted *p = (struct posted *)it;
	p->fn(p->arg, p->status, p->code);
	free(p);
}

void cql_storage_post(void *post_arg, storage_done_fn fn, void *arg, int status,
		      enum err_code code)
{
	struct posted *p = malloc(sizeof(*p));
	if (!p) {
		/* Cannot defer: run here rather than lose the ack. */
		fn(arg, -1, ERR_NOMEM);
		return;
	}
	*p = (struct posted){.item.fn = posted_run,
			     .fn = fn,
			     .arg = arg,
			     .status = status,
			     .code = code};
	loopq_post(post_arg, &p->item);
}

/* ---- writes -------------------------------------------------------------- */

int cql_data_build_writes(const struct cql_data_request *dr,
			  const struct cql_write_ctx *ctx,
			  struct cql_mutations *all,
			  const struct cql_table ***tables)
{
	struct cql_batch_item one = {dr->stmt, dr->table, dr->binds,
				     dr->bind_count, NULL};
	const struct cql_batch_item *items = dr->stmt ? &one : dr->batch;
	size_t n = dr->stmt ? 1 : dr->batch_count;
	*all = (struct cql_mutations){NULL, 0};
	const struct cql_table **tabs = NULL;
	for (size_t i = 0; i < n; i++) {
		struct cql_mutations muts;
		if (cql_dml_build(items[i].stmt, items[i].table, items[i].binds,
				  items[i].bind_count, ctx, &muts) != 0)
			goto fail;
		struct storage_mutation **grown =
			realloc(all->items,
				(all->count + muts.count + 1) * sizeof(*grown));
		if (grown)
			all->items = grown;
		const struct cql_table **tgrown =
			grown && tables
				? realloc(tabs, (all->count + muts.count + 1) *
							sizeof(*tgrown))
				: NULL;
		if (tgrown)
			tabs = tgrown;
		if (!grown || (tables && !tgrown)) {
			cql_mutations_free(&muts);
			err_set(ERR_NOMEM, "out of memory");
			goto fail;
		}
		if (muts.count) /* IN () builds none */
			memcpy(all->items + all->count, muts.items,
			       muts.count * sizeof(*grown));
		for (size_t k = 0; tables && k < muts.count; k++)
			tabs[all->count + k] = items[i].table;
		all->count += muts.count;
		free(muts.items);
	}
	if (tables)
		*tables = tabs;
	return 0;
fail:
	cql_mutations_free(all);
	free(tabs);
	return -1;
}

int64_t cql_data_timestamp(const struct cql_data_request *dr, int64_t *last,
			   int64_t now_us)
{
	if (!dr->stmt && dr->batch_timestamp != INT64_MIN)
		return dr->batch_timestamp;
	if (dr->params->has_timestamp)
		return dr->params->timestamp;
	*last = now_us > *last ? now_us : *last + 1;
	return *last;
}
