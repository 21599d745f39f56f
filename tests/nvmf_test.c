// SPDX-License-Identifier: MIT
/*
 * Test-only host for tests/test_nvmf_*.c (see nvmf_test.h).
 */
#include "nvmf_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct t_disk t_disks[2];
int t_notified;

static void notify(void *arg, struct nvmf_queue *admin)
{
	(void)arg;
	(void)admin;
	t_notified++;
}

struct nvmf_tgt *t_tgt(void (*cfg_edit)(struct nvmf_tgt_config *cfg))
{
	static struct nvmf_ns_config ns[2];
	struct nvmf_tgt_config cfg = {
		.subnqn = T_SUBNQN,
		.serial = "PC0001",
		.model = "pollcore-nvmf test",
		.firmware = "0.1.0",
		.ns = ns,
		.nr_ns = 2,
		.adrfam = NVMF_ADRFAM_IPV6,
		.traddr = "fe80::ff:fe00:1%d0",
		.trsvcid = "4420",
		.portid = 1,
		.max_io_queues = T_NR_IOQ,
		.max_queue_depth = T_DEPTH,
		.in_capsule = T_ICD,
		.mdts = T_MDTS,
		.max_ctrls = 8,
		.aer_limit = 4,
		.volatile_cache = true,
		.event_notify = notify,
	};
	struct nvmf_tgt *t;

	for (int i = 0; i < 2; i++) {
		t_disks[i].size = i == 0 ? T_NS1_BLOCKS * 512u : T_NS2_BLOCKS * 4096u;
		free(t_disks[i].mem);
		t_disks[i].mem = calloc(1, t_disks[i].size);
		t_disks[i].flushes = t_disks[i].zeroes = t_disks[i].discards = 0;
		ns[i] = (struct nvmf_ns_config){.nblocks = i == 0 ? T_NS1_BLOCKS : T_NS2_BLOCKS,
						.block_size = i == 0 ? 512 : 4096,
						.backend = &t_disks[i]};
	}
	t_notified = 0;
	if (cfg_edit)
		cfg_edit(&cfg);
	t = nvmf_tgt_create(&cfg);
	ck_assert_ptr_nonnull(t);
	return t;
}

void t_tgt_free(struct nvmf_tgt *t)
{
	nvmf_tgt_destroy(t);
	for (int i = 0; i < 2; i++) {
		free(t_disks[i].mem);
		t_disks[i].mem = NULL;
	}
}

struct nvme_sqe t_sqe(uint8_t opcode, uint16_t cid)
{
	struct nvme_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = opcode;
	s.flags = NVME_FLAGS_PSDT_SGL;
	s.cid = cid;
	nvme_sgl_set_keyed(&s.dptr, 0, 0, 0, NVME_SGL_SUB_ADDRESS);
	return s;
}

void t_keyed(struct nvme_sqe *s, void *host_buf, uint32_t len)
{
	nvme_sgl_set_keyed(&s->dptr, (uint64_t)(uintptr_t)host_buf, len, T_KEY,
			   NVME_SGL_SUB_INVALIDATE);
}

void t_incapsule(struct nvme_sqe *s, uint32_t off, uint32_t len)
{
	nvme_sgl_set_offset(&s->dptr, off, len);
}

struct nvme_sqe t_connect_sqe(uint16_t qid, uint16_t sqsize, uint32_t kato)
{
	struct nvme_sqe s = t_sqe(NVME_OPC_FABRICS, 0x10);
	struct nvmf_connect_cmd *c = (void *)&s;

	c->fctype = NVMF_FCT_CONNECT;
	c->qid = qid;
	c->sqsize = sqsize;
	c->kato = kato;
	return s;
}

struct nvmf_connect_data t_connect_data(uint16_t cntlid, const char *subnqn, const char *hostnqn)
{
	struct nvmf_connect_data d;

	memset(&d, 0, sizeof(d));
	memset(d.hostid, 0xa5, sizeof(d.hostid));
	d.cntlid = cntlid;
	strcpy(d.subnqn, subnqn);
	strcpy(d.hostnqn, hostnqn);
	return d;
}

struct nvme_sqe t_prop(uint8_t fctype, uint32_t off, uint8_t size, uint64_t value)
{
	struct nvme_sqe s = t_sqe(NVME_OPC_FABRICS, 0x20);
	struct nvmf_prop_cmd *p = (void *)&s;

	p->fctype = fctype;
	p->attrib = size;
	p->offset = off;
	if (fctype == NVMF_FCT_PROP_SET)
		p->value = value;
	return s;
}

/* The transport's part: carry out @act until the command completes. */
static enum nvmf_act drive(struct t_queue *tq, struct nvmf_req *r, enum nvmf_act act,
			   struct nvme_cqe *cqe)
{
	static uint8_t buf[T_MDTS + 4096] __attribute__((aligned(64)));
	const uint8_t *src = NULL;
	struct t_disk *d;

	for (;;) {
		const struct nvmf_xfer *x = &r->xfer;

		if (act == NVMF_ACT_FETCH || act == NVMF_ACT_WRITE) {
			ck_assert_uint_eq(x->dir, NVMF_XFER_FROM_HOST);
			ck_assert_uint_le(x->len, sizeof(buf));
			if (x->in_capsule) {
				src = tq->capsule + x->icd_off;
			} else {
				ck_assert_uint_eq(x->key, T_KEY);
				memcpy(buf, (void *)(uintptr_t)x->addr, x->len); /* RDMA READ */
				src = buf;
			}
		}
		switch (act) {
		case NVMF_ACT_FETCH:
			act = nvmf_req_data(tq->q, r, src, x->len);
			continue;
		case NVMF_ACT_FILL:
			ck_assert_uint_eq(x->dir, NVMF_XFER_TO_HOST);
			act = nvmf_req_fill(tq->q, r, buf, x->len);
			ck_assert_int_eq(act, NVMF_ACT_COMPLETE);
			if (r->cqe.status == 0)
				memcpy((void *)(uintptr_t)x->addr, buf, x->len); /* RDMA WRITE */
			continue;
		case NVMF_ACT_READ:
			d = r->io.backend;
			ck_assert_uint_le(r->io.off + r->io.len, d->size);
			ck_assert_uint_eq(x->len, r->io.len);
			memcpy(buf, d->mem + r->io.off, r->io.len);
			act = nvmf_req_complete(tq->q, r, 0);
			ck_assert_int_eq(act, NVMF_ACT_COMPLETE);
			memcpy((void *)(uintptr_t)x->addr, buf, x->len); /* RDMA WRITE */
			continue;
		case NVMF_ACT_WRITE:
			d = r->io.backend;
			ck_assert_uint_le(r->io.off + r->io.len, d->size);
			ck_assert_uint_eq(x->len, r->io.len);
			memcpy(d->mem + r->io.off, src, r->io.len);
			act = nvmf_req_complete(tq->q, r, 0);
			continue;
		case NVMF_ACT_FLUSH:
			for (int i = 0; i < 2; i++)
				if (!r->io.backend || r->io.backend == &t_disks[i])
					t_disks[i].flushes++;
			act = nvmf_req_complete(tq->q, r, 0);
			continue;
		case NVMF_ACT_ZEROES:
			d = r->io.backend;
			ck_assert_uint_le(r->io.off + r->io.len, d->size);
			memset(d->mem + r->io.off, 0, r->io.len);
			d->zeroes++;
			act = nvmf_req_complete(tq->q, r, 0);
			continue;
		case NVMF_ACT_DISCARD:
			d = r->io.backend;
			for (uint32_t i = 0; i < r->io.nr_ranges; i++) {
				uint64_t off, len;

				ck_assert_int_eq(nvmf_req_range(r, src, i, &off, &len), 0);
				ck_assert_uint_le(off + len, d->size);
				memset(d->mem + off, 0, len);
			}
			ck_assert_int_eq(nvmf_req_range(r, src, r->io.nr_ranges, &(uint64_t){0},
							&(uint64_t){0}),
					 -EINVAL);
			d->discards++;
			act = nvmf_req_complete(tq->q, r, 0);
			continue;
		case NVMF_ACT_COMPLETE:
			if (cqe)
				*cqe = r->cqe;
			return act;
		case NVMF_ACT_HOLD:
		case NVMF_ACT_CLOSE:
			return act;
		}
		ck_abort_msg("unknown action %d", act);
	}
}

enum nvmf_act t_exec_raw(struct t_queue *tq, int slot, const void *capsule, size_t len,
			 struct nvme_cqe *cqe)
{
	struct nvmf_req *r = &tq->req[slot];

	ck_assert_uint_le(len, sizeof(tq->capsule));
	memmove(tq->capsule, capsule, len);
	return drive(tq, r, nvmf_queue_submit(tq->q, tq->capsule, len, r), cqe);
}

enum nvmf_act t_exec(struct t_queue *tq, int slot, const struct nvme_sqe *s, const void *icd,
		     uint32_t icd_len, struct nvme_cqe *cqe)
{
	uint8_t cap[64 + T_ICD];

	ck_assert_uint_le(icd_len, T_ICD);
	memcpy(cap, s, 64);
	if (icd_len)
		memcpy(cap + 64, icd, icd_len);
	return t_exec_raw(tq, slot, cap, 64 + icd_len, cqe);
}

uint16_t t_status(struct t_queue *tq, const struct nvme_sqe *s, struct nvme_cqe *cqe)
{
	struct nvme_cqe c;

	ck_assert_int_eq(t_exec(tq, 0, s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.cid, s->cid);
	if (cqe)
		*cqe = c;
	return nvme_cqe_sf(&c);
}

struct t_queue *t_queue_new(struct nvmf_tgt *t, uint16_t qid, uint16_t hsqsize)
{
	struct t_queue *tq = calloc(1, sizeof(*tq));

	ck_assert_ptr_nonnull(tq);
	tq->q = nvmf_queue_create(t, qid, hsqsize);
	ck_assert_ptr_nonnull(tq->q);
	return tq;
}

void t_queue_free(struct t_queue *tq)
{
	if (!tq)
		return;
	nvmf_queue_destroy(tq->q);
	free(tq);
}

struct t_queue *t_admin(struct nvmf_tgt *t, const char *subnqn, uint32_t kato, uint16_t *cntlid)
{
	struct t_queue *tq = t_queue_new(t, 0, NVME_AQ_DEPTH - 1);
	struct nvmf_connect_data d = t_connect_data(NVME_CNTLID_DYNAMIC, subnqn, T_HOSTNQN);
	struct nvme_sqe s = t_connect_sqe(0, NVME_AQ_DEPTH - 1, kato);
	struct nvme_cqe c;

	t_keyed(&s, &d, sizeof(d));
	ck_assert_int_eq(t_exec(tq, 0, &s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(nvme_cqe_sf(&c), NVME_SC_SUCCESS);
	ck_assert_uint_ge(c.result, NVME_CNTLID_MIN);
	ck_assert_uint_le(c.result, NVME_CNTLID_MAX);
	ck_assert_uint_eq(nvmf_queue_cntlid(tq->q), c.result);
	if (cntlid)
		*cntlid = (uint16_t)c.result;
	return tq;
}

struct t_queue *t_admin_ready(struct nvmf_tgt *t, uint16_t *cntlid)
{
	struct t_queue *tq = t_admin(t, T_SUBNQN, 5000, cntlid);
	struct nvme_sqe s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4,
				   NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20);

	ck_assert_uint_eq(t_status(tq, &s, NULL), NVME_SC_SUCCESS);
	return tq;
}

struct t_queue *t_io(struct nvmf_tgt *t, uint16_t qid, uint16_t cntlid)
{
	struct t_queue *tq = t_queue_new(t, qid, T_DEPTH - 1);
	struct nvmf_connect_data d = t_connect_data(cntlid, T_SUBNQN, T_HOSTNQN);
	struct nvme_sqe s = t_connect_sqe(qid, T_DEPTH - 1, 0);
	struct nvme_cqe c;

	/* I/O queue Connects carry their data in the capsule, as Linux's may */
	t_incapsule(&s, 0, sizeof(d));
	ck_assert_int_eq(t_exec(tq, 0, &s, &d, sizeof(d), &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(nvme_cqe_sf(&c), NVME_SC_SUCCESS);
	ck_assert_uint_eq(c.result, cntlid);
	return tq;
}
