/* client/auth: bcrypt through libcrypt, as Cassandra's rows hold it, and
 * the SASL PLAIN token. */
#include "client/auth/auth.h"
#include "client/auth/auth_internal.h"
#include "client/cql/cql_resource.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>
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

static const char *shown(const struct cql_resource *r)
{
	static char b[256];
	ck_assert_int_ge(cql_resource_display(r, b, sizeof(b)), 0);
	return b;
}

static const char *stored(const struct cql_resource *r)
{
	static char b[256];
	ck_assert_int_ge(cql_resource_name(r, b, sizeof(b)), 0);
	return b;
}

START_TEST(resources_as_cassandra_names_them)
{
	struct cql_resource all = {.kind = CQL_RES_ALL_KEYSPACES};
	struct cql_resource ks = {.kind = CQL_RES_KEYSPACE, .keyspace = "ks"};
	struct cql_resource t = {
		.kind = CQL_RES_TABLE, .keyspace = "ks", .name = "t"};
	struct cql_resource roles = {.kind = CQL_RES_ALL_ROLES};
	struct cql_resource r = {.kind = CQL_RES_ROLE, .name = "a/b"};
	struct cql_resource fks = {.kind = CQL_RES_KEYSPACE_FUNCTIONS,
				   .keyspace = "ks"};
	ck_assert_str_eq(shown(&all), "<all keyspaces>");
	ck_assert_str_eq(stored(&all), "data");
	ck_assert_str_eq(shown(&ks), "<keyspace ks>");
	ck_assert_str_eq(stored(&ks), "data/ks");
	ck_assert_str_eq(shown(&t), "<table ks.t>");
	ck_assert_str_eq(stored(&t), "data/ks/t");
	ck_assert_str_eq(shown(&roles), "<all roles>");
	ck_assert_str_eq(stored(&roles), "roles");
	ck_assert_str_eq(shown(&r), "<role a/b>");
	ck_assert_str_eq(stored(&r), "roles/a/b");
	ck_assert_str_eq(shown(&fks), "<all functions in ks>");
	ck_assert_str_eq(stored(&fks), "functions/ks");
	/* a table needs its keyspace; a name that does not fit fails */
	struct cql_resource bare = {.kind = CQL_RES_TABLE, .name = "t"};
	char tiny[4];
	ck_assert_int_eq(cql_resource_name(&bare, tiny, sizeof(tiny)), -1);
	ck_assert_int_eq(cql_resource_name(&t, tiny, sizeof(tiny)), -1);

	/* stored names read back */
	static const char *const names[] = {
		"data",         "data/ks",   "data/ks/t",
		"roles",        "roles/a/b", "functions",
		"functions/ks", "mbean",     "mbean/x:type=y"};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct cql_resource back;
		char buf[128];
		ck_assert_int_eq(cql_resource_from_name(names[i], &back, buf,
							sizeof(buf)),
				 0);
		ck_assert_str_eq(stored(&back), names[i]);
	}
	static const char *const bad[] = {
		"", "dat", "data/", "data//t", "data/ks/", "roles/", "nope/x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct cql_resource back;
		char buf[128];
		ck_assert_int_eq(
			cql_resource_from_name(bad[i], &back, buf, sizeof(buf)),
			-1);
	}
}
END_TEST

START_TEST(applicable_permissions_and_parents)
{
	struct cql_resource t = {
		.kind = CQL_RES_TABLE, .keyspace = "ks", .name = "t"};
	struct cql_resource up, top, none;
	ck_assert(!(cql_resource_applicable(&t) & CQL_PERM_CREATE));
	ck_assert(cql_resource_applicable(&t) & CQL_PERM_SELECT);
	ck_assert(cql_resource_parent(&t, &up));
	ck_assert_int_eq(up.kind, CQL_RES_KEYSPACE);
	ck_assert_str_eq(up.keyspace, "ks");
	ck_assert(cql_resource_applicable(&up) & CQL_PERM_CREATE);
	ck_assert(cql_resource_parent(&up, &top));
	ck_assert_int_eq(top.kind, CQL_RES_ALL_KEYSPACES);
	ck_assert(!cql_resource_parent(&top, &none));
	struct cql_resource role = {.kind = CQL_RES_ROLE, .name = "r"};
	ck_assert_uint_eq(cql_resource_applicable(&role),
			  CQL_PERM_ALTER | CQL_PERM_DROP | CQL_PERM_AUTHORIZE);
	ck_assert(cql_resource_parent(&role, &up));
	ck_assert_int_eq(up.kind, CQL_RES_ALL_ROLES);
	ck_assert(cql_resource_applicable(&up) & CQL_PERM_DESCRIBE);
	ck_assert_str_eq(cql_permission_name(CQL_PERM_AUTHORIZE), "AUTHORIZE");
	ck_assert_ptr_null(cql_permission_name(CQL_PERM_ALL));
	ck_assert_uint_eq(cql_permission_parse("MODIFY", 6), CQL_PERM_MODIFY);
	ck_assert_uint_eq(cql_permission_parse("modify", 6), 0);
	ck_assert_uint_eq(cql_permission_parse("UNMASK", 6), 0);
}
END_TEST

/* Grants inherited down the resource chain, merged over roles. */
START_TEST(grants_checked_up_the_chain)
{
	struct auth_perms p = {0};
	p.g = calloc(2, sizeof(*p.g));
	p.g[0] = (struct auth_grant){strdup("data/ks"), CQL_PERM_SELECT};
	p.g[1] = (struct auth_grant){strdup("roles"), CQL_PERM_CREATE};
	p.n = p.cap = 2;
	struct cql_resource t = {
		.kind = CQL_RES_TABLE, .keyspace = "ks", .name = "t"};
	struct cql_resource other = {
		.kind = CQL_RES_TABLE, .keyspace = "ks2", .name = "t"};
	struct cql_resource role = {.kind = CQL_RES_ROLE, .name = "x"};
	struct cql_resource up_ks = {.kind = CQL_RES_KEYSPACE,
				     .keyspace = "ks"};
	ck_assert(auth_perms_allow(&p, CQL_PERM_SELECT, &t));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_MODIFY, &t));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &other));
	ck_assert(auth_perms_allow(&p, CQL_PERM_CREATE, &role));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_DROP, &role));
	/* a keyspace whose name starts with another's is not its child */
	struct cql_resource longer = {
		.kind = CQL_RES_TABLE, .keyspace = "ks2", .name = "t"};
	struct cql_resource ksonly = {.kind = CQL_RES_KEYSPACE,
				      .keyspace = "k"};
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &longer));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &ksonly));
	struct cql_resource all = {.kind = CQL_RES_ALL_KEYSPACES};
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &all));
	/* a grant on a table covers only that table */
	free(p.g[0].resource);
	p.g[0].resource = strdup("data/ks/t");
	struct cql_resource t2 = {
		.kind = CQL_RES_TABLE, .keyspace = "ks", .name = "t2"};
	struct cql_resource tt = {
		.kind = CQL_RES_TABLE, .keyspace = "ks", .name = "tt"};
	ck_assert(auth_perms_allow(&p, CQL_PERM_SELECT, &t));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &t2));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &tt));
	ck_assert(!auth_perms_allow(&p, CQL_PERM_SELECT, &up_ks));
	free(p.g[0].resource);
	p.g[0].resource = strdup("data/ks");
	struct auth_err e;
	ck_assert_int_eq(auth_perms_check(&p, "alice", CQL_PERM_MODIFY, &t, &e),
			 -1);
	ck_assert_uint_eq(e.code, CQL_ERR_UNAUTHORIZED);
	ck_assert_str_eq(e.msg, "User alice has no MODIFY permission on "
				"<table ks.t> or any of its parents");
	p.super = true;
	ck_assert(auth_perms_allow(&p, CQL_PERM_DROP, &other));
	auth_perms_free(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cassandras_hash_is_readable);
	tcase_add_test(tc, new_hashes_are_2a_with_the_cost_asked);
	tcase_add_test(tc, sasl_plain_tokens);
	tcase_add_test(tc, resources_as_cassandra_names_them);
	tcase_add_test(tc, applicable_permissions_and_parents);
	tcase_add_test(tc, grants_checked_up_the_chain);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
