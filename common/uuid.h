/*
 * UUIDs as text: 36 characters, lower-case hex in groups of 8-4-4-4-12,
 * as Cassandra and the drivers print them.
 */
#ifndef CASSINI_COMMON_UUID_H
#define CASSINI_COMMON_UUID_H

#include <stdint.h>

#define UUID_TEXT_LEN 36

void uuid_format(const uint8_t id[16], char out[UUID_TEXT_LEN + 1]);
/* Parses the 36 characters at `t` (no terminator needed; either case).
 * 0, or -1 when they are not a uuid (err not set). */
int uuid_parse_n(const char *t, uint8_t out[16]);
/* Parses a whole string. 0, or -1 with ERR_INVALID. */
int uuid_parse(const char *text, uint8_t out[16]);

#endif
