/* SPDX-License-Identifier: MIT */
/*
 * pollcore/pool.h - per-worker pool of fixed-size registered buffers.
 *
 * One contiguous region, obtained from a caller-supplied allocator (so a
 * worker can pass a NUMA-local one) and optionally registered with
 * ibv_reg_mr, is cut into nbufs slabs of the same stride. Each slab is
 * described by a struct pc_buf in an array allocated at creation; free
 * buffers are kept on a LIFO stack of indices, so get/put are a few loads
 * and stores, with no allocation, lock or syscall.
 *
 * Who may call what, concurrently:
 *
 *   function                            | owner thread | other threads
 *   ------------------------------------+--------------+--------------
 *   pc_pool_get / pc_pool_put           |     yes      |     no
 *   pc_pool_buf_from_addr               |     yes      |  yes (read-only
 *                                       |              |   mapping)
 *   pc_pool_stats                       |     yes      |  yes (snapshot)
 *   pc_pool_create / pc_pool_destroy    |  only while no other thread uses it
 *
 * The owner is the worker that created the pool (or was handed it with a
 * happens-before edge). Buffers lent to application threads come back to
 * the owner (e.g. through an MPSC ring) and the owner puts them.
 *
 * Fields of struct pc_pool are private to pool.h and pool.c, except that
 * bufs[0 .. nbufs - 1] (the descriptors in index order) may be read, e.g. to
 * build per-buffer side tables at setup. struct pc_buf fields are read-only
 * for users except @len.
 */
#ifndef POLLCORE_POOL_H
#define POLLCORE_POOL_H

#include <pollcore/common.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;

static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2,
	      "pool counters need lock-free atomics");

/* Values of pc_buf.state: the per-buffer check behind pc_pool_put()'s errors. */
enum pc_buf_state {
	PC_BUF_FREE = 0x5a,   /* on the pool's free stack */
	PC_BUF_IN_USE = 0xa5, /* handed out by pc_pool_get() */
};

/**
 * struct pc_buf - one buffer of a pool.
 * @addr: start of the buffer inside the pool's region.
 * @len: bytes of valid data; set by the user (pc_pool_get() resets it to 0).
 * @cap: usable size in bytes (the pool's buf_size).
 * @lkey: lkey of the pool's memory region; 0 when the pool is not registered.
 * @index: position in the pool, 0 .. nbufs - 1.
 * @state: enum pc_buf_state; read-only.
 */
struct pc_buf {
	void *addr;
	uint32_t len;
	uint32_t cap;
	uint32_t lkey;
	uint32_t index;
	uint8_t state;
};

static_assert(sizeof(struct pc_buf) == 32, "two buffer descriptors per cache line");

/**
 * struct pc_pool_allocator - where the pool's region comes from.
 * @alloc: return @len bytes aligned to @align (4096), or NULL with errno set.
 * @free: release memory returned by @alloc (@len is the same).
 * @arg: passed to both.
 *
 * Each callback is called exactly once per pool: @alloc by pc_pool_create(),
 * @free by pc_pool_destroy() (or by pc_pool_create() when a later step fails).
 */
struct pc_pool_allocator {
	void *(*alloc)(size_t len, size_t align, void *arg);
	void (*free)(void *addr, size_t len, void *arg);
	void *arg;
};

/**
 * struct pc_pool_params - what pc_pool_create() builds.
 * @size: sizeof(struct pc_pool_params) as the caller compiled it: required
 *        (fields are only added at the end; see pc_engine_params' @size).
 * @name: short name used in log and error messages (e.g. "w0-recv"); NULL
 *        for "(unnamed)".
 * @nbufs: number of buffers, > 0.
 * @buf_size: bytes per buffer, > 0. Buffers start on PC_CACHELINE
 *            boundaries; a power of two >= PC_CACHELINE wastes nothing and
 *            makes pc_pool_buf_from_addr() a shift.
 * @pd: protection domain to register the region with, or NULL for an
 *      unregistered pool (lkey 0; unit tests use this).
 * @access: ibv_access_flags for ibv_reg_mr; give the least the buffers
 *          need (send buffers: IBV_ACCESS_LOCAL_WRITE or 0; only buffers
 *          that are RDMA targets get remote access). Ignored without @pd.
 * @allocator: region allocator, or NULL for posix_memalign(4096).
 */
struct pc_pool_params {
	uint32_t size;
	const char *name;
	uint32_t nbufs;
	uint32_t buf_size;
	struct ibv_pd *pd;
	int access;
	const struct pc_pool_allocator *allocator;
};

/**
 * struct pc_pool_stats - snapshot of a pool's counters.
 * @total: buffers in the pool.
 * @free: buffers on the free stack.
 * @in_use: buffers handed out and not yet put back (total - free); a buffer
 *          an application forgets stays counted here.
 * @empty: pc_pool_get() calls that found the pool empty.
 * @bad_put: pc_pool_put() calls refused (-EINVAL or -EALREADY).
 */
struct pc_pool_stats {
	uint32_t total;
	uint32_t free;
	uint32_t in_use;
	unsigned long empty;
	unsigned long bad_put;
};

struct pc_pool {
	/* hot: owner thread */
	struct pc_buf *bufs;
	uint32_t *stack; /* indices of free buffers; top is stack[nfree - 1] */
	atomic_uint nfree;
	uint32_t nbufs;
	char *base;	  /* region start */
	size_t span;	  /* nbufs * stride: addresses below base + span map to a buffer */
	size_t stride;	  /* bytes from one buffer to the next */
	int stride_shift; /* log2(stride) when stride is a power of two, else -1 */
	atomic_ulong empty;
	atomic_ulong bad_put;
	/* cold */
	size_t region_len;
	struct ibv_mr *mr;
	struct pc_pool_allocator allocator;
	char name[32];
};

/**
 * pc_pool_create - allocate, carve and optionally register a buffer pool.
 * @params: see struct pc_pool_params; not referenced after the call.
 *
 * Setup code, any thread; the calling thread becomes the owner. With the
 * default allocator, create it on the worker's core so first touch (and
 * ibv_reg_mr pinning) places the pages on the worker's NUMA node.
 *
 * Return: the pool, or NULL with errno set: EINVAL (no @params, its @size
 * below the first layout's, nbufs or buf_size 0, region size overflows,
 * allocator returned misaligned memory), E2BIG (@size above this library's
 * with unknown bytes set), ENOMEM, EIO (ibv_reg_mr failed without an
 * errno); otherwise the errno of a failed allocator or ibv_reg_mr, passed
 * on. pc_last_error() names the pool (and device).
 */
PC_API struct pc_pool *pc_pool_create(const struct pc_pool_params *params);

/**
 * pc_pool_destroy - deregister and free a pool.
 * @pool: the pool, or NULL.
 *
 * Owner thread, once no buffer is in flight in the NIC. Buffers still handed
 * out are reported with pc_warn() (count and indices); their memory goes
 * away with the pool.
 */
PC_API void pc_pool_destroy(struct pc_pool *pool);

/**
 * pc_pool_stats - sample a pool's counters.
 * @pool: the pool.
 * @st: filled in.
 *
 * Any thread (relaxed reads; a snapshot).
 */
PC_API void pc_pool_stats(const struct pc_pool *pool, struct pc_pool_stats *st);

/* Private to pool.h: counts a refused pc_pool_put(); returns @err. */
static inline int pc__pool_refuse(struct pc_pool *pool, int err)
{
	/* relaxed: single writer (the owner); other threads only sample it */
	atomic_store_explicit(&pool->bad_put,
			      atomic_load_explicit(&pool->bad_put, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	return err;
}

/**
 * pc_pool_get - take a free buffer.
 * @pool: the pool.
 *
 * Owner thread only. LIFO: the most recently returned buffer comes first
 * (it is likely still in cache).
 *
 * Return: a buffer with len 0, or NULL when the pool is empty (the pool's
 * empty counter is incremented).
 */
static inline struct pc_buf *pc_pool_get(struct pc_pool *pool)
{
	unsigned int n = atomic_load_explicit(&pool->nfree, memory_order_relaxed);
	struct pc_buf *b;

	if (pc_unlikely(n == 0)) {
		/* relaxed: single writer; other threads only sample it */
		atomic_store_explicit(&pool->empty,
				      atomic_load_explicit(&pool->empty, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		return NULL;
	}
	b = &pool->bufs[pool->stack[n - 1]];
	/* relaxed: owner-only state; other threads only sample the count */
	atomic_store_explicit(&pool->nfree, n - 1, memory_order_relaxed);
	b->state = PC_BUF_IN_USE;
	b->len = 0;
	return b;
}

/**
 * pc_pool_put - return a buffer to its pool.
 * @pool: the pool @buf came from.
 * @buf: the buffer.
 *
 * Owner thread only. The checks are always on (one range check and one
 * state byte): a refused put changes nothing in the pool and increments
 * its bad_put counter (pc_pool_stats()).
 *
 * Return: 0; -EINVAL if @buf is not one of this pool's buffers (NULL, a
 * foreign or misaligned pointer); -EALREADY if @buf is already free
 * (double put).
 */
static inline int pc_pool_put(struct pc_pool *pool, struct pc_buf *buf)
{
	uintptr_t off = (uintptr_t)buf - (uintptr_t)pool->bufs;
	unsigned int n;

	if (pc_unlikely(off >= (uintptr_t)pool->nbufs * sizeof(*buf) || off % sizeof(*buf)))
		return pc__pool_refuse(pool, -EINVAL);
	if (pc_unlikely(buf->state != PC_BUF_IN_USE))
		return pc__pool_refuse(pool, -EALREADY);
	buf->state = PC_BUF_FREE;
	n = atomic_load_explicit(&pool->nfree, memory_order_relaxed);
	pool->stack[n] = buf->index;
	/* relaxed: owner-only state; other threads only sample the count */
	atomic_store_explicit(&pool->nfree, n + 1, memory_order_relaxed);
	return 0;
}

/**
 * pc_pool_buf_from_addr - find the buffer that contains @addr.
 * @pool: the pool.
 * @addr: any address inside a buffer: [buf->addr, buf->addr + buf->cap).
 *
 * Any thread (reads only immutable fields). O(1): one subtraction and one
 * shift (power-of-two stride) or division. Used by the worker to resolve
 * received data back to its buffer.
 *
 * Return: the buffer, or NULL if @addr is outside the pool's buffers
 * (including the alignment padding between buffers).
 */
static inline struct pc_buf *pc_pool_buf_from_addr(const struct pc_pool *pool, const void *addr)
{
	uintptr_t off = (uintptr_t)addr - (uintptr_t)pool->base;
	size_t idx;

	if (pc_unlikely(off >= pool->span))
		return NULL;
	idx = pool->stride_shift >= 0 ? off >> pool->stride_shift : off / pool->stride;
	if (pc_unlikely(off - idx * pool->stride >= pool->bufs[idx].cap))
		return NULL;
	return &pool->bufs[idx];
}

#endif /* POLLCORE_POOL_H */
