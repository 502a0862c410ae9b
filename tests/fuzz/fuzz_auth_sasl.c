/* libFuzzer: an AUTH_RESPONSE token through the SASL PLAIN split: never
 * reads outside the token, what it returns lies inside it, and it agrees
 * with Cassandra's PlainTextSaslAuthenticator, restated here from the
 * front: accepted exactly when the token holds two NULs with a non-empty
 * authentication id between them and a non-empty password after the
 * second; the authorization id before the first is ignored. */
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
	size_t nuls = 0, first = 0, second = 0;
	for (size_t i = 0; i < size; i++) {
		if (tok[i] != 0)
			continue;
		if (nuls == 0)
			first = i;
		else if (nuls == 1)
			second = i;
		nuls++;
	}
	int want = nuls == 2 && second > first + 1 && second + 1 < size;
	const char *u, *p;
	size_t ul, pl;
	int got = cql_auth_sasl_plain(tok, size, &u, &ul, &p, &pl) == 0;
	if (got != want)
		abort();
	if (got) {
		const char *b = (const char *)tok;
		if (u != b + first + 1 || ul != second - first - 1 ||
		    p != b + second + 1 || pl != size - second - 1)
			abort();
	}
	free(tok);
	return 0;
}
