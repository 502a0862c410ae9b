/*
 * The real env: the host's clocks, libevent timers on the caller's
 * event_base, a PRNG seeded from getrandom(), POSIX files, and messages sent
 * through a transport the daemon installs (node/transport.c).
 */
#ifndef CASSINI_COMMON_ENV_REAL_H
#define CASSINI_COMMON_ENV_REAL_H

#include "common/env.h"

struct event_base;

/* `base` may be NULL for users that need only clocks, random and files
 * (tools, benchmarks); timers then fail. The base must stay live while the
 * env is. */
struct env *env_real_new(struct event_base *base);
void env_real_delete(struct env *e);

/* The send half of a transport. Until one is installed, env_send() fails
 * with ERR_UNAVAILABLE. */
typedef int (*env_send_fn)(void *arg, const struct inet_addr *to, uint32_t verb,
			   const void *msg, size_t len);
void env_real_set_transport(struct env *e, env_send_fn fn, void *arg);

/* Clock skew for test clusters: env_wall_us() answers the host's clock plus
 * `offset_us` (negative: behind) from now on; env_mono_us() is untouched.
 * The daemon allows it only with test_fault_injection. */
void env_real_set_wall_offset(struct env *e, int64_t offset_us);
int64_t env_real_wall_offset(struct env *e);

#endif
