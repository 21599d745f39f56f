// SPDX-License-Identifier: MIT
/*
 * rdma suite: the idle policy a worker runs under (pc_engine_params.idle).
 *  - PC_IDLE_AUTO (the default) busy-polls only on a core of the worker's
 *    own: an unbound worker (no_numa) sleeps on completion events when it
 *    has nothing to do, and pc_worker_stats.busy_poll says 0;
 *  - a worker bound by the plan (the VM has a core for one) busy-polls and
 *    never sleeps;
 *  - PC_IDLE_BUSY and PC_IDLE_HYBRID override the placement either way;
 *  - a hybrid worker polls idle_spin_us before each sleep: never sooner
 *    after the engine starts, never two sleeps closer together than that,
 *    and it does sleep (the time rule, idle_spins 0);
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

/*
 * The time rule: a worker left idle sleeps only once it has polled
 * idle_spin_us (400 ms here, far above a turn's length even under TCG)
 * with nothing to do, and again only after as long once more. Sleeps are
 * counted over intervals the test measures with the same clock: however
 * slow the host, no interval of L ms can hold more than L / 400 + 1 of
 * them, while the count rule (100 turns, a few ms) would sleep about
 * every 100 ms (each sleep's bound).
 */
#define SPIN_MS 400u

START_TEST(test_spin_time)
{
	const char *devs[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p), .devices = devs, .no_numa = true, .idle = PC_IDLE_HYBRID,
		.idle_spin_us = SPIN_MS * 1000, .on_msg = on_msg,
	};
	uint64_t t0 = pc_test_now_ms(), t1, t2;
	struct pc_worker_stats a, b;
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "pc_engine_create: %s", pc_last_error());
	a = pc_test_wait_sleep(e, 0, 1, 0);
	t1 = pc_test_now_ms();
	ck_assert_msg(a.sleeps >= 1, "no sleep within 30 s of idling");
	printf("first sleep seen %llu ms after pc_engine_create() was called (idle_spin_us %u ms)\n",
	       (unsigned long long)(t1 - t0), SPIN_MS);
	/* it polled SPIN_MS first, from a turn after the call began */
	ck_assert_uint_ge(t1 - t0, SPIN_MS);
	/* more sleeps come, each after polling SPIN_MS again */
	b = pc_test_wait_sleep(e, 0, a.sleeps + 3, 0);
	t2 = pc_test_now_ms();
	ck_assert_msg(b.sleeps >= a.sleeps + 3, "%llu sleeps, then no 3 more within 30 s",
		      (unsigned long long)a.sleeps);
	printf("%llu more sleeps in %llu ms (at most %llu by the time rule)\n",
	       (unsigned long long)(b.sleeps - a.sleeps), (unsigned long long)(t2 - t1),
	       (unsigned long long)((t2 - t1) / SPIN_MS + 1));
	/* every sleep since t0 came after SPIN_MS of polling: at most one per SPIN_MS (+1: rounding) */
	ck_assert_uint_le(b.sleeps, (t2 - t0) / SPIN_MS + 1);
	pc_engine_destroy(e);
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
	tcase_add_test(tc, test_spin_time);
	tcase_add_test(tc, test_unknown_policy);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
