/* libFuzzer: gossip messages. The first byte picks the verb; the rest is
 * decoded, then fed to a live gossip state machine over a simulated env,
 * so validation and the SYN/ACK/ACK2 handlers see every shape of bytes. */
#include "common/log.h"
#include "gossip/gossip.h"
#include "gossip/gossip_internal.h"
#include "tests/sim/sim.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sim *sim;
static struct gossip *g;

static void setup(void)
{
	struct inet_addr self, peer;
	inet_addr_parse("127.0.0.1", 7000, &self);
	inet_addr_parse("127.0.0.2", 7000, &peer);
	log_set_level(LOG_LEVEL_ERROR);
	sim = sim_new(1, 1760000000000000LL);
	struct env *e = sim_env_new(sim, &self);
	struct gossip_config cfg = {
		.cluster_name = "Fuzz",
		.partitioner = "org.apache.cassandra.dht.Murmur3Partitioner",
		.self = self,
		.seeds = &peer,
		.seed_count = 1,
		.generation = 1760000000,
	};
	g = gossip_new(e, &cfg);
	gossip_set_local_state(g, GOSSIP_STATE_DC, "dc1");
	gossip_start(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!g)
		setup();
	if (size < 1)
		return 0;
	uint32_t verb = data[0] % 8;
	struct gossip_msg m;
	if (verb >= GOSSIP_VERB_SYN && verb <= GOSSIP_VERB_ACK2 &&
	    gossip_msg_decode(verb, data + 1, size - 1, &m) == 0)
		gossip_msg_free(&m);
	struct inet_addr from;
	inet_addr_parse("127.0.0.2", 7000, &from);
	gossip_process(g, &from, verb, data + 1, size - 1);
	sim_run_for(sim, 100000);
	return 0;
}
