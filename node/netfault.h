/*
 * WAN faults for test clusters: delay, jitter, loss, a rate limit and a
 * flapping link, applied by the internode transport to the messages this
 * node sends to chosen peers (node.yaml `test_fault_injection: true`; the
 * transport has no fault table otherwise, and the admin commands refuse).
 *
 * This file is the arithmetic: a table of links (one per destination
 * address) and, for a message of `len` bytes sent now, the moment it may
 * reach the socket. The transport holds the message until then on an env
 * timer; nothing sleeps.
 *
 * The model is a TCP connection over a slow link, because that is what
 * internode traffic rides on:
 *   - delay: one way, so a request and its answer each wait (a round trip
 *     costs twice the delay when both sides have the rule, as
 *     `scripts/cluster link` sets it);
 *   - jitter: uniform in [-jitter, +jitter] on top of the delay;
 *   - loss: a lost segment is sent again after the retransmission timeout
 *     (the larger of 200 ms, Linux's minimum, and the round trip plus four
 *     jitters), and the messages behind it wait too: loss adds latency,
 *     it never loses a message;
 *   - rate: bits per second; messages queue behind each other;
 *   - flap: the link is down for `flap_down` at the end of every
 *     `flap_period` (counted from when the rule was set); what is sent
 *     meanwhile waits until it comes back, as TCP would hold it.
 * Messages to one peer always arrive in the order they were sent.
 *
 * Not modelled: the connection handshake (not delayed), client traffic
 * (the native port is not touched), and loss that breaks a connection.
 */
#ifndef CASSINI_NODE_NETFAULT_H
#define CASSINI_NODE_NETFAULT_H

#include "common/buf.h"
#include "common/env.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct netfault_link {
	uint64_t delay_us;
	uint64_t jitter_us;
	uint32_t loss_ppm; /* lost segments per million messages */
	uint64_t rate_bps; /* bits per second; 0: unlimited */
	uint64_t flap_down_us, flap_period_us; /* 0: no flapping */
};

struct netfault_stats {
	uint64_t messages;      /* planned through a rule */
	uint64_t held;          /* released later than sent */
	uint64_t retransmitted; /* took a retransmission timeout */
	uint64_t while_down;    /* sent while the link was down */
};

struct netfault;

/* Borrowed: `env` (clock, random) must stay live while the table is. */
struct netfault *netfault_new(struct env *env);
void netfault_delete(struct netfault *nf);

/* Sets (replaces) the link to `to`. */
int netfault_set(struct netfault *nf, const struct inet_addr *to,
		 const struct netfault_link *l);
/* Removes the link to `to` (NULL: every link). Returns how many went. */
size_t netfault_clear(struct netfault *nf, const struct inet_addr *to);
size_t netfault_count(const struct netfault *nf);

/* When a message of `len` bytes to `to`, sent now, may reach the socket
 * (env_mono_us time, never earlier than now). False when no rule covers
 * `to`. Consumes randomness and moves the link's clocks: call it once per
 * message, in send order. */
bool netfault_plan(struct netfault *nf, const struct inet_addr *to, size_t len,
		   uint64_t *release_us);

/* Whether the link to `to` is in a flap's down window now. */
bool netfault_link_down(struct netfault *nf, const struct inet_addr *to);

/* One line per link: address, settings, counters. */
void netfault_describe(struct netfault *nf, struct buf *out);

/* Parses `--delay 80ms --jitter 10ms --loss 1% --rate 10mbit --flap
 * 5s/30s` (each optional, at least one); ERR_INVALID naming the bad
 * option. Units: durations as node.yaml's (ms, s, ...); loss a percentage
 * ("0.5%"); rate as tc's (bit, kbit, mbit, gbit, bps, kbps, mbps: the
 * last three bytes per second); flap DOWN/PERIOD with DOWN < PERIOD. */
int netfault_parse(size_t argc, const char *const *argv,
		   struct netfault_link *out);
/* The parts of it: a loss percentage, a tc rate. */
int netfault_parse_percent_ppm(const char *text, uint32_t *ppm);
int netfault_parse_rate_bps(const char *text, uint64_t *bps);

#endif
