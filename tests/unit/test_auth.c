/* client/auth: bcrypt through libcrypt, as Cassandra's rows hold it, and
 * the SASL PLAIN token. */
#include "client/auth/auth.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <string.h>

/* What Cassandra's jBCrypt wrote for 'cassandra' (its documentation's
 * system_auth.roles row): our check must accept Cassandra's hashes. */
static const char cassandra_hash[] =
	"$2a$10$H46haNkcbxlbamyj0OYZr.v4e5L08WTiQ1scrTs9Q3NYy.6B..x4O";

START_TEST(cassandras_hash_is_readable)
{
	ck_assert(cql_auth_check_password("cassandra", cassandra_hash));
	ck_assert(!cql_auth_check_password("Cassandra", cassandra_hash));
	ck_assert(!cql_auth_check_password("", cassandra_hash));
	ck_assert(!cql_auth_check_password("cassandra", "plaintext"));
	ck_assert(!cql_auth_check_password("cassandra", ""));
	/* a truncated hash matches nothing */
	char cut[sizeof(cassandra_hash)];
	memcpy(cut, cassandra_hash, sizeof(cut));
	cut[40] = '\0';
	ck_assert(!cql_auth_check_password("cassandra", cut));
}
END_TEST

START_TEST(new_hashes_are_2a_with_the_cost_asked)
{
	char h[128], h2[128];
	ck_assert_int_eq(cql_auth_hash_password("s3cret", 4, h, sizeof(h)), 0);
	ck_assert_int_eq(strlen(h), 60);
	ck_assert(strncmp(h, "$2a$04$", 7) == 0);
	ck_assert(cql_auth_check_password("s3cret", h));
	ck_assert(!cql_auth_check_password("s3cret ", h));
	/* a fresh salt each time */
	ck_assert_int_eq(cql_auth_hash_password("s3cret", 4, h2, sizeof(h2)),
			 0);
	ck_assert_str_ne(h, h2);
	ck_assert_int_eq(cql_auth_hash_password("x", 10, h, sizeof(h)), 0);
	ck_assert(strncmp(h, "$2a$10$", 7) == 0);
	ck_assert_int_eq(cql_auth_hash_password("x", 4, h, 20), -1);
}
END_TEST

static int sasl(const char *tok, size_t len, char *user, char *pass)
{
	const char *u, *p;
	size_t ul, pl;
	if (cql_auth_sasl_plain((const uint8_t *)tok, len, &u, &ul, &p, &pl) !=
	    0)
		return -1;
	memcpy(user, u, ul);
	user[ul] = '\0';
	memcpy(pass, p, pl);
	pass[pl] = '\0';
	return 0;
}

START_TEST(sasl_plain_tokens)
{
	char u[64], p[64];
	ck_assert_int_eq(sasl("\0bob\0pw", 7, u, p), 0);
	ck_assert_str_eq(u, "bob");
	ck_assert_str_eq(p, "pw");
	ck_assert_int_eq(sasl("admin\0bob\0pw", 12, u, p), 0); /* authzid */
	ck_assert_str_eq(u, "bob");
	ck_assert_int_eq(sasl("bob\0pw", 6, u, p), -1);
	ck_assert_str_eq(err_msg(), "Authentication ID must not be null");
	ck_assert_int_eq(sasl("\0bob\0", 5, u, p), -1);
	ck_assert_str_eq(err_msg(), "Password must not be null");
	ck_assert_int_eq(sasl("\0\0pw", 4, u, p), -1);
	ck_assert_str_eq(err_msg(), "Authentication ID must not be null");
	ck_assert_int_eq(sasl("nonul", 5, u, p), -1);
	ck_assert_int_eq(sasl("", 0, u, p), -1);
	ck_assert_int_eq(sasl("a\0b\0c\0d", 7, u, p), -1);
	ck_assert_str_eq(err_msg(),
			 "Credential format error: username or password is "
			 "empty or contains NUL(\\0) character");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cassandras_hash_is_readable);
	tcase_add_test(tc, new_hashes_are_2a_with_the_cost_asked);
	tcase_add_test(tc, sasl_plain_tokens);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
