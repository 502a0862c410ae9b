/* What the storage index suites share (test_storage_index.c: queries
 * against the model; test_storage_index_components.c: the components'
 * life): the table, the engine fixture with its model of random writes,
 * the checks of candidates and rows against it, and file helpers. */
#ifndef CASSINI_TESTS_UNIT_STORAGE_INDEX_FIXTURE_H
#define CASSINI_TESTS_UNIT_STORAGE_INDEX_FIXTURE_H

#include "common/env_real.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "storage/atom_internal.h"
#include "storage/sai_component.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Table: k1 int, k2 int (partition key), c int (clustering), v int,
 * w text, tags set<int>. */
enum { COL_K1, COL_K2, COL_C, COL_V, COL_W, COL_TAGS };

#define NPART 40
#define NROW  4
#define NVAL  6

struct model_row {
	bool v_set;
	int v;
	int64_t v_expiry; /* seconds; 0: never */
	bool w_set;
	char w[8];
	bool tag[NVAL];
	bool exists;
};

struct model {
	struct model_row rows[NPART][NROW];
	/* whether (partition, value) was ever written: the over-report
	 * bound */
	bool ever_v[NPART][NVAL];
};

struct fx {
	struct env *real;
	struct fault_env *fe;
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage *db;
	struct storage_options o;
	int64_t ts;
	uint64_t rng;
	struct model m;
};

struct files {
	char paths[64][700];
	size_t n;
	const char *dir;
	const char *match;
};

struct comp_set {
	struct files f;
	uint8_t *bytes[64];
	size_t len[64];
};

extern uint64_t seed;
/* storage_options.sai_build_hold of the next fx_init (0: the default) */
extern size_t fx_hold;
/* check_ands: queries narrowed by a second index, and paged ones */
extern unsigned ands_narrowed, ands_paged;
/* the table's indexes, as make_table names them */
extern const char *const index_names[5];

uint64_t rnd(struct fx *f);
struct storage_table_meta *make_table(bool indexes);
void open_db(struct fx *f);
void fx_init(struct fx *f, const char *tag, bool indexes);
void fx_free(struct fx *f);
int64_t now_sec(struct fx *f);
size_t part_key(int p, uint8_t out[14]);
int64_t part_token(int p);
struct storage_mutation *mut(struct fx *f, int p, int c);
void apply(struct fx *f, struct storage_mutation *m);
void random_op(struct fx *f);
bool v_live(struct fx *f, const struct model_row *r, int v);
bool fold_eq(const char *a, const char *b);
bool model_match(struct fx *f, int ix, int p, int val);
bool model_row_match(struct fx *f, int ix, int p, int c, int val);
bool row_level(int ix);
struct slice row_ck(int c, struct buf *b);
struct slice entry_row(const struct storage_index_keys *k, size_t i);
void check_order(const struct storage_index_keys *k, bool rows);
bool keys_cover(const struct storage_index_keys *k, int64_t tok,
		struct slice key, struct slice ck);
uint64_t check_query(struct fx *f, int ix, int val, int64_t start, int64_t end);
uint64_t check_range(struct fx *f, int lo, bool lo_incl, int hi, bool hi_incl,
		     bool lo_open, bool hi_open);
struct slice query_value(int ix, int val, uint8_t vb[4], char up[8]);
size_t parts_of(const struct storage_index_keys *k);
bool keys_have(const struct storage_index_keys *k, int64_t tok,
	       struct slice key);
void ands_side(struct fx *f, int ix, int val, int val2,
	       const struct storage_index_page *pg,
	       struct storage_index_keys *out);
void check_ands(struct fx *f);
uint64_t check_all(struct fx *f);
void find_files(const char *dir, const char *match, struct files *out);
void flip_byte(const char *path, long at);
void wait_built(struct fx *f, const char *name);
void wait_all_built(struct fx *f);
void assert_refused(struct fx *f, const char *name);
void reopen(struct fx *f, struct storage_table_meta *t, bool start);
ino_t inode_of(const char *path);
void write_v(struct fx *f, int p, int c, uint32_t v);
void write_w(struct fx *f, int p, int c, const char *w);
void rows_lookup(struct fx *f, const char *ix, struct slice v,
		 struct storage_index_keys *k);
void check_rows(struct fx *f);
void load_components(struct fx *f, struct comp_set *cs);
void history(struct fx *f);

#endif
