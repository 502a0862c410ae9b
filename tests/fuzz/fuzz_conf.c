/* libFuzzer: node.yaml and rackdc.properties parsing never crash, leak or
 * read out of bounds, whatever the bytes. */
#include "conf/conf.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf c;
	if (conf_init_defaults(&c) != 0)
		return 0;
	(void)conf_parse_yaml(&c, "fuzz.yaml", data, size);
	(void)conf_parse_rackdc(&c, "fuzz.properties", (const char *)data,
				size);
	conf_free(&c);
	return 0;
}
