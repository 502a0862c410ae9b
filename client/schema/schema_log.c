/* The schema log (format and guarantees in schema_log.h). */
#define LOG_MODULE "client"
#include "client/schema/schema_log.h"

#include "client/cql/cql_parse.h"
#include "common/buf.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Version 1 records carry no time; version 2 ones end with the time
 * (be64 microseconds) an ALTER TABLE DROP was stamped with; version 3
 * ones (ALTER TABLE ADD) with a time (0) and the be16 number of columns
 * the table had where the statement ran. Records without either are
 * still written as version 1, which older nodes read. */
#define LOG_VERSION      1
#define LOG_VERSION_TS   2
#define LOG_VERSION_COLS 3
#define RECORD_MAX       (4u << 20)

struct cql_schema_log {
	struct env *env;
	struct env_file *f;
	char *path;
};

struct cql_schema_log *cql_schema_log_open(struct env *env, const char *path)
{
	struct cql_schema_log *l = calloc(1, sizeof(*l));
	if (!l || !(l->path = strdup(path))) {
		free(l);
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	l->env = env;
	if (env_file_open(env, path,
			  ENV_FILE_READ | ENV_FILE_WRITE | ENV_FILE_CREATE,
			  &l->f) != 0) {
		free(l->path);
		free(l);
		return NULL;
	}
	return l;
}

void cql_schema_log_close(struct cql_schema_log *l)
{
	if (!l)
		return;
	env_file_close(l->f);
	free(l->path);
	free(l);
}

int cql_schema_record_encode(struct buf *out, const char *keyspace,
			     const uint8_t id[16], const char *cql, size_t len,
			     int64_t time_us, int columns_before)
{
	size_t kl = keyspace ? strlen(keyspace) : 0;
	if (len > RECORD_MAX || kl > UINT16_MAX || columns_before > UINT16_MAX)
		return err_set(ERR_INVALID,
			       "schema statement too large to log");
	uint8_t version = columns_before >= 0 ? LOG_VERSION_COLS
			  : time_us           ? LOG_VERSION_TS
					      : LOG_VERSION;
	size_t mark = out->len;
	int rc = buf_put_u8(out, version) || buf_append(out, id, 16) ||
		 buf_put_be16(out, (uint16_t)kl) ||
		 buf_append(out, keyspace, kl) ||
		 buf_put_be32(out, (uint32_t)len) ||
		 buf_append(out, cql, len) ||
		 (version >= LOG_VERSION_TS &&
		  buf_put_be64(out, (uint64_t)time_us)) ||
		 (version == LOG_VERSION_COLS &&
		  buf_put_be16(out, (uint16_t)columns_before));
	if (rc)
		out->len = mark;
	return rc ? -1 : 0;
}

int cql_schema_log_append_record(struct cql_schema_log *l, const uint8_t *body,
				 size_t len)
{
	struct buf b;
	buf_init(&b);
	int rc = buf_put_be32(&b, (uint32_t)len) ||
		 buf_put_be32(&b, crc32c(0, body, len)) ||
		 buf_append(&b, body, len);
	if (rc == 0)
		rc = env_file_append(l->f, b.data, b.len);
	buf_free(&b);
	return rc ? -1 : 0;
}

int cql_schema_log_append(struct cql_schema_log *l, const char *keyspace,
			  const uint8_t id[16], const char *cql, size_t len)
{
	struct buf body;
	buf_init(&body);
	int rc = cql_schema_record_encode(&body, keyspace, id, cql, len, 0, -1);
	if (rc == 0)
		rc = cql_schema_log_append_record(l, body.data, body.len);
	buf_free(&body);
	return rc;
}

int cql_schema_log_sync(struct cql_schema_log *l)
{
	return env_file_sync(l->f);
}

enum cql_schema_status cql_schema_record_apply(struct cql_schema *s,
					       const uint8_t *p, size_t n,
					       struct cql_schema_change *change)
{
	struct cursor c = cursor_make(p, n);
	uint8_t version;
	struct slice id, ks, cql;
	uint16_t kl;
	uint32_t ql;
	uint64_t time_us = 0;
	uint16_t cols = 0;
	if (cursor_u8(&c, &version) != 0 || version < LOG_VERSION ||
	    version > LOG_VERSION_COLS || cursor_take(&c, 16, &id) != 0 ||
	    cursor_be16(&c, &kl) != 0 || cursor_take(&c, kl, &ks) != 0 ||
	    cursor_be32(&c, &ql) != 0 || cursor_take(&c, ql, &cql) != 0 ||
	    (version >= LOG_VERSION_TS && cursor_be64(&c, &time_us) != 0) ||
	    (version == LOG_VERSION_COLS && cursor_be16(&c, &cols) != 0) ||
	    cursor_left(&c) != 0) {
		err_set(ERR_CORRUPT, "malformed schema record");
		return CQL_SCHEMA_INVALID;
	}
	char keyspace[256];
	snprintf(keyspace, sizeof(keyspace), "%.*s", (int)ks.len,
		 (const char *)ks.ptr);
	struct arena a;
	int binds;
	arena_create(&a, 0);
	struct cql_stmt *st =
		cql_parse(&a, (const char *)cql.ptr, cql.len, &binds, NULL);
	if (st && cql_schema_stmt_timed(st) && time_us)
		cql_schema_stmt_set_time(st, (int64_t)time_us);
	enum cql_schema_status r =
		st ? cql_schema_apply_replicated(
			     s, st, kl ? keyspace : NULL, id.ptr,
			     version == LOG_VERSION_COLS ? cols : -1, change)
		   : CQL_SCHEMA_INVALID;
	arena_destroy(&a);
	return r;
}

/* One record of the file. */
static int apply_record(struct cql_schema *s, const uint8_t *p, size_t n,
			const char *path, uint64_t off)
{
	struct cql_schema_change change;
	enum cql_schema_status r = cql_schema_record_apply(s, p, n, &change);
	if (r != CQL_SCHEMA_OK && r != CQL_SCHEMA_NOOP)
		return err_set(ERR_CORRUPT,
			       "%s: statement at offset %llu no longer applies "
			       "(%s)",
			       path, (unsigned long long)off, err_msg());
	return 0;
}

long cql_schema_log_replay(struct cql_schema_log *l, struct cql_schema *s,
			   cql_schema_record_fn fn, void *arg)
{
	int64_t size = env_file_size(l->f);
	uint64_t off = 0;
	long applied = 0;
	if (size < 0)
		return -1;
	while (off < (uint64_t)size) {
		uint8_t head[8];
		if ((uint64_t)size - off < 8)
			break; /* torn header */
		if (env_file_pread(l->f, head, 8, off) != 8)
			return -1;
		uint32_t len = be32_load(head), crc = be32_load(head + 4);
		if (len > RECORD_MAX + 512)
			return err_set(ERR_CORRUPT,
				       "%s: bad record length %u at "
				       "offset %llu",
				       l->path, len, (unsigned long long)off);
		if ((uint64_t)size - off - 8 < len)
			break; /* torn body */
		uint8_t *body = malloc(len ? len : 1);
		if (!body)
			return err_set(ERR_NOMEM, "out of memory");
		if (env_file_pread(l->f, body, len, off + 8) != (ssize_t)len) {
			free(body);
			return -1;
		}
		bool last = off + 8 + len == (uint64_t)size;
		if (crc32c(0, body, len) != crc) {
			free(body);
			if (last)
				break; /* a torn final write */
			return err_set(ERR_CORRUPT,
				       "%s: checksum mismatch at offset "
				       "%llu",
				       l->path, (unsigned long long)off);
		}
		int rc = apply_record(s, body, len, l->path, off);
		if (rc == 0 && fn)
			rc = fn(arg, body, len);
		free(body);
		if (rc != 0)
			return -1;
		applied++;
		off += 8 + (uint64_t)len;
	}
	if (off < (uint64_t)size) {
		LOG_WARN("%s: dropping a torn record at offset %llu (%lld "
			 "bytes)",
			 l->path, (unsigned long long)off,
			 (long long)((uint64_t)size - off));
		if (env_file_truncate(l->f, off) != 0 ||
		    env_file_sync(l->f) != 0)
			return -1;
	}
	return applied;
}
