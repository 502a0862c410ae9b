/* libFuzzer: schema records (what peers push and the schema log replays)
 * apply or fail cleanly. The input is a sequence of records, each a be16
 * length and a record body, applied in order to a fresh registry, so
 * CREATE, ALTER ... ADD/DROP/WITH and ALTER KEYSPACE (version-1, 2 and 3
 * bodies) combine, CREATEs and ADDs that raced on two nodes settle or
 * mark the table, and options keep the write stamped last. */
#include "client/schema/schema_log.h"
#include "common/err.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cql_schema *s = cql_schema_new();
	if (!s)
		return 0;
	size_t off = 0;
	while (size - off >= 2) {
		size_t len = (size_t)data[off] << 8 | data[off + 1];
		off += 2;
		if (len > size - off)
			break;
		struct cql_schema_change ch;
		enum cql_schema_status st =
			cql_schema_record_apply(s, data + off, len, &ch);
		if (st != CQL_SCHEMA_OK && st != CQL_SCHEMA_NOOP &&
		    err_code() == ERR_NONE)
			abort(); /* a refused record must say why */
		off += len;
	}
	uint8_t v[16];
	cql_schema_version(s, v);
	cql_schema_delete(s);
	return 0;
}
