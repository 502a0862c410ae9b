/*
 * Compaction logs: compaction-<out>.log in the table's directory, the
 * output generations then the inputs, ending in "done" once every output
 * is complete (the atomicity rule in compaction.c's header); at start they
 * finish or roll back what a crash interrupted. Also the shared pieces
 * the import log uses: listing `<prefix>-<gen>.log` files and removing a
 * generation's components.
 */
#define LOG_MODULE "storage"
#include "storage/compaction_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compaction logs name at most this many outputs. */
#define LOG_MAX_OUTPUTS 4096

static char *log_path(const char *dir, uint64_t gen)
{
	size_t n = strlen(dir) + 48;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/compaction-%" PRIu64 ".log", dir, gen);
	return p;
}

/* The log: the first output's generation, "+<gen>" for each further
 * output (leveled compactions), then the inputs; rewritten with a last
 * line "done" once every output is complete (`done`). */
int storage_compaction_write_log(struct job *j, bool done)
{
	struct buf text;
	buf_init(&text);
	int rc = 0;
	char line[32];
	for (size_t i = 0; !rc && i < j->nout; i++) {
		int n = snprintf(line, sizeof(line), "%s%" PRIu64 "\n",
				 i ? "+" : "", j->out_gens[i]);
		rc = buf_append(&text, line, (size_t)n);
	}
	for (size_t i = 0; !rc && i < j->n; i++) {
		int n = snprintf(line, sizeof(line), "%" PRIu64 "\n",
				 j->in[i]->gen);
		rc = buf_append(&text, line, (size_t)n);
	}
	if (!rc && done)
		rc = buf_append(&text, "done\n", 5);
	char *p = rc ? NULL : log_path(j->t->dir, j->out_gens[0]);
	rc = p ? env_write_file_atomic(j->db->o.env, p, text.data, text.len)
	       : err_set(ERR_NOMEM, "compaction log");
	free(p);
	buf_free(&text);
	return rc;
}

void storage_engine_remove_generation(struct env *env, const char *dir,
				      uint64_t gen)
{
	static const char *const comps[] = {"TOC.txt",       "Data.db",
					    "Index.db",      "Filter.db",
					    "Statistics.db", "Summary.db"};
	/* the index components its TOC lists go first (TOC-less ones are
	 * leftovers sst_dir_scan removes) */
	char *toc = sst_path(dir, gen, "TOC.txt", false);
	uint8_t *text = NULL;
	size_t len = 0;
	if (toc && env_read_file(env, toc, 1 << 16, &text, &len) == 0) {
		const char *q = (const char *)text, *end = q + len;
		while (q < end) {
			const char *nl = memchr(q, '\n', (size_t)(end - q));
			size_t n = nl ? (size_t)(nl - q) : (size_t)(end - q);
			char comp[300];
			if (n > 4 && n < sizeof(comp) &&
			    memcmp(q, "SAI_", 4) == 0 && !memchr(q, '/', n)) {
				memcpy(comp, q, n);
				comp[n] = '\0';
				char *p = sst_path(dir, gen, comp, false);
				if (p)
					env_unlink(env, p);
				free(p);
			}
			q += n + 1;
		}
	}
	free(text);
	free(toc);
	for (size_t i = 0; i < 6; i++) {
		char *p = sst_path(dir, gen, comps[i], false);
		if (p && env_exists(env, p) == 1)
			env_unlink(env, p);
		free(p);
	}
}

struct log_scan {
	struct storage_log_list *out;
	const char *prefix;
};

static int find_logs(void *arg, const char *name)
{
	struct log_scan *l = arg;
	size_t n = strlen(l->prefix);
	unsigned long long g;
	char tail[8];
	if (l->out->n < 256 && strncmp(name, l->prefix, n) == 0 &&
	    name[n] == '-' && sscanf(name + n + 1, "%llu%7s", &g, tail) == 2 &&
	    strcmp(tail, ".log") == 0)
		l->out->gens[l->out->n++] = g;
	return 0;
}

int storage_engine_list_logs(struct env *env, const char *dir,
			     const char *prefix, struct storage_log_list *out)
{
	out->n = 0;
	struct log_scan l = {out, prefix};
	return env_list_dir(env, dir, find_logs, &l);
}

/* Finishes (output complete) or rolls back (output incomplete) every
 * compaction a crash interrupted; with `only_done`, just removes logs whose
 * inputs are all gone. */
int storage_compaction_process_logs(struct storage *db, struct table *t,
				    bool only_done)
{
	struct storage_log_list l;
	if (storage_engine_list_logs(db->o.env, t->dir, "compaction", &l))
		return -1;
	for (size_t i = 0; i < l.n; i++) {
		char *p = log_path(t->dir, l.gens[i]);
		uint8_t *text = NULL;
		size_t len;
		if (!p || env_read_file(db->o.env, p, 1 << 16, &text, &len)) {
			/* unreadable: written atomically, so a leftover tmp */
			free(p);
			continue;
		}
		/* The outputs are done when the log says so ("done": every
		 * one was complete, though a later compaction may have taken
		 * some since), or, for a log without that line and with one
		 * output (as version 1 wrote them), when its TOC exists. */
		bool done_line = strstr((char *)text, "\ndone\n") != NULL;
		bool out_done = true;
		uint64_t outs[LOG_MAX_OUTPUTS];
		size_t nouts = 0;
		char *save = NULL;
		char *tok = strtok_r((char *)text, "\n", &save);
		for (; tok && (tok == (char *)text || tok[0] == '+');
		     tok = strtok_r(NULL, "\n", &save)) {
			uint64_t g = strtoull(tok + (tok[0] == '+'), NULL, 10);
			char *toc = sst_path(t->dir, g, "TOC.txt", false);
			out_done &= toc && env_exists(db->o.env, toc) == 1;
			free(toc);
			if (nouts < LOG_MAX_OUTPUTS)
				outs[nouts++] = g;
		}
		if (done_line)
			out_done = true;
		else if (nouts > 1)
			out_done = false; /* a cut short multi-output job */
		bool inputs_left = false;
		for (; tok; tok = strtok_r(NULL, "\n", &save)) {
			if (strcmp(tok, "done") == 0)
				continue;
			uint64_t g = strtoull(tok, NULL, 10);
			char *ip = sst_path(t->dir, g, "TOC.txt", false);
			if (ip && env_exists(db->o.env, ip) == 1)
				inputs_left = true;
			free(ip);
			if (!only_done && out_done)
				storage_engine_remove_generation(db->o.env,
								 t->dir, g);
		}
		for (size_t o = 0; !only_done && !out_done && o < nouts; o++)
			storage_engine_remove_generation(db->o.env, t->dir,
							 outs[o]);
		if (!only_done || !inputs_left)
			env_unlink(db->o.env, p);
		free(text);
		free(p);
	}
	return 0;
}

int storage_engine_compaction_recover(struct storage *db, struct table *t)
{
	return storage_compaction_process_logs(db, t, false);
}
