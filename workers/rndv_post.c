// SPDX-License-Identifier: MIT
/*
 * Rendezvous, posting (layer "protocols", docs/architecture.md): a large
 * message's window bind and descriptor, and the READs, DONEs, aborts and
 * invalidates queued on a connection (struct rndv_conn's q), added to the
 * chain that flush.c builds, or posted at once in a chain of their own
 * (rndv_flush_now()). Worker thread. rndv.c has the exchange.
 */
#include "rndv_pvt.h"

#include <string.h>

#define HDR WIRE_HDR_LEN

bool rndv_send_ready(struct pc_worker *w, struct conn *c, struct msg *m, uint32_t room)
{
	struct lmsg *lm = lm_of(m);

	/* given back by a call that ended before its DONE: sent again once that came */
	if (lm->state != LM_IDLE)
		return false;
	if (m->pub.len <= w->p->msg_size)
		return room >= 1;
	return room >= 2 && c->rv.tx_open < WIRE_RNDV_MAX && lm->mw;
}

void rndv_add_send(struct pc_worker *w, struct conn *c, struct msg *m)
{
	struct rndv_pool *rv = w->rv;
	struct lmsg *lm = lm_of(m);
	uint32_t len = m->pub.len;
	struct ibv_send_wr *wr;

	/* this send's outcome is what an application buffer's released() will say */
	lm->zc_ok = false;
	lm->zc_status = 0;
	lm->send_done = false;
	if (len <= w->p->msg_size) {
		/* an ordinary message from a large buffer (a small reply in place): header, payload */
		wire_hdr_fill((struct wire_hdr *)(void *)lm->slot, m->pub.type, len, m->pub.req_id,
			      c->granted);
		lm->sge[0] = (struct ibv_sge){ (uintptr_t)lm->slot, HDR, rv->slots_mr->lkey };
		lm->sge[1] = (struct ibv_sge){ (uintptr_t)m->pub.data, len, lm_mr(rv, lm)->lkey };
		wr = chain_add(&w->chain);
		wr->sg_list = lm->sge;
		wr->num_sge = len ? 2 : 1;
		wr->opcode = IBV_WR_SEND;
		wr->send_flags = 0;
		wr->wr_id = (uintptr_t)&m->ctx;
	} else {
		struct wire_rndv d = {
			.inner = m->pub.type,
			.addr = (uintptr_t)m->pub.data,
			.len = len,
		};

		/* a new rkey per bind: one given out before never names these bytes again */
		lm->gen++;
		lm->rkey = ibv_inc_rkey(lm->rkey);
		d.rkey = lm->rkey;
		d.token = (uint64_t)lm->gen << 32 | lm_index(rv, lm);
		wr = chain_add(&w->chain);
		wr->opcode = IBV_WR_BIND_MW;
		wr->num_sge = 0;
		wr->send_flags = 0;
		/*
		 * Observed on rxe (rdma-core 44): a BIND_MW whose imm_data is not 0
		 * fails ibv_post_send with EINVAL; the chain's WRs are reused, and
		 * a LOCAL_INV leaves its rkey in that union.
		 */
		wr->imm_data = 0;
		wr->wr_id = (uintptr_t)&lm->bind_ctx;
		wr->bind_mw.mw = lm->mw;
		wr->bind_mw.rkey = lm->rkey;
		wr->bind_mw.bind_info = (struct ibv_mw_bind_info){
			.mr = lm_mr(rv, lm),
			.addr = (uintptr_t)m->pub.data,
			.length = len,
			.mw_access_flags = IBV_ACCESS_REMOTE_READ,
		};
		lm->bind_ctx.conn = c;
		wire_hdr_fill((struct wire_hdr *)(void *)lm->slot, WIRE_RNDV, sizeof(d),
			      m->pub.req_id, c->granted);
		memcpy(lm->slot + HDR, &d, sizeof(d));
		wr = chain_add(&w->chain);
		wr->sg_list->addr = (uintptr_t)lm->slot;
		wr->sg_list->length = HDR + sizeof(d);
		wr->sg_list->lkey = rv->slots_mr->lkey;
		wr->num_sge = 1;
		wr->opcode = IBV_WR_SEND;
		wr->send_flags = HDR + sizeof(d) <= c->max_inline ? IBV_SEND_INLINE : 0;
		wr->wr_id = (uintptr_t)&m->ctx;
		lm->state = LM_BOUND;
		lm->rv_conn = c;
		c->rv.tx_open++;
		/* the DONE deadline's clock (rndv_overdue()): no system call */
		lm->sent_ns = coarse_ns();
		rndv_tx_link(w, c, lm);
		STAT_ADD(w->st.rndv_sent, 1);
	}
	m->ctx.conn = c;
	STAT_ADD(c->st->msgs_sent, 1);
	STAT_ADD(c->st->bytes_sent, len);
}

bool rndv_ready(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, uint32_t room)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	(void)w;
	if (!room)
		return false;
	if (ctx->kind != WR_RNDV_READ)
		return true;
	/* READs in flight stay within the QP's initiator depth, asked once */
	if (pc_unlikely(!c->rv.rd_depth)) {
		memset(&a, 0, sizeof(a));
		c->rv.rd_depth = ibv_query_qp(c->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC, &ia) ||
				 !a.max_rd_atomic ? 1 : a.max_rd_atomic;
	}
	return c->rv.reads < c->rv.rd_depth;
}

void rndv_add(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx)
{
	struct rndv_pool *rv = w->rv;
	struct ibv_send_wr *wr = chain_add(&w->chain);
	struct lmsg *lm;

	wr->send_flags = 0;
	wr->wr_id = (uintptr_t)ctx;
	switch (ctx->kind) {
	case WR_RNDV_READ:
		lm = pc_container_of(ctx, struct lmsg, rd_ctx);
		wr->sg_list->addr = (uintptr_t)lm_data(rv, lm);
		wr->sg_list->length = lm->rd.len;
		wr->sg_list->lkey = lm_mr(rv, lm)->lkey;
		wr->num_sge = 1;
		wr->opcode = IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = lm->rd.addr;
		wr->wr.rdma.rkey = lm->rd.rkey;
		c->rv.reads++;
		break;
	case WR_RNDV_INV:
		lm = pc_container_of(ctx, struct lmsg, inv_ctx);
		wr->num_sge = 0;
		wr->opcode = IBV_WR_LOCAL_INV;
		wr->invalidate_rkey = lm->rkey;
		break;
	default: { /* WR_RNDV_DONE or WR_RNDV_ABORT; its credit is taken (flush_conn()) */
		struct wire_done dn;
		uint8_t type = WIRE_DONE;

		if (ctx->kind == WR_RNDV_ABORT) {
			/* the sender's own token; the slot's DONE half is free on a sending block */
			lm = pc_container_of(ctx, struct lmsg, abort_ctx);
			dn = (struct wire_done){ .token = (uint64_t)lm->gen << 32 | lm_index(rv, lm) };
			type = WIRE_ABORT;
		} else {
			lm = pc_container_of(ctx, struct lmsg, done_ctx);
			dn = (struct wire_done){ .token = lm->done_token };
		}
		wire_hdr_fill((struct wire_hdr *)(void *)(lm->slot + RNDV_DONE_OFF), type,
			      sizeof(dn), 0, c->granted);
		memcpy(lm->slot + RNDV_DONE_OFF + HDR, &dn, sizeof(dn));
		wr->sg_list->addr = (uintptr_t)(lm->slot + RNDV_DONE_OFF);
		wr->sg_list->length = HDR + sizeof(dn);
		wr->sg_list->lkey = rv->slots_mr->lkey;
		wr->num_sge = 1;
		wr->opcode = IBV_WR_SEND;
		wr->send_flags = HDR + sizeof(dn) <= c->max_inline ? IBV_SEND_INLINE : 0;
		break;
	}
	}
}

/* Adds @c's queued rendezvous WRs to the chain, in order, while they may go (rndv_pvt.h). */
void rndv_flush(struct pc_worker *w, struct conn *c, uint32_t space, uint64_t granted,
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
void rndv_flush_now(struct pc_worker *w, struct conn *c)
{
	struct wr_chain *ch = &w->chain;
	uint64_t avail = 0;

	if (c->state != CONN_UP)
		return;
	chain_reset(ch);
	rndv_flush(w, c, PC_MIN(sq_space(&c->sq), cq_send_space(w)), c->granted, &avail);
	if (ch->n)
		dp_post_chain(w, c);
}
