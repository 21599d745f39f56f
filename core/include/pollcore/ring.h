/* SPDX-License-Identifier: MIT */
/*
 * pollcore/ring.h - bounded lock-free rings of pointers (header only, C11).
 *
 * Two ring types carry void * entries (any value, NULL included; store a
 * uintptr_t by casting):
 *  - struct pc_ring_spsc: one producer thread, one consumer thread
 *    (worker -> application thread);
 *  - struct pc_ring_mpsc: any number of producer threads, one consumer
 *    thread (application threads -> worker).
 *
 * Common rules:
 *  - capacity is a power of two, 1 .. PC_RING_MAX_CAPACITY; all of it is
 *    usable (no sentinel slot);
 *  - indices run freely and are masked on access, so wraparound is plain
 *    unsigned arithmetic;
 *  - enqueue_burst is partial: it places as many of the n objects as fit,
 *    in order, and returns that number (0..n). When it places fewer than n
 *    it adds one to the ring's `full` counter (relaxed, on the producer's
 *    cache line). Nothing is ever dropped silently: the objects not placed
 *    are still the caller's. The single-object enqueue helpers return
 *    -ENOBUFS instead. Backpressure is flow control, not an error, so it is
 *    neither logged nor recorded in pc_last_error();
 *  - dequeue_burst takes up to n objects in FIFO order and returns how many;
 *  - producer and consumer state sit on separate cache lines, each side
 *    keeping a copy of what it needs (mask, a cached view of the other
 *    side's index) on its own line.
 *
 * Helpers named pc__ring_* are private to this header.
 */
#ifndef POLLCORE_RING_H
#define POLLCORE_RING_H

#include <pollcore/common.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static_assert(ATOMIC_LONG_LOCK_FREE == 2, "ring indices need lock-free atomic_ulong");

/* Largest capacity accepted by the constructors. */
#define PC_RING_MAX_CAPACITY (1U << 30)

/**
 * struct pc_ring_stats - snapshot of a ring's state.
 * @full: enqueue calls that could not place every object they were given
 *        (backpressure events), since the ring was initialised.
 * @capacity: number of slots.
 * @count: entries in the ring when sampled (for an MPSC ring this includes
 *         slots reserved by producers that are still writing them).
 */
struct pc_ring_stats {
	unsigned long full;
	unsigned int capacity;
	unsigned int count;
};

/*
 * Copy @n slot values. One value is a plain store: a call to memcpy would
 * cost more than the rest of a single-object enqueue or dequeue.
 */
static inline void pc__ring_copy(void **dst, void *const *src, unsigned long n)
{
	if (n == 1)
		*dst = *src;
	else
		memcpy(dst, src, n * sizeof(void *));
}

/* Entries between @head and @tail, clamped to @capacity. */
static inline unsigned int pc__ring_used(unsigned long head, unsigned long tail,
					 unsigned int capacity)
{
	unsigned long used = tail - head;

	return used > capacity ? capacity : (unsigned int)used;
}

/* ---------------------------------------------------------------------------------------- */

/*
 * struct pc_ring_spsc - single-producer/single-consumer ring.
 *
 * Who may call what, concurrently:
 *
 *   function                          | producer | consumer | other threads
 *   ----------------------------------+----------+----------+--------------
 *   pc_ring_spsc_enqueue[_burst]      |   yes    |    no    |     no
 *   pc_ring_spsc_dequeue_burst        |   no     |   yes    |     no
 *   pc_ring_spsc_count/free_count     |   yes    |   yes    |  yes (snapshot)
 *   pc_ring_spsc_stats                |   yes    |   yes    |  yes (snapshot)
 *   pc_ring_spsc_memsize              |   any thread, any time
 *   pc_ring_spsc_init/create/destroy  |   only while no other thread uses the ring
 *
 * "The producer" is whichever single thread enqueues; handing that role to
 * another thread needs a happens-before edge (mutex, thread join...) between
 * them. The same holds for the consumer.
 *
 * The producer publishes tail with release after writing slots; the consumer
 * publishes head with release after reading them; each reads the other's
 * index with acquire only when its cached copy says there is not enough
 * room/data, so in the steady state each side touches only its own line.
 */
struct pc_ring_spsc {
	struct {
		atomic_ulong tail;	  /* next slot to fill; written by producer only */
		unsigned long head_cache; /* producer's last view of cons.head */
		atomic_ulong full;	  /* backpressure events; written by producer only */
		unsigned long mask;
	} prod pc_cache_aligned;
	struct {
		atomic_ulong head;	  /* next slot to read; written by consumer only */
		unsigned long tail_cache; /* consumer's last view of prod.tail */
		unsigned long mask;
	} cons pc_cache_aligned;
	void *slots[] pc_cache_aligned;
};

static_assert(offsetof(struct pc_ring_spsc, prod) == 0, "producer line first");
static_assert(offsetof(struct pc_ring_spsc, cons) % PC_CACHELINE == 0 &&
		  offsetof(struct pc_ring_spsc, cons) >=
		      offsetof(struct pc_ring_spsc, prod) + PC_CACHELINE,
	      "SPSC producer and consumer indices must be on separate cache lines");
static_assert(offsetof(struct pc_ring_spsc, slots) % PC_CACHELINE == 0 &&
		  offsetof(struct pc_ring_spsc, slots) >=
		      offsetof(struct pc_ring_spsc, cons) + PC_CACHELINE,
	      "SPSC slots must not share the consumer's cache line");

/**
 * pc_ring_spsc_memsize - bytes needed for an SPSC ring of @capacity slots.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * Any thread.
 *
 * Return: size in bytes, or -EINVAL for an invalid capacity.
 */
PC_API ssize_t pc_ring_spsc_memsize(unsigned int capacity);

/**
 * pc_ring_spsc_init - initialise an SPSC ring in caller-provided memory.
 * @r: at least pc_ring_spsc_memsize(@capacity) bytes, aligned to PC_CACHELINE.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * The caller owns the memory (do not call pc_ring_spsc_destroy()). Call
 * before any producer or consumer uses the ring.
 *
 * Return: 0, or -EINVAL for an invalid capacity or a misaligned @r.
 */
PC_API int pc_ring_spsc_init(struct pc_ring_spsc *r, unsigned int capacity);

/**
 * pc_ring_spsc_create - allocate and initialise an SPSC ring.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * Any thread; the ring is ready for a producer and a consumer on return.
 *
 * Return: the ring, or NULL with errno EINVAL (capacity 0, not a power of
 * two or too large) or ENOMEM.
 */
PC_API struct pc_ring_spsc *pc_ring_spsc_create(unsigned int capacity);

/**
 * pc_ring_spsc_destroy - free a ring made by pc_ring_spsc_create().
 * @r: the ring, or NULL.
 *
 * Only once neither producer nor consumer uses it. Entries still in the ring
 * are not touched: drain them first if they own resources.
 */
PC_API void pc_ring_spsc_destroy(struct pc_ring_spsc *r);

/**
 * pc_ring_spsc_enqueue_burst - append up to @n objects (partial).
 * @r: the ring.
 * @objs: objects to append, in order.
 * @n: number of objects.
 *
 * Producer thread only. Places objs[0..k) with k = min(@n, free slots);
 * when k < @n the ring's full counter is incremented once.
 *
 * Return: k, the number of objects placed (0..@n).
 */
static inline unsigned int pc_ring_spsc_enqueue_burst(struct pc_ring_spsc *r, void *const *objs,
						      unsigned int n)
{
	unsigned long mask = r->prod.mask;
	unsigned long tail = atomic_load_explicit(&r->prod.tail, memory_order_relaxed);
	unsigned long room = mask + 1 - (tail - r->prod.head_cache);
	unsigned long idx, first;

	if (pc_unlikely(room < n)) {
		/* acquire: consumer's reads of freed slots happen before we overwrite them */
		r->prod.head_cache = atomic_load_explicit(&r->cons.head, memory_order_acquire);
		room = mask + 1 - (tail - r->prod.head_cache);
		if (room < n) {
			n = (unsigned int)room;
			atomic_store_explicit(
			    &r->prod.full,
			    atomic_load_explicit(&r->prod.full, memory_order_relaxed) + 1,
			    memory_order_relaxed);
		}
	}
	if (pc_unlikely(n == 0))
		return 0;
	idx = tail & mask;
	first = PC_MIN((unsigned long)n, mask + 1 - idx);
	pc__ring_copy(&r->slots[idx], objs, first);
	if (pc_unlikely(first < n))
		pc__ring_copy(&r->slots[0], objs + first, n - first);
	/* release: slot writes above are visible before the consumer sees the new tail */
	atomic_store_explicit(&r->prod.tail, tail + n, memory_order_release);
	return n;
}

/**
 * pc_ring_spsc_enqueue - append one object.
 * @r: the ring.
 * @obj: object to append.
 *
 * Producer thread only. A full ring increments the full counter.
 *
 * Return: 0, or -ENOBUFS if the ring is full (@obj is still the caller's).
 */
static inline int pc_ring_spsc_enqueue(struct pc_ring_spsc *r, void *obj)
{
	return pc_ring_spsc_enqueue_burst(r, &obj, 1) ? 0 : -ENOBUFS;
}

/**
 * pc_ring_spsc_dequeue_burst - take up to @n objects in FIFO order.
 * @r: the ring.
 * @objs: receives the objects.
 * @n: room in @objs.
 *
 * Consumer thread only.
 *
 * Return: number of objects taken (0 when empty).
 */
static inline unsigned int pc_ring_spsc_dequeue_burst(struct pc_ring_spsc *r, void **objs,
						      unsigned int n)
{
	unsigned long mask = r->cons.mask;
	unsigned long head = atomic_load_explicit(&r->cons.head, memory_order_relaxed);
	unsigned long avail = r->cons.tail_cache - head;
	unsigned long idx, first;

	if (avail < n) {
		/* acquire: pairs with the producer's release of tail; slots up to it are visible */
		r->cons.tail_cache = atomic_load_explicit(&r->prod.tail, memory_order_acquire);
		avail = r->cons.tail_cache - head;
		if (avail < n)
			n = (unsigned int)avail;
	}
	if (n == 0)
		return 0;
	idx = head & mask;
	first = PC_MIN((unsigned long)n, mask + 1 - idx);
	pc__ring_copy(objs, &r->slots[idx], first);
	if (pc_unlikely(first < n))
		pc__ring_copy(objs + first, &r->slots[0], n - first);
	/* release: our slot reads complete before the producer may reuse the slots */
	atomic_store_explicit(&r->cons.head, head + n, memory_order_release);
	return n;
}

/**
 * pc_ring_spsc_count - number of entries in the ring.
 * @r: the ring.
 *
 * Any thread. Exact for the consumer (a lower bound: more may arrive); from
 * other threads a snapshot that may be stale by the time it returns.
 *
 * Return: 0 .. capacity.
 */
static inline unsigned int pc_ring_spsc_count(const struct pc_ring_spsc *r)
{
	/* acquire: consumer saw tail >= head before publishing head; so does our tail load */
	unsigned long head = atomic_load_explicit(&r->cons.head, memory_order_acquire);
	unsigned long tail = atomic_load_explicit(&r->prod.tail, memory_order_relaxed);

	return pc__ring_used(head, tail, (unsigned int)(r->prod.mask + 1));
}

/**
 * pc_ring_spsc_free_count - number of free slots.
 * @r: the ring.
 *
 * Any thread; for the producer a lower bound (the consumer may free more).
 *
 * Return: 0 .. capacity.
 */
static inline unsigned int pc_ring_spsc_free_count(const struct pc_ring_spsc *r)
{
	return (unsigned int)(r->prod.mask + 1) - pc_ring_spsc_count(r);
}

/**
 * pc_ring_spsc_stats - sample the ring's counters.
 * @r: the ring.
 * @st: filled in.
 *
 * Any thread (relaxed reads; a snapshot).
 */
static inline void pc_ring_spsc_stats(const struct pc_ring_spsc *r, struct pc_ring_stats *st)
{
	st->full = atomic_load_explicit(&r->prod.full, memory_order_relaxed);
	st->capacity = (unsigned int)(r->prod.mask + 1);
	st->count = pc_ring_spsc_count(r);
}

/* ---------------------------------------------------------------------------------------- */

/*
 * struct pc_ring_mpsc - multi-producer/single-consumer ring.
 *
 * Who may call what, concurrently:
 *
 *   function                          | producers | consumer | other threads
 *   ----------------------------------+-----------+----------+--------------
 *   pc_ring_mpsc_enqueue[_burst]      | yes (any  |   no     |  yes (they are
 *                                     |  number)  |          |   producers)
 *   pc_ring_mpsc_dequeue_burst        |    no     |   yes    |     no
 *   pc_ring_mpsc_count/free_count     |    yes    |   yes    |  yes (snapshot)
 *   pc_ring_mpsc_stats                |    yes    |   yes    |  yes (snapshot)
 *   pc_ring_mpsc_memsize              |   any thread, any time
 *   pc_ring_mpsc_init/create/destroy  |   only while no other thread uses the ring
 *
 * Algorithm: DPDK-style reservation with Vyukov-style per-slot publication.
 *  1. A producer reserves k consecutive positions with a CAS on prod.head,
 *     after checking free room against cons.head (via prod.cons_cache, a
 *     recent value shared by the producers, refreshed only when it says the
 *     ring is too full).
 *  2. It writes each slot's object, then stores the slot's seq = position + 1
 *     with release. There is no in-order tail publication, so a producer
 *     never waits for another one: producers are lock-free among
 *     themselves.
 *  3. The consumer reads slots from cons.head while seq == position + 1
 *     (acquire), then publishes the new cons.head with release, which is
 *     what lets producers reuse those slots. A slot holding an older lap's
 *     seq (position + 1 - capacity) or 0 (never written) stops the burst.
 * A producer preempted between 1 and 2 holds up only the consumer (at that
 * slot) and, once the ring wraps round to it, other producers' room; it
 * never makes another producer spin.
 */
struct pc__ring_slot {
	atomic_ulong seq; /* position + 1 once the object for that position is written */
	void *obj;
};

struct pc_ring_mpsc {
	struct {
		atomic_ulong head;	 /* next position to reserve; CAS by producers */
		atomic_ulong cons_cache; /* a recent cons.head, shared by producers */
		atomic_ulong full;	 /* backpressure events; fetch_add by producers */
		unsigned long mask;
	} prod pc_cache_aligned;
	struct {
		atomic_ulong head; /* next position to read; written by consumer only */
		unsigned long mask;
	} cons pc_cache_aligned;
	struct pc__ring_slot slots[] pc_cache_aligned;
};

static_assert(offsetof(struct pc_ring_mpsc, prod) == 0, "producer line first");
static_assert(offsetof(struct pc_ring_mpsc, cons) % PC_CACHELINE == 0 &&
		  offsetof(struct pc_ring_mpsc, cons) >=
		      offsetof(struct pc_ring_mpsc, prod) + PC_CACHELINE,
	      "MPSC producer and consumer indices must be on separate cache lines");
static_assert(offsetof(struct pc_ring_mpsc, slots) % PC_CACHELINE == 0 &&
		  offsetof(struct pc_ring_mpsc, slots) >=
		      offsetof(struct pc_ring_mpsc, cons) + PC_CACHELINE,
	      "MPSC slots must not share the consumer's cache line");
static_assert(PC_CACHELINE % sizeof(struct pc__ring_slot) == 0,
	      "MPSC slots must not straddle cache lines");

/**
 * pc_ring_mpsc_memsize - bytes needed for an MPSC ring of @capacity slots.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * Any thread.
 *
 * Return: size in bytes, or -EINVAL for an invalid capacity.
 */
PC_API ssize_t pc_ring_mpsc_memsize(unsigned int capacity);

/**
 * pc_ring_mpsc_init - initialise an MPSC ring in caller-provided memory.
 * @r: at least pc_ring_mpsc_memsize(@capacity) bytes, aligned to PC_CACHELINE.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * The caller owns the memory (do not call pc_ring_mpsc_destroy()). Call
 * before any producer or consumer uses the ring.
 *
 * Return: 0, or -EINVAL for an invalid capacity or a misaligned @r.
 */
PC_API int pc_ring_mpsc_init(struct pc_ring_mpsc *r, unsigned int capacity);

/**
 * pc_ring_mpsc_create - allocate and initialise an MPSC ring.
 * @capacity: power of two, 1 .. PC_RING_MAX_CAPACITY.
 *
 * Any thread; the ring is ready for producers and a consumer on return.
 *
 * Return: the ring, or NULL with errno EINVAL (capacity 0, not a power of
 * two or too large) or ENOMEM.
 */
PC_API struct pc_ring_mpsc *pc_ring_mpsc_create(unsigned int capacity);

/**
 * pc_ring_mpsc_destroy - free a ring made by pc_ring_mpsc_create().
 * @r: the ring, or NULL.
 *
 * Only once no producer or consumer uses it. Entries still in the ring are
 * not touched: drain them first if they own resources.
 */
PC_API void pc_ring_mpsc_destroy(struct pc_ring_mpsc *r);

/* Free room seen from a producer: 0 when @cons is stale by more than a lap or @head is stale. */
static inline unsigned long pc__ring_mpsc_room(unsigned long mask, unsigned long head,
					       unsigned long cons)
{
	unsigned long used = head - cons;

	return used > mask + 1 ? 0 : mask + 1 - used;
}

/**
 * pc_ring_mpsc_enqueue_burst - append up to @n objects (partial).
 * @r: the ring.
 * @objs: objects to append, in order.
 * @n: number of objects.
 *
 * Any producer thread, concurrently with other producers. Places objs[0..k)
 * with k = min(@n, free slots) in consecutive positions (so one call's
 * objects stay together and in order; calls from different producers are
 * not interleaved inside a burst); when k < @n the ring's full counter is
 * incremented once. Lock-free: a producer never waits for another.
 *
 * Return: k, the number of objects placed (0..@n).
 */
static inline unsigned int pc_ring_mpsc_enqueue_burst(struct pc_ring_mpsc *r, void *const *objs,
						      unsigned int n)
{
	unsigned long mask = r->prod.mask;
	unsigned long head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	unsigned long cons, room, i;
	unsigned int k;

	if (pc_unlikely(n == 0))
		return 0;
	for (;;) {
		/* acquire: chains to consumer's release of cons.head via the refresher */
		cons = atomic_load_explicit(&r->prod.cons_cache, memory_order_acquire);
		room = pc__ring_mpsc_room(mask, head, cons);
		if (pc_unlikely(room < n)) {
			/* acquire: consumer's reads of freed slots happen before we overwrite */
			cons = atomic_load_explicit(&r->cons.head, memory_order_acquire);
			/* release: hand that ordering on to producers that use the cached value */
			atomic_store_explicit(&r->prod.cons_cache, cons, memory_order_release);
			room = pc__ring_mpsc_room(mask, head, cons);
		}
		k = (unsigned int)PC_MIN((unsigned long)n, room);
		if (pc_unlikely(k == 0)) {
			unsigned long now =
			    atomic_load_explicit(&r->prod.head, memory_order_relaxed);

			if (now == head)
				break; /* really full */
			head = now;    /* our view of head was stale: recompute */
			continue;
		}
		/* relaxed: only reserves positions; slot contents are published by seq below */
		if (atomic_compare_exchange_weak_explicit(
			&r->prod.head, &head, head + k, memory_order_relaxed, memory_order_relaxed))
			break;
	}
	for (i = 0; i < k; i++) {
		struct pc__ring_slot *s = &r->slots[(head + i) & mask];

		s->obj = objs[i];
		/* release: the object is written before the consumer sees this seq */
		atomic_store_explicit(&s->seq, head + i + 1, memory_order_release);
	}
	if (pc_unlikely(k < n))
		atomic_fetch_add_explicit(&r->prod.full, 1, memory_order_relaxed);
	return k;
}

/**
 * pc_ring_mpsc_enqueue - append one object.
 * @r: the ring.
 * @obj: object to append.
 *
 * Any producer thread. A full ring increments the full counter.
 *
 * Return: 0, or -ENOBUFS if the ring is full (@obj is still the caller's).
 */
static inline int pc_ring_mpsc_enqueue(struct pc_ring_mpsc *r, void *obj)
{
	return pc_ring_mpsc_enqueue_burst(r, &obj, 1) ? 0 : -ENOBUFS;
}

/**
 * pc_ring_mpsc_dequeue_burst - take up to @n objects in FIFO order.
 * @r: the ring.
 * @objs: receives the objects.
 * @n: room in @objs.
 *
 * Consumer thread only. Order is the order in which producers reserved
 * their positions; each producer's own objects come out in the order it
 * enqueued them. Stops early at a slot whose producer is still writing it.
 *
 * Return: number of objects taken (0 when empty).
 */
static inline unsigned int pc_ring_mpsc_dequeue_burst(struct pc_ring_mpsc *r, void **objs,
						      unsigned int n)
{
	unsigned long mask = r->cons.mask;
	unsigned long head = atomic_load_explicit(&r->cons.head, memory_order_relaxed);
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct pc__ring_slot *s = &r->slots[(head + i) & mask];

		/* acquire: pairs with the producer's release of seq; the object is visible */
		if (atomic_load_explicit(&s->seq, memory_order_acquire) != head + i + 1)
			break;
		objs[i] = s->obj;
	}
	if (i) {
		/* release: our slot reads complete before producers may reuse the slots */
		atomic_store_explicit(&r->cons.head, head + i, memory_order_release);
	}
	return i;
}

/**
 * pc_ring_mpsc_count - number of entries in the ring.
 * @r: the ring.
 *
 * Any thread; a snapshot. Includes positions reserved by producers that are
 * still writing them, so the consumer may dequeue fewer.
 *
 * Return: 0 .. capacity.
 */
static inline unsigned int pc_ring_mpsc_count(const struct pc_ring_mpsc *r)
{
	/* acquire: positions the consumer passed were reserved; our head load sees them */
	unsigned long cons = atomic_load_explicit(&r->cons.head, memory_order_acquire);
	unsigned long head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);

	return pc__ring_used(cons, head, (unsigned int)(r->prod.mask + 1));
}

/**
 * pc_ring_mpsc_free_count - number of free slots.
 * @r: the ring.
 *
 * Any thread; a snapshot (other producers may take the room first).
 *
 * Return: 0 .. capacity.
 */
static inline unsigned int pc_ring_mpsc_free_count(const struct pc_ring_mpsc *r)
{
	return (unsigned int)(r->prod.mask + 1) - pc_ring_mpsc_count(r);
}

/**
 * pc_ring_mpsc_stats - sample the ring's counters.
 * @r: the ring.
 * @st: filled in.
 *
 * Any thread (relaxed reads; a snapshot).
 */
static inline void pc_ring_mpsc_stats(const struct pc_ring_mpsc *r, struct pc_ring_stats *st)
{
	st->full = atomic_load_explicit(&r->prod.full, memory_order_relaxed);
	st->capacity = (unsigned int)(r->prod.mask + 1);
	st->count = pc_ring_mpsc_count(r);
}

#endif /* POLLCORE_RING_H */
