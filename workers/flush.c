// SPDX-License-Identifier: MIT
/*
 * Flushing (layer "dispatch", docs/architecture.md): at each turn's end,
 * one WR chain per connection that has something to post, built from its
 * backlog (the credit grant first, when one is due; rendezvous WRs before
 * sends; each credited message spending a credit) and posted with one
 * doorbell (post_pvt.h); the grant-wait list; the application's
 * submissions. Worker thread. workers/complete.c has the completion side.
 */
#include "dp_pvt.h"

#include "log_pvt.h"

/* --- building and posting chains -------------------------------------------------------- */

/*
 * Adds @m's SEND to the chain, with @packed bytes of messages packed behind
 * it (pack_behind()). Returns true when its buffer goes back as soon as
 * the chain is posted (flush_conn()): an inline SEND's bytes are copied
 * into the WQE by the post, so nothing waits for its completion. Its WR
 * then names c->inline_ctx, which only counts a failure. Not a raw peer's
 * (no keepalive probe would notice its send queue stall, see keepalive.c),
 * nor the request of a call with a completion, whose buffer stays with its
 * call, nor a pack, whose failure counts every message in it (m->pack_n).
 * A call without one keeps nothing in its buffer (its reqset entry holds
 * its id and clock), which goes back at its send completion otherwise.
 */
static pc_always_inline bool add_send(struct pc_worker *w, struct conn *c, struct msg *m,
				      uint32_t packed)
{
	struct ibv_send_wr *wr = chain_add(&w->chain);
	uint32_t bytes = m->pub.len;
	bool early;

	if (!c->raw) {
		wire_hdr_fill(m->buf->addr, (uint8_t)(m->pub.type | (packed ? WIRE_MORE : 0)),
			      m->pub.len, m->pub.req_id, c->granted);
		bytes += WIRE_HDR_LEN + packed;
	}
	wr->sg_list->addr = (uintptr_t)m->buf->addr;
	wr->sg_list->length = bytes;
	wr->sg_list->lkey = m->buf->lkey;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	early = bytes <= c->max_inline && !c->raw && !m->call_done && !packed;
	wr->send_flags = bytes <= c->max_inline ? IBV_SEND_INLINE : 0;
	wr->wr_id = early ? (uintptr_t)&c->inline_ctx : (uintptr_t)&m->ctx;
	m->ctx.conn = c;
	STAT_ADD(c->st->msgs_sent, 1);
	STAT_ADD(c->st->bytes_sent, m->pub.len);
	return early;
}

/* A message that may carry others behind it in its buffer: one-way, of a size that keeps them aligned. */
static pc_always_inline bool pack_head(const struct msg *m)
{
	return m->pool == POOL_TX && m->pub.type == PC_MSG_ONEWAY && !m->call_done &&
	       m->pub.len % WIRE_PACK_ALIGN == 0;
}

/*
 * Packs the one-way messages that follow @m in @c's backlog into @m's
 * buffer, each a frame of its header and payload (core/wire.h), while they
 * fit in the peer's receive (c->pack_room) and in @m's buffer: what a
 * sender posts as many small SENDs the peer receives as one, one credit
 * and one packet for up to WIRE_PACK_MAX messages. Each is copied, leaves
 * the backlog (*@next moves past it) and joins @early: its buffer goes
 * back once the chain is posted. Returns the bytes appended.
 */
static pc_noinline uint32_t pack_behind(struct pc_worker *w, struct conn *c, struct msg *m,
					struct wr_ctx **next, struct wr_ctx **early)
{
	char *base = m->buf->addr;
	uint32_t room = PC_MIN(c->pack_room, w->p->msg_size + WIRE_HDR_LEN);
	uint32_t start = WIRE_HDR_LEN + m->pub.len, off = start, last_len = m->pub.len;
	struct wire_hdr *last = NULL;
	unsigned int n = 0;

	/* msg_check() kept it within both; a message that is not stays alone */
	if (pc_unlikely(off > room))
		return 0;
	while (*next && n < WIRE_PACK_MAX - 1 && (*next)->kind == WR_MSG &&
	       last_len % WIRE_PACK_ALIGN == 0) {
		struct wr_ctx *ctx = *next;
		struct msg *f = pc_container_of(ctx, struct msg, ctx);

		if (f->pub.type != PC_MSG_ONEWAY || f->call_done || f->pool == POOL_LARGE ||
		    room - off < WIRE_HDR_LEN || f->pub.len > room - off - WIRE_HDR_LEN)
			break;
		if (last)
			last->type |= WIRE_MORE;
		last = (struct wire_hdr *)(void *)(base + off);
		wire_hdr_fill(last, WIRE_ONEWAY, f->pub.len, f->pub.req_id, c->granted);
		memcpy(base + off + WIRE_HDR_LEN, f->pub.data, f->pub.len);
		off += WIRE_HDR_LEN + f->pub.len;
		last_len = f->pub.len;
		STAT_ADD(c->st->msgs_sent, 1);
		STAT_ADD(c->st->bytes_sent, f->pub.len);
		*next = ctx->next;
		ctx->next = *early;
		*early = ctx;
		n++;
	}
	m->pack_n = (uint8_t)n;
	STAT_ADD(w->st.tx_msgs, n);
	STAT_ADD(c->backlog, (uint32_t)-n);
	return off - start;
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
 * Builds and posts one chain for @c: a credit grant, then its backlog.
 * Returns the messages whose buffers go back now that it is posted
 * (add_send()'s inline ones, pack_behind()'s), linked by ctx.next:
 * dp_flush() gives them back once it has decided @c's next turn, so that
 * their grants wait for a carrier as those of buffers back from a
 * completion do (grant_defer()).
 */
static struct wr_ctx *flush_conn(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *early = NULL;
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
	if (pc_unlikely(c->rv.q_head)) {
		/* a copy goes out of this file: @avail itself stays in a register for the loop */
		uint64_t left = avail;

		rndv_flush(w, c, space, granted, &left);
		avail = left;
	}
	while (c->bl_head && ch->n < space) {
		struct wr_ctx *ctx = c->bl_head, *next = ctx->next;

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
			if (large) {
				rndv_add_send(w, c, m);
			} else {
				uint32_t packed = 0;

				m->pack_n = 0;
				if (c->pack_room && next && pack_head(m))
					packed = pack_behind(w, c, m, &next, &early);
				if (add_send(w, c, m, packed)) {
					ctx->next = early;
					early = ctx;
				}
			}
			STAT_ADD(w->st.tx_msgs, 1);
		} else {
			add_op(w, c, op_of_ctx(ctx));
		}
		c->bl_head = next;
		STAT_ADD(c->backlog, (uint32_t)-1);
	}
	CONN_GAUGE_SET(c, backlog);
	if (!c->bl_head)
		c->bl_tail = &c->bl_head;
	else if (!stalled)
		STAT_ADD(c->st->sq_stalls, 1);
	if (ch->n)
		dp_post_chain(w, c);
	return early;
}

void dp_flush(struct pc_worker *w)
{
	struct conn *c = w->dirty;

	w->dirty = NULL;
	while (c) {
		struct conn *next = c->dirty_next;

		c->dirty = false;
		if (c->state == CONN_UP) {
			struct wr_ctx *early = flush_conn(w, c);

			/* waiting for credits, SRQ room, a probe or a rendezvous WR to go: next turn */
			if (c->bl_head || c->grant_pending || c->probe || c->rv.q_head)
				dp_mark_dirty(w, c);
			/* waiting for a send to carry a grant, or its deadline */
			else if (c->granted != c->granted_published)
				grant_wait_add(w, c);
			/* posted (or failed, counted by their WRs): their buffers are free */
			while (early) {
				struct wr_ctx *e = early;

				early = e->next;
				dp_msg_release(w, pc_container_of(e, struct msg, ctx));
			}
		}
		c = next;
	}
	/* the credits granted in this flush (credits_grant()), for readers: once */
	credits_publish(w);
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
