/* SPDX-License-Identifier: MIT */
/*
 * The connection object, its table, and the control messages that move it
 * between threads. The lowest layer of workers/: it knows no worker and no
 * engine (struct pc_worker and struct pc_engine are opaque pointers here).
 *
 * Who touches what in a struct conn:
 *
 *   part                         | worker thread | control thread | app threads
 *   -----------------------------+---------------+----------------+------------
 *   hot part (queues, credits)   | read/write    | before ATTACH  | -
 *   identity, peer parameters    | read          | write before   | read
 *                                |               | ATTACH / UP    |
 *   cold part (id, table node)   | -             | read/write     | -
 *   counters (*st: a stats slot) | write relaxed | read           | read
 *   gauges (backlog, held, ...)  | write relaxed | read           | read
 *   creq                         | exchange (UP) | exchange       | create, wait
 *   refs_app, calls_made         | read          | -              | RMW
 *   (app line)                   |               |                |
 *   calls_ended                  | write         | -              | read
 *   hrefs (app line)             | RMW           | RMW            | RMW
 *
 * Control messages travel in wfcqueues (struct ctl_inbox): one per worker
 * (control -> worker) and one for the control thread (workers and app
 * threads -> control). Anything written to the conn before ctl_post() is
 * visible to whoever takes the message with ctl_next().
 */
#ifndef PC_CONN_H
#define PC_CONN_H

#include <semaphore.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <urcu-qsbr.h>
#include <urcu/rculfhash.h>
#include <urcu/wfcqueue.h>

#include <pollcore/common.h>
#include <pollcore/stats.h>

#include "mpscq.h"
#include "reqset.h"
#include "sq.h"
#include "wire.h"

struct pc_engine;
struct pc_worker;
struct conn;

/* Monotonic nanoseconds: the time base of every deadline. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The same, to a tick of the kernel's (a few ms): for the worker's
 * deadlines that close connections (keepalive, drains). The vDSO answers
 * it from the kernel's last tick without reading the clocksource, so it is
 * no system call even where the clocksource is hpet (the soft-RoCE VM),
 * and it needs no calibration, unlike the TSC (stats_ticks()).
 */
static inline uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Counters with one writer, sampled by other threads with relaxed loads:
 * the writer needs only stores that never tear. GCC emits a relaxed
 * atomic load and store as three instructions (load, add, store: it
 * fuses no atomics); on x86-64 one add to memory is enough, as an aligned
 * 4- or 8-byte access is single-copy atomic there, and without a lock
 * prefix it costs what plain arithmetic does (one writer: no RMW race).
 * ThreadSanitizer does not see inline asm, so its builds, and other
 * architectures, keep the atomics.
 */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define STAT_ADD(x, n) \
	__asm__("add%z0 %1, %0" : "+m"(x) : "er"((__typeof__(x))(n)) : "cc")
#else
#define STAT_ADD(x, n) \
	__atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#endif
#define STAT_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* --- RCU as ThreadSanitizer sees it -------------------------------------- */

/*
 * urcu-qsbr publishes and waits for readers with inline asm and futexes
 * that ThreadSanitizer cannot see. Under TSan, these name the edges RCU
 * guarantees, so no suppression has to hide a connection's lifetime:
 *  - a conn is published (table add) with a release on the conn, and
 *    every lookup that meets it acquires it (rcu_assign_pointer /
 *    rcu_dereference);
 *  - every point where a thread stops reading RCU-protected objects
 *    (quiescent state, offline, unregister) releases one token, and a
 *    call_rcu callback acquires it before freeing: the grace period.
 * Compiled out in other builds.
 */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
extern char rcu_gp_token;
static inline void tsan_publish(void *obj) { __tsan_release(obj); }
static inline void tsan_subscribe(void *obj) { __tsan_acquire(obj); }
static inline void tsan_reader_done(void) { __tsan_release(&rcu_gp_token); }
static inline void tsan_grace_period(void) { __tsan_acquire(&rcu_gp_token); }
#else
static inline void tsan_publish(void *obj) { (void)obj; }
static inline void tsan_subscribe(void *obj) { (void)obj; }
static inline void tsan_reader_done(void) {}
static inline void tsan_grace_period(void) {}
#endif

/* rcu_quiescent_state(), rcu_thread_offline(), rcu_unregister_thread(), as TSan sees them. */
static inline void qsbr_quiescent(void)
{
	tsan_reader_done();
	rcu_quiescent_state();
}

static inline void qsbr_offline(void)
{
	tsan_reader_done();
	rcu_thread_offline();
}

static inline void qsbr_unregister(void)
{
	tsan_reader_done();
	rcu_unregister_thread();
}

/* --- work-request contexts ---------------------------------------------- */

/*
 * Every wr_id is a pointer to one of these, embedded in its owner (a
 * message, an operation or a connection) and resolved with container_of.
 */
enum wr_kind {
	WR_MSG = 1,	/* struct msg: a send of its buffer (msg->ctx) */
	WR_RECV,	/* struct msg: its buffer posted on the SRQ (msg->rctx) */
	WR_OP,		/* struct op_priv inside a struct pc_op */
	WR_CREDIT,	/* conn->credit_ctx: RDMA WRITE of granted credits */
	WR_MARKER,	/* conn->marker_ctx: last WR of a closing QP */
	WR_INLINE,	/* conn->inline_ctx: an inline SEND whose buffer went back at its post */
	/* rendezvous (rndv.c): contexts embedded in a large-pool message (struct lmsg) */
	WR_RNDV_BIND,	/* bind its memory window (sender) */
	WR_RNDV_INV,	/* invalidate it after DONE (sender) */
	WR_RNDV_READ,	/* READ the peer's bytes into it (receiver) */
	WR_RNDV_DONE,	/* tell the peer its bytes were read (receiver) */
	WR_RNDV_ABORT,	/* ask the peer to leave them unread (sender; wire.h) */
};

/* What a submission through the MPSC ring asks for. */
enum wr_action {
	ACT_SEND = 1,	/* 0 stays invalid: a zeroed context is caught */
	ACT_RELEASE,
	ACT_RDMA,
	ACT_CANCEL,	/* pc_call_cancel(): the message carries the id (pub.req_id) */
	ACT_WORK,	/* pc_worker_post(): a struct pc_work, no connection */
};

struct wr_ctx {
	uint8_t kind;
	uint8_t action;
	uint8_t ref;		/* a submission holding a reference on conn (conn_ref_app()) */
	union {
		struct wr_ctx *next;	/* backlog / overflow links: the worker's */
		struct mpscq_node qnode;	/* on a worker's submission queue (mpscq.h) */
	};
	struct conn *conn;	/* connection it is posted on */
};
static_assert(sizeof(struct wr_ctx) == 24, "fits pc_work.priv and pc_op.priv");

static inline struct wr_ctx *ctx_of_qnode(struct mpscq_node *n)
{
	return pc_container_of(n, struct wr_ctx, qnode);
}

/* --- control messages ---------------------------------------------------- */

enum ctl_kind {
	CTL_ATTACH = 0,	/* control -> worker: new QP on your CQ/SRQ */
	CTL_UP,		/* control -> worker: established */
	CTL_CLOSE,	/* control -> worker: QP is in ERR (or going); drain it */
	CTL_CONNECT,	/* app -> control: create the id and connect (pc_connect) */
	CTL_CLOSE_REQ,	/* app/worker -> control: please close this connection */
	CTL_RETIRE,	/* worker -> control: drained and unheld; destroy */
	CTL_ACCEPT,	/* worker -> control: a raw conn's receives are posted; accept */
	CTL_MAX,
};

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

/* A thread's queue of control messages: many producers, one consumer. */
struct ctl_inbox {
	struct cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	void (*wake)(void *arg);	/* tells the consumer to look; any thread */
	void *wake_arg;
};

static inline void ctl_inbox_init(struct ctl_inbox *in, void (*wake)(void *arg), void *arg)
{
	cds_wfcq_init(&in->head, &in->tail);
	in->wake = wake;
	in->wake_arg = arg;
}

static inline bool ctl_inbox_empty(struct ctl_inbox *in)
{
	return cds_wfcq_empty(&in->head, &in->tail);
}

/* The next message, with everything written before its ctl_post() visible; NULL if none. */
static inline struct ctl_msg *ctl_next(struct ctl_inbox *in)
{
	/* single consumer: the inbox's owner */
	struct cds_wfcq_node *node = __cds_wfcq_dequeue_blocking(&in->head, &in->tail);
	struct ctl_msg *m;

	if (!node)
		return NULL;
	m = caa_container_of(node, struct ctl_msg, node);
	/* acquire: pairs with the release in ctl_post() */
	(void)atomic_load_explicit(&m->published, memory_order_acquire);
	return m;
}

/* --- connections ----------------------------------------------------------- */

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

/*
 * A connection's rendezvous state (workers/rndv.c); owning worker only,
 * peer_max_large set before ATTACH / at UP with the other peer parameters.
 */
struct lmsg;

struct rndv_conn {
	uint32_t peer_max_large;	/* the peer's limit (its max_msg if it has no rendezvous) */
	uint32_t tx_open;	/* descriptors sent whose window is not yet invalidated */
	/*
	 * Descriptors sent and not answered by a DONE, oldest first (the DONE
	 * deadline looks at the head); from the close on, also the blocks whose
	 * windows wait for the drain's end (LM_CLOSED).
	 */
	struct lmsg *tx_head, *tx_tail;
	uint32_t tx_wait;	/* on that list */
	uint64_t done_ns;	/* coarse_ns() of the peer's last DONE (the DONE deadline) */
	bool drained;		/* the drain ended: its QP flushed, no READ reaches the pool */
	/* pool bytes allocated to send on this conn and not back yet: under the pool's lock */
	uint64_t tx_bytes;
	uint32_t rx_open;	/* descriptors received whose DONE is not yet queued */
	uint32_t reads;		/* READs posted, not completed */
	uint32_t rd_depth;	/* the QP's max_rd_atomic; 0 until the first READ asks */
	uint64_t rx_bytes;	/* pool bytes read for this conn and not given back yet */
	/*
	 * Order (engine.h: per connection, messages come in order): a message
	 * that arrived after a descriptor not yet read and delivered waits
	 * here, in order, until it is (dp_rx_hold()). Descriptors received,
	 * and finished (delivered, or failed), counted.
	 */
	uint32_t rx_seq, rx_dlv;
	struct wr_ctx *hold_head, **hold_tail;
	/* descriptors waiting for room in the pool, in order (at most WIRE_RNDV_MAX) */
	struct wire_rndv pend[WIRE_RNDV_MAX];
	uint64_t pend_req[WIRE_RNDV_MAX];
	bool pend_abort[WIRE_RNDV_MAX];	/* the sender withdrew it (WIRE_ABORT): never read */
	uint32_t pend_head, pend_n;
	bool peer_abort;	/* the peer takes WIRE_ABORT (PC_CM_FEAT_ABORT) */
	/*
	 * READs, DONEs and LOCAL_INVs to post, in order: a queue apart from the
	 * backlog, posted before it, so that they never wait behind a large
	 * send that waits for them (both sides' sends at WIRE_RNDV_MAX, each
	 * waiting for DONEs queued behind the other's).
	 */
	struct wr_ctx *q_head, **q_tail;	/* q_tail NULL: empty */
	bool waiting;		/* on the pool's wait list */
	struct conn *wait_next;
};

struct conn {
	/*
	 * Line 0: what every message touches, sent or received (flush_conn(),
	 * add_send(), credits_avail(), dp_recv()). Line 1: the send queue and
	 * the rest of the credit state. Worker-only unless said otherwise.
	 */
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;	/* ibv_wr_* posting, when the worker uses it */
	struct wr_ctx *bl_head;	/* backlog: msgs and ops, FIFO */
	/* the peer RDMA-WRITEs its cumulative grant into [0]; [1] is our outgoing copy */
	volatile uint64_t *credit_word;
	/* credits this side may spend: peer's cumulative grant minus sends */
	uint64_t sent_credited;
	uint64_t peer_grant_seen;
	/* credits granted to the peer */
	uint64_t granted;
	uint8_t state;
	bool raw;
	bool dirty;
	bool credit_stalled;
	uint32_t peer_window;	/* credits the peer grants at most (its window) */

	struct sq sq pc_cache_aligned;
	uint64_t granted_published;
	uint64_t recv_credited;
	uint32_t grant_pending;	/* credits it still wants (below its target): look again */
	uint32_t window;
	uint32_t allow;		/* credits it has earned: min_window, +1 per credit used, <= window */
	uint32_t max_inline;

	struct pc_worker *w pc_cache_aligned;
	bool probe;		/* keepalive: write the credit word again, granted or not */
	uint8_t ka_idle;	/* keepalive scans that saw nothing arrive (keepalive.c) */
	uint8_t ka_stuck;	/* keepalive scans that saw WRs in flight and none complete */
	uint32_t ka_tail;	/* sq.tail at the last scan */
	uint64_t ka_recv;	/* msgs_recv at the last scan */
	uint32_t qpn;
	uint32_t backlog;
	uint32_t pack_room;	/* bytes the peer's receive holds when it takes packs; else 0 */
	struct conn *dirty_next;
	struct conn *gw_next;	/* on w->grant_wait (dp_credit.h) */
	bool grant_waiting;
	struct wr_ctx **bl_tail;
	struct wr_ctx *early_head, **early_tail; /* received before UP, delivered after it */
	uint64_t grant_due;	/* 0, or when (stats_ticks()) a grant no message carried goes by WRITE */
	uint32_t rq_posted;	/* raw peer: receives posted on its own queue */
	uint32_t rq_depth;	/* raw peer: its queue's depth (on_request) */
	uint32_t rq_size;	/* raw peer: bytes per receive */
	uint64_t peer_credit_addr;
	uint32_t peer_credit_rkey;
	/* rpc: the window, ids of the requests sent and not yet answered (core/reqset.h) */
	struct reqset reqs;
	uint32_t inflight_req;
	/* requests waiting for a place in the window, in order (calls.c) */
	struct wr_ctx *cw_head, **cw_tail;
	uint32_t cw_n;
	/* calls ended (pc_call()'s max_calls counts those not ended); app threads read it */
	uint64_t calls_ended;
	/* calls with a completion (calls.c) */
	uint32_t calls_timed;	/* with a deadline, not ended */
	uint32_t unanswered;	/* ended by a deadline or a cancel, their response still due */
	struct conn *calls_next;	/* on w->call_conns while calls_timed */
	bool on_call_list;
	/* app */
	unsigned int app_slot;
	uint32_t held;
	uint32_t refs_w;	/* lifetime: the worker's share of the references (refs_app) */
	void *user;
	struct wr_ctx credit_ctx;
	struct wr_ctx marker_ctx;
	struct wr_ctx inline_ctx;
	/*
	 * Counters (CONN_COUNTERS): in the worker's slot of the stats segment
	 * while attached, so other processes read them live; in st_local
	 * before and after, or when there is no slot. Written by the worker
	 * (relaxed); st changes on the worker only, published with release.
	 */
	struct pc_stats_conn *st;

	/* drain (coarse_ns()) */
	uint64_t drain_deadline_ns;
	uint64_t grace_end_ns;	/* 0 until the grace period for LAST_WQE_REACHED starts */
	bool was_up;
	bool marker_done;
	atomic_bool last_wqe;	/* set by the control thread on IBV_EVENT_QP_LAST_WQE_REACHED */
	struct conn *drain_next;	/* on w->draining, then on w->retire_wait */
	bool retire_waiting;		/* on w->retire_wait (drain.c) */
	/* why it closed: pc_last_error() when DOWN is delivered, and the log (drain.c) */
	char close_why[160];

	/* cold: control thread */
	struct pc_engine *e;		/* opaque here: for the control thread and the API */
	struct rdma_cm_id *id;
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct ctl_msg ctl[CTL_MAX];	/* one per kind: each is posted at most once (ctl_post()) */
	atomic_bool close_req;		/* CTL_CLOSE_REQ posted */
	struct rdma_addrinfo *res;	/* active side: resolved by pc_connect() */
	bool passive;
	bool closing;			/* control: rdma_disconnect called, CLOSE posted */
	bool attached;			/* control: CTL_ATTACH posted */
	struct ibv_mr *credit_mr;
	uint32_t peer_max_msg;
	struct wire_cm_priv peer_priv;	/* what the peer said, applied by conn_apply_peer() */
	bool peer_raw;
	int want_worker;
	/* passive side, control thread: what rdma_accept() answers (conn_accept()) */
	uint8_t acc_initiator_depth, acc_responder_resources;
	uint8_t acc_len;
	uint8_t acc_data[PC_ACCEPT_DATA_MAX];
	/* raw peer: its connect request's private data (pc_conn_info()); set before attach */
	uint8_t peer_data_len;
	uint8_t peer_data[PC_CONNECT_DATA_MAX];
	/*
	 * Active side, until answered: the worker (UP) and the control thread
	 * (failure, deadline) race to answer; whoever exchanges it to NULL
	 * first does (conn_connect_take()).
	 */
	struct connect_req *_Atomic creq;
	uint64_t connect_deadline_ns;	/* control: pc_connect()'s timeout */
	uint32_t connect_timeout_ms;
	struct conn *connecting_next;	/* control: e->connecting list */
	int close_err;			/* worker (drain.c); control reads it after RETIRE */
	/*
	 * Why it closes, for DOWN (close_why): written by the control thread
	 * before it posts CTL_CLOSE (ctl_*), and by whoever wins close_req
	 * before it posts CTL_CLOSE_REQ (req_*). Static strings.
	 */
	int ctl_err, req_err;
	const char *ctl_why, *req_why;

	/*
	 * Written by application threads; own cache line, so their RMWs never
	 * take the worker's lines away from it.
	 *
	 * Lifetime (engine.h): every send buffer bound to this conn and every
	 * ring entry naming it holds a reference, and the worker retires the
	 * conn only once DOWN was delivered and none is left. refs_app + refs_w
	 * (mod 2^32) is the number outstanding: app threads add one per buffer
	 * they bind (pc_msg_alloc) or entry they submit (relaxed RMW, published
	 * to the worker by the ring's release/acquire); the worker adds its own
	 * binds and subtracts every reference given back, plainly.
	 */
	atomic_uint refs_app pc_cache_aligned;
	/*
	 * References to the memory (conn_hold()): the engine's own, dropped
	 * after the RCU grace period that follows the retire; one per control
	 * message in flight; one per handle the application owns (pc_connect(),
	 * pc_conn_get()). The last conn_drop() frees it. refs_app and refs_w
	 * keep it from retiring; this keeps it from being freed.
	 */
	atomic_uint hrefs;
	/* pc_call(): calls accepted (max_calls counts those not ended) */
	uint64_t calls_made;

	/* before the worker gives it a slot, after it gives the slot back, or without one */
	struct pc_stats_conn st_local pc_cache_aligned;
	/* rendezvous: worker only (rndv.c) */
	struct rndv_conn rv;
	/* the peer's numeric address and port; control, before ATTACH */
	char peer[sizeof(((struct pc_stats_conn *)0)->peer)];
	uint16_t peer_port;
	/* pc_conn_info() after the engine (and its devices) may be gone; control, before ATTACH */
	char devname[64];
	int widx;
};
static_assert(offsetof(struct conn, refs_app) % PC_CACHELINE == 0,
	      "app-written fields start their own cache line");
static_assert(offsetof(struct conn, sq) == PC_CACHELINE,
	      "the per-message fields fill exactly the first cache line");
static_assert(offsetof(struct conn, w) == 2 * PC_CACHELINE,
	      "the send queue and credit state fill the second");

/*
 * What pc_conn_info() samples, named as there: counters from c->st, and
 * gauges, which the worker's logic reads too, from the conn (mirrored into
 * c->st with CONN_GAUGE_SET for other processes).
 */
#define CONN_COUNTERS(X) \
	X(msgs_sent) X(msgs_recv) X(bytes_sent) X(bytes_recv) X(credit_stalls) X(sq_stalls) \
	X(msgs_dropped) X(rnr_errors) X(retry_errors) X(call_timeouts) X(call_cancels) \
	X(late_responses)
#define CONN_GAUGES(X) X(backlog) X(inflight_req) X(held)

/* @c's gauge @f changed: one relaxed store into its stats slot. Owning worker. */
#define CONN_GAUGE_SET(c, f) __atomic_store_n(&(c)->st->f, (c)->f, __ATOMIC_RELAXED)

/*
 * c->state is written by the owning worker (by control once the workers
 * stopped) and read by pc_engine_for_each_conn() walkers: relaxed atomics,
 * which cost nothing on the worker's own plain reads.
 */
static inline void conn_set_state(struct conn *c, enum conn_state s)
{
	static const uint8_t slot_state[] = {
		[CONN_ATTACHING] = PC_STATS_CONN_ATTACHED, [CONN_ATTACHED] = PC_STATS_CONN_ATTACHED,
		[CONN_UP] = PC_STATS_CONN_UP, [CONN_DRAINING] = PC_STATS_CONN_DRAINING,
		[CONN_DRAINED] = PC_STATS_CONN_DOWN, [CONN_RETIRED] = PC_STATS_CONN_DOWN,
	};

	__atomic_store_n(&c->state, (uint8_t)s, __ATOMIC_RELAXED);
	__atomic_store_n(&c->st->state, slot_state[s], __ATOMIC_RELAXED);
}

/*
 * An application thread takes a reference that keeps @c from retiring (a
 * buffer bound to it, a ring entry naming it), unless it is closing:
 * false then, and nothing taken. The caller owns a handle or a message of
 * @c, so its memory is there; whether it may still retire is what this
 * settles, against drain_maybe_retire(): either the worker sees our
 * reference, or we see its state (store-buffering, hence seq_cst on both
 * sides; a locked RMW on x86, as a relaxed one was).
 */
static inline bool conn_ref_app(struct conn *c)
{
	/* seq_cst: pairs with the fence in drain_maybe_retire() */
	atomic_fetch_add_explicit(&c->refs_app, 1, memory_order_seq_cst);
	if (pc_likely(__atomic_load_n(&c->state, __ATOMIC_SEQ_CST) < CONN_DRAINING))
		return true;
	atomic_fetch_sub_explicit(&c->refs_app, 1, memory_order_relaxed);
	return false;
}

/*
 * Undoes conn_ref_app() on the same thread (the submission did not
 * happen). A worker that saw the reference after DOWN looks again on a
 * housekeeping turn (w->retire_wait), so nothing else is needed here.
 */
static inline void conn_unref_app(struct conn *c)
{
	atomic_fetch_sub_explicit(&c->refs_app, 1, memory_order_relaxed);
}

/* References outstanding; the owning worker only. */
static inline uint32_t conn_refs(const struct conn *c)
{
	/* relaxed: every reference came with a ring entry or call that happened before */
	return atomic_load_explicit(&c->refs_app, memory_order_relaxed) + c->refs_w;
}

/* Another reference to @c's memory; the caller holds one, or reads it under RCU. */
static inline void conn_hold(struct conn *c)
{
	/* relaxed: whoever passes the reference on publishes it */
	atomic_fetch_add_explicit(&c->hrefs, 1, memory_order_relaxed);
}

/* conn.c */
struct conn *conn_alloc(void);
void ctl_post(struct ctl_inbox *in, struct conn *c, enum ctl_kind kind);
bool conn_request_close(struct conn *c, struct ctl_inbox *control, int err, const char *why);
struct conn *conn_lookup(struct cds_lfht *table, uint32_t qpn);
void conn_table_add(struct cds_lfht *table, struct conn *c);
void conn_table_del(struct cds_lfht *table, struct conn *c);
struct conn *conn_of_node(struct cds_lfht_node *node);
void conn_apply_peer(struct conn *c, bool pack);
struct connect_req *conn_connect_take(struct conn *c);
void conn_connect_answer(struct connect_req *r, int err);
void conn_connect_done(struct conn *c, int err);
void conn_drop(struct conn *c);
void conn_free_rcu(struct conn *c);

#endif /* PC_CONN_H */
