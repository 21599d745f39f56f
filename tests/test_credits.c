// SPDX-License-Identifier: MIT
/*
 * rdma suite: credits and scale on one worker (issue 12, items 1, 3, 4 and
 * the 1,000-connection scale). A pollcore server and, as peers, pollcore
 * clients or hand-written verbs peers in the same process, on the test
 * bed's address (pc_test.h). Each test states what it proves:
 *  - rnr_256: 256 connections (64 on a quarter of the buffers in sanitized
 *    builds) each send a full window at once while the server's application
 *    holds its buffers; the device sends no RNR NAK;
 *  - conns_1000: a one-worker server with default parameters accepts 1,000
 *    connections (100 in sanitized builds), each echoes one checked message;
 *  - admission: when even the minimum window cannot be granted, the
 *    connection is refused and the client is told why;
 *  - raw_flood: a raw peer flooding while the application holds its
 *    messages does not starve credited peers;
 *  - overrun_leak: peers that send beyond their credits are closed and
 *    leave no credit behind;
 *  - oversize: a payload of msg_size + 32 (which fits the rounded-up
 *    buffer) is refused and closes that connection only;
 *  - floor_held: a newcomer whose floor idle peers hold is refused, not
 *    admitted to stall;
 *  - grant_deadline: a grant that no message carries, to a peer that is
 *    not running low, still reaches it (GRANT_DELAY_NS, workers/dp_credit.h).
 */
#include <pollcore/engine.h>
#include <pollcore/verbs.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "pc_test.h"
#include "wire.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- the device's RNR counters ------------------------------------------------------- */

static uint64_t hw_counter(const char *name)
{
	char path[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/hw_counters/%s",
		 pc_test_device(), pc_test_port(), name);
	f = fopen(path, "r");
	ck_assert_msg(f, "cannot read %s", path);
	ck_assert_int_eq(fscanf(f, "%llu", &v), 1);
	fclose(f);
	return v;
}

/* --- log capture: the server's reasons ------------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[64 * 1024];
static size_t log_len;

static void log_sink(enum pc_log_level level, const char *msg, void *arg)
{
	size_t n = strlen(msg);

	(void)arg;
	if (level <= PC_LOG_WARN)
		fprintf(stderr, "pollcore: %s\n", msg);
	pthread_mutex_lock(&log_mu);
	if (log_len + n + 2 < sizeof(log_buf)) {
		memcpy(log_buf + log_len, msg, n);
		log_len += n;
		log_buf[log_len++] = '\n';
		log_buf[log_len] = 0;
	}
	pthread_mutex_unlock(&log_mu);
}

static void log_start(void)
{
	pthread_mutex_lock(&log_mu);
	log_len = 0;
	log_buf[0] = 0;
	pthread_mutex_unlock(&log_mu);
	pc_log_set_sink(log_sink, NULL);
}

static bool log_has(const char *a, const char *b)
{
	bool found = false;
	char *line, *save, *copy;

	pthread_mutex_lock(&log_mu);
	copy = strdup(log_buf);
	pthread_mutex_unlock(&log_mu);
	for (line = strtok_r(copy, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save))
		found = strstr(line, a) && (!b || strstr(line, b));
	free(copy);
	return found;
}

/* --- payloads: connection and sequence number, checked on the way back ------------------ */

static uint32_t fill(void *data, uint32_t len, uint32_t conn, uint32_t seq)
{
	uint8_t *b = data;
	uint32_t i;

	memcpy(b, &conn, 4);
	memcpy(b + 4, &seq, 4);
	for (i = 8; i < len; i++)
		b[i] = (uint8_t)(conn * 31 + seq * 7 + i);
	return len;
}

static bool check(const void *data, uint32_t len, uint32_t conn, uint32_t seq)
{
	const uint8_t *b = data;
	uint32_t c, s, i;

	if (len < 8)
		return false;
	memcpy(&c, b, 4);
	memcpy(&s, b + 4, 4);
	if (c != conn || s != seq)
		return false;
	for (i = 8; i < len; i++)
		if (b[i] != (uint8_t)(conn * 31 + seq * 7 + i))
			return false;
	return true;
}

/* --- the server --------------------------------------------------------------------------- */

/*
 * Ring mode: an application thread takes every message. Until hold_until
 * it keeps them (the SRQ runs dry), then answers each (pc_reply / pc_send
 * back). Raw peers' messages are kept until the end of the test.
 */
#define STASH_MAX 65536

static struct {
	struct pc_engine *e;
	pthread_t t;
	atomic_bool stop;
	atomic_ullong hold_until_ms;
	atomic_uint up, down;
	atomic_ulong credited_msgs, raw_msgs, echoed, oversize;
	atomic_uint raw_held;
	bool echo;	/* answer credited messages (else release them) */
	struct pc_msg *held[STASH_MAX];
	unsigned int nheld;
	atomic_uint held_now;	/* nheld, for other threads */
	struct pc_msg *raw[STASH_MAX];
	unsigned int nraw;
	uint32_t cap;
} srv;

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	atomic_fetch_add(ev == PC_CONN_UP ? &srv.up : &srv.down, 1);
}

static void srv_answer(struct pc_msg *m)
{
	int ret;

	if (!srv.echo) {
		while (pc_msg_release(m) == -ENOBUFS)
			usleep(10);
		return;
	}
	do {
		ret = m->type == PC_MSG_REQUEST ? pc_reply(m) : pc_send(m);
		if (ret == -ENOBUFS)
			usleep(10);
	} while (ret == -ENOBUFS);
	/* a peer may be gone: the message is then released by pollcore */
	if (ret == 0)
		atomic_fetch_add(&srv.echoed, 1);
	else
		ck_assert_int_eq(ret, -ENOTCONN);
}

static void *srv_app(void *arg)
{
	struct pc_msg *msgs[64];
	struct pc_conn_info ci;
	unsigned int n, i;

	(void)arg;
	ck_assert_int_eq(pc_app_attach(srv.e, 0), 0);
	while (!atomic_load(&srv.stop)) {
		bool hold = now_ms() < atomic_load(&srv.hold_until_ms);

		if (!hold && srv.nheld) {
			/* in the order received: per connection, answers come back in order */
			for (i = 0; i < srv.nheld; i++)
				srv_answer(srv.held[i]);
			srv.nheld = 0;
			atomic_store(&srv.held_now, 0);
		}
		n = pc_app_poll(srv.e, msgs, 64);
		for (i = 0; i < n; i++) {
			struct pc_msg *m = msgs[i];

			if (m->len > m->cap)
				atomic_fetch_add(&srv.oversize, 1);
			pc_conn_info(m->conn, &ci);
			if (ci.raw) {
				ck_assert_uint_lt(srv.nraw, STASH_MAX);
				srv.raw[srv.nraw++] = m;
				atomic_store(&srv.raw_held, srv.nraw);
				atomic_fetch_add(&srv.raw_msgs, 1);
				continue;
			}
			atomic_fetch_add(&srv.credited_msgs, 1);
			if (hold) {
				ck_assert_uint_lt(srv.nheld, STASH_MAX);
				srv.held[srv.nheld++] = m;
				atomic_store(&srv.held_now, srv.nheld);
			} else {
				srv_answer(m);
			}
		}
		if (!n)
			usleep(100);
	}
	for (i = 0; i < srv.nheld; i++)
		srv_answer(srv.held[i]);
	while (srv.nraw)
		while (pc_msg_release(srv.raw[--srv.nraw]) == -ENOBUFS)
			usleep(10);
	return NULL;
}

static uint16_t server_start(struct pc_engine_params *p, bool echo)
{
	memset(&srv, 0, sizeof(srv));
	srv.echo = echo;
	p->handoff = PC_HANDOFF_RING;
	p->app_threads = 1;
	p->on_conn = srv_on_conn;
	p->no_numa = true;
	srv.e = pc_engine_create(p);
	ck_assert_msg(srv.e, "server: %s", pc_last_error());
	srv.cap = p->msg_size ? p->msg_size : 4096;
	ck_assert_int_eq(pc_listen(srv.e, pc_test_addr(), 0), 0);
	ck_assert_int_eq(pthread_create(&srv.t, NULL, srv_app, NULL), 0);
	return pc_listen_port(srv.e);
}

static void server_stop(void)
{
	atomic_store(&srv.stop, true);
	pthread_join(srv.t, NULL);
	pc_engine_destroy(srv.e);
	srv.e = NULL;
}

/* --- pollcore clients: handler mode, responses checked in order ---------------------------- */

struct cli_conn {
	struct pc_conn *conn;
	uint32_t id;
	atomic_uint next;	/* next sequence number expected back */
	atomic_uint bad;
	atomic_uint down;
	uint64_t last_req_id;	/* the receiving thread's */
};

static struct cli_conn *cc;
static unsigned int ncc;

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct cli_conn *x = pc_conn_user(c);

	(void)arg;
	if (ev == PC_CONN_DOWN && x)
		atomic_store(&x->down, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct cli_conn *x = pc_conn_user(m->conn);
	uint32_t seq = atomic_load(&x->next);

	(void)arg;
	/* in order per connection; pc_call()'s ids grow per calling thread */
	if (!check(m->data, m->len, x->id, seq) ||
	    (m->type == PC_MSG_RESPONSE && m->req_id <= x->last_req_id))
		atomic_fetch_add(&x->bad, 1);
	if (m->type == PC_MSG_RESPONSE)
		x->last_req_id = m->req_id;
	atomic_store(&x->next, seq + 1);
	pc_msg_release(m);
}

static struct pc_engine *client_start(struct pc_engine_params *p, unsigned int n)
{
	struct pc_engine *e;

	p->on_conn = cli_on_conn;
	p->on_msg = cli_on_msg;
	p->no_numa = true;
	e = pc_engine_create(p);
	ck_assert_msg(e, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(e, 0), 0);
	/* the previous test's handles (pc_connect()'s references) */
	for (unsigned int i = 0; cc && i < ncc; i++)
		pc_conn_put(cc[i].conn);
	free(cc);
	cc = calloc(n, sizeof(*cc));
	ck_assert_ptr_nonnull(cc);
	ncc = n;
	return e;
}

static void client_connect(struct pc_engine *e, uint16_t port, unsigned int from, unsigned int to)
{
	unsigned int i;

	for (i = from; i < to; i++) {
		cc[i].id = i;
		cc[i].conn = pc_connect(e, pc_test_addr(), port, -1, 20000, &cc[i]);
		ck_assert_msg(cc[i].conn, "connect %u: %s", i, pc_last_error());
	}
}

/* Sends requests @from..@to-1 of every connection in [0, n), as calls, without waiting. */
static void send_calls(unsigned int n, uint32_t from, uint32_t to, uint32_t size)
{
	uint64_t end = now_ms() + 120000;
	unsigned int i;
	uint32_t seq;

	for (seq = from; seq < to; seq++)
		for (i = 0; i < n; i++) {
			struct pc_msg *m;
			int ret;

			while (!(m = pc_msg_alloc(cc[i].conn))) {
				ck_assert_int_eq(errno, ENOBUFS);
				ck_assert_msg(now_ms() < end, "conn %u: no send buffer", i);
				usleep(50);
			}
			m->len = fill(m->data, size, i, seq);
			while ((ret = pc_call(m, NULL, NULL, 0, NULL)) == -ENOBUFS || ret == -EAGAIN) {
				ck_assert_msg(now_ms() < end, "conn %u: cannot submit", i);
				usleep(50);
			}
			ck_assert_int_eq(ret, 0);
		}
}

/* Waits until every connection in [0, n) got @count answers; false on timeout. */
static bool wait_answers(unsigned int n, uint32_t count, int timeout_s)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;
	unsigned int i;

	for (i = 0; i < n; i++)
		while (atomic_load(&cc[i].next) < count)
			if (now_ms() > end)
				return false;
			else
				usleep(1000);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(atomic_load(&cc[i].next), count);
		ck_assert_uint_eq(atomic_load(&cc[i].bad), 0);
	}
	return true;
}

static void print_stats(const char *who, struct pc_engine *e)
{
	printf("%s: ", who);
	pc_engine_print_stats(e, stdout);
}

/* --- hand-written peers: verbs and rdma_cm only ------------------------------------------------
 */

/* pollcore's rdma_cm private data as this test writes it (layout of core/wire.h) */
struct hand_priv {
	uint32_t magic;
	uint32_t credits;
	uint64_t credit_addr;
	uint32_t credit_rkey;
	uint32_t max_msg;
	uint32_t window;
} __attribute__((packed));

#define HAND_SQ 128
#define HAND_RQ 64
#define HAND_BUF 8192

struct hand {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr, *cmr;
	uint8_t *buf;		/* HAND_SQ send buffers, then HAND_RQ receive buffers */
	volatile uint64_t *cw;	/* the server writes its cumulative grant here */
	struct hand_priv peer;
	bool raw;
	uint32_t posted;	/* sends not yet known complete */
};

static struct rdma_cm_event *hand_event(struct hand *h, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	ck_assert_int_eq(rdma_get_cm_event(h->ch, &ev), 0);
	ck_assert_msg(ev->event == want, "rdma_cm: got %s, want %s (status %d)",
		      rdma_event_str(ev->event), rdma_event_str(want), ev->status);
	return ev;
}

/* Connects a peer that speaks pollcore's protocol by hand (or none: @raw). */
static void hand_connect(struct hand *h, uint16_t port, bool raw)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct hand_priv me = { 0 };
	struct rdma_cm_event *ev;
	char sport[8];
	unsigned int i;

	memset(h, 0, sizeof(*h));
	h->raw = raw;
	snprintf(sport, sizeof(sport), "%u", port);
	ck_assert_int_eq(rdma_getaddrinfo(pc_test_addr(), sport, &hints, &res), 0);
	h->ch = rdma_create_event_channel();
	ck_assert_ptr_nonnull(h->ch);
	ck_assert_int_eq(rdma_create_id(h->ch, &h->id, h, RDMA_PS_TCP), 0);
	ck_assert_int_eq(rdma_resolve_addr(h->id, res->ai_src_addr, res->ai_dst_addr, 2000), 0);
	rdma_freeaddrinfo(res);
	rdma_ack_cm_event(hand_event(h, RDMA_CM_EVENT_ADDR_RESOLVED));
	ck_assert_int_eq(rdma_resolve_route(h->id, 2000), 0);
	rdma_ack_cm_event(hand_event(h, RDMA_CM_EVENT_ROUTE_RESOLVED));

	h->pd = ibv_alloc_pd(h->id->verbs);
	h->cq = ibv_create_cq(h->id->verbs, HAND_SQ + HAND_RQ + 8, NULL, NULL, 0);
	h->buf = aligned_alloc(4096, (size_t)(HAND_SQ + HAND_RQ) * HAND_BUF);
	h->cw = aligned_alloc(64, 64);
	ck_assert(h->pd && h->cq && h->buf && h->cw);
	memset((void *)h->cw, 0, 64);
	h->mr = ibv_reg_mr(h->pd, h->buf, (size_t)(HAND_SQ + HAND_RQ) * HAND_BUF,
			   IBV_ACCESS_LOCAL_WRITE);
	h->cmr = ibv_reg_mr(h->pd, (void *)h->cw, 16,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ck_assert(h->mr && h->cmr);
	qa.send_cq = qa.recv_cq = h->cq;
	qa.cap.max_send_wr = HAND_SQ;
	qa.cap.max_recv_wr = HAND_RQ;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	ck_assert_int_eq(rdma_create_qp(h->id, h->pd, &qa), 0);
	/* receives for whatever the server answers (we grant it HAND_RQ credits) */
	for (i = 0; i < HAND_RQ; i++) {
		struct ibv_sge sge = { (uintptr_t)(h->buf + (size_t)(HAND_SQ + i) * HAND_BUF),
				       HAND_BUF, h->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		ck_assert_int_eq(ibv_post_recv(h->id->qp, &wr, &bad), 0);
	}
	me = (struct hand_priv){ PC_CM_MAGIC, HAND_RQ, (uintptr_t)h->cw, h->cmr->rkey, HAND_BUF,
				 HAND_RQ };
	if (!raw) {
		cp.private_data = &me;
		cp.private_data_len = sizeof(me);
	}
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	ck_assert_int_eq(rdma_connect(h->id, &cp), 0);
	ev = hand_event(h, RDMA_CM_EVENT_ESTABLISHED);
	if (!raw) {
		ck_assert_uint_ge(ev->param.conn.private_data_len, 24);
		memcpy(&h->peer, ev->param.conn.private_data,
		       PC_MIN(sizeof(h->peer), (size_t)ev->param.conn.private_data_len));
		ck_assert_uint_eq(h->peer.magic, PC_CM_MAGIC);
	}
	rdma_ack_cm_event(ev);
}

/* The server's grant so far: in its private data, then in our credit word. */
static uint64_t hand_grant(struct hand *h)
{
	uint64_t w = __atomic_load_n(&h->cw[0], __ATOMIC_ACQUIRE);

	return w > h->peer.credits ? w : h->peer.credits;
}

/* Waits for the first grant (at least 1), up to 10 s, and returns it. */
static uint64_t hand_first_grant(struct hand *h)
{
	uint64_t end = now_ms() + 10000, g;

	while (!(g = hand_grant(h)) && now_ms() < end)
		usleep(1000);
	ck_assert_msg(g, "the server granted no credit within 10 s");
	return g;
}

/* Waits for a grant that stopped moving (at least 1), and returns it. */
static uint64_t hand_settled_grant(struct hand *h)
{
	uint64_t end = now_ms() + 10000, g = 0, last = ~0ull;

	while (now_ms() < end) {
		g = hand_grant(h);
		if (g && g == last)
			break;
		last = g;
		usleep(200000);
	}
	ck_assert_msg(g, "the server granted no credit within 10 s");
	return g;
}

/*
 * Posts @n messages in one chain, each with a pollcore header saying
 * @hdr_len and @payload bytes after it (raw peers: @payload bytes, no
 * header). Returns what ibv_post_send said.
 */
static int hand_send(struct hand *h, unsigned int n, uint32_t payload, uint32_t hdr_len)
{
	struct ibv_send_wr wr[HAND_SQ], *bad;
	struct ibv_sge sge[HAND_SQ];
	unsigned int i;

	ck_assert_uint_le(n, HAND_SQ);
	for (i = 0; i < n; i++) {
		uint8_t *b = h->buf + (size_t)i * HAND_BUF;
		uint32_t len = payload;

		if (!h->raw) {
			wire_hdr_fill((struct wire_hdr *)(void *)b, WIRE_ONEWAY, hdr_len, i, 0);
			len += WIRE_HDR_LEN;
		}
		ck_assert_uint_le(len, HAND_BUF);
		sge[i] = (struct ibv_sge){ (uintptr_t)b, len, h->mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = i, .next = i + 1 < n ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i], .num_sge = 1,
					      .opcode = IBV_WR_SEND,
					      .send_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0 };
	}
	h->posted += n;
	return ibv_post_send(h->id->qp, wr, &bad);
}

/* The status of the next send completion, or -1 after @ms. */
static int hand_wait_send(struct hand *h, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct ibv_wc wc;

	while (now_ms() < end) {
		int n = ibv_poll_cq(h->cq, 1, &wc);

		ck_assert_int_ge(n, 0);
		if (n && wc.wr_id < HAND_SQ)
			return (int)wc.status;
		if (!n)
			usleep(1000);
	}
	return -1;
}

static void hand_close(struct hand *h)
{
	rdma_disconnect(h->id);
	rdma_destroy_qp(h->id);
	ibv_dereg_mr(h->mr);
	ibv_dereg_mr(h->cmr);
	ibv_destroy_cq(h->cq);
	ibv_dealloc_pd(h->pd);
	rdma_destroy_id(h->id);
	rdma_destroy_event_channel(h->ch);
	free(h->buf);
	free((void *)h->cw);
}

/* pc_connect() returns when the client is up; the server's UP may come a little later. */
static void wait_up(unsigned int n)
{
	uint64_t end = now_ms() + 30000;

	while (atomic_load(&srv.up) < n && now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&srv.up), n);
}

static bool wait_down(unsigned int n, int timeout_s)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;

	while (atomic_load(&srv.down) < n && now_ms() < end)
		usleep(1000);
	return atomic_load(&srv.down) >= n;
}

/* --- tests ------------------------------------------------------------------------------------ */

/*
 * 256 connections on one server worker each send a full window (64
 * requests) at once, while the server's application holds every buffer for
 * two seconds. Credits must keep every peer within the receive buffers the
 * worker posted: rxe's send_rnr_err (RNR NAKs this device sent) and
 * rcvd_rnr_err stay where they were. Every request is answered, in order.
 * The sanitized builds keep the proportion, four credits a connection, at a
 * quarter of the scale: 64 connections on 256 receive buffers.
 */
START_TEST(test_rnr_256)
{
	const unsigned int n = PC_TEST_SAN(256, 64);
	const uint32_t window = 64, rx_bufs = 4 * n;
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 64, .rx_bufs = rx_bufs,
				       .max_conns_per_worker = 1024 };
	struct pc_engine_params cp = { .size = sizeof(cp), .msg_size = 64, .tx_bufs = 2 * n * 64 + 1024,
				       .max_conns_per_worker = 1024 };
	struct pc_worker_stats ws;
	uint64_t rnr_sent0, rnr_rcvd0, rnr_sent, rnr_rcvd, t0;
	struct pc_engine *cli;
	uint16_t port;

	port = server_start(&sp, true);
	cli = client_start(&cp, n);
	client_connect(cli, port, 0, n);
	wait_up(n);
	rnr_sent0 = hw_counter("send_rnr_err");
	rnr_rcvd0 = hw_counter("rcvd_rnr_err");
	atomic_store(&srv.hold_until_ms, now_ms() + 2000);
	t0 = now_ms();
	send_calls(n, 0, window, 64);
	if (!wait_answers(n, window, 300)) {
		print_stats("server", srv.e);
		print_stats("client", cli);
		ck_abort_msg("not every request was answered within 300 s");
	}
	rnr_sent = hw_counter("send_rnr_err") - rnr_sent0;
	rnr_rcvd = hw_counter("rcvd_rnr_err") - rnr_rcvd0;
	printf("rnr_256: %u requests answered in %llu ms; RNR NAKs sent %llu, received %llu\n",
	       n * window, (unsigned long long)(now_ms() - t0), (unsigned long long)rnr_sent,
	       (unsigned long long)rnr_rcvd);
	print_stats("server", srv.e);
	print_stats("client", cli);
	ck_assert_uint_eq(atomic_load(&srv.credited_msgs), n * window);
	ck_assert_uint_eq(atomic_load(&srv.echoed), n * window);
	ck_assert_int_eq(pc_engine_stats(srv.e, 0, &ws), 0);
	ck_assert_uint_eq(ws.rx_msgs, n * window);
	ck_assert_uint_eq(ws.wc_errors, 0);
	/* n connections share 4 n buffers: 4 credits each at most */
	ck_assert_uint_eq(ws.window, rx_bufs / n);
	ck_assert_uint_le(ws.credits_out, ws.srq_outstanding);
	ck_assert_msg(rnr_sent == 0 && rnr_rcvd == 0, "RNR NAKs: %llu sent, %llu received",
		      (unsigned long long)rnr_sent, (unsigned long long)rnr_rcvd);
	pc_engine_destroy(cli);
	server_stop();
}
END_TEST

static void read_rss_kb(long *kb)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*kb = -1;
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", kb) == 1)
			break;
	fclose(f);
}

/*
 * A one-worker server with default parameters accepts 1,000 connections
 * (from a one-worker client, defaults too); each echoes one checked
 * message. Prints the resident memory per connection (both ends of a
 * connection live in this process: the figure is per end).
 */
START_TEST(test_conns_1000)
{
	/* the sanitized builds run the suite again: the same paths, fewer of them */
	const unsigned int n = PC_TEST_SAN(1000, 100);
	struct pc_engine_params sp = { .size = sizeof(sp) };
	struct pc_engine_params cp = { .size = sizeof(cp) };
	struct pc_worker_stats ws;
	struct pc_engine *cli;
	long rss0, rss1;
	uint64_t t0;
	uint16_t port;

	pc_log_set_level(PC_LOG_WARN);
	port = server_start(&sp, true);
	cli = client_start(&cp, n);
	read_rss_kb(&rss0);
	t0 = now_ms();
	client_connect(cli, port, 0, n);
	read_rss_kb(&rss1);
	printf("conns_1000: %u connections in %llu ms; RSS +%ld kB, %.1f kB per connection end\n",
	       n, (unsigned long long)(now_ms() - t0), rss1 - rss0,
	       (double)(rss1 - rss0) / (2.0 * n));
	wait_up(n);
	send_calls(n, 0, 1, 256);
	ck_assert_msg(wait_answers(n, 1, 300), "not every connection answered within 300 s");
	ck_assert_int_eq(pc_engine_stats(srv.e, 0, &ws), 0);
	ck_assert_uint_eq(ws.conns, n);
	ck_assert_uint_eq(ws.rx_msgs, n);
	ck_assert_uint_eq(ws.wc_errors, 0);
	ck_assert_uint_eq(atomic_load(&srv.echoed), n);
	pc_engine_destroy(cli);
	server_stop();
	pc_log_set_level(PC_LOG_INFO);
}
END_TEST

/*
 * Admission: a worker with 16 receive buffers can guarantee the minimum
 * window (1 credit by default) to 16 connections; the 17th is refused,
 * the client learns it from the error, and the server's log names device,
 * port, worker and the numbers. The 16 admitted connections still work.
 */
START_TEST(test_admission)
{
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 64, .rx_bufs = 16, .window = 4 };
	struct pc_engine_params cp = { .size = sizeof(cp), .msg_size = 64 };
	struct pc_engine *cli;
	struct pc_conn *extra;
	uint16_t port;

	log_start();
	port = server_start(&sp, true);
	cli = client_start(&cp, 16);
	client_connect(cli, port, 0, 16);
	errno = 0;
	extra = pc_connect(cli, pc_test_addr(), port, -1, 20000, NULL);
	ck_assert_ptr_null(extra);
	ck_assert_int_eq(errno, ECONNREFUSED);
	printf("admission: client error: %s\n", pc_last_error());
	ck_assert_msg(strstr(pc_last_error(), "receive buffers"), "%s", pc_last_error());
	ck_assert_msg(log_has("refusing a connection", pc_test_device()), "%s", log_buf);
	ck_assert_msg(log_has("refusing a connection", "16 receive buffers"), "%s", log_buf);
	/* the admitted ones carry on */
	send_calls(16, 0, 20, 64);
	ck_assert_msg(wait_answers(16, 20, 120), "admitted connections stalled");
	wait_up(16);
	pc_engine_destroy(cli);
	server_stop();
	pc_log_set_sink(NULL, NULL);
}
END_TEST

/*
 * The floor is guaranteed (issue 21, fault 4). A worker of 16 receive
 * buffers, window 16: a hand-written peer earns its full window by
 * sending, then goes idle holding all 16 credits (nothing revokes them).
 * A newcomer must then either be refused (its floor cannot be reserved)
 * or, if admitted, have its message received: admitted with no credit,
 * its sends would stall until the idle peer sent again.
 */
START_TEST(test_floor_held)
{
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 64, .rx_bufs = 16, .window = 16 };
	struct pc_engine_params cp = { .size = sizeof(cp), .msg_size = 64 };
	struct pc_engine *cli;
	struct pc_conn *extra;
	struct hand h;
	uint64_t sent = 0, g = 0, end;
	unsigned long before;
	uint16_t port_floor;

	log_start();
	port_floor = server_start(&sp, false);
	hand_connect(&h, port_floor, false);
	/* spend every credit as it comes: each used earns one more, up to 16 */
	end = now_ms() + 20000;
	while (now_ms() < end) {
		g = hand_grant(&h);
		if (g - sent >= 16)
			break;
		if (g > sent) {
			unsigned int n = (unsigned int)PC_MIN(g - sent, (uint64_t)HAND_SQ);

			ck_assert_int_eq(hand_send(&h, n, 32, 32), 0);
			ck_assert_int_eq(hand_wait_send(&h, 5000), IBV_WC_SUCCESS);
			sent += n;
		}
		usleep(2000);
	}
	ck_assert_msg(g - sent == 16, "the idle peer holds %llu credits, not 16",
		      (unsigned long long)(g - sent));
	printf("floor_held: the idle peer holds 16 credits after sending %llu messages\n",
	       (unsigned long long)sent);
	cli = client_start(&cp, 1);
	before = atomic_load(&srv.credited_msgs);
	errno = 0;
	extra = pc_connect(cli, pc_test_addr(), port_floor, -1, 20000, &cc[0]);
	if (!extra) {
		printf("floor_held: newcomer refused: %s\n", pc_last_error());
		ck_assert_int_eq(errno, ECONNREFUSED);
		ck_assert_msg(strstr(pc_last_error(), "hold 16 of its 16 receive buffers"), "%s",
			      pc_last_error());
	} else {
		struct pc_msg *m;

		cc[0].conn = extra;
		m = pc_msg_alloc(extra);
		ck_assert_ptr_nonnull(m);
		m->len = fill(m->data, 64, 0, 0);
		ck_assert_int_eq(pc_send(m), 0);
		end = now_ms() + 3000;
		while (atomic_load(&srv.credited_msgs) == before && now_ms() < end)
			usleep(1000);
		ck_assert_msg(atomic_load(&srv.credited_msgs) > before,
			      "admitted while the idle peer held its floor: its message was not "
			      "received within 3 s");
	}
	/* once the idle peer has gone, the newcomer is admitted */
	hand_close(&h);
	ck_assert(wait_down(1, 30));
	if (!extra) {
		end = now_ms() + 10000;
		do
			extra = pc_connect(cli, pc_test_addr(), port_floor, -1, 20000, &cc[0]);
		while (!extra && now_ms() < end && !usleep(100000));
		ck_assert_msg(extra, "refused after the idle peer left: %s", pc_last_error());
		cc[0].conn = extra;
	}
	pc_engine_destroy(cli);
	server_stop();
	pc_log_set_sink(NULL, NULL);
}
END_TEST

/*
 * A raw peer (no pollcore private data) floods the server while the
 * server's application keeps all its messages. It must not take the
 * receive buffers credited peers were promised: 8 pollcore connections
 * each complete 200 requests (50 in sanitized builds) meanwhile, and the
 * raw peer holds no more than its own small receive queue.
 */
struct flood {
	pthread_t t;
	struct hand h;
	atomic_bool stop;
	atomic_uint posted;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	unsigned int inflight = 0;
	struct ibv_wc wc[16];

	while (!atomic_load(&f->stop)) {
		int n = ibv_poll_cq(f->h.cq, 16, wc);
		int i;

		for (i = 0; i < n; i++)
			if (wc[i].wr_id < HAND_SQ)
				inflight = 0; /* the chain's last WR is signaled */
		if (inflight == 0) {
			if (hand_send(&f->h, 32, 64, 0))
				break;
			inflight = 32;
			atomic_fetch_add(&f->posted, 32);
		} else {
			usleep(200);
		}
	}
	return NULL;
}

START_TEST(test_raw_flood)
{
	struct pc_engine_params sp = {
	    .size = sizeof(sp), .msg_size = 64, .rx_bufs = 256, .raw_bufs = 32};
	struct pc_engine_params cp = {.size = sizeof(cp), .msg_size = 64};
	const uint32_t reqs = PC_TEST_SAN(200, 50);
	struct pc_engine *cli;
	struct flood f = { 0 };
	uint64_t end;
	uint16_t port;

	port = server_start(&sp, true);
	hand_connect(&f.h, port, true);
	ck_assert_int_eq(pthread_create(&f.t, NULL, flood_main, &f), 0);
	/* the flood lands first and is kept */
	end = now_ms() + 30000;
	while (atomic_load(&srv.raw_held) < 16 && now_ms() < end)
		usleep(1000);
	ck_assert_uint_ge(atomic_load(&srv.raw_held), 16);
	usleep(500000);
	cli = client_start(&cp, 8);
	client_connect(cli, port, 0, 8);
	send_calls(8, 0, reqs, 64);
	if (!wait_answers(8, reqs, 60)) {
		print_stats("server", srv.e);
		ck_abort_msg("credited peers starved while a raw peer floods (raw held %u)",
			     atomic_load(&srv.raw_held));
	}
	printf("raw_flood: raw peer posted %u, server holds %u of them; 8 x %u requests answered\n",
	       atomic_load(&f.posted), atomic_load(&srv.raw_held), reqs);
	ck_assert_uint_le(atomic_load(&srv.raw_held), 64);
	atomic_store(&f.stop, true);
	pthread_join(f.t, NULL);
	pc_engine_destroy(cli);
	hand_close(&f.h);
	server_stop();
}
END_TEST

/*
 * Peers that send one message beyond their credits are closed, and leave
 * nothing behind: after 40 of them on a worker with 32 receive buffers, a
 * well-behaved peer still gets its credits back and completes 200
 * requests. (Before the fix each overrun leaked one credit of grant room
 * for good, and the 33rd stopped every grant on the worker.) A window of 1
 * makes the overrun certain: the server grants nothing more before the
 * application gives a buffer back, and it keeps them until the peer is
 * closed. The sanitized builds keep the proportion at a quarter: 10
 * overrunning peers on 8 receive buffers (each peer is a connect and a
 * close, the slow part there).
 */
START_TEST(test_overrun_leak)
{
	/* more overrunning peers than receive buffers: a leak of one each stops the worker */
	enum { RX = PC_TEST_SAN(32, 8), PEERS = RX + RX / 4 };
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 64, .rx_bufs = RX, .window = 1 };
	struct pc_engine_params cp = { .size = sizeof(cp), .msg_size = 64 };
	struct pc_worker_stats ws;
	struct pc_engine *cli;
	unsigned int i;
	uint16_t port;
	uint64_t end;

	port = server_start(&sp, true);
	for (i = 0; i < PEERS; i++) {
		struct hand h;
		uint64_t g;

		end = now_ms() + 10000;

		/* the server application keeps what this peer sends: no re-grants */
		atomic_store(&srv.hold_until_ms, now_ms() + 3600 * 1000);
		hand_connect(&h, port, false);
		/* window 1: the first grant is all there is, no need to watch it settle */
		g = hand_first_grant(&h);
		ck_assert_uint_eq(g, 1);
		ck_assert_int_eq(hand_send(&h, (unsigned int)g + 1, 32, 32), 0);
		/* the server closes it: our QP errors (or the chain completes first) */
		ck_assert_msg(wait_down(i + 1, 30), "overrun %u: the server did not close it", i);
		hand_close(&h);
		/* then gives it back, before the next peer */
		atomic_store(&srv.hold_until_ms, 0);
		while (atomic_load(&srv.held_now) && now_ms() < end)
			usleep(1000);
		ck_assert_uint_eq(atomic_load(&srv.held_now), 0);
	}
	cli = client_start(&cp, 1);
	client_connect(cli, port, 0, 1);
	send_calls(1, 0, 200, 64);
	if (!wait_answers(1, 200, 60)) {
		print_stats("server", srv.e);
		ck_abort_msg("a well-behaved peer stalls after %u overrunning ones (answers %u)",
			     (unsigned int)PEERS, atomic_load(&cc[0].next));
	}
	pc_engine_destroy(cli);
	/* every connection gone: not one credit is still counted out */
	ck_assert(wait_down(PEERS + 1, 30));
	/*
	 * The worker takes a connection off ws.conns after its on_conn(DOWN)
	 * returned (drain.c), so srv.down can be PEERS + 1 while conns is still 1:
	 * wait for the count itself.
	 */
	end = now_ms() + 30000;
	do
		ck_assert_int_eq(pc_engine_stats(srv.e, 0, &ws), 0);
	while (ws.conns && now_ms() < end && !usleep(1000));
	ck_assert_uint_eq(ws.conns, 0);
	ck_assert_uint_eq(ws.credits_out, 0);
	ck_assert_uint_eq(ws.window, 1);
	server_stop();
}
END_TEST

/*
 * A payload of msg_size + 32 bytes still fits the rounded-up receive
 * buffer, but it is more than the server accepts: the connection is closed
 * and no message longer than its capacity reaches the application; another
 * connection carries on.
 */
START_TEST(test_oversize)
{
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 4096 };
	struct pc_engine_params cp = { .size = sizeof(cp), .msg_size = 4096 };
	struct pc_engine *cli;
	struct hand h;
	int st;
	uint16_t port;

	port = server_start(&sp, true);
	cli = client_start(&cp, 1);
	client_connect(cli, port, 0, 1);
	hand_connect(&h, port, false);
	ck_assert_uint_eq(h.peer.max_msg, 4096);
	hand_settled_grant(&h);
	ck_assert_int_eq(hand_send(&h, 1, 4096 + 32, 4096 + 32), 0);
	st = hand_wait_send(&h, 20000);
	printf("oversize: the sender's completion: %s\n",
	       st < 0 ? "none" : ibv_wc_status_str((enum ibv_wc_status)st));
	ck_assert_msg(wait_down(1, 30), "the server did not close the connection");
	ck_assert_uint_eq(atomic_load(&srv.oversize), 0);
	ck_assert_uint_eq(atomic_load(&srv.down), 1);
	send_calls(1, 0, 50, 4096);
	ck_assert(wait_answers(1, 50, 60));
	hand_close(&h);
	pc_engine_destroy(cli);
	server_stop();
}
END_TEST

/* grant_deadline's server: handler mode, each message released on the worker at once */
static atomic_uint gd_msgs;

static void gd_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	atomic_fetch_add(&gd_msgs, 1);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

/*
 * One-way messages from a hand-written peer, one at a time, to a server
 * whose handler releases each on the worker: nothing goes back to carry
 * the server's grants, and nothing else makes the worker look at the
 * connection again. From the third message on, the peer still knows of at
 * least half of the window it has earned, so the new grant is not urgent:
 * it waits on the worker's grant-wait list for GRANT_DELAY_NS (1 ms) and
 * then goes as an RDMA WRITE. It must arrive after every message. Were the
 * deadline never seen, the grant would move only when the peer fell below
 * half, and the wait after the third message would time out (keepalive is
 * off: its probes would publish it within a second or two).
 */
START_TEST(test_grant_deadline)
{
	/* no keepalive: its probes write the credit word too (every second) */
	struct pc_engine_params sp = { .size = sizeof(sp), .msg_size = 64, .on_conn = srv_on_conn,
				       .on_msg = gd_on_msg, .no_numa = true,
				       .keepalive_ms = PC_KEEPALIVE_OFF };
	struct pc_worker_stats ws;
	struct hand h;
	uint64_t g, before, end;
	unsigned int k;

	memset(&srv, 0, sizeof(srv));
	atomic_store(&gd_msgs, 0);
	srv.e = pc_engine_create(&sp);
	ck_assert_msg(srv.e, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv.e, pc_test_addr(), 0), 0);
	hand_connect(&h, pc_listen_port(srv.e), false);
	wait_up(1);
	g = hand_settled_grant(&h);
	for (k = 1; k <= 40; k++) {
		before = hand_grant(&h);
		ck_assert_uint_gt(before, k - 1); /* a credit to send with */
		ck_assert_int_eq(hand_send(&h, 1, 32, 32), 0);
		ck_assert_int_eq(hand_wait_send(&h, 10000), IBV_WC_SUCCESS);
		end = now_ms() + 5000;
		while ((g = hand_grant(&h)) == before && now_ms() < end)
			usleep(100);
		ck_assert_msg(g > before, "message %u: the grant stayed at %llu for 5 s", k,
			      (unsigned long long)before);
	}
	ck_assert_int_eq(pc_engine_stats(srv.e, 0, &ws), 0);
	printf("grant_deadline: 40 messages, grant now %llu; credit WRITEs %llu, piggybacked %llu\n",
	       (unsigned long long)g, (unsigned long long)ws.credit_writes,
	       (unsigned long long)ws.credit_piggybacks);
	ck_assert_uint_eq(atomic_load(&gd_msgs), 40);
	ck_assert_uint_eq(ws.credit_piggybacks, 0);
	ck_assert_uint_ge(ws.credit_writes, 40);
	hand_close(&h);
	ck_assert(wait_down(1, 30));
	pc_engine_destroy(srv.e);
	srv.e = NULL;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("credits");

	pc_test_require_rdma();
#define ADD(name) PC_TEST_ADD(s, name, 900)
	/* one case per test: CK_RUN_CASE=<name> runs one */
	ADD(admission);
	ADD(floor_held);
	ADD(overrun_leak);
	ADD(oversize);
	ADD(grant_deadline);
	ADD(raw_flood);
	ADD(rnr_256);
	ADD(conns_1000);
	return pc_test_run(s);
}
