// SPDX-License-Identifier: MIT
/* unit suite: the buddy allocator of the large-message pool (core/buddy.h). */
#include "buddy.h"

#include <errno.h>
#include <stdlib.h>

#include "pc_test.h"

#define K64 (64u * 1024)

START_TEST(test_sizes_round_up)
{
	struct buddy b;
	uint64_t off;

	ck_assert_int_eq(buddy_init(&b, 32ull << 20, 16), 0);
	ck_assert_int_eq(buddy_alloc(&b, 1, &off), K64);
	ck_assert_int_eq(buddy_alloc(&b, K64, &off), K64);
	ck_assert_int_eq(buddy_alloc(&b, K64 + 3, &off), 2 * K64);
	ck_assert_uint_eq(off % (2 * K64), 0);
	ck_assert_int_eq(buddy_alloc(&b, 1 << 20, &off), 1 << 20);
	ck_assert_uint_eq(off % (1 << 20), 0);
	ck_assert_uint_eq(buddy_used_bytes(&b), 4 * K64 + (1 << 20));
	/* larger than the region: never */
	ck_assert_int_eq(buddy_alloc(&b, (32ull << 20) + 1, &off), -EMSGSIZE);
	buddy_fini(&b);
}
END_TEST

START_TEST(test_exhaust_and_merge_back)
{
	struct buddy b;
	uint64_t offs[512], off;
	unsigned int i;

	ck_assert_int_eq(buddy_init(&b, 32ull << 20, 16), 0);
	for (i = 0; i < 512; i++)
		ck_assert_int_eq(buddy_alloc(&b, 100, &offs[i]), K64);
	ck_assert_int_eq(buddy_alloc(&b, 1, &off), -ENOBUFS);
	/* distinct, in range */
	for (i = 0; i < 512; i++) {
		ck_assert_uint_lt(offs[i], 32ull << 20);
		ck_assert_uint_eq(offs[i] % K64, 0);
	}
	/* given back out of order, they merge into the two 16 MiB blocks again */
	for (i = 0; i < 512; i += 2)
		ck_assert_int_eq(buddy_free(&b, offs[i]), K64);
	ck_assert_int_eq(buddy_alloc(&b, 2 * K64, &off), -ENOBUFS);
	for (i = 1; i < 512; i += 2)
		ck_assert_int_eq(buddy_free(&b, offs[i]), K64);
	ck_assert_uint_eq(buddy_used_bytes(&b), 0);
	ck_assert_int_eq(buddy_alloc(&b, 16u << 20, &offs[0]), 16 << 20);
	ck_assert_int_eq(buddy_alloc(&b, 16u << 20, &offs[1]), 16 << 20);
	ck_assert_uint_ne(offs[0], offs[1]);
	ck_assert_int_eq(buddy_alloc(&b, 1, &off), -ENOBUFS);
	buddy_fini(&b);
}
END_TEST

START_TEST(test_double_free_refused)
{
	struct buddy b;
	uint64_t off;

	ck_assert_int_eq(buddy_init(&b, 1 << 20, 16), 0);
	ck_assert_int_eq(buddy_alloc(&b, 3 * K64, &off), 4 * K64);
	ck_assert_int_eq(buddy_free(&b, off + K64), -EINVAL);	/* inside, not its head */
	ck_assert_int_eq(buddy_free(&b, off), 4 * K64);
	ck_assert_int_eq(buddy_free(&b, off), -EINVAL);
	ck_assert_int_eq(buddy_free(&b, 1 << 20), -EINVAL);	/* past the end */
	ck_assert_int_eq(buddy_free(&b, 3), -EINVAL);		/* not a block boundary */
	ck_assert_uint_eq(buddy_used_bytes(&b), 0);
	buddy_fini(&b);
}
END_TEST

START_TEST(test_not_a_power_of_two)
{
	struct buddy b;
	uint64_t off, offs[8];
	unsigned int i;

	/* 5 blocks: one of 4 and one of 1; nothing merges across the end */
	ck_assert_int_eq(buddy_init(&b, 5 * K64 + 100, 16), 0);
	ck_assert_uint_eq(b.nblocks, 5);
	ck_assert_int_eq(buddy_alloc(&b, 8 * K64, &off), -EMSGSIZE);
	ck_assert_int_eq(buddy_alloc(&b, 4 * K64, &off), 4 * K64);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(buddy_alloc(&b, K64, &off), K64);
	ck_assert_uint_eq(off, 4 * K64);
	ck_assert_int_eq(buddy_alloc(&b, 1, &off), -ENOBUFS);
	ck_assert_int_eq(buddy_free(&b, 4 * K64), K64);
	ck_assert_int_eq(buddy_free(&b, 0), 4 * K64);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(buddy_alloc(&b, 1, &offs[i]), K64);
	ck_assert_int_eq(buddy_alloc(&b, 1, &off), -ENOBUFS);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(buddy_free(&b, offs[i]), K64);
	ck_assert_int_eq(buddy_alloc(&b, 4 * K64, &off), 4 * K64);
	buddy_fini(&b);
	ck_assert_int_eq(buddy_init(&b, K64 - 1, 16), -EINVAL);
}
END_TEST

/*
 * Random allocations and frees against a byte map: no overlap, all comes
 * back. Inside the loop a check aborts only on failure: each ck_assert
 * writes to Check's pipe, a system call, and the 20,000 rounds took over
 * two minutes in the VM under a sanitizer.
 */
START_TEST(test_random_no_overlap)
{
	enum { N = 64, BLOCKS = 96 };
	struct buddy b;
	uint64_t off[N], size[N];
	uint8_t owner[BLOCKS];
	unsigned int i, k, round;

	srand(7);
	ck_assert_int_eq(buddy_init(&b, (uint64_t)BLOCKS * K64, 16), 0);
	memset(owner, 0xff, sizeof(owner));
	memset(size, 0, sizeof(size));
	for (round = 0; round < 20000; round++) {
		i = (unsigned int)rand() % N;
		if (size[i]) {
			if (buddy_free(&b, off[i]) != (int64_t)size[i])
				ck_abort_msg("round %u: free of %u's block at %llu", round, i,
					     (unsigned long long)off[i]);
			for (k = 0; k < size[i] / K64; k++)
				owner[off[i] / K64 + k] = 0xff;
			size[i] = 0;
		} else {
			int64_t r = buddy_alloc(&b, 1 + (uint64_t)rand() % (8 * K64), &off[i]);

			if (r == -ENOBUFS)
				continue;
			if (r <= 0 || off[i] % (uint64_t)r || off[i] + (uint64_t)r > (uint64_t)BLOCKS * K64)
				ck_abort_msg("round %u: alloc gave %lld at %llu", round, (long long)r,
					     (unsigned long long)off[i]);
			for (k = 0; k < (uint64_t)r / K64; k++) {
				if (owner[off[i] / K64 + k] != 0xff)
					ck_abort_msg("round %u: block %llu given to %u and %u", round,
						     (unsigned long long)(off[i] / K64 + k), i,
						     owner[off[i] / K64 + k]);
				owner[off[i] / K64 + k] = (uint8_t)i;
			}
			size[i] = (uint64_t)r;
		}
	}
	for (i = 0; i < N; i++)
		if (size[i])
			ck_assert_int_eq(buddy_free(&b, off[i]), (int64_t)size[i]);
	ck_assert_uint_eq(buddy_used_bytes(&b), 0);
	/* merged back: the two largest blocks (64 and 32) are whole again */
	ck_assert_int_eq(buddy_alloc(&b, 64 * K64, &off[0]), 64 * K64);
	ck_assert_int_eq(buddy_alloc(&b, 32 * K64, &off[1]), 32 * K64);
	buddy_fini(&b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("buddy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_sizes_round_up);
	tcase_add_test(tc, test_exhaust_and_merge_back);
	tcase_add_test(tc, test_double_free_refused);
	tcase_add_test(tc, test_not_a_power_of_two);
	tcase_add_test(tc, test_random_no_overlap);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pc_test_run(suite());
}
