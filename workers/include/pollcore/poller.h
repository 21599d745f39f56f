/* SPDX-License-Identifier: MIT */
/*
 * pollcore/poller.h - run the application's own polling on a worker.
 *
 * A storage server reaps its storage completions (an io_uring, an NVMe
 * queue) in the same loop as its CQ: no extra thread, no handoff. A poller
 * is a function a worker calls once every loop turn, between its CQ poll
 * and its posts, so what the poller submits (pc_send(), pc_rdma()) goes out
 * in the same turn's doorbell. It returns the work it did; that counts
 * towards the hybrid idle decision like completions do. A poller may give
 * a file descriptor: a worker in hybrid idle then sleeps on it too, and
 * wakes when it becomes readable (an io_uring's registered eventfd).
 *
 * Who may call what:
 *
 *   call                       | the poller's worker     | other threads, other
 *                              | (handler, poller)       | workers included
 *   ---------------------------+-------------------------+---------------------
 *   pc_worker_add_poller[_fd]  | yes                     | yes
 *   pc_worker_remove_poller    | yes (returns at once)   | yes (waits out a
 *                              |                         |  running call) (1)
 *   pc_engine_worker,          | yes                     | yes
 *   pc_conn_worker,            |                         |
 *   pc_worker_index            |                         |
 *   pc_worker_self             | yes                     | yes (NULL, or the
 *                              |                         |  caller's worker)
 *   pc_worker_post             | yes (runs next turn)    | yes (never fails for
 *                              |                         |  lack of room)
 *
 *   (1) another worker waits like any thread, stalling its own loop while
 *       it waits; when workers' pollers remove each other's pollers at the
 *       same moment, so that they would wait for each other for ever, one
 *       of them gets -EDEADLK instead (see pc_worker_remove_poller()).
 *
 * None of them takes an RCU read-side lock or needs one.
 */
#ifndef POLLCORE_POLLER_H
#define POLLCORE_POLLER_H

#include <pollcore/common.h>
#include <pollcore/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pollers per worker at most. */
#define PC_WORKER_MAX_POLLERS 16

struct pc_worker;
struct pc_poller;

/**
 * typedef pc_poller_fn - a poller.
 * @arg: what was given to pc_worker_add_poller().
 *
 * Runs on its worker thread, once per loop turn, and must not block. It
 * may send, reply, release messages and post one-sided operations (they
 * go out in the same turn), and add or remove pollers.
 *
 * Return: the work it did (0: none; the worker may then go idle), or a
 * negative errno, which is counted in the worker's poller_errors and
 * otherwise ignored: the poller stays registered.
 */
typedef int (*pc_poller_fn)(void *arg);

/**
 * struct pc_work - a function to run on a given worker; embed it in your
 * own context (pc_container_of() finds it again).
 * @fn: called once, on the worker it was posted to, inside its loop, in
 *      an RCU read-side critical section: a callback, which must not block.
 *      It may send, reply, call, release messages, post one-sided
 *      operations and post more work. @work is the caller's again once it
 *      is called.
 */
struct pc_work {
	void (*fn)(struct pc_work *work);
	/* private */
	uint64_t priv[3];
};

/**
 * pc_worker_post - run @work->fn on worker @w.
 * @w: a worker of a live engine (pc_engine_worker(), pc_conn_worker()).
 * @work: stays valid until its fn is called.
 *
 * Any thread, workers included: the work goes through @w's submission
 * queue, which is never full (each work carries its own node: no lock, no
 * allocation), wakes @w when it sleeps (hybrid idle), and runs on one of
 * its next turns, in the order posted by each thread. A worker that has
 * stopped (its engine being destroyed, its device gone) refuses the work;
 * one that stops meanwhile never runs what it had not run yet. The way to
 * hand state between workers: a server that shards its data by worker
 * posts a request to the worker that owns the shard, which answers it
 * there. pc_reply() and pc_send() work on any worker, for messages of any
 * worker: from another worker they go through the owner's queue the same
 * way.
 *
 * Return: 0; -EINVAL without @work->fn, -ESHUTDOWN when @w has stopped
 * (nothing was posted either way).
 */
PC_API int pc_worker_post(struct pc_worker *w, struct pc_work *work);

/**
 * pc_engine_worker - one of an engine's workers.
 * @e: engine.
 * @idx: index, below pc_engine_nworkers().
 *
 * Any thread.
 *
 * Return: the worker, or NULL with errno EINVAL.
 */
PC_API struct pc_worker *pc_engine_worker(struct pc_engine *e, unsigned int idx);

/**
 * pc_conn_worker - the worker that owns a connection.
 * @conn: connection, a valid handle (see pc_conn's lifetime in engine.h).
 *
 * Any thread. A server keeps per-connection state on that worker's
 * pollers, so that everything for the connection runs on one thread.
 *
 * Return: the worker.
 */
PC_API struct pc_worker *pc_conn_worker(const struct pc_conn *conn);

/**
 * pc_worker_self - the worker running on this thread.
 *
 * Any thread.
 *
 * Return: the worker when called from its thread (a handler, a poller),
 * else NULL.
 */
PC_API struct pc_worker *pc_worker_self(void);

/**
 * pc_worker_index - a worker's index in its engine.
 * @w: worker.
 *
 * Any thread.
 *
 * Return: the index, as pc_engine_stats() takes it.
 */
PC_API unsigned int pc_worker_index(const struct pc_worker *w);

/**
 * pc_worker_add_poller - call @fn on @w's thread every loop turn.
 * @w: worker.
 * @fn: the poller.
 * @arg: for @fn; must stay valid until pc_worker_remove_poller() returns.
 *
 * Any thread. The first call happens within the worker's next turn (a
 * worker in hybrid idle is woken). A poller without a file descriptor is
 * still called at least every 100 ms while its worker sleeps; give one
 * (pc_worker_add_poller_fd()) for prompt wakeups.
 *
 * Return: the poller's handle, or NULL with errno EINVAL (@w or @fn NULL),
 * ENOSPC (PC_WORKER_MAX_POLLERS on @w already) or ESHUTDOWN (the worker
 * has stopped: its engine is being destroyed or its device is gone).
 */
PC_API struct pc_poller *pc_worker_add_poller(struct pc_worker *w, pc_poller_fn fn, void *arg);

/**
 * pc_worker_add_poller_fd - a poller whose work an fd announces.
 * @w: worker.
 * @fn: the poller.
 * @arg: for @fn.
 * @fd: a descriptor that becomes readable when @fn has work (POLLIN),
 *      e.g. an eventfd registered with io_uring_register_eventfd(). The
 *      worker does not read it: @fn must consume what made it readable,
 *      or the worker will not sleep. It must stay open until the poller
 *      is removed.
 *
 * As pc_worker_add_poller(); wakeups through @fd are counted in the
 * worker's wakeups_poller.
 *
 * Return: as pc_worker_add_poller(): the poller's handle, or NULL with
 * errno EINVAL (@w or @fn NULL, or @fd below -1; -1 is no descriptor: the
 * same as pc_worker_add_poller()), ENOSPC or ESHUTDOWN.
 */
PC_API struct pc_poller *pc_worker_add_poller_fd(struct pc_worker *w, pc_poller_fn fn, void *arg,
						 int fd);

/**
 * pc_worker_remove_poller - stop calling a poller.
 * @p: its handle; invalid once this returns 0.
 *
 * Any thread. From any thread but the poller's own worker, other workers
 * included, it returns 0 once the poller is not running and will not run
 * again, so that its @arg may then be freed: it waits out a call in
 * progress (spinning with sched_yield(); a worker that waits stalls its own
 * loop meanwhile). From the worker's own thread (the poller itself, a
 * handler, another poller of it) it returns 0 at once, and the poller is
 * not called again after the current call. Pollers left when the engine
 * is destroyed are dropped with it.
 *
 * Only removals made from inside pollers can wait for each other for ever:
 * a poller on worker A removing one of worker B's while a poller on B
 * removes one of A's (or a longer ring of workers). Then one of
 * the ring's removals fails with -EDEADLK, leaving its poller registered
 * and called as before; the others complete once that call has returned.
 * The caller may try again later (from its next call).
 *
 * Return: 0; -EDEADLK as above; or -EINVAL for NULL or a handle already
 * removed (as long as no poller was added to the worker since: the slot may
 * then be reused, and the stale handle names the new poller).
 */
PC_API int pc_worker_remove_poller(struct pc_poller *p);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_POLLER_H */
