// SPDX-License-Identifier: MIT
/*
 * unit suite: pollcore-nvmf's protocol core (tools/nvmf): wire layouts,
 * rdma_cm private data, Connect, properties and the enable/shutdown state
 * machine, Identify as a Linux host reads it, log pages, features, AERs and
 * keep-alive. I/O decoding and the fuzz loop are in test_nvmf_io.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf_test.h"

#define DNR(st) ((uint16_t)((st) | NVME_DNR))

static struct nvmf_tgt *t;

static void setup(void)
{
	t = t_tgt(NULL);
}

static void teardown(void)
{
	t_tgt_free(t);
	t = NULL;
}

/* ---- layouts ---------------------------------------------------------------- */

START_TEST(test_layout)
{
	struct nvme_sqe s = t_sqe(NVME_IO_READ, 0xbeef);
	struct nvme_cqe c = {.status = (uint16_t)(DNR(NVME_SC_LBA_RANGE) << 1)};
	uint8_t b[64];

	ck_assert_uint_eq(sizeof(struct nvme_sqe), 64);
	ck_assert_uint_eq(sizeof(struct nvme_cqe), 16);
	ck_assert_uint_eq(sizeof(struct nvme_sgl), 16);
	ck_assert_uint_eq(sizeof(struct nvmf_connect_cmd), 64);
	ck_assert_uint_eq(sizeof(struct nvmf_connect_data), 1024);
	ck_assert_uint_eq(sizeof(struct nvmf_prop_cmd), 64);
	ck_assert_uint_eq(sizeof(struct nvme_id_ctrl), 4096);
	ck_assert_uint_eq(sizeof(struct nvme_id_ns), 4096);
	ck_assert_uint_eq(sizeof(struct nvmf_disc_hdr), 1024);
	ck_assert_uint_eq(sizeof(struct nvmf_disc_entry), 1024);
	ck_assert_uint_eq(sizeof(struct nvme_err_entry), 64);
	ck_assert_uint_eq(sizeof(struct nvme_smart_log), 512);
	ck_assert_uint_eq(sizeof(struct nvme_changed_ns_log), 4096);
	ck_assert_uint_eq(sizeof(struct nvmf_rdma_cm_req), 32);
	ck_assert_uint_eq(sizeof(struct nvmf_rdma_cm_rep), 32);
	ck_assert_uint_eq(sizeof(struct nvmf_rdma_cm_rej), 4);

	/* a keyed SGL on the wire: 24-bit length, 32-bit key, identifier byte 15 */
	nvme_sgl_set_keyed(&s.dptr, 0x1122334455667788ull, 0xabcdef, 0x01020304,
			   NVME_SGL_SUB_INVALIDATE);
	memcpy(b, &s, 64);
	ck_assert_uint_eq(b[0], NVME_IO_READ);
	ck_assert_uint_eq(b[1], 0x40);
	ck_assert_uint_eq(b[2], 0xef);
	ck_assert_uint_eq(b[3], 0xbe);
	ck_assert_uint_eq(b[24], 0x88);
	ck_assert_uint_eq(b[31], 0x11);
	ck_assert_uint_eq(b[32], 0xef);
	ck_assert_uint_eq(b[34], 0xab);
	ck_assert_uint_eq(b[35], 0x04);
	ck_assert_uint_eq(b[38], 0x01);
	ck_assert_uint_eq(b[39], 0x4f);
	ck_assert_uint_eq(nvme_sgl_keyed_len(&s.dptr), 0xabcdef);
	ck_assert_uint_eq(nvme_sgl_key(&s.dptr), 0x01020304);
	nvme_sgl_set_offset(&s.dptr, 16, 0x12345678);
	memcpy(b, &s, 64);
	ck_assert_uint_eq(b[32], 0x78);
	ck_assert_uint_eq(b[35], 0x12);
	ck_assert_uint_eq(b[39], 0x01);
	ck_assert_uint_eq(nvme_sgl_len(&s.dptr), 0x12345678);

	/* CQE status: phase in bit 0, SC 8:1, SCT 11:9, DNR 15 */
	ck_assert_uint_eq(c.status, 0x8100);
	ck_assert_uint_eq(NVME_SC(nvme_cqe_sf(&c)), 0x80);
	ck_assert_uint_eq(NVME_SCT(nvme_cqe_sf(&c)), 0);
	c.status = (uint16_t)(NVME_SC_CONNECT_INVALID << 1);
	ck_assert_uint_eq(NVME_SCT(nvme_cqe_sf(&c)), 1);
	ck_assert_uint_eq(NVME_SC(nvme_cqe_sf(&c)), 0x82);
}
END_TEST

static void bad_nqn(struct nvmf_tgt_config *c) { c->subnqn = NVME_DISC_NQN; }
static void bad_bs(struct nvmf_tgt_config *c) { ((struct nvmf_ns_config *)c->ns)[1].block_size = 1024; }
static void bad_mdts(struct nvmf_tgt_config *c) { c->mdts = 96 << 10; }
static void big_mdts(struct nvmf_tgt_config *c) { c->mdts = 16u << 20; }
static void bad_icd(struct nvmf_tgt_config *c) { c->in_capsule = 100; }
static void bad_depth(struct nvmf_tgt_config *c) { c->max_queue_depth = 1; }
static void bad_aerl(struct nvmf_tgt_config *c) { c->aer_limit = NVMF_AER_MAX + 1; }
static void bad_serial(struct nvmf_tgt_config *c) { c->serial = "123456789012345678901"; }
static void bad_adrfam(struct nvmf_tgt_config *c) { c->adrfam = 3; }
static void bad_model(struct nvmf_tgt_config *c) { c->model = "caf\xc3\xa9"; }
static void no_ns(struct nvmf_tgt_config *c) { c->nr_ns = 0; }

START_TEST(test_config)
{
	void (*bad[])(struct nvmf_tgt_config *) = {bad_nqn,   bad_bs,	 bad_mdts,   big_mdts,
						   bad_icd,   bad_depth, bad_aerl,   bad_serial,
						   bad_adrfam, no_ns,	  bad_model};
	struct nvmf_tgt_config cfg;

	ck_assert_uint_eq(nvmf_tgt_in_capsule(t), T_ICD);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nvmf_ns_config ns[2] = {{.nblocks = 8, .block_size = 512},
					       {.nblocks = 8, .block_size = 4096}};

		cfg = (struct nvmf_tgt_config){.subnqn = T_SUBNQN, .ns = ns, .nr_ns = 2,
					       .adrfam = NVMF_ADRFAM_IPV4, .traddr = "10.0.0.1",
					       .trsvcid = "4420", .max_io_queues = 2,
					       .max_queue_depth = 32, .mdts = 4096, .max_ctrls = 1,
					       .aer_limit = 1};
		struct nvmf_tgt *ok = nvmf_tgt_create(&cfg);

		ck_assert_ptr_nonnull(ok);
		nvmf_tgt_destroy(ok);
		bad[i](&cfg);
		errno = 0;
		ck_assert_ptr_null(nvmf_tgt_create(&cfg));
		ck_assert_int_eq(errno, EINVAL);
	}
	ck_assert_ptr_null(nvmf_tgt_create(NULL));
}
END_TEST

/* ---- rdma_cm private data ---------------------------------------------------- */

static uint16_t cm(uint16_t recfmt, uint16_t qid, uint16_t hrq, uint16_t hsq, size_t len,
		   struct nvmf_cm_params *p, struct nvmf_rdma_cm_rep *rep)
{
	uint8_t pd[56] = {0}; /* rdma_cm pads IB CM private data */
	struct nvmf_rdma_cm_req r = {.recfmt = recfmt, .qid = qid, .hrqsize = hrq, .hsqsize = hsq};
	struct nvmf_rdma_cm_rej rej;
	int rc;

	memcpy(pd, &r, sizeof(r));
	rc = nvmf_cm_request(t, pd, len, p, rep, &rej);
	if (rc == 0)
		return 0;
	ck_assert_int_eq(rc, -EPROTO);
	ck_assert_uint_eq(rej.recfmt, 0);
	return rej.sts;
}

START_TEST(test_cm_private_data)
{
	struct nvmf_cm_params p;
	struct nvmf_rdma_cm_rep rep;

	/* Linux's admin queue: hrqsize 32, hsqsize 31 */
	ck_assert_uint_eq(cm(0, 0, 32, 31, 56, &p, &rep), 0);
	ck_assert_uint_eq(p.qid, 0);
	ck_assert_uint_eq(p.hsqsize, 31);
	ck_assert_uint_eq(rep.recfmt, 0);
	ck_assert_uint_eq(rep.crqsize, 32);
	ck_assert_uint_eq(cm(0, 3, 128, 127, 32, &p, &rep), 0);
	ck_assert_uint_eq(rep.crqsize, 128);
	ck_assert_uint_eq(p.hrqsize, 128);

	ck_assert_uint_eq(cm(0, 0, 32, 31, 31, &p, &rep), NVMF_RDMA_CM_INVALID_LEN);
	ck_assert_uint_eq(cm(1, 0, 32, 31, 32, &p, &rep), NVMF_RDMA_CM_INVALID_RECFMT);
	ck_assert_uint_eq(cm(0, T_NR_IOQ + 1, 32, 31, 32, &p, &rep), NVMF_RDMA_CM_INVALID_QID);
	ck_assert_uint_eq(cm(0, 0, 33, 32, 32, &p, &rep), NVMF_RDMA_CM_INVALID_HSQSIZE);
	ck_assert_uint_eq(cm(0, 1, 1, 0, 32, &p, &rep), NVMF_RDMA_CM_INVALID_HSQSIZE);
	ck_assert_uint_eq(cm(0, 1, 129, T_DEPTH, 32, &p, &rep), NVMF_RDMA_CM_INVALID_HSQSIZE);
	ck_assert_uint_eq(cm(0, 1, 0, 127, 32, &p, &rep), NVMF_RDMA_CM_INVALID_HRQSIZE);
	ck_assert_uint_eq(cm(0, 1, T_DEPTH + 1, 127, 32, &p, &rep), NVMF_RDMA_CM_INVALID_HRQSIZE);
	ck_assert_int_eq(nvmf_cm_request(t, NULL, 32, &p, &rep, &(struct nvmf_rdma_cm_rej){0}),
			 -EPROTO);
}
END_TEST

/* ---- Connect ------------------------------------------------------------------ */

/* Connect on a fresh admin queue: the status, *ipo the result DW0 */
static uint16_t admin_connect(struct nvme_sqe s, struct nvmf_connect_data d, uint32_t *res)
{
	struct t_queue *q = t_queue_new(t, 0, 31);
	struct nvme_cqe c;
	uint16_t st;

	t_keyed(&s, &d, sizeof(d));
	st = t_status(q, &s, &c);
	if (res)
		*res = (uint32_t)c.result;
	ck_assert_uint_eq(nvmf_queue_cntlid(q->q), st ? 0 : c.result);
	t_queue_free(q);
	return st;
}

START_TEST(test_connect_admin)
{
	struct nvmf_connect_data d = t_connect_data(NVME_CNTLID_DYNAMIC, T_SUBNQN, T_HOSTNQN);
	struct nvme_sqe s = t_connect_sqe(0, 31, 5000), s2;
	struct t_queue *q;
	uint16_t id1, id2;
	uint32_t res;

	ck_assert_uint_eq(admin_connect(s, d, &res), NVME_SC_SUCCESS);
	ck_assert_uint_ge(res, 1);

	s2 = s;
	((struct nvmf_connect_cmd *)&s2)->recfmt = 1;
	ck_assert_uint_eq(admin_connect(s2, d, NULL), DNR(NVME_SC_CONNECT_FORMAT));
	s2 = t_connect_sqe(1, 31, 0); /* the queue was accepted as qid 0 */
	ck_assert_uint_eq(admin_connect(s2, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 42);
	s2 = t_connect_sqe(0, 0, 0);
	ck_assert_uint_eq(admin_connect(s2, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 44);
	s2 = t_connect_sqe(0, 15, 0); /* rdma_cm said hsqsize 31 */
	ck_assert_uint_eq(admin_connect(s2, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 44);
	s2 = s;
	((struct nvmf_connect_cmd *)&s2)->cattr = 0x10;
	ck_assert_uint_eq(admin_connect(s2, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 46);

	/* the data: IATTR (bit 16) set, IPO its offset */
	d = t_connect_data(NVME_CNTLID_DYNAMIC, "nqn.2026-12.io.pollcore:other", T_HOSTNQN);
	ck_assert_uint_eq(admin_connect(s, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 256);
	d = t_connect_data(NVME_CNTLID_DYNAMIC, T_SUBNQN, T_HOSTNQN);
	memset(d.subnqn, 'x', sizeof(d.subnqn));
	ck_assert_uint_eq(admin_connect(s, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 256);
	d = t_connect_data(NVME_CNTLID_DYNAMIC, T_SUBNQN, "");
	ck_assert_uint_eq(admin_connect(s, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 512);
	d = t_connect_data(NVME_CNTLID_DYNAMIC, T_SUBNQN, T_HOSTNQN);
	memset(d.hostnqn, 'h', NVMF_NQN_MAX + 1); /* one byte longer than an NQN may be */
	ck_assert_uint_eq(admin_connect(s, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 512);
	d.hostnqn[NVMF_NQN_MAX] = 0;
	ck_assert_uint_eq(admin_connect(s, d, &res), NVME_SC_SUCCESS);
	d = t_connect_data(1, T_SUBNQN, T_HOSTNQN);
	ck_assert_uint_eq(admin_connect(s, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 16);

	/* the data must be exactly 1024 bytes */
	q = t_queue_new(t, 0, 31);
	d = t_connect_data(NVME_CNTLID_DYNAMIC, T_SUBNQN, T_HOSTNQN);
	s2 = s;
	t_keyed(&s2, &d, 1000);
	ck_assert_uint_eq(t_status(q, &s2, NULL), DNR(NVME_SC_SGL_DATA_LEN));
	/* anything before the Connect: Command Sequence Error */
	s2 = t_sqe(NVME_ADM_IDENTIFY, 7);
	ck_assert_uint_eq(t_status(q, &s2, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	s2 = t_prop(NVMF_FCT_PROP_GET, NVME_REG_CAP, NVMF_PROP_SIZE_8, 0);
	ck_assert_uint_eq(t_status(q, &s2, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	/* in-capsule Connect data on the admin queue */
	s2 = s;
	t_incapsule(&s2, 0, sizeof(d));
	{
		struct nvme_cqe c;

		ck_assert_int_eq(t_exec(q, 0, &s2, &d, sizeof(d), &c), NVMF_ACT_COMPLETE);
		ck_assert_uint_eq(nvme_cqe_sf(&c), NVME_SC_SUCCESS);
		id1 = (uint16_t)c.result;
		ck_assert_uint_eq(c.sq_id, 0);
		ck_assert_uint_eq(c.sq_head, 4); /* its fourth command */
	}
	/* a second Connect on the queue */
	t_keyed(&s, &d, sizeof(d));
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	t_queue_free(q);

	/* a host that reconnects gets a new controller */
	q = t_admin(t, T_SUBNQN, 0, &id2);
	ck_assert_uint_ne(id1, id2);
	t_queue_free(q);
	/* and the discovery controller */
	q = t_admin(t, NVME_DISC_NQN, 0, &id2);
	t_queue_free(q);
}
END_TEST

static uint16_t io_connect(uint16_t qid, uint16_t hsq, uint16_t sqsize,
			   struct nvmf_connect_data d, uint32_t *res)
{
	struct t_queue *q = t_queue_new(t, qid, hsq);
	struct nvme_sqe s = t_connect_sqe(qid, sqsize, 0);
	struct nvme_cqe c;
	uint16_t st;

	t_keyed(&s, &d, sizeof(d));
	st = t_status(q, &s, &c);
	if (res)
		*res = (uint32_t)c.result;
	t_queue_free(q);
	return st;
}

static struct nvme_sqe feat(uint8_t opc, uint8_t fid, uint32_t cdw11)
{
	struct nvme_sqe s = t_sqe(opc, 0x30);

	s.cdw10 = fid;
	s.cdw11 = cdw11;
	return s;
}

START_TEST(test_connect_io)
{
	struct nvmf_connect_data d = t_connect_data(1, T_SUBNQN, T_HOSTNQN);
	struct t_queue *a, *io1, *io2, *dq;
	struct nvme_sqe s;
	uint16_t id, did;
	uint32_t res;

	/* an I/O queue before any admin queue: no such controller */
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 16);

	a = t_admin(t, T_SUBNQN, 5000, &id);
	d = t_connect_data(id, T_SUBNQN, T_HOSTNQN);
	/* not enabled yet */
	ck_assert_uint_eq(io_connect(1, 127, 127, d, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4,
		   NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20);
	ck_assert_uint_eq(t_status(a, &s, NULL), NVME_SC_SUCCESS);

	/* the host asks for 2 I/O queues and is granted 2 */
	s = feat(NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 1 | 1u << 16);
	ck_assert_uint_eq(t_status(a, &s, NULL), NVME_SC_SUCCESS);

	d.cntlid = (uint16_t)(id + 1);
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 16);
	d = t_connect_data(id, T_SUBNQN, "nqn.2014-08.org.nvmexpress:uuid:host-b");
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 16);
	d = t_connect_data(id, T_SUBNQN, T_HOSTNQN);
	d.hostid[3] ^= 1;
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 0x10000 | 0);
	d = t_connect_data(id, T_SUBNQN, T_HOSTNQN);
	ck_assert_uint_eq(io_connect(3, 127, 127, d, &res), DNR(NVME_SC_INVALID_QID));
	ck_assert_uint_eq(res, 42);
	ck_assert_uint_eq(io_connect(T_NR_IOQ + 1, 127, 127, d, &res), DNR(NVME_SC_INVALID_QID));
	/* sqsize beyond MQES (127) */
	ck_assert_uint_eq(io_connect(1, 128, 128, d, &res), DNR(NVME_SC_CONNECT_INVALID));
	ck_assert_uint_eq(res, 44);

	io1 = t_io(t, 1, id);
	ck_assert_uint_eq(nvmf_queue_cntlid(io1->q), id);
	/* qid 1 exists already */
	ck_assert_uint_eq(io_connect(1, 127, 127, d, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	io2 = t_io(t, 2, id);
	/* Number of Queues only before I/O queues exist */
	s = feat(NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 3 | 3u << 16);
	ck_assert_uint_eq(t_status(a, &s, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));

	/* a discovery controller has no I/O queues */
	dq = t_admin(t, NVME_DISC_NQN, 0, &did);
	d = t_connect_data(did, NVME_DISC_NQN, T_HOSTNQN);
	s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN);
	ck_assert_uint_eq(t_status(dq, &s, NULL), NVME_SC_SUCCESS);
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_INVALID_QID));
	t_queue_free(dq);

	/* the admin queue goes: the controller dies, its I/O queues close */
	ck_assert(!nvmf_queue_dead(io1->q));
	t_queue_free(a);
	ck_assert(nvmf_queue_dead(io1->q));
	s = t_sqe(NVME_IO_FLUSH, 1);
	s.nsid = 1;
	ck_assert_int_eq(t_exec(io1, 0, &s, NULL, 0, NULL), NVMF_ACT_CLOSE);
	t_queue_free(io1);
	t_queue_free(io2);
	/* and its cntlid takes no new queue */
	d = t_connect_data(id, T_SUBNQN, T_HOSTNQN);
	ck_assert_uint_eq(io_connect(1, 127, 127, d, &res), DNR(NVME_SC_CONNECT_INVALID));
}
END_TEST

/* ---- properties ------------------------------------------------------------- */

static uint64_t prop_get(struct t_queue *q, uint32_t off, uint8_t size, uint16_t want)
{
	struct nvme_sqe s = t_prop(NVMF_FCT_PROP_GET, off, size, 0);
	struct nvme_cqe c;

	ck_assert_uint_eq(t_status(q, &s, &c), want);
	return c.result;
}

static uint16_t prop_set(struct t_queue *q, uint32_t off, uint8_t size, uint64_t v)
{
	struct nvme_sqe s = t_prop(NVMF_FCT_PROP_SET, off, size, v);

	return t_status(q, &s, NULL);
}

START_TEST(test_properties)
{
	uint32_t cc = NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20;
	struct t_queue *q = t_admin(t, T_SUBNQN, 0, NULL), *io;
	uint64_t cap = prop_get(q, NVME_REG_CAP, NVMF_PROP_SIZE_8, 0);
	struct nvme_sqe s;

	ck_assert_uint_eq(cap & 0xffff, T_DEPTH - 1); /* MQES */
	ck_assert(cap & (1ull << 16));		      /* CQR */
	ck_assert_uint_eq((cap >> 24) & 0xff, 15);    /* TO */
	ck_assert(cap & (1ull << 37));		      /* CSS: NVM */
	ck_assert_uint_eq((cap >> 48) & 0xff, 0);     /* MPSMIN, MPSMAX: 4 KiB */
	ck_assert_uint_eq(prop_get(q, NVME_REG_VS, NVMF_PROP_SIZE_4, 0), 0x10300);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CC, NVMF_PROP_SIZE_4, 0), 0);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0), 0);

	/* wrong sizes, offsets, read-only properties, reserved bits */
	prop_get(q, NVME_REG_CAP, NVMF_PROP_SIZE_4, DNR(NVME_SC_INVALID_FIELD));
	prop_get(q, NVME_REG_VS, NVMF_PROP_SIZE_8, DNR(NVME_SC_INVALID_FIELD));
	prop_get(q, 0x0c, NVMF_PROP_SIZE_4, DNR(NVME_SC_INVALID_FIELD));
	prop_get(q, NVME_REG_NSSR, NVMF_PROP_SIZE_4, DNR(NVME_SC_INVALID_FIELD));
	prop_get(q, NVME_REG_CSTS, 2, DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_CAP, NVMF_PROP_SIZE_8, 0), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 1), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_NSSR, NVMF_PROP_SIZE_4, 0x4E564D65),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_8, cc), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc | 1u << 24),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc | 1ull << 32),
			  DNR(NVME_SC_INVALID_FIELD));
	/* admin commands wait for the enable */
	s = t_sqe(NVME_ADM_KEEP_ALIVE, 3);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));

	/* enable: CSTS.RDY */
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc), 0);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CC, NVMF_PROP_SIZE_4, 0), cc);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0), NVME_CSTS_RDY);
	ck_assert_uint_eq(t_status(q, &s, NULL), NVME_SC_SUCCESS);
	/* properties live on the admin queue only */
	io = t_io(t, 1, nvmf_queue_cntlid(q->q));
	s = t_prop(NVMF_FCT_PROP_GET, NVME_REG_CAP, NVMF_PROP_SIZE_8, 0);
	ck_assert_uint_eq(t_status(io, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));
	/* Disconnect and authentication are not supported */
	((struct nvmf_prop_cmd *)&s)->fctype = NVMF_FCT_DISCONNECT;
	ck_assert_uint_eq(t_status(io, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));
	((struct nvmf_prop_cmd *)&s)->fctype = NVMF_FCT_AUTH_SEND;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));
	((struct nvmf_prop_cmd *)&s)->fctype = 0x7;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));

	/* normal shutdown: SHST complete, RDY stays until EN clears */
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc | NVME_CC_SHN_NORMAL << 14),
			  0);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0),
			  NVME_CSTS_RDY | NVME_CSTS_SHST_CMPLT);
	/* disable: a reset, CSTS all clear; I/O commands then fail */
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, 0), 0);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0), 0);
	s = t_sqe(NVME_IO_FLUSH, 4);
	s.nsid = 1;
	ck_assert_uint_eq(t_status(io, &s, NULL), DNR(NVME_SC_CMD_SEQ_ERROR));
	/* enabling with I/O queue entry sizes other than 64/16 bytes: fatal status */
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN | 7u << 16), 0);
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0), NVME_CSTS_CFS);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, 0), 0);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc | 1u << 7), 0); /* MPS 8K */
	ck_assert_uint_eq(prop_get(q, NVME_REG_CSTS, NVMF_PROP_SIZE_4, 0), NVME_CSTS_CFS);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, 0), 0);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, cc), 0);
	ck_assert_uint_eq(t_status(io, &s, NULL), NVME_SC_SUCCESS);
	t_queue_free(io);
	t_queue_free(q);
}
END_TEST

/* ---- Identify ------------------------------------------------------------------ */

static uint16_t identify(struct t_queue *q, uint8_t cns, uint32_t nsid, void *out, uint32_t len)
{
	struct nvme_sqe s = t_sqe(NVME_ADM_IDENTIFY, 0x40);

	s.cdw10 = cns;
	s.nsid = nsid;
	t_keyed(&s, out, len);
	memset(out, 0xee, len);
	return t_status(q, &s, NULL);
}

START_TEST(test_identify)
{
	static struct nvme_id_ctrl id;
	static struct nvme_id_ns ns, ns2;
	static uint32_t list[1024];
	static uint8_t desc[4096];
	uint16_t cntlid;
	struct t_queue *q = t_admin_ready(t, &cntlid);

	ck_assert_uint_eq(identify(q, NVME_CNS_CTRL, 0, &id, 4096), 0);
	ck_assert_int_eq(memcmp(id.sn, "PC0001              ", 20), 0);
	ck_assert_int_eq(memcmp(id.mn, "pollcore-nvmf test                      ", 40), 0);
	ck_assert_int_eq(memcmp(id.fr, "0.1.0   ", 8), 0);
	ck_assert_uint_eq(id.mdts, 5); /* 2^5 x 4 KiB = 128 KiB */
	ck_assert_uint_eq(id.cntlid, cntlid);
	ck_assert_uint_eq(id.ver, 0x10300);
	ck_assert_uint_eq(id.cntrltype, NVME_CTRL_IO);
	ck_assert_uint_eq(id.cmic, 0x0a); /* several controllers, ANA reporting */
	ck_assert_uint_eq(id.oaes, 1u << 8);
	ck_assert_uint_eq(id.aerl, 3);
	ck_assert_uint_eq(id.elpe, NVMF_ERR_LOG_LEN - 1);
	ck_assert_uint_eq(id.lpa, 0x06); /* effects log, extended data; no per-NS SMART */
	ck_assert_uint_eq(id.frmw, 0x03); /* one slot, read-only */
	ck_assert_uint_eq(id.anatt, 10);
	ck_assert_uint_eq(id.anacap, 0x01); /* Optimized reported */
	ck_assert_uint_eq(id.anagrpmax, 1);
	ck_assert_uint_eq(id.nanagrpid, 1);
	ck_assert_uint_eq(id.mnan, 2);
	ck_assert_uint_eq(id.nwpc, 1);
	ck_assert_uint_eq(id.npss, 0);
	ck_assert_uint_eq(id.kas, 10);
	ck_assert_uint_eq(id.sqes, 0x66);
	ck_assert_uint_eq(id.cqes, 0x44);
	ck_assert_uint_eq(id.maxcmd, T_DEPTH);
	ck_assert_uint_eq(id.nn, 2);
	ck_assert_uint_eq(id.oncs, 0x0c); /* DSM, Write Zeroes */
	ck_assert_uint_eq(id.vwc, 0x07);
	ck_assert_uint_eq(id.sgls, 1u | 1u << 2 | 1u << 20);
	ck_assert_str_eq(id.subnqn, T_SUBNQN);
	ck_assert_uint_eq(id.ioccsz, (64 + T_ICD) / 16);
	ck_assert_uint_eq(id.iorcsz, 1);
	ck_assert_uint_eq(id.icdoff, 0);
	ck_assert_uint_eq(id.msdbd, 1);
	ck_assert_uint_eq(id.oacs, 0);
	ck_assert_uint_eq(id.vs[0], 0); /* the rest zero */

	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 1, &ns, 4096), 0);
	ck_assert_uint_eq(ns.nsze, T_NS1_BLOCKS);
	ck_assert_uint_eq(ns.ncap, T_NS1_BLOCKS);
	ck_assert_uint_eq(ns.nuse, T_NS1_BLOCKS);
	ck_assert_uint_eq(ns.nlbaf, 0);
	ck_assert_uint_eq(ns.flbas, 0);
	ck_assert_uint_eq(ns.lbaf[0].lbads, 9);
	ck_assert_uint_eq(ns.lbaf[0].ms, 0);
	ck_assert_uint_eq(ns.dlfeat, 0x09);
	ck_assert_uint_eq(nvme_u128_low(ns.nvmcap), T_NS1_BLOCKS * 512);
	ck_assert_uint_eq(ns.anagrpid, 1);
	ck_assert_uint_eq(ns.nsattr, 0);
	ck_assert_uint_eq(((uint8_t *)&ns)[92], 1); /* ANAGRPID's byte */
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 2, &ns2, 4096), 0);
	ck_assert_uint_eq(ns2.nsze, T_NS2_BLOCKS);
	ck_assert_uint_eq(ns2.lbaf[0].lbads, 12);
	ck_assert_int_ne(memcmp(ns.nguid, ns2.nguid, 16), 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 0, &ns2, 4096), DNR(NVME_SC_INVALID_NS));
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 3, &ns2, 4096), DNR(NVME_SC_INVALID_NS));
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, NVME_NSID_ALL, &ns2, 4096),
			  DNR(NVME_SC_INVALID_NS));

	ck_assert_uint_eq(identify(q, NVME_CNS_NS_ACTIVE_LIST, 0, list, 4096), 0);
	ck_assert_uint_eq(list[0], 1);
	ck_assert_uint_eq(list[1], 2);
	ck_assert_uint_eq(list[2], 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS_ACTIVE_LIST, 1, list, 4096), 0);
	ck_assert_uint_eq(list[0], 2);
	ck_assert_uint_eq(list[1], 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS_ACTIVE_LIST, 0xfffffffe, list, 4096),
			  DNR(NVME_SC_INVALID_NS));

	ck_assert_uint_eq(identify(q, NVME_CNS_NS_DESC_LIST, 1, desc, 4096), 0);
	ck_assert_uint_eq(desc[0], NVME_NIDT_NGUID);
	ck_assert_uint_eq(desc[1], 16);
	ck_assert_int_eq(memcmp(desc + 4, ns.nguid, 16), 0);
	ck_assert_uint_eq(desc[20], NVME_NIDT_CSI);
	ck_assert_uint_eq(desc[21], 1);
	ck_assert_uint_eq(desc[24], 0);
	ck_assert_uint_eq(desc[25], 0); /* the list ends */
	ck_assert_uint_eq(identify(q, NVME_CNS_NS_DESC_LIST, 9, desc, 4096), DNR(NVME_SC_INVALID_NS));

	/* the NVM command set's Identify Controller: all zero; no other set's */
	ck_assert_uint_eq(identify(q, NVME_CNS_CS_CTRL, 0, desc, 4096), 0);
	for (int i = 0; i < 4096; i++)
		ck_assert_uint_eq(desc[i], 0);
	{
		struct nvme_sqe zns = t_sqe(NVME_ADM_IDENTIFY, 0x41);

		zns.cdw10 = NVME_CNS_CS_CTRL;
		zns.cdw11 = 2u << 24; /* CSI: Zoned Namespace */
		t_keyed(&zns, desc, 4096);
		ck_assert_uint_eq(t_status(q, &zns, NULL), DNR(NVME_SC_INVALID_FIELD));
	}
	ck_assert_uint_eq(identify(q, 0x05, 1, desc, 4096), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(identify(q, 0x10, 0, desc, 4096), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(identify(q, NVME_CNS_CTRL, 0, &id, 4095), DNR(NVME_SC_SGL_DATA_LEN));
	t_queue_free(q);

	/* the discovery controller: Identify Controller only */
	q = t_admin(t, NVME_DISC_NQN, 0, &cntlid);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN), 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_CTRL, 0, &id, 4096), 0);
	ck_assert_uint_eq(id.cntrltype, NVME_CTRL_DISC);
	ck_assert_str_eq(id.subnqn, NVME_DISC_NQN);
	ck_assert_uint_eq(id.cntlid, cntlid);
	ck_assert_uint_eq(id.nn, 0);
	ck_assert_uint_eq(id.oaes, 1u << 31);
	ck_assert_uint_eq(id.lpa, 0x04); /* the discovery log only */
	ck_assert_uint_eq(id.frmw, 0);
	ck_assert_uint_eq(id.cmic, 0);
	ck_assert_uint_eq(id.mnan, 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 1, &ns, 4096), DNR(NVME_SC_INVALID_FIELD));
	t_queue_free(q);
}
END_TEST

/* ---- log pages ------------------------------------------------------------------ */

/* Get Log Page with LSP and CSI too */
static uint16_t get_log_x(struct t_queue *q, uint8_t lid, uint8_t lsp, uint8_t csi, uint32_t nsid,
			  uint64_t lpo, void *out, uint32_t len, bool rae)
{
	struct nvme_sqe s = t_sqe(NVME_ADM_GET_LOG_PAGE, 0x50);
	uint32_t numd = len / 4 - 1;

	s.nsid = nsid;
	s.cdw10 = lid | (uint32_t)lsp << 8 | (rae ? NVME_LOG_RAE : 0) | (numd & 0xffff) << 16;
	s.cdw11 = numd >> 16;
	s.cdw12 = (uint32_t)lpo;
	s.cdw13 = (uint32_t)(lpo >> 32);
	s.cdw14 = (uint32_t)csi << 24;
	t_keyed(&s, out, len);
	memset(out, 0xee, len);
	return t_status(q, &s, NULL);
}

static uint16_t get_log(struct t_queue *q, uint8_t lid, uint32_t nsid, uint64_t lpo, void *out,
			uint32_t len, bool rae)
{
	return get_log_x(q, lid, 0, 0, nsid, lpo, out, len, rae);
}

START_TEST(test_log_pages)
{
	static uint8_t buf[8192];
	struct nvme_err_entry *e = (void *)buf;
	struct nvme_smart_log *sm = (void *)buf;
	struct nvme_changed_ns_log *cl = (void *)buf;
	struct nvmf_disc_hdr *h = (void *)buf;
	struct nvmf_disc_entry *de = (void *)(buf + 1024);
	struct t_queue *q = t_admin_ready(t, NULL);
	struct nvme_sqe s;
	uint64_t gen;

	/* two failed commands, then the error log, newest first */
	s = t_sqe(0x80, 0x61);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));
	s = t_sqe(NVME_ADM_IDENTIFY, 0x62);
	s.cdw10 = 0x42;
	t_keyed(&s, buf, 4096);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(get_log(q, NVME_LOG_ERROR, NVME_NSID_ALL, 0, buf, 1024, false), 0);
	ck_assert_uint_eq(e[0].error_count, 2);
	ck_assert_uint_eq(e[0].cid, 0x62);
	ck_assert_uint_eq(e[0].status, DNR(NVME_SC_INVALID_FIELD) << 1);
	ck_assert_uint_eq(e[0].sqid, 0);
	ck_assert_uint_eq(e[1].error_count, 1);
	ck_assert_uint_eq(e[1].cid, 0x61);
	ck_assert_uint_eq(e[1].status, DNR(NVME_SC_INVALID_OPCODE) << 1);
	ck_assert_uint_eq(e[2].error_count, 0);

	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 0, 0, buf, 512, false), 0);
	ck_assert_uint_eq(sm->avail_spare, 100);
	ck_assert_uint_eq(nvme_u128_low(sm->num_err_log_entries), 2);
	ck_assert_uint_eq(nvme_u128_low(sm->host_reads), 0);
	/* more than the log: zeroes after it */
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(buf[4095], 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 1, 0, buf, 512, false),
			  DNR(NVME_SC_INVALID_FIELD));

	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(cl->nsid[0], 0);
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 2), 0);
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 2), 0);
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 3), -EINVAL);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(cl->nsid[0], 2);
	ck_assert_uint_eq(cl->nsid[1], 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(cl->nsid[0], 0); /* reading cleared it */

	/* offsets: dword aligned, within the log; the length within MDTS */
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 0, 2, buf, 512, false),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 0, 516, buf, 512, false),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, 0, 1ull << 32, buf, 512, false),
			  DNR(NVME_SC_INVALID_FIELD));
	{
		struct nvme_sqe big = t_sqe(NVME_ADM_GET_LOG_PAGE, 1);

		big.cdw10 = NVME_LOG_SMART | 0xffffu << 16;
		big.cdw11 = 0x1;
		ck_assert_uint_eq(t_status(q, &big, NULL), DNR(NVME_SC_INVALID_FIELD));
	}
	ck_assert_uint_eq(get_log(q, NVME_LOG_DISCOVERY, 0, 0, buf, 4096, false),
			  DNR(NVME_SC_INVALID_FIELD));
	/* Device Self-test, telemetry, ...: not here */
	for (unsigned lid = 0; lid < 256; lid++) {
		if (lid == NVME_LOG_ERROR || lid == NVME_LOG_SMART || lid == NVME_LOG_FW_SLOT ||
		    lid == NVME_LOG_CHANGED_NS || lid == NVME_LOG_CMD_EFFECTS || lid == NVME_LOG_ANA)
			continue;
		ck_assert_uint_eq(get_log(q, (uint8_t)lid, NVME_NSID_ALL, 0, buf, 512, false),
				  DNR(NVME_SC_INVALID_FIELD));
	}
	/* the controller's logs ignore the NSID; SMART's names a namespace's (refused) */
	ck_assert_uint_eq(get_log(q, NVME_LOG_ERROR, 1, 0, buf, 64, false), 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 7, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_SMART, NVME_NSID_ALL, 0, buf, 512, false), 0);
	/* the SGL must match the length */
	s = t_sqe(NVME_ADM_GET_LOG_PAGE, 2);
	s.cdw10 = NVME_LOG_SMART | 127u << 16;
	t_keyed(&s, buf, 511);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_SGL_DATA_LEN));
	t_queue_free(q);

	/* the discovery log */
	q = t_admin(t, NVME_DISC_NQN, 0, NULL);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN), 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_DISCOVERY, 0, 0, buf, 4096, false), 0);
	gen = h->genctr;
	ck_assert_uint_eq(h->numrec, 2);
	ck_assert_uint_eq(h->recfmt, 0);
	ck_assert_uint_eq(de[0].subtype, NVMF_SUBTYPE_CURR_DISC);
	ck_assert_str_eq(de[0].subnqn, NVME_DISC_NQN);
	ck_assert_uint_eq(de[1].trtype, NVMF_TRTYPE_RDMA);
	ck_assert_uint_eq(de[1].adrfam, NVMF_ADRFAM_IPV6);
	ck_assert_uint_eq(de[1].subtype, NVMF_SUBTYPE_NVME);
	ck_assert_uint_eq(de[1].treq, NVMF_TREQ_NOT_SPECIFIED);
	ck_assert_uint_eq(de[1].portid, 1);
	ck_assert_uint_eq(de[1].cntlid, 0xffff);
	ck_assert_uint_eq(de[1].asqsz, 32);
	ck_assert_str_eq(de[1].trsvcid, "4420");
	ck_assert_str_eq(de[1].subnqn, T_SUBNQN);
	ck_assert_str_eq(de[1].traddr, "fe80::ff:fe00:1%d0");
	ck_assert_uint_eq(de[1].tsas.qptype, NVMF_RDMA_QPTYPE_CONNECTED);
	ck_assert_uint_eq(de[1].tsas.prtype, NVMF_RDMA_PRTYPE_NOT_SPECIFIED);
	ck_assert_uint_eq(de[1].tsas.cms, NVMF_RDMA_CMS_RDMA_CM);
	ck_assert_uint_eq(buf[3072], 0); /* past the two entries */
	/* the header alone, then the second entry at its offset (as nvme-cli reads) */
	ck_assert_uint_eq(get_log(q, NVME_LOG_DISCOVERY, 0, 0, buf, 16, false), 0);
	ck_assert_uint_eq(h->numrec, 2);
	ck_assert_uint_eq(get_log(q, NVME_LOG_DISCOVERY, 0, 2048, buf, 1024, false), 0);
	ck_assert_str_eq(((struct nvmf_disc_entry *)buf)->subnqn, T_SUBNQN);
	nvmf_tgt_disc_changed(t);
	ck_assert_uint_eq(get_log(q, NVME_LOG_DISCOVERY, 0, 0, buf, 1024, false), 0);
	ck_assert_uint_eq(h->genctr, gen + 1);
	ck_assert_uint_eq(get_log(q, NVME_LOG_ERROR, 0, 0, buf, 1024, false),
			  DNR(NVME_SC_INVALID_FIELD));
	t_queue_free(q);
}
END_TEST

/* Firmware Slot, Commands Supported and Effects, ANA: their bytes */
START_TEST(test_log_pages_fw_effects_ana)
{
	static uint8_t buf[8192];
	static const uint8_t fr[8] = {'0', '.', '1', '.', '0', ' ', ' ', ' '};
	struct nvme_effects_log *el = (void *)buf;
	uint16_t id;
	struct t_queue *q = t_admin_ready(t, &id), *io = t_io(t, 1, id);
	struct nvme_sqe s;

	/* Firmware Slot: AFI slot 1 active, none next; FRS1 = Identify's FR */
	ck_assert_uint_eq(get_log(q, NVME_LOG_FW_SLOT, NVME_NSID_ALL, 0, buf, 512, false), 0);
	ck_assert_uint_eq(buf[0], 0x01);
	for (int i = 1; i < 8; i++)
		ck_assert_uint_eq(buf[i], 0);
	ck_assert_int_eq(memcmp(buf + 8, fr, 8), 0);
	for (int i = 16; i < 512; i++)
		ck_assert_uint_eq(buf[i], 0);
	/* at an offset, and longer than the log (zeroes after it) */
	ck_assert_uint_eq(get_log(q, NVME_LOG_FW_SLOT, 0, 8, buf, 1024, false), 0);
	ck_assert_int_eq(memcmp(buf, fr, 8), 0);
	ck_assert_uint_eq(buf[8], 0);
	ck_assert_uint_eq(buf[1023], 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_FW_SLOT, 0, 516, buf, 64, false),
			  DNR(NVME_SC_INVALID_FIELD));

	/*
	 * Commands Supported and Effects: CSUPP exactly for the opcodes that
	 * are not Invalid Opcode (AER and Fabrics aside), LBCC for the I/O
	 * commands that change blocks. Only the NVM command set's.
	 */
	ck_assert_uint_eq(get_log(q, NVME_LOG_CMD_EFFECTS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(el->acs[NVME_ADM_GET_LOG_PAGE], 1);
	ck_assert_uint_eq(el->acs[NVME_ADM_ASYNC_EVENT], 1);
	ck_assert_uint_eq(el->acs[NVME_OPC_FABRICS], 0);
	for (unsigned op = 0; op < 256; op++) {
		uint32_t e = el->acs[op];

		ck_assert_uint_eq(e & ~1u, 0); /* no effects on anything */
		if (op == NVME_ADM_ASYNC_EVENT || op == NVME_OPC_FABRICS)
			continue;
		s = t_sqe((uint8_t)op, (uint16_t)op);
		ck_assert_uint_eq(t_status(q, &s, NULL) == DNR(NVME_SC_INVALID_OPCODE), !e);
	}
	ck_assert_uint_eq(el->iocs[NVME_IO_READ], 1);
	ck_assert_uint_eq(el->iocs[NVME_IO_FLUSH], 1);
	ck_assert_uint_eq(el->iocs[NVME_IO_WRITE], 3);
	ck_assert_uint_eq(el->iocs[NVME_IO_WRITE_ZEROES], 3);
	ck_assert_uint_eq(el->iocs[NVME_IO_DSM], 3);
	for (unsigned op = 0; op < 256; op++) {
		if (op == NVME_OPC_FABRICS)
			continue;
		s = t_sqe((uint8_t)op, (uint16_t)op);
		s.nsid = 1;
		ck_assert_uint_eq(t_status(io, &s, NULL) == DNR(NVME_SC_INVALID_OPCODE),
				  !el->iocs[op]);
	}
	for (int i = 2048; i < 4096; i++)
		ck_assert_uint_eq(buf[i], 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CMD_EFFECTS, 0, 1024, buf, 8, false), 0);
	ck_assert_uint_eq(buf[4], 3); /* iocs[1], Write, at its offset */
	ck_assert_uint_eq(get_log_x(q, NVME_LOG_CMD_EFFECTS, 0, 2, NVME_NSID_ALL, 0, buf, 4096,
				    false),
			  DNR(NVME_SC_INVALID_LOG_PAGE)); /* Zoned Namespace: none */

	/* ANA: one group (1), Optimized, namespaces 1 and 2; RGO: no NSIDs */
	ck_assert_uint_eq(get_log(q, NVME_LOG_ANA, NVME_NSID_ALL, 0, buf, 4096, false), 0);
	{
		static const uint8_t want[] = {
			0, 0, 0, 0, 0, 0, 0, 0, /* CHGCNT */
			1, 0, 0, 0, 0, 0, 0, 0, /* NGRPS, reserved */
			1, 0, 0, 0, 2, 0, 0, 0, /* ANAGRPID 1, NNSIDS 2 */
			0, 0, 0, 0, 0, 0, 0, 0, /* CHGCNT */
			1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* Optimized */
			1, 0, 0, 0, 2, 0, 0, 0, /* NSIDs */
		};

		ck_assert_int_eq(memcmp(buf, want, sizeof(want)), 0);
		for (size_t i = sizeof(want); i < 4096; i++)
			ck_assert_uint_eq(buf[i], 0);
		ck_assert_uint_eq(get_log_x(q, NVME_LOG_ANA, NVME_ANA_LSP_RGO, 0, NVME_NSID_ALL, 0,
					    buf, 64, false),
				  0);
		ck_assert_int_eq(memcmp(buf, want, 20), 0);
		ck_assert_uint_eq(buf[20], 0); /* NNSIDS 0 */
		ck_assert_uint_eq(buf[32], NVME_ANA_OPTIMIZED);
		ck_assert_uint_eq(buf[48], 0); /* no NSID */
		/* the log is 56 bytes: an offset beyond it is refused */
		ck_assert_uint_eq(get_log(q, NVME_LOG_ANA, 0, 56, buf, 4, false), 0);
		ck_assert_uint_eq(get_log(q, NVME_LOG_ANA, 0, 60, buf, 4, false),
				  DNR(NVME_SC_INVALID_FIELD));
	}
	t_queue_free(io);
	t_queue_free(q);
}
END_TEST

/* ---- features, Keep Alive, Abort, opcodes -------------------------------------- */

static uint16_t feature(struct t_queue *q, uint8_t opc, uint32_t cdw10, uint32_t cdw11,
			uint64_t *res)
{
	struct nvme_sqe s = feat(opc, 0, cdw11);
	struct nvme_cqe c;
	uint16_t st;

	s.cdw10 = cdw10;
	st = t_status(q, &s, &c);
	if (res)
		*res = c.result;
	return st;
}

START_TEST(test_features)
{
	struct t_queue *q = t_admin_ready(t, NULL);
	uint64_t r;
	struct nvme_sqe s;

	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &r), 0);
	ck_assert_uint_eq(r, (T_NR_IOQ - 1) | (T_NR_IOQ - 1) << 16);
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 63 | 63u << 16, &r),
			  0);
	ck_assert_uint_eq(r, (T_NR_IOQ - 1) | (T_NR_IOQ - 1) << 16); /* capped */
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 2 | 1u << 16, &r),
			  0);
	ck_assert_uint_eq(r, 1 | 1u << 16); /* the smaller of the two */
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &r), 0);
	ck_assert_uint_eq(r, 1 | 1u << 16);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES | 1u << 8, 0, &r), 0);
	ck_assert_uint_eq(r, (T_NR_IOQ - 1) | (T_NR_IOQ - 1) << 16); /* default */
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES | 3u << 8, 0, &r), 0);
	ck_assert_uint_eq(r, NVME_FEAT_CAP_CHANGEABLE);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES | 4u << 8, 0, &r),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 0xffff, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES | NVME_FEAT_SAVE, 1,
				  NULL),
			  DNR(NVME_SC_FEAT_NOT_SAVEABLE));

	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 8, NULL), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_ASYNC_EVENT, 0, &r), 0);
	ck_assert_uint_eq(r, 1u << 8);
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 31, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_KATO, 1500, NULL), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_KATO, 0, &r), 0);
	ck_assert_uint_eq(r, 2000); /* KAS granularity: 1 s */
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_KATO, UINT32_MAX, NULL), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_KATO, 0, &r), 0);
	ck_assert_uint_eq(r, 4294967000u); /* rounded up would not fit: down */
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, 0x06, 1, NULL), DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, 0x80, 0, NULL), DNR(NVME_SC_INVALID_FIELD));
	/* Volatile Write Cache: WCE is whether there is one (this config has one), fixed */
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_VOLATILE_WC, 0, &r), 0);
	ck_assert_uint_eq(r, 1);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_VOLATILE_WC | 3u << 8, 0, &r), 0);
	ck_assert_uint_eq(r, 0); /* not changeable */
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_KATO | 3u << 8, 0, &r), 0);
	ck_assert_uint_eq(r, NVME_FEAT_CAP_CHANGEABLE);
	s = feat(NVME_ADM_SET_FEATURES, NVME_FEAT_KATO, 1000);
	s.nsid = 1;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_FEAT_NOT_NS));
	s.nsid = 0;
	t_keyed(&s, &r, 8);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_SGL_DATA_LEN));

	s = t_sqe(NVME_ADM_KEEP_ALIVE, 1);
	ck_assert_uint_eq(t_status(q, &s, NULL), 0);
	s = t_sqe(NVME_ADM_ABORT, 2);
	ck_assert_uint_eq(t_status(q, &s, NULL), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_ABORT, 0, 0, &r), 0);
	ck_assert_uint_eq(r, 1); /* not aborted */

	/* everything else: Invalid Opcode (create/delete queues, format, I/O opcodes) */
	for (unsigned op = 0; op < 256; op++) {
		if (op == NVME_ADM_GET_LOG_PAGE || op == NVME_ADM_IDENTIFY || op == NVME_ADM_ABORT ||
		    op == NVME_ADM_SET_FEATURES || op == NVME_ADM_GET_FEATURES ||
		    op == NVME_ADM_ASYNC_EVENT || op == NVME_ADM_KEEP_ALIVE || op == NVME_OPC_FABRICS)
			continue;
		s = t_sqe((uint8_t)op, (uint16_t)op);
		ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_OPCODE));
	}
	/* fused commands and PRP data pointers are not for fabrics */
	s = t_sqe(NVME_ADM_KEEP_ALIVE, 5);
	s.flags |= 1;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_FIELD));
	s.flags = 0;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_FIELD));
	t_queue_free(q);

	/* the discovery controller: no Number of Queues, its own event */
	q = t_admin(t, NVME_DISC_NQN, 0, NULL);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 1, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 31, NULL), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 8, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	t_queue_free(q);
}
END_TEST

/* Host Identifier and Namespace Write Protection Config, as nvmet has them */
START_TEST(test_features_host_id_wp)
{
	static uint8_t hostid[32], buf[4096];
	static const uint8_t a5[16] = {0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
				       0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5};
	struct t_queue *q = t_admin_ready(t, NULL);
	struct nvme_changed_ns_log *cl = (void *)buf;
	struct nvme_id_ns *ns = (void *)buf;
	struct nvme_sqe s;
	struct nvme_cqe c;
	uint64_t r;

	/* Host Identifier: Connect's 128 bits, 16 bytes of data, EXHID set */
	s = feat(NVME_ADM_GET_FEATURES, NVME_FEAT_HOST_ID, NVME_FEAT_HOST_ID_EXHID);
	t_keyed(&s, hostid, 16);
	memset(hostid, 0xee, sizeof(hostid));
	ck_assert_int_eq(t_exec(q, 1, &s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.status, 0);
	ck_assert_int_eq(memcmp(hostid, a5, 16), 0);
	ck_assert_uint_eq(hostid[16], 0xee);
	s.cdw11 = 0; /* a 64-bit identifier: not this one */
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_FIELD));
	s = feat(NVME_ADM_GET_FEATURES, NVME_FEAT_HOST_ID, NVME_FEAT_HOST_ID_EXHID);
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_SGL_DATA_LEN)); /* no data */
	/* set by Connect over fabrics */
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_HOST_ID, 1, NULL),
			  DNR(NVME_SC_CMD_SEQ_ERROR));

	/* Namespace Write Protection Config: per namespace */
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 8, NULL), 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	s = feat(NVME_ADM_GET_FEATURES, NVME_FEAT_WRITE_PROTECT, 0);
	for (uint32_t nsid = 0; nsid < 4; nsid++) {
		s.nsid = nsid == 3 ? NVME_NSID_ALL : nsid;
		ck_assert_uint_eq(t_status(q, &s, &c), nsid == 1 || nsid == 2 ? 0 : DNR(NVME_SC_INVALID_NS));
		ck_assert_uint_eq(c.result, 0);
	}
	s.nsid = 2;
	s.cdw10 |= 3u << 8;
	ck_assert_uint_eq(t_status(q, &s, &c), 0);
	ck_assert_uint_eq(c.result, NVME_FEAT_CAP_CHANGEABLE | NVME_FEAT_CAP_NS);
	s = feat(NVME_ADM_SET_FEATURES, NVME_FEAT_WRITE_PROTECT, NVME_WP_ON);
	s.nsid = 2;
	/* an AER waits; the change is a namespace attribute change */
	{
		struct nvme_sqe aer = t_sqe(NVME_ADM_ASYNC_EVENT, 0x77);
		struct nvmf_req *ev;

		ck_assert_int_eq(t_exec(q, 9, &aer, NULL, 0, NULL), NVMF_ACT_HOLD);
		ck_assert_uint_eq(t_status(q, &s, NULL), 0);
		ev = nvmf_queue_poll_event(q->q);
		ck_assert_ptr_nonnull(ev);
		ck_assert_uint_eq(ev->cqe.cid, 0x77);
		ck_assert_uint_eq(ev->cqe.result, 0x040002);
	}
	s.cdw10 = NVME_FEAT_WRITE_PROTECT;
	s = feat(NVME_ADM_GET_FEATURES, NVME_FEAT_WRITE_PROTECT, 0);
	s.nsid = 2;
	ck_assert_uint_eq(t_status(q, &s, &c), 0);
	ck_assert_uint_eq(c.result, NVME_WP_ON);
	s.cdw10 |= 1u << 8; /* default */
	ck_assert_uint_eq(t_status(q, &s, &c), 0);
	ck_assert_uint_eq(c.result, NVME_WP_NONE);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 2, ns, 4096), 0);
	ck_assert_uint_eq(ns->nsattr, NVME_NS_NSATTR_WP);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 1, ns, 4096), 0);
	ck_assert_uint_eq(ns->nsattr, 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(cl->nsid[0], 2);
	ck_assert_uint_eq(cl->nsid[1], 0);
	/* the same state again: no change, nothing listed */
	s = feat(NVME_ADM_SET_FEATURES, NVME_FEAT_WRITE_PROTECT, NVME_WP_ON);
	s.nsid = 2;
	ck_assert_uint_eq(t_status(q, &s, NULL), 0);
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_uint_eq(cl->nsid[0], 0);
	/* until power cycle, permanent, reserved: not supported (NWPC 1); bits 31:3 ignored */
	for (uint32_t v = 2; v < 8; v++) {
		s.cdw11 = v;
		ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_FIELD));
	}
	s.cdw11 = NVME_WP_NONE | 0x100;
	ck_assert_uint_eq(t_status(q, &s, NULL), 0);
	ck_assert_uint_eq(identify(q, NVME_CNS_NS, 2, ns, 4096), 0);
	ck_assert_uint_eq(ns->nsattr, 0);
	s.nsid = 3;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_INVALID_NS));
	s.nsid = 1;
	s.cdw10 |= NVME_FEAT_SAVE;
	ck_assert_uint_eq(t_status(q, &s, NULL), DNR(NVME_SC_FEAT_NOT_SAVEABLE));
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_WRITE_PROTECT, 0, &r),
			  DNR(NVME_SC_INVALID_NS)); /* NSID 0 */
	t_queue_free(q);

	/* the discovery controller has none of them */
	q = t_admin(t, NVME_DISC_NQN, 0, NULL);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_VOLATILE_WC, 0, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_HOST_ID, 1, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_WRITE_PROTECT, 0, NULL),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(get_log(q, NVME_LOG_FW_SLOT, 0, 0, buf, 512, false),
			  DNR(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(get_log(q, NVME_LOG_CMD_EFFECTS, 0, 0, buf, 4096, false),
			  DNR(NVME_SC_INVALID_FIELD));
	t_queue_free(q);
}
END_TEST

/* ---- Asynchronous Event Requests -------------------------------------------------- */

START_TEST(test_aer)
{
	struct t_queue *q = t_admin_ready(t, NULL);
	struct nvme_sqe s = t_sqe(NVME_ADM_ASYNC_EVENT, 0x70);
	struct nvmf_req *r;
	struct nvme_cqe c;
	static uint8_t buf[4096];

	/* held up to the limit (AERL + 1 = 4), then Limit Exceeded */
	for (int i = 0; i < 4; i++) {
		s.cid = (uint16_t)(0x70 + i);
		ck_assert_int_eq(t_exec(q, 1 + i, &s, NULL, 0, NULL), NVMF_ACT_HOLD);
	}
	s.cid = 0x74;
	ck_assert_int_eq(t_exec(q, 5, &s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(nvme_cqe_sf(&c), DNR(NVME_SC_ASYNC_LIMIT));
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q));

	/* not enabled in the configuration: no event */
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 1), 0);
	ck_assert_int_eq(t_notified, 0);
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q));
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);

	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 8, NULL), 0);
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 1), 0);
	ck_assert_int_eq(t_notified, 1);
	r = nvmf_queue_poll_event(q->q);
	ck_assert_ptr_eq(r, &q->req[1]); /* the oldest held AER */
	ck_assert_uint_eq(r->cqe.cid, 0x70);
	ck_assert_uint_eq(r->cqe.status, 0);
	ck_assert_uint_eq(r->cqe.result, 0x040002); /* Notice, NS Attribute Changed, LID 04h */
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q));
	/* masked until the log is read */
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 2), 0);
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q));
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, true), 0); /* RAE */
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 2), 0);
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q));
	ck_assert_uint_eq(get_log(q, NVME_LOG_CHANGED_NS, 0, 0, buf, 4096, false), 0);
	ck_assert_int_eq(nvmf_tgt_ns_changed(t, 2), 0);
	r = nvmf_queue_poll_event(q->q);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->cqe.cid, 0x71);
	t_queue_free(q); /* two AERs still held: dropped with the queue */

	/* an event before any AER: the next AER completes at once */
	q = t_admin(t, NVME_DISC_NQN, 0, NULL);
	ck_assert_uint_eq(prop_set(q, NVME_REG_CC, NVMF_PROP_SIZE_4, NVME_CC_EN), 0);
	ck_assert_uint_eq(feature(q, NVME_ADM_SET_FEATURES, NVME_FEAT_ASYNC_EVENT, 1u << 31, NULL), 0);
	nvmf_tgt_disc_changed(t);
	ck_assert_ptr_null(nvmf_queue_poll_event(q->q)); /* no AER to carry it */
	ck_assert_int_eq(t_exec(q, 1, &s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.status, 0);
	ck_assert_uint_eq(c.result, 0x70f002);
	t_queue_free(q);
}
END_TEST

/* ---- keep-alive ---------------------------------------------------------------- */

START_TEST(test_keepalive)
{
	uint16_t id, id0, exp[4];
	struct t_queue *q = t_admin_ready(t, &id), *io, *q0;
	struct nvme_sqe ka = t_sqe(NVME_ADM_KEEP_ALIVE, 9);
	uint64_t r;

	q0 = t_admin(t, T_SUBNQN, 0, &id0); /* KATO 0: never expires */
	io = t_io(t, 1, id);
	ck_assert_uint_eq(feature(q, NVME_ADM_GET_FEATURES, NVME_FEAT_KATO, 0, &r), 0);
	ck_assert_uint_eq(r, 5000);
	/* deadlines are KATO (5 s) + KAS (1 s) after the check that saw activity */
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 1000, exp, 4), 0); /* arms: deadline 7000 */
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 7000, exp, 4), 0);
	ck_assert_uint_eq(t_status(q, &ka, NULL), 0);
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 7500, exp, 4), 0); /* seen: deadline 13500 */
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 13500, exp, 4), 0);
	ck_assert(!nvmf_queue_dead(io->q));
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 13501, exp, 0), 0); /* no room: later */
	ck_assert(!nvmf_queue_dead(io->q));
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 13502, exp, 4), 1);
	ck_assert_uint_eq(exp[0], id);
	ck_assert(nvmf_queue_dead(q->q));
	ck_assert(nvmf_queue_dead(io->q));
	ck_assert_int_eq(nvmf_tgt_keepalive(t, 20000, exp, 4), 0); /* reported once */
	ck_assert_int_eq(t_exec(q, 0, &ka, NULL, 0, NULL), NVMF_ACT_CLOSE);
	ck_assert_int_eq(t_exec(io, 0, &ka, NULL, 0, NULL), NVMF_ACT_CLOSE);
	ck_assert(!nvmf_queue_dead(q0->q));
	t_queue_free(io);
	t_queue_free(q);
	t_queue_free(q0);
}
END_TEST

/* ---- flow control ------------------------------------------------------------------ */

START_TEST(test_flow_control)
{
	uint16_t id;
	struct t_queue *a = t_admin_ready(t, &id), *io;
	struct nvmf_connect_data d = t_connect_data(id, T_SUBNQN, T_HOSTNQN);
	struct nvme_sqe s = t_connect_sqe(1, 3, 0);
	static uint8_t host[512];
	uint8_t cap[64];

	/* a queue of 4 entries: 4 commands in flight, a fifth is a violation */
	io = t_queue_new(t, 1, 3);
	t_keyed(&s, &d, sizeof(d));
	((struct nvmf_connect_cmd *)&s)->cattr = NVMF_CATTR_DISABLE_SQFLOW;
	ck_assert_uint_eq(t_status(io, &s, NULL), 0);
	s = t_sqe(NVME_IO_READ, 0);
	s.nsid = 1;
	t_keyed(&s, host, 512);
	memcpy(cap, &s, 64);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(nvmf_queue_submit(io->q, cap, 64, &io->req[i]), NVMF_ACT_READ);
	ck_assert_int_eq(nvmf_queue_submit(io->q, cap, 64, &io->req[4]), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_req_complete(io->q, &io->req[0], 0), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(io->req[0].cqe.sq_head, 0xffff); /* SQ flow control disabled */
	/* out of turn: a second completion, data for a READ, a fill on an I/O queue */
	ck_assert_int_eq(nvmf_req_complete(io->q, &io->req[0], 0), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_req_data(io->q, &io->req[1], host, 512), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_req_fill(io->q, &io->req[1], host, 512), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_queue_submit(io->q, cap, 64, &io->req[0]), NVMF_ACT_READ);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(nvmf_req_complete(io->q, &io->req[i], 0), NVMF_ACT_COMPLETE);
	t_queue_free(io);
	t_queue_free(a);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("nvmf_proto");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_config);
	tcase_add_test(tc, test_cm_private_data);
	tcase_add_test(tc, test_connect_admin);
	tcase_add_test(tc, test_connect_io);
	tcase_add_test(tc, test_properties);
	tcase_add_test(tc, test_identify);
	tcase_add_test(tc, test_log_pages);
	tcase_add_test(tc, test_log_pages_fw_effects_ana);
	tcase_add_test(tc, test_features);
	tcase_add_test(tc, test_features_host_id_wp);
	tcase_add_test(tc, test_aer);
	tcase_add_test(tc, test_keepalive);
	tcase_add_test(tc, test_flow_control);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, t_io_tcase());
	suite_add_tcase(s, t_threads_tcase());
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
