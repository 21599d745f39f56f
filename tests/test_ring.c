// SPDX-License-Identifier: MIT
/*
 * Unit tests for pollcore/ring.h: single-thread semantics (run for both
 * ring types through one table of operations) and multi-threaded stress.
 */
#include <pollcore/ring.h>

#include "pc_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

/* One table of operations so every single-thread test covers both ring types. */
struct ring_ops {
	const char *name;
	ssize_t (*memsize)(unsigned int capacity);
	void *(*create)(unsigned int capacity);
	int (*init)(void *mem, unsigned int capacity);
	void (*destroy)(void *r);
	unsigned int (*enqueue_burst)(void *r, void *const *objs, unsigned int n);
	int (*enqueue)(void *r, void *obj);
	unsigned int (*dequeue_burst)(void *r, void **objs, unsigned int n);
	unsigned int (*count)(void *r);
	unsigned int (*free_count)(void *r);
	void (*stats)(void *r, struct pc_ring_stats *st);
	int (*indices_lock_free)(void *r);
};

#define RING_OPS(kind)                                                                             \
	static void *kind##_create(unsigned int c)                                                 \
	{                                                                                          \
		return pc_ring_##kind##_create(c);                                                 \
	}                                                                                          \
	static int kind##_init(void *m, unsigned int c)                                            \
	{                                                                                          \
		return pc_ring_##kind##_init(m, c);                                                \
	}                                                                                          \
	static void kind##_destroy(void *r)                                                        \
	{                                                                                          \
		pc_ring_##kind##_destroy(r);                                                       \
	}                                                                                          \
	static unsigned int kind##_enqueue_burst(void *r, void *const *o, unsigned int n)          \
	{                                                                                          \
		return pc_ring_##kind##_enqueue_burst(r, o, n);                                    \
	}                                                                                          \
	static int kind##_enqueue(void *r, void *o)                                                \
	{                                                                                          \
		return pc_ring_##kind##_enqueue(r, o);                                             \
	}                                                                                          \
	static unsigned int kind##_dequeue_burst(void *r, void **o, unsigned int n)                \
	{                                                                                          \
		return pc_ring_##kind##_dequeue_burst(r, o, n);                                    \
	}                                                                                          \
	static unsigned int kind##_count(void *r)                                                  \
	{                                                                                          \
		return pc_ring_##kind##_count(r);                                                  \
	}                                                                                          \
	static unsigned int kind##_free_count(void *r)                                             \
	{                                                                                          \
		return pc_ring_##kind##_free_count(r);                                             \
	}                                                                                          \
	static void kind##_stats(void *r, struct pc_ring_stats *st)                                \
	{                                                                                          \
		pc_ring_##kind##_stats(r, st);                                                     \
	}
RING_OPS(spsc)
RING_OPS(mpsc)

static int spsc_lock_free(void *p)
{
	struct pc_ring_spsc *r = p;

	return atomic_is_lock_free(&r->prod.tail) && atomic_is_lock_free(&r->cons.head) &&
	       atomic_is_lock_free(&r->prod.full);
}

static int mpsc_lock_free(void *p)
{
	struct pc_ring_mpsc *r = p;

	return atomic_is_lock_free(&r->prod.head) && atomic_is_lock_free(&r->prod.cons_cache) &&
	       atomic_is_lock_free(&r->cons.head) && atomic_is_lock_free(&r->slots[0].seq);
}

#define OPS_ENTRY(kind, label)                                                                     \
	{                                                                                          \
		.name = label, .memsize = pc_ring_##kind##_memsize, .create = kind##_create,       \
		.init = kind##_init, .destroy = kind##_destroy,                                    \
		.enqueue_burst = kind##_enqueue_burst, .enqueue = kind##_enqueue,                  \
		.dequeue_burst = kind##_dequeue_burst, .count = kind##_count,                      \
		.free_count = kind##_free_count, .stats = kind##_stats,                            \
		.indices_lock_free = kind##_lock_free,                                             \
	}

static const struct ring_ops ops_table[] = {
    OPS_ENTRY(spsc, "spsc"),
    OPS_ENTRY(mpsc, "mpsc"),
};

#define V(x) ((void *)(uintptr_t)(x))

static unsigned long full_of(const struct ring_ops *ops, void *r)
{
	struct pc_ring_stats st;

	ops->stats(r, &st);
	return st.full;
}

START_TEST(bad_capacity)
{
	const struct ring_ops *ops = &ops_table[_i];
	static const unsigned int bad[] = {
	    0, 3, 6, 100, 1000, PC_RING_MAX_CAPACITY * 2U, PC_RING_MAX_CAPACITY + 1, 0xffffffffU};
	size_t i;

	for (i = 0; i < PC_ARRAY_SIZE(bad); i++) {
		errno = 0;
		ck_assert_msg(ops->create(bad[i]) == NULL, "%s: capacity %u accepted", ops->name,
			      bad[i]);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_int_eq(ops->memsize(bad[i]), -EINVAL);
		ck_assert_ptr_nonnull(strstr(pc_last_error(), "capacity"));
	}
	ck_assert_int_gt(ops->memsize(1), 0);
	ck_assert_int_gt(ops->memsize(PC_RING_MAX_CAPACITY), 0);
}
END_TEST

START_TEST(exact_counts_and_full)
{
	const struct ring_ops *ops = &ops_table[_i];
	void *in[16], *out[16];
	struct pc_ring_stats st;
	void *r = ops->create(8);
	unsigned int i;

	ck_assert_ptr_nonnull(r);
	ck_assert(ops->indices_lock_free(r));
	for (i = 0; i < 16; i++)
		in[i] = V(100 + i);
	ck_assert_uint_eq(ops->count(r), 0);
	ck_assert_uint_eq(ops->free_count(r), 8);
	ck_assert_uint_eq(ops->dequeue_burst(r, out, 16), 0);
	ck_assert_uint_eq(ops->enqueue_burst(r, in, 0), 0);
	ck_assert_uint_eq(full_of(ops, r), 0);

	ck_assert_uint_eq(ops->enqueue_burst(r, in, 5), 5);
	ck_assert_uint_eq(ops->count(r), 5);
	ck_assert_uint_eq(ops->free_count(r), 3);
	ck_assert_uint_eq(full_of(ops, r), 0);

	/* partial: 3 of 5 fit, objects 105..107 go in, one backpressure event */
	ck_assert_uint_eq(ops->enqueue_burst(r, in + 5, 5), 3);
	ck_assert_uint_eq(full_of(ops, r), 1);
	ck_assert_uint_eq(ops->count(r), 8);
	ck_assert_uint_eq(ops->free_count(r), 0);
	ck_assert_uint_eq(ops->enqueue_burst(r, in + 8, 1), 0);
	ck_assert_uint_eq(full_of(ops, r), 2);
	ck_assert_int_eq(ops->enqueue(r, in[8]), -ENOBUFS);
	ck_assert_uint_eq(full_of(ops, r), 3);
	ck_assert_uint_eq(ops->enqueue_burst(r, in, 0), 0);
	ck_assert_uint_eq(full_of(ops, r), 3);

	ck_assert_uint_eq(ops->dequeue_burst(r, out, 2), 2);
	ck_assert_ptr_eq(out[0], V(100));
	ck_assert_ptr_eq(out[1], V(101));
	ck_assert_uint_eq(ops->count(r), 6);
	ck_assert_int_eq(ops->enqueue(r, V(7)), 0);
	ck_assert_int_eq(ops->enqueue(r, NULL), 0); /* NULL is an ordinary value */
	ck_assert_uint_eq(full_of(ops, r), 3);

	ck_assert_uint_eq(ops->dequeue_burst(r, out, 16), 8);
	for (i = 0; i < 6; i++)
		ck_assert_ptr_eq(out[i], V(102 + i));
	ck_assert_ptr_eq(out[6], V(7));
	ck_assert_ptr_null(out[7]);
	ck_assert_uint_eq(ops->dequeue_burst(r, out, 16), 0);
	ck_assert_uint_eq(ops->count(r), 0);
	ck_assert_uint_eq(ops->free_count(r), 8);

	ops->stats(r, &st);
	ck_assert_uint_eq(st.full, 3);
	ck_assert_uint_eq(st.capacity, 8);
	ck_assert_uint_eq(st.count, 0);
	ops->destroy(r);
}
END_TEST

START_TEST(capacity_one)
{
	const struct ring_ops *ops = &ops_table[_i];
	void *r = ops->create(1);
	void *out[2];
	unsigned int i;

	ck_assert_ptr_nonnull(r);
	for (i = 0; i < 1000; i++) {
		ck_assert_int_eq(ops->enqueue(r, V(i)), 0);
		ck_assert_int_eq(ops->enqueue(r, V(i)), -ENOBUFS);
		ck_assert_uint_eq(ops->dequeue_burst(r, out, 2), 1);
		ck_assert_ptr_eq(out[0], V(i));
	}
	ck_assert_uint_eq(full_of(ops, r), 1000);
	ops->destroy(r);
}
END_TEST

/* Many laps with burst sizes that are coprime with the capacity, so wraparound hits every slot. */
START_TEST(wraparound_many_laps)
{
	const struct ring_ops *ops = &ops_table[_i];
	enum { cap = 16, laps = 5000 };
	unsigned long next_in = 0, next_out = 0, partial = 0;
	void *in[cap], *out[cap];
	void *r = ops->create(cap);
	unsigned int i, k, n, got;

	ck_assert_ptr_nonnull(r);
	while (next_out < (unsigned long)cap * laps) {
		n = 1 + (unsigned int)(next_in % 13);
		for (i = 0; i < n; i++)
			in[i] = V(next_in + i);
		k = ops->enqueue_burst(r, in, n);
		ck_assert_uint_eq(k, PC_MIN(n, cap - (unsigned int)(next_in - next_out)));
		partial += k < n;
		next_in += k;
		ck_assert_uint_eq(ops->count(r), next_in - next_out);

		got = ops->dequeue_burst(r, out, 1 + (unsigned int)(next_out % 7));
		for (i = 0; i < got; i++)
			ck_assert_ptr_eq(out[i], V(next_out + i));
		next_out += got;
		ck_assert_uint_eq(ops->count(r), next_in - next_out);
		ck_assert_uint_eq(ops->free_count(r), cap - (next_in - next_out));
	}
	ck_assert_uint_gt(partial, 0);
	ck_assert_uint_eq(full_of(ops, r), partial);
	ops->destroy(r);
}
END_TEST

START_TEST(init_caller_memory)
{
	const struct ring_ops *ops = &ops_table[_i];
	ssize_t size = ops->memsize(64);
	void *out[4];
	char *mem;

	ck_assert_int_gt(size, 0);
	mem = aligned_alloc(PC_CACHELINE, (size_t)size + PC_CACHELINE);
	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(ops->init(mem + 8, 64), -EINVAL);
	ck_assert_int_eq(ops->init(mem, 48), -EINVAL);
	memset(mem, 0xff, (size_t)size);
	ck_assert_int_eq(ops->init(mem, 64), 0);
	ck_assert_uint_eq(ops->count(mem), 0);
	ck_assert_uint_eq(ops->free_count(mem), 64);
	ck_assert_uint_eq(ops->dequeue_burst(mem, out, 4), 0); /* garbage before init is gone */
	ck_assert_int_eq(ops->enqueue(mem, V(42)), 0);
	ck_assert_uint_eq(ops->dequeue_burst(mem, out, 4), 1);
	ck_assert_ptr_eq(out[0], V(42));
	ck_assert_uint_eq(full_of(ops, mem), 0);
	free(mem);
}
END_TEST

/* ------------------------------------------------------------------ stress */

#define SPSC_VALUES    2000000UL
#define MPSC_PRODUCERS 4
#define MPSC_VALUES    250000UL /* per producer */
#define BURST_MAX      32

/* Stress tests fail through Check (not a meson kill) if the rings deadlock. */
#define STRESS_TIMEOUT_S 240

struct spsc_ctx {
	struct pc_ring_spsc *r;
	unsigned long partial;
	atomic_int done;
};

static void *spsc_producer(void *arg)
{
	struct spsc_ctx *c = arg;
	void *in[BURST_MAX];
	unsigned long next = 1;
	unsigned int i, n, k;

	while (next <= SPSC_VALUES) {
		n = (unsigned int)PC_MIN(1 + next % BURST_MAX, SPSC_VALUES + 1 - next);
		for (i = 0; i < n; i++)
			in[i] = V(next + i);
		k = pc_ring_spsc_enqueue_burst(c->r, in, n);
		next += k;
		if (k < n) {
			c->partial++;
			if (k == 0)
				sched_yield();
		}
	}
	atomic_store(&c->done, 1);
	return NULL;
}

START_TEST(spsc_stress)
{
	struct spsc_ctx c = {.r = pc_ring_spsc_create(256), .done = 0};
	void *out[BURST_MAX];
	unsigned long expect = 1, empty = 0;
	unsigned int i, got;
	pthread_t t;

	ck_assert_ptr_nonnull(c.r);
	ck_assert_int_eq(pthread_create(&t, NULL, spsc_producer, &c), 0);
	while (expect <= SPSC_VALUES) {
		int done = atomic_load(&c.done);

		got = pc_ring_spsc_dequeue_burst(c.r, out, 1 + (unsigned int)(expect % BURST_MAX));
		if (got == 0) {
			ck_assert_msg(!done, "producer finished but value %lu never arrived",
				      expect);
			empty++;
			sched_yield();
			continue;
		}
		for (i = 0; i < got; i++)
			ck_assert_ptr_eq(out[i], V(expect + i));
		expect += got;
	}
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(pc_ring_spsc_count(c.r), 0);
	ck_assert_uint_eq(pc_ring_spsc_dequeue_burst(c.r, out, 1), 0);
	ck_assert_uint_eq(full_of(&ops_table[0], c.r), c.partial);
	printf("spsc stress: %lu values in order, %lu backpressure events, %lu empty polls\n",
	       SPSC_VALUES, c.partial, empty);
	pc_ring_spsc_destroy(c.r);
}
END_TEST

struct mpsc_producer {
	struct pc_ring_mpsc *r;
	unsigned int id;
	unsigned long partial;
	atomic_int *done;
	pthread_t thread;
};

/* Value = seq * MPSC_PRODUCERS + id, seq from 1, so 0 never appears. */
static void *mpsc_produce(void *arg)
{
	struct mpsc_producer *p = arg;
	void *in[BURST_MAX];
	unsigned long seq = 1;
	unsigned int i, n, k;

	while (seq <= MPSC_VALUES) {
		n = (unsigned int)PC_MIN(1 + (seq + p->id) % BURST_MAX, MPSC_VALUES + 1 - seq);
		for (i = 0; i < n; i++)
			in[i] = V((seq + i) * MPSC_PRODUCERS + p->id);
		k = pc_ring_mpsc_enqueue_burst(p->r, in, n);
		seq += k;
		if (k < n) {
			p->partial++;
			sched_yield();
		}
	}
	atomic_fetch_add(p->done, 1);
	return NULL;
}

START_TEST(mpsc_stress)
{
	struct pc_ring_mpsc *r = pc_ring_mpsc_create(64);
	struct mpsc_producer prod[MPSC_PRODUCERS];
	unsigned long next[MPSC_PRODUCERS], total = 0, partial = 0;
	atomic_int done = 0;
	void *out[BURST_MAX];
	unsigned int i, got;

	ck_assert_ptr_nonnull(r);
	for (i = 0; i < MPSC_PRODUCERS; i++) {
		prod[i] = (struct mpsc_producer){.r = r, .id = i, .done = &done};
		next[i] = 1;
		ck_assert_int_eq(pthread_create(&prod[i].thread, NULL, mpsc_produce, &prod[i]), 0);
	}
	while (total < MPSC_PRODUCERS * MPSC_VALUES) {
		int finished = atomic_load(&done);

		got = pc_ring_mpsc_dequeue_burst(r, out, 1 + (unsigned int)(total % BURST_MAX));
		if (got == 0) {
			ck_assert_msg(finished < MPSC_PRODUCERS,
				      "all producers finished but only %lu of %lu values arrived",
				      total, MPSC_PRODUCERS * MPSC_VALUES);
			sched_yield();
			continue;
		}
		for (i = 0; i < got; i++) {
			uintptr_t v = (uintptr_t)out[i];
			unsigned int id = (unsigned int)(v % MPSC_PRODUCERS);

			ck_assert_msg(v / MPSC_PRODUCERS == next[id],
				      "producer %u: got seq %lu, expected %lu", id,
				      (unsigned long)(v / MPSC_PRODUCERS), next[id]);
			next[id]++;
		}
		total += got;
	}
	for (i = 0; i < MPSC_PRODUCERS; i++) {
		ck_assert_int_eq(pthread_join(prod[i].thread, NULL), 0);
		ck_assert_uint_eq(next[i], MPSC_VALUES + 1);
		partial += prod[i].partial;
	}
	ck_assert_uint_eq(pc_ring_mpsc_count(r), 0);
	ck_assert_uint_eq(pc_ring_mpsc_dequeue_burst(r, out, 1), 0);
	ck_assert_uint_eq(full_of(&ops_table[1], r), partial);
	printf("mpsc stress: %d producers x %lu values in per-producer order, %lu backpressure "
	       "events\n",
	       MPSC_PRODUCERS, MPSC_VALUES, partial);
	pc_ring_mpsc_destroy(r);
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("semantics");
	TCase *mt = tcase_create("stress");
	int n = (int)PC_ARRAY_SIZE(ops_table);

	tcase_add_loop_test(tc, bad_capacity, 0, n);
	tcase_add_loop_test(tc, exact_counts_and_full, 0, n);
	tcase_add_loop_test(tc, capacity_one, 0, n);
	tcase_add_loop_test(tc, wraparound_many_laps, 0, n);
	tcase_add_loop_test(tc, init_caller_memory, 0, n);
	suite_add_tcase(s, tc);

	tcase_set_timeout(mt, STRESS_TIMEOUT_S);
	tcase_add_test(mt, spsc_stress);
	tcase_add_test(mt, mpsc_stress);
	suite_add_tcase(s, mt);
	return s;
}

int main(void)
{
	return pc_test_run(ring_suite());
}
