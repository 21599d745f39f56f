// SPDX-License-Identifier: MIT
/*
 * The worker's data path, completion side: completions, receives, the
 * messages' life and the handoff to the application. Worker thread only.
 * workers/dp_post.c has the posting side (chains, submissions, refills).
 *
 * Flow control: each side grants credits cumulatively, for receive buffers
 * that came back to the pool: in the header of its next message, else by an
 * RDMA WRITE of the peer's credit word (workers/dp_credit.h). A sender
 * without credits keeps its messages in the backlog, so a slow application
 * slows its peer instead of overrunning the SRQ. Every grant, the first
 * included, stays within what is posted on the SRQ (credits_out <=
 * srq_outstanding) and within the connection's share of it
 * (core/credit.h). Raw peers receive into their own queues, from a pool of
 * their own, never from the SRQ.
 */
#include "dp_credit.h"
#include "rndv_pvt.h"

#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

#define HDR WIRE_HDR_LEN

/* --- connections by QP number ----------------------------------------------- */

/* dp_conn_of_qpn() when the cache missed */
struct conn *dp_conn_lookup(struct pc_worker *w, uint32_t qpn)
{
	struct conn **slot = &w->cache[qpn & (PC_ARRAY_SIZE(w->cache) - 1)];
	struct conn *c;

	/* RCU read side: the worker is an online qsbr reader between quiescent states */
	c = conn_lookup(w->conns, qpn);
	if (!c || c->w != w)
		return NULL;
	if (c->state == CONN_ATTACHING)
		worker_apply_ctl(w); /* its ATTACH is queued: apply it now */
	if (c->state == CONN_ATTACHING || c->state == CONN_RETIRED)
		return NULL;
	*slot = c;
	return c;
}

/* --- messages ------------------------------------------------------------------ */

/* Sends that were accepted (0 returned) and will not be delivered: counted, never silent. */
void dp_count_dropped(struct pc_worker *w, struct conn *c, uint32_t n)
{
	STAT_ADD(c->st->msgs_dropped, n);
	STAT_ADD(w->st.msgs_dropped, n);
}

void msg_bind(struct msg *m, struct conn *c)
{
	m->pub.conn = (struct pc_conn *)c;
	m->pub.data = (char *)m->buf->addr + (c->raw ? 0 : HDR);
	/* what a receive may hold: its SGE is exactly this long (plus the header) */
	m->pub.cap = c->w->p->msg_size;
}

/* The pool a receive buffer goes back to. */
static inline struct pc_pool *rx_pool(struct pc_worker *w, const struct msg *m)
{
	return m->pool == POOL_RAW ? w->raw : w->rx;
}

/* A credited conn attached: it shares the SRQ from now on, its floor kept for it. */
void dp_credited_join(struct pc_worker *w, struct conn *c)
{
	c->allow = w->p->min_window;
	/* relaxed store: pc_msg_alloc_size() reads it on app threads (rndv.c's share) */
	__atomic_store_n(&w->ncredited, w->ncredited + 1, __ATOMIC_RELAXED);
	w->floor_deficit += w->p->min_window;
	/* the control thread reserved that floor in adm_taken when it admitted @c */
	w->adm_pub += w->p->min_window;
	credits_share_set(w);
}

/*
 * A credited conn closing (its QP in ERR): the peer can spend no more. What
 * it was granted and never told of is taken back now; what it was told of
 * and the worker has not seen used stays counted (credit_leave_keep()):
 * the peer may have spent it on receives still in the CQ, whose buffers
 * are no longer posted though srq_outstanding counts them until polled.
 * Each goes with its receive (credits_drain_used()), the rest when the
 * drain ends (credits_drained()). Taking all back at once over-stated the
 * room by those receives: grants for buffers not posted, RNR NAKs.
 */
void dp_credited_leave(struct pc_worker *w, struct conn *c)
{
	uint32_t o = conn_outstanding(c);
	uint32_t keep = credit_leave_keep(c->granted, c->granted_published, c->recv_credited);

	/* granted - recv_credited is what it keeps from now on (0 if it overran) */
	c->granted = c->recv_credited + keep;
	w->credits_out -= o - keep;
	w->floor_deficit -= credit_short(o, w->p->min_window);
	__atomic_store_n(&w->ncredited, w->ncredited - 1, __ATOMIC_RELAXED);
	c->grant_pending = 0;
	credits_publish(w);
	credits_share_set(w);
	adm_release(w, 0);
}

struct msg *dp_tx_alloc(struct pc_worker *w)
{
	struct pc_buf *b = pc_pool_get(w->tx);
	struct msg *m;

	if (pc_unlikely(!b))
		return NULL;
	m = &w->tx_msgs[b->index];
	m->pub.len = 0;
	m->pub.type = PC_MSG_ONEWAY;
	m->pub.req_id = 0;
	m->pub.user = NULL;
	m->pub.conn = NULL;
	m->origin = NULL;
	return m;
}

void dp_msg_release(struct pc_worker *w, struct msg *m)
{
	struct conn *c = m->origin;

	m->origin = NULL;
	if (m->pool == POOL_TX) {
		if (pc_unlikely(pc_pool_put(w->tx, m->buf))) {
			/* nobody to return it to: an application that gave a message back twice */
			pc_err("%s: send buffer %u given back twice (pc_msg_release() or a send of a "
			       "message no longer yours); ignored", w->name, m->buf->index);
			return;
		}
		if (c)
			conn_put(w, c);
		return;
	}
	if (pc_unlikely(m->pool == POOL_LARGE)) {
		rndv_release(w, m, c);
		return;
	}
	if (pc_unlikely(pc_pool_put(rx_pool(w, m), m->buf))) {
		pc_err("%s: receive buffer %u given back twice (pc_msg_release() or a send of a "
		       "message no longer yours); ignored", w->name, m->buf->index);
		return;
	}
	if (!c)
		return;
	STAT_ADD(c->held, (uint32_t)-1);
	CONN_GAUGE_SET(c, held);
	STAT_ADD(w->st.rx_held, (uint32_t)-1);
	if (pc_likely(c->state == CONN_UP && !c->raw)) {
		/* granted again at the conn's next flush, or by its deadline (grant_defer()) */
		c->grant_pending++;
		if (!c->dirty)
			grant_defer(w, c);
	} else if (c->state <= CONN_UP) {
		/* granted again (raw: its receive queue topped up) at the next flush once UP */
		if (!c->raw)
			c->grant_pending++;
		dp_mark_dirty(w, c);
	} else if (c->state == CONN_DRAINED) {
		drain_maybe_retire(w, c);
	}
}

/* Ring mode: hands @m to application slot @slot, in order, never dropping it. */
void dp_deliver_slot(struct pc_worker *w, unsigned int slot, struct msg *m)
{
	struct chan *ch = &w->chans[slot];

	if (pc_likely(!ch->ovf_head) && pc_ring_spsc_enqueue(ch->to_app, &m->pub) == 0)
		return;
	/* the application is behind: keep it here, in order, and say so */
	m->ctx.next = NULL;
	if (!ch->ovf_head)
		w->ovf_chans++;
	*ch->ovf_tail = &m->ctx;
	ch->ovf_tail = &m->ctx.next;
	ch->ovf++;
	PC_PROBE(handoff_full, slot, ch->ovf);
	STAT_ADD(w->st.handoff_full, 1);
}

/* Hands a received message to the application, in order, never dropping it. */
static inline void deliver(struct pc_worker *w, const struct pc_engine_params *p, struct conn *c,
			   struct msg *m)
{
	if (p->handoff == PC_HANDOFF_HANDLER)
		p->on_msg(&m->pub, p->arg);
	else
		dp_deliver_slot(w, c->app_slot, m);
}

void dp_deliver_overflow(struct pc_worker *w)
{
	unsigned int i;

	/* the common case, every application keeping up, is not called (worker_turn()) */
	for (i = 0; w->ovf_chans && i < w->nchans; i++) {
		struct chan *ch = &w->chans[i];

		while (ch->ovf_head) {
			struct msg *m = pc_container_of(ch->ovf_head, struct msg, ctx);
			/* read first: once in the ring, @m is the application's (a release links it elsewhere) */
			struct wr_ctx *next = m->ctx.next;

			if (pc_ring_spsc_enqueue(ch->to_app, &m->pub))
				break;
			ch->ovf_head = next;
			if (!ch->ovf_head) {
				ch->ovf_tail = &ch->ovf_head;
				w->ovf_chans--;
			}
			ch->ovf--;
		}
	}
}

/*
 * Tops up one slot's stock (@ch) to its share, in bursts; returns false when
 * the pool ran out first. A slot is written only once TOPUP_MIN of its
 * share are missing, so that one that sends little is not touched each look.
 */
#define TOPUP_MIN 8u

static bool topup_slot(struct pc_worker *w, struct chan *ch)
{
	void *objs[64];
	unsigned int n, k, put, want, have;

	have = pc_ring_spsc_count(ch->txfree);
	want = ch->tx_share > have ? ch->tx_share - have : 0;
	if (pc_likely(want < PC_MAX(PC_MIN(TOPUP_MIN, ch->tx_share / 2), 1u)))
		return true;
	while (want) {
		unsigned int burst = PC_MIN(want, (unsigned int)PC_ARRAY_SIZE(objs));

		for (n = 0; n < burst; n++) {
			struct msg *m = dp_tx_alloc(w);

			if (!m)
				break;
			objs[n] = m;
		}
		put = n ? pc_ring_spsc_enqueue_burst(ch->txfree, objs, n) : 0;
		for (k = put; k < n; k++)
			dp_msg_release(w, objs[k]);
		if (n < burst)
			return false; /* the pool ran out */
		if (put < n)
			return true; /* the ring is full */
		want -= put;
	}
	return true;
}

/*
 * Keeps each application slot stocked with send buffers, up to its share
 * (half the pool split over the slots: the worker keeps the rest), every
 * HOUSEKEEP_TURNS turns: each slot gets back what it took since the last
 * look, all of it, as soon as TOPUP_MIN are missing.
 *
 * The stock must cover what the application may take before the worker
 * looks again, and that is a burst: every call in flight can complete in
 * one of the worker's runs (a batch of completions, or a worker that lost
 * its core for a while), and each completion may make the application
 * call again at once. A stock refilled only once below half its share, 64
 * buffers per look at one slot in turn (as it was), met such bursts empty
 * with most of the pool free: 83% of pc_msg_alloc() calls failed with
 * ENOBUFS at 8 connections x 32 calls in flight, 97% at x 64 (pollcore-kv,
 * soft-RoCE VM). Refilled to the share at each look, the stock covers as
 * many calls in flight as the share holds. Reading a slot's count reads
 * its consumer's cache line: one line per slot every HOUSEKEEP_TURNS turns.
 * When the pool runs short, the slots take turns being served first.
 */
void dp_topup_txfree(struct pc_worker *w)
{
	unsigned int i, n = w->nchans, first = w->topup_next;

	if (pc_unlikely(!n))
		return;
	w->topup_next = first + 1 == n ? 0 : first + 1;
	for (i = 0; i < n; i++) {
		unsigned int k = first + i < n ? first + i : first + i - n;

		if (!topup_slot(w, &w->chans[k]))
			return; /* the pool is empty: nothing for the others either */
	}
}

/* --- receives ------------------------------------------------------------------ */

/*
 * Takes @req_id out of @c's requests in flight, and counts its round trip;
 * false (error set) if it was not there. @call: its call (calls.c), or NULL.
 */
static bool response_matches(struct pc_worker *w, struct conn *c, uint64_t req_id, void **call)
{
	struct reqent e;
	uint64_t now;

	if (pc_unlikely(!reqset_take(&c->reqs, req_id, &e))) {
		set_error(-EPROTO,
			     "%s port %u qp 0x%x: response to request id %llu, which awaits none; closing",
			     w->dev->name, w->dev->port, c->qpn, (unsigned long long)req_id);
		return false;
	}
	STAT_ADD(c->inflight_req, (uint32_t)-1);
	CONN_GAUGE_SET(c, inflight_req);
	now = worker_now_batch(w);
	wstats_rpc(&w->ws, now > e.val ? stats_ticks_ns(now - e.val) : 0);
	*call = e.ptr;
	/* a call without completion ends with its response (a call's ends in call_answer()) */
	if (!e.ptr)
		call_counted_end(c);
	/* a place came free in the window: a call waiting for one goes in */
	if (pc_unlikely(c->cw_head != NULL))
		call_admit(w, c);
	return true;
}

/* A receive that completed in error (a flush, or a message too long, ...). */
static pc_cold void recv_failed(struct pc_worker *w, const struct ibv_wc *wc, struct msg *m,
				struct conn *c)
{
	wstats_wc(&w->ws, wc->status);
	/* flushes are how a closing QP ends, not errors */
	if (wc->status != IBV_WC_WR_FLUSH_ERR)
		STAT_ADD(w->st.wc_errors, 1);
	pc_pool_put(rx_pool(w, m), m->buf);
	if (c && wc->status != IBV_WC_WR_FLUSH_ERR) {
		char what[96] = "RECV";

		/* rxe reports a message longer than the receive as LOC_QP_OP_ERR */
		if (wc->status == IBV_WC_LOC_LEN_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR)
			snprintf(what, sizeof(what), "RECV (message too long? at most %u bytes "
				 "are accepted)", c->raw ? c->rq_size : w->p->msg_size + HDR);
		drain_fail(w, c, pc_wc_error(w->dev, wc, what));
	}
}

/* A message a peer should never have sent: @c closes, @m goes back. */
/* @overran: well formed, but beyond the credits granted */
static pc_cold void recv_refused(struct pc_worker *w, struct conn *c, struct msg *m, uint32_t len,
				 bool overran)
{
	const struct wire_hdr *raw = m->buf->addr;

	if (overran)
		set_error(-EPROTO, "%s port %u qp 0x%x: peer sent beyond its credits (%llu granted); closing",
			  w->dev->name, w->dev->port, c->qpn, (unsigned long long)c->granted);
	else
		set_error(-EPROTO,
			  "%s port %u qp 0x%x: malformed message from peer (%u bytes, magic 0x%x, type %u); closing",
			  w->dev->name, w->dev->port, c->qpn, len, len >= 2 ? raw->magic : 0,
			  len >= 3 ? raw->type : 0);
	/*
	 * Beyond its credits, it took a posted buffer nobody was promised: its
	 * credit is not counted used, and the buffer goes straight back to the SRQ.
	 */
	dp_msg_release(w, m);
	drain_fail(w, c, -EPROTO);
	if (overran)
		dp_refill_srq(w, false);
}

/* A credited receive: the credit it used, and the grant its header carries. */
static pc_always_inline void recv_credit(struct pc_worker *w, struct conn *c, uint16_t grant)
{
	/* a closing conn's kept credits go one by one (dp_credited_leave()) */
	if (pc_likely(c->state < CONN_DRAINING)) {
		uint32_t o = conn_outstanding(c);

		/* o >= 1: recv_credited < granted */
		w->floor_deficit += credit_used_short(o, w->p->min_window);
		w->credits_out--;
		credits_publish(w);
		/* a credit used earns one more: its window grows with use, at once */
		if (c->allow < c->window) {
			c->allow++;
			if (c->state == CONN_UP) {
				c->grant_pending++;
				dp_mark_dirty(w, c);
			}
		}
		/* a grant waits for a carrier: the peer's view just shrank (grant_due()) */
		if (c->grant_waiting)
			dp_mark_dirty(w, c);
	} else {
		credits_drain_used(w, c);	/* a credit dp_credited_leave() kept */
	}
	c->recv_credited++;
	credits_take(c, wire_grant_expand(c->peer_grant_seen, grant));
}

/* A received message before its conn is UP, or of one closing that never was. */
static pc_cold void recv_early(struct pc_worker *w, struct conn *c, struct msg *m)
{
	if (c->state == CONN_ATTACHED) {
		/*
		 * A passive side may receive before its UP: held back until
		 * on_conn(UP) has run, so the application never sees a message
		 * of a conn that gets no DOWN (one that never comes up).
		 */
		m->ctx.next = NULL;
		*(c->early_head ? c->early_tail : &c->early_head) = &m->ctx;
		c->early_tail = &m->ctx.next;
		return;
	}
	dp_msg_release(w, m);
}

static pc_always_inline void recv_one(struct pc_worker *w, const struct ibv_wc *wc, struct msg *m)
{
	struct conn *c = dp_conn_of_qpn(w, wc->qp_num);
	struct wire_hdr h;
	uint32_t len = wc->byte_len;
	void *call = NULL;

	if (pc_unlikely(m->in_rq)) {
		m->in_rq = 0;
		m->rctx.conn->rq_posted--;
	} else {
		w->srq_outstanding--;
		m->in_srq = 0;
	}
	if (pc_unlikely(wc->status != IBV_WC_SUCCESS)) {
		recv_failed(w, wc, m, c);
		return;
	}
	if (pc_unlikely(!c || c->state >= CONN_DRAINED)) {
		STAT_ADD(w->st.stray_completions, 1);
		pc_pool_put(rx_pool(w, m), m->buf);
		return;
	}
	m->origin = c;
	STAT_ADD(c->held, 1);
	CONN_GAUGE_SET(c, held);
	STAT_ADD(w->st.rx_held, 1);
	/* msg_bind(), with what is known here */
	m->pub.conn = (struct pc_conn *)c;
	m->pub.cap = w->p->msg_size;
	m->pub.user = NULL;
	if (c->raw) {
		m->pub.data = m->buf->addr;
		m->pub.len = len;
		m->pub.type = PC_MSG_ONEWAY;
		m->pub.req_id = 0;
	} else {
		int bad = wire_hdr_parse(m->buf->addr, len, &h);

		if (pc_unlikely(bad || c->recv_credited >= c->granted)) {
			recv_refused(w, c, m, len, !bad);
			return;
		}
		recv_credit(w, c, h.grant);
		m->pub.data = (char *)m->buf->addr + HDR;
		/* a rendezvous descriptor or DONE: pollcore's own, never delivered */
		if (pc_unlikely(h.type > WIRE_RESPONSE)) {
			rndv_recv(w, c, m, &h);
			return;
		}
		m->pub.len = len - HDR;
		m->pub.type = h.type;
		m->pub.req_id = h.req_id;
		if (h.type == PC_MSG_RESPONSE && pc_unlikely(!response_matches(w, c, h.req_id, &call))) {
			dp_msg_release(w, m);
			drain_fail(w, c, -EPROTO);
			return;
		}
	}
	STAT_ADD(c->st->msgs_recv, 1);
	STAT_ADD(c->st->bytes_recv, m->pub.len);
	STAT_ADD(w->st.rx_msgs, 1);
	/* a descriptor before it not yet read: after that one (dp_rx_release()) */
	m->rx_after = c->rv.rx_seq;
	if (pc_unlikely(c->state == CONN_ATTACHED || (c->state == CONN_DRAINING && !c->was_up))) {
		recv_early(w, c, m);
		return;
	}
	if (pc_unlikely(call != NULL))
		call_answer(w, c, m, call);
	else if (pc_unlikely(m->rx_after != c->rv.rx_dlv))
		dp_rx_hold(c, m);
	else
		deliver(w, w->p, c, m);
}

/* Receives the fast path of dp_complete() does not take (errors, raw peers' queues). */
static pc_noinline void dp_recv(struct pc_worker *w, const struct ibv_wc *wc, struct msg *m)
{
	recv_one(w, wc, m);
}

/*
 * Keeps @m, which arrived after a rendezvous descriptor not yet read, until
 * that one is delivered (dp_rx_release()): per connection, messages come
 * in order. Call completions are not held: they are no part of that order.
 */
void dp_rx_hold(struct conn *c, struct msg *m)
{
	m->ctx.next = NULL;
	if (!c->rv.hold_head)
		c->rv.hold_tail = &c->rv.hold_head;
	*c->rv.hold_tail = &m->ctx;
	c->rv.hold_tail = &m->ctx.next;
}

/*
 * A descriptor of @c's was finished (its message delivered, or its READ
 * failed): the messages that came after it and before the next go on, in
 * order. @all: the drain ended, every one goes (given back if @c was never
 * UP).
 */
void dp_rx_release(struct pc_worker *w, struct conn *c, bool all)
{
	struct wr_ctx *ctx;

	if (all)
		c->rv.rx_dlv = c->rv.rx_seq;
	while ((ctx = c->rv.hold_head)) {
		struct msg *m = pc_container_of(ctx, struct msg, ctx);

		if ((int32_t)(c->rv.rx_dlv - m->rx_after) < 0)
			break;
		c->rv.hold_head = ctx->next;
		if (c->state >= CONN_DRAINING && !c->was_up)
			dp_msg_release(w, m);
		else
			deliver(w, w->p, c, m);
	}
}

/*
 * A message read by rendezvous (rndv.c), bound to @c: counted and handed
 * over as a received one is. Only once UP (READs are posted only then).
 */
void dp_deliver_read(struct pc_worker *w, struct conn *c, struct msg *m)
{
	void *call = NULL;

	STAT_ADD(c->st->msgs_recv, 1);
	STAT_ADD(c->st->bytes_recv, m->pub.len);
	STAT_ADD(w->st.rx_msgs, 1);
	if (m->pub.type == PC_MSG_RESPONSE && !response_matches(w, c, m->pub.req_id, &call)) {
		dp_msg_release(w, m);
		drain_fail(w, c, -EPROTO);
		return;
	}
	if (call)
		call_answer(w, c, m, call);
	else
		deliver(w, w->p, c, m);
}

/* After on_conn(UP): the messages that arrived before it, in order. */
void dp_deliver_early(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *ctx = c->early_head;

	c->early_head = NULL;
	while (ctx) {
		struct wr_ctx *next = ctx->next;
		struct msg *m = pc_container_of(ctx, struct msg, ctx);

		/* one that came after a descriptor waits for it as it would have after UP */
		if (pc_unlikely(m->rx_after != c->rv.rx_dlv))
			dp_rx_hold(c, m);
		else
			deliver(w, w->p, c, m);
		ctx = next;
	}
}

/* A conn that never came up: its early messages go back, never seen. */
void dp_drop_early(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *ctx = c->early_head;

	c->early_head = NULL;
	while (ctx) {
		struct wr_ctx *next = ctx->next;

		dp_msg_release(w, pc_container_of(ctx, struct msg, ctx));
		ctx = next;
	}
}

/* --- send-queue completions ------------------------------------------------------ */

struct retire_arg {
	struct pc_worker *w;
	int err;
};

/* A send-queue WR retired: @failed (with @err) or not, a constant where inlined. */
static pc_always_inline void wr_done(struct pc_worker *w, struct wr_ctx *ctx, bool failed, int err)
{
	struct pc_op *op;

	/* the drain marker's CQE is reserved per connection, not taken from the send room */
	if (ctx->kind != WR_MARKER)
		w->sq_wrs--;
	switch (ctx->kind) {
	case WR_MSG: {
		struct msg *m = pc_container_of(ctx, struct msg, ctx);

		/* flushed or failed: not known to have arrived */
		if (failed)
			dp_count_dropped(w, ctx->conn, 1);
		/* a large call's request waits for its window too (rndv_msg_sent()) */
		if (pc_unlikely(m->pool == POOL_LARGE) && rndv_msg_sent(w, m, failed))
			break;
		/* a call's request stays with its call until that ends */
		if (pc_unlikely(m->call_done != NULL))
			call_sent(w, m);
		else
			dp_msg_release(w, m);
		break;
	}
	case WR_OP:
		op = op_of_ctx(ctx);
		op->done(op, failed ? err : 0);
		break;
	case WR_MARKER:
		ctx->conn->marker_done = true;
		break;
	case WR_RNDV_BIND:
	case WR_RNDV_INV:
	case WR_RNDV_READ:
	case WR_RNDV_DONE:
	case WR_RNDV_ABORT:
		rndv_sq_done(w, ctx, failed);
		break;
	default: /* WR_CREDIT: nothing to give back */
		break;
	}
}

/* sq_retire_to()'s callback */
static void sq_done(void *arg, void *vctx, bool failed)
{
	const struct retire_arg *ra = arg;

	wr_done(ra->w, vctx, failed, ra->err);
}

/* A WR of a chain that could not be posted: given back as failed with @err. */
void dp_wr_failed(struct pc_worker *w, struct wr_ctx *ctx, int err)
{
	struct retire_arg ra = { w, err };

	sq_done(&ra, ctx, true);
}

static const char *ctx_what(const struct wr_ctx *ctx)
{
	switch (ctx->kind) {
	case WR_MSG: return "SEND";
	case WR_OP: return op_of_ctx((struct wr_ctx *)ctx)->code == PC_OP_READ ? "RDMA_READ"
									     : "RDMA_WRITE";
	case WR_CREDIT: return "credit RDMA_WRITE";
	case WR_MARKER: return "drain marker";
	default: return rndv_what(ctx);
	}
}

/* Retires @c's send-queue slots up to @t (sq_find()). */
static void sq_complete_at(struct pc_worker *w, struct conn *c, uint32_t t, int err)
{
	struct retire_arg ra = { w, err };

	sq_retire_to(&c->sq, t, err != 0, sq_done, &ra);
	if (c->bl_head && c->state == CONN_UP)
		dp_mark_dirty(w, c);
}

void dp_sq_complete(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, int err)
{
	uint32_t t = sq_find(&c->sq, ctx, err != 0);

	if (t == c->sq.head)
		STAT_ADD(w->st.stray_completions, 1);
	else
		sq_complete_at(w, c, t, err);
}

/*
 * The rx message a receive's wr_id names (its rctx), or NULL for any other
 * WR: decided by the address alone, which is immutable per WR, so a late
 * send flush for a buffer that is back on the SRQ is never taken for a
 * receive, and no memory is read to decide.
 */
static inline struct msg *recv_in(struct msg *msgs, uint32_t n, uint64_t wr_id)
{
	uintptr_t off = (uintptr_t)wr_id - (uintptr_t)msgs;

	if (off >= (uintptr_t)n * sizeof(struct msg) ||
	    off % sizeof(struct msg) != offsetof(struct msg, rctx))
		return NULL;
	return &msgs[off / sizeof(struct msg)];
}

static inline struct msg *recv_of(const struct pc_worker *w, uint64_t wr_id)
{
	struct msg *m = recv_in(w->rx_msgs, w->p->rx_bufs, wr_id);

	/* raw peers' own receive queues: only when the application set buffers aside */
	if (pc_unlikely(!m && w->raw_msgs))
		m = recv_in(w->raw_msgs, w->p->raw_bufs, wr_id);
	return m;
}

/*
 * Completions the fast path of dp_complete() does not take: errors and
 * flushes, receives on raw peers' queues, send completions that retire
 * more than the oldest WR, strays.
 */
static pc_noinline void handle_wc_slow(struct pc_worker *w, struct ibv_wc *wc)
{
	struct wr_ctx *ctx = (struct wr_ctx *)(uintptr_t)wc->wr_id;
	struct msg *rm = recv_of(w, wc->wr_id);
	struct conn *c;
	uint32_t t;
	int err = 0;

	if (rm) {
		dp_recv(w, wc, rm);
		return;
	}
	/*
	 * A send-queue WR: find it in its QP's queue before touching it. One
	 * that matches nothing (flushed after its queue was abandoned) may name
	 * a buffer reused since, or an operation the application freed: it is
	 * counted and left alone.
	 */
	c = dp_conn_of_qpn(w, wc->qp_num);
	if (pc_unlikely(!c) ||
	    pc_unlikely((t = sq_find(&c->sq, ctx, wc->status != IBV_WC_SUCCESS)) == c->sq.head)) {
		STAT_ADD(w->st.stray_completions, 1);
		return;
	}
	if (pc_unlikely(wc->status != IBV_WC_SUCCESS)) {
		err = pc_wc_error(w->dev, wc, ctx_what(ctx));
		wstats_wc(&w->ws, wc->status);
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			STAT_ADD(w->st.wc_errors, 1);
		if (wc->status == IBV_WC_RNR_RETRY_EXC_ERR)
			STAT_ADD(c->st->rnr_errors, 1);
		else if (wc->status == IBV_WC_RETRY_EXC_ERR)
			STAT_ADD(c->st->retry_errors, 1);
	}
	sq_complete_at(w, c, t, err);
	if (pc_unlikely(err) && wc->status != IBV_WC_WR_FLUSH_ERR)
		drain_fail(w, c, err);
}

/*
 * One completion. A successful one's opcode is valid, and its wr_id is one
 * we posted: a receive's is its message's rctx; the usual send completion
 * is the oldest WR of its queue, signaled. Anything else (flushes and
 * errors have no opcode) goes to handle_wc_slow(), which tells receives
 * from sends by the address (recv_of()).
 */
static pc_always_inline void handle_wc(struct pc_worker *w, struct ibv_wc *wc)
{
	struct wr_ctx *ctx = (struct wr_ctx *)(uintptr_t)wc->wr_id;
	struct conn *c;

	if (pc_likely(wc->status == IBV_WC_SUCCESS)) {
		if (wc->opcode & IBV_WC_RECV) {
			recv_one(w, wc, pc_container_of(ctx, struct msg, rctx));
			return;
		}
		c = dp_conn_of_qpn(w, wc->qp_num);
		if (pc_likely(c && sq_retire_tail(&c->sq, ctx))) {
			wr_done(w, ctx, false, 0);
			if (c->bl_head && c->state == CONN_UP)
				dp_mark_dirty(w, c);
			return;
		}
	}
	handle_wc_slow(w, wc);
}

void dp_complete(struct pc_worker *w, unsigned int n)
{
	unsigned int i;

	PC_PROBE(poll_batch, n);
	for (i = 0; i < n; i++)
		handle_wc(w, &w->wc[i]);
	/* the batch's clock (worker_now_batch()) is read afresh by the next one */
	w->ws.now_batch = 0;
	STAT_ADD(w->st.completions, (uint64_t)n);
}
