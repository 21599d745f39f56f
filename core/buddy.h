/* SPDX-License-Identifier: MIT */
/*
 * A buddy allocator over offsets [0, size): blocks of 2^k minimum blocks,
 * each aligned to its own size, split on allocation and merged with their
 * buddy on free. Pure logic, no verbs and no memory of its own beyond the
 * bookkeeping arrays; the large-message pool (workers/rndv.c) lays it over
 * a registered region. Unit-tested on the host (tests/test_buddy.c).
 *
 * A size that is not a power of two is covered by the largest aligned
 * blocks that fit; a block's buddy past the end is never free, so it never
 * merges across the end.
 *
 * Threads: none of its own; the caller serialises (rndv.c takes a spinlock).
 */
#ifndef PC_BUDDY_H
#define PC_BUDDY_H

#include <stdint.h>

#define BUDDY_MAX_ORDER 31u

struct buddy {
	uint32_t nblocks;	/* minimum blocks in the region */
	uint32_t min_shift;	/* log2 of the minimum block, in bytes */
	uint32_t max_order;	/* largest order that exists */
	uint32_t used;		/* minimum blocks allocated */
	uint32_t head[BUDDY_MAX_ORDER + 1];	/* free list per order, UINT32_MAX: empty */
	uint32_t *next, *prev;	/* free-list links, by block index */
	uint8_t *tag;		/* per block index: 0, or TAG_FREE|order, or TAG_USED|order at a block's head */
};

/**
 * buddy_init - covers @size bytes with minimum blocks of 2^@min_shift bytes.
 * @b: the allocator.
 * @size: bytes (rounded down to a whole minimum block; at least one).
 * @min_shift: log2 of the minimum block (e.g. 16 for 64 KiB).
 *
 * Return: 0, -EINVAL (no whole block, or more than 2^31 of them) or -ENOMEM.
 */
int buddy_init(struct buddy *b, uint64_t size, uint32_t min_shift);

/* buddy_fini - frees the bookkeeping (not the region). */
void buddy_fini(struct buddy *b);

/**
 * buddy_order - the order of the block that holds @len bytes.
 * @b: the allocator.
 * @len: bytes (at least 1).
 *
 * Return: the order, or -EMSGSIZE when no block of the region is that large.
 */
int buddy_order(const struct buddy *b, uint64_t len);

/**
 * buddy_alloc - a block of at least @len bytes.
 * @b: the allocator.
 * @len: bytes (at least 1).
 * @off: its offset, filled on success.
 *
 * Return: the block's size in bytes (> 0), -ENOBUFS when no free block is
 * large enough now, or -EMSGSIZE when none ever could be.
 */
int64_t buddy_alloc(struct buddy *b, uint64_t len, uint64_t *off);

/**
 * buddy_free - gives back the block at @off.
 * @b: the allocator.
 * @off: an offset buddy_alloc() returned, not given back since.
 *
 * Return: the block's size in bytes, or -EINVAL when @off is no allocated
 * block (given back twice, or never allocated): nothing changes then.
 */
int64_t buddy_free(struct buddy *b, uint64_t off);

/* Bytes allocated now. */
static inline uint64_t buddy_used_bytes(const struct buddy *b)
{
	return (uint64_t)b->used << b->min_shift;
}

#endif /* PC_BUDDY_H */
