// SPDX-License-Identifier: MIT
/*
 * unit suite: a hybrid worker's adaptive spin (workers/idle_pvt.h), in
 * nanoseconds for ticks:
 *  - the ceiling: 20 times idle_spin_us, at most 1 ms, never below it;
 *  - a sleep that an event ended soon lengthens the next spin to a quarter
 *    past its gap, at most twice the last spin, within the ceiling; a
 *    timeout or a gap past the ceiling brings it back to idle_spin_us;
 *  - a model of a QD1 stream (the next request a fixed gap after the last
 *    work): with idle_spin_us shorter than the gap the worker sleeps a
 *    few times, then catches every later request spinning; when the
 *    stream stops it sleeps again, and after that long sleep spins
 *    idle_spin_us only.
 */
#include "idle_pvt.h"

#include "pc_test.h"

#define US 1000ull
#define MS (1000 * US)

START_TEST(test_cap)
{
	ck_assert_uint_eq(idle_spin_cap(50 * US, MS), MS);	     /* the default: 20 x 50 us */
	ck_assert_uint_eq(idle_spin_cap(10 * US, MS), 200 * US);    /* 20 x */
	ck_assert_uint_eq(idle_spin_cap(400 * MS, MS), 400 * MS);   /* never below the base */
	ck_assert_uint_eq(idle_spin_cap(MS, MS), MS);
}
END_TEST

START_TEST(test_lengthens)
{
	const uint64_t base = 50 * US, cap = idle_spin_cap(base, MS);

	/* woken 150 us after the idling began, spin 100 us: 187.5 us next */
	ck_assert_uint_eq(idle_spin_next(100 * US, base, cap, 150 * US, true), 187500);
	/* ... but from a 50 us spin at most twice that: one gap is not a pattern */
	ck_assert_uint_eq(idle_spin_next(base, base, cap, 150 * US, true), 100 * US);
	/* woken right after the spin: still a quarter longer than the gap */
	ck_assert_uint_eq(idle_spin_next(base, base, cap, 52 * US, true), 65 * US);
	/* a gap below the base (the count rule slept first): never below the base */
	ck_assert_uint_eq(idle_spin_next(base, base, cap, 10 * US, true), base);
	/* a quarter past the gap would pass the ceiling: the ceiling */
	ck_assert_uint_eq(idle_spin_next(800 * US, base, cap, 900 * US, true), cap);
	ck_assert_uint_eq(idle_spin_next(cap, base, cap, cap, true), cap);
	/* doubling from the base reaches the ceiling in a few sleeps: 50, 100, 200, 400, 800, 1000 */
	{
		uint64_t spin = base;
		unsigned int k;

		for (k = 0; k < 5; k++)
			spin = idle_spin_next(spin, base, cap, cap, true);
		ck_assert_uint_eq(spin, cap);
	}
}
END_TEST

START_TEST(test_shrinks)
{
	const uint64_t base = 50 * US, cap = idle_spin_cap(base, MS);

	/* past the ceiling, even by a nanosecond: real idleness, the base */
	ck_assert_uint_eq(idle_spin_next(cap, base, cap, cap + 1, true), base);
	ck_assert_uint_eq(idle_spin_next(500 * US, base, cap, 100 * MS, true), base);
	/* ended by its timeout (nothing arrived), however short: the base */
	ck_assert_uint_eq(idle_spin_next(500 * US, base, cap, 150 * US, false), base);
	ck_assert_uint_eq(idle_spin_next(cap, base, cap, 100 * MS, false), base);
}
END_TEST

/*
 * The worker's side of idle_enough() and worker_sleep() on a stream of
 * requests arriving @gap after the last work: it sleeps when the gap
 * outlasts its spin (woken by the request), else catches it spinning.
 * Returns the sleeps over @n requests; *spin is carried over.
 */
static unsigned int stream(uint64_t base, uint64_t cap, uint64_t *spin, uint64_t gap, unsigned int n)
{
	unsigned int sleeps = 0;

	while (n--) {
		if (gap <= *spin)
			continue;
		sleeps++;
		*spin = idle_spin_next(*spin, base, cap, gap, true);
	}
	return sleeps;
}

START_TEST(test_qd1_stream)
{
	const uint64_t base = 50 * US, cap = idle_spin_cap(base, MS);
	uint64_t spin = base;

	/* requests 150 us apart: two sleeps (50 -> 100 -> 187.5 us), then every one caught spinning */
	ck_assert_uint_eq(stream(base, cap, &spin, 150 * US, 1000), 2);
	ck_assert_uint_eq(spin, 187500);
	/* gaps that grow a little: a sleep each time one outgrows the spin, not one per request */
	ck_assert_uint_eq(stream(base, cap, &spin, 200 * US, 1000), 1);
	ck_assert_uint_eq(spin, 250 * US);
	/* the stream stops: the next sleep ends by its timeout (100 ms), back to the base */
	spin = idle_spin_next(spin, base, cap, 100 * MS, false);
	ck_assert_uint_eq(spin, base);
	/* requests 5 ms apart (past the ceiling): a sleep for each, the spin stays the base */
	ck_assert_uint_eq(stream(base, cap, &spin, 5 * MS, 100), 100);
	ck_assert_uint_eq(spin, base);
	/* requests within the base: never a sleep, the spin unchanged */
	ck_assert_uint_eq(stream(base, cap, &spin, 20 * US, 100), 0);
	ck_assert_uint_eq(spin, base);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("idle_spin");
	TCase *tc = tcase_create("idle_spin");

	tcase_add_test(tc, test_cap);
	tcase_add_test(tc, test_lengthens);
	tcase_add_test(tc, test_shrinks);
	tcase_add_test(tc, test_qd1_stream);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
