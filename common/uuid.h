/*
 * UUIDs as text: 36 characters, lower-case hex in groups of 8-4-4-4-12,
 * as Cassandra and the drivers print them; and the hex digit they are
 * made of (CQL's blob literals use it too).
 */
#ifndef CASSINI_COMMON_UUID_H
#define CASSINI_COMMON_UUID_H

#include <stdint.h>

#define UUID_TEXT_LEN 36

/* 0-15 for a hex digit of either case, else -1. */
int hex_digit(char c);

void uuid_format(const uint8_t id[16], char out[UUID_TEXT_LEN + 1]);
/* Parses the 36 characters at `t` (no terminator needed; either case).
 * 0, or -1 when they are not a uuid (err not set). */
int uuid_parse_n(const char *t, uint8_t out[16]);
/* Parses a whole string. 0, or -1 with ERR_INVALID. */
int uuid_parse(const char *text, uint8_t out[16]);

#endif
