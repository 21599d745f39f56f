// SPDX-License-Identifier: MIT
/*
 * Buffer pool setup and teardown; the hot path (get/put/from_addr) is
 * inline in pollcore/pool.h.
 */
#include <pollcore/pool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include "abi_pvt.h"
#include "log_pvt.h"

#define POOL_REGION_ALIGN     4096
#define POOL_WARN_MAX_INDICES 8

static void *default_alloc(size_t len, size_t align, void *arg)
{
	void *p;
	int ret = posix_memalign(&p, align, len);

	if (ret) {
		errno = ret;
		return NULL;
	}
	return p;
}

static void default_free(void *addr, size_t len, void *arg)
{
	free(addr);
}

static const struct pc_pool_allocator default_allocator = {
    .alloc = default_alloc,
    .free = default_free,
};

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Fills in the region geometry of @pool; -EINVAL on overflow. */
static int pool_layout(struct pc_pool *pool, uint32_t nbufs, uint32_t buf_size)
{
	size_t stride = align_up(buf_size, PC_CACHELINE);

	if (nbufs > (SIZE_MAX - POOL_REGION_ALIGN) / stride)
		return set_error(-EINVAL,
				    "pool %s: %u buffers of %u bytes overflow the region size",
				    pool->name, nbufs, buf_size);
	pool->stride = stride;
	pool->stride_shift = pc_is_pow2(stride) ? __builtin_ctzll(stride) : -1;
	pool->span = (size_t)nbufs * stride;
	pool->region_len = align_up(pool->span, POOL_REGION_ALIGN);
	return 0;
}

static int pool_register(struct pc_pool *pool, struct ibv_pd *pd, int access)
{
	pool->mr = ibv_reg_mr(pd, pool->base, pool->region_len, access);
	if (!pool->mr) {
		int err = errno ? errno : EIO;

		return set_error(
		    -err, "pool %s: ibv_reg_mr of %zu bytes on %s (access 0x%x) failed: %s",
		    pool->name, pool->region_len, ibv_get_device_name(pd->context->device),
		    (unsigned int)access, strerror(err));
	}
	return 0;
}

/* pc_pool_create@@POLLCORE_0.2 (struct pc_pool_params carries its size); workers/compat.c has 0.1's */
PC_API struct pc_pool *pc_pool_create_0_2(const struct pc_pool_params *caller);
PC_SYMVER_DEFAULT(pc_pool_create_0_2, pc_pool_create, "POLLCORE_0.2");

struct pc_pool *pc_pool_create_0_2(const struct pc_pool_params *caller)
{
	struct pc_pool_params p;
	const struct pc_pool_params *params = &p;
	struct pc_pool *pool;
	uint32_t nbufs;
	uint32_t lkey, i;
	int err;

	err = caller ? abi_copy(&p, sizeof(p), caller, caller->size, sizeof(p), "pc_pool_params")
		     : set_error(-EINVAL, "pc_pool_create: no parameters");
	if (err) {
		errno = -err;
		return NULL;
	}
	nbufs = params->nbufs;

	pool =
	    calloc(1, sizeof(*pool) + (size_t)nbufs * (sizeof(struct pc_buf) + sizeof(uint32_t)));
	if (!pool) {
		set_error(-ENOMEM, "pool %s: cannot allocate descriptors for %u buffers",
			     params->name ? params->name : "(unnamed)", nbufs);
		errno = ENOMEM;
		return NULL;
	}
	snprintf(pool->name, sizeof(pool->name), "%s", params->name ? params->name : "(unnamed)");
	pool->allocator = params->allocator ? *params->allocator : default_allocator;
	if (nbufs == 0 || params->buf_size == 0) {
		err = set_error(-EINVAL, "pool %s: nbufs (%u) and buf_size (%u) must be > 0",
				   pool->name, nbufs, params->buf_size);
		goto err_free_pool;
	}
	err = pool_layout(pool, nbufs, params->buf_size);
	if (err)
		goto err_free_pool;

	errno = 0;
	pool->base =
	    pool->allocator.alloc(pool->region_len, POOL_REGION_ALIGN, pool->allocator.arg);
	if (!pool->base) {
		err = set_error(errno ? -errno : -ENOMEM,
				   "pool %s: allocator failed for %zu bytes: %s", pool->name,
				   pool->region_len, strerror(errno ? errno : ENOMEM));
		goto err_free_pool;
	}
	if ((uintptr_t)pool->base % POOL_REGION_ALIGN) {
		err =
		    set_error(-EINVAL, "pool %s: allocator returned %p, not aligned to %d bytes",
				 pool->name, (void *)pool->base, POOL_REGION_ALIGN);
		goto err_free_region;
	}
	if (params->pd) {
		err = pool_register(pool, params->pd, params->access);
		if (err)
			goto err_free_region;
	}

	lkey = pool->mr ? pool->mr->lkey : 0;
	pool->nbufs = nbufs;
	pool->bufs = (struct pc_buf *)(pool + 1);
	pool->stack = (uint32_t *)(pool->bufs + nbufs);
	for (i = 0; i < nbufs; i++) {
		struct pc_buf *b = &pool->bufs[i];

		b->addr = pool->base + (size_t)i * pool->stride;
		b->cap = params->buf_size;
		b->lkey = lkey;
		b->index = i;
		b->state = PC_BUF_FREE;
		/* top of the stack is index 0, so buffers first go out in address order */
		pool->stack[i] = nbufs - 1 - i;
	}
	atomic_init(&pool->nfree, nbufs);
	atomic_init(&pool->empty, 0);
	atomic_init(&pool->bad_put, 0);
	pc_debug("pool %s: %u x %u bytes (stride %zu), region %zu bytes at %p, %s", pool->name,
		 nbufs, params->buf_size, pool->stride, pool->region_len, (void *)pool->base,
		 pool->mr ? "registered" : "not registered");
	return pool;

err_free_region:
	pool->allocator.free(pool->base, pool->region_len, pool->allocator.arg);
err_free_pool:
	free(pool);
	errno = -err;
	return NULL;
}

static void report_outstanding(const struct pc_pool *pool, uint32_t in_use)
{
	char list[POOL_WARN_MAX_INDICES * 12 + 8] = "";
	size_t len = 0;
	uint32_t i, shown = 0;

	for (i = 0; i < pool->nbufs && shown < POOL_WARN_MAX_INDICES; i++) {
		if (pool->bufs[i].state != PC_BUF_IN_USE)
			continue;
		len +=
		    (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", shown ? " " : "", i);
		shown++;
	}
	pc_warn("pool %s: destroyed with %u of %u buffers still outstanding (indices: %s%s)",
		pool->name, in_use, pool->nbufs, list, in_use > shown ? " ..." : "");
}

void pc_pool_destroy(struct pc_pool *pool)
{
	uint32_t in_use;
	int ret;

	if (!pool)
		return;
	in_use = pool->nbufs - atomic_load_explicit(&pool->nfree, memory_order_relaxed);
	if (in_use)
		report_outstanding(pool, in_use);
	if (pool->mr) {
		ret = ibv_dereg_mr(pool->mr);
		if (ret)
			pc_warn("pool %s: ibv_dereg_mr failed: %s", pool->name, strerror(ret));
	}
	pool->allocator.free(pool->base, pool->region_len, pool->allocator.arg);
	free(pool);
}

void pc_pool_stats(const struct pc_pool *pool, struct pc_pool_stats *st)
{
	st->total = pool->nbufs;
	st->free = atomic_load_explicit(&pool->nfree, memory_order_relaxed);
	st->in_use = st->total - st->free;
	st->empty = atomic_load_explicit(&pool->empty, memory_order_relaxed);
	st->bad_put = atomic_load_explicit(&pool->bad_put, memory_order_relaxed);
}

