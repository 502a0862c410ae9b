/*
 * Network endpoints (address + port), IPv4 or IPv6, as plain values that can
 * be compared, hashed, copied and printed without touching the resolver.
 * Names are never resolved here: configuration takes numeric addresses, so
 * nothing on the event loop can block on DNS.
 */
#ifndef CASSINI_COMMON_INET_H
#define CASSINI_COMMON_INET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr_storage;

enum inet_family { INET_NONE = 0, INET_V4 = 4, INET_V6 = 6 };

struct inet_addr {
	uint8_t family; /* enum inet_family */
	uint8_t ip[16]; /* v4 uses the first 4 bytes; the rest are zero */
	uint16_t port;
};

/* "127.0.0.1", "127.0.0.1:7000", "::1", "[::1]:7000". A missing port takes
 * `default_port`. Returns 0 or -1 (ERR_INVALID). */
int inet_addr_parse(const char *text, uint16_t default_port,
		    struct inet_addr *out);
/* Address without port ("127.0.0.1", "::1"). */
int inet_addr_parse_host(const char *text, struct inet_addr *out);

#define INET_ADDR_STRLEN 56 /* "[v6]:port" with room to spare */
/* "127.0.0.1:7000" / "[::1]:7000"; returns dst. */
char *inet_addr_format(const struct inet_addr *a, char *dst, size_t cap);
/* Address only ("127.0.0.1" / "::1"); returns dst. */
char *inet_addr_format_host(const struct inet_addr *a, char *dst, size_t cap);

int inet_addr_cmp(const struct inet_addr *a, const struct inet_addr *b);
bool inet_addr_eq(const struct inet_addr *a, const struct inet_addr *b);
bool inet_addr_is_wildcard(const struct inet_addr *a);
/* 127.0.0.0/8 or ::1. */
bool inet_addr_is_loopback(const struct inet_addr *a);

/* Converts to a sockaddr; returns its length, or 0 for INET_NONE. */
size_t inet_addr_to_sockaddr(const struct inet_addr *a,
			     struct sockaddr_storage *ss);
int inet_addr_from_sockaddr(const void *sa, size_t salen,
			    struct inet_addr *out);

/* A host name's address by getaddrinfo: its first IPv4 address, else its
 * first (port 0). Blocking: for command-line tools and start-up, never on
 * an event loop. 0 or -1 (ERR_INVALID "cannot resolve host NAME: why"). */
int inet_addr_resolve(const char *name, struct inet_addr *out);

#endif
