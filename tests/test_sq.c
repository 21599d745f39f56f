// SPDX-License-Identifier: MIT
/* unit suite: send-queue accounting and WR-chain building (core/sq.h). */
#include "sq.h"

#include <stdlib.h>

#include "pc_test.h"

#define DEPTH 16

static uintptr_t slots[DEPTH];
static struct sq q;
static uint64_t ctxs[64]; /* 8-aligned fake contexts */

struct record {
	void *ctx[DEPTH * 2];
	bool failed[DEPTH * 2];
	unsigned int n;
};

static void rec(void *arg, void *ctx, bool failed)
{
	struct record *r = arg;

	r->ctx[r->n] = ctx;
	r->failed[r->n] = failed;
	r->n++;
}

static void setup(void)
{
	memset(slots, 0, sizeof(slots));
	q = (struct sq){ .depth = DEPTH, .mask = DEPTH - 1, .signal_every = 4, .slot = slots };
}

START_TEST(test_space_keeps_marker_slot)
{
	unsigned int i;

	ck_assert_uint_eq(sq_space(&q), DEPTH - 1);
	for (i = 0; i < DEPTH - 1; i++)
		sq_push(&q, &ctxs[i], false, false);
	ck_assert_uint_eq(sq_space(&q), 0);
	ck_assert_uint_eq(sq_inflight(&q), DEPTH - 1);
	/* the marker still fits */
	sq_push(&q, &ctxs[DEPTH - 1], true, true);
	ck_assert_uint_eq(sq_inflight(&q), DEPTH);
}
END_TEST

START_TEST(test_signal_every_nth_and_last)
{
	bool sig[10];
	unsigned int i;

	for (i = 0; i < 10; i++)
		sig[i] = sq_push(&q, &ctxs[i], i == 9, false);
	/* every 4th (indices 3 and 7) and the chain's last (9) */
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(sig[i], i == 3 || i == 7 || i == 9);
	/* forced (ops) always signal and restart the count */
	ck_assert(sq_push(&q, &ctxs[10], false, true));
	ck_assert(!sq_push(&q, &ctxs[11], false, false));
}
END_TEST

START_TEST(test_success_retires_up_to_signaled)
{
	struct record r = { 0 };
	unsigned int i;

	for (i = 0; i < 8; i++)
		sq_push(&q, &ctxs[i], i == 7, false);
	/* completion of the first signaled WR (index 3) retires 0..3 */
	ck_assert_uint_eq(sq_retire(&q, &ctxs[3], false, rec, &r), 4);
	ck_assert_uint_eq(r.n, 4);
	for (i = 0; i < 4; i++) {
		ck_assert_ptr_eq(r.ctx[i], &ctxs[i]);
		ck_assert(!r.failed[i]);
	}
	ck_assert_uint_eq(sq_inflight(&q), 4);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[7], false, rec, &r), 4);
	ck_assert_uint_eq(sq_inflight(&q), 0);
	/* nothing left: a stray completion retires nothing */
	ck_assert_uint_eq(sq_retire(&q, &ctxs[7], false, rec, &r), 0);
}
END_TEST

/*
 * A completion that is not the next signaled WR's (a late flush of a queue
 * that was abandoned and refilled) matches nothing and retires nothing.
 */
START_TEST(test_stray_success_retires_nothing)
{
	struct record r = { 0 };
	unsigned int i;

	for (i = 0; i < 4; i++)
		sq_push(&q, &ctxs[i], i == 3, false);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[40], false, rec, &r), 0);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[1], false, rec, &r), 0);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[41], true, rec, &r), 0);
	ck_assert_uint_eq(sq_find(&q, &ctxs[40], true), q.head);
	ck_assert_uint_eq(r.n, 0);
	ck_assert_uint_eq(sq_inflight(&q), 4);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[3], false, rec, &r), 4);
}
END_TEST

START_TEST(test_error_retires_to_matching_ctx)
{
	struct record r = { 0 };
	unsigned int i;

	for (i = 0; i < 6; i++)
		sq_push(&q, &ctxs[i], false, false);
	/* WR 2 failed: 0 and 1 completed fine before it */
	ck_assert_uint_eq(sq_retire(&q, &ctxs[2], true, rec, &r), 3);
	ck_assert(!r.failed[0] && !r.failed[1] && r.failed[2]);
	ck_assert_ptr_eq(r.ctx[2], &ctxs[2]);
	/* then each flushed WR gets its own completion */
	for (i = 3; i < 6; i++)
		ck_assert_uint_eq(sq_retire(&q, &ctxs[i], true, rec, &r), 1);
	ck_assert_uint_eq(r.n, 6);
	ck_assert_uint_eq(sq_inflight(&q), 0);
}
END_TEST

START_TEST(test_shared_ctx_matches_oldest)
{
	struct record r = { 0 };

	/* the credit context is posted repeatedly: completions match in order */
	sq_push(&q, &ctxs[0], true, false);
	sq_push(&q, &ctxs[1], false, false);
	sq_push(&q, &ctxs[0], true, false);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[0], false, rec, &r), 1);
	ck_assert_uint_eq(sq_retire(&q, &ctxs[0], false, rec, &r), 2);
	ck_assert_ptr_eq(r.ctx[1], &ctxs[1]);
	ck_assert_uint_eq(sq_inflight(&q), 0);
}
END_TEST

START_TEST(test_wraparound_many_laps)
{
	struct record r;
	unsigned int lap, i;

	for (lap = 0; lap < 1000; lap++) {
		r.n = 0;
		for (i = 0; i < 5; i++)
			sq_push(&q, &ctxs[(lap + i) % 64], i == 4, false);
		ck_assert_uint_eq(sq_retire(&q, &ctxs[(lap + 3) % 64], false, rec, &r), 4);
		ck_assert_uint_eq(sq_retire(&q, &ctxs[(lap + 4) % 64], false, rec, &r), 1);
		ck_assert_uint_eq(r.n, 5);
		for (i = 0; i < 5; i++)
			ck_assert_ptr_eq(r.ctx[i], &ctxs[(lap + i) % 64]);
	}
	ck_assert_uint_eq(q.head, 5000);
	ck_assert_uint_eq(sq_inflight(&q), 0);
}
END_TEST

/* sq_retire_tail() retires exactly what sq_retire() would, or nothing when it cannot. */
START_TEST(test_retire_tail_agrees)
{
	static uintptr_t slots2[DEPTH];
	struct sq q2 = { .depth = DEPTH, .mask = DEPTH - 1, .signal_every = 4, .slot = slots2 };
	struct record r;
	unsigned int step, fast = 0;

	srandom(7);
	for (step = 0; step < 20000; step++) {
		unsigned int k = (unsigned int)random() % 64;

		if (sq_space(&q) && random() % 2) {
			bool last = random() % 2, force = random() % 8 == 0;

			ck_assert_int_eq(sq_push(&q, &ctxs[k], last, force),
					 sq_push(&q2, &ctxs[k], last, force));
			continue;
		}
		/* a completion of a random context, or of the tail's (the usual one) */
		if (sq_inflight(&q) && random() % 2)
			k = (unsigned int)((uint64_t *)sq_slot_ctx(q.slot[q.tail & q.mask]) - ctxs);
		r.n = 0;
		if (sq_retire_tail(&q, &ctxs[k])) {
			ck_assert_uint_eq(sq_retire(&q2, &ctxs[k], false, rec, &r), 1);
			ck_assert_ptr_eq(r.ctx[0], &ctxs[k]);
			fast++;
		} else {
			ck_assert_uint_eq(sq_find(&q, &ctxs[k], false), sq_find(&q2, &ctxs[k], false));
			if (sq_inflight(&q))
				ck_assert(sq_find(&q, &ctxs[k], false) != q.tail);
			sq_retire(&q, &ctxs[k], false, rec, &r);
			sq_retire(&q2, &ctxs[k], false, rec, &r);
		}
		ck_assert_uint_eq(q.tail, q2.tail);
		ck_assert_uint_eq(q.head, q2.head);
	}
	ck_assert_uint_gt(fast, 100);
}
END_TEST

/*
 * sq_retire_quiet() retires what sq_retire() would when only quiet slots
 * (ctxs[0], unsignaled) precede the signaled one completing, and nothing
 * otherwise.
 */
START_TEST(test_retire_quiet_agrees)
{
	static uintptr_t slots2[DEPTH];
	struct sq q2 = { .depth = DEPTH, .mask = DEPTH - 1, .signal_every = 4, .slot = slots2 };
	struct record r;
	unsigned int step, fast = 0, skipped = 0;

	srandom(11);
	for (step = 0; step < 20000; step++) {
		unsigned int k = (unsigned int)random() % 8, n;

		if (sq_space(&q) && random() % 2) {
			/* a quiet WR is never forced signaled as a chain's last */
			bool last = k && random() % 2;

			ck_assert_int_eq(sq_push(&q, &ctxs[k], last, false),
					 sq_push(&q2, &ctxs[k], last, false));
			continue;
		}
		/* a completion of the first signaled slot's context, or of a random one */
		if (random() % 4) {
			uint32_t t = q.tail;

			while (t != q.head && !(q.slot[t & q.mask] & SQ_SIGNALED))
				t++;
			if (t != q.head)
				k = (unsigned int)((uint64_t *)sq_slot_ctx(q.slot[t & q.mask]) - ctxs);
		}
		r.n = 0;
		n = sq_retire_quiet(&q, &ctxs[0], &ctxs[k]);
		if (n) {
			ck_assert_uint_eq(sq_retire(&q2, &ctxs[k], false, rec, &r), n);
			ck_assert_ptr_eq(r.ctx[n - 1], &ctxs[k]);
			while (--n)
				ck_assert_ptr_eq(r.ctx[n - 1], &ctxs[0]);
			fast++;
			skipped += r.n > 1;
		} else {
			sq_retire(&q, &ctxs[k], false, rec, &r);
			sq_retire(&q2, &ctxs[k], false, rec, &r);
		}
		ck_assert_uint_eq(q.tail, q2.tail);
		ck_assert_uint_eq(q.head, q2.head);
	}
	ck_assert_uint_gt(fast, 100);
	ck_assert_uint_gt(skipped, 10);
}
END_TEST

START_TEST(test_unpush)
{
	sq_push(&q, &ctxs[0], false, false);
	sq_push(&q, &ctxs[1], false, false);
	sq_push(&q, &ctxs[2], true, false);
	sq_unpush(&q, 2);
	ck_assert_uint_eq(sq_inflight(&q), 1);
	ck_assert_uint_eq(q.unsignaled, 0);
}
END_TEST

START_TEST(test_chain_links)
{
	struct ibv_send_wr wr[4];
	struct ibv_sge sge[4];
	struct wr_chain c = { .wr = wr, .sge = sge };
	unsigned int i;

	for (i = 0; i < 3; i++) {
		struct ibv_send_wr *w = chain_add(&c);

		w->wr_id = i;
		w->sg_list->length = 10 * i;
	}
	ck_assert_uint_eq(c.n, 3);
	ck_assert_ptr_eq(wr[0].next, &wr[1]);
	ck_assert_ptr_eq(wr[1].next, &wr[2]);
	ck_assert_ptr_null(wr[2].next);
	for (i = 0; i < 3; i++) {
		ck_assert_ptr_eq(wr[i].sg_list, &sge[i]);
		ck_assert_uint_eq(sge[i].length, 10 * i);
	}
	chain_reset(&c);
	chain_add(&c)->wr_id = 42;
	ck_assert_uint_eq(c.n, 1);
	ck_assert_ptr_null(wr[0].next);
	ck_assert_uint_eq(wr[0].wr_id, 42);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sq");
	TCase *tc = tcase_create("accounting");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_space_keeps_marker_slot);
	tcase_add_test(tc, test_signal_every_nth_and_last);
	tcase_add_test(tc, test_success_retires_up_to_signaled);
	tcase_add_test(tc, test_stray_success_retires_nothing);
	tcase_add_test(tc, test_error_retires_to_matching_ctx);
	tcase_add_test(tc, test_shared_ctx_matches_oldest);
	tcase_add_test(tc, test_wraparound_many_laps);
	tcase_add_test(tc, test_retire_tail_agrees);
	tcase_add_test(tc, test_retire_quiet_agrees);
	tcase_add_test(tc, test_unpush);
	tcase_add_test(tc, test_chain_links);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
