// SPDX-License-Identifier: MIT
/*
 * unit suite: parameter structures carry their size (core/abi_pvt.h), the
 * engine's checked before any device is touched, so this runs anywhere:
 *  - size 0, or below the first layout: EINVAL, pc_last_error() naming the
 *    structure and the size to set;
 *  - a larger structure (a newer header) whose extra bytes are 0: taken
 *    (the engine then fails later, for want of a device here, not EINVAL);
 *    one whose extra bytes are set: E2BIG, naming the first such byte;
 *  - the same rules for pc_device_params entries, and pc_pool_params;
 *  - parameter checks that belong to the contract: max_unanswered above
 *    the window (it could never be reached), too many callers for call
 *    ids, too many buffers for call ids, an idle spin above 1 s.
 */
#include <pollcore/engine.h>
#include <pollcore/pool.h>
#include <pollcore/poller.h>
#include <pollcore/stats.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "pc_test.h"

static void on_msg(struct pc_msg *m, void *arg)
{
	(void)m;
	(void)arg;
}

/* pc_engine_create(@p) fails with @err, pc_last_error() saying @what. */
static void refused(const void *p, int err, const char *what)
{
	errno = 0;
	ck_assert_ptr_null(pc_engine_create(p));
	ck_assert_int_eq(errno, err);
	ck_assert_msg(strstr(pc_last_error(), what), "pc_last_error: '%s', expected '%s' in it",
		      pc_last_error(), what);
}

START_TEST(test_engine_size)
{
	struct pc_engine_params p = { .on_msg = on_msg, .no_numa = true };
	struct {
		struct pc_engine_params p;
		uint64_t newer[2];
	} big = { .p = { .size = sizeof(big), .on_msg = on_msg, .no_numa = true } };
	const char *none[] = { "pc_test_no_such_device", NULL };

	refused(&p, EINVAL, "set it to sizeof(struct pc_engine_params)");
	p.size = offsetof(struct pc_engine_params, idle_spin_us) - 4;
	refused(&p, EINVAL, "struct pc_engine_params: size");
	ck_assert_ptr_null(pc_engine_create(NULL));
	ck_assert_int_eq(errno, EINVAL);
	/* a newer header's fields, unset: taken; the engine then wants its device */
	big.p.devices = none;
	refused(&big, ENODEV, "");
	/* one of them set: refused, naming the byte */
	big.newer[1] = 1;
	refused(&big, E2BIG, "a field it cannot honour");
}
END_TEST

START_TEST(test_device_params_size)
{
	const char *devs[] = { "pc_test_dev_a", "pc_test_dev_b", NULL };
	struct pc_device_params dp[2] = { { .size = sizeof(dp[0]), .port = 1 },
					  { .size = 0, .port = 1 } };
	struct pc_engine_params p = { .size = sizeof(p), .devices = devs, .device_params = dp,
				      .on_msg = on_msg, .no_numa = true };

	/* every entry carries the same size */
	refused(&p, EINVAL, "device_params[1]: size 0");
	dp[1].size = sizeof(dp[1]);
	refused(&p, ENODEV, "");
}
END_TEST

START_TEST(test_contract_checks)
{
	struct pc_engine_params p = { .size = sizeof(p), .on_msg = on_msg, .no_numa = true,
				      .window = 8, .max_unanswered = 9 };

	refused(&p, EINVAL, "max_unanswered 9 exceeds window 8");
	p.max_unanswered = 0;
	p.rx_bufs = 1u << 20;
	p.srq_depth = 64;
	refused(&p, EINVAL, "buffers per worker");
	p.rx_bufs = 0;
	p.srq_depth = 0;
	p.idle_spin_us = 1000001;
	refused(&p, EINVAL, "idle_spin_us 1000001 exceeds 1 s");
}
END_TEST

/*
 * A program built against the first 0.2 header passes its size, which ends
 * where idle_spin_us begins: its tail padding (pad0) is never taken for a
 * field, and idle_spin_us, past its size, is never read.
 */
START_TEST(test_first_layout)
{
	const char *devs[] = { "pc_test_dev_a", NULL };
	struct pc_engine_params p = { .size = offsetof(struct pc_engine_params, idle_spin_us),
				      .devices = devs, .on_msg = on_msg, .no_numa = true,
				      .pad0 = 0xffffffffu, .idle_spin_us = 1000001 };

	ck_assert_uint_eq(offsetof(struct pc_engine_params, idle_spin_us),
			  offsetof(struct pc_engine_params, max_calls) + 8);
	refused(&p, ENODEV, "");	/* past the checks: idle_spin_us was not read */
	p.size = sizeof(p);
	refused(&p, EINVAL, "idle_spin_us 1000001 exceeds 1 s");
	p.size = offsetof(struct pc_engine_params, idle_spin_us) - 8;
	refused(&p, EINVAL, "set it to sizeof(struct pc_engine_params)");
}
END_TEST

START_TEST(test_pool_size)
{
	struct pc_pool_params pp = { .name = "t", .nbufs = 4, .buf_size = 64 };
	struct {
		struct pc_pool_params p;
		uint32_t newer;
	} big = { .p = { .size = sizeof(big), .name = "t", .nbufs = 4, .buf_size = 64 },
		  .newer = 7 };
	struct pc_pool *pool;

	errno = 0;
	ck_assert_ptr_null(pc_pool_create(&pp));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "pc_pool_params"));
	ck_assert_ptr_null(pc_pool_create((const struct pc_pool_params *)&big));
	ck_assert_int_eq(errno, E2BIG);
	big.newer = 0;
	pool = pc_pool_create((const struct pc_pool_params *)&big);
	ck_assert_msg(pool, "%s", pc_last_error());
	pc_pool_destroy(pool);
	pp.size = sizeof(pp);
	pool = pc_pool_create(&pp);
	ck_assert_ptr_nonnull(pool);
	pc_pool_destroy(pool);
}
END_TEST

/* A NULL engine (one that could not be created) gets EINVAL, or an empty answer, never a crash. */
START_TEST(test_null_engine)
{
	struct pc_engine_info info;
	struct pc_worker_stats st;
	struct pc_msg *msgs[1];
	char buf[64];

	ck_assert_int_eq(pc_engine_print_stats(NULL, stdout), -EINVAL);
	ck_assert_int_eq(pc_engine_stats(NULL, 0, &st), -EINVAL);
	ck_assert_uint_eq(pc_engine_nworkers(NULL), 0);
	ck_assert_ptr_null(pc_stats_segment(NULL));
	ck_assert_int_eq(pc_listen(NULL, NULL, 0), -EINVAL);
	ck_assert_int_eq(pc_listen_stop(NULL), -EINVAL);
	ck_assert_uint_eq(pc_listen_port(NULL), 0);
	errno = 0;
	ck_assert_ptr_null(pc_connect(NULL, "x", 1, -1, 10, NULL));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(pc_app_attach(NULL, 0), -EINVAL);
	ck_assert_int_eq(pc_app_detach(NULL), -EINVAL);
	ck_assert_int_eq(pc_app_poll(NULL, msgs, 1), -EINVAL);
	ck_assert_uint_eq(pc_engine_for_each_conn(NULL, NULL, NULL), 0);
	info.size = sizeof(info);
	ck_assert_int_eq(pc_engine_info(NULL, &info), -EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_engine_worker(NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_engine_mem_reg(NULL, NULL, buf, sizeof(buf), 0));
	ck_assert_int_eq(errno, EINVAL);
	pc_engine_destroy(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("params");
	TCase *tc = tcase_create("params");

	tcase_add_test(tc, test_engine_size);
	tcase_add_test(tc, test_device_params_size);
	tcase_add_test(tc, test_contract_checks);
	tcase_add_test(tc, test_first_layout);
	tcase_add_test(tc, test_pool_size);
	tcase_add_test(tc, test_null_engine);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
