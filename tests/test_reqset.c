// SPDX-License-Identifier: MIT
/* unit suite: the set of outstanding request ids and their values (core/reqset.h). */
#include "reqset.h"

#include "pc_test.h"

/* Every id carries a value of its own, which must come back with it. */
#define VAL(id) ((id) * 1000003u + 7)

static bool add(struct reqset *s, uint64_t id)
{
	return reqset_add(s, id, VAL(id));
}

static bool del(struct reqset *s, uint64_t id)
{
	uint64_t v = 0;
	bool ok = reqset_del(s, id, &v);

	if (ok)
		ck_assert_uint_eq(v, VAL(id));
	return ok;
}

START_TEST(test_add_del_unknown)
{
	struct reqset s;

	ck_assert_int_eq(reqset_init(&s, 4), 0);
	ck_assert_uint_eq(s.mask + 1, 8);
	ck_assert(add(&s, 1));
	ck_assert(add(&s, 2));
	/* duplicates, id 0 and a full set are refused */
	ck_assert(!add(&s, 2));
	ck_assert(!add(&s, 0));
	ck_assert(add(&s, 3));
	ck_assert(add(&s, 4));
	ck_assert(!add(&s, 5));
	ck_assert_uint_eq(s.n, 4);
	/* a response to something never asked, or asked and answered, is unknown */
	ck_assert(!del(&s, 5));
	ck_assert(!del(&s, 0));
	ck_assert(del(&s, 3));
	ck_assert(!del(&s, 3));
	ck_assert(add(&s, 5));
	ck_assert(del(&s, 1) && del(&s, 2) && del(&s, 4) &&
		  del(&s, 5));
	ck_assert_uint_eq(s.n, 0);
	reqset_free(&s);
}
END_TEST

/* Colliding ids (same home slot) and wraparound runs survive out-of-order deletes. */
START_TEST(test_collisions_backward_shift)
{
	struct reqset s;
	uint64_t ids[] = { 7, 15, 23, 8, 31, 16 }; /* homes 7, 7, 7, 0, 7, 0 in 8 slots */
	unsigned int i, k;

	ck_assert_int_eq(reqset_init(&s, 4), 0);
	s.max = 6; /* 6 of 8 slots: the runs wrap around the end */
	for (i = 0; i < 6; i++)
		ck_assert(add(&s, ids[i]));
	for (k = 0; k < 6; k++) {
		/* delete one, every other one still found, then put it back */
		ck_assert(del(&s, ids[k]));
		for (i = 0; i < 6; i++)
			if (i != k) {
				ck_assert(del(&s, ids[i]));
				ck_assert(add(&s, ids[i]));
			}
		ck_assert(!del(&s, ids[k]));
		ck_assert(add(&s, ids[k]));
	}
	ck_assert_uint_eq(s.n, 6);
	reqset_free(&s);
}
END_TEST

/*
 * Against a reference: a window of 64 requests, answered in a scrambled
 * order, one old request left outstanding for long (ids spanning more than
 * the table), over 100,000 ids.
 */
START_TEST(test_against_reference)
{
	enum { W = 64, N = 100000 };
	uint64_t pending[W], next = 1, old;
	unsigned int npend = 0, i;
	struct reqset s;
	uint32_t rnd = 12345;

	ck_assert_int_eq(reqset_init(&s, W), 0);
	old = next++;
	ck_assert(add(&s, old));
	while (next <= N) {
		while (npend < W - 1 && next <= N) {
			ck_assert(add(&s, next));
			pending[npend++] = next++;
		}
		rnd = rnd * 1103515245 + 12345;
		i = (rnd >> 8) % npend;
		ck_assert(del(&s, pending[i]));
		pending[i] = pending[--npend];
		/* a made-up id is never found */
		ck_assert(!del(&s, next + 1000));
	}
	for (i = 0; i < npend; i++)
		ck_assert(del(&s, pending[i]));
	ck_assert(del(&s, old));
	ck_assert_uint_eq(s.n, 0);
	for (i = 0; i <= s.mask; i++)
		ck_assert_uint_eq(s.slot[i].id, 0);
	reqset_free(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reqset");
	TCase *tc = tcase_create("reqset");

	tcase_add_test(tc, test_add_del_unknown);
	tcase_add_test(tc, test_collisions_backward_shift);
	tcase_add_test(tc, test_against_reference);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
