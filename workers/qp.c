// SPDX-License-Identifier: MIT
/*
 * Verbs objects whose flavour depends on the device, chosen once at setup:
 *  - the domain: a thread domain and parent domain, so the provider takes
 *    no locks for the worker's QPs and SRQ, where it has them (not rxe);
 *  - the CQ: single-threaded (ibv_create_cq_ex) where the provider takes
 *    the flag, else plain; polled with ibv_poll_cq() either way (extended
 *    CQ polling is broken on rxe: see docs/architecture.md);
 *  - the QP: with ibv_qp_ex send ops (ibv_wr_* posting) on mlx5, or when
 *    asked for with PC_POST_WR_EX; plain otherwise.
 * Control thread (QPs) and worker thread (CQ), at setup only.
 */

#include "worker_pvt.h"

#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"


/* The worker running on this thread, if any (worker_pvt.h). */
SELF_WORKER_TLS struct pc_worker *self_worker;

/*
 * No mlx5 CQE compression, on purpose: a compressed CQ carries mini-CQEs
 * that must be expanded by whoever parses the CQ (UCX and DPDK do it in
 * their own mlx5 code), and we found nothing showing that rdma-core's
 * ibv_poll_cq() path does. Compression is only for a poller that parses
 * the CQ itself, which pollcore does not have, and nothing here could
 * test it (rxe has no such thing).
 */
int worker_create_cq(struct pc_worker *w, int cqe)
{
	struct pc_dev *d = w->dev;
	struct ibv_cq_init_attr_ex a = {
		.cqe = (uint32_t)cqe,
		.cq_context = w,
		.channel = w->ch,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		/* polled by this worker alone: no lock in the provider's poll */
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *cqx;

	if (w->td) {
		a.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
		a.parent_domain = w->pd;
	}
	/* still polled with ibv_poll_cq(): rxe's extended polling is broken */
	cqx = ibv_create_cq_ex(d->ctx, &a);
	if (cqx) {
		w->cq = ibv_cq_ex_to_cq(cqx);
		w->cq_single = true;
		return 0;
	}
	pc_debug("%s: ibv_create_cq_ex(single-threaded): %s; a plain CQ", w->name,
		 strerror(errno));
	w->cq = ibv_create_cq(d->ctx, cqe, w, w->ch, 0);
	if (!w->cq)
		return set_error(pc_neg_errno(-1), "%s port %u: ibv_create_cq(%d): %s", d->name,
				    d->port, cqe, strerror(errno));
	return 0;
}

/* A thread domain and a parent domain for @w's QPs and SRQ, where the provider has them. */
void worker_create_domain(struct pc_worker *w)
{
	struct pc_dev *d = w->dev;
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_parent_domain_init_attr pa = { .pd = d->pd };

	w->pd = d->pd;
	w->td = ibv_alloc_td(d->ctx, &ta);
	if (!w->td) {
		w->domain = "no thread domain (provider locks kept)";
		return;
	}
	pa.td = w->td;
	w->pd = ibv_alloc_parent_domain(d->ctx, &pa);
	if (!w->pd) {
		ibv_dealloc_td(w->td);
		w->td = NULL;
		w->pd = d->pd;
		w->domain = "no parent domain (provider locks kept)";
		return;
	}
	w->domain = "thread domain";
}

void worker_destroy_domain(struct pc_worker *w)
{
	if (!w->td)
		return;
	ibv_dealloc_pd(w->pd);
	ibv_dealloc_td(w->td);
	w->td = NULL;
	w->pd = w->dev->pd;
}

/* Whether QPs on @w post through ibv_qp_ex (decided per device, logged by the worker). */
bool worker_wants_wr_ex(const struct pc_worker *w)
{
	const char *env = getenv("PC_POST_WR_EX");

	if (env)
		return strcmp(env, "0") != 0;
	return w->dev->mlx5dv;
}

/*
 * The attributes of @c's QP on @w, or with @c NULL those of a credited
 * conn's (worker_probe_inline()'s). The inline size is the one
 * worker_probe_inline() found the device takes.
 */
static void qp_attr_fill(struct pc_worker *w, struct conn *c, struct ibv_qp_init_attr_ex *attr)
{
	bool raw = c && c->raw;

	*attr = (struct ibv_qp_init_attr_ex){
		.qp_context = c,
		.send_cq = w->cq,
		.recv_cq = w->cq,
		.srq = w->srq,
		.cap = {
			.max_send_wr = w->p->sq_depth,
			.max_send_sge = 1,
			.max_inline_data = w->max_inline,
		},
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = w->pd,
	};
	/* a raw peer (no credits) receives into its own queue, never the SRQ */
	if (raw) {
		attr->srq = NULL;
		attr->cap.max_recv_wr = c->rq_depth;
		attr->cap.max_recv_sge = 1;
	}
	if (w->wr_ex) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		attr->send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				       IBV_QP_EX_WITH_RDMA_READ;
		if (w->rv)
			attr->send_ops_flags |= IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
	}
	/* a small message sent from a large-pool buffer: header and payload, two SGEs (rndv.c) */
	if (w->rv && !raw)
		attr->cap.max_send_sge = 2;
}

/*
 * Sets w->max_inline: pc_engine_params.max_inline, or less where the
 * device takes less. Providers refuse a QP that asks for more inline data
 * than they have (rxe and mlx5 say EINVAL) rather than grant less, and a
 * refusal on a connection's rdma_cm id would refuse the connection: so a
 * QP of the worker's own kind, on no id, is created once here with the
 * size halved until one is taken, and destroyed. Worker thread, at setup
 * (after the CQ, the SRQ and the rendezvous pool).
 */
int worker_probe_inline(struct pc_worker *w)
{
	uint32_t want = w->p->max_inline == PC_INLINE_NONE ? 0 : w->p->max_inline;
	struct ibv_qp_init_attr_ex attr;
	struct ibv_qp *qp;

	for (;;) {
		w->max_inline = want;
		qp_attr_fill(w, NULL, &attr);
		qp = ibv_create_qp_ex(w->dev->ctx, &attr);
		if (qp)
			break;
		if (errno != EINVAL || !want)
			return set_error(pc_neg_errno(-1),
					 "%s port %u: ibv_create_qp_ex (max_inline_data %u, %u send WRs): %s",
					 w->dev->name, w->dev->port, want, w->p->sq_depth,
					 strerror(errno));
		want /= 2;
	}
	ibv_destroy_qp(qp);
	if (w->p->max_inline != PC_INLINE_NONE && want < w->p->max_inline)
		pc_info("%s: %s refuses %u bytes inline (max_inline); its QPs ask for %u",
			w->name, w->dev->name, w->p->max_inline, want);
	return 0;
}

int worker_create_qp(struct pc_worker *w, struct conn *c, struct rdma_cm_id *id)
{
	const struct pc_engine_params *p = w->p;
	struct ibv_qp_init_attr_ex attr;
	int ret;

	qp_attr_fill(w, c, &attr);
	c->sq.slot = calloc(p->sq_depth, sizeof(*c->sq.slot));
	c->credit_word = aligned_alloc(PC_CACHELINE, PC_CACHELINE);
	if (!c->sq.slot || !c->credit_word || reqset_init(&c->reqs, p->window))
		return -ENOMEM;
	memset((void *)c->credit_word, 0, PC_CACHELINE);
	/* the peer may write exactly these 16 bytes: its grant and our outgoing copy */
	c->credit_mr = ibv_reg_mr(w->dev->pd, (void *)c->credit_word, 2 * sizeof(uint64_t),
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->credit_mr)
		return set_error(pc_neg_errno(-1), "%s: ibv_reg_mr(credit word): %s",
				    w->dev->name, strerror(errno));
	ret = rdma_create_qp_ex(id, &attr);
	if (ret)
		return set_error(pc_neg_errno(-1), "%s port %u: rdma_create_qp_ex on %s%s: %s",
				    w->dev->name, id->port_num, w->name,
				    w->wr_ex ? " (ibv_wr_* send ops)" : "", strerror(errno));
	c->w = w;
	c->qp = id->qp;
	c->qpx = w->wr_ex ? ibv_qp_to_qp_ex(id->qp) : NULL;
	c->qpn = id->qp->qp_num;
	c->max_inline = attr.cap.max_inline_data;
	/*
	 * Observed on rxe (rdma-core 44): ibv_wr_set_inline_data() on an RDMA
	 * WRITE completes with IBV_WC_LOC_QP_OP_ERR. Inline through ibv_wr_*
	 * only where it is known good (mlx5); the generic path keeps it.
	 */
	if (w->wr_ex && !w->dev->mlx5dv)
		c->max_inline = 0;
	c->sq.depth = p->sq_depth;
	c->sq.mask = p->sq_depth - 1;
	c->sq.signal_every = p->signal_every;
	c->credit_ctx = (struct wr_ctx){ .kind = WR_CREDIT, .conn = c };
	c->marker_ctx = (struct wr_ctx){ .kind = WR_MARKER, .conn = c };
	c->inline_ctx = (struct wr_ctx){ .kind = WR_INLINE, .conn = c };
	c->bl_tail = &c->bl_head;
	c->cw_tail = &c->cw_head;
	return 0;
}

/* @c retires: its last counts go back into the conn, its slot is free again. */
void worker_stats_release(struct pc_worker *w, struct conn *c)
{
	struct pc_stats_conn *slot = c->st;

	if (slot == &c->st_local)
		return;
	c->st_local = *slot;
	/* release: st_local is complete before anyone reads it through c->st */
	__atomic_store_n(&c->st, &c->st_local, __ATOMIC_RELEASE);
	wstats_slot_close(&w->ws, slot);
}
