// SPDX-License-Identifier: MIT
/*
 * The worker's posting side: WR chains built from each connection's
 * backlog and posted with one doorbell per connection and turn (the credit
 * grant first, when one is due), the grant-wait list, the application's
 * submissions, and the receive refills (the SRQ; raw peers' own queues).
 * Worker thread only. workers/datapath.c has the completion side.
 */
#include "dp_credit.h"
#include "rndv_pvt.h"

#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

/* --- building and posting chains -------------------------------------------------------- */

static pc_always_inline void add_send(struct pc_worker *w, struct conn *c, struct msg *m)
{
	struct ibv_send_wr *wr = chain_add(&w->chain);
	uint32_t bytes = m->pub.len;

	if (!c->raw) {
		wire_hdr_fill(m->buf->addr, m->pub.type, m->pub.len, m->pub.req_id, c->granted);
		bytes += WIRE_HDR_LEN;
	}
	wr->sg_list->addr = (uintptr_t)m->buf->addr;
	wr->sg_list->length = bytes;
	wr->sg_list->lkey = m->buf->lkey;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = bytes <= c->max_inline ? IBV_SEND_INLINE : 0;
	wr->wr_id = (uintptr_t)&m->ctx;
	m->ctx.conn = c;
	STAT_ADD(c->st->msgs_sent, 1);
	STAT_ADD(c->st->bytes_sent, m->pub.len);
}

static pc_always_inline void add_op(struct pc_worker *w, const struct conn *c, struct pc_op *op)
{
	struct ibv_send_wr *wr = chain_add(&w->chain);

	wr->sg_list->addr = (uintptr_t)op->local;
	wr->sg_list->length = op->len;
	wr->sg_list->lkey = op->lkey;
	wr->num_sge = 1;
	if (op->code == PC_OP_READ) {
		wr->opcode = IBV_WR_RDMA_READ;
		wr->send_flags = 0;
	} else {
		/* small WRITEs are copied into the WQE, as sends are: no DMA read of op->local */
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->send_flags = op->len <= c->max_inline ? IBV_SEND_INLINE : 0;
	}
	wr->wr.rdma.remote_addr = op->remote_addr;
	wr->wr.rdma.rkey = op->rkey;
	wr->wr_id = (uintptr_t)&op_priv(op)->ctx;
}

static pc_always_inline void add_credit(struct pc_worker *w, struct conn *c)
{
	struct ibv_send_wr *wr = chain_add(&w->chain);

	c->credit_word[1] = c->granted;
	wr->sg_list->addr = (uintptr_t)&c->credit_word[1];
	wr->sg_list->length = sizeof(uint64_t);
	wr->sg_list->lkey = c->credit_mr->lkey;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->send_flags = c->max_inline >= sizeof(uint64_t) ? IBV_SEND_INLINE : 0;
	wr->wr.rdma.remote_addr = c->peer_credit_addr;
	wr->wr.rdma.rkey = c->peer_credit_rkey;
	wr->wr_id = (uintptr_t)&c->credit_ctx;
	c->granted_published = c->granted;
	c->grant_due = 0;
}

/*
 * Fails the WRs of a chain that could not be posted: they were already
 * taken from the backlog and pushed on the send queue.
 */
static void chain_fail(struct pc_worker *w, struct conn *c, uint32_t from, int err)
{
	uint32_t i, n = w->chain.n - from;

	sq_unpush(&c->sq, n);
	for (i = from; i < w->chain.n; i++)
		dp_wr_failed(w, (struct wr_ctx *)(uintptr_t)w->chain.wr[i].wr_id, err);
}

/*
 * Posts a linked list of WRs with one doorbell: ibv_post_send(), or the
 * ibv_wr_* API on an ibv_qp_ex (all or nothing). Specialised at compile
 * time on @wr_ex; dp_post() picks the variant per worker.
 */
static pc_always_inline int post_wrs(struct conn *c, struct ibv_send_wr *wr,
				     struct ibv_send_wr **bad, const bool wr_ex)
{
	struct ibv_qp_ex *qx = c->qpx;
	struct ibv_send_wr *first = wr;
	int ret;

	if (!wr_ex)
		return ibv_post_send(c->qp, wr, bad);
	ibv_wr_start(qx);
	for (; wr; wr = wr->next) {
		qx->wr_id = wr->wr_id;
		qx->wr_flags = wr->send_flags & ~(unsigned int)IBV_SEND_INLINE;
		/* rendezvous (rndv.c): no data of their own */
		if (pc_unlikely(wr->opcode == IBV_WR_BIND_MW)) {
			ibv_wr_bind_mw(qx, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
			continue;
		}
		if (pc_unlikely(wr->opcode == IBV_WR_LOCAL_INV)) {
			ibv_wr_local_inv(qx, wr->invalidate_rkey);
			continue;
		}
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(qx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(qx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		default:
			ibv_wr_send(qx);
		}
		if (wr->num_sge != 1)
			ibv_wr_set_sge_list(qx, (size_t)wr->num_sge, wr->sg_list);
		else if (wr->send_flags & IBV_SEND_INLINE)
			ibv_wr_set_inline_data(qx, (void *)(uintptr_t)wr->sg_list->addr,
					       wr->sg_list->length);
		else
			ibv_wr_set_sge(qx, wr->sg_list->lkey, wr->sg_list->addr,
				       wr->sg_list->length);
	}
	ret = ibv_wr_complete(qx);
	if (ret)
		*bad = first;
	return ret;
}

int dp_post(struct pc_worker *w, struct conn *c, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return w->wr_ex ? post_wrs(c, wr, bad, true) : post_wrs(c, wr, bad, false);
}

/* The chain's post failed at @bad: what was not posted fails, and @c closes. */
static pc_cold void post_failed(struct pc_worker *w, struct conn *c, int ret, struct ibv_send_wr *bad)
{
	struct wr_chain *ch = &w->chain;
	uint32_t i = bad ? (uint32_t)(bad - ch->wr) : 0;

	STAT_ADD(w->st.wrs_posted, i);
	ret = set_error(pc_neg_errno(ret), "%s port %u qp 0x%x: ibv_post_send of %u WRs failed at %u: %s",
			w->dev->name, w->dev->port, c->qpn, ch->n, i, strerror(abs(pc_neg_errno(ret))));
	chain_fail(w, c, i, ret);
	drain_fail(w, c, ret);
}

static pc_always_inline void post_chain(struct pc_worker *w, struct conn *c)
{
	struct wr_chain *ch = &w->chain;
	struct ibv_send_wr *bad = NULL;
	uint32_t i;
	int ret;

	/* signal every Nth and the last, so buffers come back without waiting for traffic */
	for (i = 0; i < ch->n; i++) {
		struct wr_ctx *ctx = (struct wr_ctx *)(uintptr_t)ch->wr[i].wr_id;

		if (sq_push(&c->sq, ctx, i + 1 == ch->n, false))
			ch->wr[i].send_flags |= IBV_SEND_SIGNALED;
	}
	w->sq_wrs += ch->n;
	ret = dp_post(w, c, ch->wr, &bad);
	PC_PROBE(post_batch, c->qpn, ch->n);
	STAT_ADD(w->st.doorbells, 1);
	if (pc_likely(!ret))
		STAT_ADD(w->st.wrs_posted, ch->n);
	else
		post_failed(w, c, ret, bad);
}

/*
 * Takes a credit for a message about to be added to @c's chain; false: none
 * left (stalled). @avail: the credits known to be left, read afresh at 0
 * (a WRITE of the peer's may have brought more).
 */
static pc_always_inline bool credit_spend(struct pc_worker *w, struct conn *c, uint64_t granted,
					  uint64_t *avail)
{
	if (!*avail && !(*avail = credits_avail(c))) {
		/* counted once per episode, not per look */
		if (!c->credit_stalled) {
			PC_PROBE(credit_stall, c->qpn);
			c->credit_stalled = true;
			STAT_ADD(c->st->credit_stalls, 1);
			STAT_ADD(w->st.credit_stalls, 1);
		}
		return false;
	}
	c->credit_stalled = false;
	c->sent_credited++;
	(*avail)--;
	if (c->granted_published != granted) {
		c->granted_published = granted;
		c->grant_due = 0;
		STAT_ADD(w->st.credit_piggybacks, 1);
	}
	return true;
}

/* Adds @c's queued rendezvous WRs to the chain, in order, while they may go (rndv_pvt.h). */
static void flush_rndv(struct pc_worker *w, struct conn *c, uint32_t space, uint64_t granted,
		       uint64_t *avail)
{
	struct wr_chain *ch = &w->chain;

	while (c->rv.q_head && ch->n < space) {
		struct wr_ctx *ctx = c->rv.q_head;

		/* a DONE or ABORT is credited; a READ waits for the QP's initiator depth */
		if (!rndv_ready(w, c, ctx, space - ch->n) ||
		    ((ctx->kind == WR_RNDV_DONE || ctx->kind == WR_RNDV_ABORT) &&
		     !credit_spend(w, c, granted, avail)))
			break;
		rndv_add(w, c, ctx);
		c->rv.q_head = ctx->next;
	}
	if (!c->rv.q_head)
		c->rv.q_tail = NULL;
}

/*
 * Posts @c's queued rendezvous WRs now, in a chain of their own (rndv.c:
 * a DONE before the message it answers is handed to the application, whose
 * handler may hold the worker for long). Completion context, never while a
 * chain is being built.
 */
void dp_flush_rndv_now(struct pc_worker *w, struct conn *c)
{
	struct wr_chain *ch = &w->chain;
	uint64_t avail = 0;

	if (c->state != CONN_UP)
		return;
	chain_reset(ch);
	flush_rndv(w, c, PC_MIN(sq_space(&c->sq), cq_send_space(w)), c->granted, &avail);
	if (ch->n)
		post_chain(w, c);
}

/* Builds and posts one chain for @c: a credit grant, then its backlog. */
static void flush_conn(struct pc_worker *w, struct conn *c)
{
	struct wr_chain *ch = &w->chain;
	/* within its send queue, and within the room the CQ has for send completions */
	uint32_t space = PC_MIN(sq_space(&c->sq), cq_send_space(w));
	uint64_t granted, avail = 0;
	bool stalled = false;

	chain_reset(ch);
	if (!c->raw) {
		if (c->grant_pending)
			credits_grant(w, c);
		/* a new grant rides on the first message sent (wire_hdr.grant), else waits a
		 * little; a keepalive probe writes the word at once */
		if (space && (c->probe || (c->granted != c->granted_published &&
					   !grant_rides(c, space, &avail) && grant_due(w, c)))) {
			add_credit(w, c);
			c->probe = false;
			space--;
			STAT_ADD(w->st.credit_writes, 1);
		}
	} else if (c->rq_posted + c->held < c->rq_depth) {
		dp_refill_rq(w, c);
	}
	granted = c->granted;
	/* rendezvous READs, DONEs, invalidates first: never behind a send that waits for them */
	if (pc_unlikely(c->rv.q_head))
		flush_rndv(w, c, space, granted, &avail);
	while (c->bl_head && ch->n < space) {
		struct wr_ctx *ctx = c->bl_head;

		if (pc_likely(ctx->kind == WR_MSG)) {
			struct msg *m = pc_container_of(ctx, struct msg, ctx);
			bool large = pc_unlikely(m->pool == POOL_LARGE);

			/* a large-pool message: a window bind and a descriptor, or two SGEs */
			if (large && !rndv_send_ready(w, c, m, space - ch->n)) {
				stalled = true;
				break;
			}
			if (!c->raw && !credit_spend(w, c, granted, &avail)) {
				stalled = true;
				break;
			}
			if (large)
				rndv_add_send(w, c, m);
			else
				add_send(w, c, m);
			STAT_ADD(w->st.tx_msgs, 1);
		} else {
			add_op(w, c, op_of_ctx(ctx));
		}
		c->bl_head = ctx->next;
		STAT_ADD(c->backlog, (uint32_t)-1);
	}
	CONN_GAUGE_SET(c, backlog);
	if (!c->bl_head)
		c->bl_tail = &c->bl_head;
	else if (!stalled)
		STAT_ADD(c->st->sq_stalls, 1);
	if (ch->n)
		post_chain(w, c);
}

void dp_flush(struct pc_worker *w)
{
	struct conn *c = w->dirty;

	w->dirty = NULL;
	while (c) {
		struct conn *next = c->dirty_next;

		c->dirty = false;
		if (c->state == CONN_UP) {
			flush_conn(w, c);
			/* waiting for credits, SRQ room, a probe or a rendezvous WR to go: next turn */
			if (c->bl_head || c->grant_pending || c->probe || c->rv.q_head)
				dp_mark_dirty(w, c);
			/* waiting for a send to carry a grant, or its deadline */
			else if (c->granted != c->granted_published)
				grant_wait_add(w, c);
		}
		c = next;
	}
}

/* Every HOUSEKEEP_TURNS turns while grants wait: past the earliest deadline, flush them all. */
void dp_grant_wait_check(struct pc_worker *w)
{
	struct conn *c = w->grant_wait;

	w->grant_clock = stats_ticks();
	if (w->grant_clock < w->grant_wait_due)
		return;
	/* those not yet due come back to the list from dp_flush() */
	w->grant_wait = NULL;
	w->grant_wait_due = UINT64_MAX;
	while (c) {
		struct conn *next = c->gw_next;

		c->grant_waiting = false;
		dp_mark_dirty(w, c);
		c = next;
	}
}

/* --- submissions ------------------------------------------------------------------------- */

/*
 * @m reached a conn that takes nothing more: given back (a request's call
 * ends, its completion saying -ENOTCONN: 0 then, the call was taken).
 */
int dp_send_refused(struct pc_worker *w, struct msg *m)
{
	struct conn *c = m->ctx.conn;

	if (m->pub.type == PC_MSG_REQUEST && !c->raw) {
		bool completes = m->call_done != NULL;

		call_refused(w, c, m);
		return completes ? 0 : -ENOTCONN;
	}
	m->call_done = NULL;
	dp_msg_release(w, m);
	return -ENOTCONN;
}

/* Reports through done() only, on either path: pc_rdma() then returns 0. */
int dp_rdma(struct pc_worker *w, struct pc_op *op)
{
	struct conn *c = op_priv(op)->ctx.conn;

	if (pc_unlikely(!conn_accepts(c))) {
		op->done(op, -ENOTCONN);
		return 0;
	}
	dp_backlog_add(c, &op_priv(op)->ctx);
	if (c->state == CONN_UP)
		dp_mark_dirty(w, c);
	return 0;
}

void dp_submit(struct pc_worker *w, struct wr_ctx *ctx)
{
	/* read first: the action may hand @ctx back to the application */
	struct conn *c = ctx->conn, *ref = ctx->ref ? c : NULL;

	ctx->ref = 0;
	switch (ctx->action) {
	case ACT_SEND:
		/* pc_send() returned 0 for it already: a refusal now is a drop (a call's completion says so) */
		if (pc_unlikely(!conn_accepts(c)))
			dp_count_dropped(w, c, 1);
		dp_send(w, pc_container_of(ctx, struct msg, ctx));
		break;
	case ACT_WORK: {
		struct pc_work *work = pc_container_of((void *)ctx, struct pc_work, priv);

		work->fn(work);
		break;
	}
	case ACT_CANCEL:
		/* pc_call_cancel(): the request's own cancel_ctx */
		call_cancel_dequeued(w, pc_container_of(ctx, struct msg, cancel_ctx));
		break;
	case ACT_RELEASE:
		dp_msg_release(w, pc_container_of(ctx, struct msg, ctx));
		break;
	case ACT_RDMA:
		dp_rdma(w, op_of_ctx(ctx));
		break;
	default:
		pc_err("%s: bad submission action %u", w->name, ctx->action);
	}
	/* the entry's reference, once the conn is no longer needed for it */
	if (ref)
		conn_put(w, ref);
}

/* --- SRQ ------------------------------------------------------------------------------------ */

void dp_refill_srq(struct pc_worker *w, bool arm)
{
	const struct pc_engine_params *p = w->p;
	uint32_t want = p->srq_depth - w->srq_outstanding, n = 0, i;
	struct ibv_recv_wr *bad = NULL, *head = NULL, **tail = &head, *wr;
	int ret;

	/* regular batches, two polls' worth at most, except the first fill */
	if (!arm)
		want = PC_MIN(want, 2 * p->poll_batch);
	while (n < want) {
		struct pc_buf *b = pc_pool_get(w->rx);

		if (!b)
			break;
		w->rx_msgs[b->index].in_srq = 1;
		*tail = &w->srq_wrs[b->index].wr;
		tail = &(*tail)->next;
		n++;
	}
	if (n) {
		*tail = NULL;
		ret = ibv_post_srq_recv(w->srq, head, &bad);
		i = n;
		if (pc_unlikely(ret)) {
			/* from @bad on, none was posted (no @bad: none at all): back to the pool */
			if (!bad)
				bad = head;
			for (i = 0, wr = head; wr && wr != bad; wr = wr->next)
				i++;
			set_error(pc_neg_errno(ret), "%s port %u: ibv_post_srq_recv of %u failed at %u: %s",
				     w->dev->name, w->dev->port, n, i, strerror(abs(pc_neg_errno(ret))));
			for (wr = bad; wr; wr = wr->next) {
				struct msg *m = pc_container_of((struct wr_ctx *)(uintptr_t)wr->wr_id,
								struct msg, rctx);

				m->in_srq = 0;
				pc_pool_put(w->rx, m->buf);
			}
		}
		w->srq_outstanding += i;
		PC_PROBE(srq_refill, i, w->srq_outstanding);
		STAT_ADD(w->st.srq_posted, i);
		STAT_ADD(w->st.srq_doorbells, 1);
	}

	/*
	 * IBV_EVENT_SRQ_LIMIT_REACHED: taken with an exchange, so an event the
	 * control thread flags after a re-arm is never overwritten; counted
	 * once, re-armed once refilled.
	 */
	if (atomic_load_explicit(&w->srq_limit, memory_order_relaxed) &&
	    atomic_exchange_explicit(&w->srq_limit, 0, memory_order_relaxed)) {
		STAT_ADD(w->st.srq_limit_events, 1);
		w->srq_rearm = true;
		pc_debug("%s: SRQ limit reached (%u posted); refilling", w->name, w->srq_outstanding);
	}
	if ((arm || w->srq_rearm) && w->srq_outstanding >= p->srq_watermark) {
		struct ibv_srq_attr a = { .srq_limit = PC_MAX(p->srq_watermark / 2, 1u) };

		ret = ibv_modify_srq(w->srq, &a, IBV_SRQ_LIMIT);
		if (ret)
			pc_warn("%s: %s: ibv_modify_srq(srq_limit %u): %s", w->name, w->dev->name,
				a.srq_limit, strerror(abs(pc_neg_errno(ret))));
		w->srq_rearm = false;
	}
	__atomic_store_n(&w->st.srq_outstanding, w->srq_outstanding, __ATOMIC_RELAXED);
}

/*
 * Tops up a raw peer's own receive queue: its buffers posted or held by the
 * application never exceed its depth, whatever it sends, and come from the
 * raw pool, never from the SRQ's. Posted in batches of RQ_REFILL_BATCH.
 */
void dp_refill_rq(struct pc_worker *w, struct conn *c)
{
	struct ibv_recv_wr *bad = NULL;
	uint32_t n, i, k;
	int ret;

	do {
		n = 0;
		while (n < RQ_REFILL_BATCH && c->rq_posted + c->held + n < c->rq_depth) {
			struct pc_buf *b = pc_pool_get(w->raw);
			struct msg *m;

			if (!b)
				break;
			m = &w->raw_msgs[b->index];
			m->in_rq = 1;
			m->rctx.conn = c;
			w->rsge[n] = (struct ibv_sge){ (uintptr_t)b->addr, c->rq_size, b->lkey };
			w->rwr[n] = (struct ibv_recv_wr){ .wr_id = (uintptr_t)&m->rctx,
							  .next = &w->rwr[n + 1],
							  .sg_list = &w->rsge[n],
							  .num_sge = 1 };
			n++;
		}
		if (!n)
			return;
		w->rwr[n - 1].next = NULL;
		ret = ibv_post_recv(c->qp, w->rwr, &bad);
		i = n;
		if (pc_unlikely(ret)) {
			i = bad ? (uint32_t)(bad - w->rwr) : 0;
			pc_warn("%s port %u qp 0x%x: ibv_post_recv of %u failed at %u: %s",
				w->dev->name, w->dev->port, c->qpn, n, i,
				strerror(abs(pc_neg_errno(ret))));
			for (k = i; k < n; k++) {
				struct msg *m = pc_container_of(
					(struct wr_ctx *)(uintptr_t)w->rwr[k].wr_id, struct msg, rctx);

				m->in_rq = 0;
				pc_pool_put(w->raw, m->buf);
			}
		}
		c->rq_posted += i;
	} while (i == RQ_REFILL_BATCH);
}
