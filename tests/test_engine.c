// SPDX-License-Identifier: MIT
/*
 * rdma suite: the dataplane end to end on the soft-RoCE device. A server
 * engine and a client engine in one process talk over rdma_cm on the test
 * bed's address (pc_test.h: fe80::ff:fe00:1%d0, rxe0's GID 0, in the VM).
 * Every test checks real outcomes:
 * sequence numbers per connection, bytes, counters, exact errors.
 */
#include <pollcore/engine.h>
#include <pollcore/verbs.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pc_test.h"

#define MAXC 8

static const char *addr(void)
{
	return pc_test_addr();
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- a payload that proves order and integrity ------------------------------------- */

struct payload {
	uint32_t conn;
	uint32_t seq;
	uint32_t len;
	uint32_t sum;
};

static uint32_t fill(void *data, uint32_t len, uint32_t conn, uint32_t seq)
{
	uint8_t *b = data;
	struct payload p = { conn, seq, len, 0 };
	uint32_t i;

	for (i = sizeof(p); i < len; i++) {
		b[i] = (uint8_t)(seq * 7 + i + conn);
		p.sum += b[i];
	}
	memcpy(b, &p, sizeof(p));
	return len;
}

/* Returns 0 when @data is exactly what fill() wrote for (conn, seq). */
static int check(const void *data, uint32_t len, uint32_t *conn, uint32_t *seq)
{
	const uint8_t *b = data;
	struct payload p;
	uint32_t i, sum = 0;

	if (len < sizeof(p))
		return -1;
	memcpy(&p, b, sizeof(p));
	if (p.len != len)
		return -2;
	for (i = sizeof(p); i < len; i++) {
		if (b[i] != (uint8_t)(p.seq * 7 + i + p.conn))
			return -3;
		sum += b[i];
	}
	if (sum != p.sum)
		return -4;
	*conn = p.conn;
	*seq = p.seq;
	return 0;
}

/* --- the server: echoes everything ------------------------------------------------------ */

static atomic_uint srv_up, srv_down;
static atomic_ulong srv_msgs;
static atomic_int srv_delay_us;	/* slow handler: backpressure tests */
/* Engines of the running test, for the diagnostics of a failure. */
static struct pc_engine *diag_engines[2];
static atomic_bool srv_peer_dies; /* a peer is killed: its last echoes may fail */
static uint32_t srv_rx_bufs;	/* the next server_start()'s rx_bufs (0: the default) */

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	if (ev == PC_CONN_UP)
		atomic_fetch_add(&srv_up, 1);
	else
		atomic_fetch_add(&srv_down, 1);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	int d = atomic_load(&srv_delay_us);
	int rc;

	(void)arg;
	if (d)
		usleep((useconds_t)d);
	atomic_fetch_add(&srv_msgs, 1);
	/* echo in place: the request's buffer carries the answer */
	rc = m->type == PC_MSG_REQUEST ? pc_reply(m) : pc_send(m);
	/*
	 * A message received just before its peer died may meet a closing
	 * conn: pc_send() then releases it and says so. Anything else fails.
	 */
	if (!(rc == -ENOTCONN && atomic_load(&srv_peer_dies)))
		ck_assert_int_eq(rc, 0);
}

static struct pc_engine *server_start(unsigned int workers, uint16_t *port)
{
	struct pc_engine_params p = {
		.size = sizeof(p),
		.workers_per_device = workers,
		.rx_bufs = srv_rx_bufs,
		.on_conn = srv_on_conn,
		.on_msg = srv_on_msg,
		.no_numa = true,
	};
	struct pc_engine *e;

	atomic_store(&srv_up, 0);
	atomic_store(&srv_down, 0);
	atomic_store(&srv_msgs, 0);
	atomic_store(&srv_delay_us, 0);
	atomic_store(&srv_peer_dies, false);
	e = pc_engine_create(&p);
	ck_assert_msg(e, "server: %s", pc_last_error());
	diag_engines[0] = e;
	ck_assert_msg(pc_listen(e, addr(), 0) == 0, "listen: %s", pc_last_error());
	*port = pc_listen_port(e);
	ck_assert_uint_ne(*port, 0);
	return e;
}

/* --- the client: counts and checks what comes back ----------------------------------------- */

struct cli_conn {
	struct pc_conn *conn;
	uint32_t id;
	atomic_uint next_expected;
	atomic_uint received;
	atomic_uint bad;
	atomic_uint down;
	atomic_uint expect_rpc;
	uint64_t last_req_id;	/* the thread that receives its messages only */
};

static struct cli_conn cc[MAXC];

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct cli_conn *x = pc_conn_user(c);

	(void)arg;
	if (ev == PC_CONN_DOWN && x)
		atomic_store(&x->down, 1);
}

/* On the client's worker (handler mode) or an app thread (ring mode). */
static void cli_check(struct pc_msg *m)
{
	struct cli_conn *x = pc_conn_user(m->conn);
	uint32_t conn = 0, seq = 0;

	if (check(m->data, m->len, &conn, &seq) || conn != x->id ||
	    seq != atomic_load(&x->next_expected))
		atomic_fetch_add(&x->bad, 1);
	/* a connection's responses come in order, and pc_call()'s ids grow per calling thread */
	if (m->type == PC_MSG_RESPONSE) {
		if (!m->req_id || m->req_id <= x->last_req_id)
			atomic_fetch_add(&x->bad, 1);
		x->last_req_id = m->req_id;
	}
	if (atomic_load(&x->expect_rpc) && m->type != PC_MSG_RESPONSE)
		atomic_fetch_add(&x->bad, 1);
	atomic_store(&x->next_expected, seq + 1);
	atomic_fetch_add(&x->received, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	cli_check(m);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

/* the next client_start()'s max_inline (0: the default) */
static uint32_t cli_max_inline;

static struct pc_engine *client_start(enum pc_handoff mode, unsigned int workers,
				      unsigned int app_threads)
{
	struct pc_engine_params p = {
		.size = sizeof(p),
		.max_inline = cli_max_inline,
		.workers_per_device = workers,
		.handoff = mode,
		.app_threads = app_threads,
		.on_conn = cli_on_conn,
		.on_msg = mode == PC_HANDOFF_HANDLER ? cli_on_msg : NULL,
		.no_numa = true,
	};
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "client: %s", pc_last_error());
	diag_engines[1] = e;
	/* the previous test's handles (pc_connect()'s references) */
	for (unsigned int i = 0; i < MAXC; i++)
		pc_conn_put(cc[i].conn);
	memset(cc, 0, sizeof(cc));
	return e;
}

static void client_connect(struct pc_engine *e, uint16_t port, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		cc[i].id = i;
		cc[i].conn = pc_connect(e, addr(), port, -1, 10000, &cc[i]);
		ck_assert_msg(cc[i].conn, "connect %u: %s", i, pc_last_error());
	}
}

/* A listening server and a client (main thread on slot 0) with @n connections. */
static void pair_start(const struct pc_engine_params *sp, const struct pc_engine_params *cp,
		       unsigned int n, struct pc_engine **srv, struct pc_engine **cli)
{
	*srv = pc_engine_create(sp);
	ck_assert_msg(*srv, "server: %s", pc_last_error());
	diag_engines[0] = *srv;
	ck_assert_int_eq(pc_listen(*srv, addr(), 0), 0);
	*cli = pc_engine_create(cp);
	ck_assert_msg(*cli, "client: %s", pc_last_error());
	diag_engines[1] = *cli;
	memset(cc, 0, sizeof(cc));
	ck_assert_int_eq(pc_app_attach(*cli, 0), 0);
	client_connect(*cli, pc_listen_port(*srv), n);
}

static void diag_conn(struct pc_conn *c, void *arg)
{
	struct pc_conn_info in;

	pc_conn_info(c, &in);
	fprintf(stderr,
		"  %s %s qp 0x%x w%d: sent %lu recv %lu backlog %u credit_stalls %lu sq_stalls %lu "
		"held %u\n",
		(const char *)arg, in.device, in.qp_num, in.worker, (unsigned long)in.msgs_sent,
		(unsigned long)in.msgs_recv, in.backlog, (unsigned long)in.credit_stalls,
		(unsigned long)in.sq_stalls, in.held);
}

static void diag_reset(void)
{
	diag_engines[0] = diag_engines[1] = NULL;
}

/* Prints every worker and connection of the test's engines (on a failure). */
static void diag_dump(void)
{
	static const char *const who[] = { "server", "client" };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		if (!diag_engines[i])
			continue;
		pc_engine_print_stats(diag_engines[i], stderr);
		pc_engine_for_each_conn(diag_engines[i], diag_conn, (void *)who[i]);
	}
	/* time to attach a debugger to the stuck engines */
	if (getenv("PC_TEST_DIAG_PAUSE"))
		sleep((unsigned int)atoi(getenv("PC_TEST_DIAG_PAUSE")));
}

/* Sends @count messages of @size on connection @i, retrying on backpressure. */
static void send_seq(unsigned int i, uint32_t count, uint32_t size, bool rpc)
{
	uint64_t end = now_ms() + 120000;
	uint32_t seq;

	for (seq = 0; seq < count; seq++) {
		struct pc_msg *m;
		int ret;

		while (!(m = pc_msg_alloc(cc[i].conn))) {
			ck_assert_int_eq(errno, ENOBUFS);
			if (now_ms() > end) {
				diag_dump();
				ck_abort_msg("conn %u: no send buffer for 120 s at seq %u", i, seq);
			}
			usleep(50);
		}
		/* the deadline is on progress, not on the whole sequence */
		end = now_ms() + 120000;
		m->len = fill(m->data, size, i, seq);
		do {
			ret = rpc ? pc_call(m, NULL, NULL, 0, NULL) : pc_send(m);
			if (ret)
				usleep(50);
		} while ((ret == -ENOBUFS || ret == -EAGAIN) && now_ms() < end);
		if (ret)
			diag_dump();
		ck_assert_int_eq(ret, 0);
	}
}

static void wait_received(unsigned int nconns, uint32_t count, int timeout_s)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;
	unsigned int i;

	for (i = 0; i < nconns; i++) {
		while (atomic_load(&cc[i].received) < count && now_ms() < end)
			usleep(1000);
		if (atomic_load(&cc[i].received) != count)
			diag_dump();
		ck_assert_msg(atomic_load(&cc[i].received) == count,
			      "conn %u: received %u of %u", i, atomic_load(&cc[i].received), count);
		ck_assert_uint_eq(atomic_load(&cc[i].bad), 0);
	}
}

/* --- tests ------------------------------------------------------------------------------- */

/* connect_echo's messages: its claims are exact counts, not volume */
#define ECHO_N PC_TEST_SAN(1000u, 200u)

static void connect_echo(void)
{
	uint16_t port;
	struct pc_engine *srv = server_start(1, &port);
	struct pc_engine *cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	struct pc_conn_info info;
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 1);
	pc_conn_info(cc[0].conn, &info);
	ck_assert_str_eq(info.device, pc_test_device());
	ck_assert(!info.raw);
	send_seq(0, ECHO_N, 64, false);
	wait_received(1, ECHO_N, 60);
	ck_assert_uint_eq(atomic_load(&srv_msgs), ECHO_N);
	pc_conn_info(cc[0].conn, &info);
	ck_assert_uint_eq(info.msgs_sent, ECHO_N);
	ck_assert_uint_eq(info.msgs_recv, ECHO_N);
	/*
	 * The CQ is created single-threaded where the provider takes the flag,
	 * and still polled with ibv_poll_cq(): exactly the completions posted,
	 * none unmatched (rxe's extended polling made up thousands).
	 */
	ck_assert_int_eq(pc_engine_stats(srv, 0, &st), 0);
	printf("server worker: CQ single-threaded %u, thread domain %u\n", st.cq_single_threaded,
	       st.thread_domain);
	ck_assert_uint_eq(st.rx_msgs, ECHO_N);
	ck_assert_uint_eq(st.tx_msgs, ECHO_N);
	ck_assert_uint_eq(st.stray_completions, 0);
	ck_assert_uint_eq(st.wc_errors, 0);
	if (strncmp(pc_test_device(), "rxe", 3) == 0)
		ck_assert_uint_eq(st.cq_single_threaded, 1);
	pc_engine_print_stats(srv, stdout);
	pc_engine_print_stats(cli, stdout);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}

START_TEST(test_connect_echo)
{
	connect_echo();
}
END_TEST

/*
 * A refused connect and a timed-out one fail with exact errors, and the
 * engine still connects afterwards. The timeout is enforced by the control
 * thread (the address below never answers: the dummy netdev drops all).
 */
START_TEST(test_connect_failures)
{
	struct pc_engine *srv, *cli;
	uint64_t t0, ms;
	uint16_t port;

	srv = server_start(1, &port);
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);

	errno = 0;
	ck_assert_ptr_null(pc_connect(cli, addr(), (uint16_t)(port ^ 1), -1, 10000, NULL));
	ck_assert_int_eq(errno, ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), pc_test_device()));

	errno = 0;
	t0 = now_ms();
	ck_assert_ptr_null(pc_connect(cli, pc_test_dead_addr(), port, -1, 300, NULL));
	ms = now_ms() - t0;
	ck_assert_int_eq(errno, ETIMEDOUT);
	/* the message proves pollcore's deadline fired (not rdma_cm's); no upper time bound */
	ck_assert_msg(strstr(pc_last_error(), "within 300 ms"), "%s", pc_last_error());
	ck_assert_msg(ms >= 300, "timed out after %llu ms", (unsigned long long)ms);

	client_connect(cli, port, 1);
	send_seq(0, 100, 64, false);
	wait_received(1, 100, 60);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* Bad configuration is refused with exact errors and a message that names it. */
START_TEST(test_create_errors)
{
	const char *nodev[] = { "nosuchdev9", NULL };
	struct pc_engine_params p = {
	    .size = sizeof(p), .devices = nodev, .on_msg = cli_on_msg, .no_numa = true};

	errno = 0;
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "nosuchdev9"));

	p = (struct pc_engine_params){.size = sizeof(struct pc_engine_params),
				      .window = 512,
				      .rx_bufs = 256,
				      .on_msg = cli_on_msg};
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "window 512"));

	p = (struct pc_engine_params){.size = sizeof(struct pc_engine_params),
				      .grant_delay_us = 10000001,
				      .on_msg = cli_on_msg,
				      .no_numa = true};
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "grant_delay_us 10000001"));

	p = (struct pc_engine_params){.size = sizeof(struct pc_engine_params),
				      .no_numa = true}; /* handler mode without a handler */
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* The same, posting through ibv_qp_ex / ibv_wr_* (the mlx5 path; works on rxe too). */
START_TEST(test_connect_echo_wr_ex)
{
	setenv("PC_POST_WR_EX", "1", 1);
	connect_echo();
	unsetenv("PC_POST_WR_EX");
}
END_TEST

static atomic_uint inline_logged;

static void inline_sink(enum pc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (strstr(msg, "refuses 65536 bytes inline (max_inline); its QPs ask for "))
		atomic_fetch_add(&inline_logged, 1);
	fprintf(stderr, "pollcore %d: %s\n", (int)level, msg);
}

/*
 * max_inline beyond what any device takes inline: the client's worker
 * finds, once at its start, a size the device takes (logged once), and
 * its connection comes up and carries messages byte for byte both ways,
 * small ones inline and full-size ones not. Asking every connection's QP
 * for 65,536 bytes would have refused them all (EINVAL).
 */
START_TEST(test_inline_beyond_device)
{
	struct pc_engine *srv, *cli;
	uint16_t port;

	srv = server_start(1, &port);
	atomic_store(&inline_logged, 0);
	pc_log_set_sink(inline_sink, NULL);
	cli_max_inline = 65536;
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	cli_max_inline = 0;
	pc_log_set_sink(NULL, NULL);
	ck_assert_uint_eq(atomic_load(&inline_logged), 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 1);
	send_seq(0, 200, 64, false);
	wait_received(1, 200, 60);
	/* a second sequence from 0 */
	atomic_store(&cc[0].next_expected, 0);
	send_seq(0, 200, 4096, false);	/* msg_size's default */
	wait_received(1, 400, 60);
	ck_assert_uint_eq(atomic_load(&srv_msgs), 400);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

struct sender {
	pthread_t t;
	struct pc_engine *e;
	unsigned int conn;
	uint32_t count, size;
};

static void *sender_main(void *arg)
{
	struct sender *x = arg;

	/* slot 0 is the main thread's; taking it again is refused */
	ck_assert_int_eq(pc_app_attach(x->e, 0), -EBUSY);
	ck_assert_int_eq(pc_app_attach(x->e, x->conn + 1), 0);
	send_seq(x->conn, x->count, x->size, false);
	return NULL;
}

/*
 * 20,000 messages (2,000 in sanitizer builds) over 4 connections through the
 * SRQ: the server has 2 workers (2 QPs each, least-loaded placement), the
 * client 1 worker with all 4 QPs, fed by 4 application threads at once.
 * Either count cycles every connection's window (64) and the SRQ many times
 * over (the sanitized builds' server posts 256 receive buffers, not 1,024:
 * 1,000 messages a worker still cycle it four times) and stays far from the
 * 16-bit grant's wrap (test_wire covers that); PC_TEST_SEQ_PER_CONN=N sends
 * N per connection instead (a longer soak).
 */
START_TEST(test_seq_two_workers)
{
	const uint32_t per = (uint32_t)atoi(pc_test_env("PC_TEST_SEQ_PER_CONN",
							 PC_TEST_SAN("5000", "500")));
	struct pc_conn_info info[4];
	struct pc_worker_stats ws;
	struct pc_engine *srv, *cli;
	struct sender snd[4];
	uint64_t t0, total = 0;
	unsigned int i;
	uint16_t port;

	ck_assert_uint_gt(per, 0);
	srv_rx_bufs = PC_TEST_SAN(0, 256);
	srv = server_start(2, &port);
	srv_rx_bufs = 0;
	cli = client_start(PC_HANDOFF_HANDLER, 1, 5);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 4);
	t0 = now_ms();
	/* four application threads submit concurrently (MPSC rings, handler mode) */
	for (i = 0; i < 4; i++) {
		snd[i] = (struct sender){ .e = cli, .conn = i, .count = per, .size = 32 + i * 40 };
		ck_assert_int_eq(pthread_create(&snd[i].t, NULL, sender_main, &snd[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(snd[i].t, NULL);
	wait_received(4, per, 600);
	for (i = 0; i < 4; i++) {
		pc_conn_info(cc[i].conn, &info[i]);
		ck_assert_uint_eq(info[i].msgs_sent, per);
		ck_assert_uint_eq(info[i].msgs_recv, per);
	}
	ck_assert_uint_eq(atomic_load(&srv_msgs), 4 * per);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pc_engine_stats(srv, i, &ws), 0);
		ck_assert_uint_eq(ws.conns, 2);
		ck_assert_uint_eq(ws.wc_errors, 0);
		total += ws.rx_msgs;
	}
	ck_assert_uint_eq(total, 4 * per);
	printf("seq_two_workers: %u messages echoed in %llu ms\n", 4 * per,
	       (unsigned long long)(now_ms() - t0));
	pc_engine_print_stats(srv, stdout);
	pc_engine_print_stats(cli, stdout);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

static int choose_last(const char *device, unsigned int nworkers, void *arg)
{
	(void)arg;
	ck_assert_str_eq(device, pc_test_device());
	return (int)nworkers - 1;
}

static void on_worker(struct pc_conn *c, void *arg)
{
	struct pc_conn_info info;

	int *want_count = arg;

	/* runs on this thread, inside the walk */
	pc_conn_info(c, &info);
	if (info.worker == want_count[0])
		want_count[1]++;
}

/* Request/response with ids and a window of requests in flight. */
START_TEST(test_rpc)
{
	const uint32_t n = PC_TEST_SAN(3000, 600);	/* requests per connection */
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.workers_per_device = 2, .choose_worker = choose_last,
		.on_conn = srv_on_conn, .on_msg = srv_on_msg, .no_numa = true,
	};
	struct pc_conn_info info;
	struct pc_worker_stats st;
	struct pc_engine *srv, *cli;
	int count[2] = { 1, 0 };
	uint16_t port;
	unsigned int i;

	/* the application chooses the accepting worker: the last one */
	srv = pc_engine_create(&sp);
	ck_assert_ptr_nonnull(srv);
	ck_assert_int_eq(pc_listen(srv, addr(), 0), 0);
	port = pc_listen_port(srv);
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 2);
	for (i = 0; i < 2; i++)
		atomic_store(&cc[i].expect_rpc, 1);
	for (i = 0; i < 2; i++)
		send_seq(i, n, 100, true);
	wait_received(2, n, 300);
	for (i = 0; i < 2; i++) {
		pc_conn_info(cc[i].conn, &info);
		ck_assert_uint_eq(info.inflight_req, 0);
		ck_assert_uint_eq(info.msgs_recv, n);
	}
	/* both server connections sit on worker 1 */
	ck_assert_uint_eq(pc_engine_for_each_conn(srv, on_worker, count), 2);
	ck_assert_int_eq(count[1], 2);
	/*
	 * Grants ride on the responses (wire_hdr.grant): about one doorbell per
	 * request. One credit WRITE per request (the old path) would double it.
	 */
	ck_assert_int_eq(pc_engine_stats(srv, 1, &st), 0);
	printf("server worker: %llu requests, %llu doorbells, %llu grants piggybacked, "
	       "%llu credit WRITEs\n", (unsigned long long)st.rx_msgs,
	       (unsigned long long)st.doorbells, (unsigned long long)st.credit_piggybacks,
	       (unsigned long long)st.credit_writes);
	ck_assert_uint_eq(st.rx_msgs, 2 * n);
	ck_assert_uint_gt(st.credit_piggybacks, 0);
	ck_assert_uint_le(st.doorbells, 2 * n + 2 * n / 10);
	ck_assert_uint_le(st.credit_writes, 2 * n / 10);
	/*
	 * The client's requests (calls without a completion, 116 bytes inline)
	 * keep nothing in their buffers once posted: left unsignaled but for
	 * every signal_every-th (16), so the client polls about one completion
	 * per response, where a signaled request made it two.
	 */
	ck_assert_int_eq(pc_engine_stats(cli, 0, &st), 0);
	printf("client worker: %llu responses, %llu completions\n", (unsigned long long)st.rx_msgs,
	       (unsigned long long)st.completions);
	ck_assert_uint_eq(st.rx_msgs, 2 * n);
	ck_assert_uint_le(st.completions, 2 * n + 2 * n / 4);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* Peers with different windows and message sizes: each side honours the other's. */
START_TEST(test_peers_differ)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.msg_size = 1024, .on_conn = srv_on_conn, .on_msg = srv_on_msg, .no_numa = true,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.window = 200, .rx_bufs = 2048, .on_conn = cli_on_conn, .on_msg = cli_on_msg,
		.no_numa = true,
	};
	struct pc_engine *srv, *cli;
	struct pc_conn_info in;
	struct pc_msg *m;
	unsigned int i;

	pair_start(&sp, &cp, 2, &srv, &cli);
	/* each side sees the other's limits */
	pc_conn_info(cc[0].conn, &in);
	ck_assert_uint_eq(in.peer_max_msg, 1024);
	ck_assert_uint_eq(in.peer_window, PC_WINDOW_DEFAULT);
	/*
	 * 200 requests in flight allowed here, 64 credits granted by the server:
	 * either count runs far past both
	 */
	for (i = 0; i < 2; i++)
		atomic_store(&cc[i].expect_rpc, 1);
	for (i = 0; i < 2; i++)
		send_seq(i, PC_TEST_SAN(2000, 500), 200, true);
	wait_received(2, PC_TEST_SAN(2000, 500), 300);
	/* larger than the server accepts: refused at submit, still ours */
	m = pc_msg_alloc(cc[0].conn);
	ck_assert_ptr_nonnull(m);
	m->len = 2000;
	ck_assert_int_eq(pc_send(m), -EMSGSIZE);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "peer's maximum 1024"));
	m->len = 1024;
	ck_assert_int_eq(pc_msg_release(m), 0);
	ck_assert(!atomic_load(&cc[0].down));
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* --- one-sided operations ------------------------------------------------------------------- */

static struct pc_conn *srv_conn_last;

static void srv_on_conn_keep(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	if (ev == PC_CONN_UP)
		__atomic_store_n(&srv_conn_last, c, __ATOMIC_RELEASE);
	srv_on_conn(c, ev, arg);
}

struct my_op {
	struct pc_op op;
	atomic_int done;
	int status;
	char why[512];
};

static void op_done(struct pc_op *op, int status)
{
	struct my_op *o = pc_container_of(op, struct my_op, op);

	o->status = status;
	if (status)
		snprintf(o->why, sizeof(o->why), "%s", pc_last_error());
	atomic_store(&o->done, 1);
}

static int run_op(struct pc_conn *c, struct my_op *o)
{
	uint64_t end = now_ms() + 20000;

	atomic_store(&o->done, 0);
	o->op.done = op_done;
	ck_assert_int_eq(pc_rdma(c, &o->op), 0);
	while (!atomic_load(&o->done) && now_ms() < end)
		usleep(100);
	ck_assert_msg(atomic_load(&o->done), "operation never completed");
	return o->status;
}

START_TEST(test_rdma_write_read)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_conn = srv_on_conn_keep, .on_msg = srv_on_msg, .no_numa = true,
	};
	const size_t len = 256 * 1024;
	uint8_t *remote = aligned_alloc(4096, len), *src = aligned_alloc(4096, len);
	uint8_t *dst = aligned_alloc(4096, len);
	uint32_t rlkey, rrkey, slkey, srkey, dlkey, drkey;
	void *rmr, *smr, *dmr;
	struct pc_engine *srv, *cli;
	struct my_op o = { 0 };
	struct pc_conn *sc;
	uint64_t end;
	size_t i;

	atomic_store(&srv_up, 0);
	atomic_store(&srv_down, 0);
	srv_conn_last = NULL;
	srv = pc_engine_create(&sp);
	ck_assert_ptr_nonnull(srv);
	ck_assert_int_eq(pc_listen(srv, addr(), 0), 0);
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, pc_listen_port(srv), 2);
	end = now_ms() + 10000;
	while (atomic_load(&srv_up) < 2 && now_ms() < end)
		usleep(1000);
	sc = __atomic_load_n(&srv_conn_last, __ATOMIC_ACQUIRE);
	ck_assert_ptr_nonnull(sc);

	memset(remote, 0, len);
	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(dst, 0xee, len);
	/* the target grants remote access; the local buffers only what they need */
	rmr = pc_mem_reg(sc, remote, len,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			 &rlkey, &rrkey);
	smr = pc_mem_reg(cc[0].conn, src, len, 0, &slkey, &srkey);
	dmr = pc_mem_reg(cc[0].conn, dst, len, IBV_ACCESS_LOCAL_WRITE, &dlkey, &drkey);
	ck_assert(rmr && smr && dmr);

	o.op = (struct pc_op){ .code = PC_OP_WRITE, .local = src, .lkey = slkey, .len = (uint32_t)len,
			       .remote_addr = (uintptr_t)remote, .rkey = rrkey };
	ck_assert_int_eq(run_op(cc[0].conn, &o), 0);
	ck_assert_int_eq(memcmp(remote, src, len), 0);

	o.op = (struct pc_op){ .code = PC_OP_READ, .local = dst, .lkey = dlkey, .len = (uint32_t)len,
			       .remote_addr = (uintptr_t)remote, .rkey = rrkey };
	ck_assert_int_eq(run_op(cc[0].conn, &o), 0);
	ck_assert_int_eq(memcmp(dst, src, len), 0);

	/* a wrong rkey fails with an exact error naming device, QP and status... */
	o.op = (struct pc_op){ .code = PC_OP_WRITE, .local = src, .lkey = slkey, .len = 64,
			       .remote_addr = (uintptr_t)remote, .rkey = rrkey ^ 0x5a5a00 };
	ck_assert_int_eq(run_op(cc[1].conn, &o), -EIO);
	ck_assert_msg(strstr(o.why, pc_test_device()) && strstr(o.why, "qp 0x") &&
		      strstr(o.why, ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)) &&
		      strstr(o.why, "RDMA_WRITE"), "error: %s", o.why);
	/* ...closes that connection only... */
	end = now_ms() + 10000;
	while (!atomic_load(&cc[1].down) && now_ms() < end)
		usleep(1000);
	ck_assert(atomic_load(&cc[1].down));
	ck_assert(!atomic_load(&cc[0].down));
	/* ...and the other one carries on */
	send_seq(0, 500, 64, false);
	wait_received(1, 500, 60);

	pc_mem_dereg(dmr);
	pc_mem_dereg(smr);
	pc_mem_dereg(rmr);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	free(dst);
	free(src);
	free(remote);
}
END_TEST

/* --- ring mode ------------------------------------------------------------------------------- */

struct app_thread {
	pthread_t t;
	struct pc_engine *e;
	unsigned int slot;
	uint32_t count;
	int slow_us;
};

/* Sends one message if a buffer and ring room are there; never blocks. */
static bool try_send(unsigned int i, uint32_t seq, uint32_t size)
{
	struct pc_msg *m = pc_msg_alloc(cc[i].conn);
	int ret;

	if (!m) {
		ck_assert_int_eq(errno, ENOBUFS);
		return false;
	}
	m->len = fill(m->data, size, i, seq);
	while ((ret = pc_send(m)) == -ENOBUFS)
		usleep(10);
	ck_assert_int_eq(ret, 0);
	return true;
}

/* An application thread: sends on its connections and consumes their echoes. */
static void *app_main(void *arg)
{
	struct app_thread *a = arg;
	struct pc_msg *msgs[16];
	unsigned int i, n, mine[MAXC], nmine = 0, k;
	uint32_t sent[MAXC] = { 0 };
	struct pc_conn_info info;
	uint64_t end = now_ms() + 300000;
	uint32_t got = 0;

	ck_assert_int_eq(pc_app_attach(a->e, a->slot), 0);
	for (i = 0; i < MAXC && cc[i].conn; i++) {
		pc_conn_info(cc[i].conn, &info);
		if (info.app_slot == a->slot)
			mine[nmine++] = i;
	}
	ck_assert_uint_gt(nmine, 0);
	while (got < nmine * a->count && now_ms() < end) {
		for (k = 0; k < nmine; k++)
			while (sent[k] < a->count && try_send(mine[k], sent[k], 48))
				sent[k]++;
		n = pc_app_poll(a->e, msgs, a->slow_us ? 1 : 16);
		for (i = 0; i < n; i++) {
			if (a->slow_us)
				usleep((useconds_t)a->slow_us);
			cli_check(msgs[i]);
			while (pc_msg_release(msgs[i]) == -ENOBUFS)
				usleep(10);
		}
		got += n;
		if (!n)
			usleep(20);
	}
	return NULL;
}

START_TEST(test_ring_mode_slow_consumer)
{
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.handoff = PC_HANDOFF_RING, .app_threads = 3, .ring_size = 16,
		.on_conn = cli_on_conn, .no_numa = true,
	};
	/* the slow thread's ring (16) fills within its first window (64) */
	const uint32_t n = PC_TEST_SAN(2000, 500);
	struct app_thread at[3];
	struct pc_worker_stats ws, ss;
	struct pc_engine *srv, *cli;
	uint16_t port;
	unsigned int i;

	srv = server_start(1, &port);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "%s", pc_last_error());
	memset(cc, 0, sizeof(cc));
	client_connect(cli, port, 3);
	for (i = 0; i < 3; i++) {
		at[i] = (struct app_thread){ .e = cli, .slot = i, .count = n,
					     .slow_us = i == 2 ? 300 : 0 };
		ck_assert_int_eq(pthread_create(&at[i].t, NULL, app_main, &at[i]), 0);
	}
	for (i = 0; i < 3; i++)
		pthread_join(at[i].t, NULL);
	wait_received(3, n, 10);
	ck_assert_int_eq(pc_engine_stats(cli, 0, &ws), 0);
	ck_assert_int_eq(pc_engine_stats(srv, 0, &ss), 0);
	/* the slow thread's ring filled: held back, reported, not dropped */
	ck_assert_uint_gt(ws.handoff_full, 0);
	/* and it slowed the sender through credits */
	ck_assert_uint_gt(ss.credit_stalls + ws.credit_stalls, 0);
	ck_assert_uint_eq(ws.rx_msgs, 3 * n);
	ck_assert_uint_eq(ws.wc_errors + ss.wc_errors, 0);
	pc_engine_print_stats(cli, stdout);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* --- SRQ low watermark ------------------------------------------------------------------------ */

START_TEST(test_srq_limit_event)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.handoff = PC_HANDOFF_RING, .app_threads = 1, .rx_bufs = 64, .srq_depth = 64,
		.srq_watermark = 32, .window = 64, .no_numa = true,
		/* a buffer for each message: packed, 60 would take a few */
		.no_pack = true,
	};
	struct pc_msg *msgs[64];
	struct pc_worker_stats ws;
	struct pc_engine *srv, *cli;
	unsigned int got = 0, n, i;
	uint64_t end;

	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "%s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, addr(), 0), 0);
	ck_assert_int_eq(pc_app_attach(srv, 0), 0);
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, pc_listen_port(srv), 1);
	/* 60 messages land and the application holds them all: the SRQ runs low */
	send_seq(0, 60, 64, false);
	end = now_ms() + 20000;
	while (got < 60 && now_ms() < end) {
		n = pc_app_poll(srv, msgs + got, 64 - got);
		got += n;
		if (!n)
			usleep(1000);
	}
	ck_assert_uint_eq(got, 60);
	end = now_ms() + 10000;
	do {
		ck_assert_int_eq(pc_engine_stats(srv, 0, &ws), 0);
		if (ws.srq_limit_events)
			break;
		usleep(1000);
	} while (now_ms() < end);
	ck_assert_uint_eq(ws.srq_limit_events, 1);
	ck_assert_uint_eq(ws.rx_held, 60);
	ck_assert_uint_le(ws.srq_outstanding, 4);
	/* give them back as replies: refill, re-arm, and every echo arrives */
	for (i = 0; i < got; i++)
		ck_assert_int_eq(pc_send(msgs[i]), 0);
	wait_received(1, 60, 30);
	/* every buffer is back; the SRQ is refilled above its watermark (batching) */
	end = now_ms() + 10000;
	do {
		ck_assert_int_eq(pc_engine_stats(srv, 0, &ws), 0);
		usleep(1000);
	} while ((ws.srq_outstanding < 32 || ws.rx_held) && now_ms() < end);
	ck_assert_uint_ge(ws.srq_outstanding, 32);
	ck_assert_uint_eq(ws.rx_held, 0);
	ck_assert_uint_eq(ws.srq_limit_events, 1);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* --- hybrid idle ----------------------------------------------------------------------------- */

START_TEST(test_hybrid_idle)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_msg = srv_on_msg, .on_conn = srv_on_conn, .idle = PC_IDLE_HYBRID,
		.idle_spins = 200, .no_numa = true,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.on_msg = cli_on_msg, .on_conn = cli_on_conn, .idle = PC_IDLE_HYBRID,
		.idle_spins = 200, .no_numa = true,
	};
	const uint32_t n = PC_TEST_SAN(2000, 500);
	struct pc_worker_stats a, b;
	struct pc_engine *srv, *cli;

	pair_start(&sp, &cp, 1, &srv, &cli);
	a = pc_test_wait_sleep(srv, 0, 1, 50000001ull);
	ck_assert_uint_gt(a.sleeps, 0);
	ck_assert_uint_gt(a.sleep_ns, 50000000ull);
	/* traffic wakes both sides without losing anything */
	send_seq(0, n, 64, false);
	wait_received(1, n, 60);
	/* published after the traffic: a sleep ended since */
	b = pc_test_wait_sleep(srv, 0, pc_test_sleeps(srv, 0) + 1, 0);
	ck_assert_uint_gt(b.wakeups_cq, 0);
	ck_assert_uint_gt(b.sleeps, a.sleeps);
	b = pc_test_wait_sleep(cli, 0, pc_test_sleeps(cli, 0) + 1, 0);
	ck_assert_uint_gt(b.wakeups_submit + b.wakeups_cq, 0);
	ck_assert_uint_eq(atomic_load(&srv_msgs), n);
	pc_engine_print_stats(srv, stdout);
	pc_engine_print_stats(cli, stdout);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* --- a peer crashing mid-stream ----------------------------------------------------------------
 */

static void cli_on_msg_quiet(struct pc_msg *m, void *arg)
{
	(void)arg;
	pc_msg_release(m);
}

/* Runs in a separate process (re-executed): connects and streams until killed. */
static int crash_client(uint16_t port)
{
	struct pc_engine_params p = { .size = sizeof(p), .on_msg = cli_on_msg_quiet, .no_numa = true };
	struct pc_engine *cli = pc_engine_create(&p);
	struct pc_conn *c;
	uint32_t seq = 0;

	/* no ck_assert here: this process is not a Check test; its parent reports */
	if (!cli || pc_app_attach(cli, 0)) {
		fprintf(stderr, "crash-client: engine: %s\n", pc_last_error());
		return 1;
	}
	c = pc_connect(cli, addr(), port, -1, 60000, NULL);
	if (!c) {
		fprintf(stderr, "crash-client: connect: %s\n", pc_last_error());
		return 1;
	}
	for (;;) {
		struct pc_msg *m = pc_msg_alloc(c);

		if (!m) {
			usleep(50);
			continue;
		}
		m->len = fill(m->data, 64, 9, seq++);
		while (pc_send(m) == -ENOBUFS)
			usleep(50);
	}
}

START_TEST(test_peer_crash_midstream)
{
	const uint32_t n = PC_TEST_SAN(1000, 250);	/* messages per connection of ours */
	struct pc_engine *srv, *cli;
	char portbuf[8];
	uint16_t port;
	pid_t pid;
	uint64_t end;

	srv = server_start(1, &port);
	atomic_store(&srv_peer_dies, true);
	cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 2);
	snprintf(portbuf, sizeof(portbuf), "%u", port);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "test_engine", "crash-client", portbuf, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_gt(pid, 0);
	/*
	 * The crashing peer is streaming, then dies without a goodbye. A new
	 * process under TCG on a loaded host takes a while to start and
	 * connect: wait for it, or for its exit, which says why.
	 */
	end = now_ms() + 120000;
	while (atomic_load(&srv_up) < 3 && now_ms() < end) {
		int st;

		ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0,
			      "the crash client exited before connecting (status 0x%x)", st);
		usleep(1000);
	}
	ck_assert_uint_eq(atomic_load(&srv_up), 3);
	while (atomic_load(&srv_msgs) < 2 * n && now_ms() < end)
		usleep(1000);
	send_seq(0, n, 64, false);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	send_seq(1, n, 64, false);
	/* only its connection goes down; ours carry on, nothing lost */
	end = now_ms() + 30000;
	while (atomic_load(&srv_down) < 1 && now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&srv_down), 1);
	wait_received(2, n, 60);
	ck_assert(!atomic_load(&cc[0].down) && !atomic_load(&cc[1].down));
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("engine");

	pc_test_require_rdma();
	if (argc == 3 && !strcmp(argv[1], "crash-client"))
		return crash_client((uint16_t)atoi(argv[2]));
#define ADD(name) tcase_add_checked_fixture(PC_TEST_ADD(s, name, 1400), diag_reset, NULL)
	/* one case per test: CK_RUN_CASE=<name> runs one */
	ADD(create_errors);
	ADD(connect_failures);
	ADD(connect_echo);
	ADD(connect_echo_wr_ex);
	ADD(inline_beyond_device);
	ADD(seq_two_workers);
	ADD(rpc);
	ADD(peers_differ);
	ADD(rdma_write_read);
	ADD(ring_mode_slow_consumer);
	ADD(srq_limit_event);
	ADD(hybrid_idle);
	ADD(peer_crash_midstream);
	return pc_test_run(s);
}
