// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_queue.c - a queue's command cycle: capsule checks, the
 * dispatch to Fabrics, admin and I/O decoding, SGL decoding, completions
 * and the error log, held Asynchronous Event Requests.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf_priv.h"

void nvmf_queue_stat_add(struct nvmf_queue *q, int which, uint64_t v)
{
	/* single writer: a relaxed load and store, no locked instruction */
	uint64_t cur = atomic_load_explicit(&q->stats[which], memory_order_relaxed);

	atomic_store_explicit(&q->stats[which], cur + v, memory_order_relaxed);
}

void nvmf_err_log(struct nvmf_ctrl *c, const struct nvmf_queue *q, const struct nvmf_req *req,
		  uint16_t status)
{
	struct nvmf_err *el = &c->err;
	struct nvme_err_entry *e;

	pthread_mutex_lock(&c->tgt->lock);
	e = &el->e[el->head];
	memset(e, 0, sizeof(*e));
	e->error_count = ++el->count;
	e->sqid = q->qid;
	e->cid = req->sqe.cid;
	e->status = (uint16_t)(status << 1);
	e->pel = 0xffff;
	e->nsid = req->sqe.opcode == NVME_OPC_FABRICS ? 0 : req->sqe.nsid;
	e->trtype = NVMF_TRTYPE_RDMA;
	el->head = (el->head + 1) % NVMF_ERR_LOG_LEN;
	pthread_mutex_unlock(&c->tgt->lock);
}

/* The command leaves the queue with @status; its CQE is ready to send. */
enum nvmf_act nvmf_complete(struct nvmf_queue *q, struct nvmf_req *req, uint16_t status,
			    uint64_t result)
{
	struct nvme_cqe *cqe = &req->cqe;

	cqe->result = result;
	cqe->sq_head = q->sqflow_off ? 0xffff : q->sqhd;
	cqe->sq_id = q->qid;
	cqe->cid = req->sqe.cid;
	cqe->status = (uint16_t)(status << 1);
	if (status != NVME_SC_SUCCESS && q->ctrl)
		nvmf_err_log(q->ctrl, q, req, status);
	req->state = NVMF_RS_FREE;
	q->inflight--;
	return NVMF_ACT_COMPLETE;
}

/*
 * Decode the SGL descriptor: its type, and for in-capsule data its bounds.
 * Keyed data blocks (subtype address or invalidate) and data blocks with
 * the offset subtype only: everything else is SGL Descriptor Type Invalid.
 * In-capsule data must start within the advertised size (else SGL Offset
 * Invalid) and end within it (else Data SGL Length Invalid); data that the
 * advertised size allows but that did not arrive makes the capsule
 * malformed (*close).
 */
uint16_t nvmf_sgl_parse(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			bool *close)
{
	const struct nvme_sgl *s = &req->sqe.dptr;
	struct nvmf_xfer *x = &req->xfer;
	uint8_t type = s->type >> 4, sub = s->type & 0xf;
	uint32_t icd = q->tgt->icd;

	memset(x, 0, sizeof(*x));
	switch (type) {
	case NVME_SGL_KEYED:
		if (sub != NVME_SGL_SUB_ADDRESS && sub != NVME_SGL_SUB_INVALIDATE)
			return NVME_SC_SGL_TYPE | NVME_DNR;
		x->len = nvme_sgl_keyed_len(s);
		x->addr = s->addr;
		x->key = nvme_sgl_key(s);
		x->invalidate = sub == NVME_SGL_SUB_INVALIDATE;
		return NVME_SC_SUCCESS;
	case NVME_SGL_DATA:
		if (sub != NVME_SGL_SUB_OFFSET)
			return NVME_SC_SGL_TYPE | NVME_DNR;
		x->len = nvme_sgl_len(s);
		if (s->addr > icd)
			return NVME_SC_SGL_OFFSET | NVME_DNR;
		if (x->len > icd - s->addr)
			return NVME_SC_SGL_DATA_LEN | NVME_DNR;
		if (sizeof(struct nvme_sqe) + s->addr + x->len > capsule_len) {
			*close = true;
			return NVME_SC_SUCCESS;
		}
		x->in_capsule = true;
		x->icd_off = (uint32_t)(sizeof(struct nvme_sqe) + s->addr);
		return NVME_SC_SUCCESS;
	default:
		return NVME_SC_SGL_TYPE | NVME_DNR;
	}
}

/*
 * The command moves @want bytes in direction @dir: the SGL must describe
 * exactly that (SGLS bit 16 clear: no longer SGLs), and in-capsule data only
 * travels towards the controller.
 */
uint16_t nvmf_sgl_expect(struct nvmf_req *req, uint8_t dir, uint32_t want)
{
	struct nvmf_xfer *x = &req->xfer;

	if (x->in_capsule && x->len && dir != NVMF_XFER_FROM_HOST)
		return NVME_SC_INVALID_FIELD | NVME_DNR;
	if (x->len != want)
		return NVME_SC_SGL_DATA_LEN | NVME_DNR;
	x->dir = want ? dir : NVMF_XFER_NONE;
	return NVME_SC_SUCCESS;
}

struct nvmf_queue *nvmf_queue_create(struct nvmf_tgt *t, uint16_t qid, uint16_t hsqsize)
{
	struct nvmf_queue *q = calloc(1, sizeof(*q));

	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->tgt = t;
	q->qid = qid;
	q->sqsize = hsqsize;
	if (qid == 0) {
		q->scratch_len = NVME_IDENTIFY_SIZE;
		q->scratch = calloc(1, q->scratch_len);
		if (!q->scratch) {
			free(q);
			errno = ENOMEM;
			return NULL;
		}
	}
	pthread_mutex_lock(&t->lock);
	t->nr_queues++;
	pthread_mutex_unlock(&t->lock);
	return q;
}

void nvmf_queue_destroy(struct nvmf_queue *q)
{
	struct nvmf_tgt *t;
	struct nvmf_ctrl *c;

	if (!q)
		return;
	t = q->tgt;
	pthread_mutex_lock(&t->lock);
	c = q->ctrl;
	if (c) {
		for (int i = 0; i < NVMF_ST_NR; i++)
			c->gone_stats[i] += atomic_load_explicit(&q->stats[i], memory_order_relaxed);
		if (q->qid == 0) {
			c->admin = NULL;
			nvmf_ctrl_kill_locked(c);
		} else {
			c->ioq[q->qid] = NULL;
			c->nr_ioq--;
		}
		if (--c->refs == 0) {
			for (int i = 0; i < t->cfg.max_ctrls; i++)
				if (t->ctrls[i] == c)
					t->ctrls[i] = NULL;
			free(c->ioq);
			free(c);
		}
		q->ctrl = NULL;
	}
	t->nr_queues--;
	pthread_mutex_unlock(&t->lock);
	free(q->scratch);
	free(q);
}

uint16_t nvmf_queue_cntlid(const struct nvmf_queue *q)
{
	return q->ctrl ? q->ctrl->cntlid : 0;
}

bool nvmf_queue_dead(const struct nvmf_queue *q)
{
	return q->ctrl &&
	       atomic_load_explicit(&q->ctrl->state, memory_order_acquire) != NVMF_CTRL_LIVE;
}

enum nvmf_act nvmf_queue_submit(struct nvmf_queue *q, const void *capsule, size_t len,
				struct nvmf_req *req)
{
	struct nvmf_ctrl *c = q->ctrl;
	bool close = false;
	enum nvmf_act act;
	uint8_t flags;

	if (!capsule || len < sizeof(struct nvme_sqe) ||
	    len > sizeof(struct nvme_sqe) + q->tgt->icd)
		return NVMF_ACT_CLOSE;
	/* the host may have sqsize + 1 commands outstanding, no more */
	if (q->inflight > q->sqsize)
		return NVMF_ACT_CLOSE;
	if (c && atomic_load_explicit(&c->state, memory_order_acquire) != NVMF_CTRL_LIVE)
		return NVMF_ACT_CLOSE;

	memcpy(&req->sqe, capsule, sizeof(req->sqe));
	memset(&req->xfer, 0, sizeof(req->xfer));
	memset(&req->io, 0, sizeof(req->io));
	req->state = NVMF_RS_FREE;
	req->arg = 0;
	q->inflight++;
	q->sqhd = (uint16_t)((q->sqhd + 1u) % (q->sqsize + 1u));

	flags = req->sqe.flags;
	if (flags & NVME_FLAGS_FUSE_MASK || (flags & NVME_FLAGS_PSDT_MASK) != NVME_FLAGS_PSDT_SGL)
		return nvmf_complete(q, req, NVME_SC_INVALID_FIELD | NVME_DNR, 0);

	if (req->sqe.opcode == NVME_OPC_FABRICS)
		act = nvmf_fabrics(q, req, len, &close);
	else if (!c)
		act = nvmf_complete(q, req, NVME_SC_CMD_SEQ_ERROR | NVME_DNR, 0);
	else if (q->qid == 0)
		act = nvmf_admin(q, req, len, &close);
	else
		act = nvmf_io(q, req, len, &close);
	return close ? NVMF_ACT_CLOSE : act;
}

enum nvmf_act nvmf_req_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
			    size_t len)
{
	if (req->state != NVMF_RS_FETCH || !data || len != req->xfer.len)
		return NVMF_ACT_CLOSE;
	if (req->sqe.opcode == NVME_OPC_FABRICS)
		return nvmf_connect_data(q, req, data, len);
	if (q->qid != 0)
		return nvmf_io_data(q, req, data, len);
	return NVMF_ACT_CLOSE;
}

enum nvmf_act nvmf_req_fill(struct nvmf_queue *q, struct nvmf_req *req, void *buf, size_t len)
{
	if (req->state != NVMF_RS_FILL || !buf || len != req->xfer.len || q->qid != 0)
		return NVMF_ACT_CLOSE;
	return nvmf_admin_fill(q, req, buf, len);
}

enum nvmf_act nvmf_req_complete(struct nvmf_queue *q, struct nvmf_req *req, int err)
{
	if (req->state != NVMF_RS_BACKEND || q->qid == 0)
		return NVMF_ACT_CLOSE;
	return nvmf_io_complete(q, req, err);
}

struct nvmf_req *nvmf_queue_poll_event(struct nvmf_queue *q)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_req *req;
	uint32_t dw0;

	if (!atomic_load_explicit(&q->ev_pending, memory_order_acquire) || !c || !q->nr_aer)
		return NULL;
	pthread_mutex_lock(&q->tgt->lock);
	if (!c->ev_count) {
		atomic_store_explicit(&q->ev_pending, false, memory_order_relaxed);
		pthread_mutex_unlock(&q->tgt->lock);
		return NULL;
	}
	dw0 = c->ev[c->ev_head];
	c->ev_head = (uint8_t)((c->ev_head + 1) % NVMF_EVENTS_MAX);
	if (--c->ev_count == 0)
		atomic_store_explicit(&q->ev_pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&q->tgt->lock);

	req = q->aer[0];
	memmove(q->aer, q->aer + 1, (size_t)(q->nr_aer - 1) * sizeof(q->aer[0]));
	q->nr_aer--;
	nvmf_complete(q, req, NVME_SC_SUCCESS, dw0);
	return req;
}
