// SPDX-License-Identifier: MIT
/*
 * Rendezvous: the large-message pool of a worker, set up and torn down
 * (worker thread, at its start and end). See rndv_pvt.h and rndv.c.
 */
#include "rndv_pvt.h"

#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"
/* --- setup and teardown ------------------------------------------------------------------ */

static atomic_bool said_no_mw;

int rndv_setup(struct pc_worker *w, bool numa)
{
	const struct pc_engine_params *p = w->p;
	struct pc_dev *d = w->dev;
	int caps = d->dev_attr.device_cap_flags;
	struct rndv_pool *rv;
	uint32_t i, n, nb;
	int ret;

	if (p->max_msg_size <= p->msg_size)
		return 0;
	if (!(caps & IBV_DEVICE_MEM_WINDOW) ||
	    !(caps & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B))) {
		if (!atomic_exchange(&said_no_mw, true))
			pc_info("%s: no type-2 memory windows: no rendezvous, messages up to msg_size "
				"(%u bytes)", d->name, p->msg_size);
		return 0;
	}
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv->size = (p->large_pool_size + (1ull << RNDV_MIN_SHIFT) - 1) &
		   ~((1ull << RNDV_MIN_SHIFT) - 1);
	rv->max_large = p->max_msg_size;
	ret = blkalloc_init(&rv->bd, rv->size, RNDV_MIN_SHIFT);
	if (ret)
		goto err_rv;
	/* the blocks, then the application's buffers (rndv_zc.c) */
	nb = rv->bd.nblocks;
	n = nb + RNDV_ZC_SLOTS;
	rv->nlm = n;
	rv->numa = numa;
	rv->base = numa ? pc_numa_alloc(w->topo, rv->size, w->place->numa_node)
			: aligned_alloc(4096, rv->size);
	rv->slots = aligned_alloc(PC_CACHELINE, (size_t)n * RNDV_SLOT);
	rv->lm = calloc(n, sizeof(*rv->lm));
	ret = -ENOMEM;
	if (!rv->base || !rv->slots || !rv->lm)
		goto err_mem;
	/* never REMOTE_READ: a peer reads only through a window bound for it */
	rv->mr = ibv_reg_mr(d->pd, rv->base, rv->size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!rv->mr) {
		ret = set_error(pc_neg_errno(-1), "%s: ibv_reg_mr of the large pool (%llu bytes): %s",
				d->name, (unsigned long long)rv->size, strerror(errno));
		goto err_mem;
	}
	rv->slots_mr = ibv_reg_mr(d->pd, rv->slots, (size_t)n * RNDV_SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!rv->slots_mr) {
		ret = set_error(pc_neg_errno(-1), "%s: ibv_reg_mr of the rendezvous slots: %s",
				d->name, strerror(errno));
		goto err_mr;
	}
	for (i = 0; i < n; i++) {
		struct lmsg *lm = &rv->lm[i];

		lm->m.w = w;
		lm->m.pool = POOL_LARGE;
		lm->m.ctx.kind = WR_MSG;
		lm->m.rctx.kind = WR_RECV;
		lm->m.cancel_ctx = (struct wr_ctx){ .kind = WR_MSG, .action = ACT_CANCEL };
		/* after the worker's other messages (msg_by_gidx()) */
		lm->m.gidx = p->rx_bufs + p->tx_bufs + p->raw_bufs + w->npack + i;
		lm->bind_ctx.kind = WR_RNDV_BIND;
		lm->inv_ctx.kind = WR_RNDV_INV;
		lm->rd_ctx.kind = WR_RNDV_READ;
		lm->done_ctx.kind = WR_RNDV_DONE;
		lm->abort_ctx.kind = WR_RNDV_ABORT;
		lm->slot = rv->slots + (size_t)i * RNDV_SLOT;
		lm->mw = ibv_alloc_mw(d->pd, IBV_MW_TYPE_2);
		if (!lm->mw) {
			ret = set_error(pc_neg_errno(-1), "%s: ibv_alloc_mw(type 2) %u of %u: %s",
					d->name, i, n, strerror(errno));
			goto err_mw;
		}
		lm->rkey = lm->mw->rkey;
	}
	rndv_zc_init(rv, nb);
	pthread_spin_init(&rv->lock, PTHREAD_PROCESS_PRIVATE);
	w->rv = rv;
	pc_info("%s: rendezvous up to %u bytes, large pool %llu KiB (%u blocks of 64 KiB), "
		"memory windows type 2%s", w->name, rv->max_large,
		(unsigned long long)(rv->size >> 10), nb,
		caps & IBV_DEVICE_MEM_WINDOW_TYPE_2B ? "B" : "A");
	return 0;

err_mw:
	for (i = 0; i < n; i++)
		if (rv->lm[i].mw)
			ibv_dealloc_mw(rv->lm[i].mw);
	ibv_dereg_mr(rv->slots_mr);
err_mr:
	ibv_dereg_mr(rv->mr);
err_mem:
	free(rv->lm);
	free(rv->slots);
	if (rv->base && numa)
		pc_numa_free(w->topo, rv->base, rv->size);
	else
		free(rv->base);
	blkalloc_fini(&rv->bd);
err_rv:
	free(rv);
	return ret;
}

void rndv_release_verbs(struct pc_worker *w)
{
	struct rndv_pool *rv = w->rv;
	uint32_t i;

	if (!rv)
		return;
	for (i = 0; rv->lm && i < rv->nlm; i++)
		if (rv->lm[i].mw && !ibv_dealloc_mw(rv->lm[i].mw))
			rv->lm[i].mw = NULL;
	if (rv->mr && !ibv_dereg_mr(rv->mr))
		rv->mr = NULL;
	if (rv->slots_mr && !ibv_dereg_mr(rv->slots_mr))
		rv->slots_mr = NULL;
}

void rndv_destroy(struct pc_worker *w)
{
	struct rndv_pool *rv = w->rv;

	if (!rv)
		return;
	rndv_release_verbs(w);
	w->rv = NULL;
	free(rv->lm);
	free(rv->slots);
	if (rv->numa)
		pc_numa_free(w->topo, rv->base, rv->size);
	else
		free(rv->base);
	blkalloc_fini(&rv->bd);
	pthread_spin_destroy(&rv->lock);
	free(rv);
}
