// SPDX-License-Identifier: MIT
/*
 * rdma suite: pc_call() with a completion, each way a call can end, each
 * counted exactly once:
 *  - the response (handler mode: on the worker; ring mode: inside the
 *    caller's pc_app_poll(), on the calling thread), bytes checked;
 *  - the deadline, the request given back intact; its late response
 *    dropped and counted (late_responses);
 *  - pc_call_cancel(), then the late response;
 *  - the connection closing under calls in flight (-ENOTCONN);
 *  - a peer that never answers: the connection closes once more than
 *    max_unanswered calls are waiting, saying so.
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

/* --- the server: answers at once, or holds requests until told ---------------------------- */

enum { HOLD_MAX = 256 };

static atomic_bool srv_hold;	/* keep requests instead of answering */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_msg *held[HOLD_MAX];
static unsigned int nheld;
static atomic_uint srv_down;

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	if (ev == PC_CONN_DOWN)
		atomic_fetch_add(&srv_down, 1);
}

/* The response: the request's bytes, each plus one. */
static void answer(struct pc_msg *m)
{
	unsigned char *d = m->data;
	int rc;

	for (uint32_t i = 0; i < m->len; i++)
		d[i] = (unsigned char)(d[i] + 1);
	rc = pc_reply(m);
	ck_assert_msg(rc == 0 || rc == -ENOTCONN, "reply: %d", rc);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	ck_assert_int_eq(m->type, PC_MSG_REQUEST);
	if (!atomic_load(&srv_hold)) {
		answer(m);
		return;
	}
	pthread_mutex_lock(&held_lock);
	ck_assert_uint_lt(nheld, HOLD_MAX);
	held[nheld++] = m;
	pthread_mutex_unlock(&held_lock);
}

static unsigned int held_count(void)
{
	unsigned int n;

	pthread_mutex_lock(&held_lock);
	n = nheld;
	pthread_mutex_unlock(&held_lock);
	return n;
}

/* Answers (late) everything held; from the test's thread, through the worker's ring. */
static void answer_held(void)
{
	pthread_mutex_lock(&held_lock);
	while (nheld)
		answer(held[--nheld]);
	pthread_mutex_unlock(&held_lock);
}

/* --- the client's completions ------------------------------------------------------------------ */

struct call {
	atomic_uint runs;	/* exactly once */
	atomic_int status;
	unsigned char pattern;
	uint32_t len;
	bool bytes_ok;
	bool on_caller;		/* ring mode: ran on the thread that called */
	pthread_t caller;
	uint64_t id;
};

static void call_done(struct pc_msg *m, int status, void *arg)
{
	struct call *k = arg;
	const unsigned char *d = m->data;
	unsigned char want = (unsigned char)(k->pattern + (status == 0));

	ck_assert_ptr_nonnull(m);
	k->bytes_ok = m->len == k->len && m->type == (status ? PC_MSG_REQUEST : PC_MSG_RESPONSE);
	for (uint32_t i = 0; k->bytes_ok && i < m->len; i++)
		k->bytes_ok = d[i] == want;
	k->on_caller = pthread_equal(pthread_self(), k->caller);
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_store(&k->status, status);
	/* last: the test thread reads the rest once it sees this */
	atomic_fetch_add(&k->runs, 1);
}

static struct pc_engine *srv, *cli;
static struct pc_conn *conn;
static atomic_uint cli_down;
static char down_why[256];

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	if (ev == PC_CONN_DOWN) {
		snprintf(down_why, sizeof(down_why), "%s", pc_last_error());
		atomic_fetch_add(&cli_down, 1);
	}
}

/* Handler mode: every message the client gets is a call's, through its completion. */
static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	ck_abort_msg("a message of type %u reached on_msg, not a completion", m->type);
}

static void start(enum pc_handoff mode, uint32_t window, uint32_t max_unanswered)
{
	struct pc_engine_params sp = { .on_conn = srv_on_conn, .on_msg = srv_on_msg,
				       .no_numa = true, .window = window };
	struct pc_engine_params cp = { .on_conn = cli_on_conn, .no_numa = true, .handoff = mode,
				       .on_msg = mode == PC_HANDOFF_HANDLER ? cli_on_msg : NULL,
				       .window = window, .max_unanswered = max_unanswered };

	atomic_store(&srv_hold, false);
	atomic_store(&srv_down, 0);
	atomic_store(&cli_down, 0);
	nheld = 0;
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	conn = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(conn, "connect: %s", pc_last_error());
}

static void stop(void)
{
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(conn);
}

/*
 * Makes call @k (@len bytes of its pattern) with @timeout_ms; returns
 * pc_call()'s answer, or -ENOTCONN when the connection closed first.
 */
static int call(struct call *k, uint32_t len, uint32_t timeout_ms)
{
	uint64_t end = pc_test_now_ms() + 30000;
	struct pc_msg *m;
	int rc;

	k->caller = pthread_self();
	k->len = len;
	while (!(m = pc_msg_alloc(conn))) {
		if (errno == ENOTCONN)
			return -ENOTCONN;
		ck_assert_int_eq(errno, ENOBUFS);
		ck_assert(pc_test_now_ms() < end);
		usleep(100);
	}
	memset(m->data, k->pattern, len);
	m->len = len;
	while ((rc = pc_call(m, call_done, k, (uint64_t)timeout_ms * 1000, &k->id)) == -ENOBUFS ||
	       rc == -EAGAIN) {
		ck_assert(pc_test_now_ms() < end);
		usleep(100);
	}
	if (rc && rc != -ENOTCONN)
		ck_assert_int_eq(pc_msg_release(m), 0);
	return rc;
}

/* Waits until every call of @k[0..@n) ran once (polling, in ring mode). */
static void wait_runs(struct call *k, unsigned int n, bool ring, int seconds)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;
	struct pc_msg *msgs[16];
	unsigned int i, done;

	do {
		if (ring)
			ck_assert_int_eq(pc_app_poll(cli, msgs, 16), 0);
		for (i = done = 0; i < n; i++)
			done += atomic_load(&k[i].runs) != 0;
		if (done == n)
			break;
		usleep(200);
	} while (pc_test_now_ms() < end);
	for (i = 0; i < n; i++)
		ck_assert_msg(atomic_load(&k[i].runs) == 1, "call %u: completion ran %u times", i,
			      atomic_load(&k[i].runs));
}

static void conn_counts(uint64_t *timeouts, uint64_t *cancels, uint64_t *late)
{
	struct pc_conn_info in;

	pc_conn_info(conn, &in);
	*timeouts = in.call_timeouts;
	*cancels = in.call_cancels;
	*late = in.late_responses;
}

static void wait_late(uint64_t want)
{
	uint64_t end = pc_test_now_ms() + 30000, t, c, l = 0;

	while (pc_test_now_ms() < end) {
		conn_counts(&t, &c, &l);
		if (l >= want)
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(l, want);
}

/* --- the tests ---------------------------------------------------------------------------------- */

static void responses(enum pc_handoff mode)
{
	enum { N = 200 };
	static struct call k[N];
	bool ring = mode == PC_HANDOFF_RING;
	unsigned int i;

	start(mode, 0, 0);
	memset(k, 0, sizeof(k));
	for (i = 0; i < N; i++) {
		k[i].pattern = (unsigned char)(i * 7);
		ck_assert_int_eq(call(&k[i], 1 + i * 13 % 2000, i % 2 ? 60000 : 0), 0);
		if (ring && i % 16 == 15)
			wait_runs(k, i + 1, ring, 30);
	}
	wait_runs(k, N, ring, 60);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(atomic_load(&k[i].status), 0);
		ck_assert_msg(k[i].bytes_ok, "call %u: response bytes", i);
		/* ring mode: on the caller, inside pc_app_poll(); handler mode: on the worker */
		ck_assert_int_eq(k[i].on_caller, ring);
	}
	stop();
}

START_TEST(test_responses_handler)
{
	responses(PC_HANDOFF_HANDLER);
}
END_TEST

START_TEST(test_responses_ring)
{
	responses(PC_HANDOFF_RING);
}
END_TEST

/* A deadline, then the late response; a cancel, then its late response. */
START_TEST(test_timeout_and_cancel)
{
	struct call k[2] = { { .pattern = 0x11 }, { .pattern = 0x22 } };
	uint64_t t, c, l;

	start(PC_HANDOFF_RING, 0, 0);
	atomic_store(&srv_hold, true);
	ck_assert_int_eq(call(&k[0], 100, 50), 0);
	wait_runs(&k[0], 1, true, 30);
	ck_assert_int_eq(atomic_load(&k[0].status), -ETIMEDOUT);
	/* the request, given back intact */
	ck_assert(k[0].bytes_ok);
	ck_assert(k[0].on_caller);

	ck_assert_int_eq(call(&k[1], 200, 0), 0);
	while (held_count() < 2)
		usleep(1000);
	ck_assert_int_eq(pc_call_cancel(conn, k[1].id), 0);
	wait_runs(&k[1], 1, true, 30);
	ck_assert_int_eq(atomic_load(&k[1].status), -ECANCELED);
	ck_assert(k[1].bytes_ok);
	/* a second cancel, and a cancel of an id never used: nothing */
	ck_assert_int_eq(pc_call_cancel(conn, k[1].id), 0);
	ck_assert_int_eq(pc_call_cancel(conn, 999999), 0);

	answer_held();
	wait_late(2);
	conn_counts(&t, &c, &l);
	ck_assert_uint_eq(t, 1);
	ck_assert_uint_eq(c, 1);
	/* nothing ran twice, and the connection is fine: a call still works */
	wait_runs(k, 2, true, 1);
	atomic_store(&srv_hold, false);
	{
		struct call k3 = { .pattern = 0x33 };

		ck_assert_int_eq(call(&k3, 64, 10000), 0);
		wait_runs(&k3, 1, true, 30);
		ck_assert_int_eq(atomic_load(&k3.status), 0);
		ck_assert(k3.bytes_ok);
	}
	ck_assert_uint_eq(atomic_load(&cli_down), 0);
	stop();
}
END_TEST

/* The connection closes under calls in flight, in the backlog, or answered but not polled. */
START_TEST(test_close_completes_each_once)
{
	enum { N = 48 };
	static struct call k[N];
	unsigned int i;

	start(PC_HANDOFF_HANDLER, 16, 0);
	memset(k, 0, sizeof(k));
	atomic_store(&srv_hold, true);
	for (i = 0; i < 16; i++) {
		k[i].pattern = (unsigned char)i;
		ck_assert_int_eq(call(&k[i], 512, i % 2 ? 0 : 60000), 0);
	}
	ck_assert_int_eq(pc_close(conn), 0);
	wait_runs(k, 16, false, 30);
	for (i = 0; i < 16; i++) {
		ck_assert_int_eq(atomic_load(&k[i].status), -ENOTCONN);
		ck_assert_msg(k[i].bytes_ok, "call %u: the request given back", i);
	}
	/* a call on the closed connection fails at once; no completion */
	{
		struct pc_msg *m = pc_msg_alloc(conn);

		ck_assert_ptr_null(m);
		ck_assert_int_eq(errno, ENOTCONN);
	}
	answer_held();
	stop();
}
END_TEST

/* A peer that never answers: once more than max_unanswered calls wait, the connection closes. */
START_TEST(test_unanswered_close)
{
	enum { N = 4 };
	struct call k[N];
	unsigned int i, made;
	int rc;

	start(PC_HANDOFF_RING, 8, 2);
	memset(k, 0, sizeof(k));
	atomic_store(&srv_hold, true);
	/*
	 * On a slow host (sanitizers) the first calls may time out, and the
	 * connection close, before the last is made: then it is refused.
	 */
	for (made = 0; made < N; made++) {
		k[made].pattern = (unsigned char)(0x40 + made);
		rc = call(&k[made], 32, 20);
		if (rc == -ENOTCONN)
			break;
		ck_assert_int_eq(rc, 0);
	}
	ck_assert_uint_ge(made, 2);
	wait_runs(k, made, true, 30);
	{
		unsigned int timedout = 0;

		/* the close may come between two housekeeping turns: the rest end with it */
		for (i = 0; i < made; i++) {
			int st = atomic_load(&k[i].status);

			ck_assert_msg(st == -ETIMEDOUT || st == -ENOTCONN, "call %u: %d", i, st);
			timedout += st == -ETIMEDOUT;
		}
		ck_assert_uint_ge(timedout, 2);
	}
	{
		uint64_t end = pc_test_now_ms() + 30000;

		while (!atomic_load(&cli_down) && pc_test_now_ms() < end)
			usleep(1000);
	}
	ck_assert_uint_eq(atomic_load(&cli_down), 1);
	ck_assert_msg(strstr(down_why, "calls unanswered"), "DOWN said: %s", down_why);
	answer_held();
	stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("calls");
	TCase *tc = tcase_create("calls");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_responses_handler);
	tcase_add_test(tc, test_responses_ring);
	tcase_add_test(tc, test_timeout_and_cancel);
	tcase_add_test(tc, test_close_completes_each_once);
	tcase_add_test(tc, test_unanswered_close);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
