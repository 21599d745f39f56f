// SPDX-License-Identifier: MIT
/*
 * rdma suite: messages larger than msg_size, by rendezvous (workers/rndv.c).
 *  - sizes 1 B, msg_size, msg_size + 1, 64 KiB + 3, 1 MiB, 16 MiB, every
 *    byte compared: pc_send(), pc_call() with a completion (the response
 *    as large as the request), pc_reply() of a large response to a small
 *    request and of a small one in place of a large request; handler mode
 *    and ring mode;
 *  - a small pool: pc_msg_alloc_size() says -ENOBUFS, a receiver without
 *    room queues descriptors, and nothing is lost;
 *  - afterwards every block of both pools is back (large_used_kib 0);
 *  - hostile peers (case "hostile"), each closing only its own connection,
 *    saying so, while another connection on the same worker keeps working:
 *    a descriptor naming memory never bound (its READ fails), a DONE for a
 *    token never sent, too many descriptors unanswered, and a peer that
 *    takes descriptors and never answers (it holds no more than its share
 *    of the sender's pool, and the DONE deadline closes it).
 * The verbs-level facts it relies on are in test_rndv_mw.c.
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
#include <unistd.h>

#include "fault_peer.h"
#include "pattern.h"
#include "pc_test.h"

#define MSG_SIZE 4096u

static const uint32_t sizes[] = { 1, MSG_SIZE, MSG_SIZE + 1, 64 * 1024 + 3, 1 << 20, 16 << 20 };

static void fill(struct pc_msg *m, uint32_t len, uint8_t salt)
{
	pat_fill(m->data, len, salt);
	m->len = len;
}

static bool check(const struct pc_msg *m, uint32_t len, uint8_t salt)
{
	return m->len == len && pat_diff(m->data, len, len, salt) < 0;
}

/* --- the server: checks one-way messages, answers requests ----------------------------------- */

static atomic_uint srv_ok, srv_bad, srv_down, srv_requests;
static atomic_uint resp_len;	/* a request's response: this long (0: as long as the request) */
static atomic_bool srv_slow;	/* hold each one-way message a little (the receiver's pool fills) */

static void srv_handle(struct pc_msg *m)
{
	uint32_t want;
	struct pc_msg *r;
	int rc;

	if (m->type == PC_MSG_ONEWAY) {
		if (!check(m, m->len, 1))
			fprintf(stderr, "rndv server: a one-way message of %u bytes on %p, pattern off at %ld\n", m->len,
				(void *)m->conn, (long)pat_diff(m->data, m->len, m->len, 1));
		atomic_fetch_add(check(m, m->len, 1) ? &srv_ok : &srv_bad, 1);
		if (atomic_load(&srv_slow))
			usleep(5000);
		ck_assert_int_eq(pc_msg_release(m), 0);
		return;
	}
	ck_assert_int_eq(m->type, PC_MSG_REQUEST);
	atomic_fetch_add(&srv_requests, 1);
	if (!check(m, m->len, 1))
		fprintf(stderr, "rndv server: a request of %u bytes, pattern off at %ld\n", m->len,
			(long)pat_diff(m->data, m->len, m->len, 1));
	atomic_fetch_add(check(m, m->len, 1) ? &srv_ok : &srv_bad, 1);
	want = atomic_load(&resp_len);
	if (!want)
		want = m->len;
	if (want <= m->cap) {
		/* in place: for a large request with a small answer, header and payload apart */
		fill(m, want, 2);
		rc = pc_reply(m);
		ck_assert_msg(rc == 0, "reply in place: %d %s", rc, pc_last_error());
		return;
	}
	/* larger than the request: a response of its own */
	while (!(r = pc_msg_alloc_size(m->conn, want))) {
		ck_assert_msg(errno == ENOBUFS, "response of %u: %s", want, strerror(errno));
		usleep(100);
	}
	fill(r, want, 2);
	r->type = PC_MSG_RESPONSE;
	r->req_id = m->req_id;
	rc = pc_reply(r);
	ck_assert_msg(rc == 0, "reply: %d %s", rc, pc_last_error());
	ck_assert_int_eq(pc_msg_release(m), 0);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	srv_handle(m);
}

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	if (ev == PC_CONN_DOWN)
		atomic_fetch_add(&srv_down, 1);
}

/* --- the client ------------------------------------------------------------------------------- */

struct call {
	atomic_uint runs;
	atomic_int status;
	uint32_t resp;		/* the response's length */
	atomic_bool bytes_ok;
	struct pc_msg *kept;	/* call_done_keep(): the request given back */
};

static void call_done(struct pc_msg *m, int status, void *arg)
{
	struct call *k = arg;

	atomic_store(&k->bytes_ok, status == 0 && m->type == PC_MSG_RESPONSE &&
				   check(m, k->resp, 2));
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_store(&k->status, status);
	atomic_fetch_add(&k->runs, 1);
}

/* A failed call's request is kept (k->kept), for the test to use again. */
static void call_done_keep(struct pc_msg *m, int status, void *arg)
{
	struct call *k = arg;

	if (status) {
		k->kept = m;
	} else {
		atomic_store(&k->bytes_ok, m->type == PC_MSG_RESPONSE && check(m, k->resp, 2));
		ck_assert_int_eq(pc_msg_release(m), 0);
	}
	atomic_store(&k->status, status);
	atomic_fetch_add(&k->runs, 1);
}

static struct pc_engine *srv, *cli;
static struct pc_conn *conn;
static bool ring;

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	ck_abort_msg("a message of type %u reached the client's on_msg", m->type);
}

/* Why the client's connection closed, for a failed call's message ("" while up). */
static char cli_down_why[256];
static atomic_bool cli_down;

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	if (ev != PC_CONN_DOWN)
		return;
	snprintf(cli_down_why, sizeof(cli_down_why), "%s", pc_last_error());
	/* release: the reason before the flag */
	atomic_store(&cli_down, true);
}

/* After a call ended -ENOTCONN: the reason of the close, once DOWN has run (up to 10 s). */
static const char *cli_why(void)
{
	uint64_t end = pc_test_now_ms() + 10000;

	/* acquire: pairs with cli_on_conn()'s store */
	while (!atomic_load(&cli_down) && pc_test_now_ms() < end)
		usleep(1000);
	return atomic_load(&cli_down) ? cli_down_why : "(no DOWN within 10 s)";
}

static void start(enum pc_handoff mode, uint32_t cli_pool_mb, uint32_t srv_pool_mb,
		  uint32_t max_msg)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_conn = srv_on_conn, .on_msg = mode == PC_HANDOFF_HANDLER ? srv_on_msg : NULL,
		.handoff = mode, .no_numa = true, .msg_size = MSG_SIZE, .max_msg_size = max_msg,
		.large_pool_size = (uint64_t)srv_pool_mb << 20,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.no_numa = true, .handoff = mode, .msg_size = MSG_SIZE, .max_msg_size = max_msg,
		.on_msg = mode == PC_HANDOFF_HANDLER ? cli_on_msg : NULL, .on_conn = cli_on_conn,
		.large_pool_size = (uint64_t)cli_pool_mb << 20,
	};
	struct pc_conn_info in;

	ring = mode == PC_HANDOFF_RING;
	cli_down_why[0] = 0;
	atomic_store(&cli_down, false);
	atomic_store(&srv_ok, 0);
	atomic_store(&srv_bad, 0);
	atomic_store(&srv_down, 0);
	atomic_store(&srv_requests, 0);
	atomic_store(&resp_len, 0);
	atomic_store(&srv_slow, false);
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	if (ring)
		ck_assert_int_eq(pc_app_attach(srv, 0), 0);
	conn = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(conn, "connect: %s", pc_last_error());
	pc_conn_info(conn, &in);
	ck_assert_uint_eq(in.peer_max_large, max_msg ? max_msg : PC_MAX_MSG_DEFAULT);
}

/* Ring mode: the server's messages and the client's completions, on this thread. */
static void pump(void)
{
	struct pc_msg *msgs[16];
	int n, i;

	if (!ring)
		return;
	n = pc_app_poll(srv, msgs, 16);
	ck_assert_int_ge(n, 0);
	for (i = 0; i < n; i++)
		srv_handle(msgs[i]);
	ck_assert_int_ge(pc_app_poll(cli, msgs, 16), 0);
}

static uint32_t used_kib(struct pc_engine *e)
{
	struct pc_worker_stats st;
	uint32_t sum = 0;

	for (unsigned int i = 0; i < pc_engine_nworkers(e); i++) {
		ck_assert_int_eq(pc_engine_stats(e, i, &st), 0);
		sum += st.large_used_kib;
	}
	return sum;
}

static uint32_t waiting(struct pc_engine *e)
{
	struct pc_worker_stats st;
	uint32_t sum = 0;

	for (unsigned int i = 0; i < pc_engine_nworkers(e); i++) {
		ck_assert_int_eq(pc_engine_stats(e, i, &st), 0);
		sum += st.large_waiting;
	}
	return sum;
}

static uint64_t rndv_count(struct pc_engine *e, bool sent)
{
	struct pc_worker_stats st;
	uint64_t sum = 0;

	for (unsigned int i = 0; i < pc_engine_nworkers(e); i++) {
		ck_assert_int_eq(pc_engine_stats(e, i, &st), 0);
		sum += sent ? st.rndv_sent : st.rndv_recv;
	}
	return sum;
}

/* Every block of both pools is back (windows invalidated, buffers released). */
static void wait_pools_empty(void)
{
	uint64_t end = pc_test_now_ms() + 20000;

	while ((used_kib(cli) || used_kib(srv)) && pc_test_now_ms() < end) {
		pump();
		usleep(1000);
	}
	ck_assert_msg(!used_kib(cli) && !used_kib(srv), "large pools still in use: client %u KiB, "
		      "server %u KiB", used_kib(cli), used_kib(srv));
	ck_assert_uint_eq(waiting(cli) + waiting(srv), 0);
}

static void stop(void)
{
	struct pc_conn_info in;

	pc_conn_info(conn, &in);
	ck_assert_uint_eq(in.msgs_dropped, 0);
	ck_assert_uint_eq(atomic_load(&srv_down), 0);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(conn);
}

static struct pc_msg *alloc_retry(uint32_t len)
{
	uint64_t end = pc_test_now_ms() + 30000;
	struct pc_msg *m;

	while (!(m = pc_msg_alloc_size(conn, len))) {
		ck_assert_msg(errno == ENOBUFS, "alloc %u: %s", len, strerror(errno));
		ck_assert(pc_test_now_ms() < end);
		pump();
		usleep(100);
	}
	ck_assert_uint_ge(m->cap, len);
	return m;
}

static void wait_srv(unsigned int want)
{
	uint64_t end = pc_test_now_ms() + 60000;

	while (atomic_load(&srv_ok) + atomic_load(&srv_bad) < want && pc_test_now_ms() < end) {
		pump();
		usleep(200);
	}
	ck_assert_uint_eq(atomic_load(&srv_bad), 0);
	ck_assert_uint_eq(atomic_load(&srv_ok), want);
}

static void sends(enum pc_handoff mode)
{
	unsigned int i, n = PC_ARRAY_SIZE(sizes), large = 0;
	int rc;

	start(mode, 0, 0, 0);
	for (i = 0; i < n; i++) {
		struct pc_msg *m = alloc_retry(sizes[i]);

		fill(m, sizes[i], 1);
		while ((rc = pc_send(m)) == -ENOBUFS)
			pump();
		ck_assert_msg(rc == 0, "send %u: %d %s", sizes[i], rc, pc_last_error());
		large += sizes[i] > MSG_SIZE;
	}
	wait_srv(n);
	ck_assert_uint_eq(rndv_count(cli, true), large);
	ck_assert_uint_eq(rndv_count(srv, false), large);
	wait_pools_empty();
	stop();
}

START_TEST(test_send_handler)
{
	sends(PC_HANDOFF_HANDLER);
}
END_TEST

START_TEST(test_send_ring)
{
	sends(PC_HANDOFF_RING);
}
END_TEST

/* Both sides' counters, for a case that is stuck (stderr). */
static void dump_state(const char *what)
{
	struct pc_worker_stats st;
	struct pc_conn_info in;
	struct pc_engine *e[2] = { cli, srv };

	pc_conn_info(conn, &in);
	fprintf(stderr, "rndv: %s; client %s qp 0x%x: sent %llu recv %llu, %u requests in flight, "
		"backlog %u, %u held, credit stalls %llu, sq stalls %llu; server: %u requests seen, "
		"%u DOWN\n", what, in.device, in.qp_num, (unsigned long long)in.msgs_sent,
		(unsigned long long)in.msgs_recv, in.inflight_req, in.backlog, in.held,
		(unsigned long long)in.credit_stalls, (unsigned long long)in.sq_stalls,
		atomic_load(&srv_requests), atomic_load(&srv_down));
	for (unsigned int i = 0; i < 2; i++)
		if (pc_engine_stats(e[i], 0, &st) == 0)
			fprintf(stderr, "rndv: %s worker: rndv sent %llu recv %llu, large pool %u KiB used, "
				"%u descriptors waiting, sleeps %llu, wakeups cq %llu submit %llu, "
				"handoff full %llu\n", i ? "server" : "client",
				(unsigned long long)st.rndv_sent, (unsigned long long)st.rndv_recv,
				st.large_used_kib, st.large_waiting, (unsigned long long)st.sleeps,
				(unsigned long long)st.wakeups_cq, (unsigned long long)st.wakeups_submit,
				(unsigned long long)st.handoff_full);
}

/* One call of @req bytes answered with @resp bytes, its completion checked. */
static void one_call(uint32_t req, uint32_t resp)
{
	static struct call k;
	uint64_t t0 = pc_test_now_ms(), end = t0 + 60000;
	struct pc_msg *m = alloc_retry(req);
	int rc;

	memset(&k, 0, sizeof(k));
	k.resp = resp;
	atomic_store(&resp_len, resp);
	fill(m, req, 1);
	while ((rc = pc_call(m, call_done, &k, 60000000, NULL)) == -ENOBUFS || rc == -EAGAIN)
		pump();
	ck_assert_msg(rc == 0, "call %u/%u: %d %s", req, resp, rc, pc_last_error());
	while (!atomic_load(&k.runs) && pc_test_now_ms() < end) {
		pump();
		usleep(100);
	}
	if (!atomic_load(&k.runs)) {
		char what[96];

		snprintf(what, sizeof(what), "a call of %u bytes, answered with %u, never ended", req,
			 resp);
		dump_state(what);
	}
	ck_assert_uint_eq(atomic_load(&k.runs), 1);
	if (req + resp >= 2u << 20)
		printf("rndv: call %u -> %u bytes: %llu ms\n", req, resp,
		       (unsigned long long)(pc_test_now_ms() - t0));
	ck_assert_msg(atomic_load(&k.status) == 0, "call %u -> %u: %d (%s)%s%s", req, resp,
		      atomic_load(&k.status), strerror(-atomic_load(&k.status)),
		      atomic_load(&k.status) == -ENOTCONN ? "; the close: " : "",
		      atomic_load(&k.status) == -ENOTCONN ? cli_why() : "");
	ck_assert_msg(atomic_load(&k.bytes_ok), "call %u -> %u: response bytes differ", req, resp);
}

static void calls(enum pc_handoff mode)
{
	unsigned int i, n = PC_ARRAY_SIZE(sizes);

	start(mode, 0, 0, 0);
	/* the response as large as the request: in place */
	for (i = 0; i < n; i++)
		one_call(sizes[i], sizes[i]);
	/* a large response to a small request (pc_reply of a buffer of its own) */
	one_call(10, 1 << 20);
	one_call(MSG_SIZE, MSG_SIZE + 1);
	/* a small answer in place of a large request (header and payload apart) */
	one_call(1 << 20, 10);
	one_call(64 * 1024 + 3, 0 + 1);
	wait_srv(n + 4);
	wait_pools_empty();
	stop();
}

START_TEST(test_call_handler)
{
	calls(PC_HANDOFF_HANDLER);
}
END_TEST

/* RNDV_REPEAT=N in the environment runs it N times over: a stress for the pool's races. */
START_TEST(test_call_ring)
{
	int n = getenv("RNDV_REPEAT") ? atoi(getenv("RNDV_REPEAT")) : 1;

	for (int i = 0; i < n; i++)
		calls(PC_HANDOFF_RING);
}
END_TEST

/*
 * Per connection, messages come in order, large or small: small ones sent
 * right after a large one (which the receiver must READ first) are held
 * back until it is delivered. Ring mode; each message carries its index.
 */
START_TEST(test_order)
{
	static const uint32_t lens[] = { 64, 1 << 20, 64, 64, 300000, 64, 4096, 70000, 1 << 20 };
	enum { N = 45 };
	struct pc_msg *m, *got[16];
	unsigned int sent, next = 0, bad = 0;
	uint64_t end;
	uint32_t idx;
	int n, k, rc;

	start(PC_HANDOFF_RING, 0, 0, 0);
	for (sent = 0; sent < N; sent++) {
		uint32_t len = lens[sent % PC_ARRAY_SIZE(lens)];

		/* the pools hold all of them: nothing is taken on the other side meanwhile */
		m = pc_msg_alloc_size(conn, len);
		ck_assert_msg(m, "alloc %u: %s", len, pc_last_error());
		fill(m, len, 1);
		memcpy(m->data, &sent, sizeof(sent));
		while ((rc = pc_send(m)) == -ENOBUFS)
			usleep(100);
		ck_assert_msg(rc == 0, "send %u: %d %s", sent, rc, pc_last_error());
	}
	end = pc_test_now_ms() + 60000;
	while (next < N && pc_test_now_ms() < end) {
		n = pc_app_poll(srv, got, PC_ARRAY_SIZE(got));
		ck_assert_int_ge(n, 0);
		for (k = 0; k < n; k++, next++) {
			memcpy(&idx, got[k]->data, sizeof(idx));
			if (idx != next || got[k]->len != lens[idx % PC_ARRAY_SIZE(lens)])
				printf("order: message %u of %u bytes arrived as number %u\n", idx,
				       got[k]->len, next);
			bad += idx != next;
			ck_assert_int_eq(pc_msg_release(got[k]), 0);
		}
		if (!n)
			usleep(200);
	}
	ck_assert_uint_eq(next, N);
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(rndv_count(srv, false), N / PC_ARRAY_SIZE(lens) * 4);
	wait_pools_empty();
	stop();
}
END_TEST

/*
 * Both ways at once, more than WIRE_RNDV_MAX in flight each way: 200 calls
 * (80 in the sanitized builds: still more than the window) of about 100 KB,
 * up to the window (64) in flight, each answered in place (a large
 * response). Each side's sends wait for the other's DONEs, which must not
 * wait behind them.
 */
START_TEST(test_many_calls)
{
	enum { N = PC_TEST_SAN(200, 80) };
	static struct call k[N];
	uint64_t end;
	unsigned int i, done;
	int rc;

	start(PC_HANDOFF_HANDLER, 0, 0, 0);
	memset(k, 0, sizeof(k));
	for (i = 0; i < N; i++) {
		uint32_t len = 100000 + i;
		struct pc_msg *m = alloc_retry(len);

		k[i].resp = len;
		fill(m, len, 1);
		end = pc_test_now_ms() + 60000;
		while ((rc = pc_call(m, call_done, &k[i], 60000000, NULL)) == -ENOBUFS ||
		       rc == -EAGAIN) {
			ck_assert(pc_test_now_ms() < end);
			usleep(100);
		}
		ck_assert_msg(rc == 0, "call %u: %d %s", i, rc, pc_last_error());
	}
	end = pc_test_now_ms() + 120000;
	do {
		for (i = done = 0; i < N; i++)
			done += atomic_load(&k[i].runs) != 0;
		if (done == N)
			break;
		usleep(1000);
	} while (pc_test_now_ms() < end);
	for (i = 0; i < N; i++) {
		ck_assert_msg(atomic_load(&k[i].runs) == 1, "call %u ran %u times", i,
			      atomic_load(&k[i].runs));
		ck_assert_int_eq(atomic_load(&k[i].status), 0);
		ck_assert_msg(atomic_load(&k[i].bytes_ok), "call %u: response bytes differ", i);
	}
	wait_srv(N);
	ck_assert_uint_eq(rndv_count(cli, true), N);
	ck_assert_uint_eq(rndv_count(srv, true), N);
	wait_pools_empty();
	stop();
}
END_TEST

/*
 * A client pool of 2 MiB: two 1 MiB messages, then -ENOBUFS. A server pool
 * of 1 MiB, in ring mode, its application (this thread) taking its messages
 * only now and then: descriptors wait for room there. All of 24 messages
 * arrive intact, and both pools are empty afterwards.
 */
START_TEST(test_exhaustion)
{
	enum { N = 24 };
	struct pc_msg *a, *b;
	unsigned int i;
	uint32_t seen = 0;
	int rc;

	start(PC_HANDOFF_RING, 2, 1, 1 << 20);
	a = pc_msg_alloc_size(conn, 1 << 20);
	b = pc_msg_alloc_size(conn, 1 << 20);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_null(pc_msg_alloc_size(conn, 1 << 20));
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_ptr_null(pc_msg_alloc_size(conn, 64 * 1024 + 1));
	ck_assert_int_eq(errno, ENOBUFS);
	/* above the limit: never */
	ck_assert_ptr_null(pc_msg_alloc_size(conn, (1 << 20) + 1));
	ck_assert_int_eq(errno, EMSGSIZE);
	ck_assert_uint_eq(used_kib(cli), 2048);
	ck_assert_int_eq(pc_msg_release(b), 0);
	fill(a, 1 << 20, 1);
	ck_assert_int_eq(pc_send(a), 0);
	for (i = 1; i < N; i++) {
		uint32_t len = i % 3 ? 1 << 20 : 300000 + i;
		uint64_t end = pc_test_now_ms() + 30000;
		unsigned int spins = 0;
		struct pc_msg *m;

		/* backpressure: ENOBUFS until the server has read what came before */
		while (!(m = pc_msg_alloc_size(conn, len))) {
			ck_assert_int_eq(errno, ENOBUFS);
			ck_assert(pc_test_now_ms() < end);
			seen = PC_MAX(seen, waiting(srv));
			/* the server's application (this thread) takes its messages now and then */
			if (++spins % 64 == 0)
				pump();
			usleep(100);
		}

		fill(m, len, 1);
		while ((rc = pc_send(m)) == -ENOBUFS)
			usleep(100);
		ck_assert_int_eq(rc, 0);
		if (i == 1) {
			/*
			 * Nothing was taken yet: the first fills the server's pool,
			 * and this one's descriptor must wait for room there.
			 */
			while (!waiting(srv) && pc_test_now_ms() < end)
				usleep(1000);
			ck_assert_uint_gt(waiting(srv), 0);
		}
		seen = PC_MAX(seen, waiting(srv));
	}
	/* the server's pool (one 1 MiB block) held descriptors back meanwhile */
	{
		uint64_t end = pc_test_now_ms() + 60000;

		while (atomic_load(&srv_ok) + atomic_load(&srv_bad) < N && pc_test_now_ms() < end) {
			seen = PC_MAX(seen, waiting(srv));
			pump();
			usleep(200);
		}
		printf("exhaustion: the server had up to %u descriptors waiting for room\n", seen);
		ck_assert_uint_gt(seen, 0);
	}
	wait_srv(N);
	wait_pools_empty();
	stop();
}
END_TEST

/* Ring mode: the client's completions only (the server's application takes nothing). */
static void pump_cli(void)
{
	struct pc_msg *msgs[16];

	ck_assert_int_eq(pc_app_poll(cli, msgs, 16), 0);
}

/* Fills the server's pool (ring mode, not pumped): a one-way message of @len it keeps. */
static void fill_server_pool(uint32_t len)
{
	uint64_t end = pc_test_now_ms() + 30000;
	struct pc_msg *m = alloc_retry(len);

	fill(m, len, 1);
	ck_assert_int_eq(pc_send(m), 0);
	/* read there (its block held), and ours back (the DONE came) */
	while ((used_kib(srv) < len >> 10 || used_kib(cli)) && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_uint_ge(used_kib(srv), len >> 10);
	ck_assert_uint_eq(used_kib(cli), 0);
}

/*
 * A large call that ends (deadline) before the peer read it: its request
 * comes back only once the peer can no longer read it. The server's pool
 * is full, so the descriptor waits there; the client's deadline fires on
 * time, the server is asked to leave it unread, and the buffer comes back.
 * The client then writes other bytes into it and sends it on a second
 * connection: the server never sees the aborted request, and the second
 * message arrives intact. Nothing closes.
 */
START_TEST(test_call_ends_before_read)
{
	enum { LEN = 512 * 1024, DEADLINE_MS = 50 };
	static struct call k;
	struct pc_conn *conn2;
	struct pc_conn_info in;
	struct pc_msg *m;
	uint64_t t0, t1, end;

	start(PC_HANDOFF_RING, 0, 1, 1 << 20);
	conn2 = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), 0, 20000, NULL);
	ck_assert_msg(conn2, "connect: %s", pc_last_error());
	fill_server_pool(1 << 20);
	memset(&k, 0, sizeof(k));
	m = alloc_retry(LEN);
	fill(m, LEN, 7);
	t0 = pc_test_now_ms();
	ck_assert_int_eq(pc_call(m, call_done_keep, &k, (uint64_t)DEADLINE_MS * 1000, NULL), 0);
	end = t0 + 10000;
	while (!atomic_load(&k.runs) && pc_test_now_ms() < end) {
		pump_cli();
		usleep(100);
	}
	t1 = pc_test_now_ms();
	ck_assert_uint_eq(atomic_load(&k.runs), 1);
	ck_assert_int_eq(atomic_load(&k.status), -ETIMEDOUT);
	printf("rndv: a large call's deadline of %u ms came back after %llu ms\n", DEADLINE_MS,
	       (unsigned long long)(t1 - t0));
	/* the abort's round trip, not the peer's pool: on time */
	ck_assert_uint_lt(t1 - t0, DEADLINE_MS + 5000);
	m = k.kept;
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(check(m, LEN, 7), "the request came back changed");
	/* ours again: other bytes, and out on the other connection */
	fill(m, LEN, 1);
	m->conn = conn2;
	ck_assert_int_eq(pc_send(m), 0);
	/* the server's application takes its messages now: the held one, then the second */
	wait_srv(2);
	/* the aborted request was never read, never delivered */
	ck_assert_uint_eq(atomic_load(&srv_requests), 0);
	pc_conn_info(conn, &in);
	ck_assert_uint_eq(in.late_responses, 0);
	ck_assert_uint_eq(atomic_load(&srv_down), 0);
	wait_pools_empty();
	pc_conn_put(conn2);
	stop();
}
END_TEST

/*
 * A large message allocated for one connection and sent on another is
 * charged to the one it goes out on: the first may allocate its share
 * again, the second holds its share while the peer has not read it.
 */
START_TEST(test_charge_follows_send)
{
	struct pc_conn *a, *b;
	struct pc_msg *m, *m2;

	/* two connections share the client's pool of 2 MiB: 1 MiB each */
	start(PC_HANDOFF_RING, 2, 1, 1 << 20);
	a = conn;
	b = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), 0, 20000, NULL);
	ck_assert_msg(b, "connect: %s", pc_last_error());
	/* the server's pool is full: what b sends waits there, unread */
	fill_server_pool(1 << 20);
	m = pc_msg_alloc_size(a, 1 << 20);
	ck_assert_ptr_nonnull(m);
	fill(m, 1 << 20, 1);
	m->conn = b;
	ck_assert_int_eq(pc_send(m), 0);
	while (!waiting(srv))
		usleep(1000);
	/* a holds nothing now: it may allocate its share */
	m2 = pc_msg_alloc_size(a, 1 << 20);
	ck_assert_msg(m2, "a, whose message went out on b, is still charged: %s", pc_last_error());
	ck_assert_int_eq(pc_msg_release(m2), 0);
	/* b holds its share until the server reads it */
	ck_assert_ptr_null(pc_msg_alloc_size(b, 1 << 20));
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_msg(strstr(pc_last_error(), "share"), "%s", pc_last_error());
	wait_srv(2);
	wait_pools_empty();
	pc_conn_put(b);
	stop();
}
END_TEST

/* A message of 4 MiB + 24 bytes takes 4 MiB + 64 KiB of the pool, not 8 MiB. */
START_TEST(test_block_runs)
{
	struct pc_msg *a, *b;

	start(PC_HANDOFF_HANDLER, 8, 0, 8 << 20);
	a = pc_msg_alloc_size(conn, (4 << 20) + 24);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(used_kib(cli), 4096 + 64);
	/* the rest of the 8 MiB, less one block, is there for another */
	b = pc_msg_alloc_size(conn, (4 << 20) - (128 << 10));
	ck_assert_msg(b, "a second message in the rest of the pool: %s", pc_last_error());
	ck_assert_uint_eq(used_kib(cli), 8192 - 64);
	fill(a, (4 << 20) + 24, 1);
	fill(b, (4 << 20) - (128 << 10), 1);
	ck_assert_int_eq(pc_send(a), 0);
	ck_assert_int_eq(pc_send(b), 0);
	wait_srv(2);
	wait_pools_empty();
	stop();
}
END_TEST

/* --- hostile peers -----------------------------------------------------------------------------
 */

static atomic_uint h_down;
static char h_why[512];
static atomic_uint h_downs_qpn;
static atomic_bool h_hold;		/* the server's application keeps what it gets */
static struct pc_msg *h_held[64];
static atomic_uint h_nheld;
static uint32_t h_keepalive_ms;		/* the server's keepalive_ms (0: default) */
static atomic_bool h_capture;		/* keep h_up */
static struct pc_conn *h_up[2];		/* the server's first two connections, referenced */
static atomic_uint h_nup;
static atomic_ullong h_down_ms;		/* when the DOWN came */
static struct ibv_mr *h_peer_mr;	/* registered on the hostile peer's PD by a test */

static void h_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_conn_info in;
	unsigned int n;

	(void)arg;
	if (ev == PC_CONN_UP && atomic_load(&h_capture) &&
	    (n = atomic_load(&h_nup)) < PC_ARRAY_SIZE(h_up)) {
		h_up[n] = pc_conn_get(c);
		atomic_store(&h_nup, n + 1);
	}
	if (ev != PC_CONN_DOWN)
		return;
	atomic_store(&h_down_ms, pc_test_now_ms());
	pc_conn_info(c, &in);
	snprintf(h_why, sizeof(h_why), "%s", pc_last_error());
	atomic_store(&h_downs_qpn, in.qp_num);
	atomic_fetch_add(&h_down, 1);
}

static void h_on_msg(struct pc_msg *m, void *arg)
{
	unsigned int n;

	if (atomic_load(&h_hold) && (n = atomic_load(&h_nheld)) < PC_ARRAY_SIZE(h_held)) {
		h_held[n] = m;
		atomic_store(&h_nheld, n + 1);
		return;
	}
	srv_on_msg(m, arg);
}

/* A server (@pool_mb of large pool, @max_msg) and a good client connection to it. */
static void h_start(uint32_t pool_mb, uint32_t max_msg)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_conn = h_on_conn, .on_msg = h_on_msg, .no_numa = true, .msg_size = MSG_SIZE,
		.max_msg_size = max_msg, .large_pool_size = (uint64_t)pool_mb << 20,
		/* the whole window granted at once: the hostile peer reads no grant in headers */
		.min_window = PC_WINDOW_DEFAULT, .keepalive_ms = h_keepalive_ms,
	};
	struct pc_engine_params cp = { .size = sizeof(cp), .no_numa = true, .msg_size = MSG_SIZE,
				       .handoff = PC_HANDOFF_RING, .max_msg_size = max_msg };

	atomic_store(&srv_ok, 0);
	atomic_store(&srv_bad, 0);
	atomic_store(&h_down, 0);
	atomic_store(&h_hold, false);
	atomic_store(&h_nheld, 0);
	atomic_store(&h_nup, 0);
	ring = false;
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	conn = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(conn, "connect: %s", pc_last_error());
}

/* The hostile peer, up and granted its first credits; it claims rendezvous up to @max_large. */
static void h_peer_up_large(struct fpeer *p, uint32_t max_large)
{
	struct fpeer_opts o = { .priv = FPEER_POLLCORE, .max_large = max_large };
	uint64_t end;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = fpeer_connect(p, pc_test_addr(), pc_listen_port(srv), &o);
	ck_assert_msg(ret == 0, "hostile peer: %s (%d)", p->why, ret);
	ck_assert(p->srv_pollcore);
	end = pc_test_now_ms() + 10000;
	while (!p->credit_word[0] && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_msg(p->credit_word[0], "no credit granted to the hostile peer");
}

static void h_peer_up(struct fpeer *p)
{
	h_peer_up_large(p, 0);
}

static int h_send(struct fpeer *p, uint8_t type, const void *payload, uint32_t len)
{
	uint8_t buf[WIRE_HDR_LEN + 64];

	wire_hdr_fill((struct wire_hdr *)(void *)buf, type, len, 0, 0);
	memcpy(buf + WIRE_HDR_LEN, payload, len);
	return fpeer_send(p, buf, WIRE_HDR_LEN + len);
}

/*
 * Only the hostile peer's connection closes, its reason naming its QP and
 * @why; the good connection then carries a 1 MiB message; all stops.
 */
static void h_expect_closed_and_end(struct fpeer *p, const char *why, const char *why2)
{
	uint64_t end = pc_test_now_ms() + 15000;
	struct pc_msg *m;
	char qp[32];
	unsigned int i;

	while (!atomic_load(&h_down) && pc_test_now_ms() < end)
		fpeer_poll(p, 10);
	ck_assert_msg(atomic_load(&h_down) == 1, "the server closed %u connections",
		      atomic_load(&h_down));
	ck_assert_uint_eq(atomic_load(&h_downs_qpn), p->srv_qpn);
	snprintf(qp, sizeof(qp), "qp 0x%x", p->srv_qpn);
	printf("%s: DOWN of %s: '%s'\n", why, qp, h_why);
	ck_assert_msg(strstr(h_why, qp) && strstr(h_why, why) && (!why2 || strstr(h_why, why2)),
		      "reason at DOWN: '%s', expected '%s'", h_why, why);
	/* its PD is freed only without MRs: one the test registered goes first */
	if (h_peer_mr)
		ck_assert_int_eq(ibv_dereg_mr(h_peer_mr), 0);
	h_peer_mr = NULL;
	fpeer_destroy(p);
	/* what the application held goes back */
	for (i = 0; i < atomic_load(&h_nheld); i++)
		ck_assert_int_eq(pc_msg_release(h_held[i]), 0);
	atomic_store(&h_hold, false);
	atomic_store(&srv_ok, 0);
	atomic_store(&srv_bad, 0);

	/* the other connection, on the same worker, still works: a large message */
	m = alloc_retry(1 << 20);
	fill(m, 1 << 20, 1);
	ck_assert_int_eq(pc_send(m), 0);
	wait_srv(1);
	ck_assert_uint_eq(atomic_load(&h_down), 1);
	wait_pools_empty();
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(conn);
}

/* A descriptor naming memory the peer never exposed: its READ fails, its connection closes. */
START_TEST(test_hostile_descriptor)
{
	struct wire_rndv d;
	struct fpeer p;

	h_start(0, 0);
	h_peer_up(&p);
	ck_assert_uint_eq(wire_cm_max_large(&p.srv), PC_MAX_MSG_DEFAULT);
	/*
	 * The rkey of its credit word (16 bytes, REMOTE_WRITE only), the address
	 * of its message slots (registered LOCAL_WRITE only, rkey 0 on rxe).
	 */
	ck_assert_uint_ne(p.credit_mr->rkey, 0);
	d = (struct wire_rndv){ .inner = WIRE_ONEWAY, .rkey = p.credit_mr->rkey,
				.addr = (uintptr_t)p.mem, .len = 100000, .token = 1 };
	ck_assert_int_eq(h_send(&p, WIRE_RNDV, &d, sizeof(d)), 0);
	fpeer_wait_sends(&p, 10000);
	h_expect_closed_and_end(&p, "RDMA_READ", "remote access error");
	/* nothing reached the application from it (wait_srv() counted the good one only) */
}
END_TEST

/* A DONE for a token this connection never sent. */
START_TEST(test_hostile_done)
{
	struct wire_done dn = { .token = 0x700000003ull };
	struct fpeer p;

	h_start(0, 0);
	h_peer_up(&p);
	ck_assert_int_eq(h_send(&p, WIRE_DONE, &dn, sizeof(dn)), 0);
	fpeer_wait_sends(&p, 10000);
	h_expect_closed_and_end(&p, "DONE for token 0x700000003", NULL);
}
END_TEST

/*
 * Descriptors that READ fine, while the server's application keeps what it
 * got: its pool (1 MiB) fills with the first, the next wait for room, and
 * one more than WIRE_RNDV_MAX unanswered closes the connection.
 */
START_TEST(test_hostile_too_many)
{
	enum { LEN = 1 << 20 };
	struct ibv_mr *mr;
	struct wire_rndv d;
	struct fpeer p;
	void *mem;
	unsigned int i;

	h_start(1, LEN);
	h_peer_up(&p);
	mem = aligned_alloc(4096, LEN);
	ck_assert_ptr_nonnull(mem);
	memset(mem, 0x5a, LEN);
	mr = ibv_reg_mr(p.pd, mem, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	ck_assert_ptr_nonnull(mr);
	atomic_store(&h_hold, true);
	d = (struct wire_rndv){ .inner = WIRE_ONEWAY, .rkey = mr->rkey, .addr = (uintptr_t)mem,
				.len = LEN, .token = 1 };
	ck_assert_int_eq(h_send(&p, WIRE_RNDV, &d, sizeof(d)), 0);
	/* the first is read and held by the application */
	for (i = 0; i < 1000 && !atomic_load(&h_nheld); i++)
		fpeer_poll(&p, 10);
	ck_assert_uint_eq(atomic_load(&h_nheld), 1);
	ck_assert_uint_eq(h_held[0]->len, LEN);
	ck_assert_uint_eq(((uint8_t *)h_held[0]->data)[LEN - 1], 0x5a);
	/* then WIRE_RNDV_MAX + 1 that wait for room, within the credits granted */
	for (i = 0; i <= WIRE_RNDV_MAX; i++) {
		d.token = 2 + i;
		ck_assert_int_eq(h_send(&p, WIRE_RNDV, &d, sizeof(d)), 0);
		fpeer_poll(&p, 1);
	}
	fpeer_wait_sends(&p, 10000);
	h_peer_mr = mr;
	h_expect_closed_and_end(&p, "more than 32 rendezvous descriptors unanswered", NULL);
	free(mem);
}
END_TEST

/*
 * A peer that takes the server's descriptors and never answers them (no
 * READ, no DONE) keeps their blocks, but only its share of the server's
 * pool (8 MiB, 2 connections: 4 MiB): pc_msg_alloc_size() for it says
 * -ENOBUFS beyond, while another connection of the same worker goes on
 * sending 1 MiB messages. After 8 keepalive periods without a DONE its
 * connection closes (-ETIMEDOUT), the reason naming the QP and the
 * descriptors unanswered, and every block comes back.
 */
START_TEST(test_hostile_hoard)
{
	/*
	 * the deadline (8 x KA_MS, 8 s) must outlast the good messages, 5-20x
	 * slower sanitized: TSan moved their 6 MiB in 0.6 s, so 8 s leaves a
	 * margin of 13 (a deadline of 16 s there only lengthened the wait for
	 * the close the case proves)
	 */
	enum { LEN = 1 << 20, HOARD = 4, GOOD = 6, KA_MS = 1000 };
	struct pc_conn *bad = NULL, *good = NULL;
	struct pc_conn_info in;
	struct pc_msg *m, *got[16];
	unsigned int i, sent, recvd, ok;
	uint64_t t0, end;
	struct fpeer p;
	char want[96], limit[64];
	int n, k;

	h_keepalive_ms = KA_MS;
	atomic_store(&h_capture, true);
	h_start(8, LEN);
	h_keepalive_ms = 0;
	h_peer_up_large(&p, LEN);
	end = pc_test_now_ms() + 10000;
	while (atomic_load(&h_nup) < 2 && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&h_nup), 2);
	for (i = 0; i < 2; i++) {
		pc_conn_info(h_up[i], &in);
		ck_assert_int_eq(in.worker, 0);
		if (in.qp_num == p.srv_qpn)
			bad = h_up[i];
		else
			good = h_up[i];
	}
	ck_assert(bad && good);
	atomic_store(&h_capture, false);

	/* the hostile peer's share, and not a block more */
	t0 = pc_test_now_ms();
	for (i = 0; i < HOARD; i++) {
		m = pc_msg_alloc_size(bad, LEN);
		ck_assert_msg(m, "descriptor %u to the hostile peer: %s", i, pc_last_error());
		fill(m, LEN, 3);
		ck_assert_int_eq(pc_send(m), 0);
	}
	ck_assert_ptr_null(pc_msg_alloc_size(bad, LEN));
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_msg(strstr(pc_last_error(), "share of the large pool"), "%s", pc_last_error());
	end = pc_test_now_ms() + 10000;
	while (p.recvs < HOARD && pc_test_now_ms() < end)
		fpeer_poll(&p, 10);
	ck_assert_uint_eq(p.recvs, HOARD);
	ck_assert_uint_eq(rndv_count(srv, true), HOARD);
	ck_assert_uint_eq(used_kib(srv), HOARD * (LEN >> 10));

	/* meanwhile the other connection, same worker, sends and its peer reads every byte */
	for (sent = recvd = ok = 0; recvd < GOOD;) {
		if (sent < GOOD && (m = pc_msg_alloc_size(good, LEN))) {
			fill(m, LEN, 4);
			ck_assert_int_eq(pc_send(m), 0);
			sent++;
		} else if (sent < GOOD) {
			ck_assert_msg(errno == ENOBUFS, "alloc: %s", strerror(errno));
		}
		n = pc_app_poll(cli, got, PC_ARRAY_SIZE(got));
		ck_assert_int_ge(n, 0);
		for (k = 0; k < n; k++) {
			ok += got[k]->len == LEN && check(got[k], LEN, 4);
			ck_assert_int_eq(pc_msg_release(got[k]), 0);
		}
		recvd += (unsigned int)n;
		ck_assert_msg(!atomic_load(&h_down), "the hostile connection closed first, after "
			      "%llu ms, with %u of %u good messages", (unsigned long long)
			      (pc_test_now_ms() - t0), recvd, GOOD);
		if (!n)
			usleep(200);
	}
	ck_assert_uint_eq(ok, GOOD);
	printf("hoard: %u good messages of 1 MiB in %llu ms beside %u unanswered\n", GOOD,
	       (unsigned long long)(pc_test_now_ms() - t0), HOARD);

	/* no DONE for 8 keepalive periods: only the hostile connection closes */
	end = pc_test_now_ms() + 8 * KA_MS + 20000;
	while (!atomic_load(&h_down) && pc_test_now_ms() < end)
		fpeer_poll(&p, 10);
	ck_assert_uint_eq(atomic_load(&h_down), 1);
	ck_assert_uint_eq(atomic_load(&h_downs_qpn), p.srv_qpn);
	/* the coarse clock the deadline reads may lag a tick (a few ms) */
	ck_assert_uint_ge(atomic_load(&h_down_ms) - t0, 8 * KA_MS - 20);
	printf("hoard: DOWN after %llu ms: '%s'\n",
	       (unsigned long long)(atomic_load(&h_down_ms) - t0), h_why);
	snprintf(want, sizeof(want), "qp 0x%x: %u rendezvous descriptors unanswered", p.srv_qpn,
		 HOARD);
	snprintf(limit, sizeof(limit), "limits: %u ms without a DONE", 8 * KA_MS);
	ck_assert_msg(strstr(h_why, want) && strstr(h_why, limit),
		      "reason at DOWN: '%s', expected '%s'", h_why, want);
	/* its blocks came back with the drain (windows renewed) */
	end = pc_test_now_ms() + 10000;
	while (used_kib(srv) && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(used_kib(srv), 0);
	ck_assert_ptr_null(pc_msg_alloc_size(bad, LEN));
	ck_assert_int_eq(errno, ENOTCONN);
	fpeer_destroy(&p);

	/* the whole pool serves the good connection again: 8 MiB at once */
	for (i = 0; i < 8; i++) {
		m = pc_msg_alloc_size(good, LEN);
		ck_assert_msg(m, "after the close, block %u: %s", i, pc_last_error());
		fill(m, LEN, 5);
		ck_assert_int_eq(pc_send(m), 0);
	}
	for (recvd = ok = 0, end = pc_test_now_ms() + 30000; recvd < 8 && pc_test_now_ms() < end;) {
		n = pc_app_poll(cli, got, PC_ARRAY_SIZE(got));
		ck_assert_int_ge(n, 0);
		for (k = 0; k < n; k++) {
			ok += check(got[k], LEN, 5);
			ck_assert_int_eq(pc_msg_release(got[k]), 0);
		}
		recvd += (unsigned int)n;
		if (!n)
			usleep(200);
	}
	ck_assert_uint_eq(ok, 8);
	ck_assert_uint_eq(atomic_load(&h_down), 1);
	pc_conn_put(bad);
	pc_conn_put(good);
	wait_pools_empty();
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(conn);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rndv");
	TCase *tc = tcase_create("rndv");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_send_handler);
	tcase_add_test(tc, test_send_ring);
	tcase_add_test(tc, test_call_handler);
	tcase_add_test(tc, test_call_ring);
	tcase_add_test(tc, test_many_calls);
	tcase_add_test(tc, test_exhaustion);
	tcase_add_test(tc, test_call_ends_before_read);
	tcase_add_test(tc, test_charge_follows_send);
	tcase_add_test(tc, test_block_runs);
	suite_add_tcase(s, tc);
	tc = tcase_create("order");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_order);
	suite_add_tcase(s, tc);
	/* CK_RUN_CASE=hostile runs these alone */
	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_hostile_descriptor);
	tcase_add_test(tc, test_hostile_done);
	tcase_add_test(tc, test_hostile_too_many);
	tcase_add_test(tc, test_hostile_hoard);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
