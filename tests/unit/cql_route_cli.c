/*
 * Prints where the C client routes keys, for test_stress_routing.py to
 * compare with the DataStax driver's token map:
 *
 *   cql_route_cli HOST[:PORT] HOSTS_EXPECTED QUERY KEY...
 *
 * Connects (discovering peers), waits until HOSTS_EXPECTED hosts are known
 * (reconnecting every 200 ms, up to 30 s), prepares QUERY (one blob bind:
 * the partition key), and prints "hosts N" then "KEY TOKEN ADDRESS" per key.
 */
#include "client/driver/cql_client.h"
#include "common/err.h"

#include <event2/event.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct cql_client *connect_all(struct event_base *base,
				      const struct inet_addr *contact,
				      size_t expected)
{
	for (int attempt = 0; attempt < 150; attempt++) {
		struct cql_client_config cfg;
		cql_client_config_defaults(&cfg);
		cfg.contact_points = contact;
		cfg.contact_count = 1;
		struct cql_client *c = cql_client_new(base, &cfg);
		if (c && cql_client_connect_sync(c) == 0 &&
		    cql_client_host_count(c) >= expected)
			return c;
		cql_client_delete(c);
		struct timespec nap = {0, 200 * 1000 * 1000};
		nanosleep(&nap, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct inet_addr contact;
	if (argc < 5 || inet_addr_parse(argv[1], 9042, &contact) != 0) {
		fprintf(stderr,
			"usage: cql_route_cli HOST HOSTS QUERY KEY...\n");
		return 2;
	}
	struct event_base *base = event_base_new();
	struct cql_client *c =
		connect_all(base, &contact, (size_t)atoi(argv[2]));
	if (!c) {
		fprintf(stderr, "connect: %s\n", err_msg());
		return 1;
	}
	struct cql_client_prepared *p = cql_client_prepare_sync(c, argv[3]);
	if (!p) {
		fprintf(stderr, "prepare: %s\n", err_msg());
		return 1;
	}
	printf("hosts %zu\n", cql_client_host_count(c));
	for (int i = 4; i < argc; i++) {
		struct cql_value v = {(int32_t)strlen(argv[i]),
				      (const uint8_t *)argv[i]};
		int64_t token;
		char addr[INET_ADDR_STRLEN];
		if (!cql_client_routing_token(p, &v, 1, &token)) {
			fprintf(stderr, "no routing token\n");
			return 1;
		}
		int h = cql_client_host_for_token(c, token);
		if (h < 0) {
			fprintf(stderr, "no token map\n");
			return 1;
		}
		struct inet_addr a = cql_client_host_address(c, (size_t)h);
		printf("%s %" PRId64 " %s\n", argv[i], token,
		       inet_addr_format_host(&a, addr, sizeof(addr)));
	}
	cql_client_delete(c);
	event_base_free(base);
	return 0;
}
