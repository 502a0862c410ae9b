/* The persisted identity: a new node gets a host id and no tokens; a
 * restart keeps host id and tokens and its generation only grows, even
 * when the clock went back. */
#include "common/env_real.h"
#include "node/local_state.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(identity_survives_restarts_and_generation_grows)
{
	const char *dir = test_tmpdir("local_state");
	struct env *env = env_real_new(NULL);
	struct local_state s;
	/* Read before loading: a second may tick in between. */
	int64_t now_s = env_wall_us(env) / 1000000;
	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert_uint_eq(strlen(s.host_id), 36);
	ck_assert_uint_eq(s.host_id[14], '4'); /* UUID version 4 */
	ck_assert_uint_eq(s.token_count, 0);
	ck_assert_int_ge(s.generation, now_s);
	char host_id[37];
	memcpy(host_id, s.host_id, sizeof(host_id));

	/* Tokens chosen later are saved with the identity. */
	s.token_count = 3;
	s.tokens = malloc(3 * sizeof(*s.tokens));
	s.tokens[0] = -5;
	s.tokens[1] = 7;
	s.tokens[2] = INT64_MAX;
	/* As if the last run was far in the future: the clock went back. */
	s.generation = now_s + 100000;
	ck_assert_int_eq(local_state_save(env, dir, &s), 0);
	local_state_free(&s);

	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert_str_eq(s.host_id, host_id);
	ck_assert_uint_eq(s.token_count, 3);
	ck_assert_int_eq(s.tokens[2], INT64_MAX);
	ck_assert_int_eq(s.generation, now_s + 100001);
	char *text = local_state_tokens_text(&s);
	ck_assert_str_eq(text, "-5,7,9223372036854775807");
	free(text);
	local_state_free(&s);

	/* The bumped generation was saved before load returned. */
	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert_int_eq(s.generation, now_s + 100002);
	ck_assert(!s.bootstrapping);

	/* A bootstrap under way survives a restart, and its end too. */
	s.bootstrapping = true;
	ck_assert_int_eq(local_state_save(env, dir, &s), 0);
	local_state_free(&s);
	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert(s.bootstrapping);
	ck_assert_uint_eq(s.token_count, 3);
	s.bootstrapping = false;
	ck_assert_int_eq(local_state_save(env, dir, &s), 0);
	local_state_free(&s);
	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert(!s.bootstrapping);
	ck_assert(!s.decommissioned);

	/* So does a decommission (the node then refuses to start). */
	s.decommissioned = true;
	ck_assert_int_eq(local_state_save(env, dir, &s), 0);
	local_state_free(&s);
	ck_assert_int_eq(local_state_load(env, dir, &s), 0);
	ck_assert(s.decommissioned && !s.bootstrapping);
	ck_assert_uint_eq(s.token_count, 3);
	local_state_free(&s);
	env_real_delete(env);
	test_tmpdir_remove(dir);
}
END_TEST

START_TEST(corrupt_file_is_an_error_not_a_new_identity)
{
	const char *dir = test_tmpdir("local_state_bad");
	char path[512];
	snprintf(path, sizeof(path), "%s/local_state", dir);
	FILE *f = fopen(path, "w");
	fputs("host_id=not-a-uuid\n", f);
	fclose(f);
	struct env *env = env_real_new(NULL);
	struct local_state s;
	ck_assert_int_eq(local_state_load(env, dir, &s), -1);
	env_real_delete(env);
	test_tmpdir_remove(dir);
}
END_TEST

START_TEST(tokens_parse_rejects_junk)
{
	int64_t *t;
	size_t n;
	ck_assert_int_eq(node_tokens_parse("1, -2,3", &t, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(t[1], -2);
	free(t);
	ck_assert_int_eq(node_tokens_parse("1,x", &t, &n), -1);
	ck_assert_int_eq(node_tokens_parse("", &t, &n), -1);
	ck_assert_int_eq(node_tokens_parse("99999999999999999999", &t, &n), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_local_state");
	TCase *t = tcase_create("local_state");
	tcase_add_test(t, identity_survives_restarts_and_generation_grows);
	tcase_add_test(t, corrupt_file_is_an_error_not_a_new_identity);
	tcase_add_test(t, tokens_parse_rejects_junk);
	suite_add_tcase(s, t);
	return test_run(s);
}
