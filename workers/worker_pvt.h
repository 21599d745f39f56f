/* SPDX-License-Identifier: MIT */
/*
 * Worker internals: the worker, its connections and messages, and the
 * messages exchanged with the control thread.
 *
 * Who touches what:
 *
 *   object / field               | worker thread | control thread | app threads
 *   -----------------------------+---------------+----------------+------------
 *   CQ, SRQ, pools, QPs' queues  | post/poll     | create/destroy | -
 *   struct conn (hot part)       | read/write    | before ATTACH  | -
 *   conn identity, peer params   | read          | write before   | read
 *                                |               | ATTACH / UP    |
 *   w->ctl (wfcqueue)            | dequeue       | enqueue        | -
 *   w->submit (MPSC ring)        | dequeue       | -              | enqueue
 *   chan->to_app (SPSC ring)     | enqueue       | -              | dequeue (1)
 *   chan->txfree (SPSC ring)     | enqueue       | -              | dequeue (1)
 *   stats                        | write relaxed | read           | read
 *
 *   (1) the one application thread attached to that slot.
 *
 * The wfcqueue and the rings carry the happens-before edges: anything
 * written before an enqueue is visible after the matching dequeue.
 */
#ifndef PC_WORKER_PVT_H
#define PC_WORKER_PVT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <urcu-qsbr.h>
#include <urcu/rculfhash.h>
#include <urcu/wfcqueue.h>

#include <pollcore/engine.h>
#include <pollcore/numa.h>
#include <pollcore/pool.h>
#include <pollcore/ring.h>
#include <pollcore/verbs.h>

#include "sq.h"
#include "wire.h"

/* --- work-request contexts ---------------------------------------------- */

/*
 * Every wr_id is a pointer to one of these, embedded in its owner (a
 * message, an operation or a connection) and resolved with container_of.
 */
enum wr_kind {
	WR_MSG = 1,	/* struct msg: a receive, or a send of its buffer */
	WR_OP,		/* struct op_priv inside a struct pc_op */
	WR_CREDIT,	/* conn->credit_ctx: RDMA WRITE of granted credits */
	WR_MARKER,	/* conn->marker_ctx: last WR of a closing QP */
};

/* What a submission through the MPSC ring asks for. */
enum wr_action {
	ACT_NONE = 0,
	ACT_SEND,
	ACT_RELEASE,
	ACT_RDMA,
};

struct wr_ctx {
	uint8_t kind;
	uint8_t action;
	struct wr_ctx *next;	/* backlog / overflow links */
	struct conn *conn;	/* connection it is posted on */
};

/* the wire's message types are the public ones */
static_assert((int)PC_MSG_ONEWAY == WIRE_ONEWAY && (int)PC_MSG_REQUEST == WIRE_REQUEST &&
	      (int)PC_MSG_RESPONSE == WIRE_RESPONSE, "enum pc_msg_type mirrors enum wire_type");

/* --- messages -------------------------------------------------------------- */

enum msg_pool { POOL_RX = 0, POOL_TX };

struct msg {
	struct pc_msg pub;
	struct wr_ctx ctx;
	struct pc_buf *buf;
	struct conn *origin;	/* rx: connection it arrived on (credit owner) */
	struct pc_worker *w;	/* owner of the buffer */
	uint8_t pool;		/* enum msg_pool */
	uint8_t in_sq;		/* posted on a send queue */
	uint8_t in_srq;		/* posted on the SRQ */
};

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

/* --- connections ----------------------------------------------------------- */

/* Control <-> worker messages. */
enum ctl_kind {
	CTL_ATTACH = 0,	/* control -> worker: new QP on your CQ/SRQ */
	CTL_UP,		/* control -> worker: established */
	CTL_CLOSE,	/* control -> worker: QP is in ERR (or going); drain it */
	CTL_CONNECT,	/* app -> control: create the id and connect (pc_connect) */
	CTL_CLOSE_REQ,	/* app/worker -> control: please close this connection */
	CTL_RETIRE,	/* worker -> control: drained and unheld; destroy */
	CTL_MAX,
};

struct conn;
struct ctl_msg {
	struct cds_wfcq_node node;
	uint8_t kind;
	struct conn *conn;
	/*
	 * Release/acquire around the wfcqueue: liburcu's own barriers are
	 * inline asm that ThreadSanitizer cannot see; this makes the edge
	 * explicit (control path only, never per message).
	 */
	atomic_uint published;
};

/* Publishes @m's connection state before the wfcqueue enqueue. */
static inline void ctl_msg_publish(struct ctl_msg *m)
{
	/* release: pairs with the acquire in ctl_msg_take() */
	atomic_store_explicit(&m->published, 1, memory_order_release);
}

/* The dequeued message, with everything written before its publish visible. */
static inline struct ctl_msg *ctl_msg_take(struct cds_wfcq_node *node)
{
	struct ctl_msg *m = caa_container_of(node, struct ctl_msg, node);

	/* acquire: pairs with the release in ctl_msg_publish() */
	(void)atomic_load_explicit(&m->published, memory_order_acquire);
	return m;
}

/* A pc_connect() waiting for its connection. */
struct connect_req {
	sem_t done;
	int err;
	char why[256];
};

enum conn_state {
	CONN_ATTACHING = 0,	/* created by control, not yet seen by the worker */
	CONN_ATTACHED,		/* worker knows it; receives work; not established */
	CONN_UP,		/* established: sends allowed */
	CONN_DRAINING,		/* QP in ERR, waiting for the marker and LAST_WQE */
	CONN_DRAINED,		/* DOWN delivered; waiting for held buffers */
	CONN_RETIRED,		/* handed back to control for destruction */
};

struct conn {
	/* worker-hot */
	struct pc_worker *w;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;	/* ibv_wr_* posting, when the worker uses it */
	uint32_t qpn;
	uint8_t state;
	bool raw;
	bool dirty;
	bool credit_stalled;
	struct conn *dirty_next;
	struct wr_ctx *bl_head, **bl_tail;	/* backlog: msgs and ops, FIFO */
	uint32_t backlog;
	struct sq sq;
	/* credits this side may spend: peer's cumulative grant minus sends */
	uint64_t sent_credited;
	uint64_t peer_grant_seen;
	/* credits granted to the peer */
	uint64_t granted;
	uint64_t granted_published;
	uint64_t recv_credited;
	uint32_t grant_pending;
	uint32_t window;
	uint64_t peer_credit_addr;
	uint32_t peer_credit_rkey;
	uint32_t max_inline;
	/* rpc */
	uint64_t next_req_id;
	uint32_t inflight_req;
	/* app */
	unsigned int app_slot;
	uint32_t held;
	void *user;
	struct wr_ctx credit_ctx;
	struct wr_ctx marker_ctx;
	/* stats: written by the worker, sampled by others */
	uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv, credit_stalls, sq_stalls;

	/* drain */
	uint64_t drain_deadline_ns;
	uint64_t grace_start_ns;
	bool was_up;
	bool marker_posted;
	bool marker_done;
	atomic_bool last_wqe;	/* set by the control thread on IBV_EVENT_QP_LAST_WQE_REACHED */
	struct conn *drain_next;

	/* cold: control thread */
	struct pc_engine *e;
	struct rdma_cm_id *id;
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct ctl_msg ctl[CTL_MAX];	/* one node per kind: each is posted at most once */
	atomic_bool close_req;		/* CTL_CLOSE_REQ posted */
	struct rdma_addrinfo *res;	/* active side: resolved by pc_connect() */
	bool passive;
	bool closing;			/* control: rdma_disconnect called, CLOSE posted */
	bool attached;			/* control: CTL_ATTACH posted */
	struct ibv_mr *credit_mr;
	/* the peer RDMA-WRITEs its cumulative grant into [0]; [1] is our outgoing copy */
	volatile uint64_t *credit_word;
	uint32_t peer_max_msg;
	uint32_t peer_window;	/* credits the peer grants at most (its window) */
	struct wire_cm_priv peer_priv;	/* what the peer said, applied by conn_apply_peer() */
	bool peer_raw;
	int want_worker;
	/*
	 * Active side, until answered: the worker (UP) and the control thread
	 * (failure, deadline) race to answer; whoever exchanges it to NULL
	 * first does (engine_connect_done()).
	 */
	struct connect_req *_Atomic creq;
	uint64_t connect_deadline_ns;	/* control: pc_connect()'s timeout */
	uint32_t connect_timeout_ms;
	struct conn *connecting_next;	/* control: e->connecting list */
	int close_err;
};

/*
 * c->state is written by the owning worker (by control once the workers
 * stopped) and read by pc_engine_for_each_conn() walkers: relaxed atomics,
 * which cost nothing on the worker's own plain reads.
 */
static inline void conn_set_state(struct conn *c, enum conn_state s)
{
	__atomic_store_n(&c->state, (uint8_t)s, __ATOMIC_RELAXED);
}

/* --- workers --------------------------------------------------------------- */

/* One application slot's rings on one worker. */
struct chan {
	struct pc_ring_spsc *to_app;	/* ring mode: received messages */
	struct pc_ring_spsc *txfree;	/* send buffers ready for the app */
	struct wr_ctx *ovf_head, **ovf_tail;	/* to_app was full: held here, in order */
	uint32_t ovf;
	uint32_t tx_share;	/* send buffers kept in txfree */
};

struct pc_worker {
	/* hot: worker thread */
	struct pc_engine *e;
	unsigned int idx;
	struct pc_dev *dev;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct pc_pool *rx, *tx;
	struct msg *rx_msgs, *tx_msgs;
	uint32_t srq_outstanding;
	uint32_t credits_out;	/* sum over conns of credits the peers may still use */
	struct conn *dirty;
	struct conn *draining;
	struct conn *cache[256];	/* qpn -> conn, direct-mapped, worker-owned */
	struct wr_chain chain;
	struct ibv_recv_wr *rwr;
	struct ibv_sge *rsge;
	struct ibv_wc *wc;
	struct chan *chans;
	unsigned int nchans;
	unsigned int next_slot;
	uint32_t empty_turns;
	uint32_t cq_unacked;
	bool wr_ex;		/* post with ibv_wr_* (ibv_qp_ex) */
	bool hybrid;		/* PC_IDLE_HYBRID: submitters may have to wake us */

	/* submissions: app threads -> worker */
	struct pc_ring_mpsc *submit;

	/* control -> worker */
	struct cds_wfcq_head ctl_head;
	struct cds_wfcq_tail ctl_tail;

	/* wakeups (hybrid idle) */
	int efd;
	struct ibv_comp_channel *ch;

	/* written by other threads: away from the worker's hot line */
	atomic_int sleeping pc_cache_aligned;
	atomic_int srq_limit;	/* set by the control thread on SRQ_LIMIT_REACHED */
	atomic_int stop;
	atomic_uint nconns;	/* attached, not retired: least-loaded choice */

	/* setup */
	pthread_t thread;
	const struct pc_plan_entry *place;
	int setup_err;
	char name[16];
	atomic_int ready;

	/* written by the worker, sampled by anyone */
	struct pc_worker_stats st pc_cache_aligned;
} __attribute__((aligned(PC_CACHELINE)));

static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
	      "worker flags and counters need lock-free atomics");
static_assert(offsetof(struct pc_worker, sleeping) % PC_CACHELINE == 0,
	      "cross-thread flags start their own cache line");

/* Relaxed counters: one writer (the worker), sampled by anyone. */
#define STAT_ADD(w, f, n) \
	__atomic_store_n(&(w)->st.f, __atomic_load_n(&(w)->st.f, __ATOMIC_RELAXED) + (n), \
			 __ATOMIC_RELAXED)
#define CSTAT_ADD(c, f, n) \
	__atomic_store_n(&(c)->f, __atomic_load_n(&(c)->f, __ATOMIC_RELAXED) + (n), \
			 __ATOMIC_RELAXED)

/* The worker running on this thread, if any (for pc_send() routing). */
extern __thread struct pc_worker *pc__self_worker;

/* engine.c / cm.c */
const struct pc_engine_params *engine_params(const struct pc_engine *e);
const struct pc_topo *engine_topo(const struct pc_engine *e);
void engine_ctl_post(struct conn *c, enum ctl_kind kind);
struct conn *engine_conn_lookup(struct pc_engine *e, uint32_t qpn);
struct connect_req *engine_connect_take(struct conn *c);
void engine_connect_answer(struct connect_req *r, int err);
void engine_connect_done(struct conn *c, int err);
void engine_request_close(struct conn *c);
void conn_apply_peer(struct conn *c);

/* worker.c */
int worker_start(struct pc_engine *e, struct pc_worker *w, unsigned int idx, struct pc_dev *dev,
		 const struct pc_plan_entry *place);
void worker_stop(struct pc_worker *w);
void worker_destroy(struct pc_worker *w);
void worker_ctl_post(struct conn *c, enum ctl_kind kind);
void worker_wake(struct pc_worker *w);

/* qp.c */
int worker_create_cq(struct pc_worker *w, int cqe);
int worker_create_qp(struct pc_worker *w, struct conn *c, struct rdma_cm_id *id);
bool worker_wants_wr_ex(const struct pc_worker *w);
struct chan *worker_chan(struct pc_worker *w, unsigned int slot);

unsigned int worker_apply_ctl(struct pc_worker *w);

/* datapath.c (worker thread, except msg_bind: whoever owns the message) */
void dp_handle_wc(struct pc_worker *w, struct ibv_wc *wc);
void dp_sq_complete(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, int err);
void dp_flush(struct pc_worker *w);
int dp_post(struct pc_worker *w, struct conn *c, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
void dp_refill_srq(struct pc_worker *w, bool arm);
void dp_submit(struct pc_worker *w, struct wr_ctx *ctx);
void dp_deliver_overflow(struct pc_worker *w);
void dp_topup_txfree(struct pc_worker *w);
void dp_msg_release(struct pc_worker *w, struct msg *m);
int dp_send(struct pc_worker *w, struct msg *m);
int dp_rdma(struct pc_worker *w, struct pc_op *op);
struct msg *dp_tx_alloc(struct pc_worker *w);
void dp_mark_dirty(struct pc_worker *w, struct conn *c);
struct conn *dp_conn_of_qpn(struct pc_worker *w, uint32_t qpn);
void msg_bind(struct msg *m, struct conn *c);

/* drain.c (worker thread) */
void drain_begin(struct pc_worker *w, struct conn *c);
void drain_poll(struct pc_worker *w);
void drain_fail(struct pc_worker *w, struct conn *c, int err);
void drain_maybe_retire(struct pc_worker *w, struct conn *c);

uint64_t pc__now_ns(void);

#endif /* PC_WORKER_PVT_H */
