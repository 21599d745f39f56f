/* SPDX-License-Identifier: MIT */
/*
 * Layer "posting" (docs/architecture.md): post.c. A chain of send WRs
 * posted with one doorbell, the receive refills. Worker thread.
 */
#ifndef PC_POST_PVT_H
#define PC_POST_PVT_H

#include "worker_pvt.h"

/* dp_post_fast(), out of line: the cold posts (a drain's marker). */
int dp_post(struct pc_worker *w, struct conn *c, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
/* The chain's post failed at @bad: what was not posted fails, and @c closes. */
void dp_post_failed(struct pc_worker *w, struct conn *c, int ret, struct ibv_send_wr *bad);
/* Tops the SRQ up, two polls' worth at most (@arm: the first fill, and the limit armed). */
void dp_refill_srq(struct pc_worker *w, bool arm);
/* Tops up raw peer @c's own receive queue. */
void dp_refill_rq(struct pc_worker *w, struct conn *c);

/*
 * Posts a linked list of WRs with one doorbell: ibv_post_send(), or the
 * ibv_wr_* API on an ibv_qp_ex (all or nothing). Specialised at compile
 * time on @wr_ex; dp_post_fast() picks the variant per worker, inline where
 * it is hot (dp_post_chain()); dp_post() is the same, out of line.
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

static pc_always_inline int dp_post_fast(struct pc_worker *w, struct conn *c,
					 struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return w->wr_ex ? post_wrs(c, wr, bad, true) : post_wrs(c, wr, bad, false);
}

/*
 * Posts the chain built in w->chain on @c with one doorbell: each WR pushed
 * on @c's send queue (signaled every Nth and the last), counted. Inline:
 * once per chain, in flush.c and rndv_post.c.
 *
 * The last is signaled so that buffers and callbacks never wait for later
 * traffic; not an inline SEND whose buffer went back at its post
 * (c->inline_ctx, flush.c), which has nothing to wait for, while the CQ
 * has room to spare: such WRs left unsignaled at the end of a send queue
 * keep their slots until a later signaled WR (at most signal_every - 1
 * per connection; half the CQ's send room then makes the last signaled
 * again, so those of quiet connections never starve the others).
 */
static pc_always_inline void dp_post_chain(struct pc_worker *w, struct conn *c)
{
	struct wr_chain *ch = &w->chain;
	struct ibv_send_wr *bad = NULL;
	struct wr_ctx *ctx;
	uint32_t i, last = ch->n - 1;
	int ret;

	for (i = 0; i < last; i++) {
		ctx = (struct wr_ctx *)(uintptr_t)ch->wr[i].wr_id;
		if (sq_push(&c->sq, ctx, false, false))
			ch->wr[i].send_flags |= IBV_SEND_SIGNALED;
	}
	ctx = (struct wr_ctx *)(uintptr_t)ch->wr[last].wr_id;
	if (sq_push(&c->sq, ctx, ctx != &c->inline_ctx || w->sq_wrs + ch->n >= w->cq_send_cap / 2,
		    false))
		ch->wr[last].send_flags |= IBV_SEND_SIGNALED;
	w->sq_wrs += ch->n;
	ret = dp_post_fast(w, c, ch->wr, &bad);
	PC_PROBE(post_batch, c->qpn, ch->n);
	STAT_ADD(w->st.doorbells, 1);
	if (pc_likely(!ret))
		STAT_ADD(w->st.wrs_posted, ch->n);
	else
		dp_post_failed(w, c, ret, bad);
}

#endif /* PC_POST_PVT_H */
