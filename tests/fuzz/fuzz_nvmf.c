// SPDX-License-Identifier: MIT
/*
 * fuzz suite: libFuzzer harness for pollcore-nvmf's protocol core
 * (tools/nvmf): capsules as a hostile NVMe-oF host would send them, on an
 * unconnected queue, an enabled admin queue and an I/O queue.
 *
 * An input is a sequence of records: [queue byte][u16 length][length bytes
 * of capsule]. The queue byte's low two bits pick the queue (0 fresh, 1
 * admin, 2 I/O, 3 the rdma_cm private data check). A FETCH takes its data
 * from the input's next bytes (zero-filled past the end), so Connect data
 * and DSM ranges are the fuzzer's too. The harness plays the transport and
 * checks what the core asks of it against the rules of the API, not the
 * core's code:
 *  - every capsule ends in COMPLETE, HOLD (only an AER on the admin queue)
 *    or CLOSE, within a bounded number of steps;
 *  - a CQE names the command's cid and the queue's qid, phase 0, and a
 *    status whose SCT is 0, 1 or 2;
 *  - transfers are within MDTS; in-capsule data lies within what arrived
 *    and within the advertised size, only towards the controller;
 *  - a backend operation lies within its namespace, on block boundaries;
 *    DISCARD ranges too; a FLUSH of all names no backend;
 *  - a successful Connect binds the queue, a failed one does not; a dead
 *    queue closes.
 * A property that fails aborts, which libFuzzer reports with the input.
 */
#include "nvmf_ctrl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PROP(cond, ...)                                                          \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_nvmf: property failed: %s: ", #cond); \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			abort();                                                 \
		}                                                                \
	} while (0)

#define ICD   4096
#define MDTS  (64u << 10)
#define DEPTH 32
#define SLOTS 40

struct disk {
	uint64_t size;
	uint32_t bs;
};

struct fq {
	struct nvmf_queue *q;
	uint16_t qid;
	struct nvmf_req req[SLOTS];
	bool held[SLOTS];
};

static struct disk disks[2] = {{64 * 512, 512}, {16 * 4096, 4096}};
static uint8_t buf[MDTS + 64] __attribute__((aligned(64)));
static uint8_t capsule[64 + ICD + 64] __attribute__((aligned(64)));
static const uint8_t *in;
static size_t in_left;

static struct nvmf_tgt *tgt_new(void)
{
	struct nvmf_ns_config ns[2] = {{.nblocks = 64, .block_size = 512, .backend = &disks[0]},
				       {.nblocks = 16, .block_size = 4096, .backend = &disks[1]}};
	struct nvmf_tgt_config cfg = {
		.subnqn = "nqn.2026-12.io.pollcore:fuzz", .serial = "F1", .model = "fuzz",
		.ns = ns, .nr_ns = 2, .adrfam = NVMF_ADRFAM_IPV4, .traddr = "10.0.0.1",
		.trsvcid = "4420", .portid = 1, .max_io_queues = 2, .max_queue_depth = DEPTH,
		.in_capsule = ICD, .mdts = MDTS, .max_ctrls = 4, .aer_limit = 2,
	};

	return nvmf_tgt_create(&cfg);
}

/* bytes for a FETCH: the input's next ones */
static const uint8_t *take(uint32_t len)
{
	size_t n = len < in_left ? len : in_left;

	memset(buf, 0, len);
	memcpy(buf, in, n);
	in += n;
	in_left -= n;
	return buf;
}

static void check_io(const struct nvmf_req *r)
{
	const struct disk *d = r->io.backend;

	PROP(d == &disks[0] || d == &disks[1], "backend %p", r->io.backend);
	PROP(r->io.off % d->bs == 0 && r->io.len % d->bs == 0, "unaligned %llu+%llu",
	     (unsigned long long)r->io.off, (unsigned long long)r->io.len);
	PROP(r->io.off < d->size && r->io.len <= d->size - r->io.off, "beyond %llu+%llu",
	     (unsigned long long)r->io.off, (unsigned long long)r->io.len);
}

/* Play the transport for one capsule; return the final action. */
static enum nvmf_act run(struct fq *f, int slot, size_t len)
{
	struct nvmf_req *r = &f->req[slot];
	const struct nvme_sqe *s = (const void *)capsule;
	bool bound = nvmf_queue_cntlid(f->q) != 0;
	enum nvmf_act a = nvmf_queue_submit(f->q, capsule, len, r);
	const void *src = NULL;

	for (int step = 0; step < 8; step++) {
		const struct nvmf_xfer *x = &r->xfer;

		if (a == NVMF_ACT_FETCH || a == NVMF_ACT_WRITE || a == NVMF_ACT_FILL ||
		    a == NVMF_ACT_READ) {
			PROP(x->len <= MDTS, "transfer %u", x->len);
			PROP(x->dir == (a == NVMF_ACT_FILL || a == NVMF_ACT_READ ? NVMF_XFER_TO_HOST
										 : NVMF_XFER_FROM_HOST),
			     "dir %u for action %d", x->dir, a);
		}
		/* (on COMPLETE or CLOSE req->xfer may be a former command's) */
		if ((a == NVMF_ACT_FETCH || a == NVMF_ACT_WRITE) && x->in_capsule) {
			PROP(x->dir == NVMF_XFER_FROM_HOST, "in-capsule data to the host");
			PROP(x->icd_off >= 64 && x->icd_off + (size_t)x->len <= len &&
				     x->icd_off + (size_t)x->len <= 64 + ICD,
			     "in-capsule %u+%u of %zu", x->icd_off, x->len, len);
		}
		if (a == NVMF_ACT_FETCH || a == NVMF_ACT_WRITE)
			src = x->in_capsule ? capsule + x->icd_off : take(x->len);
		switch (a) {
		case NVMF_ACT_FETCH:
			a = nvmf_req_data(f->q, r, src, x->len);
			continue;
		case NVMF_ACT_FILL:
			PROP(f->qid == 0, "FILL on an I/O queue");
			a = nvmf_req_fill(f->q, r, buf, x->len);
			PROP(a == NVMF_ACT_COMPLETE, "fill: %d", a);
			continue;
		case NVMF_ACT_READ:
		case NVMF_ACT_WRITE:
			check_io(r);
			PROP(x->len == r->io.len, "xfer %u io %llu", x->len,
			     (unsigned long long)r->io.len);
			a = nvmf_req_complete(f->q, r, (s->cdw15 & 7) == 7 ? -EIO : 0);
			continue;
		case NVMF_ACT_ZEROES:
			check_io(r);
			a = nvmf_req_complete(f->q, r, 0);
			continue;
		case NVMF_ACT_FLUSH:
			PROP(r->io.nsid == NVME_NSID_ALL ? !r->io.backend : r->io.backend != NULL,
			     "flush nsid %u", r->io.nsid);
			a = nvmf_req_complete(f->q, r, 0);
			continue;
		case NVMF_ACT_DISCARD:
			for (uint32_t i = 0; i < r->io.nr_ranges; i++) {
				const struct disk *d = r->io.backend;
				uint64_t off, l;

				PROP(nvmf_req_range(r, src, i, &off, &l) == 0, "range %u", i);
				PROP(off < d->size && l <= d->size - off, "range beyond");
			}
			a = nvmf_req_complete(f->q, r, 0);
			continue;
		case NVMF_ACT_COMPLETE:
			PROP(r->cqe.cid == s->cid, "cid %x for %x", r->cqe.cid, s->cid);
			PROP(r->cqe.sq_id == f->qid, "sq_id %u", r->cqe.sq_id);
			PROP((r->cqe.status & 1) == 0 && NVME_SCT(nvme_cqe_sf(&r->cqe)) <= 2,
			     "status %x", r->cqe.status);
			if (!bound && s->opcode == NVME_OPC_FABRICS && nvme_sqe_fctype(s) == 1)
				PROP((nvmf_queue_cntlid(f->q) != 0) == (r->cqe.status == 0),
				     "Connect status %x, cntlid %u", r->cqe.status,
				     nvmf_queue_cntlid(f->q));
			return a;
		case NVMF_ACT_HOLD:
			PROP(f->qid == 0 && s->opcode == NVME_ADM_ASYNC_EVENT, "HOLD of %x",
			     s->opcode);
			return a;
		case NVMF_ACT_CLOSE:
			return a;
		}
		PROP(0, "action %d", a);
	}
	PROP(0, "no end after 8 steps");
	return NVMF_ACT_CLOSE;
}

static void fq_free(struct fq *f)
{
	if (f->q)
		nvmf_queue_destroy(f->q);
	memset(f, 0, sizeof(*f));
}

static bool fq_connect(struct nvmf_tgt *t, struct fq *f, uint16_t qid, uint16_t cntlid)
{
	struct nvme_sqe s;
	struct nvmf_connect_data d;
	struct nvmf_connect_cmd *c = (void *)&s;

	fq_free(f);
	f->qid = qid;
	f->q = nvmf_queue_create(t, qid, DEPTH - 1);
	PROP(f->q, "queue");
	if (qid == 0 && cntlid == 0)
		return true; /* a fresh queue; admin queues pass cntlid 1 */
	memset(&s, 0, sizeof(s));
	memset(&d, 0, sizeof(d));
	c->opcode = NVME_OPC_FABRICS;
	c->flags = NVME_FLAGS_PSDT_SGL;
	c->fctype = NVMF_FCT_CONNECT;
	c->qid = qid;
	c->sqsize = DEPTH - 1;
	nvme_sgl_set_offset(&c->dptr, 0, sizeof(d));
	d.cntlid = qid ? cntlid : NVME_CNTLID_DYNAMIC;
	strcpy(d.subnqn, "nqn.2026-12.io.pollcore:fuzz");
	strcpy(d.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:fuzz");
	memcpy(capsule, &s, 64);
	memcpy(capsule + 64, &d, sizeof(d));
	if (run(f, 0, 64 + sizeof(d)) != NVMF_ACT_COMPLETE || f->req[0].cqe.status)
		return false;
	if (qid == 0) { /* enable */
		struct nvmf_prop_cmd *p = (void *)&s;

		memset(&s, 0, sizeof(s));
		p->opcode = NVME_OPC_FABRICS;
		p->flags = NVME_FLAGS_PSDT_SGL;
		p->fctype = NVMF_FCT_PROP_SET;
		p->offset = NVME_REG_CC;
		p->value = NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20;
		nvme_sgl_set_keyed(&s.dptr, 0, 0, 0, 0);
		memcpy(capsule, &s, 64);
		PROP(run(f, 0, 64) == NVMF_ACT_COMPLETE && !f->req[0].cqe.status, "enable");
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvmf_tgt *t = tgt_new();
	static struct fq f[3];
	uint16_t cntlid;
	int next = 0;

	PROP(t, "target");
	in = data;
	in_left = size;
	fq_connect(t, &f[0], 0, 0);
	PROP(fq_connect(t, &f[1], 0, 1), "admin");
	cntlid = nvmf_queue_cntlid(f[1].q);
	PROP(fq_connect(t, &f[2], 1, cntlid), "io");

	while (in_left >= 3) {
		int which = in[0] & 3, slot;
		size_t len = (size_t)(in[1] | in[2] << 8) % (sizeof(capsule) + 1);
		struct fq *q;
		enum nvmf_act a;

		in += 3;
		in_left -= 3;
		if (len > in_left)
			len = in_left;
		if (which == 3) { /* rdma_cm private data */
			struct nvmf_cm_params p;
			struct nvmf_rdma_cm_rep rep;
			struct nvmf_rdma_cm_rej rej;
			int rc = nvmf_cm_request(t, in, len, &p, &rep, &rej);

			PROP(rc == 0 || (rc == -EPROTO && rej.sts >= 1 && rej.sts <= 6), "cm %d", rc);
			PROP(rc || (len >= 32 && rep.crqsize == p.hsqsize + 1 && p.qid <= 2),
			     "cm accept");
			in += len;
			in_left -= len;
			continue;
		}
		memset(capsule, 0, sizeof(capsule));
		memcpy(capsule, in, len);
		in += len;
		in_left -= len;
		q = &f[which];
		if (!q->q)
			continue;
		/* a slot not held by an AER */
		slot = next++ % SLOTS;
		while (q->held[slot])
			slot = (slot + 1) % SLOTS;
		a = run(q, slot, len);
		if (a == NVMF_ACT_HOLD) {
			q->held[slot] = true;
		} else if (a == NVMF_ACT_CLOSE) {
			if (which == 0) {
				fq_connect(t, q, 0, 0);
			} else {
				fq_free(&f[2]);
				if (which == 1 || !fq_connect(t, &f[2], 1, cntlid)) {
					fq_free(&f[1]);
					fq_free(&f[2]);
					if (fq_connect(t, &f[1], 0, 1))
						cntlid = nvmf_queue_cntlid(f[1].q);
					if (!fq_connect(t, &f[2], 1, cntlid))
						fq_free(&f[2]);
				}
			}
		}
		/* events and keep-alive now and then */
		if (in_left && in[0] == 0xee) {
			uint16_t exp[4];
			struct nvmf_req *r;

			nvmf_tgt_ns_changed(t, 1);
			nvmf_tgt_disc_changed(t);
			while (f[1].q && (r = nvmf_queue_poll_event(f[1].q))) {
				PROP(r >= f[1].req && r < f[1].req + SLOTS && f[1].held[r - f[1].req],
				     "event on a req not held");
				f[1].held[r - f[1].req] = false;
			}
			nvmf_tgt_keepalive(t, 0, exp, 4);
			nvmf_tgt_keepalive(t, 1000000, exp, 4);
		}
		/* a queue whose controller died closes at its next capsule */
		for (int i = 1; i < 3; i++) {
			if (!f[i].q || !nvmf_queue_dead(f[i].q))
				continue;
			memset(capsule, 0, 64);
			capsule[0] = NVME_ADM_KEEP_ALIVE;
			capsule[1] = NVME_FLAGS_PSDT_SGL;
			PROP(nvmf_queue_submit(f[i].q, capsule, 64, &f[i].req[0]) == NVMF_ACT_CLOSE,
			     "a dead controller's queue took a command");
			fq_free(&f[i]);
		}
		if (!f[1].q && fq_connect(t, &f[1], 0, 1)) {
			cntlid = nvmf_queue_cntlid(f[1].q);
			fq_free(&f[2]);
		}
		if (!f[2].q && f[1].q && !fq_connect(t, &f[2], 1, cntlid))
			fq_free(&f[2]);
	}
	for (int i = 0; i < 3; i++)
		fq_free(&f[i]);
	nvmf_tgt_destroy(t);
	return 0;
}
