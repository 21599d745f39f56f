// SPDX-License-Identifier: MIT
/*
 * rdma suite: what rendezvous (workers/rndv.c) relies on, at the verbs
 * level, between the two QPs of a pc_loopback: a type-2 memory window's
 * bind, READ through it, LOCAL_INV, and a second bind of the same window.
 */
#include <pollcore/verbs.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc_test.h"

static int lb_post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, wr, &bad);
}

/* Posts @wr on @qp and returns its completion's status (-1: none in 3 s). */
static int lb_do(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr)
{
	struct ibv_wc wc;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if (lb_post(qp, wr))
		return -2;
	if (pc_poll_wait(cq, &wc, 1, 3000) != 1)
		return -1;
	return wc.status;
}

static int lb_read(struct pc_loopback *lb, void *dst, uint32_t lkey, uint64_t raddr,
		   uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)dst, len, lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .wr.rdma = { raddr, rkey } };

	return lb_do(lb->qp[1], lb->cq[1], &wr);
}

/*
 * A window bound on qp[0] (the sender) serves qp[1]'s READs; after
 * LOCAL_INV it serves none; the same window binds again with a new key once
 * mw->rkey is set to the key bound before (rxe keeps the old one); and, for
 * the record, whether rxe completes a SEND_WITH_INV of that key with
 * IBV_WC_WITH_INV (not used: pollcore invalidates locally).
 */
START_TEST(test_mw_lifecycle)
{
	enum { LEN = 1 << 20 };
	struct pc_dev *d = pc_dev_open(pc_test_device(), pc_test_port(), pc_test_gid_index());
	struct pc_loopback lb;
	struct ibv_mr *smr, *dmr;
	struct ibv_mw *mw;
	uint8_t *src, *dst;
	uint32_t key;
	struct ibv_send_wr bind, inv;

	ck_assert_msg(d, "%s", pc_last_error());
	ck_assert_int_eq(pc_loopback_create(d, &lb, 16, IBV_ACCESS_REMOTE_READ), 0);
	src = aligned_alloc(4096, LEN);
	dst = aligned_alloc(4096, LEN);
	memset(src, 0xab, LEN);
	smr = ibv_reg_mr(d->pd, src, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	dmr = ibv_reg_mr(d->pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE);
	ck_assert(smr && dmr);
	mw = ibv_alloc_mw(d->pd, IBV_MW_TYPE_2);
	ck_assert_ptr_nonnull(mw);
	for (int round = 0; round < 3; round++) {
		key = ibv_inc_rkey(mw->rkey);
		bind = (struct ibv_send_wr){ .opcode = IBV_WR_BIND_MW,
			.bind_mw = { .mw = mw, .rkey = key, .bind_info = { .mr = smr,
				.addr = (uintptr_t)src, .length = LEN,
				.mw_access_flags = IBV_ACCESS_REMOTE_READ } } };
		ck_assert_int_eq(lb_do(lb.qp[0], lb.cq[0], &bind), IBV_WC_SUCCESS);
		/* the provider left mw->rkey alone: the next bind must name the key bound now */
		mw->rkey = key;
		memset(dst, 0, LEN);
		ck_assert_int_eq(lb_read(&lb, dst, dmr->lkey, (uintptr_t)src, key, LEN),
				 IBV_WC_SUCCESS);
		ck_assert_uint_eq(dst[0], 0xab);
		ck_assert_uint_eq(dst[LEN - 1], 0xab);
		inv = (struct ibv_send_wr){ .opcode = IBV_WR_LOCAL_INV, .invalidate_rkey = key };
		ck_assert_int_eq(lb_do(lb.qp[0], lb.cq[0], &inv), IBV_WC_SUCCESS);
		/* invalidated: the same READ fails (and puts the pair in error) */
		ck_assert_int_eq(lb_read(&lb, dst, dmr->lkey, (uintptr_t)src, key, 4096),
				 IBV_WC_REM_ACCESS_ERR);
		pc_loopback_destroy(&lb);
		ck_assert_int_eq(pc_loopback_create(d, &lb, 16, IBV_ACCESS_REMOTE_READ), 0);
	}
	{
		/* SEND_WITH_INV from qp[1] naming a window bound on qp[0]: what does rxe say? */
		struct ibv_recv_wr rwr, *rbad;
		struct ibv_sge rsge = { (uintptr_t)dst, 64, dmr->lkey };
		struct ibv_send_wr snd = { .opcode = IBV_WR_SEND_WITH_INV, .num_sge = 0 };
		struct ibv_wc wc;
		int st, n;

		key = ibv_inc_rkey(mw->rkey);
		bind.bind_mw.rkey = key;
		bind.send_flags = 0;
		ck_assert_int_eq(lb_do(lb.qp[0], lb.cq[0], &bind), IBV_WC_SUCCESS);
		mw->rkey = key;
		rwr = (struct ibv_recv_wr){ .sg_list = &rsge, .num_sge = 1 };
		ck_assert_int_eq(ibv_post_recv(lb.qp[0], &rwr, &rbad), 0);
		snd.invalidate_rkey = key;
		st = lb_do(lb.qp[1], lb.cq[1], &snd);
		n = pc_poll_wait(lb.cq[0], &wc, 1, 3000);
		printf("rxe SEND_WITH_INV of a type-2 window: send status %d (%s); receive: %d "
		       "completion(s), status %s, wc_flags WITH_INV %d, invalidated_rkey 0x%x "
		       "(bound 0x%x)\n", st, st >= 0 ? ibv_wc_status_str(st) : "none", n,
		       n == 1 ? ibv_wc_status_str(wc.status) : "-",
		       n == 1 && (wc.wc_flags & IBV_WC_WITH_INV) ? 1 : 0,
		       n == 1 ? wc.invalidated_rkey : 0, key);
	}
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	pc_loopback_destroy(&lb);
	pc_dev_close(d);
	free(src);
	free(dst);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rndv_mw");
	TCase *tc = tcase_create("rndv_mw");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mw_lifecycle);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
