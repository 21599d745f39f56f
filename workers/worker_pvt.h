/* SPDX-License-Identifier: MIT */
/*
 * Worker internals: the worker, its messages and application channels, the
 * callbacks by which the lower layers reach the upper ones (struct
 * worker_up), and the functions of qp.c. Layer "state" with conn.h and
 * dp_credit.h (docs/architecture.md): each layer above has its own header
 * (post_pvt.h, msg_pvt.h, calls_pvt.h and rndv_pvt.h, dp_pvt.h,
 * thread_pvt.h, engine_pvt.h), each including the one below. A worker is
 * given everything it uses when it starts (struct worker_cfg) and never
 * reaches up into the engine.
 *
 * Who touches what:
 *
 *   object / field               | worker thread | control thread | app threads
 *   -----------------------------+---------------+----------------+------------
 *   CQ, SRQ, pools, QPs' queues  | post/poll     | create/destroy | -
 *   w->inbox (ctl_inbox)         | dequeue       | enqueue        | -
 *   w->submit (mpscq.h)          | pop           | -              | push
 *   chan->to_app (SPSC ring)     | enqueue       | -              | dequeue (1)
 *   chan->txfree (SPSC ring)     | enqueue       | -              | dequeue (1)
 *   stats (w->st)                | write relaxed | read           | read
 *   w->ws, its segment block     | write         | -              | - (other
 *   and conn slots               |               |                | processes:
 *                                |               |                | seqcount)
 *
 *   (1) the one application thread attached to that slot.
 *
 * The wfcqueue and the rings carry the happens-before edges: anything
 * written before an enqueue is visible after the matching dequeue.
 */
#ifndef PC_WORKER_PVT_H
#define PC_WORKER_PVT_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <pollcore/engine.h>
#include <pollcore/numa.h>
#include <pollcore/poller.h>
#include <pollcore/pool.h>
#include <pollcore/ring.h>
#include <pollcore/verbs.h>

#include "conn.h"
#include "credit.h"
#include "probe_pvt.h"
#include "stats_pvt.h"
#include "verbs_pvt.h"

/* the wire's message types are the public ones */
static_assert((int)PC_MSG_ONEWAY == WIRE_ONEWAY && (int)PC_MSG_REQUEST == WIRE_REQUEST &&
	      (int)PC_MSG_RESPONSE == WIRE_RESPONSE, "enum pc_msg_type mirrors enum wire_type");

/* --- messages -------------------------------------------------------------- */

enum msg_pool {
	POOL_RX = 0, POOL_TX, POOL_RAW,
	POOL_LARGE,	/* struct lmsg (rndv_pvt.h) */
	POOL_PACK,	/* a frame after the first of a received pack: no buffer of its own */
};

/*
 * A buffer is posted with one of two contexts, each of an immutable kind:
 * ctx for a send of it, rctx (rx and raw pools) for a receive into it. A
 * completion tells which by its wr_id alone (dp_complete()).
 */
struct msg {
	struct pc_msg pub;
	struct wr_ctx ctx;	/* WR_MSG: sends; backlog and ring links */
	struct wr_ctx rctx;	/* WR_RECV: receives (SRQ; a raw peer's RQ: rctx.conn) */
	struct pc_buf *buf;
	/*
	 * The connection this buffer keeps alive: rx, the one it arrived on
	 * (credit owner; counted in held); tx, the one pc_msg_alloc() bound it
	 * to (counted in refs). NULL when in the pool or the worker's stock.
	 */
	struct conn *origin;
	struct pc_worker *w;	/* owner of the buffer */
	uint8_t pool;		/* enum msg_pool */
	uint8_t in_srq;		/* posted on the SRQ (teardown reclaims it) */
	uint8_t in_rq;		/* posted on a raw peer's own receive queue (rctx.conn) */
	/*
	 * Packs (core/wire.h). Sent: the messages packed behind it into its
	 * SEND. Received: the frames after it in its buffer not yet given back
	 * (pack_live), and whether its own message was (pack_gone); the
	 * buffer goes back with the last of them (msg.c).
	 */
	uint8_t pack_n;
	uint8_t pack_live;
	uint8_t pack_gone;
	struct msg *pack_of;	/* POOL_PACK: the receive whose buffer holds it; NULL once given back */
	uint32_t rx_after;	/* received: rendezvous descriptors its conn had received before it */
	uint64_t t_call;	/* pc_call(): when, for the round-trip histogram */
	/*
	 * pc_call() with a completion (calls.c). On a request: the call,
	 * from pc_call() until it ends; the worker keeps the buffer until
	 * then. On a response, or a request given back: what the completion
	 * is, until it runs (pc_app_poll(), or the worker). NULL otherwise.
	 */
	pc_call_fn call_done;
	void *call_arg;
	uint64_t call_deadline;	/* stats_ticks(); 0: none */
	int32_t call_status;
	int16_t call_slot;	/* the caller's application slot; -1: the worker */
	uint8_t call_flags;	/* CALL_* (calls.c) */
	uint32_t gidx;		/* its index among the worker's messages (msg_by_gidx()) */
	/*
	 * The id of its call while pc_call_cancel() may name it, with
	 * CALL_CANCEL_BIT once one did; 0 otherwise. Any thread compares and
	 * swaps it; the worker exchanges it to 0 when the call ends (calls.c).
	 */
	_Atomic uint64_t call_live;
	struct wr_ctx cancel_ctx;	/* ACT_CANCEL: carries that cancel to the worker */
};

/*
 * A call's id: the caller's sequence (31 bits, never 0), the caller (an
 * application slot, a worker, or CALL_CALLER_ANY for any other thread) and
 * the request buffer's gidx. Unique in the engine while its call may still
 * be answered, and it names the buffer (pc_call_cancel()).
 */
#define CALL_GIDX_BITS 20u
#define CALL_CALLER_BITS 12u
#define CALL_SEQ_SHIFT 32u
#define CALL_SEQ_MASK 0x7fffffffu
#define CALL_CALLER_ANY ((1u << CALL_CALLER_BITS) - 1)
#define CALL_CANCEL_BIT (1ull << 63)

static inline uint64_t call_id_make(uint32_t seq, uint32_t caller, uint32_t gidx)
{
	return (uint64_t)(seq & CALL_SEQ_MASK) << CALL_SEQ_SHIFT |
	       (uint64_t)caller << CALL_GIDX_BITS | gidx;
}

static inline uint32_t call_id_gidx(uint64_t id)
{
	return (uint32_t)id & ((1u << CALL_GIDX_BITS) - 1);
}

static inline struct msg *msg_of(struct pc_msg *m)
{
	return pc_container_of(m, struct msg, pub);
}

struct op_priv {
	struct wr_ctx ctx;
};
static_assert(sizeof(struct op_priv) <= sizeof(((struct pc_op *)0)->priv),
	      "op_priv fits pc_op.priv");

static inline struct op_priv *op_priv(struct pc_op *op)
{
	return (struct op_priv *)(void *)op->priv;
}

static inline struct pc_op *op_of_ctx(struct wr_ctx *ctx)
{
	return pc_container_of((void *)ctx, struct pc_op, priv);
}

/* --- the application's memory (mem.c) ------------------------------------ */

/* What pc_mem_reg() and pc_engine_mem_reg() return: one registration per device. */
#define MEM_MAGIC 0x4d454d31u	/* "MEM1" */
struct mem {
	uint32_t magic;
	uint32_t n;
	void *addr;
	size_t len;
	struct {
		struct ibv_pd *pd;	/* the device's */
		struct ibv_mr *mr;
	} reg[];
};

/* The registration of @handle on protection domain @pd, or NULL. Any thread. */
static inline struct ibv_mr *mem_mr(const void *handle, const struct ibv_pd *pd)
{
	const struct mem *m = handle;
	uint32_t i;

	for (i = 0; m && m->magic == MEM_MAGIC && i < m->n; i++)
		if (m->reg[i].pd == pd)
			return m->reg[i].mr;
	return NULL;
}

/* --- workers --------------------------------------------------------------- */

/* One rx buffer's receive WR and its SGE (w->srq_wrs, by buffer index). */
struct srq_wr {
	struct ibv_recv_wr wr;
	struct ibv_sge sge;
};

/* One application slot's rings on one worker. */
struct chan {
	struct pc_ring_spsc *to_app;	/* ring mode: received messages */
	struct pc_ring_spsc *txfree;	/* send buffers ready for the app */
	struct wr_ctx *ovf_head, **ovf_tail;	/* to_app was full: held here, in order */
	uint32_t ovf;
	uint32_t tx_share;	/* send buffers kept in txfree */
};

/* A poller's slot (poller.c): FREE -> CLAIMED -> ACTIVE -> REMOVING -> FREE. */
/* DETACHED: removed from another worker's thread; the owner frees it at its next turn */
enum { POLLER_FREE = 0, POLLER_CLAIMED, POLLER_ACTIVE, POLLER_REMOVING, POLLER_DETACHED };

struct pc_poller {
	_Atomic uint32_t state;
	int fd;			/* -1: none */
	pc_poller_fn fn;
	void *arg;
	struct pc_worker *w;
};

/* What a worker is given when it starts; everything must outlive it. */
struct worker_cfg {
	unsigned int idx;
	const struct pc_engine_params *p;	/* normalised (defaults applied) */
	struct pc_dev *dev;
	const struct pc_topo *topo;		/* NULL: no placement */
	const struct pc_plan_entry *place;	/* NULL: unbound */
	struct cds_lfht *conns;			/* the connection table, for lookups */
	struct ctl_inbox *control;		/* the control thread's inbox */
	bool must_bind;				/* placement was asked for: binding must work */
	struct pc_stats_worker *stats_blk;	/* its block in the stats segment, or NULL */
	struct pc_stats_conn *stats_slots;	/* and its max_conns_per_worker conn slots */
};

struct rndv_pool;
struct pc_worker;

/*
 * What the layers of the data path below need from those above them
 * (docs/architecture.md, "Layers of workers/"), set by worker.c before the
 * worker's thread starts: posting, messages and the protocols never call
 * up by name. Each is taken on a cold path (an error, a connection that
 * ends, a large message, a cache miss), never once per message.
 */
struct worker_up {
	/* drain_fail(): @c failed with @err (pc_last_error() says why) */
	void (*fail)(struct pc_worker *w, struct conn *c, int err);
	/* drain_maybe_retire(): @c, DRAINED, may retire if nothing names it */
	void (*retire)(struct pc_worker *w, struct conn *c);
	/* dp_wr_failed(): a send WR that could not be posted retires as failed */
	void (*wr_failed)(struct pc_worker *w, struct wr_ctx *ctx, int err);
	/* worker_apply_ctl(): the control messages queued for the worker */
	unsigned int (*apply_ctl)(struct pc_worker *w);
	/* rndv_release(): a large-pool message given back */
	void (*release_large)(struct pc_worker *w, struct msg *m, struct conn *origin);
};

struct pc_worker {
	/* hot: worker thread */
	const struct pc_engine_params *p;
	unsigned int idx;
	struct pc_dev *dev;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	/*
	 * The worker's verbs objects are used by its thread alone: a thread
	 * domain tells the provider so, and it drops its locks (parent domain
	 * for the QPs and SRQ, single-threaded CQ). NULL td and pd == dev->pd
	 * where the provider has no such thing (rxe); domain says which.
	 */
	struct ibv_td *td;
	struct ibv_pd *pd;
	const char *domain;
	bool cq_single;		/* the CQ was created IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
	struct pc_pool *rx, *tx, *raw;
	struct msg *rx_msgs, *tx_msgs, *raw_msgs;
	/* packed frames' messages (POOL_PACK), WIRE_PACK_MAX - 1 per receive buffer, and their free list */
	struct msg *pack_msgs;
	struct pc_buf *pack_bufs;
	struct wr_ctx *pack_free;
	uint32_t npack;
	struct rndv_pool *rv;	/* the large-message pool; NULL: no rendezvous (rndv.c) */
	uint32_t srq_outstanding;
	uint32_t credits_out;	/* sum over conns of credits the peers may still use */
	uint32_t ncredited;	/* credited conns attached and not closing: they share srq_depth */
	uint32_t floor_deficit;	/* sum of credit_short() over them (core/credit.h) */
	uint32_t adm_pub;	/* its part of adm_taken: >= credits_out + floor_deficit (dp_credit.h) */
	uint32_t cq_conns;	/* conns attached, not drained: a drain marker's CQE each */
	uint32_t sq_wrs;	/* send WRs posted, not completed (markers excluded) */
	/* kept as the counts change (workers/dp_credit.h), read per flush */
	uint32_t share;		/* credit_target() for ncredited */
	uint32_t cq_send_cap;	/* cq_send_cap() for cq_conns */
	struct credit_limits lim;	/* set up before ready; read-only after (control reads it) */
	/*
	 * SRQ buffers committed, atomic: the worker's adm_pub plus the floors
	 * of conns the control thread admitted that it has not attached yet.
	 * Never above lim.srq_depth: each side takes with a CAS (dp_credit.h).
	 */
	uint32_t adm_taken;
	struct conn *dirty;
	/* conns whose grant waits for a message to carry it (dp_credit.h) */
	struct conn *grant_wait;
	uint64_t grant_wait_due;	/* the earliest of their deadlines, in stats_ticks() */
	uint64_t grant_clock;	/* stats_ticks() at the last look at them (grant_clock()) */
	uint64_t grant_delay;	/* p->grant_delay_us in ticks */
	struct conn *draining;
	struct conn *retire_wait;	/* DOWN, still referenced: looked at on housekeeping turns */
	struct conn *call_conns;	/* conns with calls that have a deadline (calls.c) */
	uint64_t call_due;	/* the earliest of those deadlines, stats_ticks(); 0: none */
	uint32_t call_seq;	/* the sequence of the calls this worker makes itself */
	struct conn *cache[256];	/* qpn -> conn, direct-mapped, worker-owned */
	struct wr_chain chain;
	/* each rx buffer's SRQ receive, built once: a refill only links them */
	struct srq_wr *srq_wrs;
	/* a raw peer's receive queue refill, built per post (RQ_REFILL_BATCH) */
	struct ibv_recv_wr *rwr;
	struct ibv_sge *rsge;
	struct ibv_wc *wc;
	struct chan *chans;
	unsigned int nchans;
	unsigned int ovf_chans;		/* slots with messages in overflow */
	unsigned int topup_next;	/* slot dp_topup_txfree() looks at next */
	unsigned int next_slot;
	uint32_t empty_turns;
	uint64_t idle_ticks;	/* p->idle_spin_us in stats_ticks(); 0: the count rule alone */
	uint64_t idle_spin;	/* the spin before the next sleep, idle_ticks..idle_cap (idle_pvt.h) */
	uint64_t idle_cap;	/* the adaptive spin's ceiling, in stats_ticks() */
	uint64_t idle_since;	/* stats_ticks() at the first empty turn of this run of them */
	uint32_t cq_unacked;
	uint32_t ka_turns;	/* turns since the clock was last read for keepalive */
	uint64_t ka_next_ns;	/* next keepalive scan (coarse_ns()) */
	uint32_t turns;		/* loop turns, for the work done every HOUSEKEEP_TURNS */
	uint32_t max_inline;	/* max_inline_data its QPs ask for (worker_probe_inline()) */
	bool wr_ex;		/* post with ibv_wr_* (ibv_qp_ex) */
	bool srq_rearm;		/* SRQ limit fired: re-arm it once refilled */
	bool cq_armed;		/* armed, and no event read since: the arm still stands */
	bool poll_failed;	/* ibv_poll_cq failed before: logged once */
	bool hybrid;		/* sleeps when idle: submitters may have to wake us */

	/* the layers above, for those below (struct worker_up) */
	struct worker_up up;

	/* submissions: app threads -> worker (their own nodes: never full) */
	struct mpscq submit;

	/* control -> worker */
	struct ctl_inbox inbox;

	/* wakeups (hybrid idle) */
	int efd;
	struct ibv_comp_channel *ch;

	/* written by other threads: away from the worker's hot line */
	atomic_int sleeping pc_cache_aligned;
	atomic_int srq_limit;	/* set by the control thread on SRQ_LIMIT_REACHED, taken by exchange */
	atomic_int stop;
	atomic_uint nconns;	/* attached, not retired: least-loaded choice */
	struct credit_load adm;	/* control thread only: what admission counted in, not retired */

	/* pollers: added and removed by any thread, called by the worker (poller.c) */
	atomic_uint pollers_hi pc_cache_aligned;	/* slots in use are below this */
	atomic_uint poller_seq;	/* odd while the worker calls its pollers */
	struct pc_poller pollers[PC_WORKER_MAX_POLLERS];

	/* setup, and what the worker was given */
	pthread_t thread;
	const struct pc_topo *topo;
	const struct pc_plan_entry *place;
	struct cds_lfht *conns;
	struct ctl_inbox *control;
	bool must_bind;
	bool joined;	/* worker_stop() done (engine's workers_lock) */
	bool released;	/* its device is gone: verbs objects given back (devloss.c) */
	struct pc_stats_worker *stats_blk;
	struct pc_stats_conn *stats_slots;
	int setup_err;
	char name[16];
	atomic_int ready;

	/* written by the worker, sampled by anyone */
	struct pc_worker_stats st pc_cache_aligned;

	/* the worker's only: what it publishes to the stats segment beyond st */
	struct wstats ws pc_cache_aligned;
} __attribute__((aligned(PC_CACHELINE)));

static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
	      "worker flags and counters need lock-free atomics");
static_assert(offsetof(struct pc_worker, sleeping) % PC_CACHELINE == 0,
	      "cross-thread flags start their own cache line");

/*
 * What a worker looks at every this many turns (a power of two), not every
 * turn: the control inbox and the RCU quiescent state, each a call into
 * liburcu (the quiescent state through a TLS lookup), and the application
 * slots' send-buffer rings (another thread's cache line). Done every turn,
 * the liburcu calls alone were about 6% of the perf samples of a send_64
 * run in the soft-RoCE VM. A grace period or an attach waits a few turns
 * more; a receive on a conn whose attach is still queued applies it at
 * once (dp_conn_lookup()).
 */
#define HOUSEKEEP_TURNS 8u

/* Submissions a turn takes at most, so that completions are not kept waiting behind a flood. */
#define SUBMIT_BURST 32u

/* Receives a raw peer's queue refill posts per ibv_post_recv() (w->rwr, w->rsge). */
#define RQ_REFILL_BATCH 32u

/*
 * The fields of struct pc_worker_stats the worker counts itself (relaxed,
 * sampled by pc_engine_stats()); name, pu and numa_node are set before it
 * is ready, submit_full and tx_held come from its ring and pool.
 */
#define WORKER_COUNTERS(X) \
	X(loops) X(polls) X(empty_polls) X(completions) X(wrs_posted) X(doorbells) \
	X(srq_posted) X(srq_doorbells) X(srq_limit_events) X(rx_msgs) X(tx_msgs) \
	X(handoff_full) X(credit_stalls) X(credit_writes) X(credit_piggybacks) X(sleeps) X(sleep_ns) X(wakeups_cq) \
	X(wakeups_submit) X(wakeups_poller) X(poller_work) X(poller_errors) X(wc_errors) X(stray_completions) X(poll_errors) X(msgs_dropped) \
	X(rndv_sent) X(rndv_recv) \
	X(conns) X(rx_held) X(srq_outstanding) X(credits_out) X(window) X(large_used_kib) X(large_waiting)

/*
 * The worker running on this thread, if any (for pc_send() routing), read
 * on every submission. initial-exec: a load at a fixed offset from %fs,
 * not a __tls_get_addr() call as the default model for a shared library
 * has it. Eight bytes, which glibc's static TLS surplus holds even when
 * the library is dlopen()ed.
 */
#define SELF_WORKER_TLS __thread __attribute__((tls_model("initial-exec")))
extern SELF_WORKER_TLS struct pc_worker *self_worker;

/* pc_engine_params.keepalive_ms's default; the DONE deadline's period when keepalive is off. */
#define PC_KEEPALIVE_DEFAULT_MS 2000u
/*
 * idle_spin_us's default: a hybrid worker polls 50 us with nothing to do
 * before it sleeps. A sleep and its wake-up (ibv_req_notify_cq, poll(),
 * the event read, two context switches) cost a few microseconds of CPU on
 * hardware and tens under a hypervisor; spinning about as long as a few of
 * those before sleeping bounds the CPU an idle worker spends at a small
 * multiple of what the sleep would have cost, while a request-response
 * peer on RDMA hardware, answering within a few microseconds, never finds
 * it asleep. A time, not a count of turns: a turn takes 0.1 us on one
 * machine and 10 us under emulation (docs/tuning.md).
 */
#define PC_IDLE_SPIN_US_DEFAULT 50u
/* A hybrid worker's empty turns read the clock every this many only. */
#define IDLE_CLOCK_TURNS 8u
/* grant_delay_us: why 1 ms, workers/dp_credit.h */
#define PC_GRANT_DELAY_DEFAULT_US 1000u

/* qp.c: the worker's verbs objects; a conn's stats slot */
void worker_create_domain(struct pc_worker *w);
void worker_destroy_domain(struct pc_worker *w);
int worker_create_cq(struct pc_worker *w, int cqe);
int worker_create_qp(struct pc_worker *w, struct conn *c, struct rdma_cm_id *id);
int worker_probe_inline(struct pc_worker *w);
bool worker_wants_wr_ex(const struct pc_worker *w);
void worker_stats_release(struct pc_worker *w, struct conn *c);

/*
 * Now in stats_ticks(), for the round trips: read once per completion
 * batch that has responses, and only there (w->ws.now_batch is cleared
 * after each batch). Worker thread.
 */
static inline uint64_t worker_now_batch(struct pc_worker *w)
{
	if (!w->ws.now_batch)
		w->ws.now_batch = stats_ticks();
	return w->ws.now_batch;
}

/* --- the submit side's hot path: inline, worker thread ------------------------------ */

/* @c has something to post: flushed at this turn's end (dp_flush()). */
static pc_always_inline void dp_mark_dirty(struct pc_worker *w, struct conn *c)
{
	if (c->dirty)
		return;
	c->dirty = true;
	c->dirty_next = w->dirty;
	w->dirty = c;
}

static pc_always_inline void dp_backlog_add(struct conn *c, struct wr_ctx *ctx)
{
	ctx->next = NULL;
	*c->bl_tail = ctx;
	c->bl_tail = &ctx->next;
	STAT_ADD(c->backlog, 1);
	CONN_GAUGE_SET(c, backlog);
}

static pc_always_inline bool conn_accepts(const struct conn *c)
{
	return c->state == CONN_UP || c->state == CONN_ATTACHED;
}

/* Gives back one reference on @c (engine.h's lifetime rule); owning worker. */
static inline void conn_put(struct pc_worker *w, struct conn *c)
{
	c->refs_w--;
	if (pc_unlikely(c->state == CONN_DRAINED))
		w->up.retire(w, c);
}

#endif /* PC_WORKER_PVT_H */
