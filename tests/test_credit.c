// SPDX-License-Identifier: MIT
/*
 * unit suite: the credit policy and the admission limits (core/credit.h).
 * Besides exact cases, a simulation of one worker: connections join and
 * leave, peers spend credits, the application holds buffers, and after
 * every step the invariant holds: credits granted and not yet used never
 * exceed the buffers posted on the SRQ.
 */
#include "credit.h"

#include <stdlib.h>

#include "pc_test.h"

START_TEST(test_target)
{
	ck_assert_uint_eq(credit_target(1024, 0, 64), 64);
	ck_assert_uint_eq(credit_target(1024, 1, 64), 64);
	ck_assert_uint_eq(credit_target(1024, 16, 64), 64);
	ck_assert_uint_eq(credit_target(1024, 17, 64), 60);	/* shrinks as they join */
	ck_assert_uint_eq(credit_target(1024, 256, 64), 4);
	ck_assert_uint_eq(credit_target(1024, 1000, 64), 1);
	ck_assert_uint_eq(credit_target(1024, 1024, 64), 1);
	ck_assert_uint_eq(credit_target(1024, 1025, 64), 0);	/* never admitted (floor 1) */
}
END_TEST

START_TEST(test_grant)
{
	/* plenty of room: up to the target */
	ck_assert_uint_eq(credit_grant(0, 64, 1, 1024, 1), 64);
	ck_assert_uint_eq(credit_grant(60, 64, 1, 1024, 0), 4);
	/* at or above the target (it shrank): nothing */
	ck_assert_uint_eq(credit_grant(64, 64, 1, 1024, 0), 0);
	ck_assert_uint_eq(credit_grant(70, 4, 1, 1024, 0), 0);
	/* never more than the room */
	ck_assert_uint_eq(credit_grant(0, 64, 1, 10, 1), 10);
	ck_assert_uint_eq(credit_grant(0, 64, 1, 0, 1), 0);
	/* above its floor, a connection leaves the room others' floors need */
	ck_assert_uint_eq(credit_grant(4, 64, 4, 10, 8), 2);
	ck_assert_uint_eq(credit_grant(4, 64, 4, 8, 8), 0);
	/* below its floor it takes room first, then only what is spare */
	ck_assert_uint_eq(credit_grant(0, 64, 4, 10, 12), 4);	/* own 4, others 8: 10-4-8 < 0 */
	ck_assert_uint_eq(credit_grant(0, 64, 4, 20, 12), 12);	/* own 4, then 20-4-8 = 8 */
	ck_assert_uint_eq(credit_grant(2, 64, 4, 1, 2), 1);	/* short room: what there is */
	/* the floor never exceeds the target */
	ck_assert_uint_eq(credit_grant(0, 2, 4, 100, 4), 2);
}
END_TEST

START_TEST(test_admit)
{
	struct credit_limits l = { .srq_depth = 1024, .min_window = 1, .raw_bufs = 0,
				   .max_conns = 1024, .cqe = 32767, .sq_depth = 256 };
	struct credit_load now = { 0 };

	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_ADMIT);
	/* raw peers only when the application set buffers aside for them */
	ck_assert_int_eq(credit_admit(&l, &now, true), CREDIT_NO_RAW);
	now.conns = 999;
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_ADMIT);	/* the 1,000th */
	now.conns = 1023;
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_ADMIT);
	now.conns = 1024;
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_NO_CONNS);
	/* the floor: 16 buffers, floor 4 -> 4 connections */
	l = (struct credit_limits){ .srq_depth = 16, .min_window = 4, .max_conns = 1024,
				    .cqe = 32767, .sq_depth = 256 };
	now = (struct credit_load){ .conns = 3 };
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_ADMIT);
	now.conns = 4;
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_NO_BUFS);
	/* raw peers are not counted against the floor, but against their own buffers */
	l.raw_bufs = 32;
	now = (struct credit_load){ .conns = 5, .raw = 1 };
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_NO_BUFS);
	ck_assert_int_eq(credit_admit(&l, &now, true), CREDIT_ADMIT);
	now = (struct credit_load){ .conns = 2, .raw = 2 };
	ck_assert_int_eq(credit_admit(&l, &now, true), CREDIT_NO_RAW);
	l.raw_bufs = 8;	/* fewer than one queue's depth: one raw peer gets them all */
	now = (struct credit_load){ 0 };
	ck_assert_int_eq(credit_admit(&l, &now, true), CREDIT_ADMIT);
	now = (struct credit_load){ .conns = 1, .raw = 1 };
	ck_assert_int_eq(credit_admit(&l, &now, true), CREDIT_NO_RAW);
	/* the CQ: receives + markers + one full send queue must fit */
	l = (struct credit_limits){ .srq_depth = 1024, .min_window = 1, .max_conns = 100000,
				    .cqe = 1024 + 10 + 256, .sq_depth = 256 };
	now = (struct credit_load){ .conns = 9 };
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_ADMIT);
	now.conns = 10;
	ck_assert_int_eq(credit_admit(&l, &now, false), CREDIT_NO_CQ);
}
END_TEST

START_TEST(test_cq_room)
{
	struct credit_limits l = { .srq_depth = 1024, .raw_bufs = 64, .cqe = 32767 };

	ck_assert_uint_eq(cq_send_room(&l, 0, 0), 32767 - 1024 - 64);
	ck_assert_uint_eq(cq_send_room(&l, 1000, 0), 32767 - 1024 - 64 - 1000);
	ck_assert_uint_eq(cq_send_room(&l, 1000, 30679), 0);
	ck_assert_uint_eq(cq_send_room(&l, 1000, 40000), 0);
}
END_TEST

/* credit_grant() as it was written before its fast path, for the comparison below. */
static uint32_t grant_ref(uint32_t outstanding, uint32_t target, uint32_t min_window,
			  uint32_t room, uint32_t deficit)
{
	uint32_t want = target > outstanding ? target - outstanding : 0;
	uint32_t own = credit_short(outstanding, min_window);
	uint32_t others = deficit > own ? deficit - own : 0;
	uint32_t g1 = PC_MIN(PC_MIN(want, own), room);
	uint32_t spare = room - g1 > others ? room - g1 - others : 0;

	return g1 + PC_MIN(want - g1, spare);
}

/* The fast path (at or above the floor) and the helpers give exactly the general formulas. */
START_TEST(test_fast_paths)
{
	uint32_t o, t, mw, room, d, n, inflight;
	unsigned long checked = 0;

	for (mw = 1; mw <= 6; mw++)
		for (o = 0; o <= 12; o++)
			for (t = 0; t <= 12; t++)
				for (room = 0; room <= 24; room++)
					for (d = 0; d <= 20; d++) {
						ck_assert_uint_eq(credit_grant(o, t, mw, room, d),
								  grant_ref(o, t, mw, room, d));
						checked++;
					}
	for (mw = 1; mw <= 64; mw++)
		for (o = 1; o <= 200; o++)
			ck_assert_uint_eq(credit_used_short(o, mw),
					  credit_short(o - 1, mw) - credit_short(o, mw));
	for (n = 0; n < 2000; n += 7) {
		struct credit_limits l = { .srq_depth = 1024, .raw_bufs = 64, .cqe = 4096 };
		uint32_t cap = cq_send_cap(&l, n);

		for (inflight = 0; inflight < 5000; inflight += 13)
			ck_assert_uint_eq(cq_send_room(&l, n, inflight),
					  cap > inflight ? cap - inflight : 0);
	}
	ck_assert_uint_gt(checked, 100000);
}
END_TEST

/*
 * One worker simulated: connections join, leave, receive and are granted
 * in random order (a credit used earns one more) while an "application"
 * holds and returns buffers. After
 * every step: sum of outstanding credits <= SRQ posted, and each
 * connection's credits stay within its window.
 */
struct sim_conn {
	bool live;
	uint32_t out;	/* granted, not yet used */
	uint32_t allow;	/* earned: FLOOR, +1 per credit used */
};

START_TEST(test_simulation)
{
	enum { N = 300, DEPTH = 1024, WINDOW = 64, FLOOR = 2 };
	static struct sim_conn c[N];
	uint32_t posted = DEPTH, pool = 0, held = 0, credits_out = 0, deficit = 0, n = 0;
	unsigned int step, i, starved_max = 0;

	srandom(12);
	for (step = 0; step < 300000; step++) {
		unsigned int k = (unsigned int)random() % N, op = (unsigned int)random() % 100;
		struct sim_conn *x = &c[k];

		if (op < 3 && !x->live) {
			if ((n + 1) * FLOOR > DEPTH)
				continue;	/* admission */
			x->live = true;
			x->out = 0;
			x->allow = FLOOR;
			n++;
			deficit += FLOOR;
		} else if (op < 5 && x->live) {
			/* closing: its credits are taken back */
			credits_out -= x->out;
			deficit -= credit_short(x->out, FLOOR);
			x->live = false;
			n--;
		} else if (op < 50 && x->live && x->out) {
			/* the peer spends a credit: a posted buffer is consumed */
			ck_assert_uint_gt(posted, 0);
			deficit += credit_short(x->out - 1, FLOOR) - credit_short(x->out, FLOOR);
			x->out--;
			x->allow = PC_MIN(x->allow + 1, WINDOW);
			credits_out--;
			posted--;
			held++;
		} else if (op < 70 && held) {
			/* the application gives a buffer back */
			held--;
			pool++;
		} else if (op < 75) {
			/* the SRQ refill */
			posted += pool;
			pool = 0;
		} else if (x->live) {
			uint32_t room = posted > credits_out ? posted - credits_out : 0;
			uint32_t t = PC_MIN(credit_target(DEPTH, n, WINDOW), x->allow);
			uint32_t g = credit_grant(x->out, t, FLOOR, room, deficit);

			ck_assert_uint_le(g, room);
			deficit -= credit_short(x->out, FLOOR) - credit_short(x->out + g, FLOOR);
			x->out += g;
			credits_out += g;
			ck_assert_uint_le(x->out, WINDOW);
		}
		ck_assert_uint_le(credits_out, posted);
		ck_assert_uint_eq(posted + pool + held, DEPTH);
		if (step % 1000 == 0) {
			uint32_t d = 0, starved = 0;

			for (i = 0; i < N; i++)
				if (c[i].live) {
					d += credit_short(c[i].out, FLOOR);
					starved += c[i].out == 0;
				}
			ck_assert_uint_eq(d, deficit);
			starved_max = PC_MAX(starved_max, starved);
		}
	}
	printf("simulation: up to %u of %u connections had no credit at a sample\n", starved_max, N);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("credit");
	TCase *tc = tcase_create("credit");

	tcase_add_test(tc, test_target);
	tcase_add_test(tc, test_grant);
	tcase_add_test(tc, test_admit);
	tcase_add_test(tc, test_cq_room);
	tcase_add_test(tc, test_fast_paths);
	tcase_add_test(tc, test_simulation);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
