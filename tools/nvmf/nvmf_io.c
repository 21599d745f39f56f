// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_io.c - I/O commands: Read, Write, Flush, Write Zeroes and
 * Dataset Management (deallocate), decoded and validated into a backend
 * operation; and the completions the backend brings back.
 *
 * The checks run in this order and the first failure is the status:
 * opcode (Invalid Opcode), controller ready (Command Sequence Error), SGL
 * descriptor (SGL Descriptor Type Invalid, SGL Offset Invalid, Data SGL
 * Length Invalid for in-capsule data past the advertised size), namespace
 * (Invalid Namespace or Format), write protection (Namespace is Write
 * Protected: Write, Write Zeroes and a deallocating Dataset Management on a
 * namespace the host protected, nvmf_admin.c), command fields (Invalid
 * Field), LBA range (LBA Out of Range), MDTS (Invalid Field), then the SGL
 * against the transfer (Invalid Field for in-capsule data on a read, Data
 * SGL Length Invalid for a length that is not the transfer's). All with DNR.
 */
#include <errno.h>
#include <string.h>

#include "nvmf_priv.h"

#define BAD(st) ((uint16_t)((st) | NVME_DNR))

static uint16_t lba_check(const struct nvmf_ns *ns, uint64_t slba, uint64_t nlb)
{
	if (slba >= ns->nblocks || nlb > ns->nblocks - slba)
		return BAD(NVME_SC_LBA_RANGE);
	return NVME_SC_SUCCESS;
}

static uint16_t rw(struct nvmf_queue *q, struct nvmf_req *req, const struct nvmf_ns *ns)
{
	const struct nvme_sqe *c = &req->sqe;
	bool write = c->opcode == NVME_IO_WRITE;
	uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
	uint64_t nlb = (c->cdw12 & NVME_RW_NLB_MASK) + 1ull, bytes;
	uint16_t st;

	/* no directives are enabled */
	if (c->cdw12 & NVME_RW_DTYPE_MASK)
		return BAD(NVME_SC_INVALID_FIELD);
	st = lba_check(ns, slba, nlb);
	if (st)
		return st;
	bytes = nlb << ns->lbads;
	if (bytes > q->tgt->cfg.mdts)
		return BAD(NVME_SC_INVALID_FIELD);
	st = nvmf_sgl_expect(req, write ? NVMF_XFER_FROM_HOST : NVMF_XFER_TO_HOST,
			     (uint32_t)bytes);
	if (st)
		return st;
	req->io.off = slba << ns->lbads;
	req->io.len = bytes;
	req->io.flags = write && (c->cdw12 & NVME_RW_FUA) ? NVMF_IO_FUA : 0;
	return NVME_SC_SUCCESS;
}

static uint16_t write_zeroes(struct nvmf_req *req, const struct nvmf_ns *ns)
{
	const struct nvme_sqe *c = &req->sqe;
	uint64_t slba = (uint64_t)c->cdw11 << 32 | c->cdw10;
	uint64_t nlb = (c->cdw12 & NVME_RW_NLB_MASK) + 1ull;
	uint16_t st = lba_check(ns, slba, nlb);

	if (st)
		return st;
	st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
	if (st)
		return st;
	req->io.off = slba << ns->lbads;
	req->io.len = nlb << ns->lbads;
	req->io.flags = (c->cdw12 & NVME_RW_DEAC ? NVMF_IO_DEALLOCATE : 0) |
			(c->cdw12 & NVME_RW_FUA ? NVMF_IO_FUA : 0);
	return NVME_SC_SUCCESS;
}

enum nvmf_act nvmf_io(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
		      bool *close)
{
	const struct nvme_sqe *c = &req->sqe;
	struct nvmf_ns *ns = NULL;
	uint16_t st;

	switch (c->opcode) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
	case NVME_IO_FLUSH:
	case NVME_IO_WRITE_ZEROES:
	case NVME_IO_DSM:
		break;
	default:
		return nvmf_complete(q, req, BAD(NVME_SC_INVALID_OPCODE), 0);
	}
	if (!nvmf_ctrl_ready(q->ctrl))
		return nvmf_complete(q, req, BAD(NVME_SC_CMD_SEQ_ERROR), 0);
	st = nvmf_sgl_parse(q, req, capsule_len, close);
	if (st || *close)
		return nvmf_complete(q, req, st, 0);
	if (!(c->opcode == NVME_IO_FLUSH && c->nsid == NVME_NSID_ALL)) {
		ns = nvmf_ns_get(&q->tgt->nvm, c->nsid);
		if (!ns)
			return nvmf_complete(q, req, BAD(NVME_SC_INVALID_NS), 0);
		req->io.backend = ns->backend;
		if (atomic_load_explicit(&ns->wp, memory_order_relaxed) &&
		    (c->opcode == NVME_IO_WRITE || c->opcode == NVME_IO_WRITE_ZEROES ||
		     (c->opcode == NVME_IO_DSM && (c->cdw11 & NVME_DSM_AD))))
			return nvmf_complete(q, req, BAD(NVME_SC_NS_WRITE_PROTECTED), 0);
	}
	req->io.nsid = c->nsid;

	switch (c->opcode) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		st = rw(q, req, ns);
		if (st)
			break;
		req->state = NVMF_RS_BACKEND;
		return c->opcode == NVME_IO_READ ? NVMF_ACT_READ : NVMF_ACT_WRITE;
	case NVME_IO_FLUSH:
		st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
		if (st)
			break;
		req->state = NVMF_RS_BACKEND;
		return NVMF_ACT_FLUSH;
	case NVME_IO_WRITE_ZEROES:
		st = write_zeroes(req, ns);
		if (st)
			break;
		req->state = NVMF_RS_BACKEND;
		return NVMF_ACT_ZEROES;
	case NVME_IO_DSM: {
		uint32_t nr = (c->cdw10 & NVME_DSM_NR_MASK) + 1;
		uint32_t want = nr * (uint32_t)sizeof(struct nvme_dsm_range);

		/*
		 * Linux describes a buffer for the most ranges (4096 bytes)
		 * whatever NR says, as nvmet and SPDK accept: an SGL longer
		 * than the ranges, up to that, is fine, and only the ranges
		 * are fetched. Shorter: Data SGL Length Invalid.
		 */
		if (req->xfer.len > want &&
		    req->xfer.len <= NVME_DSM_RANGES_MAX * sizeof(struct nvme_dsm_range))
			req->xfer.len = want;
		st = nvmf_sgl_expect(req, NVMF_XFER_FROM_HOST, want);
		if (st)
			break;
		/* only hints without AD: nothing to do */
		if (!(c->cdw11 & NVME_DSM_AD))
			break;
		req->arg = nr;
		req->state = NVMF_RS_FETCH;
		return NVMF_ACT_FETCH;
	}
	}
	return nvmf_complete(q, req, st, 0);
}

enum nvmf_act nvmf_io_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
			   size_t len)
{
	const struct nvmf_ns *ns = nvmf_ns_get(&q->tgt->nvm, req->sqe.nsid);
	const uint8_t *p = data;

	if (req->sqe.opcode != NVME_IO_DSM || !ns || len != req->arg * sizeof(struct nvme_dsm_range))
		return NVMF_ACT_CLOSE;
	for (uint32_t i = 0; i < req->arg; i++) {
		struct nvme_dsm_range r;
		uint16_t st;

		memcpy(&r, p + i * sizeof(r), sizeof(r));
		if (!r.nlb)
			continue;
		st = lba_check(ns, r.slba, r.nlb);
		if (st)
			return nvmf_complete(q, req, st, 0);
	}
	req->io.nr_ranges = (uint32_t)req->arg;
	req->lbads = ns->lbads;
	req->state = NVMF_RS_BACKEND;
	return NVMF_ACT_DISCARD;
}

int nvmf_req_range(const struct nvmf_req *req, const void *data, uint32_t i, uint64_t *off,
		   uint64_t *len)
{
	struct nvme_dsm_range r;

	if (req->sqe.opcode != NVME_IO_DSM || i >= req->io.nr_ranges)
		return -EINVAL;
	memcpy(&r, (const uint8_t *)data + (size_t)i * sizeof(r), sizeof(r));
	/* an empty range was not validated: its SLBA means nothing */
	*off = r.nlb ? r.slba << req->lbads : 0;
	*len = (uint64_t)r.nlb << req->lbads;
	return 0;
}

enum nvmf_act nvmf_io_complete(struct nvmf_queue *q, struct nvmf_req *req, int err)
{
	bool rd = req->sqe.opcode == NVME_IO_READ, wr = req->sqe.opcode == NVME_IO_WRITE;
	uint16_t st;

	switch (err) {
	case 0:
		st = NVME_SC_SUCCESS;
		if (rd || wr) {
			nvmf_queue_stat_add(q, rd ? NVMF_ST_RD_CMDS : NVMF_ST_WR_CMDS, 1);
			nvmf_queue_stat_add(q, rd ? NVMF_ST_RD_BYTES : NVMF_ST_WR_BYTES,
					    req->io.len);
		}
		break;
	case -EIO:
		st = rd ? NVME_SC_READ_ERROR : NVME_SC_WRITE_FAULT;
		nvmf_queue_stat_add(q, NVMF_ST_MEDIA_ERR, 1);
		break;
	case -ECOMM:
		st = NVME_SC_DATA_XFER_ERROR;
		break;
	case -ENOSPC:
		st = NVME_SC_CAP_EXCEEDED;
		break;
	default:
		st = NVME_SC_INTERNAL;
		break;
	}
	return nvmf_complete(q, req, st, 0);
}
