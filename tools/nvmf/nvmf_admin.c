// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_admin.c - admin commands: Identify (CNS 00h-03h, and 06h
 * for the NVM command set), Get Log Page (Error Information, SMART / Health,
 * Firmware Slot, Changed Namespace List, Commands Supported and Effects,
 * ANA, discovery), Set/Get Features (Volatile Write Cache, Number of Queues,
 * Async Event Configuration, KATO, Host Identifier, Namespace Write
 * Protection), Keep Alive, Abort, Asynchronous Event Request: what Linux's
 * own target (nvmet, 6.1) answers, docs/storage.md compares the two.
 * Everything else is Invalid Opcode.
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
	/* several controllers (hosts) share the namespaces; one ANA group, Optimized */
	id->cmic = NVME_CTRL_CMIC_MULTI_CTRL | NVME_CTRL_CMIC_ANA;
	/* the notice for Namespace Write Protection changes (nvmf_tgt_ns_changed too) */
	id->oaes = NVME_AEC_NS_ATTR;
	id->ctratt = NVME_CTRL_CTRATT_HID128;
	/* one firmware slot, read-only: the Firmware Slot log's slot 1 is FR */
	id->frmw = NVME_CTRL_FRMW_SLOT1_RO | NVME_CTRL_FRMW_SLOTS(1);
	/* SMART / Health per controller only (LPA bit 0 clear) */
	id->lpa = NVME_CTRL_LPA_CMD_EFFECTS | NVME_CTRL_LPA_EXT_DATA;
	id->anatt = NVMF_ANATT;
	/*
	 * Optimized is the only state. (Bit 6, ANAGRPID never changes, would
	 * be true too; nvme-cli 2.3's ana-log then reads the log without its
	 * NSIDs, and nvmet leaves it clear.)
	 */
	id->anacap = NVME_CTRL_ANACAP_OPTIMIZED;
	id->anagrpmax = NVMF_ANA_GRPID;
	id->nanagrpid = NVMF_ANA_GRPID;
	id->maxcmd = t->cfg.max_queue_depth;
	id->nn = t->nvm.nr_ns;
	id->mnan = t->nvm.nr_ns; /* a host using ANA needs it, at most NN */
	id->oncs = NVME_CTRL_ONCS_DSM | NVME_CTRL_ONCS_WZEROES;
	id->vwc = (t->cfg.volatile_cache ? NVME_CTRL_VWC_PRESENT : 0) | NVME_CTRL_VWC_FLUSH_ALL;
	id->nwpc = NVME_CTRL_NWPC_WP;
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
	id->anagrpid = NVMF_ANA_GRPID;
	id->nsattr = atomic_load_explicit(&n->wp, memory_order_relaxed) ? NVME_NS_NSATTR_WP : 0;
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
	case NVME_CNS_CS_CTRL:
		/*
		 * The NVM command set's: VSL, WZSL, WUSL, DMRL, DMRSL and DMSL
		 * all 0, no limits but MDTS (Linux asks for it at every
		 * connect). No other command set.
		 */
		if (NVME_CSI(req->sqe.cdw11) != NVME_CSI_NVM)
			return BAD_FIELD;
		break;
	default:
		return BAD_FIELD;
	}
	req->arg = cns;
	return nvmf_sgl_expect(req, NVMF_XFER_TO_HOST, NVME_IDENTIFY_SIZE);
}

/* ---- Get Log Page ----------------------------------------------------------- */

/* The size of the log page @c asks for (its LID, and LSP where it matters). */
static uint32_t log_size(const struct nvmf_tgt *t, const struct nvme_sqe *c)
{
	uint32_t nsids = NVME_LOG_LSP(c->cdw10) & NVME_ANA_LSP_RGO ? 0 : t->nvm.nr_ns;

	switch (c->cdw10 & 0xff) {
	case NVME_LOG_ERROR:
		return NVMF_ERR_LOG_LEN * sizeof(struct nvme_err_entry);
	case NVME_LOG_SMART:
		return sizeof(struct nvme_smart_log);
	case NVME_LOG_FW_SLOT:
		return sizeof(struct nvme_fw_slot_log);
	case NVME_LOG_CHANGED_NS:
		return sizeof(struct nvme_changed_ns_log);
	case NVME_LOG_CMD_EFFECTS:
		return sizeof(struct nvme_effects_log);
	case NVME_LOG_ANA:
		return (uint32_t)(sizeof(struct nvme_ana_hdr) + sizeof(struct nvme_ana_desc) +
				  nsids * sizeof(uint32_t));
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

	if (disc ? lid != NVME_LOG_DISCOVERY : !log_size(t, c) || lid == NVME_LOG_DISCOVERY)
		return BAD_FIELD;
	/* the NVM command set's commands only */
	if (lid == NVME_LOG_CMD_EFFECTS && NVME_CSI(c->cdw14) != NVME_CSI_NVM)
		return NVME_SC_INVALID_LOG_PAGE | NVME_DNR;
	/*
	 * SMART / Health is kept per controller (LPA bit 0 clear): a namespace's
	 * own is refused. The other logs are the controller's: NSID unused.
	 */
	if (lid == NVME_LOG_SMART && c->nsid != 0 && c->nsid != NVME_NSID_ALL)
		return BAD_FIELD;
	if ((lpo & 3) || lpo > log_size(t, c) || len > t->cfg.mdts)
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

/* one slot, read-only, active: the firmware revision Identify Controller reports */
static void log_fw_slot(const struct nvmf_tgt *t, struct nvme_fw_slot_log *l)
{
	l->afi = 1;
	put_padded(l->frs[0], sizeof(l->frs[0]), t->firmware);
}

/*
 * What nvmf_admin() and nvmf_io() answer (the unit test holds them to it);
 * the commands that write change logical block content. Admin commands have
 * no effect a host must act on (a write protection change comes with its
 * notice).
 */
static void log_effects(struct nvme_effects_log *l)
{
	static const uint8_t admin[] = {NVME_ADM_GET_LOG_PAGE, NVME_ADM_IDENTIFY, NVME_ADM_ABORT,
					NVME_ADM_SET_FEATURES, NVME_ADM_GET_FEATURES,
					NVME_ADM_ASYNC_EVENT, NVME_ADM_KEEP_ALIVE};

	for (size_t i = 0; i < sizeof(admin); i++)
		l->acs[admin[i]] = NVME_CMD_EFFECTS_CSUPP;
	l->iocs[NVME_IO_READ] = l->iocs[NVME_IO_FLUSH] = NVME_CMD_EFFECTS_CSUPP;
	l->iocs[NVME_IO_WRITE] = l->iocs[NVME_IO_WRITE_ZEROES] = l->iocs[NVME_IO_DSM] =
		NVME_CMD_EFFECTS_CSUPP | NVME_CMD_EFFECTS_LBCC;
}

/* one group, every namespace in it, Optimized, never changing (CHGCNT 0) */
static void log_ana(const struct nvmf_tgt *t, uint8_t *out, bool rgo)
{
	struct nvme_ana_hdr h = {.ngrps = 1};
	struct nvme_ana_desc d = {.grpid = NVMF_ANA_GRPID, .nnsids = rgo ? 0 : t->nvm.nr_ns,
				  .state = NVME_ANA_OPTIMIZED};

	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), &d, sizeof(d));
	out += sizeof(h) + sizeof(d);
	for (uint32_t i = 0; i < d.nnsids; i++) {
		uint32_t nsid = i + 1;

		memcpy(out + i * sizeof(nsid), &nsid, sizeof(nsid));
	}
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
static_assert(sizeof(struct nvme_effects_log) <= NVME_IDENTIFY_SIZE &&
		      sizeof(struct nvme_ana_hdr) + sizeof(struct nvme_ana_desc) +
				      NVMF_MAX_NS * sizeof(uint32_t) <=
			      NVME_IDENTIFY_SIZE,
	      "the other logs too");

static void log_fill(struct nvmf_queue *q, struct nvmf_req *req, uint8_t *buf, size_t len)
{
	struct nvmf_tgt *t = q->tgt;
	struct nvmf_ctrl *c = q->ctrl;
	uint8_t lid = req->sqe.cdw10 & 0xff;
	bool rae = req->sqe.cdw10 & NVME_LOG_RAE;
	uint32_t size = log_size(t, &req->sqe);
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
	case NVME_LOG_FW_SLOT:
		log_fw_slot(t, (void *)q->scratch);
		break;
	case NVME_LOG_CMD_EFFECTS:
		log_effects((void *)q->scratch);
		break;
	case NVME_LOG_ANA:
		log_ana(t, q->scratch, NVME_LOG_LSP(req->sqe.cdw10) & NVME_ANA_LSP_RGO);
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

enum feat_scope { FEAT_NONE, FEAT_CTRL, FEAT_NS };

/* The features @c has, and whether each is the controller's or a namespace's. */
static enum feat_scope feat_scope(const struct nvmf_ctrl *c, uint8_t fid)
{
	switch (fid) {
	case NVME_FEAT_ASYNC_EVENT:
	case NVME_FEAT_KATO:
		return FEAT_CTRL;
	case NVME_FEAT_VOLATILE_WC:
	case NVME_FEAT_NUM_QUEUES:
	case NVME_FEAT_HOST_ID:
		return c->subsys->discovery ? FEAT_NONE : FEAT_CTRL;
	case NVME_FEAT_WRITE_PROTECT:
		return c->subsys->discovery ? FEAT_NONE : FEAT_NS;
	}
	return FEAT_NONE;
}

/*
 * A controller's feature takes NSID 0 or FFFFFFFFh (else Feature Not
 * Namespace Specific); a namespace's, an active NSID (else Invalid Namespace
 * or Format, FFFFFFFFh included, as nvmet answers).
 */
static uint16_t feat_nsid(struct nvmf_ctrl *c, enum feat_scope sc, uint32_t nsid,
			  struct nvmf_ns **ns)
{
	if (sc == FEAT_NS) {
		*ns = nvmf_ns_get(c->subsys, nsid);
		return *ns ? NVME_SC_SUCCESS : NVME_SC_INVALID_NS | NVME_DNR;
	}
	if (nsid != 0 && nsid != NVME_NSID_ALL)
		return NVME_SC_FEAT_NOT_NS | NVME_DNR;
	return NVME_SC_SUCCESS;
}

/* Get Features, SEL = 3: nothing is saveable */
static uint32_t feat_caps(uint8_t fid)
{
	switch (fid) {
	case NVME_FEAT_NUM_QUEUES:
	case NVME_FEAT_ASYNC_EVENT:
	case NVME_FEAT_KATO:
		return NVME_FEAT_CAP_CHANGEABLE;
	case NVME_FEAT_WRITE_PROTECT:
		return NVME_FEAT_CAP_CHANGEABLE | NVME_FEAT_CAP_NS;
	}
	/* the write cache's state is the backend's; the Host Identifier is Connect's */
	return 0;
}

static uint16_t set_features(struct nvmf_queue *q, struct nvmf_req *req, uint64_t *res)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_tgt *t = q->tgt;
	const struct nvme_sqe *s = &req->sqe;
	uint8_t fid = s->cdw10 & 0xff;
	enum feat_scope sc = feat_scope(c, fid);
	struct nvmf_ns *ns = NULL;
	uint16_t st = NVME_SC_SUCCESS;
	uint32_t v = s->cdw11;

	/* Volatile Write Cache: WCE cannot be changed */
	if (sc == FEAT_NONE || fid == NVME_FEAT_VOLATILE_WC)
		return BAD_FIELD;
	if (s->cdw10 & NVME_FEAT_SAVE)
		return NVME_SC_FEAT_NOT_SAVEABLE | NVME_DNR;
	/* over fabrics the Host Identifier is the one Connect gave */
	if (fid == NVME_FEAT_HOST_ID)
		return NVME_SC_CMD_SEQ_ERROR | NVME_DNR;
	st = feat_nsid(c, sc, s->nsid, &ns);
	if (st)
		return st;
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
	case NVME_FEAT_WRITE_PROTECT: {
		/* NWPC: No Write Protect and Write Protect; not until power cycle, not permanent */
		uint32_t wps = v & NVME_WP_MASK;
		bool on = wps == NVME_WP_ON;

		if (wps != NVME_WP_NONE && wps != NVME_WP_ON) {
			st = BAD_FIELD;
			break;
		}
		/*
		 * I/O queues see the change with their next command; one already
		 * decoded may still write. A change is a namespace attribute
		 * change for every controller (Changed Namespace List, notice).
		 */
		if (atomic_load_explicit(&ns->wp, memory_order_relaxed) != on) {
			atomic_store_explicit(&ns->wp, on, memory_order_relaxed);
			nvmf_ns_changed_locked(t, ns->nsid);
		}
		break;
	}
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

/*
 * Return: the status; *res the completion's DW0. Success with req->xfer.dir
 * NVMF_XFER_TO_HOST (Host Identifier) means FILL.
 */
static uint16_t get_features(struct nvmf_queue *q, struct nvmf_req *req, uint64_t *res)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_tgt *t = q->tgt;
	const struct nvme_sqe *s = &req->sqe;
	uint8_t fid = s->cdw10 & 0xff, sel = NVME_FEAT_SEL(s->cdw10);
	enum feat_scope sc = feat_scope(c, fid);
	struct nvmf_ns *ns = NULL;
	uint16_t st;
	uint32_t max = t->cfg.max_io_queues - 1u;

	if (sc == FEAT_NONE || sel > NVME_SEL_CAPS)
		return BAD_FIELD;
	st = feat_nsid(c, sc, s->nsid, &ns);
	if (st)
		return st;
	if (fid == NVME_FEAT_HOST_ID) {
		/* 16 bytes of data, the 128-bit identifier only (EXHID) */
		st = nvmf_sgl_expect(req, NVMF_XFER_TO_HOST, NVME_FEAT_HOST_ID_LEN);
		if (!st && !(s->cdw11 & NVME_FEAT_HOST_ID_EXHID))
			st = BAD_FIELD;
		*res = 0;
		return st;
	}
	st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
	if (st)
		return st;
	if (sel == NVME_SEL_CAPS) {
		*res = feat_caps(fid);
		return NVME_SC_SUCCESS;
	}
	/* nothing is saveable: Saved is the default value */
	pthread_mutex_lock(&t->lock);
	switch (fid) {
	case NVME_FEAT_VOLATILE_WC:
		*res = t->cfg.volatile_cache ? 1 : 0; /* WCE: fixed, on when there is a cache */
		break;
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
	case NVME_FEAT_WRITE_PROTECT:
		*res = sel == NVME_SEL_CURRENT && atomic_load_explicit(&ns->wp, memory_order_relaxed)
			       ? NVME_WP_ON
			       : NVME_WP_NONE;
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
		if (st || req->xfer.dir != NVMF_XFER_TO_HOST)
			break;
		req->arg = res;
		req->state = NVMF_RS_FILL;
		return NVMF_ACT_FILL;
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
	if (req->sqe.opcode == NVME_ADM_GET_FEATURES) {
		/* the Host Identifier: the controller's, from its Connect */
		memcpy(buf, q->ctrl->hostid, NVME_FEAT_HOST_ID_LEN);
		return nvmf_complete(q, req, NVME_SC_SUCCESS, req->arg);
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
	case NVME_CNS_CS_CTRL:
		break; /* all zero */
	}
	return nvmf_complete(q, req, NVME_SC_SUCCESS, 0);
}
