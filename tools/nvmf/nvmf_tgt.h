/* SPDX-License-Identifier: MIT */
/*
 * tools/nvmf/nvmf_tgt.h - pollcore-nvmf: the NVMe-oF/RDMA target. The
 * protocol core (nvmf_ctrl.h) decides; this glue (nvmf_tgt.c) carries its
 * actions out on pollcore's raw connections: one rdma_cm connection is one
 * NVMe queue, owned by one worker, and every command of it runs to
 * completion on that worker (RDMA READ/WRITE through pc_rdma(), the
 * backend through store.h, the CQE sent from a pc_msg_alloc() buffer).
 * nvmf_main.c parses the options, builds the target and runs the main
 * thread (keep-alive clock, signals, the exit report).
 */
#ifndef NVMF_TGT_H
#define NVMF_TGT_H

#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "nvmf_ctrl.h"
#include "store.h"

#define PROG "pollcore-nvmf"

#define NT_MAX_NS	 8   /* namespaces: each file one's ring takes a poller per worker */
#define NT_ADMIN_DEPTH	 32  /* receives an admin queue takes at most (SQSIZE <= 31) */

struct nt_queue;
struct nt_wq;

/**
 * struct nt_stats - a worker's counters; written by its thread only, read
 * relaxed by the main thread for the exit report.
 */
struct nt_stats {
	uint64_t cmds;		/* capsules submitted to the core */
	uint64_t reads, writes;	/* backend reads and writes that succeeded */
	uint64_t bytes_read, bytes_written;
	uint64_t flushes, zeroes, discards;
	uint64_t errors;	/* completions with a non-zero status */
	uint64_t in_capsule;	/* writes whose data came in the capsule */
	uint64_t in_place;	/* reads sent from a registered RAM namespace itself */
	uint64_t xfer_errors;	/* RDMA transfers that failed */
	uint64_t io_errors;	/* backend operations that failed */
	uint64_t cqe_waits;	/* completions that waited for a send buffer */
	uint64_t cqe_lost;	/* completions not sent: their queue closed first */
	uint64_t closes;	/* queues closed by the core (CLOSE) or as dead */
	uint64_t aers;		/* asynchronous events completed */
	uint64_t queues;	/* queues served */
};

/**
 * struct nt_wq - a worker's state: its staging pool, its backends' state,
 * its queues. Touched only by its worker thread once the engine runs, but
 * @events (any thread) and the counters (read relaxed).
 */
struct nt_wq {
	struct nt_tgt *tgt;
	unsigned int idx;
	struct pc_worker *pw;
	struct blk_stage stage;
	struct blk_mreg ram[NT_MAX_NS];	/* RAM namespaces, for reads in place (.mem NULL: none) */
	bool ram_failed[NT_MAX_NS];	/* its registration failed: reads are staged */
	void *be[NT_MAX_NS];
	struct nt_queue *queues;	/* every queue of this worker, until destroyed */
	struct nt_queue *cqe_wait;	/* queues with completions waiting for a send buffer */
	uint32_t dead_gen;		/* nvmf_tgt_dead_gen() at the last look for dead controllers */
	bool reap;			/* a queue that is down has no command busy: free it */
	atomic_uint events;		/* event_notify() was called: poll the admin queues */
	struct pc_poller *poller;
	struct nt_stats st;
};

/**
 * struct nt_tgt - the target: the core's, the namespaces' backends, the
 * workers' states, and what the control thread needs.
 */
struct nt_tgt {
	struct nvmf_tgt *core;
	struct pc_engine *e;
	struct blk_backend be[NT_MAX_NS];
	uint32_t nr_ns;
	uint32_t in_capsule;
	uint32_t mdts;
	struct nt_wq *wqs;
	unsigned int nwq;
	/* on_request's answer must outlive the call: the control thread's own */
	struct nvmf_rdma_cm_rep rep;
	struct nvmf_rdma_cm_rej rej;
	atomic_uint ups, downs, rejects;
};

/**
 * nt_engine_params - the engine callbacks and buffer sizes for @t.
 * @t: the target (its core created, in_capsule set).
 * @p: filled: on_request, on_conn, on_msg, arg, msg_size.
 *
 * Main thread, before pc_engine_create().
 */
void nt_engine_params(struct nt_tgt *t, struct pc_engine_params *p);

/**
 * nt_wq_setup - worker @idx's state: staging pool, backends, poller.
 * @t: the target, its engine running, before pc_listen().
 * @idx: the worker.
 * @nstage: staging buffers (of t->mdts bytes).
 * @node: NUMA node of the memory, or -1.
 *
 * Main thread.
 * Return: 0 or a negative errno, with a message on stderr.
 */
int nt_wq_setup(struct nt_tgt *t, unsigned int idx, uint32_t nstage, int node);

/**
 * nt_wq_teardown - free worker @idx's state, and the queues left in it.
 * @t: the target, its engine destroyed.
 * @idx: the worker.
 *
 * Main thread, after pc_engine_destroy(): no worker runs any more.
 */
void nt_wq_teardown(struct nt_tgt *t, unsigned int idx);

/**
 * nt_event_notify - the core's event_notify: an event waits for an admin
 * queue; its worker's poller delivers it (nvmf_queue_poll_event()).
 * @arg: the struct nt_tgt.
 * @admin: the admin queue.
 *
 * Any thread, with the core's target lock held.
 */
void nt_event_notify(void *arg, struct nvmf_queue *admin);

/**
 * nt_print_stats - the workers' counters, one line each.
 * @t: the target.
 * @f: stream.
 *
 * Any thread (relaxed snapshots).
 */
void nt_print_stats(const struct nt_tgt *t, FILE *f);

#endif /* NVMF_TGT_H */
