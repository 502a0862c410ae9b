/* storage_import (nodetool import / refresh): good SSTables join the live
 * set under fresh generations and survive a restart, their sources moved
 * (or copied); a directory with a corrupt SSTable, or one holding tokens
 * the node does not own, is refused whole and nothing of it is lost;
 * refresh takes the files dropped into the table's directory and leaves
 * the live ones alone; SSTables written for another column layout are
 * refused, their directory untouched; a power cut at any step of an import
 * leaves either the sources or the imported SSTables, never neither and never
 * both. */
#include "common/err.h"
#include "common/log.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Tables ks.t and ks.u: pk text, v blob (tests/unit/storage_fixture.h). */

/* `leveled`: u compacts leveled, cut at 1 MiB. */
static void fx_init_lcs(struct storage_fx *f, const char *tag, bool leveled)
{
	storage_fx_prepare(f, tag);
	f->t = storage_fx_kv_table("t", 0xcd, 1);
	f->u = storage_fx_kv_table("u", 0xcd, 2);
	if (leveled) {
		f->u->options.compaction = STORAGE_COMPACTION_LEVELED;
		f->u->options.compression = STORAGE_COMPRESSION_NONE;
		f->u->options.sstable_size_bytes = 1u << 20;
	}
	storage_fx_open(f);
}

static void fx_init(struct storage_fx *f, const char *tag)
{
	storage_fx_init(f, tag, 0xcd);
}

static void put_sized(struct storage_fx *f, const struct storage_table_meta *t,
		      const char *prefix, int from, int to, size_t vlen);

static void put_range(struct storage_fx *f, const struct storage_table_meta *t,
		      const char *prefix, int from, int to)
{
	put_sized(f, t, prefix, from, to, 5);
}

static void put_sized(struct storage_fx *f, const struct storage_table_meta *t,
		      const char *prefix, int from, int to, size_t vlen)
{
	static uint8_t value[1024];
	memset(value, 'x', sizeof(value));
	if (vlen > sizeof(value))
		vlen = sizeof(value);
	for (int i = from; i < to; i++) {
		char key[32];
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		struct storage_mutation *m = storage_mutation_new(
			t, (const uint8_t *)key, strlen(key));
		int64_t now = env_wall_us(f->env) / 1000000;
		ck_assert_int_eq(storage_mutation_put_marker(m, f->ts, 0, now),
				 0);
		ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, value,
						      vlen, f->ts, 0, now),
				 0);
		f->ts++;
		if (storage_apply_sync(f->db, m))
			ck_abort_msg("apply: %s", err_msg());
		storage_mutation_delete(m);
	}
}

static size_t count(struct storage_fx *f, const struct storage_table_meta *t)
{
	struct storage_read_cmd cmd = {0};
	struct storage_scan *s =
		storage_scan_open(f->db, t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(s);
	struct storage_result *r;
	size_t n = 0;
	int rc;
	while ((rc = storage_scan_next(s, &r)) == 1) {
		n += r->row_count;
		storage_result_delete(r);
	}
	ck_assert_int_eq(rc, 0);
	storage_scan_close(s);
	return n;
}

static uint64_t sstables(struct storage_fx *f,
			 const struct storage_table_meta *t)
{
	struct storage_stats st;
	storage_stats(f->db, t->id, &st);
	return st.sstable_count;
}

static void table_dir(struct storage_fx *f, const struct storage_table_meta *t,
		      char *out, size_t cap)
{
	int k = snprintf(out, cap, "%s/ks/%s-", f->data, t->name);
	for (int i = 0; i < 16; i++)
		k += snprintf(out + k, cap - (size_t)k, "%02x", t->id[i]);
}

/* TOC files (complete SSTables) in `dir`; with `gen`, of that one only. */
static size_t tocs(const char *dir, long gen)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		unsigned long long g;
		char comp[64];
		if (sscanf(e->d_name, "ca-%llu-%63s", &g, comp) == 2 &&
		    strcmp(comp, "TOC.txt") == 0 && (gen < 0 || (long)g == gen))
			n++;
	}
	closedir(d);
	return n;
}

/* Copies the ca-* files of `from` into `to` (made), their generations
 * moved up by `shift`; with `corrupt`, a byte in the middle of each
 * Data.db flipped. */
static void copy_dir(const char *from, const char *to, unsigned shift,
		     bool corrupt)
{
	mkdir(to, 0755);
	DIR *d = opendir(from);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		unsigned long long g;
		char comp[200];
		if (sscanf(e->d_name, "ca-%llu-%199s", &g, comp) != 2)
			continue;
		char a[1200], b[1200];
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		snprintf(b, sizeof(b), "%s/ca-%llu-%s", to, g + shift, comp);
		FILE *in = fopen(a, "rb"), *out = fopen(b, "wb");
		ck_assert(in && out);
		static char buf[1 << 16];
		size_t total = 0, n;
		while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
			ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
			total += n;
		}
		fclose(in);
		fclose(out);
		if (corrupt && strcmp(comp, "Data.db") == 0) {
			FILE *w = fopen(b, "r+b");
			ck_assert_ptr_nonnull(w);
			fseek(w, (long)(total / 2), SEEK_SET);
			int c = fgetc(w);
			fseek(w, (long)(total / 2), SEEK_SET);
			fputc(c ^ 0xff, w);
			fclose(w);
		}
	}
	closedir(d);
}

/* u gets `rows` rows in two SSTables; its snapshot's directory in out. */
static void source(struct storage_fx *f, int rows, char *out, size_t cap)
{
	put_range(f, f->u, "s", 0, rows / 2);
	ck_assert_int_eq(storage_flush(f->db, f->u->id), 0);
	put_range(f, f->u, "s", rows / 2, rows);
	ck_assert_int_eq(storage_flush(f->db, f->u->id), 0);
	ck_assert_int_eq(storage_snapshot(f->db, f->u->id, "src"), 0);
	char d[800];
	table_dir(f, f->u, d, sizeof(d));
	snprintf(out, cap, "%s/snapshots/src", d);
}

static int import(struct storage_fx *f, const char *const *dirs, size_t n,
		  bool *failed, size_t *imported, bool copy)
{
	struct storage_import_options o = {
		.dirs = dirs, .ndirs = n, .verify = true, .copy = copy};
	return storage_import(f->db, f->t->id, &o, failed, imported);
}

START_TEST(import_renumbers_and_survives_a_restart)
{
	struct storage_fx f;
	fx_init(&f, "import-good");
	char src[900], tdir[800];
	source(&f, 200, src, sizeof(src));
	/* t has generations 1..3 of its own */
	for (int i = 0; i < 3; i++) {
		put_range(&f, f.t, i == 0 ? "a" : i == 1 ? "b" : "c", 0, 10);
		ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	}
	table_dir(&f, f.t, tdir, sizeof(tdir));
	ck_assert_uint_eq(tocs(tdir, -1), 3);
	const char *dirs[] = {src};
	bool failed[1];
	size_t imported;
	if (import(&f, dirs, 1, failed, &imported, false))
		ck_abort_msg("import: %s", err_msg());
	ck_assert(!failed[0]);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(sstables(&f, f.t), 5);
	ck_assert_uint_eq(count(&f, f.t), 230);
	/* fresh generations after t's own; the sources moved */
	ck_assert_uint_eq(tocs(tdir, 4) + tocs(tdir, 5), 2);
	ck_assert_uint_eq(tocs(src, -1), 0);
	/* nothing more to take: a second import finds nothing */
	ck_assert_int_eq(import(&f, dirs, 1, failed, &imported, false), 0);
	ck_assert_uint_eq(imported, 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(sstables(&f, f.t), 5);
	ck_assert_uint_eq(count(&f, f.t), 230);
	/* a flush after the restart takes a generation no import took */
	put_range(&f, f.t, "d", 0, 5);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	ck_assert_uint_eq(tocs(tdir, 6), 1);
	ck_assert_uint_eq(count(&f, f.t), 235);
	storage_fx_free(&f);
}
END_TEST

START_TEST(copy_data_keeps_the_sources)
{
	struct storage_fx f;
	fx_init(&f, "import-copy");
	char src[900];
	source(&f, 100, src, sizeof(src));
	const char *dirs[] = {src};
	bool failed[1];
	size_t imported;
	ck_assert_int_eq(import(&f, dirs, 1, failed, &imported, true), 0);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(tocs(src, -1), 2);
	ck_assert_uint_eq(count(&f, f.t), 100);
	storage_fx_free(&f);
}
END_TEST

START_TEST(a_corrupt_directory_is_refused_whole)
{
	struct storage_fx f;
	fx_init(&f, "import-corrupt");
	char src[900], good[1000], bad[1000];
	source(&f, 100, src, sizeof(src));
	snprintf(good, sizeof(good), "%s/good", f.dir);
	snprintf(bad, sizeof(bad), "%s/bad", f.dir);
	copy_dir(src, good, 0, false);
	copy_dir(src, bad, 0, true);
	const char *dirs[] = {bad, good};
	bool failed[2];
	size_t imported;
	ck_assert_int_eq(import(&f, dirs, 2, failed, &imported, false), 0);
	ck_assert(failed[0] && !failed[1]);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(count(&f, f.t), 100);
	ck_assert_uint_eq(tocs(bad, -1), 2); /* nothing of it moved */
	ck_assert_uint_eq(tocs(good, -1), 0);
	/* a directory that does not exist stops it all */
	char none[1000];
	snprintf(none, sizeof(none), "%s/none", f.dir);
	const char *missing[] = {none};
	ck_assert_int_eq(import(&f, missing, 1, failed, &imported, false), -1);
	ck_assert_ptr_nonnull(strstr(err_msg(), "does not exist"));
	storage_fx_free(&f);
}
END_TEST

/* A table ks.<name> of `cols` extra columns after pk text: name, type. */
static struct storage_table_meta *layout_table(const char *name, uint8_t tag,
					       const char *const *names,
					       const uint16_t *kinds, size_t n)
{
	uint8_t id[16] = {0xce, tag};
	struct storage_table_meta *t = storage_table_meta_new("ks", name, id);
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	for (size_t i = 0; i < n; i++) {
		struct storage_type ty = {.kind = kinds[i]};
		storage_table_meta_add_column(
			t, names[i], STORAGE_COLUMN_REGULAR, &ty, false);
	}
	return t;
}

/* Imports into t the SSTables of a table `w` of another layout; the
 * error the import logged. */
static void import_foreign(struct storage_fx *f, struct storage_table_meta *w,
			   const char *want)
{
	ck_assert_int_eq(storage_table_add(f->db, w, true), 0);
	for (int i = 0; i < 20; i++) {
		char key[16];
		snprintf(key, sizeof(key), "w%d", i);
		struct storage_mutation *m = storage_mutation_new(
			w, (const uint8_t *)key, strlen(key));
		uint8_t v[4] = {0, 0, 0, (uint8_t)i};
		ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, v, 4,
						      f->ts++, 0, 0),
				 0);
		ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(storage_flush(f->db, w->id), 0);
	ck_assert_int_eq(storage_snapshot(f->db, w->id, "src"), 0);
	char d[800], src[900], logp[1000];
	table_dir(f, w, d, sizeof(d));
	snprintf(src, sizeof(src), "%s/snapshots/src", d);
	snprintf(logp, sizeof(logp), "%s/import.log", f->dir);
	ck_assert_int_eq(log_open_file(logp), 0);
	const char *dirs[] = {src};
	bool failed[1];
	size_t imported;
	int rc = import(f, dirs, 1, failed, &imported, false);
	log_close_file();
	ck_assert_int_eq(rc, 0);
	ck_assert(failed[0]);
	ck_assert_uint_eq(imported, 0);
	ck_assert_uint_eq(count(f, f->t), 0);
	ck_assert_uint_eq(tocs(src, -1), 1); /* nothing of it moved */
	char tdir[800];
	table_dir(f, f->t, tdir, sizeof(tdir));
	ck_assert_uint_eq(tocs(tdir, -1), 0);
	FILE *l = fopen(logp, "r");
	ck_assert_ptr_nonnull(l);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, l);
	text[n] = 0;
	fclose(l);
	if (!strstr(text, want))
		ck_abort_msg("no \"%s\" in the log: %s", want, text);
}

START_TEST(sstables_of_another_layout_are_refused)
{
	struct storage_fx f;
	fx_init(&f, "import-layout");
	/* v int where t has v blob */
	const char *n1[] = {"v"};
	const uint16_t k1[] = {STORAGE_TYPE_INT};
	struct storage_table_meta *w = layout_table("w", 1, n1, k1, 1);
	import_foreign(&f, w,
		       "Column layout mismatch with table ks.t: column 1 of "
		       "the SSTable is regular v int, the table's is regular "
		       "v blob");
	/* a column t does not have */
	const char *n2[] = {"v", "extra"};
	const uint16_t k2[] = {STORAGE_TYPE_BLOB, STORAGE_TYPE_TEXT};
	struct storage_table_meta *x = layout_table("x", 2, n2, k2, 2);
	import_foreign(&f, x, "Unknown column extra during deserialization");
	/* another name at the slot */
	const char *n3[] = {"w"};
	const uint16_t k3[] = {STORAGE_TYPE_BLOB};
	struct storage_table_meta *y = layout_table("y", 3, n3, k3, 1);
	import_foreign(&f, y, "column 1 of the SSTable is regular w blob");

	/* an older layout of the table (a column added since) is taken */
	const char *n4[] = {"v", "w"};
	const uint16_t k4[] = {STORAGE_TYPE_BLOB, STORAGE_TYPE_TEXT};
	struct storage_table_meta *z = layout_table("z", 4, n4, k4, 2);
	ck_assert_int_eq(storage_table_add(f.db, z, true), 0);
	char src[900];
	source(&f, 40, src, sizeof(src));
	const char *dirs[] = {src};
	bool failed[1];
	size_t imported;
	struct storage_import_options o = {
		.dirs = dirs, .ndirs = 1, .verify = true};
	ck_assert_int_eq(storage_import(f.db, z->id, &o, failed, &imported), 0);
	ck_assert(!failed[0]);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(count(&f, z), 40);
	storage_fx_free(&f);
	storage_table_meta_delete(z);
	storage_table_meta_delete(w);
	storage_table_meta_delete(x);
	storage_table_meta_delete(y);
}
END_TEST

START_TEST(tokens_not_owned_fail_the_directory)
{
	struct storage_fx f;
	fx_init(&f, "import-tokens");
	char src[900];
	source(&f, 100, src, sizeof(src));
	const char *dirs[] = {src};
	bool failed[1];
	size_t imported;
	/* half the ring: some of 100 keys' tokens fall outside */
	struct storage_token_range half = {INT64_MIN, 0};
	struct storage_import_options o = {.dirs = dirs,
					   .ndirs = 1,
					   .verify = true,
					   .check_tokens = true,
					   .owned = &half,
					   .nowned = 1};
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, failed, &imported),
			 0);
	ck_assert(failed[0]);
	ck_assert_uint_eq(imported, 0);
	ck_assert_uint_eq(tocs(src, -1), 2);
	ck_assert_uint_eq(count(&f, f.t), 0);
	/* the whole ring */
	struct storage_token_range all = {INT64_MIN, INT64_MAX};
	o.owned = &all;
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, failed, &imported),
			 0);
	ck_assert(!failed[0]);
	ck_assert_uint_eq(count(&f, f.t), 100);
	storage_fx_free(&f);
}
END_TEST

START_TEST(refresh_takes_dropped_files_only)
{
	struct storage_fx f;
	fx_init(&f, "import-refresh");
	char src[900], tdir[800];
	source(&f, 100, src, sizeof(src));
	put_range(&f, f.t, "own", 0, 10);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	table_dir(&f, f.t, tdir, sizeof(tdir));
	/* dropped in as generations 100 and 101 */
	copy_dir(src, tdir, 99, false);
	ck_assert_uint_eq(tocs(tdir, -1), 3);
	struct storage_import_options o = {.keep_repaired = true};
	size_t imported;
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, NULL, &imported), 0);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(sstables(&f, f.t), 3);
	ck_assert_uint_eq(count(&f, f.t), 110);
	ck_assert_uint_eq(tocs(tdir, 100) + tocs(tdir, 101), 0);
	ck_assert_uint_eq(tocs(tdir, -1), 3);
	/* again: nothing new, the live ones stay once */
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, NULL, &imported), 0);
	ck_assert_uint_eq(imported, 0);
	ck_assert_uint_eq(sstables(&f, f.t), 3);
	/* an import naming the table's own directory (a trailing slash
	 * too) takes what refresh takes, never the live SSTables again */
	char own[900];
	snprintf(own, sizeof(own), "%s/", tdir);
	const char *dirs[] = {own};
	bool failed[1];
	ck_assert_int_eq(import(&f, dirs, 1, failed, &imported, false), 0);
	ck_assert_uint_eq(imported, 0);
	ck_assert_uint_eq(sstables(&f, f.t), 3);
	copy_dir(src, tdir, 199, false);
	ck_assert_int_eq(import(&f, dirs, 1, failed, &imported, false), 0);
	ck_assert(!failed[0]);
	ck_assert_uint_eq(imported, 2);
	ck_assert_uint_eq(sstables(&f, f.t), 5);
	ck_assert_uint_eq(tocs(tdir, -1), 5);
	storage_fx_restart(&f);
	ck_assert_uint_eq(sstables(&f, f.t), 5);
	ck_assert_uint_eq(count(&f, f.t), 110);
	storage_fx_free(&f);
}
END_TEST

/* The level of each SSTable of t's directory: count[level]. */
static void levels(struct storage_fx *f, size_t count[9])
{
	char tdir[800];
	table_dir(f, f->t, tdir, sizeof(tdir));
	memset(count, 0, 9 * sizeof(*count));
	DIR *d = opendir(tdir);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, "ca-", 3) != 0 || len < 8 ||
		    strcmp(e->d_name + len - 8, "-TOC.txt") != 0)
			continue;
		char path[1200];
		snprintf(path, sizeof(path), "%s/%s", tdir, e->d_name);
		struct storage_sstable_meta m;
		if (storage_sstable_meta_read(f->env, path, &m))
			ck_abort_msg("%s: %s", path, m.problems);
		ck_assert_uint_lt(m.level, 9);
		count[m.level]++;
	}
	closedir(d);
}

START_TEST(keep_level_keeps_levels_that_do_not_overlap)
{
	struct storage_fx f;
	fx_init_lcs(&f, "import-level", true);
	for (int i = 0; i < 4; i++) {
		put_sized(&f, f.u, "l", i * 700, (i + 1) * 700, 1024);
		ck_assert_int_eq(storage_flush(f.db, f.u->id), 0);
	}
	ck_assert_int_eq(storage_compact(f.db, f.u->id, false), 0);
	ck_assert_int_eq(storage_snapshot(f.db, f.u->id, "lv"), 0);
	char udir[800], snap[900], a[1000], b[1000], c[1000];
	table_dir(&f, f.u, udir, sizeof(udir));
	snprintf(snap, sizeof(snap), "%s/snapshots/lv", udir);
	snprintf(a, sizeof(a), "%s/a", f.dir);
	snprintf(b, sizeof(b), "%s/b", f.dir);
	snprintf(c, sizeof(c), "%s/c", f.dir);
	copy_dir(snap, a, 0, false);
	copy_dir(snap, b, 0, false);
	copy_dir(snap, c, 0, false);
	size_t n = tocs(a, -1), lv[9];
	ck_assert_uint_ge(n, 2);
	bool failed[1];
	size_t imported;
	/* kept: t has nothing they overlap */
	const char *da[] = {a};
	struct storage_import_options o = {
		.dirs = da, .ndirs = 1, .verify = true, .keep_level = true};
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, failed, &imported),
			 0);
	levels(&f, lv);
	ck_assert_uint_eq(lv[0], 0);
	ck_assert_uint_eq(lv[1], n);
	/* by default: level 0 */
	const char *db_[] = {b};
	o.dirs = db_;
	o.keep_level = false;
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, failed, &imported),
			 0);
	levels(&f, lv);
	ck_assert_uint_eq(lv[0], n);
	ck_assert_uint_eq(lv[1], n);
	/* kept, but they overlap the level-1 ones now: level 0 */
	const char *dc[] = {c};
	o.dirs = dc;
	o.keep_level = true;
	ck_assert_int_eq(storage_import(f.db, f.t->id, &o, failed, &imported),
			 0);
	levels(&f, lv);
	ck_assert_uint_eq(lv[0], 2 * n);
	ck_assert_uint_eq(lv[1], n);
	ck_assert_uint_eq(count(&f, f.t), 2800);
	storage_fx_free(&f);
}
END_TEST

/* A power cut before each mutating step of an import: after the restart
 * the rows are there exactly once, in the table (the sources gone) or
 * still in the sources (the table without them). */
START_TEST(a_power_cut_at_any_step_loses_and_doubles_nothing)
{
	struct storage_fx f;
	fx_init(&f, "import-crash");
	char src[900], work[1000], tdir[800];
	source(&f, 100, src, sizeof(src));
	table_dir(&f, f.t, tdir, sizeof(tdir));
	snprintf(work, sizeof(work), "%s/work", f.dir);
	const char *dirs[] = {work};
	bool failed[1];
	size_t imported;
	/* count the steps once */
	copy_dir(src, work, 0, false);
	uint64_t before = fault_env_ops(f.fe);
	ck_assert_int_eq(import(&f, dirs, 1, failed, &imported, false), 0);
	uint64_t steps = fault_env_ops(f.fe) - before;
	ck_assert_uint_gt(steps, 10);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	size_t finished = 0, rolled_back = 0;
	for (uint64_t cut = 0; cut <= steps; cut++) {
		copy_dir(src, work, 0, false);
		ck_assert_uint_eq(tocs(work, -1), 2);
		fault_env_freeze_after(f.fe, (int64_t)cut);
		int rc = import(&f, dirs, 1, failed, &imported, false);
		bool cut_fell = fault_env_frozen(f.fe);
		fault_env_freeze_after(f.fe, -1);
		if (cut_fell) {
			fault_env_freeze(f.fe);
			storage_delete(f.db);
			fault_env_crash(f.fe, cut);
			storage_fx_open(&f);
		} else {
			ck_assert_int_eq(rc, 0);
		}
		size_t n = count(&f, f.t), left = tocs(work, -1);
		if (n == 100 && left == 0) {
			finished++;
		} else {
			ck_assert_msg(n == 0 && left == 2,
				      "cut %" PRIu64 ": %zu rows, %zu sources",
				      cut, n, left);
			rolled_back++;
		}
		ck_assert_uint_le(sstables(&f, f.t), 2);
		ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	}
	ck_assert_uint_gt(finished, 0);
	ck_assert_uint_gt(rolled_back, 0);
	storage_fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_import");
	TCase *tc = tcase_create("import");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, import_renumbers_and_survives_a_restart);
	tcase_add_test(tc, copy_data_keeps_the_sources);
	tcase_add_test(tc, a_corrupt_directory_is_refused_whole);
	tcase_add_test(tc, sstables_of_another_layout_are_refused);
	tcase_add_test(tc, tokens_not_owned_fail_the_directory);
	tcase_add_test(tc, refresh_takes_dropped_files_only);
	tcase_add_test(tc, keep_level_keeps_levels_that_do_not_overlap);
	tcase_add_test(tc, a_power_cut_at_any_step_loses_and_doubles_nothing);
	suite_add_tcase(s, tc);
	return test_run(s);
}
