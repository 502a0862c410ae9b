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

/*
 * Endpoint identification, as Java's "HTTPS" algorithm that Cassandra sets
 * for require_endpoint_verification and the drivers' check_hostname: a
 * peer named by an IP literal ("10.0.0.1", "::1", "[::1]") must have that
 * address as an IP subjectAltName; one named by a host name must have it
 * as a DNS subjectAltName (a leftmost "*" label matches one label), or,
 * when the certificate has no DNS subjectAltName, as its subject CN.
 */
struct ssl_st;
struct x509_st;
/* The handshake on `ssl` fails unless the peer's certificate names
 * `name`. 0, or -1 (out of memory, or an empty name). */
int cql_tls_expect_name(struct ssl_st *ssl, const char *name);
/* Whether `cert` names `name` (for a check after the handshake). */
bool cql_tls_cert_names(struct x509_st *cert, const char *name);

#endif
