/*
 * The native transport's TLS server context. Keys and certificates come
 * from PEM files (Cassandra 4.1's PEMBasedSslContextFactory); JKS and
 * PKCS12 keystores are not read. Protocol and cipher names are
 * Cassandra's: "TLSv1.2"/"TLSv1.3" and IANA cipher suite names
 * (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), mapped to OpenSSL's through
 * SSL_CIPHER_standard_name.
 */
#include "client/proto/tls.h"

#include "common/buf.h"
#include "common/err.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>

/* OpenSSL's last error as text, for a message. */
static const char *ssl_reason(char *dst, size_t cap)
{
	unsigned long e = ERR_peek_last_error();
	if (!e)
		return "unknown error";
	ERR_error_string_n(e, dst, cap);
	ERR_clear_error();
	return dst;
}

static int passphrase(char *buf, int size, int rwflag, void *arg)
{
	(void)rwflag;
	const char *p = arg;
	size_t n = p ? strlen(p) : 0;
	if (n > (size_t)size)
		return -1;
	memcpy(buf, p, n);
	return (int)n;
}

static int protocol_version(const char *name)
{
	static const struct {
		const char *name;
		int version;
	} v[] = {{"TLSv1.2", TLS1_2_VERSION},
		 {"TLSv1.3", TLS1_3_VERSION},
		 {"TLSv1.1", TLS1_1_VERSION},
		 {"TLSv1", TLS1_VERSION}};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (strcmp(v[i].name, name) == 0)
			return v[i].version;
	return 0;
}

static int set_protocols(SSL_CTX *ctx, const struct cql_tls_config *cfg)
{
	int lo = TLS1_2_VERSION, hi = TLS1_3_VERSION;
	if (cfg->protocol_count) {
		lo = TLS1_3_VERSION + 1;
		hi = 0;
		for (size_t i = 0; i < cfg->protocol_count; i++) {
			int v = protocol_version(cfg->protocols[i]);
			if (!v)
				return err_set(ERR_CONFIG,
					       "accepted_protocols: unknown "
					       "protocol '%s' (TLSv1.2, "
					       "TLSv1.3)",
					       cfg->protocols[i]);
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	}
	if (!SSL_CTX_set_min_proto_version(ctx, lo) ||
	    !SSL_CTX_set_max_proto_version(ctx, hi))
		return err_set(ERR_CONFIG, "accepted_protocols: not "
					   "supported by this OpenSSL");
	return 0;
}

/* Appends `name` to a ':'-separated OpenSSL list. */
static int add_name(struct buf *b, const char *name)
{
	if (b->len && buf_append(b, ":", 1))
		return -1;
	return buf_append(b, name, strlen(name));
}

static int set_ciphers(SSL_CTX *ctx, const struct cql_tls_config *cfg)
{
	if (!cfg->cipher_count)
		return 0;
	STACK_OF(SSL_CIPHER) *all = SSL_CTX_get_ciphers(ctx);
	struct buf v12, v13;
	buf_init(&v12);
	buf_init(&v13);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < cfg->cipher_count; i++) {
		const char *want = cfg->cipher_suites[i];
		const SSL_CIPHER *found = NULL;
		for (int j = 0; all && j < sk_SSL_CIPHER_num(all); j++) {
			const SSL_CIPHER *c = sk_SSL_CIPHER_value(all, j);
			const char *std = SSL_CIPHER_standard_name(c);
			if ((std && strcmp(std, want) == 0) ||
			    strcmp(SSL_CIPHER_get_name(c), want) == 0) {
				found = c;
				break;
			}
		}
		if (!found) {
			rc = err_set(ERR_CONFIG,
				     "cipher_suites: unknown or disabled "
				     "cipher suite '%s'",
				     want);
			break;
		}
		bool tls13 =
			strcmp(SSL_CIPHER_get_version(found), "TLSv1.3") == 0;
		rc = add_name(tls13 ? &v13 : &v12,
			      tls13 ? SSL_CIPHER_standard_name(found)
				    : SSL_CIPHER_get_name(found));
		if (rc)
			rc = err_set(ERR_NOMEM, "cipher_suites");
	}
	if (rc == 0 && (buf_append(&v12, "", 1) || buf_append(&v13, "", 1)))
		rc = err_set(ERR_NOMEM, "cipher_suites");
	bool has12 = rc == 0 && v12.len > 1, has13 = rc == 0 && v13.len > 1;
	if (rc == 0 &&
	    ((has12 && !SSL_CTX_set_cipher_list(ctx, (char *)v12.data)) ||
	     !SSL_CTX_set_ciphersuites(ctx, (char *)v13.data)))
		rc = err_set(ERR_CONFIG, "cipher_suites: refused by OpenSSL");
	/* a list naming one protocol's suites only leaves the other
	 * protocol without any: it is not offered */
	if (rc == 0 && !has12)
		SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	if (rc == 0 && !has13)
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	buf_free(&v12);
	buf_free(&v13);
	return rc;
}

struct ssl_ctx_st *cql_tls_context_new(const struct cql_tls_config *cfg)
{
	char why[256];
	bool own = cfg->keystore && cfg->keystore[0];
	if (!own && !cfg->client) {
		err_set(ERR_CONFIG, "keystore: a PEM file with the key and "
				    "certificate is needed");
		return NULL;
	}
	SSL_CTX *ctx = SSL_CTX_new(cfg->client ? TLS_client_method()
					       : TLS_server_method());
	if (!ctx) {
		err_set(ERR_NOMEM, "TLS: %s", ssl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_default_passwd_cb(ctx, passphrase);
	SSL_CTX_set_default_passwd_cb_userdata(
		ctx,
		(void *)(cfg->keystore_password ? cfg->keystore_password : ""));
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (own &&
	    SSL_CTX_use_certificate_chain_file(ctx, cfg->keystore) != 1) {
		err_set(ERR_CONFIG, "keystore %s: no certificate: %s",
			cfg->keystore, ssl_reason(why, sizeof(why)));
		goto fail;
	}
	if (own && SSL_CTX_use_PrivateKey_file(ctx, cfg->keystore,
					       SSL_FILETYPE_PEM) != 1) {
		err_set(ERR_CONFIG,
			"keystore %s: no private key (or a wrong "
			"keystore_password): %s",
			cfg->keystore, ssl_reason(why, sizeof(why)));
		goto fail;
	}
	if (own && SSL_CTX_check_private_key(ctx) != 1) {
		err_set(ERR_CONFIG,
			"keystore %s: the private key does not match the "
			"certificate",
			cfg->keystore);
		goto fail;
	}
	bool trust = cfg->truststore && cfg->truststore[0];
	if (trust &&
	    SSL_CTX_load_verify_locations(ctx, cfg->truststore, NULL) != 1) {
		err_set(ERR_CONFIG, "truststore %s: %s", cfg->truststore,
			ssl_reason(why, sizeof(why)));
		goto fail;
	}
	if (cfg->client && trust) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	} else if (cfg->require_client_auth && !cfg->client) {
		if (!trust) {
			err_set(ERR_CONFIG, "require_client_auth needs a "
					    "truststore");
			goto fail;
		}
		SSL_CTX_set_verify(
			ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			NULL);
	}
	if (set_protocols(ctx, cfg) != 0 || set_ciphers(ctx, cfg) != 0)
		goto fail;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

void cql_tls_context_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx);
}
