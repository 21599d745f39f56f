// SPDX-License-Identifier: MIT
/*
 * rdma suite: the dataplane end to end on the soft-RoCE device. A server
 * engine and a client engine in one process talk over rdma_cm on
 * fe80::ff:fe00:1%d0 (rxe0's GID 0). Every test checks real outcomes:
 * sequence numbers per connection, bytes, counters, exact errors.
 */
#include <pollcore/engine.h>
#include <pollcore/verbs.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pc_test.h"

#define ADDR "fe80::ff:fe00:1%d0"
#define MAXC 8

static const char *addr(void)
{
	const char *a = getenv("PC_TEST_ADDR");

	return a ? a : ADDR;
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

	(void)arg;
	if (d)
		usleep((useconds_t)d);
	atomic_fetch_add(&srv_msgs, 1);
	/* echo in place: the request's buffer carries the answer */
	if (m->type == PC_MSG_REQUEST)
		ck_assert_int_eq(pc_reply(m), 0);
	else
		ck_assert_int_eq(pc_send(m), 0);
}

static struct pc_engine *server_start(unsigned int workers, uint16_t *port)
{
	struct pc_engine_params p = {
		.workers_per_device = workers,
		.on_conn = srv_on_conn,
		.on_msg = srv_on_msg,
		.no_numa = true,
	};
	struct pc_engine *e;

	atomic_store(&srv_up, 0);
	atomic_store(&srv_down, 0);
	atomic_store(&srv_msgs, 0);
	atomic_store(&srv_delay_us, 0);
	e = pc_engine_create(&p);
	ck_assert_msg(e, "server: %s", pc_last_error());
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
	atomic_store(&x->next_expected, seq + 1);
	atomic_fetch_add(&x->received, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	cli_check(m);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

static struct pc_engine *client_start(enum pc_handoff mode, unsigned int workers,
				      unsigned int app_threads)
{
	struct pc_engine_params p = {
		.workers_per_device = workers,
		.handoff = mode,
		.app_threads = app_threads,
		.on_conn = cli_on_conn,
		.on_msg = mode == PC_HANDOFF_HANDLER ? cli_on_msg : NULL,
		.no_numa = true,
	};
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "client: %s", pc_last_error());
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

/* Sends @count messages of @size on connection @i, retrying on backpressure. */
static void send_seq(unsigned int i, uint32_t count, uint32_t size, bool rpc)
{
	uint32_t seq;

	for (seq = 0; seq < count; seq++) {
		struct pc_msg *m;
		int ret;

		while (!(m = pc_msg_alloc(cc[i].conn))) {
			ck_assert_int_eq(errno, ENOBUFS);
			usleep(50);
		}
		m->len = fill(m->data, size, i, seq);
		do {
			ret = rpc ? pc_call(m, NULL) : pc_send(m);
			if (ret)
				usleep(50);
		} while (ret == -ENOBUFS || ret == -EAGAIN);
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
		ck_assert_msg(atomic_load(&cc[i].received) == count,
			      "conn %u: received %u of %u", i, atomic_load(&cc[i].received), count);
		ck_assert_uint_eq(atomic_load(&cc[i].bad), 0);
	}
}

/* --- tests ------------------------------------------------------------------------------- */

START_TEST(test_connect_echo)
{
	uint16_t port;
	struct pc_engine *srv = server_start(1, &port);
	struct pc_engine *cli = client_start(PC_HANDOFF_HANDLER, 1, 1);
	struct pc_conn_info info;

	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	client_connect(cli, port, 1);
	pc_conn_info(cc[0].conn, &info);
	ck_assert_str_eq(info.device, "rxe0");
	ck_assert(!info.raw);
	send_seq(0, 1000, 64, false);
	wait_received(1, 1000, 60);
	ck_assert_uint_eq(atomic_load(&srv_msgs), 1000);
	pc_conn_info(cc[0].conn, &info);
	ck_assert_uint_eq(info.msgs_sent, 1000);
	ck_assert_uint_eq(info.msgs_recv, 1000);
	pc_engine_print_stats(srv, stdout);
	pc_engine_print_stats(cli, stdout);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("echo");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_connect_echo);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
