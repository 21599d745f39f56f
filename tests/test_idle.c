// SPDX-License-Identifier: MIT
/*
 * rdma suite: the idle policy a worker runs under (pc_engine_params.idle).
 *  - PC_IDLE_AUTO (the default) busy-polls only on a core of the worker's
 *    own: an unbound worker (no_numa) sleeps on completion events when it
 *    has nothing to do, and pc_worker_stats.busy_poll says 0;
 *  - a worker bound by the plan (the VM has a core for one) busy-polls and
 *    never sleeps;
 *  - PC_IDLE_BUSY and PC_IDLE_HYBRID override the placement either way;
 *  - an unknown policy is refused with EINVAL.
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "pc_test.h"

static void on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	pc_msg_release(m);
}

/*
 * An engine of @nw workers left idle for 300 ms; every worker's counters.
 * With @sleeper, until each has also slept more than 100 ms in all (more
 * than one sleep's timeout), however slow the host.
 */
static void idle_run(enum pc_idle idle, bool no_numa, unsigned int nw, bool sleeper,
		     struct pc_worker_stats *st)
{
	const char *devs[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = devs, .workers_per_device = nw, .no_numa = no_numa,
		.idle = idle, .idle_spins = 100, .on_msg = on_msg,
	};
	struct pc_engine *e = pc_engine_create(&p);
	unsigned int i;

	ck_assert_msg(e, "pc_engine_create: %s", pc_last_error());
	ck_assert_uint_eq(pc_engine_nworkers(e), nw);
	usleep(300000);
	for (i = 0; i < nw; i++) {
		if (sleeper)
			st[i] = pc_test_wait_sleep(e, i, 1, 100000001ull);
		else
			ck_assert_int_eq(pc_engine_stats(e, i, &st[i]), 0);
		printf("idle %d, no_numa %d: %s on PU %d, busy_poll %u, %llu sleeps\n", (int)idle,
		       no_numa, st[i].name, st[i].pu, st[i].busy_poll,
		       (unsigned long long)st[i].sleeps);
	}
	pc_engine_destroy(e);
}

START_TEST(test_auto_unbound_sleeps)
{
	struct pc_worker_stats st[2];
	unsigned int i;

	idle_run(PC_IDLE_AUTO, true, 2, true, st);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(st[i].pu, -1);
		ck_assert_uint_eq(st[i].busy_poll, 0);
		ck_assert_uint_gt(st[i].sleeps, 0);
		/* it slept more than one sleep's timeout, not just once */
		ck_assert_uint_gt(st[i].sleep_ns, 100000000ull);
	}
}
END_TEST

START_TEST(test_auto_bound_busy)
{
	struct pc_worker_stats st;

	idle_run(PC_IDLE_AUTO, false, 1, false, &st);
	/* the test bed has a core for one worker beside the housekeeping one */
	ck_assert_msg(st.pu >= 0, "the worker was not bound: no placement on the test bed");
	ck_assert_uint_eq(st.busy_poll, 1);
	ck_assert_uint_eq(st.sleeps, 0);
	ck_assert_uint_gt(st.loops, 1000);
}
END_TEST

START_TEST(test_forced_policies)
{
	struct pc_worker_stats st;

	idle_run(PC_IDLE_BUSY, true, 1, false, &st);
	ck_assert_int_eq(st.pu, -1);
	ck_assert_uint_eq(st.busy_poll, 1);
	ck_assert_uint_eq(st.sleeps, 0);

	idle_run(PC_IDLE_HYBRID, false, 1, true, &st);
	ck_assert_int_ge(st.pu, 0);
	ck_assert_uint_eq(st.busy_poll, 0);
	ck_assert_uint_gt(st.sleeps, 0);
}
END_TEST

START_TEST(test_unknown_policy)
{
	struct pc_engine_params p = { .size = sizeof(p), .idle = (enum pc_idle)3, .no_numa = true,
				      .on_msg = on_msg };

	errno = 0;
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("idle");
	TCase *tc = tcase_create("idle");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_auto_unbound_sleeps);
	tcase_add_test(tc, test_auto_bound_busy);
	tcase_add_test(tc, test_forced_policies);
	tcase_add_test(tc, test_unknown_policy);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
