/* client/proto/tls.c's endpoint identification, shared by the internode
 * transport, cassini-tool and the C client: an IP literal is matched
 * against IP subjectAltNames only, a host name against DNS ones (the CN
 * when there is none), as Java's "HTTPS" algorithm that Cassandra's
 * require_endpoint_verification and the drivers' check_hostname use.
 * Addresses are only certificate names (test-addresses: none). */
#include "client/proto/tls.h"
#include "tests/lib/testutil.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* A self-signed P-256 certificate with subject CN `cn` and subjectAltName
 * `san` (NULL: none); its key in *key_out unless that is NULL. */
static X509 *make_cert_key(const char *cn, const char *san, EVP_PKEY **key_out)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	ck_assert_ptr_nonnull(key);
	X509 *x = X509_new();
	ck_assert_ptr_nonnull(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, n);
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	X509_EXTENSION *bc = X509V3_EXT_conf_nid(
		NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
	ck_assert_ptr_nonnull(bc);
	X509_add_ext(x, bc, -1);
	X509_EXTENSION_free(bc);
	if (san) {
		X509_EXTENSION *e = X509V3_EXT_conf_nid(
			NULL, &v3, NID_subject_alt_name, san);
		ck_assert_ptr_nonnull(e);
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
	}
	ck_assert_int_gt(X509_sign(x, key, EVP_sha256()), 0);
	if (key_out)
		*key_out = key;
	else
		EVP_PKEY_free(key);
	return x;
}

static X509 *make_cert(const char *cn, const char *san)
{
	return make_cert_key(cn, san, NULL);
}

/* A real TLS handshake in memory (a BIO pair): a server showing `cert`,
 * a client that trusts it and, as every endpoint check does (the
 * internode transport's outbound side, cassini-tool, the C client),
 * expects `name` through cql_tls_expect_name. 1: the handshake
 * completed; 0: the client refused it, its verify result in *verify. */
static int handshake_as(X509 *cert, EVP_PKEY *key, const char *name,
			long *verify)
{
	SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	ck_assert_int_eq(SSL_CTX_use_certificate(sctx, cert), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(sctx, key), 1);
	ck_assert_int_eq(
		X509_STORE_add_cert(SSL_CTX_get_cert_store(cctx), cert), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	SSL *srv = SSL_new(sctx), *cli = SSL_new(cctx);
	ck_assert_int_eq(cql_tls_expect_name(cli, name), 0);
	BIO *sb = NULL, *cb = NULL;
	ck_assert_int_eq(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
	SSL_set_bio(srv, sb, sb);
	SSL_set_bio(cli, cb, cb);
	SSL_set_accept_state(srv);
	SSL_set_connect_state(cli);
	int cr = 0, sr = 0;
	for (int i = 0; i < 50 && (cr != 1 || sr != 1); i++) {
		if (cr != 1) {
			cr = SSL_do_handshake(cli);
			if (cr <= 0 &&
			    SSL_get_error(cli, cr) != SSL_ERROR_WANT_READ)
				break;
		}
		if (sr != 1) {
			sr = SSL_do_handshake(srv);
			if (sr <= 0 &&
			    SSL_get_error(srv, sr) != SSL_ERROR_WANT_READ)
				break;
		}
	}
	*verify = SSL_get_verify_result(cli);
	int ok = cr == 1;
	SSL_free(cli);
	SSL_free(srv);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	return ok;
}

/* Verifies `cert` (its own trust anchor) with the parameters
 * cql_tls_expect_name set on an SSL for `name`: X509_V_OK or the error. */
static int verify_as(X509 *cert, const char *name)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	ck_assert_int_eq(cql_tls_expect_name(ssl, name), 0);
	X509_STORE *store = X509_STORE_new();
	X509_STORE_add_cert(store, cert);
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	X509_STORE_CTX_init(sc, store, cert, NULL);
	X509_VERIFY_PARAM_set1(X509_STORE_CTX_get0_param(sc),
			       SSL_get0_param(ssl));
	int r = X509_verify_cert(sc) == 1 ? X509_V_OK
					  : X509_STORE_CTX_get_error(sc);
	X509_STORE_CTX_free(sc);
	X509_STORE_free(store);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return r;
}

START_TEST(host_names_match_dns_subject_alt_names)
{
	X509 *c = make_cert("ignored.example",
			    "DNS:node1.example,DNS:*.wild.example,"
			    "IP:127.0.91.60,DNS:127.0.91.61");
	ck_assert(cql_tls_cert_names(c, "node1.example"));
	ck_assert(cql_tls_cert_names(c, "NODE1.Example"));
	ck_assert(!cql_tls_cert_names(c, "node2.example"));
	ck_assert(cql_tls_cert_names(c, "a.wild.example"));
	ck_assert(!cql_tls_cert_names(c, "a.b.wild.example"));
	/* the CN does not count when there are DNS subjectAltNames */
	ck_assert(!cql_tls_cert_names(c, "ignored.example"));
	ck_assert_int_eq(verify_as(c, "node1.example"), X509_V_OK);
	ck_assert_int_eq(verify_as(c, "x.wild.example"), X509_V_OK);
	ck_assert_int_eq(verify_as(c, "node2.example"),
			 X509_V_ERR_HOSTNAME_MISMATCH);
	X509_free(c);
}
END_TEST

START_TEST(ip_literals_match_ip_subject_alt_names_only)
{
	X509 *c = make_cert("127.0.91.62", "DNS:node1.example,IP:127.0.91.60,"
					   "DNS:127.0.91.61,IP:::1");
	ck_assert(cql_tls_cert_names(c, "127.0.91.60"));
	ck_assert(!cql_tls_cert_names(c, "127.0.91.63"));
	/* a DNS name spelling an address, or a CN, does not name it */
	ck_assert(!cql_tls_cert_names(c, "127.0.91.61"));
	ck_assert(!cql_tls_cert_names(c, "127.0.91.62"));
	ck_assert(cql_tls_cert_names(c, "::1"));
	ck_assert(cql_tls_cert_names(c, "[::1]"));
	ck_assert_int_eq(verify_as(c, "127.0.91.60"), X509_V_OK);
	ck_assert_int_eq(verify_as(c, "[::1]"), X509_V_OK);
	ck_assert_int_eq(verify_as(c, "127.0.91.61"),
			 X509_V_ERR_IP_ADDRESS_MISMATCH);
	X509_free(c);
}
END_TEST

START_TEST(the_cn_counts_without_dns_subject_alt_names)
{
	X509 *c = make_cert("cn.example", NULL);
	ck_assert(cql_tls_cert_names(c, "cn.example"));
	ck_assert(!cql_tls_cert_names(c, "other.example"));
	ck_assert_int_eq(verify_as(c, "cn.example"), X509_V_OK);
	X509_free(c);
	c = make_cert("cn.example", "IP:127.0.91.60");
	ck_assert(cql_tls_cert_names(c, "cn.example"));
	X509_free(c);
	c = make_cert("cn.example", "DNS:other.example");
	ck_assert(!cql_tls_cert_names(c, "cn.example"));
	X509_free(c);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	ck_assert_int_eq(cql_tls_expect_name(ssl, ""), -1);
	ck_assert(!cql_tls_cert_names(NULL, "cn.example"));
	SSL_free(ssl);
	SSL_CTX_free(ctx);
}
END_TEST

START_TEST(a_certificate_with_only_a_dns_name)
{
	/* the certificate a node reached by name would show: one DNS
	 * subjectAltName, no IP one, a CN that is not an address */
	EVP_PKEY *key = NULL;
	X509 *c = make_cert_key("node1", "DNS:node1.cluster.example", &key);
	ck_assert(cql_tls_cert_names(c, "node1.cluster.example"));
	ck_assert(cql_tls_cert_names(c, "Node1.Cluster.Example"));
	ck_assert(!cql_tls_cert_names(c, "node2.cluster.example"));
	ck_assert(!cql_tls_cert_names(c, "cluster.example"));
	ck_assert(!cql_tls_cert_names(c, "node1"));
	/* an address never matches a DNS name: the internode inbound check
	 * (its peer's claimed address) refuses this certificate */
	ck_assert(!cql_tls_cert_names(c, "127.0.91.60"));
	long v = 0;
	ck_assert_int_eq(handshake_as(c, key, "node1.cluster.example", &v), 1);
	ck_assert_int_eq(v, X509_V_OK);
	ck_assert_int_eq(handshake_as(c, key, "node2.cluster.example", &v), 0);
	ck_assert_int_eq(v, X509_V_ERR_HOSTNAME_MISMATCH);
	ck_assert_int_eq(handshake_as(c, key, "127.0.91.60", &v), 0);
	ck_assert_int_eq(v, X509_V_ERR_IP_ADDRESS_MISMATCH);
	X509_free(c);
	EVP_PKEY_free(key);
}
END_TEST

START_TEST(a_certificate_for_another_address_fails_the_handshake)
{
	EVP_PKEY *key = NULL;
	X509 *c = make_cert_key("127.0.91.61", "IP:127.0.91.61", &key);
	long v = 0;
	ck_assert_int_eq(handshake_as(c, key, "127.0.91.61", &v), 1);
	ck_assert_int_eq(handshake_as(c, key, "127.0.91.62", &v), 0);
	ck_assert_int_eq(v, X509_V_ERR_IP_ADDRESS_MISMATCH);
	X509_free(c);
	EVP_PKEY_free(key);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tls_names");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, host_names_match_dns_subject_alt_names);
	tcase_add_test(tc, ip_literals_match_ip_subject_alt_names_only);
	tcase_add_test(tc, the_cn_counts_without_dns_subject_alt_names);
	tcase_add_test(tc, a_certificate_with_only_a_dns_name);
	tcase_add_test(tc,
		       a_certificate_for_another_address_fails_the_handshake);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
