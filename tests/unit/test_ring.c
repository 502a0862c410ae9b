#include "tests/lib/testutil.h"
START_TEST(stub) {}
END_TEST
int main(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("stub");
	tcase_add_test(tc, stub);
	suite_add_tcase(s, tc);
	return test_run(s);
}
