// SPDX-License-Identifier: MIT
#include "verbs_pvt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "log_pvt.h"

int pc_loopback_create(struct pc_dev *dev, struct pc_loopback *lb, uint32_t depth, int access)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = depth,
			.max_recv_wr = depth,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	int i, ret;

	memset(lb, 0, sizeof(*lb));
	lb->dev = dev;
	for (i = 0; i < 2; i++) {
		lb->cq[i] = ibv_create_cq(dev->ctx, (int)depth * 2, NULL, NULL, 0);
		if (!lb->cq[i]) {
			ret = set_error(pc_neg_errno(-1), "%s: ibv_create_cq(%u): %s", dev->name,
					   depth * 2, strerror(errno));
			goto err;
		}
		init.send_cq = init.recv_cq = lb->cq[i];
		lb->qp[i] = ibv_create_qp(dev->pd, &init);
		if (!lb->qp[i]) {
			ret = set_error(pc_neg_errno(-1), "%s: ibv_create_qp(RC, depth %u): %s",
					   dev->name, depth, strerror(errno));
			goto err;
		}
		ret = qp_to_init(dev, lb->qp[i], access);
		if (ret)
			goto err;
	}
	for (i = 0; i < 2; i++) {
		struct qp_peer peer = {
			.gid = dev->gid,
			.qpn = lb->qp[!i]->qp_num,
			.psn = lb->qp[!i]->qp_num * 7919u,
		};

		ret = qp_to_rtr(dev, lb->qp[i], &peer);
		if (ret)
			goto err;
		ret = qp_to_rts(dev, lb->qp[i], lb->qp[i]->qp_num * 7919u);
		if (ret)
			goto err;
	}
	return 0;
err:
	pc_loopback_destroy(lb);
	return ret;
}

void pc_loopback_destroy(struct pc_loopback *lb)
{
	int i;

	for (i = 1; i >= 0; i--) {
		if (lb->qp[i])
			ibv_destroy_qp(lb->qp[i]);
		if (lb->cq[i])
			ibv_destroy_cq(lb->cq[i]);
	}
	memset(lb, 0, sizeof(*lb));
}

/* The buffers of one self-test; region k of slot i is at base[k] + i * size. */
enum { SRC, DST, REM, RD, NBUF };

static void fill(uint8_t *p, uint32_t size, uint64_t seq)
{
	uint32_t i;

	memcpy(p, &seq, sizeof(seq));
	for (i = sizeof(seq); i < size; i++)
		p[i] = (uint8_t)(seq * 31 + i);
}

static int wait_one(struct pc_loopback *lb, int side, enum ibv_wc_opcode op, uint64_t wr_id,
		    const char *what)
{
	struct ibv_wc wc;
	int n = pc_poll_wait(lb->cq[side], &wc, 1, 10000);

	if (n < 0)
		return n;
	if (n == 0)
		return set_error(-ETIMEDOUT, "%s qp 0x%x: no completion for %s within 10 s",
				    lb->dev->name, lb->qp[side]->qp_num, what);
	if (wc.status != IBV_WC_SUCCESS)
		return pc_wc_error(lb->dev, &wc, what);
	if (wc.opcode != op || wc.wr_id != wr_id)
		return set_error(-EPROTO, "%s qp 0x%x: %s: got opcode %s wr_id %llu",
				    lb->dev->name, wc.qp_num, what, pc_wc_opcode_str(wc.opcode),
				    (unsigned long long)wc.wr_id);
	return 0;
}

static int post_rdma(struct pc_loopback *lb, enum ibv_wr_opcode op, struct ibv_sge *sge,
		     uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	return pc_neg_errno(ibv_post_send(lb->qp[0], &wr, &bad));
}

/* One RDMA WRITE or READ of @sge against @remote, then @want compared with @got. */
static int rdma_check(struct pc_loopback *lb, enum ibv_wr_opcode op, struct ibv_sge *sge,
		      void *remote, uint32_t rkey, uint64_t i, const void *want, const void *got)
{
	const char *what = op == IBV_WR_RDMA_READ ? "RDMA_READ" : "RDMA_WRITE";
	int ret = post_rdma(lb, op, sge, (uintptr_t)remote, rkey, i);

	if (!ret)
		ret = wait_one(lb, 0, op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE,
			       i, what);
	if (!ret && memcmp(want, got, sge->length))
		ret = set_error(-EBADMSG, "%s: %s %llu: data differs", lb->dev->name, what,
				   (unsigned long long)i);
	return ret;
}

int pc_loopback_selftest(struct pc_loopback *lb, uint32_t count, uint32_t size,
			 struct pc_selftest_stats *st)
{
	static const int access[NBUF] = {
		[SRC] = 0,
		[DST] = IBV_ACCESS_LOCAL_WRITE,
		[REM] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		[RD] = IBV_ACCESS_LOCAL_WRITE,
	};
	struct ibv_mr *mr[NBUF] = { 0 };
	uint8_t *buf[NBUF] = { 0 };
	struct timespec t0, t1;
	uint64_t i;
	int k, ret = 0;

	memset(st, 0, sizeof(*st));
	if (size < 8 || count == 0)
		return set_error(-EINVAL, "selftest: size %u (>= 8) and count %u (>= 1)", size,
				    count);
	for (k = 0; k < NBUF; k++) {
		if (posix_memalign((void **)&buf[k], 4096, size)) {
			ret = -ENOMEM;
			goto out;
		}
		mr[k] = ibv_reg_mr(lb->dev->pd, buf[k], size, access[k]);
		if (!mr[k]) {
			ret = set_error(pc_neg_errno(-1), "%s: ibv_reg_mr(%u bytes): %s",
					   lb->dev->name, size, strerror(errno));
			goto out;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < count && !ret; i++) {
		struct ibv_sge s_src = { (uintptr_t)buf[SRC], size, mr[SRC]->lkey };
		struct ibv_sge s_dst = { (uintptr_t)buf[DST], size, mr[DST]->lkey };
		struct ibv_sge s_rd = { (uintptr_t)buf[RD], size, mr[RD]->lkey };
		struct ibv_recv_wr rwr = { .wr_id = i, .sg_list = &s_dst, .num_sge = 1 }, *rbad;
		struct ibv_send_wr swr = {
			.wr_id = i, .sg_list = &s_src, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *sbad;

		/* SEND/RECV */
		fill(buf[SRC], size, i);
		memset(buf[DST], 0, size);
		ret = pc_neg_errno(ibv_post_recv(lb->qp[1], &rwr, &rbad));
		if (!ret)
			ret = pc_neg_errno(ibv_post_send(lb->qp[0], &swr, &sbad));
		if (ret) {
			ret = set_error(ret, "%s: post of message %llu failed: %s", lb->dev->name,
					   (unsigned long long)i, strerror(-ret));
			break;
		}
		ret = wait_one(lb, 0, IBV_WC_SEND, i, "SEND");
		if (ret)
			break;
		st->sends++;
		ret = wait_one(lb, 1, IBV_WC_RECV, i, "RECV");
		if (ret)
			break;
		if (memcmp(buf[SRC], buf[DST], size)) {
			ret = set_error(-EBADMSG, "%s qp 0x%x: message %llu differs",
					   lb->dev->name, lb->qp[1]->qp_num, (unsigned long long)i);
			break;
		}
		st->recvs++;
		st->bytes_checked += size;

		/* RDMA WRITE into REM, then RDMA READ it back into RD */
		fill(buf[SRC], size, ~i);
		memset(buf[RD], 0, size);
		ret = rdma_check(lb, IBV_WR_RDMA_WRITE, &s_src, buf[REM], mr[REM]->rkey, i,
				 buf[SRC], buf[REM]);
		if (ret)
			break;
		st->writes++;
		ret = rdma_check(lb, IBV_WR_RDMA_READ, &s_rd, buf[REM], mr[REM]->rkey, i, buf[SRC],
				 buf[RD]);
		if (ret)
			break;
		st->reads++;
		st->bytes_checked += 2ULL * size;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	st->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
out:
	for (k = NBUF - 1; k >= 0; k--) {
		if (mr[k])
			ibv_dereg_mr(mr[k]);
		free(buf[k]);
	}
	return ret;
}
