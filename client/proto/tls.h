/*
 * TLS for the native transport (client_encryption_options): an OpenSSL
 * server context from PEM files, as Cassandra 4.1's
 * PEMBasedSslContextFactory takes them, or PKCS#12 ones.
 */
#ifndef CASSINI_CLIENT_PROTO_TLS_H
#define CASSINI_CLIENT_PROTO_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct cql_tls_config {
	/* A client context (cql_tls_context_new): the peer's certificate is
	 * verified against the truststore when there is one, and the
	 * keystore (our certificate, for a server that asks) may be empty. */
	bool client;
	/* PEM holding the private key and the certificate chain (the
	 * server's certificate first). */
	const char *keystore;
	/* The key's passphrase; NULL or "" when the key is not encrypted
	 * (for PKCS#12: the file's password). */
	const char *keystore_password;
	/* store_type PKCS12: the keystore (and a truststore that is not PEM
	 * text) are PKCS#12 files. Files named .p12 or .pfx are read as
	 * PKCS#12 anyway; JKS files are refused. */
	bool pkcs12;
	/* A PKCS#12 truststore's password (PEM has none). */
	const char *truststore_password;
	/* PEM of the CA certificates client certificates must chain to
	 * (needed with require_client_auth); NULL or "" for none. */
	const char *truststore;
	bool require_client_auth;
	/* Accepted protocol versions ("TLSv1.2", "TLSv1.3"); none: TLS 1.2
	 * and 1.3. */
	const char *const *protocols;
	size_t protocol_count;
	/* Cipher suites by their IANA (JSSE) names, as Cassandra's
	 * cipher_suites, or OpenSSL's; none: OpenSSL's defaults. */
	const char *const *cipher_suites;
	size_t cipher_count;
};

struct ssl_ctx_st;
/* A server (or, with `client`, a client) context, or NULL with ERR_CONFIG
 * naming the file or value at fault (an unreadable keystore, a key that does
 * not match its certificate, an unknown protocol or cipher suite). */
struct ssl_ctx_st *cql_tls_context_new(const struct cql_tls_config *cfg);
void cql_tls_context_free(struct ssl_ctx_st *ctx);

#endif
