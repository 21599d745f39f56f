// SPDX-License-Identifier: MIT
/*
 * Completion dispatch (layer "dispatch", docs/architecture.md): each
 * completion of a poll's batch goes where it belongs: a receive is
 * checked, its credit counted and handed over (messages, msg.c), to a
 * call (calls.c) or to the rendezvous (rndv.c); a send-queue WR retires
 * its buffer, operation or rendezvous step. Worker thread. The posting
 * side is below it (post.c) and the chains are built beside it (flush.c).
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
#include "dp_pvt.h"

#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

#define HDR WIRE_HDR_LEN

/* --- receives ------------------------------------------------------------------ */

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
	else if (len >= WIRE_HDR_LEN && raw->magic == PC_WIRE_MAGIC && (raw->type & WIRE_MORE))
		set_error(-EPROTO,
			  "%s port %u qp 0x%x: malformed pack from peer (%u bytes: not 2 to %u one-way "
			  "messages, each but the last a multiple of %u bytes, ending the receive)%s; "
			  "closing", w->dev->name, w->dev->port, c->qpn, len, WIRE_PACK_MAX,
			  WIRE_PACK_ALIGN, w->p->no_pack ? " (no_pack: none is taken)" : "");
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
		/* published once per batch (dp_complete()) */
		w->credits_out--;
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

/* Counts @m, received on @c, and hands it on: to its call, behind a descriptor, early, or over. */
static pc_always_inline void recv_deliver(struct pc_worker *w, struct conn *c, struct msg *m,
					  void *call)
{
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
		dp_deliver(w, w->p, c, m);
}

/* Frame @h of @m's pack, at @off of its buffer, as message @x (@m itself for the first). */
static void pack_frame_bind(struct msg *x, struct msg *m, struct conn *c, const struct wire_hdr *h,
			    uint32_t off)
{
	x->pub.conn = (struct pc_conn *)c;
	x->pub.data = (char *)m->buf->addr + off + HDR;
	x->pub.len = h->len;
	/* its own frame only: a send of it (its header rewritten in place) stays there */
	x->pub.cap = h->len;
	x->pub.type = PC_MSG_ONEWAY;
	x->pub.req_id = h->req_id;
	x->pub.user = NULL;
	x->origin = c;
}

/*
 * A credited receive wire_hdr_parse() refused (@bad), or beyond the
 * credits granted: a pack is split into its messages, each delivered in
 * order, sharing @m's buffer (dp_msg_release() gives it back with the
 * last); anything else closes @c (recv_refused()). A pack spends one
 * credit, and its first header's grant stands for all (they carry the
 * same).
 */
static pc_noinline void recv_pack(struct pc_worker *w, struct conn *c, struct msg *m, uint32_t len,
				  int bad)
{
	struct wire_hdr h[WIRE_PACK_MAX];
	uint32_t offs[WIRE_PACK_MAX];
	struct msg *x[WIRE_PACK_MAX];
	/* an engine that said it takes none (pc_engine_params.no_pack) refuses them */
	int n = !bad ? 0 : w->p->no_pack ? -EPROTO : wire_pack_split(m->buf->addr, len, h, offs);
	int i;

	if (n <= 0 || c->recv_credited >= c->granted) {
		recv_refused(w, c, m, len, n >= 0);
		return;
	}
	recv_credit(w, c, h[0].grant);
	/* all bound before any is delivered: a handler may give each back at once */
	x[0] = m;
	m->pack_live = (uint8_t)(n - 1);
	m->pack_gone = 0;
	for (i = 0; i < n; i++) {
		if (i) {
			/* never empty: WIRE_PACK_MAX - 1 for each receive buffer (worker.c) */
			x[i] = pc_container_of(w->pack_free, struct msg, ctx);
			w->pack_free = w->pack_free->next;
			x[i]->pack_of = m;
			x[i]->buf->addr = (char *)m->buf->addr + offs[i];
			x[i]->buf->cap = HDR + h[i].len;
			x[i]->buf->lkey = m->buf->lkey;
			x[i]->buf->index = m->buf->index;
			x[i]->call_done = NULL;
		}
		pack_frame_bind(x[i], m, c, &h[i], offs[i]);
	}
	for (i = 0; i < n; i++)
		recv_deliver(w, c, x[i], NULL);
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

		/* a pack (several messages in one SEND) is no single message: recv_pack() */
		if (pc_unlikely(bad || c->recv_credited >= c->granted)) {
			recv_pack(w, c, m, len, bad);
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
		if (h.type == PC_MSG_RESPONSE && pc_unlikely(!call_response_match(w, c, h.req_id, &call))) {
			dp_msg_release(w, m);
			drain_fail(w, c, -EPROTO);
			return;
		}
	}
	recv_deliver(w, c, m, call);
}

/* Receives the fast path of dp_complete() does not take (errors, raw peers' queues). */
static pc_noinline void dp_recv(struct pc_worker *w, const struct ibv_wc *wc, struct msg *m)
{
	recv_one(w, wc, m);
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

		/* flushed or failed: not known to have arrived, nor any packed behind it */
		if (failed)
			dp_count_dropped(w, ctx->conn, 1u + m->pack_n);
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
	case WR_INLINE:
		/* its buffer went back at its post (flush.c): only a failure to count */
		if (failed)
			dp_count_dropped(w, ctx->conn, 1);
		break;
	case WR_RNDV_BIND:
	case WR_RNDV_INV:
	case WR_RNDV_READ:
	case WR_RNDV_DONE:
	case WR_RNDV_ABORT:
		rndv_sq_done(w, ctx, failed);
		break;
	case WR_CREDIT:	/* nothing to give back */
		break;
	default:	/* a context whose owner never set its kind: never silent */
		pc_warn("%s qp 0x%x: completion of a WR context of kind %d (a pollcore bug)",
			w->dev->name, ctx->conn ? ctx->conn->qpn : 0, (int)ctx->kind);
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
	case WR_MSG:
	case WR_INLINE: return "SEND";
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
 * is the oldest WR of its queue, signaled, or the first signaled one after
 * unsignaled inline SENDs. Anything else (flushes and
 * errors have no opcode) goes to handle_wc_slow(), which tells receives
 * from sends by the address (recv_of()).
 */
static pc_always_inline void handle_wc(struct pc_worker *w, struct ibv_wc *wc)
{
	struct wr_ctx *ctx = (struct wr_ctx *)(uintptr_t)wc->wr_id;
	struct conn *c;
	uint32_t n;

	if (pc_likely(wc->status == IBV_WC_SUCCESS)) {
		if (wc->opcode & IBV_WC_RECV) {
			recv_one(w, wc, pc_container_of(ctx, struct msg, rctx));
			return;
		}
		c = dp_conn_of_qpn(w, wc->qp_num);
		/* inline SENDs left unsignaled before it have nothing to give back (flush.c) */
		if (pc_likely(c && (n = sq_retire_quiet(&c->sq, &c->inline_ctx, ctx)))) {
			w->sq_wrs -= n - 1;
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
	/* the receives' credits used, for readers: once per batch, not per receive */
	credits_publish(w);
}

