/*
 * server_encryption_options: the internode transport's TLS contexts
 * (one to accept, one to connect; both show this node's certificate and
 * trust the truststore's CAs) and where a peer is (its datacenter and
 * rack as gossip or the saved peers tell), which decides under `dc` and
 * `rack` which connections are encrypted. docs/security.md.
 */
#include "client/proto/tls.h"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/node_internal.h"
#include "node/transport.h"

#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>

bool node_locate_peer(void *arg, const struct inet_addr *ep,
		      struct transport_location *out)
{
	struct node *n = arg;
	struct gossip_endpoint_info info;
	if (!n->gossip || gossip_endpoint_find(n->gossip, ep, &info) != 0)
		return false;
	const char *dc = info.states[GOSSIP_STATE_DC];
	const char *rack = info.states[GOSSIP_STATE_RACK];
	if (!dc || !rack)
		return false;
	snprintf(out->dc, sizeof(out->dc), "%s", dc);
	snprintf(out->rack, sizeof(out->rack), "%s", rack);
	const char *internal =
		info.states[GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT];
	if (!internal ||
	    inet_addr_parse(internal, (uint16_t)n->conf.storage_port,
			    &out->internal) != 0)
		out->internal = (struct inet_addr){0};
	return true;
}

static struct ssl_ctx_st *context(const struct conf_server_encryption *se,
				  bool client)
{
	const char *one[1] = {se->protocol};
	bool single = se->accepted_protocols.count == 0 && se->protocol &&
		      se->protocol[0] && strcmp(se->protocol, "TLS") != 0;
	struct cql_tls_config tc = {
		.client = client,
		.keystore = se->keystore,
		.keystore_password = se->keystore_password,
		.pkcs12 = se->store_type == CONF_STORE_PKCS12,
		.truststore = se->truststore,
		.truststore_password = se->truststore_password,
		.require_client_auth = se->require_client_auth,
		.protocols = single ? one
				    : (const char *const *)
					      se->accepted_protocols.items,
		.protocol_count = single ? 1 : se->accepted_protocols.count,
		.cipher_suites = (const char *const *)se->cipher_suites.items,
		.cipher_count = se->cipher_suites.count,
	};
	return cql_tls_context_new(&tc);
}

int node_internode_tls_contexts(const struct conf_server_encryption *se,
				struct ssl_ctx_st **server,
				struct ssl_ctx_st **client)
{
	*server = *client = NULL;
	if (!(*server = context(se, false)) || !(*client = context(se, true))) {
		char why[512];
		snprintf(why, sizeof(why), "%s", err_msg());
		SSL_CTX_free(*server);
		*server = NULL;
		return err_set(err_code(), "server_encryption_options: %s",
			       why);
	}
	return 0;
}

void node_internode_tls_install(struct node *n, struct ssl_ctx_st *server,
				struct ssl_ctx_st *client)
{
	transport_set_tls(n->transport, server, client);
	node_internode_tls_free(n); /* open connections hold references */
	n->internode_tls_server = server;
	n->internode_tls_client = client;
}

int node_internode_tls(struct node *n, struct transport_config *tc)
{
	const struct conf_server_encryption *se = &n->conf.server_encryption;
	static const enum transport_encryption modes[] = {
		[CONF_INTERNODE_NONE] = TRANSPORT_ENCRYPT_NONE,
		[CONF_INTERNODE_ALL] = TRANSPORT_ENCRYPT_ALL,
		[CONF_INTERNODE_DC] = TRANSPORT_ENCRYPT_DC,
		[CONF_INTERNODE_RACK] = TRANSPORT_ENCRYPT_RACK,
	};
	/* none with optional and a keystore: plaintext out, TLS peers
	 * accepted in (Cassandra's optional, implied there by a keystore) */
	if (!conf_internode_tls_set_up(se))
		return 0;
	bool accept_only = se->internode_encryption == CONF_INTERNODE_NONE;
	if (!se->truststore || !se->truststore[0])
		return err_set(ERR_CONFIG,
			       "server_encryption_options: a truststore (the "
			       "PEM CA certificates peers' certificates chain "
			       "to) is needed with internode_encryption");
	if (node_internode_tls_contexts(se, &n->internode_tls_server,
					&n->internode_tls_client) != 0)
		return -1;
	tc->encryption = modes[se->internode_encryption];
	tc->encryption_optional = se->optional;
	tc->endpoint_verification = se->require_endpoint_verification;
	tc->tls_server = n->internode_tls_server;
	tc->tls_client = n->internode_tls_client;
	tc->locate = node_locate_peer;
	tc->locate_arg = n;
	static const char *const names[] = {"none", "all", "dc", "rack"};
	LOG_INFO("internode_encryption: %s%s%s%s (%s)",
		 names[se->internode_encryption],
		 accept_only    ? ", TLS peers accepted (optional)"
		 : se->optional ? ", plaintext peers accepted (optional)"
				: "",
		 se->require_client_auth ? ", peers need a certificate" : "",
		 se->require_endpoint_verification
			 ? ", certificates must name their node"
			 : "",
		 se->keystore);
	return 0;
}

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	(void)value;
	struct node *n = arg;
	if (key == GOSSIP_STATE_DC || key == GOSSIP_STATE_RACK ||
	    key == GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT)
		transport_reconsider(n->transport, ep);
}

static void on_join(void *arg, const struct inet_addr *ep)
{
	struct node *n = arg;
	transport_reconsider(n->transport, ep);
}

int node_internode_tls_start(struct node *n)
{
	int64_t mode = n->conf.server_encryption.internode_encryption;
	if (mode != CONF_INTERNODE_DC && mode != CONF_INTERNODE_RACK)
		return 0;
	struct gossip_listener l = {.on_join = on_join, .on_change = on_change};
	return gossip_subscribe(n->gossip, &l, n);
}

void node_internode_tls_free(struct node *n)
{
	SSL_CTX_free(n->internode_tls_server);
	SSL_CTX_free(n->internode_tls_client);
	n->internode_tls_server = n->internode_tls_client = NULL;
}
