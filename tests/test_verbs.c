// SPDX-License-Identifier: MIT
/* rdma suite: a real verbs round trip on the test bed device (rxe0 in the VM). */
#include <pollcore/verbs.h>

#include <stdlib.h>
#include <string.h>

#include "pc_test.h"

static struct pc_dev *dev;
static struct pc_loopback lb;

static void setup(void)
{
	dev = pc_dev_open(pc_test_device(), pc_test_port(), pc_test_gid_index());
	ck_assert_msg(dev, "pc_dev_open: %s", pc_last_error());
	ck_assert_int_eq(pc_loopback_create(dev, &lb, 64, IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ), 0);
}

static void teardown(void)
{
	pc_loopback_destroy(&lb);
	pc_dev_close(dev);
}

START_TEST(test_open_unknown_device)
{
	errno = 0;
	ck_assert_ptr_null(pc_dev_open("no_such_dev0", 1, 0));
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "no_such_dev0"));
}
END_TEST

START_TEST(test_open_bad_port)
{
	errno = 0;
	ck_assert_ptr_null(pc_dev_open(pc_test_device(), 9, pc_test_gid_index()));
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "port 9"));
}
END_TEST

START_TEST(test_qps_are_rts)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int i;

	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(ibv_query_qp(lb.qp[i], &a, IBV_QP_STATE | IBV_QP_DEST_QPN, &ia), 0);
		ck_assert_int_eq(a.qp_state, IBV_QPS_RTS);
		ck_assert_uint_eq(a.dest_qp_num, lb.qp[!i]->qp_num);
	}
}
END_TEST

START_TEST(test_roundtrip_small)
{
	struct pc_selftest_stats st;

	ck_assert_msg(pc_loopback_selftest(&lb, 200, 64, &st) == 0, "%s", pc_last_error());
	ck_assert_uint_eq(st.sends, 200);
	ck_assert_uint_eq(st.recvs, 200);
	ck_assert_uint_eq(st.writes, 200);
	ck_assert_uint_eq(st.reads, 200);
	ck_assert_uint_eq(st.bytes_checked, 200ull * 64 * 3);
}
END_TEST

START_TEST(test_roundtrip_large)
{
	struct pc_selftest_stats st;

	/* Several MTUs per message: segmentation and reassembly. */
	ck_assert_msg(pc_loopback_selftest(&lb, 20, 65536, &st) == 0, "%s", pc_last_error());
	ck_assert_uint_eq(st.recvs, 20);
	ck_assert_uint_eq(st.bytes_checked, 20ull * 65536 * 3);
}
END_TEST

/* A RDMA WRITE with a wrong rkey must fail with a readable, exact error. */
START_TEST(test_bad_rkey_is_reported)
{
	uint8_t *src = calloc(1, 64), *dst = calloc(1, 64);
	struct ibv_mr *smr = ibv_reg_mr(dev->pd, src, 64, 0);
	struct ibv_mr *dmr = ibv_reg_mr(dev->pd, dst, 64, IBV_ACCESS_LOCAL_WRITE); /* no remote */
	struct ibv_sge sge = { (uintptr_t)src, 64, smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = dmr->rkey },
	}, *bad;
	struct ibv_wc wc;
	char qpn[32];

	memset(src, 0xab, 64);
	ck_assert_int_eq(ibv_post_send(lb.qp[0], &wr, &bad), 0);
	ck_assert_int_eq(pc_poll_wait(lb.cq[0], &wc, 1, 10000), 1);
	ck_assert_int_eq(wc.status, IBV_WC_REM_ACCESS_ERR);
	ck_assert_uint_eq(wc.wr_id, 7);
	ck_assert_int_eq(pc_wc_error(dev, &wc, "RDMA_WRITE"), -EIO);
	snprintf(qpn, sizeof(qpn), "qp 0x%x", lb.qp[0]->qp_num);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), dev->name));
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "port 1 gid 0"));
	ck_assert_ptr_nonnull(strstr(pc_last_error(), qpn));
	ck_assert_ptr_nonnull(strstr(pc_last_error(), ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
	/* Nothing was written without permission. */
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(dst[i], 0);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(smr);
	free(dst);
	free(src);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("verbs");
	TCase *tc = tcase_create("loopback");

	pc_test_require_rdma();
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_qps_are_rts);
	tcase_add_test(tc, test_roundtrip_small);
	tcase_add_test(tc, test_roundtrip_large);
	tcase_add_test(tc, test_bad_rkey_is_reported);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_test(tc, test_open_unknown_device);
	tcase_add_test(tc, test_open_bad_port);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
