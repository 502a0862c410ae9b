/*
 * Reads "TYPE<TAB>LITERAL" lines and prints the serialized value as hex (or
 * "NULL" / "ERR <message>"), for test_cql_values_driver.py. TYPE is a CQL
 * type name, "list:T", "set:T" or "map:K:V". Functions see a fixed clock
 * (2024-01-31 12:00:00 UTC) and a fixed random source.
 */
#include "client/cql/cql_parse.h"
#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "common/err.h"

#include <stdio.h>
#include <string.h>

static uint16_t type_id(const char *name)
{
	static const uint16_t ids[] = {
		CQL_TYPE_ASCII,    CQL_TYPE_BIGINT,   CQL_TYPE_BLOB,
		CQL_TYPE_BOOLEAN,  CQL_TYPE_DECIMAL,  CQL_TYPE_DOUBLE,
		CQL_TYPE_FLOAT,    CQL_TYPE_INT,      CQL_TYPE_TIMESTAMP,
		CQL_TYPE_UUID,     CQL_TYPE_VARCHAR,  CQL_TYPE_VARINT,
		CQL_TYPE_TIMEUUID, CQL_TYPE_INET,     CQL_TYPE_DATE,
		CQL_TYPE_TIME,     CQL_TYPE_SMALLINT, CQL_TYPE_TINYINT,
		CQL_TYPE_DURATION};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (strcmp(cql_type_name(ids[i]), name) == 0)
			return ids[i];
	return 0xffff;
}

static uint64_t fixed_random(void *arg)
{
	(void)arg;
	return 0x0123456789abcdefull;
}

int main(void)
{
	char line[4096];
	struct cql_timeuuid_gen gen;
	cql_timeuuid_gen_init(&gen, 42);
	struct cql_fn_ctx fn = {.now_us = 1706702400000000ll,
				.timeuuids = &gen,
				.random = fixed_random};
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		struct storage_type t = {0}, e = {0}, v = {0};
		const struct storage_type *subs[2] = {&e, &v};
		char *p = line;
		if (strncmp(p, "list:", 5) == 0 || strncmp(p, "set:", 4) == 0 ||
		    strncmp(p, "map:", 4) == 0) {
			t.kind = p[0] == 'l'   ? CQL_TYPE_LIST
				 : p[0] == 's' ? CQL_TYPE_SET
					       : CQL_TYPE_MAP;
			p = strchr(p, ':') + 1;
			char *colon = strchr(p, ':');
			if (colon) {
				*colon = '\0';
				v.kind = type_id(colon + 1);
			}
			e.kind = type_id(p);
			t.count = colon ? 2 : 1;
			t.sub = subs;
		} else {
			t.kind = type_id(p);
		}
		char stmt[4200];
		snprintf(stmt, sizeof(stmt), "INSERT INTO t (v) VALUES (%s)",
			 tab + 1);
		struct arena a;
		int binds;
		arena_create(&a, 0);
		struct cql_stmt *s =
			cql_parse(&a, stmt, strlen(stmt), &binds, NULL);
		struct buf out;
		buf_init(&out);
		int rc = s ? cql_term_serialize(s->u.insert.values[0], &t, "v",
						&fn, NULL, &out)
			   : -1;
		if (rc < 0) {
			printf("ERR %s\n", err_msg());
		} else if (rc == 1) {
			printf("NULL\n");
		} else {
			for (size_t i = 0; i < out.len; i++)
				printf("%02x", out.data[i]);
			printf("\n");
		}
		buf_free(&out);
		arena_destroy(&a);
	}
	return 0;
}
