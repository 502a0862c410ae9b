/* libFuzzer: any statement text parses or fails with a clean error. */
#include "client/cql/cql_parse.h"
#include "common/err.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena a;
	int binds;
	const char **names;
	arena_create(&a, 0);
	struct cql_stmt *s =
		cql_parse(&a, (const char *)data, size, &binds, &names);
	if (!s && err_code() != ERR_INVALID && err_code() != ERR_UNSUPPORTED &&
	    err_code() != ERR_NOMEM)
		abort(); /* a parser failure must say why */
	arena_destroy(&a);
	return 0;
}
