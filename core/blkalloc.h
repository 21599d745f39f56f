/* SPDX-License-Identifier: MIT */
/*
 * A block allocator over offsets [0, size): an allocation of len bytes takes
 * exactly ceil(len / 2^min_shift) minimum blocks, as one contiguous run (an
 * RDMA memory window is bound over it and one RDMA READ lands in it), so
 * 4 MiB + 24 bytes takes 4 MiB + 64 KiB where a buddy allocator took 8 MiB.
 * Pure logic, no verbs and no memory of its own beyond the bookkeeping
 * arrays; the large-message pool (workers/rndv.c) lays it over a registered
 * region. Unit-tested on the host (tests/test_blkalloc.c).
 *
 * Policy: address-ordered first fit over a bitmap of free blocks, scanned a
 * 64-bit word at a time (runs inside a word found by shift-and, runs across
 * words by counting free bits at the words' ends), so the lowest fitting
 * run is always found and the cost does not grow with fragmentation.
 * Address-ordered first fit is among the lowest-fragmentation policies on
 * real workloads, and the bitmap of 512 blocks (the default pool) is eight
 * words: an allocation or a free is some tens of nanoseconds.
 *
 * Two-ended: a run of at least 1/BLKALLOC_LARGE_DIV of the region is the
 * highest that fits, the same scan from the top. The few large runs a
 * region holds then stay apart from the many small ones, whose comings and
 * goings would otherwise leave the free space in pieces: with first fit
 * alone, a half-region run taken while a small one sat below it leaves,
 * once the small one is gone, no room for a second half-region run (a call
 * of the largest message, answered as large, in a pool of twice that).
 *
 * Complexity, for a region of N blocks and a request of n: allocation
 * O(N / 64 * log2(min(n, 64))) word operations plus O(n / 64) to mark the
 * run; free O(n / 64) (its neighbours coalesce by themselves: a free run is
 * just set bits). Memory: one bit and a 32-bit run length per block. At
 * 32768 blocks (2 GiB) the worst case, every other block taken and the only
 * fit at the end, is a scan of 512 words: about a microsecond.
 *
 * Ownership is checked: a free that is not the head of an allocated run is
 * refused and changes nothing.
 *
 * Threads: none of its own; the caller serialises (workers/rndv.c takes a
 * spinlock).
 */
#ifndef PC_BLKALLOC_H
#define PC_BLKALLOC_H

#include <stdint.h>

#define BLKALLOC_MAX_BLOCKS (1u << 31)
/* Runs of at least 1/this of the region are taken from its top (see above). */
#define BLKALLOC_LARGE_DIV 4u

struct blkalloc {
	uint32_t nblocks;	/* minimum blocks in the region */
	uint32_t min_shift;	/* log2 of the minimum block, in bytes */
	uint32_t used;		/* minimum blocks allocated */
	uint32_t nwords;	/* 64-bit words of the bitmap */
	uint64_t *free_map;	/* bit i set: block i free; bits past nblocks stay clear */
	uint32_t *run;		/* per block: an allocated run's length at its head, or 0 */
};

/**
 * blkalloc_init - covers @size bytes with minimum blocks of 2^@min_shift bytes.
 * @b: the allocator.
 * @size: bytes (rounded down to a whole minimum block; at least one).
 * @min_shift: log2 of the minimum block (e.g. 16 for 64 KiB).
 *
 * Return: 0, -EINVAL (no whole block, more than 2^31 of them, or 2^63 bytes
 * or more of them) or -ENOMEM.
 */
int blkalloc_init(struct blkalloc *b, uint64_t size, uint32_t min_shift);

/**
 * blkalloc_fini - frees the bookkeeping (not the region).
 * @b: the allocator, initialised or failed to (a second call does nothing).
 */
void blkalloc_fini(struct blkalloc *b);

/**
 * blkalloc_size_of - the bytes a request of @len bytes takes.
 * @b: the allocator.
 * @len: bytes.
 *
 * Return: @len rounded up to whole minimum blocks, or 0 when @len is 0 or
 * larger than the whole region (no allocation of it could ever succeed).
 */
uint64_t blkalloc_size_of(const struct blkalloc *b, uint64_t len);

/**
 * blkalloc_alloc - one contiguous run of blocks holding @len bytes.
 * @b: the allocator.
 * @len: bytes (at least 1).
 * @off: the run's offset, filled on success.
 *
 * The lowest free run that fits is taken; for @len of at least a
 * BLKALLOC_LARGE_DIV-th of the region, the highest.
 *
 * Return: the run's size in bytes, blkalloc_size_of(@len) (> 0); -EINVAL
 * when @len is 0, -ENOBUFS when no free run is that long now, or -EMSGSIZE
 * when @len is larger than the whole region.
 */
int64_t blkalloc_alloc(struct blkalloc *b, uint64_t len, uint64_t *off);

/**
 * blkalloc_free - gives back the run at @off.
 * @b: the allocator.
 * @off: an offset blkalloc_alloc() returned, not given back since.
 *
 * Return: the run's size in bytes, or -EINVAL when @off is no allocated
 * run's start (given back twice, never allocated, inside a run, past the
 * end or not on a block boundary): nothing changes then.
 */
int64_t blkalloc_free(struct blkalloc *b, uint64_t off);

/**
 * blkalloc_used_bytes - the bytes allocated now.
 * @b: the allocator.
 *
 * Return: the allocated runs' sizes summed, in bytes.
 */
static inline uint64_t blkalloc_used_bytes(const struct blkalloc *b)
{
	return (uint64_t)b->used << b->min_shift;
}

#endif /* PC_BLKALLOC_H */
