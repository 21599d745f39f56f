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

	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);
	/* raw peers only when the application set buffers aside for them */
	ck_assert_int_eq(credit_admit(&l, &now, 1), CREDIT_NO_RAW);
	now.conns = 999;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);	/* the 1,000th */
	now.conns = 1023;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);
	now.conns = 1024;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_NO_CONNS);
	/* the floor: 16 buffers, floor 4 -> 4 connections */
	l = (struct credit_limits){ .srq_depth = 16, .min_window = 4, .max_conns = 1024,
				    .cqe = 32767, .sq_depth = 256 };
	now = (struct credit_load){ .conns = 3 };
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);
	now.conns = 4;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_NO_BUFS);
	/* raw peers are not counted against the floor, but against their own buffers */
	l.raw_bufs = 32;
	now = (struct credit_load){ .conns = 5, .raw = 1, .raw_taken = 16 };
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_NO_BUFS);
	ck_assert_int_eq(credit_admit(&l, &now, 16), CREDIT_ADMIT);	/* exactly full */
	ck_assert_int_eq(credit_admit(&l, &now, 17), CREDIT_NO_RAW);
	/* depths differ per connection: what is taken counts, not how many */
	now = (struct credit_load){ .conns = 2, .raw = 2, .raw_taken = 31 };
	ck_assert_int_eq(credit_admit(&l, &now, 1), CREDIT_ADMIT);
	ck_assert_int_eq(credit_admit(&l, &now, 2), CREDIT_NO_RAW);
	now = (struct credit_load){ .conns = 1, .raw = 1, .raw_taken = 32 };
	ck_assert_int_eq(credit_admit(&l, &now, 1), CREDIT_NO_RAW);
	/* the CQ: receives + markers + one full send queue must fit */
	l = (struct credit_limits){ .srq_depth = 1024, .min_window = 1, .max_conns = 100000,
				    .cqe = 1024 + 10 + 256, .sq_depth = 256 };
	now = (struct credit_load){ .conns = 9 };
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);
	now.conns = 10;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_NO_CQ);
	/*
	 * The floor must be free now: 2 connections of 64 buffers, one of them
	 * idle on the 63 credits it earned, the other at its floor of 1.
	 */
	l = (struct credit_limits){ .srq_depth = 64, .min_window = 1, .max_conns = 1024,
				    .cqe = 32767, .sq_depth = 256 };
	now = (struct credit_load){ .conns = 2, .committed = 64 };
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_NO_FLOOR);
	now.committed = 63;
	ck_assert_int_eq(credit_admit(&l, &now, 0), CREDIT_ADMIT);
	/* raw peers take no credit */
	l.raw_bufs = 16;
	now.committed = 64;
	ck_assert_int_eq(credit_admit(&l, &now, 1), CREDIT_ADMIT);
}
END_TEST

START_TEST(test_growth_keep)
{
	/* a grant commits more only above the floor */
	ck_assert_uint_eq(credit_growth(0, 1, 2), 0);
	ck_assert_uint_eq(credit_growth(0, 2, 2), 0);
	ck_assert_uint_eq(credit_growth(0, 5, 2), 3);
	ck_assert_uint_eq(credit_growth(1, 5, 2), 4);
	ck_assert_uint_eq(credit_growth(4, 3, 2), 3);
	ck_assert_uint_eq(credit_growth(4, 0, 2), 0);
	/* closing: what the peer may have spent and we have not polled stays counted */
	ck_assert_uint_eq(credit_leave_keep(10, 10, 4), 6);
	ck_assert_uint_eq(credit_leave_keep(10, 7, 4), 3);	/* 3 never reached the peer */
	ck_assert_uint_eq(credit_leave_keep(10, 4, 4), 0);
	ck_assert_uint_eq(credit_leave_keep(10, 2, 4), 0);	/* it overran */
	ck_assert_uint_eq(credit_leave_keep(3, 7, 1), 2);	/* published never beyond granted */
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
 * One worker simulated: connections are admitted (credit_admit()), leave,
 * receive and are granted in random order (a credit used earns one more)
 * while an "application" holds and returns buffers. A peer's send consumes
 * a posted buffer at once, but the worker sees it only when it polls the
 * receive: between the two it sits in the CQ, still counted in the
 * worker's SRQ count. A grant reaches the peer only once published (in a
 * header or a WRITE). A closing connection's peer can send no more; its
 * receives already in the CQ are still polled, until its drain ends.
 *
 * After every step:
 *  - the worker's view: credits_out <= its SRQ count;
 *  - the device's: what live peers may still spend (granted, not yet
 *    consumed) <= the buffers really posted (the SRQ count less the
 *    receives in the CQ): no RNR NAK for an obedient peer;
 *  - the floors: credits_out + floor deficit <= srq_depth, so every
 *    admitted connection can have its floor whatever the others do.
 */
struct sim_conn {
	bool live;	/* admitted, not closing */
	bool closing;	/* draining: receives may still be in the CQ */
	uint32_t out;	/* granted, receives not yet polled (the worker's view) */
	uint32_t unpub;	/* of those, granted but not yet sent to the peer */
	uint32_t cq;	/* consumed by the peer, not yet polled */
	uint32_t keep;	/* closing: credits still counted (credit_leave_keep()) */
	uint32_t allow;	/* earned: FLOOR, +1 per credit used */
};

struct sim_cfg {
	unsigned int n, depth, window, floor, steps, seed;
	unsigned int idle_after;	/* from this step on, even-numbered peers send nothing */
};

static void simulate(const struct sim_cfg *cfg)
{
	const uint32_t DEPTH = cfg->depth, WINDOW = cfg->window, FLOOR = cfg->floor;
	struct sim_conn *c = calloc(cfg->n, sizeof(*c));
	struct credit_limits l = { .srq_depth = DEPTH, .min_window = FLOOR, .max_conns = cfg->n,
				   .cqe = UINT32_MAX / 2, .sq_depth = 1 };
	uint32_t srq = DEPTH, posted = DEPTH, pool = 0, held = 0, cq_total = 0;
	uint32_t credits_out = 0, deficit = 0, n = 0, attached = 0;
	unsigned int step, i, starved_max = 0, refused_floor = 0, leaves_unpolled = 0;

	ck_assert_ptr_nonnull(c);
	srandom(cfg->seed);
	for (step = 0; step < cfg->steps; step++) {
		unsigned int k = (unsigned int)random() % cfg->n, op = (unsigned int)random() % 100;
		struct sim_conn *x = &c[k];

		if (op < 3 && !x->live && !x->closing) {
			struct credit_load load = { .conns = attached,
						    .committed = credits_out + deficit };
			enum credit_verdict v = credit_admit(&l, &load, 0);

			if (v == CREDIT_NO_FLOOR)
				refused_floor++;
			if (v != CREDIT_ADMIT)
				continue;
			*x = (struct sim_conn){ .live = true, .allow = FLOOR };
			n++;
			attached++;
			deficit += FLOOR;
		} else if (op < 5 && x->live) {
			/* closing: what the peer cannot have spent is taken back */
			x->keep = credit_leave_keep(x->out, x->out - x->unpub, 0);
			leaves_unpolled += x->cq > 0;
			credits_out -= x->out - x->keep;
			deficit -= credit_short(x->out, FLOOR);
			x->live = false;
			x->closing = true;
			n--;
		} else if (op < 8 && x->closing && !x->cq) {
			/* its drain ends: no receive of it can come any more */
			credits_out -= x->keep;
			x->keep = 0;
			x->closing = false;
			attached--;
		} else if (op < 30 && x->live && x->out - x->unpub > x->cq &&
			   (step < cfg->idle_after || k % 2)) {
			/* the peer spends a credit it knows of: a posted buffer is consumed */
			ck_assert_uint_gt(posted, 0);
			posted--;
			x->cq++;
			cq_total++;
		} else if (op < 50 && x->cq) {
			/* the worker polls that receive */
			x->cq--;
			cq_total--;
			srq--;
			held++;
			if (x->live) {
				deficit += credit_used_short(x->out, FLOOR);
				x->out--;
				x->allow = PC_MIN(x->allow + 1, WINDOW);
				credits_out--;
			} else if (x->keep) {
				x->keep--;
				credits_out--;
			}
		} else if (op < 65 && held) {
			/* the application gives a buffer back */
			held--;
			pool++;
		} else if (op < 70) {
			/* the SRQ refill */
			posted += pool;
			srq += pool;
			pool = 0;
		} else if (op < 80 && x->live) {
			/* a header or a WRITE carries the grant to the peer */
			x->unpub = 0;
		} else if (x->live) {
			uint32_t room = srq > credits_out ? srq - credits_out : 0;
			uint32_t t = PC_MIN(credit_target(DEPTH, n, WINDOW), x->allow);
			uint32_t g = credit_grant(x->out, t, FLOOR, room, deficit);

			ck_assert_uint_le(g, room);
			deficit -= credit_short(x->out, FLOOR) - credit_short(x->out + g, FLOOR);
			x->out += g;
			x->unpub += g;
			credits_out += g;
			ck_assert_uint_le(x->out, WINDOW);
		}
		ck_assert_uint_le(credits_out, srq);
		ck_assert_uint_eq(posted + cq_total, srq);
		ck_assert_uint_eq(srq + pool + held, DEPTH);
		{
			uint32_t spendable = 0;

			for (i = 0; i < cfg->n; i++)
				if (c[i].live)
					spendable += c[i].out - c[i].cq;
			ck_assert_msg(spendable <= posted, "step %u: live peers may spend %u credits, "
				      "%u buffers are posted (%u receives in the CQ)", step, spendable,
				      posted, cq_total);
		}
		ck_assert_msg(credits_out + deficit <= DEPTH, "step %u: %u credits out and a floor "
			      "deficit of %u: more than the %u buffers; a floor cannot be granted",
			      step, credits_out, deficit, DEPTH);
		if (step % 1000 == 0) {
			uint32_t d = 0, starved = 0, out = 0;

			for (i = 0; i < cfg->n; i++) {
				if (c[i].live) {
					d += credit_short(c[i].out, FLOOR);
					starved += c[i].out == 0;
					out += c[i].out;
				}
				out += c[i].keep;
			}
			ck_assert_uint_eq(d, deficit);
			ck_assert_uint_eq(out, credits_out);
			starved_max = PC_MAX(starved_max, starved);
		}
	}
	/* everything closes and drains: nothing stays counted */
	for (i = 0; i < cfg->n; i++) {
		if (c[i].live) {
			c[i].keep = credit_leave_keep(c[i].out, c[i].out - c[i].unpub, 0);
			credits_out -= c[i].out - c[i].keep;
			deficit -= credit_short(c[i].out, FLOOR);
		}
		while (c[i].cq) {
			c[i].cq--;
			if (c[i].keep) {
				c[i].keep--;
				credits_out--;
			}
		}
		credits_out -= c[i].keep;
	}
	ck_assert_uint_eq(credits_out, 0);
	ck_assert_uint_eq(deficit, 0);
	printf("simulation %u conns, depth %u, window %u, floor %u: up to %u had no credit at a "
	       "sample; %u closed with receives unpolled; %u refused for their floor\n", cfg->n,
	       DEPTH, WINDOW, FLOOR, starved_max, leaves_unpolled, refused_floor);
	free(c);
}

/*
 * A closing connection whose peer spent credits the worker has not polled
 * yet: 8 buffers, A holds 7 credits and B its floor of 1. A's peer sends 4
 * (consumed, in the CQ), then A closes. 4 buffers are really posted, and
 * B, which has earned a window of 8, must not be granted more than 3 more.
 */
START_TEST(test_leave_unpolled)
{
	const uint32_t depth = 8, floor = 1;
	uint32_t srq = depth, posted = depth, credits_out = 8, deficit = 0;
	uint32_t a_out = 7, a_cq = 4, b_out = 1, keep, room, g;

	/* A's peer sends 4: consumed, not yet polled */
	posted -= a_cq;
	/* A closes (granted 7, all of it published, nothing polled) */
	keep = credit_leave_keep(a_out, a_out, 0);
	credits_out -= a_out - keep;
	/* B is granted what the room allows, up to its target of 8 */
	room = srq > credits_out ? srq - credits_out : 0;
	g = credit_grant(b_out, 8, floor, room, deficit);
	b_out += g;
	ck_assert_msg(b_out <= posted, "B may spend %u credits, %u buffers are posted", b_out,
		      posted);
	/* A's receives are polled: their credits go with them */
	while (a_cq) {
		a_cq--;
		srq--;
		if (keep) {
			keep--;
			credits_out--;
		}
	}
	credits_out -= keep;	/* A's drain ends */
	ck_assert_uint_eq(credits_out, b_out);
	ck_assert_uint_le(credits_out, srq);
}
END_TEST

/* Pure logic on one thread: a sanitizer finds what it can in fewer steps, at 10x their cost. */
#define SIM_STEPS (PC_TEST_SANITIZED ? 60000u : 300000u)

START_TEST(test_simulation)
{
	/* many connections, their windows shrunk by the shares */
	simulate(&(struct sim_cfg){ .n = 300, .depth = 1024, .window = 64, .floor = 2,
				    .steps = SIM_STEPS, .seed = 12, .idle_after = ~0u });
}
END_TEST

START_TEST(test_simulation_tight)
{
	/* few buffers, large windows: peers that went idle hold most of the SRQ */
	simulate(&(struct sim_cfg){ .n = 4, .depth = 16, .window = 16, .floor = 1,
				    .steps = SIM_STEPS, .seed = 7, .idle_after = 20000 });
}
END_TEST

int main(void)
{
	Suite *s = suite_create("credit");
	TCase *tc = tcase_create("credit");

	tcase_add_test(tc, test_target);
	tcase_add_test(tc, test_grant);
	tcase_add_test(tc, test_admit);
	tcase_add_test(tc, test_growth_keep);
	tcase_add_test(tc, test_leave_unpolled);
	tcase_add_test(tc, test_cq_room);
	tcase_add_test(tc, test_fast_paths);
	tcase_add_test(tc, test_simulation);
	tcase_add_test(tc, test_simulation_tight);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
