// SPDX-License-Identifier: MIT
/*
 * The rings' setup and teardown: out of line, as nothing here is on a hot
 * path (pollcore/ring.h keeps the enqueue and dequeue inline).
 */
#include <pollcore/ring.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log_pvt.h"

/*
 * Bytes needed for a ring of @capacity slots of @slot_size bytes after a
 * @hdr_size header, or -EINVAL (message in pc_last_error()).
 */
static ssize_t ring_memsize(const char *type, unsigned int capacity, size_t hdr_size,
				       size_t slot_size)
{
	if (!pc_is_pow2(capacity) || capacity > PC_RING_MAX_CAPACITY)
		return set_error(
		    -EINVAL, "%s ring capacity %u is invalid: must be a power of two from 1 to %u",
		    type, capacity, PC_RING_MAX_CAPACITY);
	return (ssize_t)(hdr_size + (size_t)capacity * slot_size);
}

/* Cache-line-aligned allocation of @size bytes, or NULL with errno = ENOMEM. */
static void *ring_alloc(const char *type, unsigned int capacity, size_t size)
{
	void *mem;
	int ret = posix_memalign(&mem, PC_CACHELINE, size);

	if (ret) {
		set_error(-ret, "cannot allocate %zu bytes for a %s ring of %u slots", size,
			     type, capacity);
		errno = ret;
		return NULL;
	}
	return mem;
}

ssize_t pc_ring_spsc_memsize(unsigned int capacity)
{
	return ring_memsize("SPSC", capacity, sizeof(struct pc_ring_spsc), sizeof(void *));
}

int pc_ring_spsc_init(struct pc_ring_spsc *r, unsigned int capacity)
{
	ssize_t size = pc_ring_spsc_memsize(capacity);

	if (size < 0)
		return (int)size;
	if ((uintptr_t)r % PC_CACHELINE)
		return set_error(-EINVAL, "SPSC ring memory %p is not aligned to %d bytes",
				    (void *)r, PC_CACHELINE);
	memset(r, 0, sizeof(*r));
	atomic_init(&r->prod.tail, 0);
	atomic_init(&r->prod.full, 0);
	atomic_init(&r->cons.head, 0);
	r->prod.mask = capacity - 1;
	r->cons.mask = capacity - 1;
	return 0;
}

struct pc_ring_spsc *pc_ring_spsc_create(unsigned int capacity)
{
	ssize_t size = pc_ring_spsc_memsize(capacity);
	struct pc_ring_spsc *r;

	if (size < 0) {
		errno = (int)-size;
		return NULL;
	}
	r = (struct pc_ring_spsc *)ring_alloc("SPSC", capacity, (size_t)size);
	if (r)
		pc_ring_spsc_init(r, capacity);
	return r;
}

void pc_ring_spsc_destroy(struct pc_ring_spsc *r)
{
	free(r);
}

ssize_t pc_ring_mpsc_memsize(unsigned int capacity)
{
	return ring_memsize("MPSC", capacity, sizeof(struct pc_ring_mpsc),
				sizeof(struct pc__ring_slot));
}

int pc_ring_mpsc_init(struct pc_ring_mpsc *r, unsigned int capacity)
{
	ssize_t size = pc_ring_mpsc_memsize(capacity);
	unsigned int i;

	if (size < 0)
		return (int)size;
	if ((uintptr_t)r % PC_CACHELINE)
		return set_error(-EINVAL, "MPSC ring memory %p is not aligned to %d bytes",
				    (void *)r, PC_CACHELINE);
	memset(r, 0, sizeof(*r));
	atomic_init(&r->prod.head, 0);
	atomic_init(&r->prod.cons_cache, 0);
	atomic_init(&r->prod.full, 0);
	atomic_init(&r->cons.head, 0);
	r->prod.mask = capacity - 1;
	r->cons.mask = capacity - 1;
	for (i = 0; i < capacity; i++) {
		atomic_init(&r->slots[i].seq, 0);
		r->slots[i].obj = NULL;
	}
	return 0;
}

struct pc_ring_mpsc *pc_ring_mpsc_create(unsigned int capacity)
{
	ssize_t size = pc_ring_mpsc_memsize(capacity);
	struct pc_ring_mpsc *r;

	if (size < 0) {
		errno = (int)-size;
		return NULL;
	}
	r = (struct pc_ring_mpsc *)ring_alloc("MPSC", capacity, (size_t)size);
	if (r)
		pc_ring_mpsc_init(r, capacity);
	return r;
}

void pc_ring_mpsc_destroy(struct pc_ring_mpsc *r)
{
	free(r);
}
