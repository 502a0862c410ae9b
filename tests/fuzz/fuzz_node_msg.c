/* libFuzzer: the node's wire decoders. The first byte picks one:
 * internode handshake, envelope, admin request, admin response. */
#include "node/messaging_msg.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	switch (data[0] % 4) {
	case 0: {
		struct messaging_handshake h;
		(void)messaging_handshake_decode(p, n, &h);
		break;
	}
	case 1: {
		struct messaging_envelope e;
		if (messaging_envelope_decode(p, n, &e) == 0)
			messaging_envelope_free(&e);
		break;
	}
	case 2: {
		struct admin_request r;
		if (admin_request_decode(p, n, &r) == 0)
			admin_request_free(&r);
		break;
	}
	default: {
		struct admin_response r;
		if (admin_response_decode(p, n, &r) == 0)
			admin_response_free(&r);
		break;
	}
	}
	return 0;
}
