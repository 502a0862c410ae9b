/* WAN fault arithmetic for test clusters (see netfault.h). */
#include "node/netfault.h"

#include "common/err.h"
#include "conf/conf.h"
#include "node/admin.h"

#include <stdlib.h>
#include <string.h>

#define MIN_RTO_US 200000u /* Linux's TCP_RTO_MIN */
#define MAX_LINKS  1024

struct link {
	struct inet_addr to;
	struct netfault_link l;
	uint64_t set_at_us;       /* flap phase origin */
	uint64_t link_free_us;    /* rate: when the link has sent what it has */
	uint64_t last_release_us; /* in-order delivery */
	struct netfault_stats st;
};

struct netfault {
	struct env *env;
	struct link *links;
	size_t count, cap;
};

struct netfault *netfault_new(struct env *env)
{
	struct netfault *nf = calloc(1, sizeof(*nf));
	if (!nf) {
		err_set(ERR_NOMEM, "fault table");
		return NULL;
	}
	nf->env = env;
	return nf;
}

void netfault_delete(struct netfault *nf)
{
	if (!nf)
		return;
	free(nf->links);
	free(nf);
}

static struct link *find(struct netfault *nf, const struct inet_addr *to)
{
	for (size_t i = 0; i < nf->count; i++)
		if (inet_addr_eq(&nf->links[i].to, to))
			return &nf->links[i];
	return NULL;
}

int netfault_set(struct netfault *nf, const struct inet_addr *to,
		 const struct netfault_link *l)
{
	if (l->flap_period_us && l->flap_down_us >= l->flap_period_us)
		return err_set(ERR_INVALID, "a flap's down time must be "
					    "shorter than its period");
	struct link *k = find(nf, to);
	if (!k) {
		if (nf->count == MAX_LINKS)
			return err_set(ERR_INVALID, "at most %d faulty links",
				       MAX_LINKS);
		if (nf->count == nf->cap) {
			size_t cap = nf->cap ? 2 * nf->cap : 8;
			struct link *n = realloc(nf->links, cap * sizeof(*n));
			if (!n)
				return err_set(ERR_NOMEM, "fault table");
			nf->links = n;
			nf->cap = cap;
		}
		k = &nf->links[nf->count++];
		memset(k, 0, sizeof(*k));
		k->to = *to;
	}
	/* Replacing a rule keeps the order of what it already released. */
	k->l = *l;
	k->set_at_us = env_mono_us(nf->env);
	return 0;
}

size_t netfault_clear(struct netfault *nf, const struct inet_addr *to)
{
	size_t gone = 0;
	for (size_t i = 0; i < nf->count;) {
		if (!to || inet_addr_eq(&nf->links[i].to, to)) {
			nf->links[i] = nf->links[--nf->count];
			gone++;
		} else {
			i++;
		}
	}
	return gone;
}

size_t netfault_count(const struct netfault *nf)
{
	return nf->count;
}

/* How long until the link is up again (0: it is up). */
static uint64_t down_left(const struct link *k, uint64_t now)
{
	if (!k->l.flap_period_us)
		return 0;
	uint64_t phase = (now - k->set_at_us) % k->l.flap_period_us;
	uint64_t up = k->l.flap_period_us - k->l.flap_down_us;
	return phase >= up ? k->l.flap_period_us - phase : 0;
}

bool netfault_link_down(struct netfault *nf, const struct inet_addr *to)
{
	struct link *k = find(nf, to);
	return k && down_left(k, env_mono_us(nf->env)) > 0;
}

bool netfault_plan(struct netfault *nf, const struct inet_addr *to, size_t len,
		   uint64_t *release_us)
{
	struct link *k = find(nf, to);
	if (!k)
		return false;
	const struct netfault_link *l = &k->l;
	uint64_t now = env_mono_us(nf->env);
	uint64_t depart = now;
	k->st.messages++;
	uint64_t wait = down_left(k, now);
	if (wait) {
		k->st.while_down++;
		depart += wait;
	}
	if (l->rate_bps) {
		uint64_t tx = (uint64_t)len * 8u * 1000000u / l->rate_bps;
		if (k->link_free_us < depart)
			k->link_free_us = depart;
		k->link_free_us += tx;
		depart = k->link_free_us;
	}
	uint64_t d = l->delay_us;
	if (l->jitter_us) {
		uint64_t span = 2 * l->jitter_us + 1;
		uint64_t r = env_random(nf->env) % span;
		d = d + r >= l->jitter_us ? d + r - l->jitter_us : 0;
	}
	if (l->loss_ppm && env_random(nf->env) % 1000000u < l->loss_ppm) {
		uint64_t rto = 2 * l->delay_us + 4 * l->jitter_us;
		d += rto > MIN_RTO_US ? rto : MIN_RTO_US;
		k->st.retransmitted++;
	}
	uint64_t at = depart + d;
	if (at < k->last_release_us)
		at = k->last_release_us; /* TCP delivers in order */
	k->last_release_us = at;
	if (at > now)
		k->st.held++;
	*release_us = at;
	return true;
}

static void put_ms(struct buf *out, const char *name, uint64_t us)
{
	if (us % 1000)
		admin_printf(out, " %s %.3fms", name, (double)us / 1000.0);
	else
		admin_printf(out, " %s %llums", name,
			     (unsigned long long)(us / 1000));
}

void netfault_describe(struct netfault *nf, struct buf *out)
{
	uint64_t now = env_mono_us(nf->env);
	for (size_t i = 0; i < nf->count; i++) {
		const struct link *k = &nf->links[i];
		char a[INET_ADDR_STRLEN];
		inet_addr_format(&k->to, a, sizeof(a));
		admin_printf(out, "%s", a);
		put_ms(out, "delay", k->l.delay_us);
		put_ms(out, "jitter", k->l.jitter_us);
		admin_printf(out, " loss %.4g%%", (double)k->l.loss_ppm / 1e4);
		if (k->l.rate_bps)
			admin_printf(out, " rate %llubit",
				     (unsigned long long)k->l.rate_bps);
		if (k->l.flap_period_us) {
			put_ms(out, "flap-down", k->l.flap_down_us);
			put_ms(out, "every", k->l.flap_period_us);
			admin_printf(out, " (%s)",
				     down_left(k, now) ? "down now" : "up now");
		}
		admin_printf(out,
			     "; messages %llu, held %llu, retransmitted %llu, "
			     "sent while down %llu\n",
			     (unsigned long long)k->st.messages,
			     (unsigned long long)k->st.held,
			     (unsigned long long)k->st.retransmitted,
			     (unsigned long long)k->st.while_down);
	}
}

/* ---- parsing ------------------------------------------------------------- */

int netfault_parse_percent_ppm(const char *text, uint32_t *ppm)
{
	char *end;
	double v = strtod(text, &end);
	if (end == text || strcmp(end, "%") != 0 || !(v >= 0) || v > 100)
		return err_set(ERR_INVALID,
			       "'%s': expected a percentage from 0%% to "
			       "100%%, like 1%% or 0.5%%",
			       text);
	*ppm = (uint32_t)(v * 1e4 + 0.5);
	return 0;
}

int netfault_parse_rate_bps(const char *text, uint64_t *bps)
{
	static const struct {
		const char *unit;
		double bits;
	} units[] = {
		{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9},
		{"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {NULL, 0},
	};
	char *end;
	double v = strtod(text, &end);
	if (end != text && v > 0)
		for (size_t i = 0; units[i].unit; i++)
			if (strcmp(end, units[i].unit) == 0 &&
			    v * units[i].bits >= 1 &&
			    v * units[i].bits <= 1e12) {
				*bps = (uint64_t)(v * units[i].bits);
				return 0;
			}
	return err_set(ERR_INVALID,
		       "'%s': expected a rate as tc writes it, like 10mbit, "
		       "500kbit or 2mbps (bit, kbit, mbit, gbit; bps, kbps, "
		       "mbps are bytes per second)",
		       text);
}

static int parse_us(const char *opt, const char *text, uint64_t *us)
{
	uint64_t ms;
	if (conf_parse_duration_ms(text, &ms) != 0)
		return err_set(ERR_INVALID, "%s %s: %s", opt, text, err_msg());
	if (ms > 3600000u)
		return err_set(ERR_INVALID, "%s %s: at most 1h", opt, text);
	*us = ms * 1000u;
	return 0;
}

int netfault_parse(size_t argc, const char *const *argv,
		   struct netfault_link *out)
{
	memset(out, 0, sizeof(*out));
	if (argc == 0)
		return err_set(ERR_INVALID, "expected at least one of --delay, "
					    "--jitter, --loss, --rate, --flap");
	for (size_t i = 0; i < argc; i += 2) {
		const char *opt = argv[i];
		if (i + 1 == argc)
			return err_set(ERR_INVALID, "%s needs a value", opt);
		const char *v = argv[i + 1];
		if (strcmp(opt, "--delay") == 0) {
			if (parse_us(opt, v, &out->delay_us) != 0)
				return -1;
		} else if (strcmp(opt, "--jitter") == 0) {
			if (parse_us(opt, v, &out->jitter_us) != 0)
				return -1;
		} else if (strcmp(opt, "--loss") == 0) {
			if (netfault_parse_percent_ppm(v, &out->loss_ppm) != 0)
				return err_prefix("--loss");
		} else if (strcmp(opt, "--rate") == 0) {
			if (netfault_parse_rate_bps(v, &out->rate_bps) != 0)
				return err_prefix("--rate");
		} else if (strcmp(opt, "--flap") == 0) {
			const char *slash = strchr(v, '/');
			char down[64];
			if (!slash || (size_t)(slash - v) >= sizeof(down))
				return err_set(
					ERR_INVALID,
					"--flap %s: expected DOWN/PERIOD, "
					"like 5s/30s",
					v);
			memcpy(down, v, (size_t)(slash - v));
			down[slash - v] = '\0';
			if (parse_us(opt, down, &out->flap_down_us) != 0 ||
			    parse_us(opt, slash + 1, &out->flap_period_us) != 0)
				return -1;
			if (!out->flap_down_us ||
			    out->flap_down_us >= out->flap_period_us)
				return err_set(ERR_INVALID,
					       "--flap %s: the down time must "
					       "be above 0 and shorter than "
					       "the period",
					       v);
		} else {
			return err_set(ERR_INVALID,
				       "unknown option '%s' (expected --delay, "
				       "--jitter, --loss, --rate, --flap)",
				       opt);
		}
	}
	return 0;
}
