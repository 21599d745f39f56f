/* SPDX-License-Identifier: MIT */
/*
 * Rendezvous: messages above msg_size (workers/rndv.c).
 *
 *   sender                                   receiver
 *   BIND_MW over exactly the bytes,          descriptor (a credited message):
 *   on this conn's QP ─┐ one doorbell        validated, its rx buffer given back;
 *   SEND descriptor ───┘ ──────────────────> a block of the large pool, or wait
 *                                            for room (in order, a fair share)
 *                        <═══ RDMA READ ════ READ (<= max_rd_atomic in flight)
 *                        <────────────────── SEND DONE (credited); deliver
 *   LOCAL_INV the window; the block goes
 *   back once also given back by the app
 *
 * A call whose request went by rendezvous and ended first (deadline,
 * cancel) gets its buffer back only once the window is invalidated, or
 * its QP flushed: the peer can no longer read it. To have that come soon,
 * the sender asks the peer to leave the descriptor unread (WIRE_ABORT,
 * wire.h), which answers DONE (-ECANCELED) at once if it had not started
 * the READ.
 *
 * Protection: the pool is registered LOCAL_WRITE | MW_BIND, never
 * REMOTE_READ. A type-2 memory window bound on the connection's own QP
 * lets that peer, and no other, read exactly the bytes of one message
 * until it is invalidated; a window whose state is unknown (its QP went to
 * ERR before the invalidate completed) is deallocated and a new one
 * allocated before its block is used again, and only once the drain of
 * that connection ended (its QP in ERR and flushed past the marker, the
 * receive side quiet: no READ of the peer's can reach the block any more).
 *
 * A peer harms only its own connection: the bytes a connection's sends may
 * hold in the pool are capped at its fair share (tx_share()), and a peer
 * that sends no DONE for 8 keepalive periods while descriptors wait, or
 * leaves one unanswered 4 times that, is closed (-ETIMEDOUT,
 * rndv_overdue()).
 *
 * Every object here is the worker's, except allocation from the pool
 * (pc_msg_alloc_size(), any thread), which takes the pool's spinlock, and
 * the application's own buffers (workers/rndv_zc.c): RNDV_ZC_SLOTS more
 * entries after the blocks, each with its window and slot, that stand for
 * a buffer registered by the application (pc_msg_wrap() to send it,
 * on_large to read into it), taken from a lock-free stack by any thread
 * and given back by the worker.
 */
#ifndef PC_RNDV_PVT_H
#define PC_RNDV_PVT_H

#include <pthread.h>

#include "blkalloc.h"
#include "calls_pvt.h"
#include "post_pvt.h"

#define RNDV_MIN_SHIFT 16u	/* 64 KiB blocks */
#define RNDV_SLOT 128u		/* per block: descriptor send [0, 64), DONE send [64, 128) */
/* A descriptor unanswered this many DONE deadlines closes its conn, DONEs for others or not. */
#define RNDV_OLDEST_LIMITS 4u
/* Application buffers (pc_msg_wrap(), on_large) a worker has in use at once, sent and received. */
#define RNDV_ZC_SLOTS 128u

enum lm_state {
	LM_IDLE = 0,	/* no rendezvous in progress */
	LM_BOUND,	/* sender: window bound, descriptor sent or queued; DONE awaited */
	LM_INV,		/* sender: DONE came; its invalidate is queued or posted */
	LM_READ,	/* receiver: READ queued or posted */
	LM_CLOSED,	/* sender: its conn closed with the window maybe valid; back after the drain */
};

/* A message of the large pool; one per 64 KiB block, used at the head of each allocated block. */
struct lmsg {
	struct msg m;		/* m.pool == POOL_LARGE, m.buf NULL */
	struct wr_ctx bind_ctx, inv_ctx, rd_ctx, done_ctx, abort_ctx;
	struct ibv_mw *mw;	/* NULL: the device refused one; the block is not used to send */
	uint32_t rkey;		/* what the last bind asked for (the provider does not update mw->rkey) */
	uint32_t gen;		/* bumped per bind: the token's high half */
	uint64_t size;		/* block bytes; 0: free */
	uint8_t state;		/* enum lm_state */
	bool free_pending;	/* given back while a rendezvous was in progress */
	bool done_busy;		/* DONE queued or posted from the slot */
	bool abort_busy;	/* sender: ABORT queued or posted from the slot's DONE half */
	bool send_done;		/* sender: the descriptor's SEND completed (or failed) */
	bool mw_dirty;		/* its window may still be valid: renew before reuse */
	bool rx_counted;	/* counted in ref_conn->rv.rx_bytes */
	bool tx_counted;	/* counted in ref_conn->rv.tx_bytes (allocated to send) */
	bool tx_linked;		/* on rv_conn->rv.tx_head's list */
	struct conn *ref_conn;	/* the conn this block keeps a reference on (refs_w / refs_app) */
	struct conn *rv_conn;	/* the rendezvous' conn, while not idle */
	struct wire_rndv rd;	/* receiver: the descriptor being read */
	uint64_t rd_req_id;
	uint64_t done_token;
	uint64_t sent_ns;	/* sender: coarse_ns() when its descriptor was posted */
	struct lmsg *tx_prev, *tx_next;	/* rv_conn->rv.tx_head's list */
	char *slot;		/* RNDV_SLOT bytes of registered memory */
	struct ibv_sge sge[2];
	/* an application buffer (index >= nblocks; rndv_zc.c): size is its length while in use */
	bool zc;
	bool zc_ok;		/* its last send reached the peer (DONE, or the SEND completed) */
	int32_t zc_status;	/* what released() is told when zc_ok (the DONE's status) */
	uint32_t zc_next;	/* free stack: the next entry's index + 1, 0 for none (atomic) */
	char *zc_addr;
	struct ibv_mr *zc_mr;	/* the application's registration (pc_mem_reg()) */
	pc_release_fn zc_released;
	void *zc_arg;
};

struct rndv_pool {
	pthread_spinlock_t lock;	/* bd and the used gauge: any thread allocates */
	struct blkalloc bd;
	char *base;
	uint64_t size;
	bool numa;		/* base from pc_numa_alloc() */
	struct ibv_mr *mr;	/* LOCAL_WRITE | MW_BIND */
	char *slots;
	struct ibv_mr *slots_mr;
	struct lmsg *lm;	/* by block index, then the RNDV_ZC_SLOTS application entries */
	uint32_t nlm;		/* blocks + RNDV_ZC_SLOTS */
	uint64_t zc_free;	/* free application entries: tag << 32 | index + 1 (rndv_zc.c) */
	uint32_t max_large;	/* the engine's limit on this device */
	struct conn *wait;	/* conns with descriptors waiting for room */
	uint32_t waiting;	/* descriptors waiting, all conns */
	uint32_t unanswered;	/* on the conns' tx lists, all conns (worker) */
};

static inline struct lmsg *lm_of(struct msg *m)
{
	return pc_container_of(m, struct lmsg, m);
}

static inline uint32_t lm_index(const struct rndv_pool *rv, const struct lmsg *lm)
{
	return (uint32_t)(lm - rv->lm);
}

/* The bytes of @lm: its block of the pool, or the application's buffer. */
static inline char *lm_data(const struct rndv_pool *rv, const struct lmsg *lm)
{
	if (pc_unlikely(lm->zc))
		return lm->zc_addr;
	return rv->base + ((uint64_t)lm_index(rv, lm) << RNDV_MIN_SHIFT);
}

/* The registration those bytes are in. */
static inline struct ibv_mr *lm_mr(const struct rndv_pool *rv, const struct lmsg *lm)
{
	return pc_unlikely(lm->zc) ? lm->zc_mr : rv->mr;
}

/* @lm made a message to send on @c, the caller's (pc_msg_alloc_size(), pc_msg_wrap()). */
static inline struct pc_msg *lm_to_send(struct lmsg *lm, struct conn *c, void *data, uint32_t len,
					uint32_t cap)
{
	lm->ref_conn = c;
	lm->m.pub.data = data;
	lm->m.pub.len = len;
	lm->m.pub.cap = cap;
	lm->m.pub.type = PC_MSG_ONEWAY;
	lm->m.pub.req_id = 0;
	lm->m.pub.user = NULL;
	lm->m.pub.conn = (struct pc_conn *)c;
	lm->m.ctx.conn = c;
	lm->m.origin = c;
	return &lm->m.pub;
}

/* The largest message @w accepts (and sends): max_msg_size, or msg_size without rendezvous. */
static inline uint32_t rndv_max_large(const struct pc_worker *w)
{
	return w->rv ? w->rv->max_large : w->p->msg_size;
}

/* Descriptors this worker sent that no DONE answered yet (keepalive.c looks only then). */
static inline bool rndv_unanswered(const struct pc_worker *w)
{
	return w->rv && w->rv->unanswered;
}

/* rndv.c; worker thread unless said otherwise */
#define RNDV_DONE_OFF 64u	/* a slot's DONE half */
static_assert(WIRE_HDR_LEN + sizeof(struct wire_rndv) <= RNDV_DONE_OFF,
	      "descriptor fits its half of the slot");
static_assert(RNDV_DONE_OFF + WIRE_HDR_LEN + sizeof(struct wire_done) <= RNDV_SLOT,
	      "DONE fits the other half");

/* --- descriptors awaiting DONE, oldest first (struct rndv_conn's tx list) ------------------ */

static inline void rndv_tx_link(struct pc_worker *w, struct conn *c, struct lmsg *lm)
{
	lm->tx_next = NULL;
	lm->tx_prev = c->rv.tx_tail;
	if (c->rv.tx_tail)
		c->rv.tx_tail->tx_next = lm;
	else
		c->rv.tx_head = lm;
	c->rv.tx_tail = lm;
	lm->tx_linked = true;
	c->rv.tx_wait++;
	w->rv->unanswered++;
}

static inline void rndv_tx_unlink(struct pc_worker *w, struct conn *c, struct lmsg *lm)
{
	if (lm->tx_prev)
		lm->tx_prev->tx_next = lm->tx_next;
	else
		c->rv.tx_head = lm->tx_next;
	if (lm->tx_next)
		lm->tx_next->tx_prev = lm->tx_prev;
	else
		c->rv.tx_tail = lm->tx_prev;
	lm->tx_prev = lm->tx_next = NULL;
	lm->tx_linked = false;
	c->rv.tx_wait--;
	w->rv->unanswered--;
}

/* Queues a READ, DONE or LOCAL_INV for @c's next flush (struct rndv_conn's q). */
static inline void rndv_q_add(struct conn *c, struct wr_ctx *ctx)
{
	ctx->next = NULL;
	if (!c->rv.q_tail)
		c->rv.q_tail = &c->rv.q_head;
	*c->rv.q_tail = ctx;
	c->rv.q_tail = &ctx->next;
}

/* a large-pool message goes out on @c */
void rndv_take(struct pc_worker *w, struct conn *c, struct msg *m);
/* rndv_post.c: @c's queued rendezvous WRs into the chain being built; the same, posted now */
void rndv_flush(struct pc_worker *w, struct conn *c, uint32_t space, uint64_t granted,
		uint64_t *avail);
void rndv_flush_now(struct pc_worker *w, struct conn *c);
int rndv_setup(struct pc_worker *w, bool numa);
void rndv_release_verbs(struct pc_worker *w);
void rndv_destroy(struct pc_worker *w);
int rndv_submit_check(const struct conn *c, struct msg *m);	/* any thread */
struct pc_msg *rndv_msg_alloc(struct conn *c, size_t len);	/* any thread */
bool rndv_send_ready(struct pc_worker *w, struct conn *c, struct msg *m, uint32_t room);
void rndv_add_send(struct pc_worker *w, struct conn *c, struct msg *m);
bool rndv_ready(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, uint32_t room);
void rndv_add(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx);
bool rndv_msg_sent(struct pc_worker *w, struct msg *m, bool failed);
void rndv_call_abort(struct pc_worker *w, struct conn *c, struct msg *m);
void rndv_sq_done(struct pc_worker *w, struct wr_ctx *ctx, bool failed);
void rndv_cancel(struct pc_worker *w, struct wr_ctx *ctx);
void rndv_release(struct pc_worker *w, struct msg *m, struct conn *origin);
void rndv_recv(struct pc_worker *w, struct conn *c, struct msg *m, const struct wire_hdr *h);
void rndv_conn_close(struct pc_worker *w, struct conn *c);
void rndv_conn_drained(struct pc_worker *w, struct conn *c);
bool rndv_overdue(struct pc_worker *w, struct conn *c, uint64_t now, uint64_t limit_ns);
const char *rndv_what(const struct wr_ctx *ctx);
bool rndv_mw_renew(struct pc_worker *w, struct lmsg *lm);

/* rndv_zc.c: the application's buffers; worker thread unless said otherwise */
void rndv_zc_init(struct rndv_pool *rv, uint32_t first);
struct lmsg *rndv_zc_recv(struct pc_worker *w, struct conn *c, const struct wire_rndv *d,
			  uint64_t req_id);
int rndv_zc_status(const struct lmsg *lm);
void rndv_zc_push(struct rndv_pool *rv, struct lmsg *lm);	/* any thread */

#endif /* PC_RNDV_PVT_H */
