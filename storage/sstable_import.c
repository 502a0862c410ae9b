/*
 * nodetool import and refresh (Cassandra's SSTableImporter): SSTables
 * from directories (import) or those in the table's own directory that
 * are not live (refresh) join the table's live set.
 *
 * Per source directory, every SSTable is first checked (its column
 * layout against the table's, always; unless no_verify, every
 * checksum, as nodetool verify; with check_tokens,
 * every partition's token against the ranges this node owns): one that
 * fails makes the whole directory fail, and nothing of it is taken.
 * The SSTables of the directories that passed then get fresh
 * generations in the table's directory: each component is hard-linked
 * (a copy where links cannot be made, or with `copy`), TOC.txt last, and
 * the new Statistics.db says level 0 (unless keep_level), unrepaired
 * (unless keep_repaired) and covers no commitlog position (the source's
 * positions are another commitlog's).
 *
 * Atomicity: before the first new TOC is published, an import log
 * (import-<first new gen>.log: "move" or "copy", then "<new> <old>
 * <source dir>" per SSTable) is written durably. Once every new SSTable
 * is complete the log is rewritten ending in "done", and only then are
 * they added to the live set (one version edit) and, for a move, the
 * sources unlinked; the log goes last. At start (storage_import_recover)
 * a log without "done" removes its new generations (the sources are
 * intact), one with "done" finishes the unlinks: a crash never loses the
 * SSTables nor leaves them twice.
 *
 * Index components come along with their SSTables (a component built for
 * another index of the same name, or damaged, is refused when loaded and
 * the SSTable scanned instead, engine_sai.c); for an index some imported
 * SSTable has none of, the index builder writes them in the background
 * while queries scan those SSTables, so no imported row is missed.
 *
 * The table's compaction slot is held throughout, so no compaction
 * takes SSTables meanwhile; refresh lists the directory with the engine
 * lock held and no flush running, so an SSTable a flush or compaction is
 * publishing, or one a compaction made obsolete (named by its log), is
 * never taken for a new one.
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"
#include "storage/sstable_internal.h"
#include "storage/sstable_tool.h"

#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One source SSTable: its generation and component names. */
struct src {
	uint64_t gen;
	char **comps;
	size_t ncomps;
	bool toc;
	size_t dir; /* index into the job's directories */
	uint64_t new_gen;
	struct sstable *s; /* the opened new generation */
};

struct listing {
	struct src *v;
	size_t n, cap;
	size_t dir;
	/* refresh: generations to leave alone (live, or named by a log) */
	const uint64_t *skip;
	size_t nskip;
	bool oom;
};

static bool skipped(const struct listing *l, uint64_t gen)
{
	for (size_t i = 0; i < l->nskip; i++)
		if (l->skip[i] == gen)
			return true;
	return false;
}

static int list_entry(void *arg, const char *name)
{
	struct listing *l = arg;
	unsigned long long gen;
	char comp[256];
	size_t nl = strlen(name);
	if (sscanf(name, "ca-%llu-%255s", &gen, comp) != 2 ||
	    (nl > 4 && strcmp(name + nl - 4, ".tmp") == 0) || skipped(l, gen))
		return 0;
	size_t i = 0;
	while (i < l->n && (l->v[i].gen != gen || l->v[i].dir != l->dir))
		i++;
	if (i == l->n) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 16;
			struct src *m = realloc(l->v, cap * sizeof(*m));
			if (!m)
				goto oom;
			l->v = m;
			l->cap = cap;
		}
		memset(&l->v[l->n], 0, sizeof(l->v[0]));
		l->v[l->n].gen = gen;
		l->v[l->n].dir = l->dir;
		l->n++;
	}
	struct src *s = &l->v[i];
	char **c = realloc(s->comps, (s->ncomps + 1) * sizeof(*c));
	if (!c)
		goto oom;
	s->comps = c;
	if (!(c[s->ncomps] = strdup(comp)))
		goto oom;
	s->ncomps++;
	if (strcmp(comp, "TOC.txt") == 0)
		s->toc = true;
	return 0;
oom:
	l->oom = true;
	return 1;
}

static void src_free(struct src *s)
{
	for (size_t k = 0; k < s->ncomps; k++)
		free(s->comps[k]);
	free(s->comps);
	if (s->s)
		sstable_unref(s->s);
}

/* "<dir>/ca-<gen>-<comp>" */
static char *comp_path(const char *dir, uint64_t gen, const char *comp)
{
	return sst_path(dir, gen, comp, false);
}

/* Whether every partition's token lies in one of `r` (sorted ranges
 * (left, right]). */
static bool token_owned(int64_t tok, const struct storage_token_range *r,
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (tok > r[i].left && tok <= r[i].right)
			return true;
	return false;
}

static int check_tokens(struct sstable *s, const char *dir, uint64_t gen,
			const struct storage_import_options *o)
{
	struct sst_iter *it = sst_iter_new(s);
	int rc = it ? sst_iter_seek(it, INT64_MIN, true)
		    : err_set(ERR_NOMEM, "import");
	const struct sst_entry *e;
	int more;
	while (!rc && (more = sst_iter_next(it, &e)) != 0) {
		if (more < 0) {
			rc = -1;
			break;
		}
		if (!token_owned(e->token, o->owned, o->nowned))
			rc = err_set(ERR_INVALID,
				     "sstable %s/ca-%" PRIu64
				     " holds token %" PRId64
				     ", which this node does not own",
				     dir, gen, e->token);
	}
	if (it)
		sst_iter_delete(it);
	return rc;
}

/* The checks of one source SSTable before anything moves. Its column
 * layout against the table's, always (Cassandra reads an SSTable through
 * its serialization header): data of another layout would be misread; an
 * SSTable older than the record (Statistics.db version 4 or before)
 * cannot be compared and is taken. */
static int check_source(struct storage *db,
			const struct storage_table_meta *meta, const char *dir,
			const struct src *s,
			const struct storage_import_options *o)
{
	struct sstable *sst = sstable_open(db->o.env, dir, s->gen, meta, NULL);
	if (!sst)
		return -1;
	int rc = 0;
	if (sst->layout &&
	    sst_layout_check(sst->layout, sst->layout_len, meta) != 0)
		rc = err_prefix("sstable %s/ca-%" PRIu64, dir, s->gen);
	if (!rc && o->verify) {
		char *p = comp_path(dir, s->gen, "Data.db");
		char problems[1024] = "";
		uint64_t parts;
		rc = p ? storage_sstable_verify(db->o.env, p, &parts, problems,
						sizeof(problems))
		       : -1;
		free(p);
		if (rc)
			rc = err_set(ERR_CORRUPT, "%s", problems);
	}
	if (!rc && o->check_tokens)
		rc = check_tokens(sst, dir, s->gen, o);
	sstable_unref(sst);
	return rc;
}

/* Copies `from` to `to` durably (fsynced; the directory is synced by
 * the caller). */
static int copy_file(struct env *env, const char *from, const char *to)
{
	struct env_file *in = NULL, *out = NULL;
	if (env_file_open(env, from, ENV_FILE_READ, &in))
		return -1;
	int rc = env_file_open(
		env, to, ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC,
		&out);
	size_t cap = 1 << 20;
	uint8_t *buf = rc ? NULL : malloc(cap);
	if (!rc && !buf)
		rc = err_set(ERR_NOMEM, "copy");
	for (uint64_t off = 0; !rc;) {
		ssize_t n = env_file_pread(in, buf, cap, off);
		if (n < 0)
			rc = -1;
		else if (n == 0)
			break;
		else if (env_file_append(out, buf, (size_t)n))
			rc = -1;
		else
			off += (uint64_t)n;
	}
	if (!rc)
		rc = env_file_sync(out);
	free(buf);
	if (out && env_file_close(out))
		rc = -1;
	env_file_close(in);
	if (rc)
		env_unlink(env, to);
	return rc;
}

/* Links (or copies) one source SSTable to its new generation, TOC last. */
static int place(struct storage *db, struct table *t, const char *dir,
		 const struct src *s, bool copy)
{
	int rc = 0;
	for (int pass = 0; pass < 2 && !rc; pass++) {
		for (size_t k = 0; k < s->ncomps && !rc; k++) {
			bool toc = strcmp(s->comps[k], "TOC.txt") == 0;
			if (toc != (pass == 1))
				continue;
			char *from = comp_path(dir, s->gen, s->comps[k]);
			char *to = comp_path(t->dir, s->new_gen, s->comps[k]);
			if (!from || !to)
				rc = -1;
			else if (copy || env_link(db->o.env, from, to))
				rc = copy_file(db->o.env, from, to);
			free(from);
			free(to);
		}
		if (!rc && pass == 0)
			rc = env_sync_dir(db->o.env, t->dir);
	}
	return rc ? -1 : env_sync_dir(db->o.env, t->dir);
}

static char *log_path(const char *dir, uint64_t gen)
{
	size_t n = strlen(dir) + 48;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/import-%" PRIu64 ".log", dir, gen);
	else
		err_set(ERR_NOMEM, "import log");
	return p;
}

static int write_log(struct storage *db, const char *path, bool copy,
		     const struct src *v, size_t n, const char *const *dirs,
		     bool done)
{
	struct buf b;
	buf_init(&b);
	int rc = buf_append(&b, copy ? "copy\n" : "move\n", 5);
	for (size_t i = 0; !rc && i < n; i++) {
		if (!v[i].new_gen)
			continue;
		char line[64];
		int l = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " ",
				 v[i].new_gen, v[i].gen);
		rc = buf_append(&b, line, (size_t)l) ||
		     buf_append(&b, dirs[v[i].dir], strlen(dirs[v[i].dir])) ||
		     buf_append(&b, "\n", 1);
	}
	if (!rc && done)
		rc = buf_append(&b, "done\n", 5);
	rc = rc ? err_set(ERR_NOMEM, "import log")
		: env_write_file_atomic(db->o.env, path, b.data, b.len);
	buf_free(&b);
	return rc;
}

/* ---- recovery ----------------------------------------------------------- */

int storage_import_recover(struct storage *db, struct table *t)
{
	struct storage_log_list l;
	if (storage_engine_list_logs(db->o.env, t->dir, "import", &l))
		return -1;
	for (size_t i = 0; i < l.n; i++) {
		char *p = log_path(t->dir, l.gens[i]);
		uint8_t *text = NULL;
		size_t len;
		if (!p || env_read_file(db->o.env, p, 1 << 24, &text, &len)) {
			free(p);
			continue;
		}
		bool done = strstr((char *)text, "\ndone\n") != NULL;
		bool move = strncmp((char *)text, "move\n", 5) == 0;
		char *save = NULL;
		for (char *line = strtok_r((char *)text, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			unsigned long long ng, og;
			int at = 0;
			if (sscanf(line, "%llu %llu %n", &ng, &og, &at) < 2 ||
			    !at)
				continue;
			if (!done)
				storage_engine_remove_generation(db->o.env,
								 t->dir, ng);
			else if (move)
				storage_engine_remove_generation(db->o.env,
								 line + at, og);
		}
		LOG_INFO("import log %s: %s", p,
			 done ? "finished (the SSTables are live)"
			      : "rolled back (the sources stay)");
		env_unlink(db->o.env, p);
		env_sync_dir(db->o.env, t->dir);
		free(text);
		free(p);
	}
	return 0;
}

/* ---- the import ---------------------------------------------------------- */

struct skip_set {
	uint64_t *v;
	size_t n, cap;
	struct env *env;
	const char *dir;
	bool oom;
};

static void skip_add(struct skip_set *s, uint64_t g)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		uint64_t *m = realloc(s->v, cap * sizeof(*m));
		if (!m) {
			s->oom = true;
			return;
		}
		s->v = m;
		s->cap = cap;
	}
	s->v[s->n++] = g;
}

static int skip_logs(void *arg, const char *name)
{
	struct skip_set *s = arg;
	unsigned long long g;
	char tail[8];
	if (sscanf(name, "compaction-%llu%7s", &g, tail) != 2 ||
	    strcmp(tail, ".log") != 0)
		return 0;
	size_t n = strlen(s->dir) + strlen(name) + 2;
	char *p = malloc(n);
	uint8_t *text = NULL;
	size_t len;
	if (p) {
		snprintf(p, n, "%s/%s", s->dir, name);
		if (env_read_file(s->env, p, 1 << 20, &text, &len) == 0) {
			char *save = NULL;
			for (char *tok = strtok_r((char *)text, "\n", &save);
			     tok; tok = strtok_r(NULL, "\n", &save))
				if (strcmp(tok, "done") != 0)
					skip_add(s,
						 strtoull(tok + (tok[0] == '+'),
							  NULL, 10));
		}
	}
	free(text);
	free(p);
	return 0;
}

/* Whether two paths name the same directory. */
static bool same_dir(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	while (la > 1 && a[la - 1] == '/')
		la--;
	while (lb > 1 && b[lb - 1] == '/')
		lb--;
	if (la == lb && memcmp(a, b, la) == 0)
		return true;
	char *ra = realpath(a, NULL), *rb = ra ? realpath(b, NULL) : NULL;
	bool same = ra && rb && strcmp(ra, rb) == 0;
	free(ra);
	free(rb);
	return same;
}

/* Takes the table's compaction slot; when the table's own directory is
 * a source (`own` >= 0: refresh, or an import naming it) also waits for
 * its flushes and lists that directory under the lock, without the live
 * SSTables and those compaction logs name. */
static int reserve(struct storage *db, struct table *t, struct listing *l,
		   long own)
{
	bool refresh = own >= 0;
	pthread_mutex_lock(&db->mu);
	while (!db->stopping && !t->dropped &&
	       (t->compacting || t->truncating ||
		(refresh && t->flushing_count && !t->flush_failed)))
		pthread_cond_wait(&db->done, &db->mu);
	if (db->stopping || t->dropped) {
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_CLOSED, "table busy or gone");
	}
	t->compacting = true;
	t->compaction_kind = NULL; /* not a compaction compactionstats shows */
	int rc = 0;
	if (refresh) {
		struct skip_set sk = {.env = db->o.env, .dir = t->dir};
		for (size_t i = 0; i < t->version->count; i++)
			skip_add(&sk, t->version->ssts[i]->gen);
		rc = env_list_dir(db->o.env, t->dir, skip_logs, &sk);
		l->skip = sk.v;
		l->nskip = sk.n;
		l->dir = (size_t)own;
		if (!rc && !sk.oom)
			rc = env_list_dir(db->o.env, t->dir, list_entry, l);
		if (sk.oom || l->oom)
			rc = err_set(ERR_NOMEM, "refresh");
		l->skip = NULL;
		l->nskip = 0;
		free(sk.v);
	}
	pthread_mutex_unlock(&db->mu);
	if (rc) {
		pthread_mutex_lock(&db->mu);
		t->compacting = false;
		pthread_cond_broadcast(&db->done);
		pthread_mutex_unlock(&db->mu);
	}
	return rc;
}

static void unreserve(struct storage *db, struct table *t)
{
	pthread_mutex_lock(&db->mu);
	t->compacting = false;
	db->compaction_wanted = true;
	pthread_cond_broadcast(&db->done);
	pthread_cond_broadcast(&db->work);
	pthread_mutex_unlock(&db->mu);
}

/* The new generation's Statistics.db: level, repair state and commitlog
 * position as the options say. */
static bool token_overlap(const struct sst_stats *a, const struct sst_stats *b)
{
	return a->min_token <= b->max_token && b->min_token <= a->max_token;
}

/* Whether an SSTable of the level `st` keeps (above 0) overlaps a live
 * one of that level, or one imported before it (v[0..i)): then it goes
 * to level 0, as Cassandra's leveled manifest sends it, so no level
 * above 0 holds overlapping SSTables. */
static bool level_taken(struct storage *db, struct table *t,
			const struct sst_stats *st, const struct src *v,
			size_t i)
{
	bool hit = false;
	pthread_mutex_lock(&db->mu);
	for (size_t k = 0; k < t->version->count && !hit; k++) {
		const struct sst_stats *o = &t->version->ssts[k]->stats;
		hit = o->level == st->level && token_overlap(o, st);
	}
	pthread_mutex_unlock(&db->mu);
	for (size_t k = 0; k < i && !hit; k++)
		hit = v[k].s && v[k].s->stats.level == st->level &&
		      token_overlap(&v[k].s->stats, st);
	return hit;
}

static int fix_stats(struct storage *db, struct table *t, struct src *v,
		     size_t i, const struct storage_import_options *o)
{
	struct src *s = &v[i];
	struct sst_stats st = s->s->stats;
	if (!o->keep_level || (st.level > 0 && level_taken(db, t, &st, v, i)))
		st.level = 0;
	if (!o->keep_repaired) {
		st.repaired_at = 0;
		memset(st.pending_repair, 0, sizeof(st.pending_repair));
	}
	st.log_end = (struct clpos){0, 0};
	if (sst_stats_rewrite(s->s, &st))
		return -1;
	s->s->stats = st;
	return 0;
}

int storage_import(struct storage *db, const uint8_t table_id[16],
		   const struct storage_import_options *o, bool *failed,
		   size_t *imported)
{
	*imported = 0;
	for (size_t d = 0; d < o->ndirs; d++) {
		failed[d] = false;
		int e = env_exists(db->o.env, o->dirs[d]);
		if (e != 1)
			return err_set(ERR_NOT_FOUND,
				       "Directory %s does not exist",
				       o->dirs[d]);
	}
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	bool refresh = o->ndirs == 0;
	const char *const table_dirs[] = {t->dir};
	const char *const *dirs = refresh ? table_dirs : o->dirs;
	size_t ndirs = refresh ? 1 : o->ndirs;
	bool copy = o->copy && !refresh;
	long own = refresh ? 0 : -1;
	for (size_t d = 0; !refresh && d < ndirs && own < 0; d++)
		if (same_dir(dirs[d], t->dir))
			own = (long)d;
	struct listing l = {0};
	if (reserve(db, t, &l, own)) {
		storage_engine_table_unref(t);
		return -1;
	}
	pthread_mutex_lock(&db->mu);
	const struct storage_table_meta *meta = storage_table_meta_ref(t->meta);
	pthread_mutex_unlock(&db->mu);
	int rc = 0;
	for (size_t d = 0; !refresh && !rc && d < ndirs; d++) {
		if ((long)d == own)
			continue; /* listed by reserve */
		l.dir = d;
		if (env_list_dir(db->o.env, dirs[d], list_entry, &l) || l.oom)
			rc = l.oom ? err_set(ERR_NOMEM, "import")
				   : err_prefix("Directory %s", dirs[d]);
	}
	bool *dir_failed = calloc(ndirs, sizeof(*dir_failed));
	if (!rc && !dir_failed)
		rc = err_set(ERR_NOMEM, "import");
	/* 1: check everything before anything moves */
	for (size_t i = 0; !rc && i < l.n; i++) {
		struct src *s = &l.v[i];
		if (!s->toc || dir_failed[s->dir])
			continue;
		if (check_source(db, meta, dirs[s->dir], s, o)) {
			LOG_ERROR("Failed verifying SSTable %s/ca-%" PRIu64
				  " in directory %s: %s",
				  dirs[s->dir], s->gen, dirs[s->dir],
				  err_msg());
			err_clear();
			dir_failed[s->dir] = true;
		}
	}
	/* 2: new generations, the log, the files */
	size_t wanted = 0;
	for (size_t i = 0; !rc && i < l.n; i++) {
		if (!l.v[i].toc || dir_failed[l.v[i].dir])
			continue;
		l.v[i].new_gen = storage_engine_next_gen(db, t);
		wanted++;
	}
	char *lp = NULL;
	for (size_t i = 0; !rc && wanted && !lp && i < l.n; i++)
		if (l.v[i].new_gen && !(lp = log_path(t->dir, l.v[i].new_gen)))
			rc = -1;
	if (!rc && wanted)
		rc = write_log(db, lp, copy, l.v, l.n, dirs, false);
	for (size_t i = 0; !rc && i < l.n; i++) {
		struct src *s = &l.v[i];
		if (!s->new_gen || dir_failed[s->dir])
			continue;
		if (place(db, t, dirs[s->dir], s, copy) ||
		    !(s->s = sstable_open(db->o.env, t->dir, s->new_gen, meta,
					  db->cache)) ||
		    fix_stats(db, t, l.v, i, o)) {
			LOG_ERROR("Failed importing sstables in directory %s: "
				  "%s",
				  dirs[s->dir], err_msg());
			err_clear();
			dir_failed[s->dir] = true;
		}
	}
	/* a directory that failed now: its new generations go */
	for (size_t i = 0; !rc && i < l.n; i++) {
		struct src *s = &l.v[i];
		if (!s->new_gen || !dir_failed[s->dir])
			continue;
		if (s->s) {
			sstable_unref(s->s);
			s->s = NULL;
		}
		storage_engine_remove_generation(db->o.env, t->dir, s->new_gen);
		s->new_gen = 0;
		wanted--;
	}
	/* 3: done in the log, then live */
	if (!rc && wanted)
		rc = write_log(db, lp, copy, l.v, l.n, dirs, true);
	else if (!rc && lp) /* every directory failed while placed */
		env_unlink(db->o.env, lp);
	struct sstable **add =
		rc || !wanted ? NULL : calloc(wanted, sizeof(*add));
	if (!rc && wanted && !add)
		rc = err_set(ERR_NOMEM, "import");
	if (rc) {
		/* the log is not done: roll back what was placed */
		for (size_t i = 0; i < l.n; i++)
			if (l.v[i].new_gen) {
				if (l.v[i].s) {
					sstable_unref(l.v[i].s);
					l.v[i].s = NULL;
				}
				storage_engine_remove_generation(
					db->o.env, t->dir, l.v[i].new_gen);
			}
		if (lp)
			env_unlink(db->o.env, lp);
	} else if (wanted) {
		size_t k = 0;
		for (size_t i = 0; i < l.n; i++)
			if (l.v[i].new_gen) {
				sstable_map_files(l.v[i].s,
						  db->o.disk_access_mode);
				add[k++] = l.v[i].s;
			}
		pthread_mutex_lock(&db->mu);
		struct version *nv =
			storage_version_edit_many(t->version, NULL, 0, add, k);
		if (nv) {
			storage_version_unref(t->version);
			t->version = nv;
		}
		pthread_mutex_unlock(&db->mu);
		if (!nv) {
			/* the log says done: a restart makes them live */
			rc = err_set(ERR_NOMEM, "import");
		} else {
			*imported = k;
			for (size_t i = 0; !copy && i < l.n; i++)
				if (l.v[i].new_gen)
					storage_engine_remove_generation(
						db->o.env, dirs[l.v[i].dir],
						l.v[i].gen);
			for (size_t d = 0; !copy && d < ndirs; d++)
				env_sync_dir(db->o.env, dirs[d]);
			env_unlink(db->o.env, lp);
			env_sync_dir(db->o.env, t->dir);
		}
		/* an index some of them have no component of: written in the
		 * background, queries scan those SSTables meanwhile */
		const struct storage_table_meta *m = meta;
		for (size_t x = 0; nv && x < m->index_count; x++) {
			bool missing = false;
			for (size_t i = 0; i < k && !missing; i++)
				missing = !sst_sai_listed(add[i],
							  m->indexes[x].name);
			if (missing)
				storage_engine_sai_repair(db, t,
							  m->indexes[x].name);
		}
	}
	free(add);
	free(lp);
	for (size_t i = 0; i < l.n; i++)
		src_free(&l.v[i]);
	free(l.v);
	unreserve(db, t);
	for (size_t d = 0; !refresh && dir_failed && d < ndirs; d++)
		failed[d] = dir_failed[d];
	free(dir_failed);
	LOG_INFO("%s of %s.%s: %zu SSTables loaded",
		 refresh ? "refresh" : "import", meta->keyspace, meta->name,
		 *imported);
	storage_table_meta_unref(meta);
	storage_engine_table_unref(t);
	return rc;
}
