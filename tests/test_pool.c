// SPDX-License-Identifier: MIT
/* Unit tests for pollcore/pool.h without registration (pd NULL). */
#include <pollcore/pool.h>

#include "pc_test.h"

#include <stdint.h>

#define NBUFS 8

/* Allocator that counts its calls and can be told to fail or misalign. */
struct test_alloc {
	int allocs, frees;
	size_t len, freed_len;
	size_t align;
	void *mem, *freed;
	int fail;
	int misalign;
};

static void *test_alloc_fn(size_t len, size_t align, void *arg)
{
	struct test_alloc *a = arg;

	a->allocs++;
	a->len = len;
	a->align = align;
	if (a->fail) {
		errno = ENOMEM;
		return NULL;
	}
	if (posix_memalign(&a->mem, align, len + align))
		return NULL;
	return (char *)a->mem + (a->misalign ? 64 : 0);
}

static void test_free_fn(void *addr, size_t len, void *arg)
{
	struct test_alloc *a = arg;

	a->frees++;
	a->freed = addr;
	a->freed_len = len;
	free(a->mem);
}

static struct pc_pool *make_pool(uint32_t nbufs, uint32_t buf_size)
{
	struct pc_pool_params p = {.size = sizeof(p), .name = "test", .nbufs = nbufs, .buf_size = buf_size};
	struct pc_pool *pool = pc_pool_create(&p);

	ck_assert_msg(pool != NULL, "pc_pool_create: %s", pc_last_error());
	return pool;
}

static void check_stats(struct pc_pool *pool, uint32_t free_bufs, unsigned long empty,
			unsigned long bad_put)
{
	struct pc_pool_stats st;

	pc_pool_stats(pool, &st);
	ck_assert_uint_eq(st.total, pool->nbufs);
	ck_assert_uint_eq(st.free, free_bufs);
	ck_assert_uint_eq(st.in_use, pool->nbufs - free_bufs);
	ck_assert_uint_eq(st.empty, empty);
	ck_assert_uint_eq(st.bad_put, bad_put);
}

START_TEST(exhaust_and_return)
{
	struct pc_pool *pool = make_pool(NBUFS, 2048);
	struct pc_buf *b[NBUFS];
	unsigned int i;

	check_stats(pool, NBUFS, 0, 0);
	for (i = 0; i < NBUFS; i++) {
		b[i] = pc_pool_get(pool);
		ck_assert_ptr_nonnull(b[i]);
		ck_assert_uint_eq(b[i]->index, i); /* fresh pool hands out in address order */
		ck_assert_ptr_eq(b[i]->addr, (char *)pool->bufs[0].addr + (size_t)i * 2048);
		ck_assert_uint_eq((uintptr_t)b[i]->addr % PC_CACHELINE, 0);
		ck_assert_uint_eq(b[i]->cap, 2048);
		ck_assert_uint_eq(b[i]->len, 0);
		ck_assert_uint_eq(b[i]->lkey, 0);
		memset(b[i]->addr, (int)i, b[i]->cap); /* whole buffer writable (ASan checks) */
		b[i]->len = 100 + i;
		check_stats(pool, NBUFS - 1 - i, 0, 0);
	}
	ck_assert_uint_eq((uintptr_t)pool->bufs[0].addr % 4096, 0);
	ck_assert_ptr_null(pc_pool_get(pool));
	check_stats(pool, 0, 1, 0);
	ck_assert_ptr_null(pc_pool_get(pool));
	check_stats(pool, 0, 2, 0);

	for (i = 0; i < NBUFS; i++) {
		ck_assert_uint_eq(*(unsigned char *)b[i]->addr, i); /* no overlap between buffers */
		ck_assert_int_eq(pc_pool_put(pool, b[i]), 0);
		check_stats(pool, i + 1, 2, 0);
	}
	/* LIFO: the last one returned comes out first, with len reset */
	ck_assert_ptr_eq(pc_pool_get(pool), b[NBUFS - 1]);
	ck_assert_uint_eq(b[NBUFS - 1]->len, 0);
	ck_assert_ptr_eq(pc_pool_get(pool), b[NBUFS - 2]);
	check_stats(pool, NBUFS - 2, 2, 0);
	ck_assert_int_eq(pc_pool_put(pool, b[NBUFS - 2]), 0);
	ck_assert_int_eq(pc_pool_put(pool, b[NBUFS - 1]), 0);
	check_stats(pool, NBUFS, 2, 0);
	pc_pool_destroy(pool);
}
END_TEST

START_TEST(double_put)
{
	struct pc_pool *pool = make_pool(NBUFS, 2048);
	struct pc_buf *a = pc_pool_get(pool), *b = pc_pool_get(pool);

	ck_assert_int_eq(pc_pool_put(pool, a), 0);
	ck_assert_int_eq(pc_pool_put(pool, a), -EALREADY);
	check_stats(pool, NBUFS - 1, 0, 1);
	/* a buffer never handed out is also refused */
	ck_assert_int_eq(pc_pool_put(pool, &pool->bufs[NBUFS - 1]), -EALREADY);
	check_stats(pool, NBUFS - 1, 0, 2);
	ck_assert_int_eq(pc_pool_put(pool, b), 0);
	ck_assert_int_eq(pc_pool_put(pool, b), -EALREADY);
	check_stats(pool, NBUFS, 0, 3);
	/* the free stack was not corrupted: NBUFS distinct buffers come out, then none */
	{
		struct pc_buf *seen[NBUFS];
		unsigned int i, j;

		for (i = 0; i < NBUFS; i++) {
			seen[i] = pc_pool_get(pool);
			ck_assert_ptr_nonnull(seen[i]);
			for (j = 0; j < i; j++)
				ck_assert_ptr_ne(seen[i], seen[j]);
		}
		ck_assert_ptr_null(pc_pool_get(pool));
		check_stats(pool, 0, 1, 3);
		for (i = 0; i < NBUFS; i++)
			ck_assert_int_eq(pc_pool_put(pool, seen[i]), 0);
	}
	pc_pool_destroy(pool);
}
END_TEST

START_TEST(foreign_pointer)
{
	struct pc_pool *pool = make_pool(NBUFS, 2048);
	struct pc_pool *other = make_pool(NBUFS, 2048);
	struct pc_buf *mine = pc_pool_get(pool);
	struct pc_buf *theirs = pc_pool_get(other);
	struct pc_buf fake = *mine;

	ck_assert_int_eq(pc_pool_put(pool, theirs), -EINVAL);
	ck_assert_int_eq(pc_pool_put(pool, &fake), -EINVAL);
	ck_assert_int_eq(pc_pool_put(pool, NULL), -EINVAL);
	ck_assert_int_eq(pc_pool_put(pool, (struct pc_buf *)((char *)mine + 4)), -EINVAL);
	ck_assert_int_eq(pc_pool_put(pool, pool->bufs + NBUFS), -EINVAL);
	ck_assert_int_eq(pc_pool_put(pool, pool->bufs - 1), -EINVAL);
	check_stats(pool, NBUFS - 1, 0, 6);
	check_stats(other, NBUFS - 1, 0, 0);
	ck_assert_int_eq(pc_pool_put(pool, mine), 0);
	ck_assert_int_eq(pc_pool_put(other, theirs), 0);
	check_stats(pool, NBUFS, 0, 6);
	pc_pool_destroy(other);
	pc_pool_destroy(pool);
}
END_TEST

/* _i = 0: power-of-two size (shift); _i = 1: 1500 bytes, stride 1536 (division, padding). */
START_TEST(from_addr)
{
	static const uint32_t sizes[] = {4096, 1500};
	uint32_t size = sizes[_i];
	struct pc_pool *pool = make_pool(NBUFS, size);
	char *base = pool->bufs[0].addr;
	size_t stride = (size + PC_CACHELINE - 1) / PC_CACHELINE * PC_CACHELINE;
	unsigned int i;

	ck_assert_int_eq(pool->stride_shift >= 0, _i == 0);
	for (i = 0; i < NBUFS; i++) {
		struct pc_buf *b = &pool->bufs[i];
		char *a = b->addr;

		ck_assert_ptr_eq(a, base + i * stride);
		ck_assert_ptr_eq(pc_pool_buf_from_addr(pool, a), b);
		ck_assert_ptr_eq(pc_pool_buf_from_addr(pool, a + 1), b);
		ck_assert_ptr_eq(pc_pool_buf_from_addr(pool, a + size / 2), b);
		ck_assert_ptr_eq(pc_pool_buf_from_addr(pool, a + size - 1), b);
		if (stride > size) /* padding between buffers maps to nothing */
			ck_assert_ptr_null(pc_pool_buf_from_addr(pool, a + size));
	}
	ck_assert_ptr_null(pc_pool_buf_from_addr(pool, base - 1));
	ck_assert_ptr_null(pc_pool_buf_from_addr(pool, base + NBUFS * stride));
	ck_assert_ptr_null(pc_pool_buf_from_addr(pool, NULL));
	ck_assert_ptr_null(pc_pool_buf_from_addr(pool, &i));
	pc_pool_destroy(pool);
}
END_TEST

START_TEST(custom_allocator)
{
	struct test_alloc ta = {0};
	struct pc_pool_allocator al = {test_alloc_fn, test_free_fn, &ta};
	struct pc_pool_params p = {
	    .size = sizeof(p),
	    .name = "custom", .nbufs = 5, .buf_size = 1000, .allocator = &al};
	struct pc_pool *pool = pc_pool_create(&p);
	void *region;

	ck_assert_ptr_nonnull(pool);
	ck_assert_int_eq(ta.allocs, 1);
	ck_assert_int_eq(ta.frees, 0);
	ck_assert_uint_eq(ta.align, 4096);
	ck_assert_uint_eq(ta.len, 8192); /* 5 x 1024 rounded up to pages */
	region = pool->bufs[0].addr;
	ck_assert_ptr_eq(region, ta.mem);
	pc_pool_put(pool, pc_pool_get(pool));
	pc_pool_destroy(pool);
	ck_assert_int_eq(ta.allocs, 1);
	ck_assert_int_eq(ta.frees, 1);
	ck_assert_ptr_eq(ta.freed, region);
	ck_assert_uint_eq(ta.freed_len, 8192);
}
END_TEST

START_TEST(allocator_failures)
{
	struct test_alloc ta = {.fail = 1};
	struct pc_pool_allocator al = {test_alloc_fn, test_free_fn, &ta};
	struct pc_pool_params p = {.size = sizeof(p), .name = "w3-recv", .nbufs = 4, .buf_size = 64, .allocator = &al};

	errno = 0;
	ck_assert_ptr_null(pc_pool_create(&p));
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "w3-recv"));
	ck_assert_int_eq(ta.allocs, 1);
	ck_assert_int_eq(ta.frees, 0);

	ta = (struct test_alloc){.misalign = 1};
	errno = 0;
	ck_assert_ptr_null(pc_pool_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "not aligned"));
	ck_assert_int_eq(ta.allocs, 1);
	ck_assert_int_eq(ta.frees, 1);
	ck_assert_ptr_eq(ta.freed, (char *)ta.mem + 64);
}
END_TEST

START_TEST(bad_params)
{
	struct test_alloc ta = {0};
	struct pc_pool_allocator al = {test_alloc_fn, test_free_fn, &ta};
	struct pc_pool_params p = {.size = sizeof(p), .nbufs = 0, .buf_size = 64, .allocator = &al};

	errno = 0;
	ck_assert_ptr_null(pc_pool_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	p = (struct pc_pool_params){.size = sizeof(struct pc_pool_params), .nbufs = 4, .buf_size = 0, .allocator = &al};
	errno = 0;
	ck_assert_ptr_null(pc_pool_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(
	    strstr(pc_last_error(), "pool (unnamed): nbufs (4) and buf_size (0)"));
	ck_assert_int_eq(ta.allocs, 0);
}
END_TEST

static char captured[512];
static int warnings;

static void capture_sink(enum pc_log_level level, const char *msg, void *arg)
{
	if (level != PC_LOG_WARN)
		return;
	warnings++;
	snprintf(captured, sizeof(captured), "%s", msg);
}

START_TEST(outstanding_at_destroy)
{
	struct pc_pool *pool = make_pool(NBUFS, 256);
	struct pc_buf *b[3];
	unsigned int i;

	for (i = 0; i < 3; i++)
		b[i] = pc_pool_get(pool);
	ck_assert_int_eq(pc_pool_put(pool, b[1]), 0);
	check_stats(pool, NBUFS - 2, 0, 0);
	pc_log_set_sink(capture_sink, NULL);
	pc_pool_destroy(pool);
	pc_log_set_sink(NULL, NULL);
	ck_assert_int_eq(warnings, 1);
	ck_assert_str_eq(captured, "pool test: destroyed with 2 of 8 buffers still outstanding "
				   "(indices: 0 2)");

	warnings = 0;
	pool = make_pool(NBUFS, 256);
	pc_pool_put(pool, pc_pool_get(pool));
	pc_log_set_sink(capture_sink, NULL);
	pc_pool_destroy(pool);
	pc_log_set_sink(NULL, NULL);
	ck_assert_int_eq(warnings, 0);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, exhaust_and_return);
	tcase_add_test(tc, double_put);
	tcase_add_test(tc, foreign_pointer);
	tcase_add_loop_test(tc, from_addr, 0, 2);
	tcase_add_test(tc, custom_allocator);
	tcase_add_test(tc, allocator_failures);
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, outstanding_at_destroy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pc_test_run(pool_suite());
}
