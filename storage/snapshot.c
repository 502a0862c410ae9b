/*
 * Snapshots, as nodetool's: a table's SSTables hard-linked, after a flush,
 * into <table dir>/snapshots/<tag>/ under their own names. Links cost no
 * space until compaction deletes the live files; a snapshot then keeps
 * them. Restoring is copying a snapshot's files back into an empty table
 * directory while the node is stopped (docs/operations.md).
 */
#include "storage/engine_internal.h"
#include "storage/sstable_internal.h"

#include "common/err.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOTS "snapshots"

/* out = a/b; -1 (ERR_INVALID) when it would not fit PATH_MAX. */
static int join(char out[PATH_MAX], const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	if (na + 1 + nb >= PATH_MAX)
		return err_set(ERR_INVALID, "path too long: %s/%s", a, b);
	memcpy(out, a, na);
	out[na] = '/';
	memcpy(out + na + 1, b, nb + 1);
	return 0;
}

static int check_tag(const char *tag)
{
	size_t n = tag ? strlen(tag) : 0;
	if (n == 0 || n > 200 || strchr(tag, '/') || strcmp(tag, ".") == 0 ||
	    strcmp(tag, "..") == 0)
		return err_set(ERR_INVALID, "bad snapshot name '%s'",
			       tag ? tag : "");
	return 0;
}

/* A reference to the table (storage_engine_table_unref), or NULL. */
static struct table *table_of(struct storage *db, const uint8_t id[16])
{
	return storage_engine_table_get(db, id);
}

/* The directory of a registered table, copied into out. */
static int dir_of(struct storage *db, const uint8_t id[16], char *out)
{
	struct table *t = table_of(db, id);
	if (!t)
		return -1;
	int n = snprintf(out, PATH_MAX, "%s", t->dir);
	storage_engine_table_unref(t);
	return n < PATH_MAX ? 0 : err_set(ERR_INVALID, "path too long");
}

static int snapshot_table(struct storage *db, struct table *t,
			  const uint8_t table_id[16], const char *tag);

int storage_snapshot(struct storage *db, const uint8_t table_id[16],
		     const char *tag)
{
	if (check_tag(tag))
		return -1;
	struct table *t = table_of(db, table_id);
	if (!t)
		return -1;
	int rc = snapshot_table(db, t, table_id, tag);
	storage_engine_table_unref(t);
	return rc;
}

static int snapshot_table(struct storage *db, struct table *t,
			  const uint8_t table_id[16], const char *tag)
{
	if (storage_flush(db, table_id) != 0)
		return -1;
	char root[PATH_MAX], dir[PATH_MAX];
	if (join(root, t->dir, SNAPSHOTS) || join(dir, root, tag))
		return -1;
	if (env_exists(db->o.env, dir) == 1)
		return err_set(ERR_EXISTS, "Snapshot %s already exists.", tag);
	if (env_mkdir_p(db->o.env, dir) != 0)
		return -1;
	pthread_mutex_lock(&db->mu);
	struct version *v = t->version;
	storage_version_ref(v);
	pthread_mutex_unlock(&db->mu);
	int rc = 0;
	for (size_t i = 0; i < v->count && !rc; i++)
		rc = sstable_link_into(v->ssts[i], dir);
	storage_version_unref(v);
	return rc ? -1 : env_sync_dir(db->o.env, dir);
}

struct names {
	char **v;
	size_t n, cap;
};

static int collect(void *arg, const char *name)
{
	struct names *l = arg;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		char **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	return (l->v[l->n] = strdup(name)) ? (l->n++, 0) : 1;
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* The entries of `dir` (none when it does not exist). */
static int list(struct storage *db, const char *dir, struct names *out)
{
	memset(out, 0, sizeof(*out));
	if (env_exists(db->o.env, dir) != 1)
		return 0;
	if (env_list_dir(db->o.env, dir, collect, out) != 0) {
		names_free(out);
		return err_prefix("%s", dir);
	}
	return 0;
}

int storage_snapshot_list(struct storage *db, const uint8_t table_id[16],
			  storage_snapshot_fn each, void *arg)
{
	char tdir[PATH_MAX], root[PATH_MAX];
	struct names tags;
	if (dir_of(db, table_id, tdir) != 0)
		return -1;
	if (join(root, tdir, SNAPSHOTS) || list(db, root, &tags) != 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < tags.n && !rc; i++) {
		char dir[PATH_MAX];
		struct names files;
		if ((rc = join(dir, root, tags.v[i])) != 0 ||
		    (rc = list(db, dir, &files)) != 0)
			break;
		struct storage_snapshot_info info = {.tag = tags.v[i]};
		for (size_t k = 0; k < files.n && !rc; k++) {
			char p[PATH_MAX], live[PATH_MAX];
			struct env_file *f;
			if ((rc = join(p, dir, files.v[k])) != 0 ||
			    (rc = join(live, tdir, files.v[k])) != 0 ||
			    (rc = env_file_open(db->o.env, p, ENV_FILE_READ,
						&f)) != 0)
				break;
			int64_t size = env_file_size(f);
			env_file_close(f);
			info.bytes += size > 0 ? (uint64_t)size : 0;
			/* a file the table still has costs nothing extra */
			if (env_exists(db->o.env, live) != 1)
				info.true_bytes +=
					size > 0 ? (uint64_t)size : 0;
		}
		names_free(&files);
		if (!rc)
			each(arg, &info);
	}
	names_free(&tags);
	return rc ? -1 : 0;
}

int storage_snapshot_clear(struct storage *db, const uint8_t table_id[16],
			   const char *tag)
{
	char tdir[PATH_MAX], root[PATH_MAX];
	struct names tags;
	if ((tag && check_tag(tag)) || dir_of(db, table_id, tdir) != 0)
		return -1;
	if (join(root, tdir, SNAPSHOTS) || list(db, root, &tags) != 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < tags.n && !rc; i++) {
		if (tag && strcmp(tag, tags.v[i]) != 0)
			continue;
		char dir[PATH_MAX];
		struct names files;
		if ((rc = join(dir, root, tags.v[i])) != 0 ||
		    (rc = list(db, dir, &files)) != 0)
			break;
		for (size_t k = 0; k < files.n && !rc; k++) {
			char p[PATH_MAX];
			rc = join(p, dir, files.v[k]) ||
			     env_unlink(db->o.env, p);
		}
		names_free(&files);
		if (!rc)
			rc = env_rmdir(db->o.env, dir);
	}
	names_free(&tags);
	return rc ? -1 : 0;
}
