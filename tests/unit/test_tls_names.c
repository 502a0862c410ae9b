/* client/proto/tls.c's endpoint identification, shared by the internode
 * transport, cassini-tool and the C client: an IP literal is matched
 * against IP subjectAltNames only, a host name against DNS ones (the CN
 * when there is none), as Java's "HTTPS" algorithm that Cassandra's
 * require_endpoint_verification and the drivers' check_hostname use. */
#include "client/proto/tls.h"
#include "tests/lib/testutil.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* A self-signed P-256 certificate with subject CN `cn` and subjectAltName
 * `san` (NULL: none). */
static X509 *make_cert(const char *cn, const char *san)
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
	X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &v3,
						 NID_basic_constraints,
						 "critical,CA:TRUE");
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
	EVP_PKEY_free(key);
	return x;
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
	X509 *c = make_cert("127.0.91.62",
			    "DNS:node1.example,IP:127.0.91.60,"
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

static Suite *suite(void)
{
	Suite *s = suite_create("tls_names");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, host_names_match_dns_subject_alt_names);
	tcase_add_test(tc, ip_literals_match_ip_subject_alt_names_only);
	tcase_add_test(tc, the_cn_counts_without_dns_subject_alt_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
