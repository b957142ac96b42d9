/*
 * Unit test of the environment switches (src/core/env.h): sr_env_num's
 * default for an unset, empty, negative or non-numeric value, its clamp
 * to max, and its cache (read once: a later change is not seen);
 * sr_env_on and sr_env_set.
 */
#include <stdlib.h>

#include "check.h"
#include "core/env.h"

static int num(const char *value, int max, int dflt)
{
	int cache = -1;

	if (value)
		setenv("SR_TEST_NUM", value, 1);
	else
		unsetenv("SR_TEST_NUM");
	return sr_env_num("SR_TEST_NUM", &cache, max, dflt);
}

int main(void)
{
	int cache = -1;

	CHECK_EQ(num(NULL, 100, 50), 50);
	CHECK_EQ(num("", 100, 50), 50);
	CHECK_EQ(num("0", 100, 50), 0);
	CHECK_EQ(num("7", 100, 50), 7);
	CHECK_EQ(num("100", 100, 50), 100);
	CHECK_EQ(num("101", 100, 50), 100);
	CHECK_EQ(num("99999999999999", 1000, 30), 1000);
	CHECK_EQ(num("-1", 100, 50), 50);
	CHECK_EQ(num("12x", 100, 50), 50);
	CHECK_EQ(num("x", 100, 50), 50);

	/* read once per cache */
	setenv("SR_TEST_NUM", "3", 1);
	CHECK_EQ(sr_env_num("SR_TEST_NUM", &cache, 100, 50), 3);
	setenv("SR_TEST_NUM", "4", 1);
	CHECK_EQ(sr_env_num("SR_TEST_NUM", &cache, 100, 50), 3);

	cache = -1;
	unsetenv("SR_TEST_ON");
	CHECK(sr_env_on("SR_TEST_ON", &cache));
	cache = -1;
	setenv("SR_TEST_ON", "0", 1);
	CHECK(!sr_env_on("SR_TEST_ON", &cache));
	cache = -1;
	setenv("SR_TEST_ON", "1", 1);
	CHECK(sr_env_on("SR_TEST_ON", &cache));
	cache = -1;
	CHECK(sr_env_set("SR_TEST_ON", &cache));
	cache = -1;
	setenv("SR_TEST_ON", "2", 1);
	CHECK(!sr_env_set("SR_TEST_ON", &cache));
	return CHECK_SUMMARY("test_env");
}
