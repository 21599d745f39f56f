// SPDX-License-Identifier: MIT
/* A two-ended first-fit block allocator over offsets; see blkalloc.h. */
#include "blkalloc.h"

#include <errno.h>
#include <stdlib.h>

#define NOT_FOUND UINT64_MAX

/**
 * mark - sets (@set) or clears the bits of blocks [@i, @i + @n) in @map.
 * @map: the bitmap.
 * @i: the first block.
 * @n: blocks.
 * @set: true to set them (free), false to clear them (used).
 */
static void mark(uint64_t *map, uint32_t i, uint32_t n, int set)
{
	while (n) {
		uint32_t bit = i & 63, k = 64 - bit < n ? 64 - bit : n;
		uint64_t mask = (k == 64 ? ~0ull : (1ull << k) - 1) << bit;

		if (set)
			map[i >> 6] |= mask;
		else
			map[i >> 6] &= ~mask;
		i += k;
		n -= k;
	}
}

/**
 * find_run - the lowest run of @n free blocks.
 * @b: the allocator.
 * @n: blocks (1 to nblocks).
 *
 * Word by word: a run that ends in this word is the free bits at the top of
 * the words before (carry) and at the bottom of this one; a run inside the
 * word (n < 64; a whole free word is the carry's) is a bit that stays set in
 * w & w >> 1 & ... & w >> (n - 1), computed with doubling shifts. The
 * carried run starts lower, so it is tried first. Bits past nblocks are
 * clear, so no run crosses the end.
 *
 * Return: the run's first block, or NOT_FOUND.
 */
static uint64_t find_run(const struct blkalloc *b, uint32_t n)
{
	uint64_t carry = 0;	/* free blocks just below this word */
	uint32_t wi;

	for (wi = 0; wi < b->nwords; wi++) {
		uint64_t w = b->free_map[wi], m;
		uint32_t have, s;

		if (!w) {
			carry = 0;
			continue;
		}
		if (w == ~0ull) {
			carry += 64;
			if (carry >= n)
				return (uint64_t)wi * 64 + 64 - carry;
			continue;
		}
		if (carry && carry + (uint64_t)__builtin_ctzll(~w) >= n)
			return (uint64_t)wi * 64 - carry;
		if (n < 64) {
			m = w;
			for (have = 1; have < n && m; have += s) {
				s = have < n - have ? have : n - have;
				m &= m >> s;
			}
			if (m)
				return (uint64_t)wi * 64 + (uint64_t)__builtin_ctzll(m);
		}
		carry = (uint64_t)__builtin_clzll(~w);
	}
	return NOT_FOUND;
}

/**
 * find_run_top - the highest run of @n free blocks.
 * @b: the allocator.
 * @n: blocks (1 to nblocks).
 *
 * find_run() mirrored, from the top word down: @carry counts the free
 * blocks just above this word, in a free stretch that ends (exclusive) at
 * @top; a run is placed at the top of the highest stretch that holds it.
 *
 * Return: the run's first block, or NOT_FOUND.
 */
static uint64_t find_run_top(const struct blkalloc *b, uint32_t n)
{
	uint64_t carry = 0, top = 0;
	uint32_t wi = b->nwords;

	while (wi--) {
		uint64_t w = b->free_map[wi], m;
		uint32_t hi, have, s;

		if (!w) {
			carry = 0;
			continue;
		}
		if (w == ~0ull) {
			if (!carry)
				top = (uint64_t)wi * 64 + 64;
			carry += 64;
			if (carry >= n)
				return top - n;
			continue;
		}
		/* free bits at the word's top extend the stretch from above */
		hi = (uint32_t)__builtin_clzll(~w);
		if (hi) {
			if (!carry)
				top = (uint64_t)wi * 64 + 64;
			carry += hi;
			if (carry >= n)
				return top - n;
		}
		/* a run inside the word (it cannot reach the top: hi < n there), the highest */
		if (n < 64) {
			m = w;
			for (have = 1; have < n && m; have += s) {
				s = have < n - have ? have : n - have;
				m &= m >> s;
			}
			if (m)
				return (uint64_t)wi * 64 + 63 - (uint64_t)__builtin_clzll(m);
		}
		/* free bits at the word's bottom start the stretch below */
		carry = (uint64_t)__builtin_ctzll(~w);
		top = (uint64_t)wi * 64 + carry;
	}
	return NOT_FOUND;
}

int blkalloc_init(struct blkalloc *b, uint64_t size, uint32_t min_shift)
{
	uint64_t n = min_shift < 64 ? size >> min_shift : 0;

	*b = (struct blkalloc){ 0 };
	/* sizes are returned as int64_t: the region's bytes must fit */
	if (!n || n > BLKALLOC_MAX_BLOCKS || (n << min_shift) > INT64_MAX)
		return -EINVAL;
	b->nblocks = (uint32_t)n;
	b->min_shift = min_shift;
	b->nwords = (uint32_t)((n + 63) / 64);
	b->free_map = calloc(b->nwords, sizeof(*b->free_map));
	b->run = calloc(n, sizeof(*b->run));
	if (!b->free_map || !b->run) {
		blkalloc_fini(b);
		return -ENOMEM;
	}
	mark(b->free_map, 0, b->nblocks, 1);
	return 0;
}

void blkalloc_fini(struct blkalloc *b)
{
	free(b->free_map);
	free(b->run);
	b->free_map = NULL;
	b->run = NULL;
}

/**
 * blocks_of - the minimum blocks @len bytes take.
 * @b: the allocator.
 * @len: bytes.
 *
 * Return: the blocks (0 for 0 bytes), or UINT64_MAX when more than nblocks.
 */
static uint64_t blocks_of(const struct blkalloc *b, uint64_t len)
{
	uint64_t blocks = (len >> b->min_shift) + !!(len & ((1ull << b->min_shift) - 1));

	return blocks > b->nblocks ? UINT64_MAX : blocks;
}

uint64_t blkalloc_size_of(const struct blkalloc *b, uint64_t len)
{
	uint64_t blocks = blocks_of(b, len);

	return blocks == UINT64_MAX ? 0 : blocks << b->min_shift;
}

int64_t blkalloc_alloc(struct blkalloc *b, uint64_t len, uint64_t *off)
{
	uint64_t blocks = blocks_of(b, len), i;

	if (!len)
		return -EINVAL;
	if (blocks == UINT64_MAX)
		return -EMSGSIZE;
	/* large runs from the top, the rest from the bottom (blkalloc.h) */
	i = blocks * BLKALLOC_LARGE_DIV >= b->nblocks ? find_run_top(b, (uint32_t)blocks) :
							find_run(b, (uint32_t)blocks);
	if (i == NOT_FOUND)
		return -ENOBUFS;
	mark(b->free_map, (uint32_t)i, (uint32_t)blocks, 0);
	b->run[i] = (uint32_t)blocks;
	b->used += (uint32_t)blocks;
	*off = i << b->min_shift;
	return (int64_t)(blocks << b->min_shift);
}

int64_t blkalloc_free(struct blkalloc *b, uint64_t off)
{
	uint64_t idx = off >> b->min_shift;
	uint32_t n;

	if ((idx << b->min_shift) != off || idx >= b->nblocks || !b->run[idx])
		return -EINVAL;
	n = b->run[idx];
	b->run[idx] = 0;
	b->used -= n;
	mark(b->free_map, (uint32_t)idx, n, 1);
	return (int64_t)((uint64_t)n << b->min_shift);
}
