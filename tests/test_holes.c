// SPDX-License-Identifier: MIT
/*
 * rdma suite: the smaller holes of issue 12, each provoked end to end on
 * the soft-RoCE device with a server and a client engine in one process:
 *  - on_msg never runs before on_conn(UP) (a passive side may receive first);
 *  - pc_rdma() on a closing connection, on the owning worker, reports once;
 *  - a response to a request that is not in flight closes its connection;
 *  - sends accepted and then dropped by a close are counted, never silent;
 *  - an async event on the application's own SRQ, on the device context the
 *    engines share, is left alone (its srq_context is not a worker);
 *  - ibv_poll_cq() failing on every turn is counted every time and logged
 *    once per worker, and the worker carries on when it stops failing.
 */
#include <pollcore/engine.h>

#include <rdma/rdma_cma.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

static atomic_uint srv_up, srv_down, srv_msgs, srv_early, cli_down, cli_msgs;
static atomic_int srv_delay_us;
static atomic_bool srv_bad_req_id;	/* answer requests with an id nobody asked for */
static atomic_bool srv_rdma_on_down;	/* call pc_rdma() from on_conn(DOWN) */
static atomic_bool srv_echo;		/* send one-way messages back */
static atomic_uint rdma_done_calls, rdma_nonzero_returns;
static atomic_int rdma_done_status;
static atomic_ullong cli_dropped;
static int up_marker;

static void reset(void)
{
	atomic_store(&srv_up, 0);
	atomic_store(&srv_down, 0);
	atomic_store(&srv_msgs, 0);
	atomic_store(&srv_early, 0);
	atomic_store(&cli_down, 0);
	atomic_store(&cli_msgs, 0);
	atomic_store(&srv_delay_us, 0);
	atomic_store(&srv_bad_req_id, false);
	atomic_store(&srv_rdma_on_down, false);
	atomic_store(&srv_echo, false);
	atomic_store(&rdma_done_calls, 0);
	atomic_store(&rdma_nonzero_returns, 0);
	atomic_store(&rdma_done_status, 0);
	atomic_store(&cli_dropped, 0);
}

static void rdma_done(struct pc_op *op, int status)
{
	(void)op;
	atomic_store(&rdma_done_status, status);
	atomic_fetch_add(&rdma_done_calls, 1);
}

static struct pc_op down_op;
static char down_buf[64];

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	if (ev == PC_CONN_UP) {
		pc_conn_set_user(c, &up_marker);
		atomic_fetch_add(&srv_up, 1);
		return;
	}
	if (atomic_load(&srv_rdma_on_down)) {
		/* on the owning worker, the handle still valid, the conn closed */
		down_op = (struct pc_op){ .code = PC_OP_WRITE, .local = down_buf, .len = 8,
					  .done = rdma_done };
		if (pc_rdma(c, &down_op))
			atomic_fetch_add(&rdma_nonzero_returns, 1);
	}
	atomic_fetch_add(&srv_down, 1);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	int d = atomic_load(&srv_delay_us), rc;

	(void)arg;
	if (pc_conn_user(m->conn) != &up_marker)
		atomic_fetch_add(&srv_early, 1);
	if (d)
		usleep((useconds_t)d);
	atomic_fetch_add(&srv_msgs, 1);
	if (m->type == PC_MSG_REQUEST) {
		if (atomic_load(&srv_bad_req_id))
			m->req_id += 1000;
		rc = pc_reply(m);
	} else {
		rc = atomic_load(&srv_echo) ? pc_send(m) : pc_msg_release(m);
	}
	ck_assert_msg(rc == 0 || rc == -ENOTCONN, "server: %d", rc);
}

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_conn_info in;

	(void)arg;
	if (ev != PC_CONN_DOWN)
		return;
	/* the last moment the handle is valid: read what the close dropped */
	pc_conn_info(c, &in);
	atomic_fetch_add(&cli_dropped, in.msgs_dropped);
	atomic_fetch_add(&cli_down, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	atomic_fetch_add(&cli_msgs, 1);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

/* idle mode of the next pair()'s engines (0: the default, auto) */
static enum pc_idle pair_idle;

static void pair(struct pc_engine **srv, struct pc_engine **cli)
{
	/* raw_bufs: test_foreign_srq_event_ignored connects as a raw peer */
	struct pc_engine_params sp = {.size = sizeof(sp),
				      .on_conn = srv_on_conn,
				      .on_msg = srv_on_msg,
				      .no_numa = true,
				      .idle = pair_idle,
				      .raw_bufs = 16};
	struct pc_engine_params cp = {
	    .size = sizeof(cp), .on_conn = cli_on_conn, .on_msg = cli_on_msg, .no_numa = true,
	    .idle = pair_idle};

	reset();
	*srv = pc_engine_create(&sp);
	ck_assert_msg(*srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(*srv, pc_test_addr(), 0), 0);
	*cli = pc_engine_create(&cp);
	ck_assert_msg(*cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(*cli, 0), 0);
}

/* Handles of this test, dropped after its engines are gone (they outlive them). */
static struct pc_conn *handles[64];
static unsigned int nhandles;

static void handles_put(void)
{
	while (nhandles)
		pc_conn_put(handles[--nhandles]);
}

static struct pc_conn *connect_one(struct pc_engine *srv, struct pc_engine *cli)
{
	struct pc_conn *c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);

	ck_assert_msg(c, "connect: %s", pc_last_error());
	ck_assert_uint_lt(nhandles, 64);
	handles[nhandles++] = c;
	return c;
}

/* Sends one message of @type, retrying on backpressure; returns pc_send's or pc_call's answer. */
static int send_one(struct pc_conn *c, bool call)
{
	uint64_t end = pc_test_now_ms() + 60000;
	struct pc_msg *m;
	int ret;

	while (!(m = pc_msg_alloc(c))) {
		ck_assert_int_eq(errno, ENOBUFS);
		ck_assert(pc_test_now_ms() < end);
		usleep(100);
	}
	memset(m->data, 0x42, 16);
	m->len = 16;
	while ((ret = call ? pc_call(m, NULL, NULL, 0, NULL) : pc_send(m)) == -ENOBUFS || ret == -EAGAIN) {
		ck_assert(pc_test_now_ms() < end);
		usleep(100);
	}
	return ret;
}

static void wait_for(atomic_uint *v, unsigned int want, int seconds)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;

	while (atomic_load(v) < want && pc_test_now_ms() < end)
		usleep(1000);
}

/*
 * Clients send the moment pc_connect() returns: their first messages may
 * reach the server before its ESTABLISHED event does. Every one is
 * delivered, and none before the server's on_conn(UP).
 */
START_TEST(test_no_message_before_up)
{
	enum { CONNS = PC_TEST_SAN(40, 16), PER = 4 };
	struct pc_engine *srv, *cli;
	struct pc_conn *c[CONNS];
	unsigned int i, k;

	pair(&srv, &cli);
	for (i = 0; i < CONNS; i++) {
		c[i] = connect_one(srv, cli);
		for (k = 0; k < PER; k++)
			ck_assert_int_eq(send_one(c[i], false), 0);
	}
	wait_for(&srv_msgs, CONNS * PER, 60);
	ck_assert_uint_eq(atomic_load(&srv_msgs), CONNS * PER);
	ck_assert_uint_eq(atomic_load(&srv_up), CONNS);
	printf("messages that arrived before their UP: held back until it (%u seen early)\n",
	       atomic_load(&srv_early));
	ck_assert_uint_eq(atomic_load(&srv_early), 0);
	for (i = 0; i < CONNS; i++)
		ck_assert_int_eq(pc_close(c[i]), 0);
	wait_for(&srv_down, CONNS, 60);
	ck_assert_uint_eq(atomic_load(&srv_down), CONNS);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
}
END_TEST

/* pc_rdma() from on_conn(DOWN), on the owning worker: done(-ENOTCONN) once, and 0 returned. */
START_TEST(test_rdma_on_closed_reports_once)
{
	struct pc_engine *srv, *cli;
	struct pc_conn *c;

	pair(&srv, &cli);
	atomic_store(&srv_rdma_on_down, true);
	c = connect_one(srv, cli);
	wait_for(&srv_up, 1, 20);
	ck_assert_int_eq(pc_close(c), 0);
	wait_for(&srv_down, 1, 30);
	ck_assert_uint_eq(atomic_load(&srv_down), 1);
	ck_assert_uint_eq(atomic_load(&rdma_done_calls) + atomic_load(&rdma_nonzero_returns), 1);
	ck_assert_uint_eq(atomic_load(&rdma_done_calls), 1);
	ck_assert_int_eq(atomic_load(&rdma_done_status), -ENOTCONN);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
}
END_TEST

/*
 * A server that answers with a req_id nobody asked for: that connection
 * closes with a protocol error and the response is not delivered; a
 * well-behaved connection opened afterwards carries on.
 */
START_TEST(test_unknown_response_closes)
{
	struct pc_engine *srv, *cli;
	struct pc_conn_info in;
	struct pc_conn *bad, *good;
	unsigned int i;

	pair(&srv, &cli);
	bad = connect_one(srv, cli);
	atomic_store(&srv_bad_req_id, true);
	ck_assert_int_eq(send_one(bad, true), 0);
	wait_for(&cli_down, 1, 30);
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	ck_assert_uint_eq(atomic_load(&cli_msgs), 0);
	atomic_store(&srv_bad_req_id, false);
	good = connect_one(srv, cli);
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(send_one(good, true), 0);
	wait_for(&cli_msgs, 100, 60);
	ck_assert_uint_eq(atomic_load(&cli_msgs), 100);
	pc_conn_info(good, &in);
	ck_assert_uint_eq(in.inflight_req, 0);
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
}
END_TEST

/*
 * 300 sends accepted on a connection whose peer is slow (credits run out,
 * the rest waits in the backlog), then pc_close(): every accepted message
 * is either delivered or counted as dropped, none vanishes.
 */
START_TEST(test_close_counts_dropped)
{
	enum { N = 300 };
	struct pc_engine *srv, *cli;
	struct pc_worker_stats ws;
	struct pc_conn *c;
	unsigned int i;

	pair(&srv, &cli);
	c = connect_one(srv, cli);
	wait_for(&srv_up, 1, 20);
	atomic_store(&srv_delay_us, 3000);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(send_one(c, false), 0);
	ck_assert_int_eq(pc_close(c), 0);
	wait_for(&cli_down, 1, 60);
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	wait_for(&srv_down, 1, 60);
	printf("close: %u accepted, %u delivered, %llu counted dropped\n", N,
	       atomic_load(&srv_msgs), (unsigned long long)atomic_load(&cli_dropped));
	ck_assert_uint_gt(atomic_load(&cli_dropped), 0);
	ck_assert_uint_le(atomic_load(&srv_msgs), N);
	/* a flushed send may have arrived all the same: counted twice, never zero times */
	ck_assert_uint_ge(atomic_load(&srv_msgs) + atomic_load(&cli_dropped), N);
	ck_assert_int_eq(pc_engine_stats(cli, 0, &ws), 0);
	ck_assert_uint_eq(ws.msgs_dropped, atomic_load(&cli_dropped));
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
}
END_TEST

/* --- ibv_poll_cq() failing ------------------------------------------------------------ */

/*
 * ibv_poll_cq() is an inline call through the context's ops, which the
 * engines share with this test (librdmacm opens each device once per
 * process): a wrapper installed before the engines start makes pollcore's
 * CQs (their cq_context is the worker; the test's own have none) fail while
 * poll_fail_left lasts.
 */
static int (*real_poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static atomic_int poll_fail_left;
static atomic_uint poll_failed, poll_logged;

static int failing_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	if (cq->cq_context && atomic_fetch_sub(&poll_fail_left, 1) > 0) {
		atomic_fetch_add(&poll_failed, 1);
		return -1;
	}
	return real_poll_cq(cq, n, wc);
}

static void count_poll_logs(enum pc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (strstr(msg, "ibv_poll_cq failed"))
		atomic_fetch_add(&poll_logged, 1);
	fprintf(stderr, "pollcore %d: %s\n", (int)level, msg);
}

static uint64_t poll_errors(struct pc_engine *e, unsigned int *workers_hit)
{
	struct pc_worker_stats ws;
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < pc_engine_nworkers(e); i++) {
		ck_assert_int_eq(pc_engine_stats(e, i, &ws), 0);
		n += ws.poll_errors;
		*workers_hit += ws.poll_errors > 0;
	}
	return n;
}

/*
 * 20,000 failed polls (2,000 in sanitized builds) over the server's and the
 * client's workers: each is counted in poll_errors, exactly; the log says it
 * once per worker hit, not once per turn; afterwards both carry 100 more
 * requests and answers.
 */
START_TEST(test_poll_errors_said_once)
{
	enum { FAILS = PC_TEST_SAN(20000, 2000) };
	struct ibv_context **ctxs, *ctx = NULL;
	struct pc_engine *srv, *cli;
	unsigned int i, hit = 0;
	uint64_t errs, end;
	struct pc_conn *c;
	int n = 0;

	ctxs = rdma_get_devices(&n);
	for (i = 0; ctxs && i < (unsigned int)n; i++)
		if (!strcmp(ibv_get_device_name(ctxs[i]->device), pc_test_device()))
			ctx = ctxs[i];
	ck_assert_msg(ctx, "%s: no rdma_cm context", pc_test_device());
	real_poll_cq = ctx->ops.poll_cq;
	ctx->ops.poll_cq = failing_poll_cq;
	pc_log_set_sink(count_poll_logs, NULL);

	/*
	 * Busy workers: the failures must come turn after turn. A hybrid worker
	 * sleeps after idle_spin_us of failed (empty) turns, up to 100 ms at a
	 * time, which spread 20,000 failures over more than the 16 s after
	 * which a connection whose sends never complete is closed (its
	 * keepalives' completions are behind the failing polls): under ASan in
	 * the VM, ENOTCONN for the sends after.
	 */
	pair_idle = PC_IDLE_BUSY;
	pair(&srv, &cli);
	pair_idle = 0;
	c = connect_one(srv, cli);
	ck_assert_int_eq(send_one(c, true), 0);
	wait_for(&cli_msgs, 1, 30);
	ck_assert_uint_eq(atomic_load(&cli_msgs), 1);
	ck_assert_uint_eq(poll_errors(srv, &hit) + poll_errors(cli, &hit), 0);

	atomic_store(&poll_fail_left, FAILS);
	/*
	 * Wait for the final state asserted below, not for poll_fail_left: each
	 * failure is counted in three steps on its worker, in this order, with
	 * this thread free to look in between: the wrapper takes one from
	 * poll_fail_left and then adds one to poll_failed (its return follows),
	 * the worker then adds one to its poll_errors and logs (the sink adds to
	 * poll_logged). poll_fail_left at 0 said only that the last failure had
	 * begun: a look at poll_failed right then once saw 19,999. All three
	 * counters only rise, so an overshoot still fails the equalities.
	 */
	end = pc_test_now_ms() + 60000;
	for (;;) {
		hit = 0;
		errs = poll_errors(srv, &hit) + poll_errors(cli, &hit);
		if ((atomic_load(&poll_failed) >= FAILS && errs >= FAILS &&
		     atomic_load(&poll_logged) >= hit) || pc_test_now_ms() >= end)
			break;
		usleep(1000);
	}
	ck_assert_int_le(atomic_load(&poll_fail_left), 0);
	printf("ibv_poll_cq failed %u times: poll_errors %llu over %u workers, logged %u times\n",
	       atomic_load(&poll_failed), (unsigned long long)errs, hit, atomic_load(&poll_logged));
	ck_assert_uint_eq(atomic_load(&poll_failed), FAILS);
	ck_assert_uint_eq(errs, FAILS);
	ck_assert_uint_ge(hit, 1);
	ck_assert_uint_eq(atomic_load(&poll_logged), hit);

	/* and the data path carries on */
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(send_one(c, true), 0);
	wait_for(&cli_msgs, 101, 60);
	ck_assert_uint_eq(atomic_load(&cli_msgs), 101);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
	pc_log_set_sink(NULL, NULL);
	ctx->ops.poll_cq = real_poll_cq;
	rdma_free_devices(ctxs);
}
END_TEST

/* --- the application's own verbs objects on the shared device context ---------------- */

static void cm_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;

	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), 0);
	got = ev->event;
	rdma_ack_cm_event(ev);
	ck_assert_msg(got == want, "rdma_cm: %s, expected %s", rdma_event_str(got),
		      rdma_event_str(want));
}

static void poll_n(struct ibv_cq *cq, int n)
{
	uint64_t end = pc_test_now_ms() + 20000;
	struct ibv_wc wc;
	int got = 0, k;

	while (got < n && pc_test_now_ms() < end) {
		k = ibv_poll_cq(cq, 1, &wc);
		ck_assert_int_ge(k, 0);
		if (k)
			ck_assert_msg(wc.status == IBV_WC_SUCCESS, "%s", ibv_wc_status_str(wc.status));
		got += k;
	}
	ck_assert_int_eq(got, n);
}

/*
 * The application connects its own RC QP, on its own SRQ, to the server as
 * a raw peer (rdma_cm: the same device context as the engines'), arms the
 * SRQ's limit and lets two echoes consume it: IBV_EVENT_SRQ_LIMIT_REACHED
 * on that context is read by an engine's control thread. The SRQ's context
 * is the application's zeroed buffer, which must stay untouched.
 */
START_TEST(test_foreign_srq_event_ignored)
{
	enum { CANARY = 1 << 16, BUF = 256 };
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct ibv_srq_attr limit = { .srq_limit = 3 };
	struct pc_worker_stats ws;
	struct pc_engine *srv, *cli;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qa;
	uint8_t *canary = calloc(1, CANARY), *buf = calloc(8, BUF);
	char port[8];
	unsigned int i;

	pair(&srv, &cli);
	atomic_store(&srv_echo, true);
	snprintf(port, sizeof(port), "%u", pc_listen_port(srv));
	ck_assert_int_eq(rdma_getaddrinfo(pc_test_addr(), port, &hints, &res), 0);
	ch = rdma_create_event_channel();
	ck_assert_ptr_nonnull(ch);
	ck_assert_int_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ck_assert_int_eq(rdma_resolve_addr(id, NULL, res->ai_dst_addr, 5000), 0);
	cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ck_assert_int_eq(rdma_resolve_route(id, 5000), 0);
	cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);

	pd = ibv_alloc_pd(id->verbs);
	cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	srq = ibv_create_srq(pd, &(struct ibv_srq_init_attr){
		.srq_context = canary, .attr = { .max_wr = 16, .max_sge = 1 } });
	mr = ibv_reg_mr(pd, buf, 8 * BUF, IBV_ACCESS_LOCAL_WRITE);
	ck_assert(pd && cq && srq && mr);
	for (i = 0; i < 4; i++) {
		struct ibv_sge sge = { (uintptr_t)(buf + i * BUF), BUF, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		ck_assert_int_eq(ibv_post_srq_recv(srq, &wr, &bad), 0);
	}
	qa = (struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq, .srq = srq,
					.cap = { .max_send_wr = 8, .max_send_sge = 1 },
					.qp_type = IBV_QPT_RC };
	ck_assert_int_eq(rdma_create_qp(id, pd, &qa), 0);
	/* no private data: a raw peer */
	ck_assert_int_eq(rdma_connect(id, &param), 0);
	cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	ck_assert_int_eq(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), 0);

	/* two sends, two echoes: the SRQ falls below its limit */
	for (i = 0; i < 2; i++) {
		struct ibv_sge sge = { (uintptr_t)(buf + (4 + i) * BUF), 64, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		ck_assert_int_eq(ibv_post_send(id->qp, &wr, &bad), 0);
	}
	poll_n(cq, 4);
	/* time for a control thread to read the event */
	sleep(2);
	for (i = 0; i < CANARY && !canary[i]; i++)
		;
	ck_assert_msg(i == CANARY, "the application's srq_context was written at offset %u", i);
	ck_assert_int_eq(pc_engine_stats(srv, 0, &ws), 0);
	ck_assert_uint_eq(ws.srq_limit_events, 0);

	rdma_disconnect(id);
	rdma_destroy_qp(id);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(res);
	free(buf);
	free(canary);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	handles_put();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("holes");

	pc_test_require_rdma();
#define ADD(name) PC_TEST_ADD(s, name, 600)
	ADD(no_message_before_up);
	ADD(rdma_on_closed_reports_once);
	ADD(unknown_response_closes);
	ADD(close_counts_dropped);
	ADD(foreign_srq_event_ignored);
	ADD(poll_errors_said_once);
	return pc_test_run(s);
}
