// SPDX-License-Identifier: MIT
/* unit suite: the block allocator of the large-message pool (core/blkalloc.h). */
#include "blkalloc.h"

#include <errno.h>
#include <stdlib.h>

#include "pc_test.h"

#define K64 (64u * 1024)
#define M32 (32ull << 20)	/* the default pool: 512 blocks of 64 KiB */

/* The allocator's whole state, to check that a refused call changed nothing. */
struct snap {
	uint32_t used;
	uint64_t map[8];
	uint32_t run[512];
};

static void snap_take(const struct blkalloc *b, struct snap *s)
{
	ck_assert_uint_le(b->nwords, 8);
	ck_assert_uint_le(b->nblocks, 512);
	memset(s, 0, sizeof(*s));
	s->used = b->used;
	memcpy(s->map, b->free_map, b->nwords * sizeof(*b->free_map));
	memcpy(s->run, b->run, b->nblocks * sizeof(*b->run));
}

static void snap_same(const struct blkalloc *b, const struct snap *s)
{
	struct snap now;

	snap_take(b, &now);
	ck_assert_mem_eq(&now, s, sizeof(now));
}

START_TEST(test_exact_sizes)
{
	struct blkalloc b;
	uint64_t off;

	ck_assert_int_eq(blkalloc_init(&b, M32, 16), 0);
	ck_assert_uint_eq(b.nblocks, 512);
	ck_assert_uint_eq(blkalloc_size_of(&b, 0), 0);
	ck_assert_uint_eq(blkalloc_size_of(&b, 1), K64);
	ck_assert_uint_eq(blkalloc_size_of(&b, K64 + 1), 2 * K64);
	ck_assert_uint_eq(blkalloc_size_of(&b, (4 << 20) + 24), 65 * K64);
	ck_assert_uint_eq(blkalloc_size_of(&b, M32), M32);
	ck_assert_uint_eq(blkalloc_size_of(&b, M32 + 1), 0);
	ck_assert_uint_eq(blkalloc_size_of(&b, UINT64_MAX), 0);
	/* first fit: back to back from 0, each exactly its whole blocks */
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &off), K64);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(blkalloc_alloc(&b, K64, &off), K64);
	ck_assert_uint_eq(off, K64);
	ck_assert_int_eq(blkalloc_alloc(&b, K64 + 1, &off), 2 * K64);
	ck_assert_uint_eq(off, 2 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, (4 << 20) + 24, &off), (4 << 20) + K64);
	ck_assert_uint_eq(off, 4 * K64);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 69 * K64);
	ck_assert_uint_eq(b.used, 69);
	ck_assert_int_eq(blkalloc_free(&b, 4 * K64), 65 * K64);
	ck_assert_int_eq(blkalloc_free(&b, 2 * K64), 2 * K64);
	ck_assert_int_eq(blkalloc_free(&b, K64), K64);
	ck_assert_int_eq(blkalloc_free(&b, 0), K64);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 0);
	/* the whole region at once */
	ck_assert_int_eq(blkalloc_alloc(&b, M32, &off), (int64_t)M32);
	ck_assert_uint_eq(off, 0);
	blkalloc_fini(&b);
	blkalloc_fini(&b);	/* twice: nothing */
}
END_TEST

START_TEST(test_full_enobufs)
{
	struct blkalloc b;
	uint64_t offs[512], off;
	struct snap s;
	unsigned int i;

	ck_assert_int_eq(blkalloc_init(&b, M32, 16), 0);
	for (i = 0; i < 512; i++) {
		ck_assert_int_eq(blkalloc_alloc(&b, 100, &offs[i]), K64);
		ck_assert_uint_eq(offs[i], (uint64_t)i * K64);
	}
	snap_take(&b, &s);
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, M32, &off), -ENOBUFS);
	snap_same(&b, &s);
	/* every other block free: plenty of bytes, no run of two */
	for (i = 0; i < 512; i += 2)
		ck_assert_int_eq(blkalloc_free(&b, offs[i]), K64);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), M32 / 2);
	ck_assert_int_eq(blkalloc_alloc(&b, K64 + 1, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, K64, &off), K64);
	ck_assert_uint_eq(off, 0);
	/* one more given back next to a free block: the run of two is found there */
	ck_assert_int_eq(blkalloc_free(&b, offs[301]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), 2 * K64);
	ck_assert_uint_eq(off, 300 * K64);
	blkalloc_fini(&b);
}
END_TEST

START_TEST(test_too_large_and_zero)
{
	struct blkalloc b;
	uint64_t off = 12345;
	struct snap s;

	ck_assert_int_eq(blkalloc_init(&b, M32, 16), 0);
	snap_take(&b, &s);
	ck_assert_int_eq(blkalloc_alloc(&b, M32 + 1, &off), -EMSGSIZE);
	ck_assert_int_eq(blkalloc_alloc(&b, 1ull << 40, &off), -EMSGSIZE);
	ck_assert_int_eq(blkalloc_alloc(&b, UINT64_MAX, &off), -EMSGSIZE);
	ck_assert_int_eq(blkalloc_alloc(&b, 0, &off), -EINVAL);
	ck_assert_uint_eq(off, 12345);
	snap_same(&b, &s);
	/* never fits is told apart from not now */
	ck_assert_int_eq(blkalloc_alloc(&b, M32 - K64, &off), (int64_t)(M32 - K64));
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, M32 + 1, &off), -EMSGSIZE);
	ck_assert_int_eq(blkalloc_alloc(&b, 0, &off), -EINVAL);
	blkalloc_fini(&b);
}
END_TEST

START_TEST(test_bad_free_changes_nothing)
{
	struct blkalloc b;
	uint64_t a, c, off;
	struct snap s;

	ck_assert_int_eq(blkalloc_init(&b, M32, 16), 0);
	ck_assert_int_eq(blkalloc_alloc(&b, 3 * K64, &a), 3 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 70 * K64, &c), 70 * K64);
	snap_take(&b, &s);
	ck_assert_int_eq(blkalloc_free(&b, a + K64), -EINVAL);		/* inside a run */
	ck_assert_int_eq(blkalloc_free(&b, a + 2 * K64), -EINVAL);	/* its last block */
	ck_assert_int_eq(blkalloc_free(&b, c + 64 * K64), -EINVAL);	/* inside, next word */
	ck_assert_int_eq(blkalloc_free(&b, 100 * K64), -EINVAL);	/* never allocated */
	ck_assert_int_eq(blkalloc_free(&b, M32), -EINVAL);		/* past the end */
	ck_assert_int_eq(blkalloc_free(&b, UINT64_MAX), -EINVAL);
	ck_assert_int_eq(blkalloc_free(&b, 3), -EINVAL);		/* not a block boundary */
	ck_assert_int_eq(blkalloc_free(&b, c + 1), -EINVAL);
	snap_same(&b, &s);
	ck_assert_int_eq(blkalloc_free(&b, a), 3 * K64);
	snap_take(&b, &s);
	ck_assert_int_eq(blkalloc_free(&b, a), -EINVAL);		/* twice */
	snap_same(&b, &s);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 70 * K64);
	/* the freed run is whole again; the other is still held */
	ck_assert_int_eq(blkalloc_alloc(&b, 3 * K64, &off), 3 * K64);
	ck_assert_uint_eq(off, a);
	ck_assert_int_eq(blkalloc_free(&b, c), 70 * K64);
	ck_assert_int_eq(blkalloc_free(&b, c), -EINVAL);
	ck_assert_int_eq(blkalloc_free(&b, off), 3 * K64);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 0);
	blkalloc_fini(&b);
}
END_TEST

START_TEST(test_coalescing)
{
	struct blkalloc b;
	uint64_t x[5], off, top;

	/* 32 blocks: runs of 1, 2, 3, 1, 1 from the bottom; 24 from the top (a large run) */
	ck_assert_int_eq(blkalloc_init(&b, 32 * K64, 16), 0);
	ck_assert_int_eq(blkalloc_alloc(&b, K64, &x[0]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &x[1]), 2 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 3 * K64, &x[2]), 3 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, K64, &x[3]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, K64, &x[4]), K64);
	ck_assert_uint_eq(x[4], 7 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 24 * K64, &top), 24 * K64);
	ck_assert_uint_eq(top, 8 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &off), -ENOBUFS);
	/* the outer two first, then the one between: one run of 6 */
	ck_assert_int_eq(blkalloc_free(&b, x[0]), K64);
	ck_assert_int_eq(blkalloc_free(&b, x[2]), 3 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 4 * K64, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_free(&b, x[1]), 2 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 6 * K64, &off), 6 * K64);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(blkalloc_free(&b, off), 6 * K64);
	/* and with the tail: one run of 8, whatever the order */
	ck_assert_int_eq(blkalloc_free(&b, x[4]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 8 * K64, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_free(&b, x[3]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 8 * K64, &off), 8 * K64);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(blkalloc_free(&b, off), 8 * K64);
	ck_assert_int_eq(blkalloc_free(&b, top), 24 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 32 * K64, &off), 32 * K64);
	blkalloc_fini(&b);
}
END_TEST

/*
 * A call of half the pool answered with half the pool: the request's run
 * is taken while a small run (an earlier message not yet given back) sits
 * at the bottom. First fit alone put it just above that one, and once the
 * small run was gone no half was left for the response.
 */
START_TEST(test_half_and_half)
{
	struct blkalloc b;
	uint64_t small, req, resp;

	ck_assert_int_eq(blkalloc_init(&b, M32, 16), 0);
	ck_assert_int_eq(blkalloc_alloc(&b, 1 << 20, &small), 1 << 20);
	ck_assert_uint_eq(small, 0);
	ck_assert_int_eq(blkalloc_alloc(&b, M32 / 2, &req), M32 / 2);
	ck_assert_uint_eq(req, M32 / 2);
	ck_assert_int_eq(blkalloc_free(&b, small), 1 << 20);
	ck_assert_int_eq(blkalloc_alloc(&b, M32 / 2, &resp), M32 / 2);
	ck_assert_uint_eq(resp, 0);
	/* small runs still come from the bottom, large ones from the top */
	ck_assert_int_eq(blkalloc_free(&b, req), M32 / 2);
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &small), K64);
	ck_assert_uint_eq(small, M32 / 2);
	ck_assert_int_eq(blkalloc_free(&b, small), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, M32 / 4, &req), M32 / 4);
	ck_assert_uint_eq(req, M32 - M32 / 4);
	blkalloc_fini(&b);
}
END_TEST

/* Runs that cross 64-block words of the bitmap, and runs longer than a word. */
START_TEST(test_word_boundaries)
{
	struct blkalloc b;
	uint64_t off;
	unsigned int i;

	ck_assert_int_eq(blkalloc_init(&b, 256 * K64, 16), 0);
	for (i = 0; i < 256; i++)
		ck_assert_int_eq(blkalloc_alloc(&b, K64, &off), K64);
	/* 60..68 free across the first boundary, 100..103 and 120..250 */
	for (i = 60; i <= 68; i++)
		ck_assert_int_eq(blkalloc_free(&b, (uint64_t)i * K64), K64);
	for (i = 100; i <= 103; i++)
		ck_assert_int_eq(blkalloc_free(&b, (uint64_t)i * K64), K64);
	for (i = 120; i <= 250; i++)
		ck_assert_int_eq(blkalloc_free(&b, (uint64_t)i * K64), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 132 * K64, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, 10 * K64, &off), 10 * K64);
	ck_assert_uint_eq(off, 120 * K64);	/* 60..68 and 100..103 are too short */
	ck_assert_int_eq(blkalloc_alloc(&b, 9 * K64, &off), 9 * K64);
	ck_assert_uint_eq(off, 60 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), 2 * K64);
	ck_assert_uint_eq(off, 100 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 121 * K64, &off), 121 * K64);
	ck_assert_uint_eq(off, 130 * K64);	/* 130..250: two boundaries, all of it */
	ck_assert_int_eq(blkalloc_alloc(&b, 3 * K64, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), 2 * K64);
	ck_assert_uint_eq(off, 102 * K64);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 256 * K64);
	blkalloc_fini(&b);
}
END_TEST

START_TEST(test_not_a_power_of_two)
{
	struct blkalloc b;
	uint64_t off, offs[130];
	unsigned int i;

	/* 5 blocks and a bit: the bit is not used */
	ck_assert_int_eq(blkalloc_init(&b, 5 * K64 + 100, 16), 0);
	ck_assert_uint_eq(b.nblocks, 5);
	ck_assert_uint_eq(blkalloc_size_of(&b, 5 * K64 + 100), 0);
	ck_assert_int_eq(blkalloc_alloc(&b, 5 * K64 + 1, &off), -EMSGSIZE);
	/* a quarter of 5 blocks or more is large: from the top */
	ck_assert_int_eq(blkalloc_alloc(&b, 3 * K64, &off), 3 * K64);
	ck_assert_uint_eq(off, 2 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64 + 1, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), 2 * K64);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_free(&b, 2 * K64), 3 * K64);
	ck_assert_int_eq(blkalloc_free(&b, 0), 2 * K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 5 * K64, &off), 5 * K64);
	blkalloc_fini(&b);

	/* 130 blocks: the last word holds two; nothing runs past them */
	ck_assert_int_eq(blkalloc_init(&b, 130 * K64, 16), 0);
	ck_assert_uint_eq(b.nwords, 3);
	for (i = 0; i < 130; i++) {
		ck_assert_int_eq(blkalloc_alloc(&b, 1, &offs[i]), K64);
		ck_assert_uint_eq(offs[i], (uint64_t)i * K64);
	}
	ck_assert_int_eq(blkalloc_alloc(&b, 1, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_free(&b, 129 * K64), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 2 * K64, &off), -ENOBUFS);
	for (i = 0; i < 129; i++)
		ck_assert_int_eq(blkalloc_free(&b, offs[i]), K64);
	ck_assert_int_eq(blkalloc_alloc(&b, 130 * K64, &off), 130 * K64);
	blkalloc_fini(&b);

	/* a minimum block other than 64 KiB */
	ck_assert_int_eq(blkalloc_init(&b, 1000, 4), 0);
	ck_assert_uint_eq(b.nblocks, 62);
	ck_assert_int_eq(blkalloc_alloc(&b, 17, &off), 32);
	ck_assert_int_eq(blkalloc_alloc(&b, 62 * 16 - 31, &off), -ENOBUFS);
	ck_assert_int_eq(blkalloc_alloc(&b, 62 * 16 - 32, &off), 62 * 16 - 32);
	ck_assert_uint_eq(off, 32);
	blkalloc_fini(&b);

	ck_assert_int_eq(blkalloc_init(&b, K64 - 1, 16), -EINVAL);
	ck_assert_int_eq(blkalloc_init(&b, 0, 16), -EINVAL);
	ck_assert_int_eq(blkalloc_init(&b, UINT64_MAX, 64), -EINVAL);
	ck_assert_int_eq(blkalloc_init(&b, (1ull << 31) + 1, 0), -EINVAL);
	/* 2^63 bytes or more: the sizes returned would not fit an int64_t */
	ck_assert_int_eq(blkalloc_init(&b, UINT64_MAX, 40), -EINVAL);
	blkalloc_fini(&b);
}
END_TEST

/*
 * Where the allocator must place a run of @n blocks in the shadow map
 * @owner (0xff: free), or -1: the lowest run that fits; for a large run
 * (a BLKALLOC_LARGE_DIV-th of the region or more), the highest.
 */
static int shadow_fit(const uint8_t *owner, unsigned int nblocks, unsigned int n)
{
	unsigned int i, len = 0;

	if (n * BLKALLOC_LARGE_DIV >= nblocks) {
		for (i = nblocks; i-- > 0;) {
			len = owner[i] == 0xff ? len + 1 : 0;
			if (len == n)
				return (int)i;
		}
		return -1;
	}
	for (i = 0; i < nblocks; i++) {
		len = owner[i] == 0xff ? len + 1 : 0;
		if (len == n)
			return (int)(i + 1 - n);
	}
	return -1;
}

/*
 * @rounds random allocations and frees on a region of @nblocks blocks,
 * against a shadow map of block owners: no overlap, used bytes exact, each
 * run exactly its whole blocks where shadow_fit() says (so -ENOBUFS only
 * when the shadow has no free run that long), bad frees refused, and all
 * comes back. Inside the loop a check aborts only on failure (each
 * ck_assert is a write to Check's pipe, slow under a sanitizer).
 */
static void stress(unsigned int nblocks, unsigned int rounds, unsigned int seed)
{
	enum { N = 64, MAXB = 320 };
	struct blkalloc b;
	uint64_t off[N], size[N], used = 0, len;
	uint8_t owner[MAXB];
	unsigned int i, k, round, nb, enobufs = 0, allocs = 0;
	int64_t r;
	int fit;

	ck_assert_uint_le(nblocks, MAXB);
	srand(seed);
	len = (uint64_t)nblocks * K64 + (uint64_t)rand() % K64;	/* and a part block */
	ck_assert_int_eq(blkalloc_init(&b, len, 16), 0);
	ck_assert_uint_eq(b.nblocks, nblocks);
	memset(owner, 0xff, sizeof(owner));
	memset(size, 0, sizeof(size));
	for (round = 0; round < rounds; round++) {
		i = (unsigned int)rand() % N;
		if (size[i]) {
			/* now and then, a bad free first: inside the run, or twice */
			if (size[i] > K64 && rand() % 8 == 0 &&
			    blkalloc_free(&b, off[i] + K64 * (1 + (uint64_t)rand() %
							      (size[i] / K64 - 1))) != -EINVAL)
				ck_abort_msg("round %u: free inside %u's run taken", round, i);
			if (blkalloc_free(&b, off[i]) != (int64_t)size[i])
				ck_abort_msg("round %u: free of %u's run at %llu", round, i,
					     (unsigned long long)off[i]);
			if (rand() % 8 == 0 && blkalloc_free(&b, off[i]) != -EINVAL)
				ck_abort_msg("round %u: double free of %u's run taken", round, i);
			for (k = 0; k < size[i] / K64; k++)
				owner[off[i] / K64 + k] = 0xff;
			used -= size[i];
			size[i] = 0;
		} else {
			/* mostly short, some across words, a few too long for the region */
			switch (rand() % 20) {
			case 0:
				nb = 1 + (unsigned int)rand() % (nblocks + 8);
				break;
			case 1: case 2: case 3: case 4:
				nb = 1 + (unsigned int)rand() % 24;
				break;
			default:
				nb = 1 + (unsigned int)rand() % 4;
				break;
			}
			len = (uint64_t)(nb - 1) * K64 + 1 + (uint64_t)rand() % K64;
			r = blkalloc_alloc(&b, len, &off[i]);
			if (nb > nblocks) {
				if (r != -EMSGSIZE)
					ck_abort_msg("round %u: %u blocks of %u: %lld", round,
						     nb, nblocks, (long long)r);
				continue;
			}
			fit = shadow_fit(owner, nblocks, nb);
			if (r == -ENOBUFS) {
				if (fit >= 0)
					ck_abort_msg("round %u: -ENOBUFS for %u, free at %d",
						     round, nb, fit);
				enobufs++;
				continue;
			}
			if (r != (int64_t)nb * K64 || fit < 0 || off[i] != (uint64_t)fit * K64)
				ck_abort_msg("round %u: %u blocks: %lld at %llu, first fit %d",
					     round, nb, (long long)r,
					     (unsigned long long)off[i], fit);
			for (k = 0; k < nb; k++) {
				if (owner[fit + k] != 0xff)
					ck_abort_msg("round %u: block %u to %u and %u",
						     round, fit + k, i, owner[fit + k]);
				owner[fit + k] = (uint8_t)i;
			}
			size[i] = (uint64_t)r;
			used += size[i];
			allocs++;
		}
		if (blkalloc_used_bytes(&b) != used)
			ck_abort_msg("round %u: used %llu, shadow %llu", round,
				     (unsigned long long)blkalloc_used_bytes(&b),
				     (unsigned long long)used);
	}
	/* both outcomes were exercised */
	ck_assert_uint_gt(allocs, 0);
	ck_assert_uint_gt(enobufs, 0);
	for (i = 0; i < N; i++)
		if (size[i])
			ck_assert_int_eq(blkalloc_free(&b, off[i]), (int64_t)size[i]);
	ck_assert_uint_eq(blkalloc_used_bytes(&b), 0);
	/* all coalesced: the whole region is one run again */
	ck_assert_int_eq(blkalloc_alloc(&b, (uint64_t)nblocks * K64, &off[0]),
			 (int64_t)nblocks * K64);
	ck_assert_uint_eq(off[0], 0);
	blkalloc_fini(&b);
}

START_TEST(test_random_vs_shadow)
{
	stress(300, 20000, 7);
}
END_TEST

START_TEST(test_random_small_regions)
{
	static const unsigned int sizes[] = { 1, 2, 63, 64, 65, 128, 129 };
	unsigned int i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		stress(sizes[i], 5000, 11 + i);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("blkalloc");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_exact_sizes);
	tcase_add_test(tc, test_full_enobufs);
	tcase_add_test(tc, test_too_large_and_zero);
	tcase_add_test(tc, test_bad_free_changes_nothing);
	tcase_add_test(tc, test_coalescing);
	tcase_add_test(tc, test_half_and_half);
	tcase_add_test(tc, test_word_boundaries);
	tcase_add_test(tc, test_not_a_power_of_two);
	tcase_add_test(tc, test_random_vs_shadow);
	tcase_add_test(tc, test_random_small_regions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pc_test_run(suite());
}
