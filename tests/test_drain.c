// SPDX-License-Identifier: MIT
/*
 * unit suite, white-box: workers/drain.c compiled alone against stubs of
 * what it calls (posting, completions, control messages), so its rules can
 * be driven where the device cannot provoke them:
 *  - when the drain marker cannot be posted, the send queue's WRs are
 *    abandoned at once (buffers and operations given back, each failed),
 *    not left for flushes nothing promises, but only after the QP was
 *    reset (the device lets go of their memory), and not at all when it
 *    cannot be;
 *  - a drained connection is retired only once its received buffers and
 *    its references (engine.h's lifetime rule) are all back.
 */
#include "dp_pvt.h"

#include "pc_test.h"

/* --- stubs of the worker's other files ------------------------------------------------ */

static int post_ret, reset_ret;
static unsigned int posts, retired, retired_failed, dropped, retires_posted, resets;
static unsigned int retired_at_reset = ~0u;

int qp_to_err(const struct pc_dev *dev, struct ibv_qp *qp)
{
	(void)dev;
	(void)qp;
	return 0;
}

int qp_to_reset(const struct pc_dev *dev, struct ibv_qp *qp)
{
	(void)dev;
	(void)qp;
	resets++;
	/* what had been given back when the device was told to let go */
	retired_at_reset = retired;
	return reset_ret;
}

int dp_post(struct pc_worker *w, struct conn *c, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)w;
	(void)c;
	posts++;
	*bad = wr;
	return post_ret;
}

static void record(void *arg, void *ctx, bool failed)
{
	(void)arg;
	(void)ctx;
	retired++;
	retired_failed += failed;
}

void dp_sq_complete(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, int err)
{
	(void)w;
	ck_assert_uint_eq(sq_retire(&c->sq, ctx, err != 0, record, NULL), 1);
}

void dp_msg_release(struct pc_worker *w, struct msg *m)
{
	(void)w;
	(void)m;
}

void dp_count_dropped(struct pc_worker *w, struct conn *c, uint32_t n)
{
	(void)w;
	(void)c;
	dropped += n;
}

void dp_drop_early(struct pc_worker *w, struct conn *c)
{
	(void)w;
	c->early_head = NULL;
}

void dp_credited_leave(struct pc_worker *w, struct conn *c)
{
	(void)w;
	c->grant_pending = 0;
}

void worker_stats_release(struct pc_worker *w, struct conn *c)
{
	(void)w;
	(void)c;
}

bool conn_request_close(struct conn *c, struct ctl_inbox *control, int err, const char *why)
{
	(void)c;
	(void)control;
	(void)err;
	(void)why;
	return true;
}

void call_sent(struct pc_worker *w, struct msg *m)
{
	(void)w;
	(void)m;
	ck_abort_msg("no call in these tests");
}

void calls_close(struct pc_worker *w, struct conn *c)
{
	(void)w;
	(void)c;
}

void rndv_conn_close(struct pc_worker *w, struct conn *c)
{
	(void)w;
	(void)c;
}

void rndv_conn_drained(struct pc_worker *w, struct conn *c)
{
	(void)w;
	(void)c;
}

void rndv_cancel(struct pc_worker *w, struct wr_ctx *ctx)
{
	(void)w;
	(void)ctx;
	ck_abort_msg("no rendezvous in these tests");
}

void ctl_post(struct ctl_inbox *in, struct conn *c, enum ctl_kind kind)
{
	(void)in;
	ck_assert_int_eq(kind, CTL_RETIRE);
	ck_assert_int_eq(c->state, CONN_RETIRED);
	retires_posted++;
}

/* --- a worker and a connection with three WRs on its send queue ------------------------ */

static struct pc_engine_params params;
static struct pc_dev dev = { .name = "fake0", .port = 1 };
static struct pc_worker w;
static struct conn c;
static uintptr_t slots[8];
static struct wr_ctx ctxs[3];

static void setup(void)
{
	unsigned int i;

	memset(&w, 0, sizeof(w));
	memset(&c, 0, sizeof(c));
	c.st = &c.st_local;
	w.p = &params;
	w.dev = &dev;
	/* what worker.c sets: the layers below call drain.c back through these */
	w.up.fail = drain_fail;
	w.up.retire = drain_maybe_retire;
	atomic_store(&w.nconns, 1);
	c.w = &w;
	c.sq = (struct sq){ .depth = 8, .mask = 7, .signal_every = 4, .slot = slots };
	c.bl_tail = &c.bl_head;
	c.marker_ctx = (struct wr_ctx){ .kind = WR_MARKER, .conn = &c };
	conn_set_state(&c, CONN_UP);
	for (i = 0; i < 3; i++) {
		ctxs[i] = (struct wr_ctx){ .kind = WR_CREDIT, .conn = &c };
		sq_push(&c.sq, &ctxs[i], i == 2, false);
	}
	post_ret = retired = retired_failed = dropped = posts = retires_posted = resets = 0;
	reset_ret = 0;
	retired_at_reset = ~0u;
}

START_TEST(test_marker_post_fails_abandons)
{
	post_ret = EIO;
	drain_begin(&w, &c);
	ck_assert_uint_eq(posts, 1);
	ck_assert_int_eq(c.state, CONN_DRAINING);
	ck_assert(c.marker_done);
	/* the QP is reset first: only then does the device let go of their memory */
	ck_assert_uint_eq(resets, 1);
	ck_assert_uint_eq(retired_at_reset, 0);
	/* the three WRs are given back now, each failed; nothing is left in flight */
	ck_assert_uint_eq(sq_inflight(&c.sq), 0);
	ck_assert_uint_eq(retired, 3);
	ck_assert_uint_eq(retired_failed, 3);
}
END_TEST

/* The QP cannot be reset: the device may still use the WRs, so nothing is given back. */
START_TEST(test_abandon_keeps_what_the_device_may_use)
{
	post_ret = EIO;
	reset_ret = -EINVAL;
	drain_begin(&w, &c);
	ck_assert_uint_eq(resets, 1);
	ck_assert(c.marker_done);
	ck_assert_uint_eq(retired, 0);
	ck_assert_uint_eq(sq_inflight(&c.sq), 3);
}
END_TEST

/* A reset refused because the device is gone (EIO): it uses nothing any more. */
START_TEST(test_abandon_on_a_device_gone)
{
	post_ret = EIO;
	reset_ret = -EIO;
	drain_begin(&w, &c);
	ck_assert_uint_eq(resets, 1);
	ck_assert_uint_eq(retired, 3);
	ck_assert_uint_eq(sq_inflight(&c.sq), 0);
}
END_TEST

START_TEST(test_marker_posted_waits_for_flushes)
{
	drain_begin(&w, &c);
	ck_assert(!c.marker_done);
	/* the WRs and the marker wait for their flushes */
	ck_assert_uint_eq(sq_inflight(&c.sq), 4);
	ck_assert_uint_eq(retired, 0);
}
END_TEST

START_TEST(test_retire_waits_for_every_reference)
{
	conn_set_state(&c, CONN_DRAINED);
	c.held = 1;
	drain_maybe_retire(&w, &c);
	ck_assert_uint_eq(retires_posted, 0);
	c.held = 0;
	/* an app thread's send buffer, then the worker's own: still referenced */
	atomic_store(&c.refs_app, 2);
	c.refs_w = (uint32_t)-1;
	drain_maybe_retire(&w, &c);
	ck_assert_uint_eq(retires_posted, 0);
	/* the worker gives the last one back: retired */
	conn_put(&w, &c);
	ck_assert_uint_eq(retires_posted, 1);
	ck_assert_int_eq(c.state, CONN_RETIRED);
	ck_assert_uint_eq(atomic_load(&w.nconns), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("drain");
	TCase *tc = tcase_create("drain");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_marker_post_fails_abandons);
	tcase_add_test(tc, test_marker_posted_waits_for_flushes);
	tcase_add_test(tc, test_abandon_keeps_what_the_device_may_use);
	tcase_add_test(tc, test_abandon_on_a_device_gone);
	tcase_add_test(tc, test_retire_waits_for_every_reference);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
