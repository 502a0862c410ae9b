/*
 * An SSTable's storage-attached index components: found in TOC.txt at
 * open, opened (header and block directory read and checked,
 * sai_file_open) on the first query that needs one, kept open while the
 * SSTable is; queries read the blocks they need (sai_file_lookup). A
 * component that is missing, fails its checks at open or has a block that
 * fails them when read is unusable for the life of the reader: logged
 * once, and queries scan that SSTable instead.
 */
#define LOG_MODULE "storage"
#include "storage/sai_component.h"
#include "storage/sai_internal.h"
#include "storage/sstable_internal.h"

#include "common/buf.h"
#include "common/env.h"
#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOC_MAX (64 * 1024)

static int add_comp(struct sstable *s, const char *line, size_t n)
{
	/* "SAI_<index>.db" */
	if (n < 8 || memcmp(line, "SAI_", 4) != 0 ||
	    memcmp(line + n - 3, ".db", 3) != 0)
		return 0;
	struct sst_sai *v = realloc(s->sai, (s->sai_count + 1) * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "sstable indexes");
	s->sai = v;
	struct sst_sai *e = &v[s->sai_count];
	memset(e, 0, sizeof(*e));
	e->comp = strndup(line, n);
	e->index = strndup(line + 4, n - 7);
	if (!e->comp || !e->index) {
		free(e->comp);
		free(e->index);
		return err_set(ERR_NOMEM, "sstable indexes");
	}
	s->sai_count++;
	return 0;
}

int sst_sai_open(struct sstable *s)
{
	pthread_mutex_init(&s->sai_mu, NULL);
	char *path = sst_path(s->dir, s->gen, "TOC.txt", false);
	if (!path)
		return -1;
	uint8_t *toc = NULL;
	size_t len = 0;
	int rc = env_read_file(s->env, path, TOC_MAX, &toc, &len);
	free(path);
	if (rc)
		return 0; /* no index components known: queries scan it */
	rc = 0;
	const char *p = (const char *)toc, *end = p + len;
	while (p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		rc = add_comp(s, p, n);
		p += n + 1;
	}
	free(toc);
	/* the components' sizes (tablestats); one missing is 0 */
	for (size_t i = 0; !rc && i < s->sai_count; i++) {
		char *cp = sst_path(s->dir, s->gen, s->sai[i].comp, false);
		struct env_file *f = NULL;
		if (cp && env_file_open(s->env, cp, ENV_FILE_READ, &f) == 0) {
			int64_t sz = env_file_size(f);
			s->sai[i].disk_bytes = sz > 0 ? (uint64_t)sz : 0;
			env_file_close(f);
		}
		free(cp);
	}
	if (!rc)
		err_clear();
	return rc;
}

uint64_t sst_sai_disk_bytes(struct sstable *s, const char *index)
{
	uint64_t n = 0;
	pthread_mutex_lock(&s->sai_mu);
	for (size_t i = 0; i < s->sai_count; i++)
		if (strcmp(s->sai[i].index, index) == 0)
			n = s->sai[i].disk_bytes;
	pthread_mutex_unlock(&s->sai_mu);
	return n;
}

void sst_sai_free(struct sstable *s)
{
	for (size_t i = 0; i < s->sai_count; i++) {
		free(s->sai[i].index);
		free(s->sai[i].comp);
		sai_file_close(s->sai[i].file);
	}
	free(s->sai);
	s->sai = NULL;
	s->sai_count = 0;
	while (s->sai_retired) {
		struct sst_sai_old *o = s->sai_retired;
		s->sai_retired = o->next;
		sai_file_close(o->file);
		free(o);
	}
	pthread_mutex_destroy(&s->sai_mu);
}

static void log_unusable(const struct sstable *s, const struct sst_sai *e)
{
	char *path = sst_path(s->dir, s->gen, e->comp, false);
	LOG_AT(LOG_LEVEL_WARN,
	       "index component %s is missing or corrupt: queries of index "
	       "%s scan this sstable instead",
	       path ? path : e->comp, e->index);
	free(path);
}

int sst_sai_get(struct sstable *s, const struct storage_index *ix,
		struct sai_file **out)
{
	struct sst_sai *e = NULL;
	pthread_mutex_lock(&s->sai_mu);
	for (size_t i = 0; i < s->sai_count && !e; i++)
		if (strcmp(s->sai[i].index, ix->name) == 0)
			e = &s->sai[i];
	if (!e) {
		pthread_mutex_unlock(&s->sai_mu);
		return -1; /* written before the index was created */
	}
	if (e->state == 0) {
		char *path = sst_path(s->dir, s->gen, e->comp, false);
		int rc = path ? sai_file_open(s->env, path, s->cache, &e->file)
			      : SAI_NOMEM;
		free(path);
		const uint8_t *id;
		uint32_t idl;
		if (rc == SAI_OK) {
			sai_file_ident(e->file, &id, &idl);
			if (idl < sizeof(e->ident)) {
				memcpy(e->ident, id, idl);
				e->ident[idl] = '\0';
				e->state = 1;
			} else {
				e->state =
					-1; /* an identity too long: not ours */
			}
		} else if (rc != SAI_NOMEM) {
			e->state = -1;
			log_unusable(s, e);
		}
	}
	char want[64];
	int ok = e->state == 1 &&
		 sai_index_ident(s->t, ix, want, sizeof(want)) >= 0 &&
		 strcmp(want, e->ident) == 0;
	if (ok)
		*out = e->file;
	pthread_mutex_unlock(&s->sai_mu);
	return ok ? 0 : -1;
}

void sst_sai_damaged(struct sstable *s, const struct sai_file *f)
{
	pthread_mutex_lock(&s->sai_mu);
	for (size_t i = 0; i < s->sai_count; i++) {
		struct sst_sai *e = &s->sai[i];
		if (e->file == f && e->state == 1) {
			e->state =
				-1; /* the file stays open: readers hold it */
			log_unusable(s, e);
		}
	}
	pthread_mutex_unlock(&s->sai_mu);
}

size_t sst_sai_resident_bytes(struct sstable *s)
{
	size_t n = 0;
	pthread_mutex_lock(&s->sai_mu);
	for (size_t i = 0; i < s->sai_count; i++)
		if (s->sai[i].file)
			n += sai_file_resident_bytes(s->sai[i].file);
	pthread_mutex_unlock(&s->sai_mu);
	return n;
}

bool sst_sai_listed(struct sstable *s, const char *index)
{
	bool found = false;
	pthread_mutex_lock(&s->sai_mu);
	for (size_t i = 0; i < s->sai_count && !found; i++)
		found = strcmp(s->sai[i].index, index) == 0;
	pthread_mutex_unlock(&s->sai_mu);
	return found;
}

/* TOC.txt with "comp" listed (once). */
static int toc_add(struct sstable *s, const char *comp)
{
	char *path = sst_path(s->dir, s->gen, "TOC.txt", false);
	if (!path)
		return -1;
	uint8_t *toc = NULL;
	size_t len = 0;
	if (env_read_file(s->env, path, TOC_MAX, &toc, &len)) {
		free(path);
		return -1;
	}
	size_t cn = strlen(comp);
	bool have = false;
	for (const char *p = (const char *)toc, *end = p + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		have = have || (n == cn && memcmp(p, comp, n) == 0);
		p += n + 1;
	}
	int rc = 0;
	if (!have) {
		struct buf b;
		buf_init(&b);
		rc = buf_append(&b, toc, len);
		if (!rc && len && toc[len - 1] != '\n')
			rc = buf_put_u8(&b, '\n');
		rc = rc || buf_append(&b, comp, cn) || buf_put_u8(&b, '\n');
		if (rc)
			rc = err_set(ERR_NOMEM, "sstable TOC");
		else
			rc = env_write_file_atomic(s->env, path, b.data, b.len);
		buf_free(&b);
	}
	free(toc);
	free(path);
	return rc ? -1 : env_sync_dir(s->env, s->dir);
}

/* The component built by b to `path` (its .tmp renamed), synced. */
static int save_built(struct sstable *s, const char *path,
		      struct sai_builder *b, const void *ident,
		      uint32_t ident_len, uint64_t *len)
{
	size_t n = strlen(path) + 5;
	char *tmp = malloc(n);
	if (!tmp)
		return err_set(ERR_NOMEM, "sstable index");
	snprintf(tmp, n, "%s.tmp", path);
	struct env_file *f;
	int rc = env_file_open(
		s->env, tmp, ENV_FILE_WRITE | ENV_FILE_CREATE | ENV_FILE_TRUNC,
		&f);
	if (!rc) {
		int br = sai_build_write(b, ident, ident_len, f, len);
		if (br == SAI_NOMEM)
			err_set(ERR_NOMEM, "index build");
		else if (br == SAI_CORRUPT)
			err_set(ERR_CORRUPT, "a sorted run of index build");
		rc = br != SAI_OK || env_file_sync(f) ? -1 : 0;
		if (env_file_close(f))
			rc = -1;
		if (!rc)
			rc = env_rename(s->env, tmp, path);
		if (rc)
			env_unlink(s->env, tmp);
	}
	free(tmp);
	return rc ? -1 : env_sync_dir(s->env, s->dir);
}

int sst_sai_install(struct sstable *s, const struct storage_index *ix,
		    struct sai_builder *b, const void *ident,
		    uint32_t ident_len)
{
	size_t cn = strlen(ix->name) + 8;
	char *comp = malloc(cn);
	if (!comp)
		return err_set(ERR_NOMEM, "sstable index");
	snprintf(comp, cn, "SAI_%s.db", ix->name);
	char *path = sst_path(s->dir, s->gen, comp, false);
	uint64_t len = 0;
	int rc = !path ? -1 : save_built(s, path, b, ident, ident_len, &len);
	free(path);
	/* the component first: a TOC never lists a missing one */
	if (rc || toc_add(s, comp)) {
		free(comp);
		return -1;
	}
	pthread_mutex_lock(&s->sai_mu);
	struct sst_sai *e = NULL;
	for (size_t i = 0; i < s->sai_count && !e; i++)
		if (strcmp(s->sai[i].index, ix->name) == 0)
			e = &s->sai[i];
	if (!e) {
		rc = add_comp(s, comp, strlen(comp));
		if (!rc)
			s->sai[s->sai_count - 1].disk_bytes = len;
	} else if (e->file) {
		/* a reader may hold the old file */
		struct sst_sai_old *o = malloc(sizeof(*o));
		if (o) {
			o->file = e->file;
			o->next = s->sai_retired;
			s->sai_retired = o;
			e->file = NULL;
			e->state = 0;
		} else {
			rc = err_set(ERR_NOMEM, "sstable index");
		}
	} else {
		e->state = 0; /* unusable before: loaded again */
	}
	if (e)
		e->disk_bytes = len;
	pthread_mutex_unlock(&s->sai_mu);
	free(comp);
	return rc;
}
