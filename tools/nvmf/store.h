/* SPDX-License-Identifier: MIT */
/*
 * tools/nvmf/store.h - pollcore-nvmf's storage pieces: the backends
 * (backend_ram.c: a NUMA-local RAM disk; backend_uring.c: a file or block
 * device through io_uring, reaped by a poller on the worker), NUMA-placed
 * memory, and a per-worker pool of registered staging
 * buffers with a FIFO of commands waiting for one (store.c).
 *
 * A backend operation is a struct blk_bio: the caller fills it, submits it
 * on a worker, and its done() runs on that worker, at once or later from
 * the backend's poller, exactly once.
 */
#ifndef BLK_STORE_H
#define BLK_STORE_H

#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pc_topo;

enum blk_bio_op {
	BLK_BIO_READ = 1, /* @len bytes at @off into @buf */
	BLK_BIO_WRITE,	  /* @len bytes from @buf to @off */
	BLK_BIO_FLUSH,	  /* every acknowledged write durable */
	BLK_BIO_ZEROES,	  /* @len bytes at @off read back as zeroes */
	BLK_BIO_DISCARD,  /* deallocate @len bytes at @off; they read back as zeroes */
};

#define BLK_BIO_FUA (1u << 0) /* WRITE, ZEROES, DISCARD: durable before done() */

/**
 * struct blk_bio - one backend operation; embed it in the command.
 * @op: enum blk_bio_op.
 * @flags: BLK_BIO_*.
 * @buf: READ, WRITE: the data (a staging buffer: page aligned, which
 *       O_DIRECT needs).
 * @off: byte offset, a multiple of the block size.
 * @len: bytes, a multiple of the block size; within the backend's size.
 * @done: the outcome, 0 or a negative errno; on the submitting worker.
 * @pos: the backend's: progress of an operation done in steps.
 * @step: the backend's: how ZEROES and DISCARD are being done.
 */
struct blk_bio {
	uint8_t op;
	uint8_t flags;
	uint8_t step;
	void *buf;
	uint64_t off;
	uint64_t len;
	void (*done)(struct blk_bio *bio, int res);
	uint64_t pos;
};

/**
 * struct blk_backend - where the blocks live.
 * @name: "ram" or "uring".
 * @prog: the program's name, for messages.
 * @desc: what it opened, for the start-up line.
 * @size: bytes (a whole number of blocks).
 * @bs: block size.
 * @wq_init: set up worker @idx's state (main thread, before traffic): a
 *           backend with completions to reap adds its poller to @pw.
 * @wq_fini: undo wq_init (main thread, after pc_engine_destroy()).
 * @submit: start @bio on the worker whose state @wq is.
 * @close: release everything (main thread, last); a file is synced first.
 * @mem: the RAM disk's bytes (@size of them), NULL for other backends: a
 *       caller may read them in place, on a worker, instead of a READ (e.g.
 *       an RDMA WRITE from them once registered, blk_mreg), as the backend
 *       does nothing else to them than the memcpy of its operations.
 * @priv: the backend's own.
 */
struct blk_backend {
	const char *name;
	const char *prog;
	char desc[256];
	uint64_t size;
	uint32_t bs;
	int (*wq_init)(struct blk_backend *b, struct pc_worker *pw, unsigned int idx, void **wq);
	void (*wq_fini)(struct blk_backend *b, void *wq);
	void (*submit)(struct blk_backend *b, void *wq, struct blk_bio *bio);
	void (*close)(struct blk_backend *b);
	uint8_t *mem;
	void *priv;
};

/**
 * blk_ram_open - a RAM disk of @size bytes, on NUMA node @node.
 * @b: filled.
 * @prog: the program's name, for messages.
 * @size: bytes, a multiple of @bs.
 * @bs: block size.
 * @node: NUMA os index of the workers, or -1.
 *
 * Main thread. The memory is placed (touched) before return.
 *
 * Return: 0 or a negative errno, with a message on stderr.
 */
int blk_ram_open(struct blk_backend *b, const char *prog, uint64_t size, uint32_t bs, int node);

/**
 * blk_uring_open - a file or block device, served through io_uring.
 * @b: filled.
 * @prog: the program's name, for messages.
 * @path: regular file or block device; must exist.
 * @bs: block size; the size used is rounded down to it.
 *
 * Opens with O_DIRECT; where the file system refuses it (EINVAL, at open
 * or at the first read) says so and uses the page cache. Main thread.
 *
 * Return: 0 or a negative errno (-ENOTSUP when built without liburing),
 * with a message on stderr.
 */
int blk_uring_open(struct blk_backend *b, const char *prog, const char *path, uint32_t bs);

/**
 * blk_mem_topo - where blk_mem_alloc() places memory from now on.
 * @topo: an open topology, or NULL (first touch by the main thread).
 *
 * Main thread, at start.
 */
void blk_mem_topo(struct pc_topo *topo);

/**
 * blk_mem_alloc - page-aligned, zeroed memory, placed on a NUMA node.
 * @len: bytes.
 * @node: NUMA os index, or -1 for any.
 *
 * Main thread, at start.
 *
 * Return: the memory, or NULL.
 */
void *blk_mem_alloc(size_t len, int node);

/**
 * blk_mem_free - free what blk_mem_alloc() gave.
 * @p: the memory, or NULL.
 * @len: its size.
 */
void blk_mem_free(void *p, size_t len);

/* ---- memory registered while connections use it ------------------------- */

/**
 * struct blk_mreg - memory registered on a device while it has connections
 * that use it (one worker's). Set @mem, @len and @access; the rest is
 * blk_mreg_attach()'s.
 */
struct blk_mreg {
	void *mem;
	size_t len;
	int access;		/* IBV_ACCESS_* */
	void *mr;
	uint32_t lkey;
	uint32_t users;		/* connections that may use it */
};

/**
 * blk_mreg_attach - a connection that will use @r is UP: register it on the
 * connection's device if this is the first one.
 * @r: the registration.
 * @conn: the connection.
 *
 * Its worker, in on_conn(UP). One ibv_reg_mr() per idle-to-busy transition,
 * never on the I/O path.
 * Return: 0, or a negative errno (pc_last_error() says why).
 */
int blk_mreg_attach(struct blk_mreg *r, struct pc_conn *conn);

/**
 * blk_mreg_detach - a connection that used @r is DOWN (drained: no transfer
 * of it is on a QP any more); the last one deregisters.
 * @r: the registration.
 *
 * Its worker, in on_conn(DOWN), only after a successful attach.
 */
void blk_mreg_detach(struct blk_mreg *r);

/* ---- staging buffers ----------------------------------------------------- */

/**
 * struct blk_stage_waiter - a command waiting for a staging buffer; embed it.
 * @ready: it has one now (@buf, index @idx); on the pool's worker.
 * @next: the FIFO's.
 */
struct blk_stage_waiter {
	void (*ready)(struct blk_stage_waiter *w, uint8_t *buf, uint32_t idx);
	struct blk_stage_waiter *next;
};

/**
 * struct blk_stage - one worker's staging buffers: @n of @buf_size bytes,
 * registered (local write) on the device while it has connections. Touched
 * only by its worker once traffic runs.
 */
struct blk_stage {
	uint8_t *mem;
	size_t len;
	uint32_t buf_size;
	uint32_t n;
	uint32_t *free;		/* stack of free indexes */
	uint32_t nfree;
	struct blk_mreg reg;	/* the buffers, local write: reg.lkey */
	struct blk_stage_waiter *wait_head, *wait_tail;
	uint32_t nwaiting;
	bool running;		/* blk_stage_put() is handing buffers out */
	uint64_t waits;		/* commands that had to wait */
	uint64_t max_waiting;	/* the longest the FIFO was */
};

/**
 * blk_stage_init - allocate @n buffers of @buf_size bytes on @node.
 * @s: the pool (zeroed).
 * @n: buffers.
 * @buf_size: bytes each, a multiple of 4096.
 * @node: NUMA os index, or -1.
 *
 * Main thread, before traffic.
 * Return: 0 or -ENOMEM.
 */
int blk_stage_init(struct blk_stage *s, uint32_t n, uint32_t buf_size, int node);

/**
 * blk_stage_fini - free the pool (its registration must be gone).
 * @s: the pool.
 *
 * Main thread, after pc_engine_destroy().
 */
void blk_stage_fini(struct blk_stage *s);

/**
 * blk_stage_attach - a connection that will use the pool is UP: register
 * the buffers on its device if this is the first one.
 * @s: the pool.
 * @conn: the connection.
 *
 * The pool's worker, in on_conn(UP). One ibv_reg_mr() per idle-to-busy
 * transition, never on the I/O path.
 * Return: 0, or a negative errno (pc_last_error() says why).
 */
int blk_stage_attach(struct blk_stage *s, struct pc_conn *conn);

/**
 * blk_stage_detach - a connection that used the pool is DOWN (drained: no
 * transfer of it is on a QP any more); the last one deregisters.
 * @s: the pool.
 *
 * The pool's worker, in on_conn(DOWN), only after a successful attach.
 */
void blk_stage_detach(struct blk_stage *s);

/**
 * blk_stage_get - a buffer now, or a place in the FIFO.
 * @s: the pool.
 * @w: the waiter: its ready() runs later when none is free now (or others
 *     wait already: first come, first served).
 * @buf: the buffer, when one is free.
 * @idx: its index.
 *
 * The pool's worker.
 * Return: true with @buf and @idx, or false: @w waits.
 */
bool blk_stage_get(struct blk_stage *s, struct blk_stage_waiter *w, uint8_t **buf, uint32_t *idx);

/**
 * blk_stage_put - give buffer @idx back; waiters get buffers (their ready()
 * runs from here, unless a put further up the stack is handing out already).
 * @s: the pool.
 * @idx: from blk_stage_get() or ready().
 *
 * The pool's worker.
 */
void blk_stage_put(struct blk_stage *s, uint32_t idx);

#endif /* BLK_STORE_H */
