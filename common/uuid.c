#include "common/uuid.h"

#include "common/err.h"

#include <string.h>

void uuid_format(const uint8_t id[16], char out[UUID_TEXT_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[id[i] >> 4];
		out[o++] = hex[id[i] & 15];
	}
	out[o] = '\0';
}

int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int uuid_parse_n(const char *t, uint8_t out[16])
{
	size_t o = 0;
	for (size_t i = 0; i < UUID_TEXT_LEN;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (t[i] != '-')
				return -1;
			i++;
			continue;
		}
		int a = hex_digit(t[i]);
		int b = a < 0 ? -1 : hex_digit(t[i + 1]);
		if (b < 0)
			return -1;
		out[o++] = (uint8_t)(a << 4 | b);
		i += 2;
	}
	return 0;
}

int uuid_parse(const char *text, uint8_t out[16])
{
	if (strlen(text) != UUID_TEXT_LEN || uuid_parse_n(text, out) != 0)
		return err_set(ERR_INVALID, "bad uuid '%s'", text);
	return 0;
}
