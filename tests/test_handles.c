// SPDX-License-Identifier: MIT
/*
 * rdma suite: connection handles are references (engine.h, "Lifetime").
 *  - pc_connect() to a server that closes at once returns a handle that
 *    stays usable through DOWN, retirement and pc_engine_destroy(): the
 *    calls that need a live connection fail with ENOTCONN, the user
 *    pointer and the final counters are still there, pc_conn_put() frees
 *    it (ASan and TSan builds run this too: a use after free fails there);
 *  - application threads that hold references and keep allocating, sending
 *    (a third of the messages on another connection than their own) and
 *    closing while the server closes connections under them get only 0,
 *    ENOBUFS (allocation), ENOTCONN or EALREADY; every send accepted is
 *    accounted (sent or dropped), every send refused gave its message back,
 *    and every connection retires, even one whose last reference was an
 *    allocation undone after DOWN.
 */
#include <pollcore/engine.h>
#include <pollcore/stats.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

static atomic_uint srv_up, srv_down, cli_up, cli_down;
static atomic_bool srv_close_at_up;	/* the server closes each connection in its UP */
static atomic_bool srv_close_after;	/* the server closes a connection after some messages */
static atomic_bool srv_echo;		/* the server sends every message back */
static atomic_bool cli_hold;		/* the client keeps what it receives (cli_held) */
static struct pc_msg *cli_held;
static atomic_uint srv_msgs;
static int marker;

static void reset(void)
{
	atomic_store(&srv_up, 0);
	atomic_store(&srv_down, 0);
	atomic_store(&cli_up, 0);
	atomic_store(&cli_down, 0);
	atomic_store(&srv_msgs, 0);
	atomic_store(&srv_close_at_up, false);
	atomic_store(&srv_close_after, false);
	atomic_store(&srv_echo, false);
	atomic_store(&cli_hold, false);
	cli_held = NULL;
}

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	if (ev == PC_CONN_DOWN) {
		atomic_fetch_add(&srv_down, 1);
		return;
	}
	atomic_fetch_add(&srv_up, 1);
	if (atomic_load(&srv_close_at_up))
		ck_assert_int_eq(pc_close(c), 0);
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	unsigned int n = atomic_fetch_add(&srv_msgs, 1) + 1;
	struct pc_conn *c = m->conn;

	(void)arg;
	if (atomic_load(&srv_echo)) {
		ck_assert_int_eq(pc_send(m), 0);
		return;
	}
	ck_assert_int_eq(pc_msg_release(m), 0);
	/* every 7th message closes its connection: the clients meet closes mid-stream */
	if (atomic_load(&srv_close_after) && n % 7 == 0) {
		int rc = pc_close(c);

		ck_assert_msg(rc == 0 || rc == -EALREADY, "server pc_close: %d", rc);
	}
}

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)c;
	(void)arg;
	atomic_fetch_add(ev == PC_CONN_UP ? &cli_up : &cli_down, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	if (atomic_load(&cli_hold) && !cli_held) {
		cli_held = m;
		atomic_thread_fence(memory_order_release);
		atomic_store(&cli_hold, false);
		return;
	}
	ck_assert_int_eq(pc_msg_release(m), 0);
}

static void pair(struct pc_engine **srv, struct pc_engine **cli, unsigned int app_threads)
{
	struct pc_engine_params sp = { .size = sizeof(sp), .on_conn = srv_on_conn, .on_msg = srv_on_msg,
				       .no_numa = true };
	struct pc_engine_params cp = { .size = sizeof(cp), .on_conn = cli_on_conn, .on_msg = cli_on_msg,
				       .no_numa = true, .app_threads = app_threads,
				       .tx_bufs = 256 };

	*srv = pc_engine_create(&sp);
	ck_assert_msg(*srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(*srv, pc_test_addr(), 0), 0);
	*cli = pc_engine_create(&cp);
	ck_assert_msg(*cli, "client: %s", pc_last_error());
}

static bool wait_for(atomic_uint *v, unsigned int want, int seconds)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;

	while (atomic_load(v) < want && pc_test_now_ms() < end)
		usleep(1000);
	return atomic_load(v) >= want;
}

static void count_conn(struct pc_conn *c, void *arg)
{
	(void)c;
	(*(unsigned int *)arg)++;
}

/* Connections of @e not retired yet, waited for until none is left (or @seconds pass). */
static unsigned int wait_retired(struct pc_engine *e, int seconds)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;
	unsigned int n;

	for (;;) {
		n = 0;
		pc_engine_for_each_conn(e, count_conn, &n);
		if (!n || pc_test_now_ms() >= end)
			return n;
		usleep(2000);
	}
}

static void op_never_done(struct pc_op *op, int status)
{
	(void)op;
	ck_abort_msg("pc_rdma() returned an error, yet done() ran (%d)", status);
}

/* What a handle answers once its connection is gone, whatever is left of the engine. */
static void check_dead_handle(struct pc_conn *c, uint32_t qpn)
{
	struct pc_conn_info in;

	ck_assert_ptr_eq(pc_conn_user(c), &marker);
	pc_conn_info(c, &in);
	ck_assert_str_eq(in.device, pc_test_device());
	ck_assert_uint_eq(in.qp_num, qpn);
	errno = 0;
	ck_assert_ptr_null(pc_msg_alloc(c));
	ck_assert_int_eq(errno, ENOTCONN);
	/* a large buffer and a wrap too, before anything of the worker is read (ASan) */
	errno = 0;
	ck_assert_ptr_null(pc_msg_alloc_size(c, 1 << 20));
	ck_assert_int_eq(errno, ENOTCONN);
	errno = 0;
	ck_assert_ptr_null(pc_msg_wrap(c, &marker, &marker, sizeof(marker), NULL, NULL));
	ck_assert_int_eq(errno, ENOTCONN);
	ck_assert_int_eq(pc_call_cancel(c, 1), -ENOTCONN);
	ck_assert_int_eq(pc_close(c), -EALREADY);
}

/*
 * The server closes in its UP: the client's DOWN can come before
 * pc_connect() returns, its retirement and the grace period too. The
 * handle stays valid through all of that, and through pc_engine_destroy().
 */
START_TEST(test_handle_outlives_conn_and_engine)
{
	struct pc_engine *srv, *cli;
	struct pc_conn_info in = { 0 };
	struct pc_conn *c, *kept = NULL;
	struct pc_op op = { .code = PC_OP_WRITE, .len = 8 };
	uint32_t lkey, rkey, kept_qpn = 0;
	char buf[64];
	int i, ok = 0;

	reset();
	pair(&srv, &cli, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	atomic_store(&srv_close_at_up, true);
	for (i = 0; i < 20; i++) {
		c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, &marker);
		if (!c) {
			/* the close may beat the client's ESTABLISHED: then nothing is returned */
			ck_assert_msg(errno == ECONNRESET || errno == ECONNREFUSED,
				      "connect %d: %s (%s)", i, strerror(errno), pc_last_error());
			continue;
		}
		pc_conn_info(c, &in);
		ck_assert_uint_ne(in.qp_num, 0);
		ck_assert(wait_for(&cli_down, atomic_load(&cli_up), 30));
		/* DOWN delivered; once retired, no call touches the engine's side of it */
		ck_assert_uint_eq(wait_retired(cli, 30), 0);
		check_dead_handle(c, in.qp_num);
		errno = 0;
		ck_assert_ptr_null(pc_mem_reg(c, buf, sizeof(buf), 0, &lkey, &rkey));
		ck_assert_int_eq(errno, ENOTCONN);
		op.local = buf;
		op.done = op_never_done;
		ck_assert_int_eq(pc_rdma(c, &op), -ENOTCONN);
		/* a second reference, then both dropped: the last one frees */
		ck_assert_ptr_eq(pc_conn_get(c), c);
		pc_conn_put(c);
		ok++;
		if (kept)
			pc_conn_put(kept);
		/* the last one is kept past pc_engine_destroy() */
		kept = c;
		kept_qpn = in.qp_num;
	}
	printf("handles: %d of 20 connects returned a handle before the server's close\n", ok);
	ck_assert_int_ge(ok, 1);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	/* the engines are gone; the handle is not */
	check_dead_handle(kept, kept_qpn);
	pc_conn_put(kept);
}
END_TEST

/*
 * A connection whose received message the application still holds when
 * its engine is destroyed: the engine retires it itself (the message is
 * freed with it), and the handle's final counters stay readable after,
 * when the stats segment they lived in is gone.
 */
START_TEST(test_info_after_destroy_held)
{
	struct pc_engine *srv, *cli;
	struct pc_conn_info in;
	struct pc_msg *m;
	struct pc_conn *c;
	uint32_t qpn;

	reset();
	pair(&srv, &cli, 1);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	ck_assert_msg(pc_stats_segment(cli), "no stats segment: %s", pc_last_error());
	c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, &marker);
	ck_assert_msg(c, "connect: %s", pc_last_error());
	atomic_store(&srv_echo, true);
	atomic_store(&cli_hold, true);
	m = pc_msg_alloc(c);
	ck_assert_ptr_nonnull(m);
	m->len = 48;
	memset(m->data, 0x5a, 48);
	ck_assert_int_eq(pc_send(m), 0);
	while (atomic_load(&cli_hold))
		usleep(1000);
	atomic_thread_fence(memory_order_acquire);
	ck_assert_ptr_nonnull(cli_held);
	pc_conn_info(c, &in);
	qpn = in.qp_num;
	ck_assert_uint_eq(in.held, 1);
	/* the engine goes with the message held: it frees it, and retires the conn itself */
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	check_dead_handle(c, qpn);
	pc_conn_info(c, &in);
	ck_assert_uint_eq(in.msgs_sent, 1);
	ck_assert_uint_eq(in.msgs_recv, 1);
	ck_assert_uint_eq(in.bytes_recv, 48);
	pc_conn_put(c);
}
END_TEST

/* --- app threads holding references, the server closing under them ------------------------- */

enum { APPS = 2, PER_APP = 4 };

struct app {
	pthread_t t;
	struct pc_engine *e;
	unsigned int slot;
	struct pc_conn *conn[PER_APP];
	uint64_t accepted[PER_APP];	/* pc_send() returned 0 */
	uint64_t allocs, enobufs, enotconn, ealready;
};

static atomic_bool apps_stop;

static void *app_main(void *arg)
{
	struct app *a = arg;
	unsigned int k = 0;

	ck_assert_int_eq(pc_app_attach(a->e, a->slot), 0);
	while (!atomic_load(&apps_stop)) {
		unsigned int i = k++ % PER_APP;
		struct pc_msg *m = pc_msg_alloc(a->conn[i]);
		int rc;

		if (!m) {
			ck_assert_msg(errno == ENOBUFS || errno == ENOTCONN, "alloc: %s",
				      strerror(errno));
			if (errno == ENOBUFS)
				a->enobufs++;
			else
				a->enotconn++;
			/* some threads close what the server has not, some close twice */
			if (errno == ENOTCONN) {
				rc = pc_close(a->conn[i]);
				ck_assert_msg(rc == -EALREADY, "close of a closed conn: %d", rc);
				a->ealready++;
			}
			usleep(50);
			continue;
		}
		a->allocs++;
		m->len = 32;
		memset(m->data, (int)i, 32);
		/* one in 16 is handed back unsent: the reference goes back either way */
		if (k % 16 == 0) {
			ck_assert_int_eq(pc_msg_release(m), 0);
			continue;
		}
		/*
		 * One in 3 goes out on the next connection (same worker): its
		 * submission takes a reference on that one, refused once it is
		 * closing; the message goes back then, and must not be lost.
		 */
		if (k % 3 == 0) {
			i = (i + 1) % PER_APP;
			m->conn = a->conn[i];
		}
		rc = pc_send(m);
		if (rc == 0)
			a->accepted[i]++;
		else
			ck_assert_msg(rc == -ENOTCONN, "send: %d", rc);
	}
	return NULL;
}

START_TEST(test_handles_under_closes)
{
	struct pc_engine *srv, *cli;
	struct app apps[APPS];
	struct pc_worker_stats ws;
	unsigned int i, k, conns = APPS * PER_APP;
	uint64_t enotconn = 0;

	reset();
	pair(&srv, &cli, APPS);
	atomic_store(&apps_stop, false);
	for (i = 0; i < APPS; i++) {
		memset(&apps[i], 0, sizeof(apps[i]));
		apps[i].e = cli;
		apps[i].slot = i;
		for (k = 0; k < PER_APP; k++) {
			apps[i].conn[k] = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1,
						     20000, &marker);
			ck_assert_msg(apps[i].conn[k], "connect: %s", pc_last_error());
		}
	}
	ck_assert(wait_for(&srv_up, conns, 30));
	atomic_store(&srv_close_after, true);
	for (i = 0; i < APPS; i++)
		ck_assert_int_eq(pthread_create(&apps[i].t, NULL, app_main, &apps[i]), 0);
	/* every connection is closed by the server within its first messages */
	ck_assert_msg(wait_for(&cli_down, conns, 120), "client DOWN %u of %u",
		      atomic_load(&cli_down), conns);
	/* the apps go on a little against closed connections: undone references */
	usleep(200 * 1000);
	atomic_store(&apps_stop, true);
	for (i = 0; i < APPS; i++) {
		pthread_join(apps[i].t, NULL);
		enotconn += apps[i].enotconn;
	}
	ck_assert_uint_gt(enotconn, 0);
	/*
	 * Nothing the apps hold: every conn retires, which it does only once
	 * every buffer bound to it came back and no reference is left.
	 */
	ck_assert_uint_eq(wait_retired(cli, 30), 0);
	ck_assert_int_eq(pc_engine_stats(cli, 0, &ws), 0);
	ck_assert_uint_eq(ws.conns, 0);
	for (i = 0; i < APPS; i++)
		for (k = 0; k < PER_APP; k++) {
			struct pc_conn_info in;

			pc_conn_info(apps[i].conn[k], &in);
			/*
			 * Each accepted send was posted (msgs_sent) or dropped, counted;
			 * one posted and then flushed by the close counts in both.
			 */
			ck_assert_uint_le(in.msgs_sent, apps[i].accepted[k]);
			ck_assert_uint_le(in.msgs_dropped, apps[i].accepted[k]);
			ck_assert_msg(in.msgs_sent + in.msgs_dropped >= apps[i].accepted[k],
				      "conn %u/%u: %llu accepted, %llu sent + %llu dropped", i, k,
				      (unsigned long long)apps[i].accepted[k],
				      (unsigned long long)in.msgs_sent,
				      (unsigned long long)in.msgs_dropped);
			ck_assert_ptr_eq(pc_conn_user(apps[i].conn[k]), &marker);
		}
	printf("handles: %u connections, allocs %llu/%llu, ENOBUFS %llu, ENOTCONN %llu\n", conns,
	       (unsigned long long)apps[0].allocs, (unsigned long long)apps[1].allocs,
	       (unsigned long long)(apps[0].enobufs + apps[1].enobufs),
	       (unsigned long long)enotconn);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	for (i = 0; i < APPS; i++)
		for (k = 0; k < PER_APP; k++)
			pc_conn_put(apps[i].conn[k]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handles");
	TCase *tc = tcase_create("handles");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_handle_outlives_conn_and_engine);
	tcase_add_test(tc, test_info_after_destroy_held);
	tcase_add_test(tc, test_handles_under_closes);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
