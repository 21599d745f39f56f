// SPDX-License-Identifier: MIT
/*
 * Posting (layer "posting", docs/architecture.md): a chain of send WRs
 * posted with one doorbell (ibv_post_send(), or the ibv_wr_* API), what
 * happens when that fails, and the receive refills (the SRQ; raw peers'
 * own queues). Worker thread. The bottom of the worker's data path: it
 * calls nothing of the layers above but through the worker's callbacks
 * (struct worker_up): a WR that could not be posted is retired as failed
 * (dp_wr_failed()), its connection fails (drain_fail()); both cold.
 * The chains are built by flush.c and rndv_post.c (post_pvt.h's
 * dp_post_chain()).
 */
#include "post_pvt.h"

#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

/*
 * Fails the WRs of a chain that could not be posted: they were already
 * taken from the backlog and pushed on the send queue.
 */
static void chain_fail(struct pc_worker *w, struct conn *c, uint32_t from, int err)
{
	uint32_t i, n = w->chain.n - from;

	sq_unpush(&c->sq, n);
	for (i = from; i < w->chain.n; i++)
		w->up.wr_failed(w, (struct wr_ctx *)(uintptr_t)w->chain.wr[i].wr_id, err);
}

int dp_post(struct pc_worker *w, struct conn *c, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return dp_post_fast(w, c, wr, bad);
}

/* The chain's post failed at @bad: what was not posted fails, and @c closes. */
pc_cold void dp_post_failed(struct pc_worker *w, struct conn *c, int ret, struct ibv_send_wr *bad)
{
	struct wr_chain *ch = &w->chain;
	uint32_t i = bad ? (uint32_t)(bad - ch->wr) : 0;

	STAT_ADD(w->st.wrs_posted, i);
	ret = set_error(pc_neg_errno(ret), "%s port %u qp 0x%x: ibv_post_send of %u WRs failed at %u: %s",
			w->dev->name, w->dev->port, c->qpn, ch->n, i, strerror(abs(pc_neg_errno(ret))));
	chain_fail(w, c, i, ret);
	w->up.fail(w, c, ret);
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
