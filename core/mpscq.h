/* SPDX-License-Identifier: MIT */
/*
 * An intrusive multi-producer, single-consumer queue (D. Vyukov's): the
 * nodes are the producers' own objects, so a push never fails and never
 * waits for room. Pure logic, no verbs; unit-tested on the host
 * (tests/test_mpscq.c, also under ThreadSanitizer).
 *
 * pollcore's submissions (a message to send, an operation, a cancel, a
 * piece of work) each carry their node: what the application hands to a
 * worker can always be accepted, and the memory it takes is what the
 * application already gave (engine.h: backpressure stays inside the
 * engine).
 *
 *   call            | producers (any thread) | the consumer (one thread)
 *   ----------------+------------------------+--------------------------
 *   mpscq_push      | yes                    | yes
 *   mpscq_pop       | no                     | yes
 *   mpscq_empty     | no                     | yes
 *
 * push: one exchange on the tail and one store, wait-free. pop: a push
 * that exchanged the tail but has not linked its node yet (a preempted
 * producer) reads as the end of the queue until it does: pop returns NULL
 * then, and the caller looks again on its next turn. Order: FIFO per
 * producer, and in the order of the tail exchanges overall.
 */
#ifndef PC_MPSCQ_H
#define PC_MPSCQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <pollcore/common.h>

struct mpscq_node {
	struct mpscq_node *_Atomic next;
};

struct mpscq {
	/* producers: exchanged by every push */
	struct mpscq_node *_Atomic tail pc_cache_aligned;
	/* the consumer's: never written by a producer */
	struct mpscq_node *head pc_cache_aligned;
	struct mpscq_node stub;
};

static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "the queue needs lock-free atomic pointers");
static_assert(offsetof(struct mpscq, head) - offsetof(struct mpscq, tail) >= PC_CACHELINE,
	      "producer and consumer fields on separate cache lines");

static inline void mpscq_init(struct mpscq *q)
{
	atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
	atomic_store_explicit(&q->tail, &q->stub, memory_order_relaxed);
	q->head = &q->stub;
}

/* Any thread: @n is the queue's until the consumer pops it. */
static inline void mpscq_push(struct mpscq *q, struct mpscq_node *n)
{
	struct mpscq_node *prev;

	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	/* acq_rel: orders @n's contents before it becomes the tail, and after the previous tail */
	prev = atomic_exchange_explicit(&q->tail, n, memory_order_acq_rel);
	/* release: the consumer that reads this link (acquire) sees @n's contents */
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* The consumer: the oldest node, or NULL (empty, or its push not yet linked). */
static inline struct mpscq_node *mpscq_pop(struct mpscq *q)
{
	struct mpscq_node *head = q->head, *tail;
	/* acquire: pairs with the release of the push that linked it */
	struct mpscq_node *next = atomic_load_explicit(&head->next, memory_order_acquire);

	if (head == &q->stub) {
		if (!next)
			return NULL;
		q->head = next;
		head = next;
		/* acquire: as above */
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next) {
		q->head = next;
		return head;
	}
	/* @head is the last node linked: unless a push is under way, put the stub behind it */
	/* acquire: pairs with the exchange of a push that has not linked yet */
	tail = atomic_load_explicit(&q->tail, memory_order_acquire);
	if (tail != head)
		return NULL;
	mpscq_push(q, &q->stub);
	/* acquire: the stub's link, or that of a push that came first */
	next = atomic_load_explicit(&head->next, memory_order_acquire);
	if (!next)
		return NULL;
	q->head = next;
	return head;
}

/*
 * The consumer: true when nothing was pushed that it has not popped. A
 * push under way reads as not empty (a worker about to sleep looks again).
 */
static inline bool mpscq_empty(struct mpscq *q)
{
	/* acquire: a push whose exchange we see is one we will pop */
	return q->head == &q->stub &&
	       atomic_load_explicit(&q->tail, memory_order_acquire) == &q->stub;
}

#endif /* PC_MPSCQ_H */
