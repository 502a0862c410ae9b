#include "common/inet.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int inet_addr_parse_host(const char *text, struct inet_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, text, out->ip) == 1) {
		out->family = INET_V4;
		return 0;
	}
	if (inet_pton(AF_INET6, text, out->ip) == 1) {
		out->family = INET_V6;
		return 0;
	}
	return err_set(ERR_INVALID,
		       "'%s' is not a numeric IPv4 or IPv6 address", text);
}

static int parse_port(const char *s, const char *whole, uint16_t *out)
{
	char *end;
	if (*s == '\0')
		return err_set(ERR_INVALID, "missing port in '%s'", whole);
	long v = strtol(s, &end, 10);
	if (*end != '\0' || v < 1 || v > 65535)
		return err_set(ERR_INVALID, "bad port in '%s'", whole);
	*out = (uint16_t)v;
	return 0;
}

int inet_addr_parse(const char *text, uint16_t default_port,
		    struct inet_addr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port = NULL;
	size_t n;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close)
			return err_set(ERR_INVALID, "unclosed '[' in '%s'",
				       text);
		n = (size_t)(close - text - 1);
		if (n >= sizeof(host))
			return err_set(ERR_INVALID, "bad address '%s'", text);
		memcpy(host, text + 1, n);
		host[n] = '\0';
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
			return err_set(ERR_INVALID, "bad address '%s'", text);
	} else {
		const char *colon = strchr(text, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* bare IPv6 */
		n = colon ? (size_t)(colon - text) : strlen(text);
		if (n >= sizeof(host))
			return err_set(ERR_INVALID, "bad address '%s'", text);
		memcpy(host, text, n);
		host[n] = '\0';
		if (colon)
			port = colon + 1;
	}
	if (inet_addr_parse_host(host, out) != 0)
		return -1;
	if (port)
		return parse_port(port, text, &out->port);
	out->port = default_port;
	return 0;
}

char *inet_addr_format_host(const struct inet_addr *a, char *dst, size_t cap)
{
	if (a->family == INET_V4) {
		inet_ntop(AF_INET, a->ip, dst, (socklen_t)cap);
	} else if (a->family == INET_V6) {
		inet_ntop(AF_INET6, a->ip, dst, (socklen_t)cap);
	} else {
		snprintf(dst, cap, "?");
	}
	return dst;
}

char *inet_addr_format(const struct inet_addr *a, char *dst, size_t cap)
{
	char host[INET6_ADDRSTRLEN];
	inet_addr_format_host(a, host, sizeof(host));
	if (a->family == INET_V6)
		snprintf(dst, cap, "[%s]:%u", host, a->port);
	else
		snprintf(dst, cap, "%s:%u", host, a->port);
	return dst;
}

int inet_addr_cmp(const struct inet_addr *a, const struct inet_addr *b)
{
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	int c = memcmp(a->ip, b->ip, sizeof(a->ip));
	if (c != 0)
		return c;
	return a->port < b->port ? -1 : a->port > b->port;
}

bool inet_addr_eq(const struct inet_addr *a, const struct inet_addr *b)
{
	return inet_addr_cmp(a, b) == 0;
}

bool inet_addr_is_wildcard(const struct inet_addr *a)
{
	static const uint8_t zero[16];
	return a->family != INET_NONE && memcmp(a->ip, zero, 16) == 0;
}

bool inet_addr_is_loopback(const struct inet_addr *a)
{
	static const uint8_t one6[16] = {[15] = 1};
	if (a->family == INET_V4)
		return a->ip[0] == 127;
	return a->family == INET_V6 && memcmp(a->ip, one6, 16) == 0;
}

size_t inet_addr_to_sockaddr(const struct inet_addr *a,
			     struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == INET_V4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(a->port);
		memcpy(&sin->sin_addr, a->ip, 4);
		return sizeof(*sin);
	}
	if (a->family == INET_V6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(a->port);
		memcpy(&sin6->sin6_addr, a->ip, 16);
		return sizeof(*sin6);
	}
	return 0;
}

int inet_addr_from_sockaddr(const void *sa, size_t salen, struct inet_addr *out)
{
	const struct sockaddr *s = sa;
	memset(out, 0, sizeof(*out));
	if (s->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = sa;
		out->family = INET_V4;
		memcpy(out->ip, &sin->sin_addr, 4);
		out->port = ntohs(sin->sin_port);
		return 0;
	}
	if (s->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = sa;
		out->family = INET_V6;
		memcpy(out->ip, &sin6->sin6_addr, 16);
		out->port = ntohs(sin6->sin6_port);
		return 0;
	}
	return err_set(ERR_INVALID, "unsupported socket address family %d",
		       s->sa_family);
}

int inet_addr_resolve(const char *name, struct inet_addr *out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int r = getaddrinfo(name, NULL, &hints, &res);
	if (r != 0)
		return err_set(ERR_INVALID, "cannot resolve host %s: %s", name,
			       gai_strerror(r));
	const struct addrinfo *pick = res;
	for (const struct addrinfo *i = res; i; i = i->ai_next)
		if (i->ai_family == AF_INET) {
			pick = i;
			break;
		}
	r = inet_addr_from_sockaddr(pick->ai_addr, (size_t)pick->ai_addrlen,
				    out);
	freeaddrinfo(res);
	return r;
}
