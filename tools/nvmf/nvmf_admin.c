// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_admin.c - admin commands: Identify (CNS 00h-03h), Get Log
 * Page (error, SMART, changed namespaces, discovery), Set/Get Features
 * (Number of Queues, Async Event Configuration, KATO), Keep Alive, Abort,
 * Asynchronous Event Request. Everything else is Invalid Opcode.
 */
#include <errno.h>
#include <string.h>

#include "nvmf_priv.h"

#define BAD_FIELD (NVME_SC_INVALID_FIELD | NVME_DNR)

/* ASCII, space padded, no NUL (SN, MN, FR) */
static void put_padded(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n);

	memset(dst, ' ', n);
	memcpy(dst, src, l);
}

/* ---- Identify ------------------------------------------------------------- */

static void id_ctrl(struct nvmf_queue *q, struct nvme_id_ctrl *id)
{
	struct nvmf_tgt *t = q->tgt;
	struct nvmf_ctrl *c = q->ctrl;
	bool disc = c->subsys->discovery;

	put_padded(id->sn, sizeof(id->sn), t->serial);
	put_padded(id->mn, sizeof(id->mn), t->model);
	put_padded(id->fr, sizeof(id->fr), t->firmware);
	id->rab = 6;
	id->mdts = t->mdts_log;
	id->cntlid = c->cntlid;
	id->ver = NVMF_VS;
	id->cntrltype = disc ? NVME_CTRL_DISC : NVME_CTRL_IO;
	id->acl = NVMF_ABORT_LIMIT;
	id->aerl = (uint8_t)(t->cfg.aer_limit - 1);
	id->lpa = NVME_CTRL_LPA_EXT_DATA;
	id->elpe = NVMF_ERR_LOG_LEN - 1;
	id->kas = NVMF_KAS;
	id->sqes = NVME_CC_IOSQES_NVM << 4 | NVME_CC_IOSQES_NVM;
	id->cqes = NVME_CC_IOCQES_NVM << 4 | NVME_CC_IOCQES_NVM;
	id->sgls = NVME_CTRL_SGLS_SUPPORTED | NVME_CTRL_SGLS_KEYED |
		   (t->icd ? NVME_CTRL_SGLS_OFFSET : 0);
	strcpy(id->subnqn, c->subsys->nqn);
	id->ioccsz = (uint32_t)(sizeof(struct nvme_sqe) + t->icd) / 16;
	id->iorcsz = sizeof(struct nvme_cqe) / 16;
	id->icdoff = 0;
	id->msdbd = 1;
	if (disc) {
		id->oaes = NVME_AEC_DISC_CHANGE;
		id->maxcmd = NVME_AQ_DEPTH;
		return;
	}
	id->cmic = NVME_CTRL_CMIC_MULTI_CTRL;
	id->oaes = NVME_AEC_NS_ATTR;
	id->ctratt = NVME_CTRL_CTRATT_HID128;
	id->maxcmd = t->cfg.max_queue_depth;
	id->nn = t->nvm.nr_ns;
	id->oncs = NVME_CTRL_ONCS_DSM | NVME_CTRL_ONCS_WZEROES;
	id->vwc = (t->cfg.volatile_cache ? NVME_CTRL_VWC_PRESENT : 0) | NVME_CTRL_VWC_FLUSH_ALL;
	id->nvscc = 1;
}

static void id_ns(const struct nvmf_ns *n, struct nvme_id_ns *id)
{
	uint64_t bytes = n->nblocks << n->lbads;

	id->nsze = id->ncap = id->nuse = n->nblocks;
	id->nlbaf = 0;
	id->flbas = 0;
	id->nmic = NVME_NS_NMIC_SHARED;
	/* the backend reads deallocated blocks as zeroes (its contract) */
	id->dlfeat = NVME_NS_DLFEAT_ZEROES | NVME_NS_DLFEAT_WZ_DEAC;
	nvme_u128_set(id->nvmcap, bytes);
	memcpy(id->nguid, n->nguid, sizeof(id->nguid));
	id->lbaf[0].lbads = n->lbads;
}

static void id_active_list(const struct nvmf_subsys *s, uint32_t after, uint32_t *list)
{
	uint32_t k = 0;

	for (uint32_t nsid = after + 1; nsid <= s->nr_ns && k < NVME_IDENTIFY_SIZE / 4; nsid++)
		list[k++] = nsid;
}

static void id_desc_list(const struct nvmf_ns *n, uint8_t *buf)
{
	struct nvme_ns_desc d = {.nidt = NVME_NIDT_NGUID, .nidl = 16};

	memcpy(buf, &d, sizeof(d));
	memcpy(buf + sizeof(d), n->nguid, 16);
	buf += sizeof(d) + 16;
	d = (struct nvme_ns_desc){.nidt = NVME_NIDT_CSI, .nidl = 1};
	memcpy(buf, &d, sizeof(d));
	buf[sizeof(d)] = 0; /* NVM command set */
}

static uint16_t identify(struct nvmf_queue *q, struct nvmf_req *req)
{
	struct nvmf_subsys *s = q->ctrl->subsys;
	uint8_t cns = req->sqe.cdw10 & 0xff;
	uint32_t nsid = req->sqe.nsid;

	if (s->discovery && cns != NVME_CNS_CTRL)
		return BAD_FIELD;
	switch (cns) {
	case NVME_CNS_CTRL:
		break;
	case NVME_CNS_NS:
	case NVME_CNS_NS_DESC_LIST:
		/* NSIDs are 1..NN, all active */
		if (!nvmf_ns_get(s, nsid))
			return NVME_SC_INVALID_NS | NVME_DNR;
		break;
	case NVME_CNS_NS_ACTIVE_LIST:
		if (nsid >= 0xfffffffeu)
			return NVME_SC_INVALID_NS | NVME_DNR;
		break;
	default:
		return BAD_FIELD;
	}
	req->arg = cns;
	return nvmf_sgl_expect(req, NVMF_XFER_TO_HOST, NVME_IDENTIFY_SIZE);
}

/* ---- Get Log Page ----------------------------------------------------------- */

static uint32_t log_size(uint8_t lid)
{
	switch (lid) {
	case NVME_LOG_ERROR:
		return NVMF_ERR_LOG_LEN * sizeof(struct nvme_err_entry);
	case NVME_LOG_SMART:
		return sizeof(struct nvme_smart_log);
	case NVME_LOG_CHANGED_NS:
		return sizeof(struct nvme_changed_ns_log);
	case NVME_LOG_DISCOVERY:
		/* the discovery subsystem itself, then the NVM subsystem */
		return (uint32_t)(sizeof(struct nvmf_disc_hdr) + 2 * sizeof(struct nvmf_disc_entry));
	}
	return 0;
}

static uint16_t get_log_page(struct nvmf_queue *q, struct nvmf_req *req)
{
	struct nvmf_tgt *t = q->tgt;
	const struct nvme_sqe *c = &req->sqe;
	uint8_t lid = c->cdw10 & 0xff;
	uint64_t numd = (uint64_t)(c->cdw11 & 0xffff) << 16 | c->cdw10 >> 16;
	uint64_t len = (numd + 1) * 4, lpo = (uint64_t)c->cdw13 << 32 | c->cdw12;
	bool disc = q->ctrl->subsys->discovery;

	if (disc ? lid != NVME_LOG_DISCOVERY
		 : (lid != NVME_LOG_ERROR && lid != NVME_LOG_SMART && lid != NVME_LOG_CHANGED_NS))
		return BAD_FIELD;
	/* controller-scope logs (LPA bit 0 clear: no per-namespace SMART) */
	if (!disc && c->nsid != 0 && c->nsid != NVME_NSID_ALL)
		return BAD_FIELD;
	if ((lpo & 3) || lpo > log_size(lid) || len > t->cfg.mdts)
		return BAD_FIELD;
	req->arg = lpo;
	return nvmf_sgl_expect(req, NVMF_XFER_TO_HOST, (uint32_t)len);
}

static void log_error(struct nvmf_ctrl *c, uint8_t *out)
{
	struct nvmf_err *el = &c->err;
	uint64_t n = el->count < NVMF_ERR_LOG_LEN ? el->count : NVMF_ERR_LOG_LEN;

	/* newest first */
	for (uint64_t i = 0; i < n; i++) {
		uint32_t k = (el->head + NVMF_ERR_LOG_LEN - 1 - (uint32_t)i) % NVMF_ERR_LOG_LEN;

		memcpy(out + i * sizeof(struct nvme_err_entry), &el->e[k], sizeof(el->e[k]));
	}
}

static void log_smart(struct nvmf_ctrl *c, struct nvme_smart_log *s)
{
	uint64_t st[NVMF_ST_NR];

	nvmf_ctrl_stats(c, st);
	s->temperature[0] = 0x27; /* 295 K, a room: a value, so tools do not flag 0 K */
	s->temperature[1] = 0x01;
	s->avail_spare = 100;
	s->spare_thresh = 10;
	nvme_u128_set(s->data_units_read, (st[NVMF_ST_RD_BYTES] / 512 + 999) / 1000);
	nvme_u128_set(s->data_units_written, (st[NVMF_ST_WR_BYTES] / 512 + 999) / 1000);
	nvme_u128_set(s->host_reads, st[NVMF_ST_RD_CMDS]);
	nvme_u128_set(s->host_writes, st[NVMF_ST_WR_CMDS]);
	nvme_u128_set(s->media_errors, st[NVMF_ST_MEDIA_ERR]);
	nvme_u128_set(s->num_err_log_entries, c->err.count);
}

static void log_changed_ns(struct nvmf_ctrl *c, struct nvme_changed_ns_log *l)
{
	if (c->nr_changed > NVME_CHANGED_NS_MAX)
		l->nsid[0] = NVME_NSID_ALL;
	else
		memcpy(l->nsid, c->changed_ns, c->nr_changed * sizeof(uint32_t));
	c->nr_changed = 0; /* read: cleared */
}

static void disc_entry(struct nvmf_tgt *t, struct nvmf_disc_entry *e, const char *nqn,
		       uint8_t subtype)
{
	e->trtype = NVMF_TRTYPE_RDMA;
	e->adrfam = t->cfg.adrfam;
	e->subtype = subtype;
	e->treq = NVMF_TREQ_NOT_SPECIFIED;
	e->portid = t->cfg.portid;
	e->cntlid = NVME_CNTLID_DYNAMIC;
	e->asqsz = NVME_AQ_DEPTH;
	strcpy(e->trsvcid, t->trsvcid);
	strcpy(e->subnqn, nqn);
	strcpy(e->traddr, t->traddr);
	e->tsas.qptype = NVMF_RDMA_QPTYPE_CONNECTED;
	e->tsas.prtype = NVMF_RDMA_PRTYPE_NOT_SPECIFIED;
	e->tsas.cms = NVMF_RDMA_CMS_RDMA_CM;
}

static void log_discovery(struct nvmf_tgt *t, uint8_t *out)
{
	struct nvmf_disc_hdr *h = (void *)out;
	struct nvmf_disc_entry *e = (void *)(out + sizeof(*h));

	h->genctr = t->genctr;
	h->numrec = 2;
	h->recfmt = 0;
	disc_entry(t, &e[0], t->disc.nqn, NVMF_SUBTYPE_CURR_DISC);
	disc_entry(t, &e[1], t->nvm.nqn, NVMF_SUBTYPE_NVME);
}

static_assert(sizeof(struct nvmf_disc_hdr) + 2 * sizeof(struct nvmf_disc_entry) <=
		      NVME_IDENTIFY_SIZE,
	      "the discovery log is built in an admin queue's 4 KiB scratch");

static void log_fill(struct nvmf_queue *q, struct nvmf_req *req, uint8_t *buf, size_t len)
{
	struct nvmf_tgt *t = q->tgt;
	struct nvmf_ctrl *c = q->ctrl;
	uint8_t lid = req->sqe.cdw10 & 0xff;
	bool rae = req->sqe.cdw10 & NVME_LOG_RAE;
	uint32_t size = log_size(lid);
	uint64_t lpo = req->arg;

	memset(q->scratch, 0, q->scratch_len);
	pthread_mutex_lock(&t->lock);
	switch (lid) {
	case NVME_LOG_ERROR:
		log_error(c, q->scratch);
		break;
	case NVME_LOG_SMART:
		log_smart(c, (void *)q->scratch);
		break;
	case NVME_LOG_CHANGED_NS:
		log_changed_ns(c, (void *)q->scratch);
		if (!rae)
			c->ev_masked &= ~(1u << NVME_LOG_CHANGED_NS);
		break;
	case NVME_LOG_DISCOVERY:
		log_discovery(t, q->scratch);
		if (!rae)
			c->ev_disc_masked = false;
		break;
	}
	pthread_mutex_unlock(&t->lock);
	/* the requested window of the log; zeroes past its end */
	memset(buf, 0, len);
	if (lpo < size)
		memcpy(buf, q->scratch + lpo, size - lpo < len ? size - lpo : len);
}

/* ---- features --------------------------------------------------------------- */

static uint32_t aec_supported(const struct nvmf_ctrl *c)
{
	return c->subsys->discovery ? NVME_AEC_DISC_CHANGE : NVME_AEC_SMART_MASK | NVME_AEC_NS_ATTR;
}

static uint16_t set_features(struct nvmf_queue *q, struct nvmf_req *req, uint64_t *res)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_tgt *t = q->tgt;
	const struct nvme_sqe *s = &req->sqe;
	uint8_t fid = s->cdw10 & 0xff;
	uint16_t st = NVME_SC_SUCCESS;
	uint32_t v = s->cdw11;

	if (fid != NVME_FEAT_NUM_QUEUES && fid != NVME_FEAT_ASYNC_EVENT && fid != NVME_FEAT_KATO)
		return BAD_FIELD;
	if (fid == NVME_FEAT_NUM_QUEUES && c->subsys->discovery)
		return BAD_FIELD;
	if (s->cdw10 & NVME_FEAT_SAVE)
		return NVME_SC_FEAT_NOT_SAVEABLE | NVME_DNR;
	if (s->nsid != 0 && s->nsid != NVME_NSID_ALL)
		return NVME_SC_FEAT_NOT_NS | NVME_DNR;
	st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
	if (st)
		return st;
	pthread_mutex_lock(&t->lock);
	switch (fid) {
	case NVME_FEAT_NUM_QUEUES: {
		uint32_t nsqr = v & 0xffff, ncqr = v >> 16, n;

		if (nsqr == 0xffff || ncqr == 0xffff) {
			st = BAD_FIELD;
			break;
		}
		if (c->nr_ioq) { /* only before I/O queues exist */
			st = NVME_SC_CMD_SEQ_ERROR | NVME_DNR;
			break;
		}
		n = (nsqr < ncqr ? nsqr : ncqr) + 1;
		if (n > t->cfg.max_io_queues)
			n = t->cfg.max_io_queues;
		c->nr_io_granted = (uint16_t)n;
		*res = (n - 1) | (uint64_t)(n - 1) << 16;
		break;
	}
	case NVME_FEAT_ASYNC_EVENT:
		if (v & ~aec_supported(c))
			st = BAD_FIELD;
		else
			c->aec = v;
		break;
	case NVME_FEAT_KATO:
		c->kato_ms = nvmf_kato_round(v);
		c->ka_deadline = 0; /* re-armed by the next check */
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

static uint16_t get_features(struct nvmf_queue *q, struct nvmf_req *req, uint64_t *res)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_tgt *t = q->tgt;
	const struct nvme_sqe *s = &req->sqe;
	uint8_t fid = s->cdw10 & 0xff, sel = NVME_FEAT_SEL(s->cdw10);
	uint16_t st;
	uint32_t max = t->cfg.max_io_queues - 1u;

	if (fid != NVME_FEAT_NUM_QUEUES && fid != NVME_FEAT_ASYNC_EVENT && fid != NVME_FEAT_KATO)
		return BAD_FIELD;
	if ((fid == NVME_FEAT_NUM_QUEUES && c->subsys->discovery) || sel > NVME_SEL_CAPS)
		return BAD_FIELD;
	if (s->nsid != 0 && s->nsid != NVME_NSID_ALL)
		return NVME_SC_FEAT_NOT_NS | NVME_DNR;
	st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
	if (st)
		return st;
	if (sel == NVME_SEL_CAPS) {
		*res = NVME_FEAT_CAP_CHANGEABLE;
		return NVME_SC_SUCCESS;
	}
	pthread_mutex_lock(&t->lock);
	switch (fid) {
	case NVME_FEAT_NUM_QUEUES: {
		uint32_t n = sel == NVME_SEL_CURRENT ? c->nr_io_granted - 1u : max;

		*res = n | (uint64_t)n << 16;
		break;
	}
	case NVME_FEAT_ASYNC_EVENT:
		*res = sel == NVME_SEL_CURRENT ? c->aec : 0;
		break;
	case NVME_FEAT_KATO:
		*res = sel == NVME_SEL_CURRENT ? c->kato_ms : 0;
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return NVME_SC_SUCCESS;
}

/* ---- Asynchronous Event Request --------------------------------------------- */

static enum nvmf_act async_event(struct nvmf_queue *q, struct nvmf_req *req)
{
	struct nvmf_ctrl *c = q->ctrl;
	uint32_t dw0 = 0;
	bool have = false;

	pthread_mutex_lock(&q->tgt->lock);
	if (c->ev_count) {
		dw0 = c->ev[c->ev_head];
		c->ev_head = (uint8_t)((c->ev_head + 1) % NVMF_EVENTS_MAX);
		c->ev_count--;
		have = true;
	}
	pthread_mutex_unlock(&q->tgt->lock);
	if (have)
		return nvmf_complete(q, req, NVME_SC_SUCCESS, dw0);
	if (q->nr_aer >= q->tgt->cfg.aer_limit)
		return nvmf_complete(q, req, NVME_SC_ASYNC_LIMIT | NVME_DNR, 0);
	q->aer[q->nr_aer++] = req;
	req->state = NVMF_RS_HELD;
	return NVMF_ACT_HOLD;
}

/* ---- dispatch ---------------------------------------------------------------- */

enum nvmf_act nvmf_admin(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			 bool *close)
{
	struct nvmf_ctrl *c = q->ctrl;
	uint8_t opc = req->sqe.opcode;
	uint64_t res = 0;
	uint16_t st;

	switch (opc) {
	case NVME_ADM_IDENTIFY:
	case NVME_ADM_GET_LOG_PAGE:
	case NVME_ADM_SET_FEATURES:
	case NVME_ADM_GET_FEATURES:
	case NVME_ADM_ASYNC_EVENT:
	case NVME_ADM_KEEP_ALIVE:
	case NVME_ADM_ABORT:
		break;
	default:
		return nvmf_complete(q, req, NVME_SC_INVALID_OPCODE | NVME_DNR, 0);
	}
	/* only Fabrics commands before CC.EN = 1 and CSTS.RDY = 1 */
	if (!nvmf_ctrl_ready(c))
		return nvmf_complete(q, req, NVME_SC_CMD_SEQ_ERROR | NVME_DNR, 0);
	st = nvmf_sgl_parse(q, req, capsule_len, close);
	if (st || *close)
		return nvmf_complete(q, req, st, 0);

	switch (opc) {
	case NVME_ADM_IDENTIFY:
	case NVME_ADM_GET_LOG_PAGE:
		st = opc == NVME_ADM_IDENTIFY ? identify(q, req) : get_log_page(q, req);
		if (st)
			break;
		req->state = NVMF_RS_FILL;
		return NVMF_ACT_FILL;
	case NVME_ADM_SET_FEATURES:
		st = set_features(q, req, &res);
		break;
	case NVME_ADM_GET_FEATURES:
		st = get_features(q, req, &res);
		break;
	case NVME_ADM_KEEP_ALIVE:
		st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
		if (!st)
			atomic_fetch_add_explicit(&c->ka_count, 1, memory_order_relaxed);
		break;
	case NVME_ADM_ABORT:
		/* nothing is abortable here: DW0 bit 0 set, "not aborted" */
		st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
		res = 1;
		break;
	case NVME_ADM_ASYNC_EVENT:
		st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
		if (st)
			break;
		return async_event(q, req);
	}
	return nvmf_complete(q, req, st, st ? 0 : res);
}

enum nvmf_act nvmf_admin_fill(struct nvmf_queue *q, struct nvmf_req *req, void *buf, size_t len)
{
	if (req->sqe.opcode == NVME_ADM_GET_LOG_PAGE) {
		log_fill(q, req, buf, len);
		return nvmf_complete(q, req, NVME_SC_SUCCESS, 0);
	}
	memset(buf, 0, len);
	switch (req->arg) {
	case NVME_CNS_CTRL:
		id_ctrl(q, buf);
		break;
	case NVME_CNS_NS:
		id_ns(nvmf_ns_get(q->ctrl->subsys, req->sqe.nsid), buf);
		break;
	case NVME_CNS_NS_ACTIVE_LIST:
		id_active_list(q->ctrl->subsys, req->sqe.nsid, buf);
		break;
	case NVME_CNS_NS_DESC_LIST:
		id_desc_list(nvmf_ns_get(q->ctrl->subsys, req->sqe.nsid), buf);
		break;
	}
	return nvmf_complete(q, req, NVME_SC_SUCCESS, 0);
}
