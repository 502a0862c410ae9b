/*
 * Helpers shared by the ring suites (test_ring.c, test_ring_alloc.c).
 */
#ifndef CASSINI_TESTS_RING_TESTUTIL_H
#define CASSINI_TESTS_RING_TESTUTIL_H

#include "common/inet.h"

#include <stddef.h>
#include <stdint.h>

/* The i-th test endpoint's address: 10.0.x.y. */
static inline struct inet_addr addr_of(size_t i)
{
	struct inet_addr a = {0};
	a.family = INET_V4;
	a.ip[0] = 10;
	a.ip[2] = (uint8_t)(i >> 8);
	a.ip[3] = (uint8_t)i;
	return a;
}

#endif
