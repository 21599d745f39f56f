// SPDX-License-Identifier: MIT
/*
 * unit suite: the intrusive MPSC queue (core/mpscq.h): FIFO, empty, a push
 * caught half done, and producers racing a consumer (every node popped
 * once, each producer's in order). The race runs under ThreadSanitizer too.
 */
#include "mpscq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pc_test.h"

struct item {
	struct mpscq_node node;
	unsigned int producer;
	unsigned int seq;
};

static struct item *item_of(struct mpscq_node *n)
{
	return n ? pc_container_of(n, struct item, node) : NULL;
}

START_TEST(test_fifo_and_empty)
{
	struct mpscq q;
	struct item it[8];
	unsigned int i, round;

	mpscq_init(&q);
	ck_assert(mpscq_empty(&q));
	ck_assert_ptr_null(mpscq_pop(&q));
	/* twice: the stub goes back behind the last node and is skipped again */
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 8; i++) {
			it[i].seq = i;
			mpscq_push(&q, &it[i].node);
			ck_assert(!mpscq_empty(&q));
		}
		for (i = 0; i < 8; i++) {
			struct item *got = item_of(mpscq_pop(&q));

			ck_assert_ptr_eq(got, &it[i]);
		}
		ck_assert(mpscq_empty(&q));
		ck_assert_ptr_null(mpscq_pop(&q));
	}
}
END_TEST

START_TEST(test_interleaved)
{
	struct mpscq q;
	struct item a = { 0 }, b = { 0 }, c = { 0 };

	mpscq_init(&q);
	mpscq_push(&q, &a.node);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &a);
	mpscq_push(&q, &b.node);
	mpscq_push(&q, &c.node);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &b);
	/* a node popped may be pushed again at once (it is its owner's) */
	mpscq_push(&q, &a.node);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &c);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &a);
	ck_assert_ptr_null(mpscq_pop(&q));
	ck_assert(mpscq_empty(&q));
}
END_TEST

/* A producer preempted between its exchange and its link: not empty, nothing to pop yet. */
START_TEST(test_push_half_done)
{
	struct mpscq q;
	struct item a = { 0 }, b = { 0 };
	struct mpscq_node *prev;

	mpscq_init(&q);
	mpscq_push(&q, &a.node);
	/* b's push, stopped after the exchange */
	atomic_store(&b.node.next, NULL);
	prev = atomic_exchange(&q.tail, &b.node);
	ck_assert_ptr_eq(prev, &a.node);
	/* a is there, but it is not yet known whether it is the last: wait */
	ck_assert_ptr_null(mpscq_pop(&q));
	ck_assert(!mpscq_empty(&q));
	/* the link lands: both come out, in order */
	atomic_store(&prev->next, &b.node);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &a);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &b);
	ck_assert_ptr_null(mpscq_pop(&q));
	ck_assert(mpscq_empty(&q));

	/* the same on an empty queue: the half-done push makes it non-empty at once */
	atomic_store(&a.node.next, NULL);
	prev = atomic_exchange(&q.tail, &a.node);
	ck_assert(!mpscq_empty(&q));
	ck_assert_ptr_null(mpscq_pop(&q));
	atomic_store(&prev->next, &a.node);
	ck_assert_ptr_eq(item_of(mpscq_pop(&q)), &a);
	ck_assert(mpscq_empty(&q));
}
END_TEST

enum { PRODUCERS = 4 };

static struct mpscq race_q;
static atomic_uint race_go;

struct producer {
	pthread_t t;
	unsigned int idx, n;
	struct item *items;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	unsigned int i;

	while (!atomic_load(&race_go))
		;
	for (i = 0; i < p->n; i++) {
		p->items[i].producer = p->idx;
		p->items[i].seq = i;
		mpscq_push(&race_q, &p->items[i].node);
	}
	return NULL;
}

/* Producers push while the consumer pops: each node once, each producer's in its order. */
START_TEST(test_producers_race)
{
	unsigned int n = PC_TEST_SANITIZED ? 20000 : 200000;
	struct producer p[PRODUCERS];
	unsigned int next[PRODUCERS] = { 0 }, got = 0, i, empty_polls = 0;

	mpscq_init(&race_q);
	atomic_store(&race_go, 0);
	for (i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ .idx = i, .n = n, .items = calloc(n, sizeof(struct item)) };
		ck_assert_ptr_nonnull(p[i].items);
		ck_assert_int_eq(pthread_create(&p[i].t, NULL, produce, &p[i]), 0);
	}
	atomic_store(&race_go, 1);
	while (got < PRODUCERS * n) {
		struct item *it = item_of(mpscq_pop(&race_q));

		if (!it) {
			empty_polls++;
			continue;
		}
		ck_assert_uint_lt(it->producer, PRODUCERS);
		ck_assert_msg(it->seq == next[it->producer], "producer %u: got %u, expected %u",
			      it->producer, it->seq, next[it->producer]);
		next[it->producer]++;
		got++;
	}
	for (i = 0; i < PRODUCERS; i++) {
		pthread_join(p[i].t, NULL);
		ck_assert_uint_eq(next[i], n);
	}
	ck_assert_ptr_null(mpscq_pop(&race_q));
	ck_assert(mpscq_empty(&race_q));
	printf("mpscq: %u nodes from %u producers, %u empty polls meanwhile\n", got, PRODUCERS,
	       empty_polls);
	for (i = 0; i < PRODUCERS; i++)
		free(p[i].items);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpscq");
	TCase *tc = tcase_create("mpscq");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fifo_and_empty);
	tcase_add_test(tc, test_interleaved);
	tcase_add_test(tc, test_push_half_done);
	tcase_add_test(tc, test_producers_race);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
