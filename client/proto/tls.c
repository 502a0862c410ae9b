/*
 * The native transport's TLS server context. Keys and certificates come
 * from PEM files (Cassandra 4.1's PEMBasedSslContextFactory) or PKCS#12
 * ones (store_type PKCS12, or a name ending .p12/.pfx); JKS keystores are
 * refused with how to convert them. Protocol and cipher names are
 * Cassandra's: "TLSv1.2"/"TLSv1.3" and IANA cipher suite names
 * (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), mapped to OpenSSL's through
 * SSL_CIPHER_standard_name.
 */
#include "client/proto/tls.h"

#include "common/buf.h"
#include "common/err.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcasecmp(s + n - t, tail) == 0;
}

enum store_format { STORE_PEM, STORE_PKCS12, STORE_JKS };

/* What a keystore or truststore file is: JKS by its magic number (refused),
 * PKCS#12 by its name (.p12, .pfx) or, with store_type PKCS12, unless it
 * is PEM text; else PEM. An unreadable file is left to the loader's
 * message. */
static enum store_format store_format(const char *path, bool pkcs12)
{
	unsigned char head[16];
	size_t n = 0;
	FILE *f = fopen(path, "rb");
	if (f) {
		n = fread(head, 1, sizeof(head), f);
		fclose(f);
	}
	if (n >= 4 && head[0] == 0xfe && head[1] == 0xed && head[2] == 0xfe &&
	    head[3] == 0xed)
		return STORE_JKS;
	if (ends_with(path, ".jks"))
		return STORE_JKS;
	if (ends_with(path, ".p12") || ends_with(path, ".pfx"))
		return STORE_PKCS12;
	if (!pkcs12)
		return STORE_PEM;
	size_t i = 0;
	while (i < n && isspace(head[i]))
		i++;
	return i < n && head[i] == '-' ? STORE_PEM : STORE_PKCS12;
}

static int refuse_jks(const char *what, const char *path)
{
	return err_set(ERR_CONFIG,
		       "%s %s: a JKS keystore, which is not read: use PKCS12 "
		       "(store_type: PKCS12; keytool -importkeystore "
		       "-srckeystore %s -destkeystore %s.p12 -deststoretype "
		       "PKCS12) or PEM (openssl pkcs12 -in %s.p12 -nodes)",
		       what, path, path, path, path);
}

/* Reads a PKCS#12 file: the key and certificate (either may be absent)
 * and the other certificates. */
static int read_pkcs12(const char *what, const char *path, const char *password,
		       EVP_PKEY **key, X509 **cert, STACK_OF(X509) * *ca)
{
	char why[256];
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(ERR_CONFIG, "%s %s: %s", what, path,
			       strerror(errno));
	PKCS12 *p12 = d2i_PKCS12_fp(f, NULL);
	fclose(f);
	if (!p12)
		return err_set(ERR_CONFIG, "%s %s: not a PKCS#12 file: %s",
			       what, path, ssl_reason(why, sizeof(why)));
	int ok = PKCS12_parse(p12, password ? password : "", key, cert, ca);
	PKCS12_free(p12);
	if (!ok)
		return err_set(ERR_CONFIG,
			       "%s %s: cannot open the PKCS#12 file (a wrong "
			       "%s_password?): %s",
			       what, path, what, ssl_reason(why, sizeof(why)));
	return 0;
}

static int use_pkcs12_keystore(SSL_CTX *ctx, const char *path,
			       const char *password)
{
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	STACK_OF(X509) *ca = NULL;
	if (read_pkcs12("keystore", path, password, &key, &cert, &ca) != 0)
		return -1;
	int rc = 0;
	if (!key || !cert)
		rc = err_set(ERR_CONFIG,
			     "keystore %s: no private key with its "
			     "certificate in the PKCS#12 file",
			     path);
	else if (SSL_CTX_use_certificate(ctx, cert) != 1 ||
		 SSL_CTX_use_PrivateKey(ctx, key) != 1)
		rc = err_set(ERR_CONFIG, "keystore %s: refused by OpenSSL",
			     path);
	for (int i = 0; rc == 0 && ca && i < sk_X509_num(ca); i++)
		if (SSL_CTX_add1_chain_cert(ctx, sk_X509_value(ca, i)) != 1)
			rc = err_set(ERR_NOMEM, "keystore %s: chain", path);
	EVP_PKEY_free(key);
	X509_free(cert);
	sk_X509_pop_free(ca, X509_free);
	return rc;
}

static int use_pkcs12_truststore(SSL_CTX *ctx, const char *path,
				 const char *password)
{
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	STACK_OF(X509) *ca = NULL;
	if (read_pkcs12("truststore", path, password, &key, &cert, &ca) != 0)
		return -1;
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	int added = 0;
	if (cert && X509_STORE_add_cert(store, cert) == 1)
		added++;
	for (int i = 0; ca && i < sk_X509_num(ca); i++)
		if (X509_STORE_add_cert(store, sk_X509_value(ca, i)) == 1)
			added++;
	EVP_PKEY_free(key);
	X509_free(cert);
	sk_X509_pop_free(ca, X509_free);
	if (!added)
		return err_set(ERR_CONFIG,
			       "truststore %s: no certificate in the PKCS#12 "
			       "file",
			       path);
	return 0;
}

/* The keystore: this side's key and certificate chain, checked to match. */
static int use_keystore(SSL_CTX *ctx, const struct cql_tls_config *cfg)
{
	char why[256];
	const char *path = cfg->keystore;
	switch (store_format(path, cfg->pkcs12)) {
	case STORE_JKS:
		return refuse_jks("keystore", path);
	case STORE_PKCS12:
		if (use_pkcs12_keystore(ctx, path, cfg->keystore_password) != 0)
			return -1;
		break;
	case STORE_PEM:
		if (SSL_CTX_use_certificate_chain_file(ctx, path) != 1)
			return err_set(ERR_CONFIG,
				       "keystore %s: no certificate: %s", path,
				       ssl_reason(why, sizeof(why)));
		if (SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM) !=
		    1)
			return err_set(ERR_CONFIG,
				       "keystore %s: no private key (or a "
				       "wrong keystore_password): %s",
				       path, ssl_reason(why, sizeof(why)));
		break;
	}
	if (SSL_CTX_check_private_key(ctx) != 1)
		return err_set(ERR_CONFIG,
			       "keystore %s: the private key does not match "
			       "the certificate",
			       path);
	return 0;
}

static int use_truststore(SSL_CTX *ctx, const struct cql_tls_config *cfg)
{
	char why[256];
	const char *path = cfg->truststore;
	switch (store_format(path, cfg->pkcs12)) {
	case STORE_JKS:
		return refuse_jks("truststore", path);
	case STORE_PKCS12:
		return use_pkcs12_truststore(ctx, path,
					     cfg->truststore_password);
	case STORE_PEM:
		break;
	}
	if (SSL_CTX_load_verify_locations(ctx, path, NULL) != 1)
		return err_set(ERR_CONFIG, "truststore %s: %s", path,
			       ssl_reason(why, sizeof(why)));
	return 0;
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
	if (own && use_keystore(ctx, cfg) != 0)
		goto fail;
	bool trust = cfg->truststore && cfg->truststore[0];
	if (trust && use_truststore(ctx, cfg) != 0)
		goto fail;
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

/* `name` as an IP literal's text (brackets dropped) into buf, or NULL when
 * it is a host name. */
static const char *ip_literal(const char *name, char *buf, size_t cap)
{
	size_t n = strlen(name);
	if (n >= 2 && name[0] == '[' && name[n - 1] == ']') {
		if (n - 2 >= cap)
			return NULL;
		memcpy(buf, name + 1, n - 2);
		buf[n - 2] = '\0';
	} else {
		if (n >= cap)
			return NULL;
		memcpy(buf, name, n + 1);
	}
	unsigned char bin[16];
	if (inet_pton(AF_INET, buf, bin) == 1 ||
	    inet_pton(AF_INET6, buf, bin) == 1)
		return buf;
	return NULL;
}

int cql_tls_expect_name(struct ssl_st *ssl, const char *name)
{
	if (!name || !name[0])
		return -1;
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
	char ip[64];
	if (ip_literal(name, ip, sizeof(ip)))
		return X509_VERIFY_PARAM_set1_ip_asc(param, ip) == 1 ? 0 : -1;
	X509_VERIFY_PARAM_set_hostflags(param, 0);
	return X509_VERIFY_PARAM_set1_host(param, name, 0) == 1 ? 0 : -1;
}

bool cql_tls_cert_names(struct x509_st *cert, const char *name)
{
	if (!cert || !name || !name[0])
		return false;
	char ip[64];
	if (ip_literal(name, ip, sizeof(ip)))
		return X509_check_ip_asc(cert, ip, 0) == 1;
	return X509_check_host(cert, name, 0, 0, NULL) == 1;
}
