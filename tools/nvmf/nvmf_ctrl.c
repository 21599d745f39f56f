// SPDX-License-Identifier: MIT
/*
 * tools/nvmf/nvmf_ctrl.c - the target and its controllers: configuration,
 * rdma_cm private data, Fabrics commands (Connect, Property Get/Set and the
 * enable/shutdown state machine), keep-alive expiry, asynchronous events.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf_priv.h"

/* ---- the target ----------------------------------------------------------- */

/* non-empty, at most @max bytes, printable ASCII (SN, MN, FR, TRADDR are ASCII fields) */
static bool str_fits(const char *s, size_t max)
{
	size_t n;

	if (!s || !s[0] || (n = strnlen(s, max + 1)) > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

/* A stable NGUID for a namespace that has none: FNV-1a of NQN and NSID, twice. */
static void nguid_derive(uint8_t out[16], const char *nqn, uint32_t nsid)
{
	uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};

	for (int k = 0; k < 2; k++) {
		for (const char *p = nqn; *p; p++)
			h[k] = (h[k] ^ (uint8_t)*p) * 0x100000001b3ull;
		for (int i = 0; i < 4; i++)
			h[k] = (h[k] ^ ((nsid >> (8 * i)) & 0xff)) * 0x100000001b3ull;
	}
	memcpy(out, h, 16);
}

static int cfg_check(const struct nvmf_tgt_config *cfg)
{
	if (!str_fits(cfg->subnqn, NVMF_NQN_MAX) || !strcmp(cfg->subnqn, NVME_DISC_NQN))
		return -EINVAL;
	if ((cfg->serial && !str_fits(cfg->serial, 20)) || (cfg->model && !str_fits(cfg->model, 40)) ||
	    (cfg->firmware && !str_fits(cfg->firmware, 8)))
		return -EINVAL;
	if (!cfg->ns || cfg->nr_ns < 1 || cfg->nr_ns > NVMF_MAX_NS)
		return -EINVAL;
	for (uint32_t i = 0; i < cfg->nr_ns; i++) {
		const struct nvmf_ns_config *n = &cfg->ns[i];

		if ((n->block_size != 512 && n->block_size != 4096) || !n->nblocks ||
		    n->nblocks > (UINT64_MAX >> 12))
			return -EINVAL;
	}
	if (cfg->adrfam != NVMF_ADRFAM_IPV4 && cfg->adrfam != NVMF_ADRFAM_IPV6)
		return -EINVAL;
	if (!str_fits(cfg->traddr, NVMF_TRADDR_FIELD - 1) ||
	    !str_fits(cfg->trsvcid, NVMF_TRSVCID_FIELD - 1))
		return -EINVAL;
	if (cfg->max_io_queues < 1 || cfg->max_io_queues > 1024 || cfg->max_queue_depth < 2 ||
	    cfg->max_queue_depth > 1024)
		return -EINVAL;
	if (cfg->in_capsule % 16 || cfg->in_capsule > (1u << 20))
		return -EINVAL;
	/* a keyed SGL's length has 24 bits */
	if (cfg->mdts < 4096 || cfg->mdts > (8u << 20) || (cfg->mdts & (cfg->mdts - 1)))
		return -EINVAL;
	if (cfg->max_ctrls < 1 || cfg->max_ctrls > 1024 || cfg->aer_limit < 1 ||
	    cfg->aer_limit > NVMF_AER_MAX)
		return -EINVAL;
	return 0;
}

struct nvmf_tgt *nvmf_tgt_create(const struct nvmf_tgt_config *cfg)
{
	struct nvmf_tgt *t;

	if (!cfg || cfg_check(cfg)) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->cfg = *cfg;
	t->nvm.ns = calloc(cfg->nr_ns, sizeof(*t->nvm.ns));
	t->ctrls = calloc(cfg->max_ctrls, sizeof(*t->ctrls));
	if (!t->nvm.ns || !t->ctrls)
		goto nomem;
	pthread_mutex_init(&t->lock, NULL);
	t->disc.discovery = true;
	strcpy(t->disc.nqn, NVME_DISC_NQN);
	strcpy(t->nvm.nqn, cfg->subnqn);
	t->nvm.nr_ns = cfg->nr_ns;
	for (uint32_t i = 0; i < cfg->nr_ns; i++) {
		struct nvmf_ns *n = &t->nvm.ns[i];
		static const uint8_t zero[16];

		n->nsid = i + 1;
		n->lbads = cfg->ns[i].block_size == 4096 ? 12 : 9;
		n->nblocks = cfg->ns[i].nblocks;
		n->backend = cfg->ns[i].backend;
		atomic_init(&n->wp, false);
		if (memcmp(cfg->ns[i].nguid, zero, 16))
			memcpy(n->nguid, cfg->ns[i].nguid, 16);
		else
			nguid_derive(n->nguid, cfg->subnqn, n->nsid);
	}
	strcpy(t->serial, cfg->serial ? cfg->serial : "pollcore");
	strcpy(t->model, cfg->model ? cfg->model : "pollcore-nvmf");
	strcpy(t->firmware, cfg->firmware ? cfg->firmware : "0.1");
	strcpy(t->traddr, cfg->traddr);
	strcpy(t->trsvcid, cfg->trsvcid);
	t->cfg.subnqn = t->nvm.nqn;
	t->cfg.serial = t->serial;
	t->cfg.model = t->model;
	t->cfg.firmware = t->firmware;
	t->cfg.traddr = t->traddr;
	t->cfg.trsvcid = t->trsvcid;
	t->cfg.ns = NULL; /* copied into t->nvm.ns */
	t->icd = cfg->in_capsule;
	while ((4096u << t->mdts_log) < cfg->mdts)
		t->mdts_log++;
	t->next_cntlid = NVME_CNTLID_MIN;
	t->genctr = 1;
	return t;
nomem:
	if (t) {
		free(t->nvm.ns);
		free(t->ctrls);
		free(t);
	}
	errno = ENOMEM;
	return NULL;
}

void nvmf_tgt_destroy(struct nvmf_tgt *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->nvm.ns);
	free(t->ctrls);
	free(t);
}

uint32_t nvmf_tgt_in_capsule(const struct nvmf_tgt *t)
{
	return t->icd;
}

struct nvmf_ns *nvmf_ns_get(struct nvmf_subsys *s, uint32_t nsid)
{
	if (nsid < 1 || nsid > s->nr_ns)
		return NULL;
	return &s->ns[nsid - 1];
}

uint32_t nvmf_kato_round(uint32_t kato)
{
	uint64_t r = ((uint64_t)kato + NVMF_KAS_MS - 1) / NVMF_KAS_MS * NVMF_KAS_MS;

	return r > UINT32_MAX ? UINT32_MAX / NVMF_KAS_MS * NVMF_KAS_MS : (uint32_t)r;
}

void nvmf_ctrl_stats(struct nvmf_ctrl *c, uint64_t sum[NVMF_ST_NR])
{
	/* with the lock held: queue membership cannot change */
	for (int i = 0; i < NVMF_ST_NR; i++) {
		sum[i] = c->gone_stats[i];
		if (c->admin)
			sum[i] += atomic_load_explicit(&c->admin->stats[i], memory_order_relaxed);
		for (int qid = 1; qid <= c->tgt->cfg.max_io_queues; qid++)
			if (c->ioq[qid])
				sum[i] += atomic_load_explicit(&c->ioq[qid]->stats[i],
							       memory_order_relaxed);
	}
}

/* ---- rdma_cm private data -------------------------------------------------- */

static uint16_t max_sqsize(const struct nvmf_tgt *t, uint16_t qid)
{
	return qid ? (uint16_t)(t->cfg.max_queue_depth - 1) : NVME_AQ_DEPTH - 1;
}

int nvmf_cm_request(const struct nvmf_tgt *t, const void *pd, size_t len,
		    struct nvmf_cm_params *p, struct nvmf_rdma_cm_rep *rep,
		    struct nvmf_rdma_cm_rej *rej)
{
	struct nvmf_rdma_cm_req r;
	uint16_t sts = 0;

	memset(rej, 0, sizeof(*rej));
	memset(rep, 0, sizeof(*rep));
	if (!pd || len < sizeof(r)) {
		sts = NVMF_RDMA_CM_INVALID_LEN;
		goto reject;
	}
	memcpy(&r, pd, sizeof(r));
	if (r.recfmt != 0)
		sts = NVMF_RDMA_CM_INVALID_RECFMT;
	else if (r.qid > t->cfg.max_io_queues)
		sts = NVMF_RDMA_CM_INVALID_QID;
	else if (r.hsqsize == 0 || r.hsqsize > max_sqsize(t, r.qid))
		sts = NVMF_RDMA_CM_INVALID_HSQSIZE;
	else if (r.hrqsize == 0 || r.hrqsize > max_sqsize(t, r.qid) + 1)
		sts = NVMF_RDMA_CM_INVALID_HRQSIZE;
	if (sts)
		goto reject;
	p->qid = r.qid;
	p->hsqsize = r.hsqsize;
	p->hrqsize = r.hrqsize;
	rep->crqsize = (uint16_t)(r.hsqsize + 1);
	return 0;
reject:
	rej->sts = sts;
	return -EPROTO;
}

/* ---- Connect ----------------------------------------------------------------- */

static enum nvmf_act connect_cmd(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
				 bool *close)
{
	const struct nvmf_connect_cmd *cc = (const void *)&req->sqe;
	uint16_t st;

	st = nvmf_sgl_parse(q, req, capsule_len, close);
	if (st || *close)
		return nvmf_complete(q, req, st, 0);
	if (cc->recfmt != 0)
		return nvmf_complete(q, req, NVME_SC_CONNECT_FORMAT | NVME_DNR, 0);
	if (cc->qid != q->qid)
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR,
				     NVMF_IPO_SQE(offsetof(struct nvmf_connect_cmd, qid)));
	if (cc->sqsize == 0 || cc->sqsize > max_sqsize(q->tgt, q->qid) || cc->sqsize != q->sqsize)
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR,
				     NVMF_IPO_SQE(offsetof(struct nvmf_connect_cmd, sqsize)));
	/* bits 1:0 priority class (ignored), bit 2 SQ flow control; the rest reserved */
	if (cc->cattr & ~(0x3u | NVMF_CATTR_DISABLE_SQFLOW))
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR,
				     NVMF_IPO_SQE(offsetof(struct nvmf_connect_cmd, cattr)));
	st = nvmf_sgl_expect(req, NVMF_XFER_FROM_HOST, sizeof(struct nvmf_connect_data));
	if (st)
		return nvmf_complete(q, req, st, 0);
	q->connecting = true;
	req->state = NVMF_RS_FETCH;
	return NVMF_ACT_FETCH;
}

static struct nvmf_ctrl *ctrl_alloc_locked(struct nvmf_tgt *t, struct nvmf_subsys *s)
{
	struct nvmf_ctrl *c;
	int slot = -1;

	for (int i = 0; i < t->cfg.max_ctrls && slot < 0; i++)
		if (!t->ctrls[i])
			slot = i;
	if (slot < 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ioq = calloc((size_t)t->cfg.max_io_queues + 1, sizeof(*c->ioq));
	if (!c->ioq) {
		free(c);
		return NULL;
	}
	/* cntlids cycle, so a reconnecting host never meets its old one soon */
	for (;;) {
		bool used = false;
		uint16_t id = t->next_cntlid;

		t->next_cntlid = id >= NVME_CNTLID_MAX ? NVME_CNTLID_MIN : (uint16_t)(id + 1);
		for (int i = 0; i < t->cfg.max_ctrls; i++)
			used |= t->ctrls[i] && t->ctrls[i]->cntlid == id;
		if (!used) {
			c->cntlid = id;
			break;
		}
	}
	c->tgt = t;
	c->subsys = s;
	atomic_init(&c->state, NVMF_CTRL_LIVE);
	atomic_init(&c->csts, 0);
	atomic_init(&c->ka_count, 1);
	c->nr_io_granted = s->discovery ? 0 : t->cfg.max_io_queues;
	t->ctrls[slot] = c;
	return c;
}

static struct nvmf_ctrl *ctrl_find_locked(struct nvmf_tgt *t, struct nvmf_subsys *s,
					  uint16_t cntlid)
{
	for (int i = 0; i < t->cfg.max_ctrls; i++) {
		struct nvmf_ctrl *c = t->ctrls[i];

		if (c && c->cntlid == cntlid && c->subsys == s &&
		    atomic_load_explicit(&c->state, memory_order_relaxed) == NVMF_CTRL_LIVE)
			return c;
	}
	return NULL;
}

#define IPO_DATA(f) NVMF_IPO_DATA(offsetof(struct nvmf_connect_data, f))

enum nvmf_act nvmf_connect_data(struct nvmf_queue *q, struct nvmf_req *req, const void *data,
				size_t len)
{
	const struct nvmf_connect_cmd *cc = (const void *)&req->sqe;
	struct nvmf_tgt *t = q->tgt;
	struct nvmf_connect_data d;
	struct nvmf_subsys *s;
	struct nvmf_ctrl *c;
	uint16_t st = NVME_SC_SUCCESS;
	uint32_t ipo = 0;

	q->connecting = false;
	memcpy(&d, data, sizeof(d));
	(void)len;
	if (!memchr(d.subnqn, 0, sizeof(d.subnqn)))
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR, IPO_DATA(subnqn));
	if (!strcmp(d.subnqn, t->nvm.nqn))
		s = &t->nvm;
	else if (!strcmp(d.subnqn, t->disc.nqn))
		s = &t->disc;
	else
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR, IPO_DATA(subnqn));
	if (!memchr(d.hostnqn, 0, sizeof(d.hostnqn)) || !d.hostnqn[0] ||
	    strlen(d.hostnqn) > NVMF_NQN_MAX)
		return nvmf_complete(q, req, NVME_SC_CONNECT_INVALID | NVME_DNR, IPO_DATA(hostnqn));

	pthread_mutex_lock(&t->lock);
	if (q->qid == 0) {
		/* dynamic controller model: the host asks for "any" */
		if (d.cntlid != NVME_CNTLID_DYNAMIC) {
			st = NVME_SC_CONNECT_INVALID | NVME_DNR;
			ipo = IPO_DATA(cntlid);
			goto out;
		}
		c = ctrl_alloc_locked(t, s);
		if (!c) {
			st = NVME_SC_CONNECT_BUSY; /* may be retried */
			goto out;
		}
		memcpy(c->hostid, d.hostid, sizeof(c->hostid));
		strcpy(c->hostnqn, d.hostnqn);
		c->kato_ms = nvmf_kato_round(cc->kato);
		c->admin = q;
		c->refs = 1;
	} else {
		c = ctrl_find_locked(t, s, d.cntlid);
		if (!c || strcmp(c->hostnqn, d.hostnqn)) {
			st = NVME_SC_CONNECT_INVALID | NVME_DNR;
			ipo = IPO_DATA(cntlid);
			goto out;
		}
		if (memcmp(c->hostid, d.hostid, sizeof(d.hostid))) {
			st = NVME_SC_CONNECT_INVALID | NVME_DNR;
			ipo = IPO_DATA(hostid);
			goto out;
		}
		if (!nvmf_ctrl_ready(c)) {
			st = NVME_SC_CMD_SEQ_ERROR | NVME_DNR;
			goto out;
		}
		if (q->qid > c->nr_io_granted) {
			st = NVME_SC_INVALID_QID | NVME_DNR;
			ipo = NVMF_IPO_SQE(offsetof(struct nvmf_connect_cmd, qid));
			goto out;
		}
		if (c->ioq[q->qid]) { /* that queue exists already */
			st = NVME_SC_CMD_SEQ_ERROR | NVME_DNR;
			goto out;
		}
		c->ioq[q->qid] = q;
		c->nr_ioq++;
		c->refs++;
	}
	q->ctrl = c;
	q->sqflow_off = cc->cattr & NVMF_CATTR_DISABLE_SQFLOW;
	ipo = c->cntlid;
out:
	pthread_mutex_unlock(&t->lock);
	return nvmf_complete(q, req, st, ipo);
}

/* ---- Property Get / Set ----------------------------------------------------- */

static uint64_t prop_cap(const struct nvmf_tgt *t)
{
	return NVME_CAP_MQES(t->cfg.max_queue_depth - 1u) | NVME_CAP_CQR |
	       NVME_CAP_TO(NVMF_CAP_TO) | NVME_CAP_CSS_NVM;
}

/* The enable and shutdown state machine, on a CC write. */
static void cc_write(struct nvmf_ctrl *c, uint32_t cc)
{
	uint32_t old = c->cc, csts = atomic_load_explicit(&c->csts, memory_order_relaxed);

	if ((cc & NVME_CC_EN) && !(old & NVME_CC_EN)) {
		bool ok = NVME_CC_CSS(cc) == 0 && NVME_CC_MPS(cc) == 0 && NVME_CC_AMS(cc) == 0;

		if (!c->subsys->discovery)
			ok = ok && NVME_CC_IOSQES(cc) == NVME_CC_IOSQES_NVM &&
			     NVME_CC_IOCQES(cc) == NVME_CC_IOCQES_NVM;
		csts = ok ? NVME_CSTS_RDY : NVME_CSTS_CFS;
	} else if (!(cc & NVME_CC_EN) && (old & NVME_CC_EN)) {
		csts = 0; /* a controller reset */
	}
	if (NVME_CC_SHN(cc) && !NVME_CC_SHN(old))
		csts = (csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT; /* nothing to drain */
	else if (!NVME_CC_SHN(cc) && NVME_CC_SHN(old))
		csts &= ~NVME_CSTS_SHST_MASK;
	c->cc = cc;
	atomic_store_explicit(&c->csts, csts, memory_order_release);
}

static enum nvmf_act prop_cmd(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			      bool *close)
{
	const struct nvmf_prop_cmd *pc = (const void *)&req->sqe;
	struct nvmf_ctrl *c = q->ctrl;
	uint8_t size = pc->attrib & NVMF_PROP_SIZE_MASK;
	uint16_t st;
	uint64_t v = 0;

	st = nvmf_sgl_parse(q, req, capsule_len, close);
	if (!st && !*close)
		st = nvmf_sgl_expect(req, NVMF_XFER_NONE, 0);
	if (st || *close)
		return nvmf_complete(q, req, st, 0);
	if (size > NVMF_PROP_SIZE_8)
		return nvmf_complete(q, req, NVME_SC_INVALID_FIELD | NVME_DNR, 0);
	if (pc->fctype == NVMF_FCT_PROP_GET) {
		switch (pc->offset) {
		case NVME_REG_CAP:
			if (size != NVMF_PROP_SIZE_8)
				goto invalid;
			v = prop_cap(q->tgt);
			break;
		case NVME_REG_VS:
			v = NVMF_VS;
			break;
		case NVME_REG_CC:
			v = c->cc;
			break;
		case NVME_REG_CSTS:
			v = atomic_load_explicit(&c->csts, memory_order_relaxed);
			break;
		default:
			goto invalid;
		}
		if (pc->offset != NVME_REG_CAP && size != NVMF_PROP_SIZE_4)
			goto invalid;
		return nvmf_complete(q, req, NVME_SC_SUCCESS, v);
	}
	/* Set: CC is the only writable property */
	if (pc->offset != NVME_REG_CC || size != NVMF_PROP_SIZE_4 || pc->value >> 32 ||
	    (pc->value & ~(uint64_t)NVME_CC_WRITABLE))
		goto invalid;
	cc_write(c, (uint32_t)pc->value);
	return nvmf_complete(q, req, NVME_SC_SUCCESS, 0);
invalid:
	return nvmf_complete(q, req, NVME_SC_INVALID_FIELD | NVME_DNR, 0);
}

enum nvmf_act nvmf_fabrics(struct nvmf_queue *q, struct nvmf_req *req, size_t capsule_len,
			   bool *close)
{
	uint8_t fct = nvme_sqe_fctype(&req->sqe);

	if (fct == NVMF_FCT_CONNECT) {
		if (q->ctrl || q->connecting) /* one Connect per queue */
			return nvmf_complete(q, req, NVME_SC_CMD_SEQ_ERROR | NVME_DNR, 0);
		return connect_cmd(q, req, capsule_len, close);
	}
	if (!q->ctrl)
		return nvmf_complete(q, req, NVME_SC_CMD_SEQ_ERROR | NVME_DNR, 0);
	if (q->qid == 0 && (fct == NVMF_FCT_PROP_GET || fct == NVMF_FCT_PROP_SET))
		return prop_cmd(q, req, capsule_len, close);
	/* Disconnect, authentication, reserved types; properties on an I/O queue */
	return nvmf_complete(q, req, NVME_SC_INVALID_OPCODE | NVME_DNR, 0);
}

/* ---- keep-alive ------------------------------------------------------------- */

void nvmf_ctrl_kill_locked(struct nvmf_ctrl *c)
{
	atomic_store_explicit(&c->state, NVMF_CTRL_DEAD, memory_order_release);
	/* release: a worker that sees the new generation sees the state */
	atomic_fetch_add_explicit(&c->tgt->dead_gen, 1, memory_order_release);
}

uint32_t nvmf_tgt_dead_gen(struct nvmf_tgt *t)
{
	return atomic_load_explicit(&t->dead_gen, memory_order_acquire);
}

int nvmf_tgt_keepalive(struct nvmf_tgt *t, uint64_t now_ms, uint16_t *expired, int max)
{
	int n = 0;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < t->cfg.max_ctrls; i++) {
		struct nvmf_ctrl *c = t->ctrls[i];
		uint64_t seen;

		if (!c || !c->kato_ms ||
		    atomic_load_explicit(&c->state, memory_order_relaxed) != NVMF_CTRL_LIVE)
			continue;
		seen = atomic_load_explicit(&c->ka_count, memory_order_relaxed);
		/* one KAS of slack: the timer's granularity (a host may send every KATO) */
		if (!c->ka_deadline || seen != c->ka_seen) {
			c->ka_seen = seen;
			c->ka_deadline = now_ms + c->kato_ms + NVMF_KAS_MS;
			continue;
		}
		if (now_ms <= c->ka_deadline || n >= max)
			continue;
		nvmf_ctrl_kill_locked(c);
		expired[n++] = c->cntlid;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- asynchronous events ---------------------------------------------------- */

void nvmf_post_event_locked(struct nvmf_ctrl *c, uint32_t dw0)
{
	struct nvmf_queue *admin = c->admin;

	if (c->ev_count < NVMF_EVENTS_MAX) {
		c->ev[(c->ev_head + c->ev_count) % NVMF_EVENTS_MAX] = dw0;
		c->ev_count++;
	}
	if (!admin)
		return;
	atomic_store_explicit(&admin->ev_pending, true, memory_order_release);
	if (c->tgt->cfg.event_notify)
		c->tgt->cfg.event_notify(c->tgt->cfg.event_arg, admin);
}

void nvmf_ns_changed_locked(struct nvmf_tgt *t, uint32_t nsid)
{
	for (int i = 0; i < t->cfg.max_ctrls; i++) {
		struct nvmf_ctrl *c = t->ctrls[i];
		bool listed = false;

		if (!c || c->subsys != &t->nvm ||
		    atomic_load_explicit(&c->state, memory_order_relaxed) != NVMF_CTRL_LIVE)
			continue;
		for (uint32_t k = 0; k < c->nr_changed && k < NVME_CHANGED_NS_MAX; k++)
			listed |= c->changed_ns[k] == nsid;
		if (!listed) {
			if (c->nr_changed < NVME_CHANGED_NS_MAX)
				c->changed_ns[c->nr_changed] = nsid;
			if (c->nr_changed <= NVME_CHANGED_NS_MAX)
				c->nr_changed++;
		}
		/* one event until the host reads the log */
		if ((c->aec & NVME_AEC_NS_ATTR) && !(c->ev_masked & (1u << NVME_LOG_CHANGED_NS))) {
			c->ev_masked |= 1u << NVME_LOG_CHANGED_NS;
			nvmf_post_event_locked(c, NVME_AER_NOTICE | NVME_AER_NOTICE_NS_CHANGED << 8 |
							  (uint32_t)NVME_LOG_CHANGED_NS << 16);
		}
	}
}

int nvmf_tgt_ns_changed(struct nvmf_tgt *t, uint32_t nsid)
{
	if (!nvmf_ns_get(&t->nvm, nsid))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	nvmf_ns_changed_locked(t, nsid);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void nvmf_tgt_disc_changed(struct nvmf_tgt *t)
{
	pthread_mutex_lock(&t->lock);
	t->genctr++;
	for (int i = 0; i < t->cfg.max_ctrls; i++) {
		struct nvmf_ctrl *c = t->ctrls[i];

		if (!c || c->subsys != &t->disc ||
		    atomic_load_explicit(&c->state, memory_order_relaxed) != NVMF_CTRL_LIVE)
			continue;
		if ((c->aec & NVME_AEC_DISC_CHANGE) && !c->ev_disc_masked) {
			c->ev_disc_masked = true;
			nvmf_post_event_locked(c, NVME_AER_NOTICE |
							  NVME_AER_NOTICE_DISC_CHANGED << 8 |
							  (uint32_t)NVME_LOG_DISCOVERY << 16);
		}
	}
	pthread_mutex_unlock(&t->lock);
}
