/* libFuzzer: an AUTH_RESPONSE token through the SASL PLAIN split: never
 * reads outside the token, and what it returns lies inside it. */
#include "client/auth/auth.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly `size` bytes, so ASan sees any overread */
	uint8_t *tok = malloc(size ? size : 1);
	if (!tok)
		return 0;
	if (size)
		memcpy(tok, data, size);
	const char *u, *p;
	size_t ul, pl;
	if (cql_auth_sasl_plain(tok, size, &u, &ul, &p, &pl) == 0) {
		const char *b = (const char *)tok, *e = b + size;
		if (ul == 0 || pl == 0 || u < b || u + ul > e || p < b ||
		    p + pl > e || memchr(u, 0, ul) || memchr(p, 0, pl))
			abort();
	}
	free(tok);
	return 0;
}
