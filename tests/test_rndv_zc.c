// SPDX-License-Identifier: MIT
/*
 * rdma suite: rendezvous from and into the application's own registered
 * memory (workers/rndv_zc.c): pc_msg_wrap() and on_large.
 *  - send_sizes: 1 B, msg_size, msg_size + 1, 1 MiB, 16 MiB wrapped from a
 *    buffer registered with pc_mem_reg(), every byte compared; released()
 *    runs exactly once with 0 after the peer's DONE (or the SEND). Not
 *    copied: while the message is in flight the sender's large pool holds
 *    nothing, and a byte the receiver's on_large writes into the sender's
 *    buffer (same process), before its READ, arrives with the rest.
 *  - send_close: the receiver closes the connection while the descriptor
 *    waits for room in its pool: released() runs once with -ENOTCONN.
 *  - bad_args: EINVAL, ERANGE, EXDEV, EMSGSIZE, ENOTCONN, ENOBUFS (and
 *    -ECANCELED for the 128 wrapped and given back unsent), saying why.
 *  - recv_app: on_large gives the server's registered buffer (msg_size + 1,
 *    1 MiB; a smaller engine than send_sizes', to keep the case short): the
 *    delivered message points into it, every byte compared, the server's
 *    pool holds nothing then; released() once with 0 after
 *    pc_msg_release(). Also a pc_call() whose request is wrapped and whose
 *    response the client's on_large reads into the client's buffer.
 *  - recv_decline: on_large declines (the pool is used) and an answer out
 *    of range (released() at once with -ERANGE, the pool used).
 *  - call_refused_rewrap: pc_call() of a wrapped message of a closed
 *    connection gives it back once and never touches it after, though
 *    released() reuses the same entry at once for another call.
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"
#include "pc_test.h"

#define MSG_SIZE 4096u
#define BIG (16u << 20)
#define SMALL (2u << 20)	/* max_msg_size where 16 MiB is not needed; rbuf's and cbuf's length */

static const uint32_t sizes[] = { 1, MSG_SIZE, MSG_SIZE + 1, 1 << 20, BIG };

/* The first byte that differs from the pattern (whose last byte is @last), or -1. */
static long diff_at(const uint8_t *d, uint32_t len, uint8_t salt, uint8_t last)
{
	long at = pat_diff(d, len - 1, len, salt);

	if (at >= 0)
		return at;
	return d[len - 1] == last ? -1 : (long)len - 1;
}

/* --- released() --------------------------------------------------------------------------- */

struct rel {
	atomic_uint runs;
	atomic_int status;
};

static void released(void *arg, int status)
{
	struct rel *r = arg;

	atomic_store(&r->status, status);
	atomic_fetch_add(&r->runs, 1);
}

static void wait_rel(struct rel *r, unsigned int runs)
{
	uint64_t end = pc_test_now_ms() + 60000;

	while (atomic_load(&r->runs) < runs && pc_test_now_ms() < end)
		usleep(200);
	ck_assert_uint_eq(atomic_load(&r->runs), runs);
}

/* --- the two engines ------------------------------------------------------------------------ */

enum srv_mode { SRV_POOL, SRV_APP, SRV_BAD };

static struct pc_engine *srv, *cli;
static struct pc_conn *conn, *sconn;	/* the client's handle; the server's (a reference) */
static uint8_t *sbuf, *rbuf, *cbuf;	/* client send, server receive, client receive buffers */
static void *smem, *rmem, *cmem;
static struct rel srel, rrel, crel;	/* released() of sbuf, rbuf, cbuf */

static _Atomic enum srv_mode mode;
static atomic_uint salt_sent;	/* the salt of the message the client filled, published */
static atomic_uint asked, ok, bad, down, cli_down;
static atomic_uint poked;	/* on_large wrote the last byte of sbuf: the value */
static atomic_uint srv_used_kib;	/* the server's pool when on_msg ran */
static atomic_uint cli_used_kib;	/* the client's pool when on_large ran (message in flight) */
static atomic_bool in_app;	/* the delivered message pointed into rbuf */
static atomic_bool hold;	/* on_msg keeps the next one-way message (the server's pool stays full) */
static struct pc_msg *_Atomic held;

static uint32_t pool_kib(struct pc_engine *e)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(e, 0, &st), 0);
	return st.large_used_kib;
}

static uint64_t rndv_sent(struct pc_engine *e)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(e, 0, &st), 0);
	return st.rndv_sent;
}

static bool srv_on_large(struct pc_conn *c, uint32_t len, uint8_t type, uint64_t req_id,
			 struct pc_large_buf *b, void *arg)
{
	unsigned int salt = atomic_load(&salt_sent);	/* the client's fill happened before */

	(void)c;
	(void)arg;
	(void)req_id;
	ck_assert(type == PC_MSG_ONEWAY || type == PC_MSG_REQUEST);
	atomic_fetch_add(&asked, 1);
	/* the sender's message is in flight: its pool holds nothing (no copy was made) */
	atomic_store(&cli_used_kib, pool_kib(cli));
	/* the READ comes after this: what is written here into the sender's buffer arrives */
	if (salt & 0x100) {
		sbuf[len - 1] = 0xa5;
		atomic_store(&poked, 0xa5);
	}
	switch (atomic_load(&mode)) {
	case SRV_APP:
		*b = (struct pc_large_buf){ rbuf, rmem, released, &rrel };
		return true;
	case SRV_BAD:
		/* ends one byte past its registration */
		*b = (struct pc_large_buf){ rbuf + SMALL - len + 1, rmem, released, &rrel };
		return true;
	default:
		return false;
	}
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	unsigned int salt = atomic_load(&salt_sent);
	uint8_t last = pat(m->len - 1, m->len, (uint8_t)salt);

	(void)arg;
	if (atomic_load(&poked) && m->len > MSG_SIZE)
		last = (uint8_t)atomic_load(&poked);
	atomic_store(&srv_used_kib, pool_kib(srv));
	atomic_store(&in_app, (uint8_t *)m->data == rbuf);
	if (m->type == PC_MSG_REQUEST) {
		/* answered with the same bytes, salt + 1, wrapped from rbuf's upper half */
		uint32_t len = m->len;
		uint8_t *out = rbuf + SMALL / 2;
		struct pc_msg *r;
		long at = diff_at(m->data, len, (uint8_t)salt, pat(len - 1, len, (uint8_t)salt));

		atomic_fetch_add(at < 0 ? &ok : &bad, 1);
		pat_fill(out, len, (uint8_t)(salt + 1));
		r = pc_msg_wrap(m->conn, rmem, out, len, released, &rrel);
		ck_assert_msg(r, "wrap the response: %s", pc_last_error());
		r->type = PC_MSG_RESPONSE;
		r->req_id = m->req_id;
		ck_assert_int_eq(pc_reply(r), 0);
		ck_assert_int_eq(pc_msg_release(m), 0);
		return;
	}
	long at = diff_at(m->data, m->len, (uint8_t)salt, last);

	if (at >= 0)
		fprintf(stderr, "%u bytes: byte %ld differs\n", m->len, at);
	if (atomic_exchange(&hold, false)) {
		atomic_store(&held, m);
		atomic_fetch_add(at < 0 ? &ok : &bad, 1);
		return;
	}
	atomic_fetch_add(at < 0 ? &ok : &bad, 1);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	struct pc_conn *none = NULL;

	/* the first connection's, referenced; start() waits for it (release) */
	if (ev == PC_CONN_UP)
		__atomic_compare_exchange_n(&sconn, &none, pc_conn_get(c), false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED) ?
			(void)0 : pc_conn_put(c);
	else
		atomic_fetch_add(&down, 1);
}

/* test_call_refused_rewrap: a wrapped message of the connection that goes DOWN, and its call */
static struct pc_msg *_Atomic dead_msg;
static atomic_int refused_rc = 1;
static void dead_done(struct pc_msg *m, int status, void *arg);

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_msg *m;

	(void)c;
	(void)arg;
	if (ev != PC_CONN_DOWN)
		return;
	/* on the worker: a call with a message of this closed connection is refused and released */
	m = atomic_exchange(&dead_msg, NULL);
	if (m)
		atomic_store(&refused_rc, pc_call(m, dead_done, NULL, 0, NULL));
	atomic_fetch_add(&cli_down, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	ck_abort_msg("a message of type %u reached the client's on_msg", m->type);
}

/* The client reads a response into cbuf. */
static atomic_uint cli_asked;
static atomic_ullong seen_req;	/* the request id on_large was asked about */

static bool cli_on_large(struct pc_conn *c, uint32_t len, uint8_t type, uint64_t req_id,
			 struct pc_large_buf *b, void *arg)
{
	(void)c;
	(void)len;
	(void)arg;
	ck_assert_int_eq(type, PC_MSG_RESPONSE);
	atomic_store(&seen_req, req_id);
	atomic_fetch_add(&cli_asked, 1);
	*b = (struct pc_large_buf){ cbuf, cmem, released, &crel };
	return true;
}

static void *buf(uint32_t len)
{
	void *p = aligned_alloc(4096, len);

	ck_assert_ptr_nonnull(p);
	memset(p, 0, len);
	return p;
}

/* The engines connected, @max their max_msg_size, the server's pool and sbuf's length. */
static void start(uint32_t max)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_conn = srv_on_conn, .on_msg = srv_on_msg, .on_large = srv_on_large,
		.no_numa = true, .msg_size = MSG_SIZE, .max_msg_size = max, .large_pool_size = max,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.on_conn = cli_on_conn, .on_msg = cli_on_msg, .on_large = cli_on_large,
		.no_numa = true, .msg_size = MSG_SIZE, .max_msg_size = max,
	};
	uint32_t lk, rk;
	uint64_t end = pc_test_now_ms() + 20000;

	atomic_store(&mode, SRV_POOL);
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	conn = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(conn, "connect: %s", pc_last_error());
	while (!__atomic_load_n(&sconn, __ATOMIC_ACQUIRE) && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_ptr_nonnull(__atomic_load_n(&sconn, __ATOMIC_ACQUIRE));
	sbuf = buf(max);
	rbuf = buf(SMALL);
	cbuf = buf(SMALL);
	smem = pc_mem_reg(conn, sbuf, max, IBV_ACCESS_LOCAL_WRITE, &lk, &rk);
	ck_assert_msg(smem, "pc_mem_reg: %s", pc_last_error());
	cmem = pc_mem_reg(conn, cbuf, SMALL, IBV_ACCESS_LOCAL_WRITE, &lk, &rk);
	ck_assert_msg(cmem, "pc_mem_reg: %s", pc_last_error());
	rmem = pc_mem_reg(sconn, rbuf, SMALL, IBV_ACCESS_LOCAL_WRITE, &lk, &rk);
	ck_assert_msg(rmem, "pc_mem_reg: %s", pc_last_error());
}

static void stop(bool closed)
{
	struct pc_conn_info in;

	pc_conn_info(conn, &in);
	if (!closed) {
		ck_assert_uint_eq(in.msgs_dropped, 0);
		ck_assert_uint_eq(atomic_load(&down), 0);
	}
	/* every released() ran: the memory is ours; deregistered while the devices are open */
	pc_mem_dereg(smem);
	pc_mem_dereg(rmem);
	pc_mem_dereg(cmem);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(conn);
	pc_conn_put(sconn);
	sconn = NULL;
	free(sbuf);
	free(rbuf);
	free(cbuf);
}

static void wait_ok(unsigned int want)
{
	uint64_t end = pc_test_now_ms() + 60000;

	while (atomic_load(&ok) + atomic_load(&bad) < want && pc_test_now_ms() < end)
		usleep(200);
	ck_assert_uint_eq(atomic_load(&bad), 0);
	ck_assert_uint_eq(atomic_load(&ok), want);
}

/* Fills sbuf for @len (salt @salt; bit 8: on_large pokes its last byte) and sends it wrapped. */
static void send_wrapped(uint32_t len, unsigned int salt)
{
	struct pc_msg *m;
	int rc;

	pat_fill(sbuf, len, (uint8_t)salt);
	atomic_store(&poked, 0);
	/* published after the fill: on_large and on_msg read it first (the wire is no edge TSan sees) */
	atomic_store(&salt_sent, salt);
	m = pc_msg_wrap(conn, smem, sbuf, len, released, &srel);
	ck_assert_msg(m, "wrap %u: %s", len, pc_last_error());
	ck_assert_ptr_eq(m->data, sbuf);
	ck_assert_uint_eq(m->len, len);
	ck_assert_uint_eq(m->cap, len);
	while ((rc = pc_send(m)) == -ENOBUFS)
		usleep(100);
	ck_assert_msg(rc == 0, "send %u: %d %s", len, rc, pc_last_error());
}

START_TEST(test_send_sizes)
{
	unsigned int i, large = 0;

	start(BIG);
	for (i = 0; i < PC_ARRAY_SIZE(sizes); i++) {
		uint32_t len = sizes[i];

		atomic_store(&srel.runs, 0);
		atomic_store(&srel.status, 1);
		send_wrapped(len, len > MSG_SIZE ? 0x100 | i : i);
		wait_ok(i + 1);
		/* exactly once, with 0, once the DONE came (or the SEND completed) */
		wait_rel(&srel, 1);
		ck_assert_int_eq(atomic_load(&srel.status), 0);
		usleep(20000);
		ck_assert_uint_eq(atomic_load(&srel.runs), 1);
		if (len > MSG_SIZE) {
			large++;
			ck_assert_uint_eq(atomic_load(&asked), large);
			ck_assert_uint_eq(atomic_load(&cli_used_kib), 0);
			/* the receiver read the sender's buffer after on_large wrote into it */
			ck_assert_uint_eq(atomic_load(&poked), 0xa5);
			ck_assert(!atomic_load(&in_app));
			ck_assert_uint_ge(atomic_load(&srv_used_kib), (len + 1023) / 1024);
		}
	}
	ck_assert_uint_eq(rndv_sent(cli), large);
	ck_assert_uint_eq(pool_kib(cli), 0);
	stop(false);
}
END_TEST

static uint32_t srv_waiting(void)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(srv, 0, &st), 0);
	return st.large_waiting;
}

START_TEST(test_send_close)
{
	struct pc_msg *m;
	uint64_t end;

	start(SMALL);
	/* the server keeps a message as large as its pool: the pool is full */
	atomic_store(&hold, true);
	m = pc_msg_alloc_size(conn, SMALL);
	ck_assert_ptr_nonnull(m);
	pat_fill(m->data, SMALL, 2);
	m->len = SMALL;
	atomic_store(&salt_sent, 2);
	ck_assert_int_eq(pc_send(m), 0);
	wait_ok(1);
	/* so the next descriptor waits, its window bound on the client; then the server closes */
	send_wrapped(1 << 20, 3);
	for (end = pc_test_now_ms() + 20000; srv_waiting() != 1 && pc_test_now_ms() < end;)
		usleep(1000);
	ck_assert_uint_eq(srv_waiting(), 1);
	ck_assert_uint_eq(atomic_load(&srel.runs), 0);
	ck_assert_int_eq(pc_close(sconn), 0);
	wait_rel(&srel, 1);
	ck_assert_int_eq(atomic_load(&srel.status), -ENOTCONN);
	for (end = pc_test_now_ms() + 20000; !atomic_load(&cli_down) && pc_test_now_ms() < end;)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	usleep(20000);
	ck_assert_uint_eq(atomic_load(&srel.runs), 1);
	ck_assert_uint_eq(atomic_load(&ok) + atomic_load(&bad), 1);
	ck_assert_int_eq(pc_msg_release(atomic_load(&held)), 0);
	stop(true);
}
END_TEST

static void expect_fail(struct pc_conn *c, void *mem, void *addr, size_t len, int err,
			const char *what)
{
	struct pc_msg *m;

	errno = 0;
	m = pc_msg_wrap(c, mem, addr, len, released, &srel);
	ck_assert_msg(!m, "%s: accepted", what);
	ck_assert_msg(errno == err, "%s: errno %d (%s), expected %d: %s", what, errno,
		      strerror(errno), err, pc_last_error());
	ck_assert_msg(pc_last_error()[0], "%s: pc_last_error() is empty", what);
}

START_TEST(test_bad_args)
{
	struct pc_msg *w[129];
	uint64_t end;
	uint32_t lk, rk;
	uint8_t *over;
	void *omem;
	int i;

	start(SMALL);
	expect_fail(conn, NULL, sbuf, 10, EINVAL, "no handle");
	expect_fail(conn, smem, NULL, 10, EINVAL, "no address");
	expect_fail(conn, smem, sbuf, 0, EINVAL, "no length");
	expect_fail(conn, smem, sbuf + SMALL - 10, 11, ERANGE, "past the end");
	expect_fail(conn, smem, sbuf - 1, 10, ERANGE, "before the start");
	expect_fail(conn, smem, sbuf + 1, SMALL, ERANGE, "longer than the region");
	/* the server's registration: another engine, another protection domain */
	expect_fail(conn, rmem, rbuf, 10, EXDEV, "another engine's handle");
	over = buf(SMALL + 4096);
	omem = pc_mem_reg(conn, over, SMALL + 4096, IBV_ACCESS_LOCAL_WRITE, &lk, &rk);
	ck_assert_ptr_nonnull(omem);
	expect_fail(conn, omem, over, SMALL + 1, EMSGSIZE, "above max_msg_size");
	/* 128 at once; the next one has no entry; given back unsent: -ECANCELED each */
	for (i = 0; i < 128; i++) {
		w[i] = pc_msg_wrap(conn, smem, sbuf + i, 1, released, &srel);
		ck_assert_msg(w[i], "wrap %d: %s", i, pc_last_error());
	}
	expect_fail(conn, smem, sbuf, 1, ENOBUFS, "the 129th");
	ck_assert_uint_eq(atomic_load(&srel.runs), 0);
	for (i = 0; i < 128; i++)
		while (pc_msg_release(w[i]) == -ENOBUFS)
			usleep(100);
	wait_rel(&srel, 128);
	ck_assert_int_eq(atomic_load(&srel.status), -ECANCELED);
	/* the entries are back */
	w[128] = pc_msg_wrap(conn, smem, sbuf, 1, released, &srel);
	ck_assert_ptr_nonnull(w[128]);
	ck_assert_int_eq(pc_msg_release(w[128]), 0);
	wait_rel(&srel, 129);
	ck_assert_int_eq(pc_close(conn), 0);
	for (end = pc_test_now_ms() + 20000; !atomic_load(&cli_down) && pc_test_now_ms() < end;)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	expect_fail(conn, smem, sbuf, 10, ENOTCONN, "closed connection");
	ck_assert_uint_eq(atomic_load(&srel.runs), 129);
	pc_mem_dereg(omem);
	free(over);
	stop(true);
}
END_TEST

static void call_done(struct pc_msg *m, int status, void *arg)
{
	atomic_int *st = arg;
	uint32_t len = m->len;
	unsigned int salt = atomic_load(&salt_sent) + 1;

	if (status == 0 && ((uint8_t *)m->data != cbuf ||
			    diff_at(m->data, len, (uint8_t)salt, pat(len - 1, len, (uint8_t)salt)) >= 0))
		status = 1;
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_store(st, status == 0 ? 0 : status);
}

START_TEST(test_recv_app)
{
	static atomic_int cst;
	struct pc_msg *m;
	uint64_t id, end;
	unsigned int i, n = 0;

	start(SMALL);
	atomic_store(&mode, SRV_APP);
	/* msg_size + 1 and 1 MiB (the 16 MiB message of send_sizes is read into the pool) */
	for (i = 2; i < PC_ARRAY_SIZE(sizes) - 1; i++) {
		uint32_t len = sizes[i];

		atomic_store(&rrel.runs, 0);
		atomic_store(&rrel.status, 1);
		/* from the pool: only the receive side is the application's */
		m = pc_msg_alloc_size(conn, len);
		ck_assert_msg(m, "alloc %u: %s", len, pc_last_error());
		pat_fill(m->data, len, (uint8_t)i);
		m->len = len;
		atomic_store(&salt_sent, i);
		ck_assert_int_eq(pc_send(m), 0);
		wait_ok(++n);
		ck_assert(atomic_load(&in_app));
		ck_assert_uint_eq(atomic_load(&srv_used_kib), 0);
		wait_rel(&rrel, 1);
		ck_assert_int_eq(atomic_load(&rrel.status), 0);
	}
	ck_assert_uint_eq(atomic_load(&asked), 2);
	/* a wrapped request, a wrapped response read into the client's buffer */
	atomic_store(&srel.runs, 0);
	atomic_store(&rrel.runs, 0);
	atomic_store(&mode, SRV_POOL);
	pat_fill(sbuf, 1 << 20, 9);
	atomic_store(&salt_sent, 9);
	atomic_store(&cst, 1);
	m = pc_msg_wrap(conn, smem, sbuf, 1 << 20, released, &srel);
	ck_assert_ptr_nonnull(m);
	atomic_store(&seen_req, 0);
	ck_assert_int_eq(pc_call(m, call_done, (void *)&cst, 0, &id), 0);
	ck_assert_uint_ne(id, 0);
	for (end = pc_test_now_ms() + 60000; atomic_load(&cst) == 1 && pc_test_now_ms() < end;)
		usleep(200);
	ck_assert_int_eq(atomic_load(&cst), 0);
	ck_assert_uint_eq(atomic_load(&cli_asked), 1);
	/* on_large was told the response's id: the call's */
	ck_assert_uint_eq(atomic_load(&seen_req), id);
	wait_rel(&crel, 1);
	ck_assert_int_eq(atomic_load(&crel.status), 0);
	wait_rel(&srel, 1);
	ck_assert_int_eq(atomic_load(&srel.status), 0);
	wait_rel(&rrel, 1);
	ck_assert_int_eq(atomic_load(&rrel.status), 0);
	/* the pool messages' blocks come back once their windows are invalidated */
	for (end = pc_test_now_ms() + 20000; pool_kib(cli) && pc_test_now_ms() < end;)
		usleep(1000);
	ck_assert_uint_eq(pool_kib(cli), 0);
	stop(false);
}
END_TEST

START_TEST(test_recv_decline)
{
	uint64_t end;

	start(SMALL);
	/* declined: the pool */
	atomic_store(&mode, SRV_POOL);
	send_wrapped(1 << 20, 4);
	wait_ok(1);
	ck_assert(!atomic_load(&in_app));
	ck_assert_uint_ge(atomic_load(&srv_used_kib), 1024);
	/* out of range: released() at once with -ERANGE, the pool used, the message intact */
	atomic_store(&mode, SRV_BAD);
	wait_rel(&srel, 1);
	send_wrapped(1 << 20, 5);
	wait_ok(2);
	ck_assert(!atomic_load(&in_app));
	wait_rel(&rrel, 1);
	ck_assert_int_eq(atomic_load(&rrel.status), -ERANGE);
	ck_assert_uint_eq(atomic_load(&asked), 2);
	for (end = pc_test_now_ms() + 20000; pool_kib(srv) && pc_test_now_ms() < end;)
		usleep(1000);
	ck_assert_uint_eq(pool_kib(srv), 0);
	wait_rel(&srel, 2);
	usleep(20000);
	ck_assert_uint_eq(atomic_load(&rrel.runs), 1);
	stop(false);
}
END_TEST

/*
 * pc_call() of a wrapped message whose connection closed: refused
 * (-ENOTCONN) and released, on the worker, which runs released() at once;
 * released() wraps the same buffer again (the same entry comes back) for a
 * call on a second connection. pc_call() must not touch the message once
 * it gave it back: the second call completes, with its response.
 */
static struct pc_conn *conn_b;
static atomic_uint b_runs;
static atomic_int b_status;

static void dead_done(struct pc_msg *m, int status, void *arg)
{
	(void)m;
	(void)status;
	(void)arg;
	ck_abort_msg("the refused call's completion ran");
}

static void b_done(struct pc_msg *m, int status, void *arg)
{
	(void)arg;
	atomic_store(&b_status, status == 0 && m->type != PC_MSG_RESPONSE ? -EPROTO : status);
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_fetch_add(&b_runs, 1);
}

static void rewrap(void *arg, int status)
{
	struct pc_msg *m;

	(void)arg;
	ck_assert_int_eq(status, -ENOTCONN);
	m = pc_msg_wrap(conn_b, smem, sbuf, MSG_SIZE + 1, released, &srel);
	ck_assert_msg(m, "wrap again: %s", pc_last_error());
	ck_assert_int_eq(pc_call(m, b_done, NULL, 0, NULL), 0);
}

START_TEST(test_call_refused_rewrap)
{
	uint64_t end;

	start(SMALL);
	atomic_store(&srel.runs, 0);
	atomic_store(&b_runs, 0);
	atomic_store(&refused_rc, 1);
	conn_b = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), 0, 20000, NULL);
	ck_assert_msg(conn_b, "connect: %s", pc_last_error());
	pat_fill(sbuf, MSG_SIZE + 1, 3);
	atomic_store(&salt_sent, 3);
	atomic_store(&dead_msg, pc_msg_wrap(conn, smem, sbuf, MSG_SIZE + 1, rewrap, NULL));
	ck_assert_ptr_nonnull(atomic_load(&dead_msg));
	ck_assert_int_eq(pc_close(conn), 0);
	end = pc_test_now_ms() + 30000;
	while (!atomic_load(&b_runs) && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&refused_rc), -ENOTCONN);
	ck_assert_uint_eq(atomic_load(&b_runs), 1);
	ck_assert_int_eq(atomic_load(&b_status), 0);
	wait_rel(&srel, 1);
	wait_ok(1);
	pc_conn_put(conn_b);
	stop(true);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rndv_zc");
	TCase *tc = tcase_create("rndv_zc");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_send_sizes);
	tcase_add_test(tc, test_send_close);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_recv_app);
	tcase_add_test(tc, test_recv_decline);
	tcase_add_test(tc, test_call_refused_rewrap);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
