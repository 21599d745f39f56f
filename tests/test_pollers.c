// SPDX-License-Identifier: MIT
/*
 * rdma suite: per-worker pollers (pollcore/poller.h) on the soft-RoCE device.
 *
 * The API's argument errors; which thread a poller runs on and what
 * pc_worker_self(), pc_worker_index() and pc_conn_worker() say there; the
 * counters its return values feed (poller_work, poller_errors) in busy and
 * hybrid idle; an fd poller waking a sleeping worker (wakeups_poller);
 * removal from another thread waiting out a running call, from inside the
 * poller, and of another poller of the same worker; the slot limit; and the
 * storage pattern: a handler defers requests into a per-worker queue that
 * the worker's poller answers. Every case checks exact counts.
 */
#include <pollcore/engine.h>
#include <pollcore/poller.h>
#include <pollcore/stats.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "pc_test.h"

static void on_msg_release(struct pc_msg *m, void *arg)
{
	(void)arg;
	pc_msg_release(m);
}

/* An engine on the test device with no connection: its workers just loop. */
static struct pc_engine *engine_only(unsigned int workers, enum pc_idle idle, uint32_t spins)
{
	const char *dev[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = dev,
		.workers_per_device = workers,
		.idle = idle,
		.idle_spins = spins,
		.on_msg = on_msg_release,
		.no_numa = true,
	};
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "engine: %s", pc_last_error());
	ck_assert_uint_eq(pc_engine_nworkers(e), workers);
	return e;
}

static struct pc_worker_stats stats_of(struct pc_engine *e, unsigned int idx)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(e, idx, &st), 0);
	return st;
}

/* Waits up to @ms for *@v >= @min; returns the last value seen. */
static unsigned long wait_ge(atomic_ulong *v, unsigned long min, unsigned int ms)
{
	uint64_t end = pc_test_now_ms() + ms;

	while (atomic_load(v) < min && pc_test_now_ms() < end)
		usleep(1000);
	return atomic_load(v);
}

static int nop_poller(void *arg)
{
	atomic_ulong *calls = arg;

	if (calls)
		atomic_fetch_add(calls, 1);
	return 0;
}

/* --- argument errors ---------------------------------------------------------------------- */

START_TEST(test_arg_errors)
{
	struct pc_engine *e = engine_only(1, PC_IDLE_BUSY, 0);
	struct pc_worker *w;
	struct pc_poller *p;

	errno = 0;
	ck_assert_ptr_null(pc_engine_worker(e, 1));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_engine_worker(e, 1000));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_engine_worker(NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	w = pc_engine_worker(e, 0);
	ck_assert_ptr_nonnull(w);
	ck_assert_uint_eq(pc_worker_index(w), 0);

	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller(NULL, nop_poller, NULL));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller(w, NULL, NULL));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller_fd(w, nop_poller, NULL, -2));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller_fd(NULL, nop_poller, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller_fd(w, NULL, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);

	ck_assert_int_eq(pc_worker_remove_poller(NULL), -EINVAL);
	/* -1 is "no fd", as pc_worker_add_poller() */
	p = pc_worker_add_poller_fd(w, nop_poller, NULL, -1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pc_worker_remove_poller(p), 0);
	ck_assert_int_eq(pc_worker_remove_poller(p), -EINVAL);
	/* the test thread is no worker */
	ck_assert_ptr_null(pc_worker_self());
	pc_engine_destroy(e);
}
END_TEST

/* --- which thread ------------------------------------------------------------------------- */

struct whoami {
	struct pc_worker *expect;
	atomic_ulong calls;
	atomic_uint bad_self, bad_index;
	_Atomic(pthread_t) thread;
	unsigned int index;
};

static int whoami_poller(void *arg)
{
	struct whoami *x = arg;
	struct pc_worker *self = pc_worker_self();

	if (self != x->expect)
		atomic_fetch_add(&x->bad_self, 1);
	if (!self || pc_worker_index(self) != x->index)
		atomic_fetch_add(&x->bad_index, 1);
	atomic_store(&x->thread, pthread_self());
	atomic_fetch_add(&x->calls, 1);
	return 0;
}

/* Each worker's poller runs on that worker, never on the thread that added it. */
START_TEST(test_thread_identity)
{
	struct pc_engine *e = engine_only(2, PC_IDLE_BUSY, 0);
	struct whoami x[2];
	struct pc_poller *p[2];
	unsigned int i;

	memset(x, 0, sizeof(x));
	for (i = 0; i < 2; i++) {
		x[i].expect = pc_engine_worker(e, i);
		x[i].index = i;
		ck_assert_ptr_nonnull(x[i].expect);
		ck_assert_uint_eq(pc_worker_index(x[i].expect), i);
		p[i] = pc_worker_add_poller(x[i].expect, whoami_poller, &x[i]);
		ck_assert_ptr_nonnull(p[i]);
	}
	ck_assert_ptr_ne(x[0].expect, x[1].expect);
	for (i = 0; i < 2; i++)
		ck_assert_uint_ge(wait_ge(&x[i].calls, 100, 30000), 100);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pc_worker_remove_poller(p[i]), 0);
		ck_assert_uint_eq(atomic_load(&x[i].bad_self), 0);
		ck_assert_uint_eq(atomic_load(&x[i].bad_index), 0);
		ck_assert(!pthread_equal(atomic_load(&x[i].thread), pthread_self()));
	}
	ck_assert(!pthread_equal(atomic_load(&x[0].thread), atomic_load(&x[1].thread)));
	ck_assert_ptr_null(pc_worker_self());
	pc_engine_destroy(e);
}
END_TEST

/* --- a server and a client ------------------------------------------------------------------ */

#define NCONN 2

/* Server: connection k goes to worker k % nworkers. */
static atomic_uint srv_next_worker;

static int srv_choose(const char *device, unsigned int nworkers, void *arg)
{
	(void)device;
	(void)arg;
	return (int)(atomic_fetch_add(&srv_next_worker, 1) % nworkers);
}

/* What the server's handlers saw: worker by index, per connection event and message. */
static atomic_uint srv_up, srv_handler_bad;

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_worker *self = pc_worker_self();

	(void)arg;
	if (!self || pc_conn_worker(c) != self)
		atomic_fetch_add(&srv_handler_bad, 1);
	if (ev == PC_CONN_UP)
		atomic_fetch_add(&srv_up, 1);
}

/* The client's side: the conn, and the worker its handlers ran on. */
struct cli_conn {
	struct pc_conn *conn;
	uint32_t id;
	_Atomic(struct pc_worker *) handler_worker;
	atomic_uint handler_bad;
	atomic_ulong received;
	atomic_uint bad;
	uint64_t last_req_id;	/* the handler's: ids grow per calling thread */
};

static struct cli_conn cc[NCONN];

/* Request bytes for (conn, seq): a header, then a pattern. */
struct hdr {
	uint32_t conn, seq, len, magic;
};

#define REQ_MAGIC 0x72657131u
#define REP_MAGIC 0x72657032u

static uint8_t req_byte(uint32_t conn, uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 7 + i * 3 + conn);
}

/* What the server's poller answers: the bytes complemented. */
static uint8_t rep_byte(uint32_t conn, uint32_t seq, uint32_t i)
{
	return (uint8_t)~req_byte(conn, seq, i);
}

static uint32_t req_len(uint32_t seq)
{
	return (uint32_t)sizeof(struct hdr) + 1 + seq % 997;
}

static struct pc_engine *server_start(unsigned int workers, enum pc_idle idle,
				      void (*on_msg)(struct pc_msg *, void *))
{
	const char *dev[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = dev,
		.workers_per_device = workers,
		.idle = idle,
		.idle_spins = 100,
		.choose_worker = srv_choose,
		.on_conn = srv_on_conn,
		.on_msg = on_msg,
		.no_numa = true,
	};
	struct pc_engine *e;

	atomic_store(&srv_next_worker, 0);
	atomic_store(&srv_up, 0);
	atomic_store(&srv_handler_bad, 0);
	e = pc_engine_create(&p);
	ck_assert_msg(e, "server: %s", pc_last_error());
	return e;
}

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct cli_conn *x = pc_conn_user(c);

	(void)ev;
	(void)arg;
	if (x && pc_conn_worker(c) != pc_worker_self())
		atomic_fetch_add(&x->handler_bad, 1);
}

/* Client handler: a response must be exactly the server poller's answer. */
static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct cli_conn *x = pc_conn_user(m->conn);
	const uint8_t *b = m->data;
	struct hdr h;
	uint32_t i, seq;

	(void)arg;
	atomic_store(&x->handler_worker, pc_worker_self());
	if (pc_conn_worker(m->conn) != pc_worker_self())
		atomic_fetch_add(&x->handler_bad, 1);
	/* responses come in order: the seq-th one answers the seq-th call */
	seq = (uint32_t)atomic_load(&x->received);
	if (m->req_id <= x->last_req_id)
		atomic_fetch_add(&x->bad, 1);
	x->last_req_id = m->req_id;
	memcpy(&h, b, sizeof(h));
	if (m->type != PC_MSG_RESPONSE || m->len != req_len(seq) || h.magic != REP_MAGIC ||
	    h.conn != x->id || h.seq != seq || h.len != m->len) {
		atomic_fetch_add(&x->bad, 1);
	} else {
		for (i = sizeof(h); i < m->len; i++)
			if (b[i] != rep_byte(x->id, seq, i)) {
				atomic_fetch_add(&x->bad, 1);
				break;
			}
	}
	atomic_fetch_add(&x->received, 1);
	pc_msg_release(m);
}

static struct pc_engine *client_start(unsigned int workers, uint16_t port)
{
	const char *dev[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = dev,
		.workers_per_device = workers,
		.on_conn = cli_on_conn,
		.on_msg = cli_on_msg,
		.no_numa = true,
	};
	struct pc_engine *e = pc_engine_create(&p);
	unsigned int i;

	ck_assert_msg(e, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(e, 0), 0);
	/* the previous test's handles (pc_connect()'s references) */
	for (i = 0; i < NCONN; i++)
		pc_conn_put(cc[i].conn);
	memset(cc, 0, sizeof(cc));
	for (i = 0; i < NCONN; i++) {
		cc[i].id = i;
		cc[i].conn = pc_connect(e, pc_test_addr(), port, -1, 10000, &cc[i]);
		ck_assert_msg(cc[i].conn, "connect %u: %s", i, pc_last_error());
	}
	return e;
}

/* @count requests on connection @i (pc_call), retrying on backpressure. */
static void send_requests(unsigned int i, uint32_t count)
{
	uint64_t end = pc_test_now_ms() + 60000;
	uint32_t seq;

	for (seq = 0; seq < count; seq++) {
		struct pc_msg *m;
		struct hdr h = { i, seq, req_len(seq), REQ_MAGIC };
		uint8_t *b;
		uint64_t id = 0;
		uint32_t k;
		int ret;

		while (!(m = pc_msg_alloc(cc[i].conn))) {
			ck_assert_int_eq(errno, ENOBUFS);
			ck_assert_msg(pc_test_now_ms() < end, "conn %u: no send buffer at %u", i, seq);
			usleep(50);
		}
		b = m->data;
		memcpy(b, &h, sizeof(h));
		for (k = sizeof(h); k < h.len; k++)
			b[k] = req_byte(i, seq, k);
		m->len = h.len;
		while ((ret = pc_call(m, NULL, NULL, 0, &id)) == -EAGAIN || ret == -ENOBUFS) {
			ck_assert_msg(pc_test_now_ms() < end, "conn %u: stuck at %u", i, seq);
			usleep(50);
		}
		ck_assert_int_eq(ret, 0);
		ck_assert_uint_ne(id, 0);
		end = pc_test_now_ms() + 60000;
	}
}

/* --- pc_conn_worker and the handlers' worker ------------------------------------------------ */

struct conn_probe {
	atomic_ulong calls;
	_Atomic(pthread_t) thread;
};

static int thread_probe(void *arg)
{
	struct conn_probe *x = arg;

	atomic_store(&x->thread, pthread_self());
	atomic_fetch_add(&x->calls, 1);
	return 0;
}

static _Atomic(pthread_t) srv_msg_thread[2];
static atomic_ulong srv_msgs;

static void srv_echo(struct pc_msg *m, void *arg)
{
	struct pc_worker *self = pc_worker_self();
	struct hdr h;

	(void)arg;
	if (!self || pc_conn_worker(m->conn) != self) {
		atomic_fetch_add(&srv_handler_bad, 1);
	} else {
		atomic_store(&srv_msg_thread[pc_worker_index(self)], pthread_self());
	}
	/* answer as the storage poller would, here in the handler */
	memcpy(&h, m->data, sizeof(h));
	h.magic = REP_MAGIC;
	memcpy(m->data, &h, sizeof(h));
	for (uint32_t i = sizeof(h); i < m->len; i++)
		((uint8_t *)m->data)[i] = (uint8_t)~((uint8_t *)m->data)[i];
	atomic_fetch_add(&srv_msgs, 1);
	if (pc_reply(m))
		atomic_fetch_add(&srv_handler_bad, 1);
}

/*
 * pc_conn_worker() names the worker whose thread runs the connection's
 * handlers, on both sides; a poller on that worker runs on the same thread.
 */
START_TEST(test_conn_worker)
{
	struct pc_engine *srv = server_start(2, PC_IDLE_BUSY, srv_echo);
	struct pc_engine *cli;
	struct conn_probe probe[2];
	struct pc_poller *pp[2];
	struct pc_worker *sw[2];
	unsigned int i;

	memset(probe, 0, sizeof(probe));
	atomic_store(&srv_msgs, 0);
	for (i = 0; i < 2; i++) {
		sw[i] = pc_engine_worker(srv, i);
		pp[i] = pc_worker_add_poller(sw[i], thread_probe, &probe[i]);
		ck_assert_ptr_nonnull(pp[i]);
	}
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = client_start(2, pc_listen_port(srv));
	for (i = 0; i < NCONN; i++)
		send_requests(i, 50);
	for (i = 0; i < NCONN; i++) {
		uint64_t end = pc_test_now_ms() + 30000;

		while (atomic_load(&cc[i].received) < 50 && pc_test_now_ms() < end)
			usleep(1000);
		ck_assert_uint_eq(atomic_load(&cc[i].received), 50);
		ck_assert_uint_eq(atomic_load(&cc[i].bad), 0);
		ck_assert_uint_eq(atomic_load(&cc[i].handler_bad), 0);
		/* client side: the handlers ran on the worker pc_conn_worker() names */
		ck_assert_ptr_eq(atomic_load(&cc[i].handler_worker), pc_conn_worker(cc[i].conn));
		ck_assert_ptr_nonnull(pc_conn_worker(cc[i].conn));
	}
	ck_assert_uint_eq(atomic_load(&srv_up), NCONN);
	ck_assert_uint_eq(atomic_load(&srv_msgs), 50 * NCONN);
	ck_assert_uint_eq(atomic_load(&srv_handler_bad), 0);
	/* server side: connection k on worker k (choose_worker); each worker's handler
	 * thread is the thread its poller runs on */
	for (i = 0; i < 2; i++) {
		ck_assert_uint_gt(atomic_load(&probe[i].calls), 0);
		ck_assert(pthread_equal(atomic_load(&srv_msg_thread[i]), atomic_load(&probe[i].thread)));
		ck_assert_int_eq(pc_worker_remove_poller(pp[i]), 0);
	}
	ck_assert(!pthread_equal(atomic_load(&srv_msg_thread[0]), atomic_load(&srv_msg_thread[1])));
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
}
END_TEST

/* --- return values and the counters ----------------------------------------------------------- */

struct counting {
	atomic_ulong calls;
	unsigned long nwork, nerr;	/* calls 1..nwork return 1, the next nerr -EIO, then 0 */
};

static int counting_poller(void *arg)
{
	struct counting *x = arg;
	unsigned long k = atomic_fetch_add(&x->calls, 1);

	if (k < x->nwork)
		return 1;
	if (k < x->nwork + x->nerr)
		return -EIO;
	return 0;
}

/*
 * The poller counters of worker 0 as published in the stats segment, and
 * as pollcore-stat shows them (--json, and the line under the table) when
 * the tool was built.
 */
static void check_published(struct pc_engine *e, uint64_t work, uint64_t errors)
{
	static struct pc_stats_worker sw;
	struct pc_stats *seg = pc_stats_open(pc_stats_segment(e));
	const char *tool = getenv("PC_BUILD_ROOT");
	uint64_t end = pc_test_now_ms() + 5000;
	char cmd[1024], out[65536], want[256];
	size_t n;
	FILE *f;

	ck_assert_msg(seg, "%s: %s", pc_stats_segment(e), pc_last_error());
	do {
		ck_assert_int_eq(pc_stats_read_worker(seg, 0, &sw), 0);
	} while (sw.st.poller_work != work && pc_test_now_ms() < end && !usleep(10000));
	ck_assert_uint_eq(sw.st.poller_work, work);
	ck_assert_uint_eq(sw.st.poller_errors, errors);
	pc_stats_close(seg);

	snprintf(cmd, sizeof(cmd), "%s/tools/pollcore-stat", tool ? tool : ".");
	if (!tool || access(cmd, X_OK))
		return;
	snprintf(cmd, sizeof(cmd), "%s/tools/pollcore-stat %d --json 2>&1", tool, (int)getpid());
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	ck_assert_int_eq(pclose(f), 0);
	snprintf(want, sizeof(want), "\"poller_work\": %llu, \"poller_errors\": %llu",
		 (unsigned long long)work, (unsigned long long)errors);
	ck_assert_msg(strstr(out, want), "pollcore-stat --json: no '%s' in %s", want, out);
	/* a sanitized build's tool must be clean too (UBSan only prints) */
	ck_assert_msg(!strstr(out, "runtime error"), "pollcore-stat --json: %s", out);
	snprintf(cmd, sizeof(cmd), "%s/tools/pollcore-stat %d --count 1 --interval 0.2 2>&1", tool,
		 (int)getpid());
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	ck_assert_int_eq(pclose(f), 0);
	snprintf(want, sizeof(want), "pollers since start: work %llu, errors %llu, fd wakeups 0",
		 (unsigned long long)work, (unsigned long long)errors);
	ck_assert_msg(strstr(out, want), "pollcore-stat: no '%s' in %s", want, out);
	ck_assert_msg(!strstr(out, "runtime error"), "pollcore-stat: %s", out);
	printf("pollcore-stat shows: %s\n", want);
}

static void counting_case(enum pc_idle idle)
{
	struct pc_engine *e = engine_only(1, idle, 100);
	struct pc_worker *w = pc_engine_worker(e, 0);
	struct counting x = { .nwork = PC_TEST_SANITIZED ? 2000 : 20000, .nerr = 37 };
	struct counting y = { .nwork = 123, .nerr = 5 };	/* a second poller on the worker */
	struct pc_worker_stats a, b;
	struct pc_poller *px, *py;
	unsigned long target = x.nwork + x.nerr + 50, c1;

	px = pc_worker_add_poller(w, counting_poller, &x);
	py = pc_worker_add_poller(w, counting_poller, &y);
	ck_assert_ptr_nonnull(px);
	ck_assert_ptr_nonnull(py);
	ck_assert_ptr_ne(px, py);
	/* errors do not unregister: the calls go on past them */
	ck_assert_uint_ge(wait_ge(&x.calls, target, 60000), target);
	ck_assert_uint_ge(wait_ge(&y.calls, y.nwork + y.nerr + 50, 60000), y.nwork + y.nerr + 50);
	a = stats_of(e, 0);
	ck_assert_uint_eq(a.poller_work, x.nwork + y.nwork);
	ck_assert_uint_eq(a.poller_errors, x.nerr + y.nerr);
	ck_assert_uint_eq(a.wakeups_poller, 0);
	/* idle from here: no more work counted; hybrid sleeps, busy never does */
	usleep(500000);
	c1 = atomic_load(&x.calls);
	usleep(300000);
	/* hybrid: until it has slept 300 ms more (the wait bounds a slow host, not the claim) */
	b = idle == PC_IDLE_HYBRID ? pc_test_wait_sleep(e, 0, a.sleeps + 1, a.sleep_ns + 300000001ull)
				   : stats_of(e, 0);
	ck_assert_uint_eq(b.poller_work, x.nwork + y.nwork);
	ck_assert_uint_eq(b.poller_errors, x.nerr + y.nerr);
	ck_assert_uint_gt(atomic_load(&x.calls), c1);
	if (idle == PC_IDLE_HYBRID) {
		ck_assert_uint_gt(b.sleeps, a.sleeps);
		/* sleeping most of the time: a poller without fd does not keep it awake */
		ck_assert_uint_gt(b.sleep_ns - a.sleep_ns, 300000000ull);
	} else {
		ck_assert_uint_eq(b.sleeps, 0);
	}
	printf("%s: %lu calls, poller_work %llu, poller_errors %llu, sleeps %llu\n",
	       idle == PC_IDLE_HYBRID ? "hybrid" : "busy", atomic_load(&x.calls),
	       (unsigned long long)b.poller_work, (unsigned long long)b.poller_errors,
	       (unsigned long long)b.sleeps);
	check_published(e, x.nwork + y.nwork, x.nerr + y.nerr);
	ck_assert_int_eq(pc_worker_remove_poller(px), 0);
	ck_assert_int_eq(pc_worker_remove_poller(py), 0);
	pc_engine_destroy(e);
}

START_TEST(test_counters_busy)
{
	counting_case(PC_IDLE_BUSY);
}
END_TEST

START_TEST(test_counters_hybrid)
{
	counting_case(PC_IDLE_HYBRID);
}
END_TEST

/* --- an fd poller wakes a sleeping worker ----------------------------------------------------- */

struct efd_poller {
	int fd;
	atomic_ulong calls, got;
	atomic_ullong got_ms;	/* when the last write was consumed */
};

static int efd_poll(void *arg)
{
	struct efd_poller *x = arg;
	uint64_t v;

	atomic_fetch_add(&x->calls, 1);
	if (read(x->fd, &v, sizeof(v)) != sizeof(v))
		return errno == EAGAIN ? 0 : -errno;
	atomic_store(&x->got_ms, pc_test_now_ms());
	atomic_fetch_add(&x->got, v);
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

START_TEST(test_fd_wakeup)
{
	enum { TRIES = 12 };
	struct pc_engine *e = engine_only(1, PC_IDLE_HYBRID, 100);
	struct pc_worker *w = pc_engine_worker(e, 0);
	struct efd_poller x = { .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) };
	struct pc_worker_stats a, b;
	struct pc_poller *p;
	uint64_t lat[TRIES], one = 1, t0, s0;
	unsigned int i;

	ck_assert_int_ge(x.fd, 0);
	p = pc_worker_add_poller_fd(w, efd_poll, &x, x.fd);
	ck_assert_ptr_nonnull(p);
	/*
	 * Nothing to do: the worker runs the fd poller, which returns 0, and
	 * sleeps all the same. The sleep is one counted after the poller's
	 * first call: the idle worker may have slept before the add reached it.
	 */
	ck_assert_uint_ge(wait_ge(&x.calls, 1, 60000), 1);
	s0 = stats_of(e, 0).sleeps;
	a = pc_test_wait_sleep(e, 0, s0 + 1, 0);
	ck_assert_uint_gt(a.sleeps, s0);
	ck_assert_uint_eq(a.poller_work, 0);
	ck_assert_uint_eq(a.poller_errors, 0);
	ck_assert_uint_eq(a.wakeups_poller, 0);
	for (i = 0; i < TRIES; i++) {
		/* asleep again: 100 empty turns take well under this */
		usleep(60000 + 7000 * i);
		t0 = pc_test_now_ms();
		ck_assert_int_eq(write(x.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		ck_assert_uint_eq(wait_ge(&x.got, i + 1, 5000), i + 1);
		lat[i] = atomic_load(&x.got_ms) - t0;
	}
	/* published after the last write was consumed: a sleep ended since */
	b = pc_test_wait_sleep(e, 0, pc_test_sleeps(e, 0) + 1, 0);
	qsort(lat, TRIES, sizeof(lat[0]), cmp_u64);
	printf("fd poller: write to consumption median %llu ms, max %llu ms; wakeups_poller %llu, "
	       "sleeps %llu\n",
	       (unsigned long long)lat[TRIES / 2], (unsigned long long)lat[TRIES - 1],
	       (unsigned long long)b.wakeups_poller, (unsigned long long)b.sleeps);
	ck_assert_uint_eq(b.poller_work, TRIES);
	ck_assert_uint_eq(b.poller_errors, 0);
	/* the fd woke it (most writes find it asleep), not the 100 ms timeout */
	ck_assert_uint_ge(b.wakeups_poller, TRIES / 2);
	ck_assert_uint_le(b.wakeups_poller, TRIES);
	ck_assert_uint_gt(b.sleeps, a.sleeps + TRIES / 2);
	ck_assert_int_eq(pc_worker_remove_poller(p), 0);
	/*
	 * Removed: once the sleep in progress (which may still watch the fd,
	 * up to 100 ms) is over, a write no longer wakes the worker; the fd
	 * then stays readable, and would wake it on every sleep. Published
	 * sleeps s means the worker is at or past sleep s + 1: two more ended
	 * take in one that began after the removal, then after the write.
	 */
	b = pc_test_wait_sleep(e, 0, pc_test_sleeps(e, 0) + 2, 0);
	ck_assert_int_eq(write(x.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	a = pc_test_wait_sleep(e, 0, pc_test_sleeps(e, 0) + 2, 0);
	ck_assert_uint_ge(a.sleeps, b.sleeps + 2);
	ck_assert_uint_eq(a.wakeups_poller, b.wakeups_poller);
	ck_assert_uint_eq(atomic_load(&x.got), TRIES);
	pc_engine_destroy(e);
	close(x.fd);
}
END_TEST

/*
 * A sleeping worker's fd poller removed and its slot taken by another fd
 * poller, several times: each new one is called, and its fd wakes the
 * worker; the old fds no longer do.
 */
START_TEST(test_fd_readd_asleep)
{
	enum { ROUNDS = 6, TRIES = 5 };
	struct pc_engine *e = engine_only(1, PC_IDLE_HYBRID, 100);
	struct pc_worker *w = pc_engine_worker(e, 0);
	struct efd_poller x[ROUNDS];
	struct pc_worker_stats a, b;
	unsigned int i, t, writes = 0, add_wakeups = 0, got[ROUNDS];
	uint64_t one = 1;

	memset(x, 0, sizeof(x));
	(void)pc_test_wait_sleep(e, 0, 1, 0);
	for (i = 0; i < ROUNDS; i++) {
		uint64_t submit0 = stats_of(e, 0).wakeups_submit;
		struct pc_poller *p;

		x[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ck_assert_int_ge(x[i].fd, 0);
		p = pc_worker_add_poller_fd(w, efd_poll, &x[i], x[i].fd);
		ck_assert_ptr_nonnull(p);
		/*
		 * A write to a sleeping worker wakes it through the fd. Published
		 * sleeps s means it is at or past sleep s + 1: two more ended
		 * take in a sleep begun with this fd in its poll set. The write
		 * may still land in the few turns between two sleeps, and be
		 * consumed without a wake-up: then again, up to TRIES times.
		 */
		for (t = 0; t < TRIES; t++) {
			a = pc_test_wait_sleep(e, 0, pc_test_sleeps(e, 0) + 2, 0);
			if (t == 0) {
				/* the add woke it through its eventfd (unless it was between two sleeps) */
				ck_assert_uint_le(a.wakeups_submit - submit0, 1);
				add_wakeups += (unsigned int)(a.wakeups_submit - submit0);
			}
			ck_assert_int_eq(write(x[i].fd, &one, sizeof(one)), (ssize_t)sizeof(one));
			writes++;
			ck_assert_uint_eq(wait_ge(&x[i].got, t + 1, 5000), t + 1);
			/* published after the write was consumed: a sleep ended since */
			b = pc_test_wait_sleep(e, 0, pc_test_sleeps(e, 0) + 1, 0);
			ck_assert_uint_eq(b.poller_work, writes);
			ck_assert_uint_le(b.wakeups_poller - a.wakeups_poller, 1);
			if (b.wakeups_poller == a.wakeups_poller + 1)
				break;
		}
		ck_assert_msg(t < TRIES, "round %u: %u writes to a sleeping worker, none woke it", i,
			      TRIES);
		got[i] = t + 1;
		/* removed while the worker sleeps: the slot is free for the next round */
		ck_assert_int_eq(pc_worker_remove_poller(p), 0);
	}
	ck_assert_uint_ge(add_wakeups, ROUNDS / 2);
	for (i = 0; i < ROUNDS; i++) {
		ck_assert_uint_eq(atomic_load(&x[i].got), got[i]);
		close(x[i].fd);
	}
	pc_engine_destroy(e);
}
END_TEST

/* --- removal ---------------------------------------------------------------------------------- */

struct slow {
	atomic_ulong calls;
	atomic_int in_fn, slow;
};

static int slow_poller(void *arg)
{
	struct slow *x = arg;

	atomic_fetch_add(&x->calls, 1);
	if (atomic_load(&x->slow)) {
		atomic_store(&x->in_fn, 1);
		usleep(50000);
		atomic_store(&x->in_fn, 0);
	}
	return 0;
}

/* From another thread, remove returns only once a running call has ended. */
START_TEST(test_remove_waits)
{
	struct pc_engine *e = engine_only(1, PC_IDLE_BUSY, 0);
	struct slow x;
	struct pc_poller *p;
	unsigned long c;
	unsigned int round;

	for (round = 0; round < 3; round++) {
		uint64_t t0, end = pc_test_now_ms() + 30000;

		memset(&x, 0, sizeof(x));
		p = pc_worker_add_poller(pc_engine_worker(e, 0), slow_poller, &x);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_ge(wait_ge(&x.calls, 10, 30000), 10);
		atomic_store(&x.slow, 1);
		while (!atomic_load(&x.in_fn) && pc_test_now_ms() < end)
			;
		ck_assert_int_eq(atomic_load(&x.in_fn), 1);
		t0 = pc_test_now_ms();
		ck_assert_int_eq(pc_worker_remove_poller(p), 0);
		ck_assert_int_eq(atomic_load(&x.in_fn), 0);
		c = atomic_load(&x.calls);
		printf("round %u: remove returned after %llu ms, %lu calls\n", round,
		       (unsigned long long)(pc_test_now_ms() - t0), c);
		usleep(200000);
		ck_assert_uint_eq(atomic_load(&x.calls), c);
		ck_assert_int_eq(pc_worker_remove_poller(p), -EINVAL);
	}
	pc_engine_destroy(e);
}
END_TEST

struct selfrm {
	_Atomic(struct pc_poller *) me, victim;
	atomic_int go;	/* set once me and victim are known */
	atomic_ulong calls;
	unsigned long stop_at;
	atomic_int rc, rc_again;
	atomic_ulong victim_calls_at_removal;
	atomic_ulong *victim_calls;
};

/*
 * Once told to go: removes another poller of its worker, then itself, on
 * its stop_at-th call; returns 1 per counted call.
 */
static int selfrm_poller(void *arg)
{
	struct selfrm *x = arg;
	unsigned long k;

	if (!atomic_load(&x->go))
		return 0;
	k = atomic_fetch_add(&x->calls, 1) + 1;
	if (k == x->stop_at) {
		atomic_store(&x->victim_calls_at_removal, atomic_load(x->victim_calls));
		atomic_store(&x->rc_again, pc_worker_remove_poller(atomic_load(&x->victim)));
		atomic_store(&x->rc, pc_worker_remove_poller(atomic_load(&x->me)));
	}
	return 1;
}

START_TEST(test_remove_self)
{
	struct pc_engine *e = engine_only(1, PC_IDLE_HYBRID, 100);
	struct pc_worker *w = pc_engine_worker(e, 0);
	struct selfrm x = { .stop_at = 25, .rc = 1, .rc_again = 1 };
	atomic_ulong victim_calls = 0, bystander_calls = 0;
	struct pc_poller *me, *victim, *bystander;
	unsigned long v;

	/* the victim sits after x in the slots: it would still be called this turn */
	x.victim_calls = &victim_calls;
	me = pc_worker_add_poller(w, selfrm_poller, &x);
	ck_assert_ptr_nonnull(me);
	atomic_store(&x.me, me);
	victim = pc_worker_add_poller(w, nop_poller, &victim_calls);
	ck_assert_ptr_nonnull(victim);
	atomic_store(&x.victim, victim);
	bystander = pc_worker_add_poller(w, nop_poller, &bystander_calls);
	ck_assert_ptr_nonnull(bystander);
	atomic_store(&x.go, 1);
	ck_assert_uint_ge(wait_ge(&x.calls, x.stop_at, 30000), x.stop_at);
	v = wait_ge(&bystander_calls, 100, 30000);
	ck_assert_uint_ge(v, 100);
	usleep(300000);
	ck_assert_int_eq(atomic_load(&x.rc), 0);
	ck_assert_int_eq(atomic_load(&x.rc_again), 0);
	ck_assert_uint_eq(atomic_load(&x.calls), x.stop_at);
	ck_assert_uint_eq(atomic_load(&victim_calls), atomic_load(&x.victim_calls_at_removal));
	/* the others go on */
	ck_assert_uint_gt(atomic_load(&bystander_calls), v);
	ck_assert_int_eq(pc_worker_remove_poller(me), -EINVAL);
	ck_assert_int_eq(pc_worker_remove_poller(victim), -EINVAL);
	ck_assert_int_eq(pc_worker_remove_poller(bystander), 0);
	/* the work it returned: exactly one per call */
	ck_assert_uint_eq(stats_of(e, 0).poller_work, x.stop_at);
	pc_engine_destroy(e);
}
END_TEST

/* --- two workers remove each other's pollers -----------------------------------------------------
 */

struct xrm {
	atomic_int *go, *arrived;
	_Atomic(struct pc_poller *) other;
	atomic_int rc;
	atomic_ulong calls;
};

/*
 * Once go is set, each waits inside its call until the other is inside its
 * own, then removes the other's poller: both workers are in their pollers
 * (their counts odd) when they remove, and each would wait for the other's
 * call to end, for ever. One of them gives up (-EDEADLK), and the other's
 * removal completes once that call has returned.
 */
static int xrm_poller(void *arg)
{
	struct xrm *x = arg;

	atomic_fetch_add(&x->calls, 1);
	if (!atomic_load(x->go) || atomic_load(&x->rc) != 1)
		return 0;
	atomic_fetch_add(x->arrived, 1);
	while (atomic_load(x->arrived) < 2)
		sched_yield();
	atomic_store(&x->rc, pc_worker_remove_poller(atomic_load(&x->other)));
	return 1;
}

START_TEST(test_remove_cross)
{
	struct pc_engine *e = engine_only(2, PC_IDLE_BUSY, 0);
	atomic_int go = 0, arrived = 0;
	struct xrm x[2] = {
		{ .go = &go, .arrived = &arrived, .rc = 1 },
		{ .go = &go, .arrived = &arrived, .rc = 1 },
	};
	struct pc_poller *p[2], *fill[PC_WORKER_MAX_POLLERS];
	atomic_ulong fill_calls = 0;
	unsigned long c0, c1;
	unsigned int i, k, won;

	for (i = 0; i < 2; i++) {
		p[i] = pc_worker_add_poller(pc_engine_worker(e, i), xrm_poller, &x[i]);
		ck_assert_ptr_nonnull(p[i]);
	}
	atomic_store(&x[0].other, p[1]);
	atomic_store(&x[1].other, p[0]);
	ck_assert_uint_ge(wait_ge(&x[0].calls, 10, 30000), 10);
	ck_assert_uint_ge(wait_ge(&x[1].calls, 10, 30000), 10);
	atomic_store(&go, 1);
	/* a deadlock shows as this wait failing (and the case timing out) */
	for (i = 0; i < 300 && (atomic_load(&x[0].rc) == 1 || atomic_load(&x[1].rc) == 1); i++)
		usleep(100000);
	printf("remove_cross: worker 0's removal %d, worker 1's %d\n", atomic_load(&x[0].rc),
	       atomic_load(&x[1].rc));
	/* one removal completed, the other gave up: its poller stays */
	ck_assert_int_eq(atomic_load(&x[0].rc) + atomic_load(&x[1].rc), -EDEADLK);
	won = atomic_load(&x[0].rc) == 0 ? 0 : 1;
	ck_assert_int_eq(atomic_load(&x[won].rc), 0);
	ck_assert_int_eq(atomic_load(&x[!won].rc), -EDEADLK);
	/* the removed one is not called again; the winner's own poller still is */
	c0 = atomic_load(&x[!won].calls);
	c1 = atomic_load(&x[won].calls);
	usleep(300000);
	ck_assert_uint_eq(atomic_load(&x[!won].calls), c0);
	ck_assert_uint_gt(atomic_load(&x[won].calls), c1);
	ck_assert_int_eq(pc_worker_remove_poller(p[!won]), -EINVAL);
	ck_assert_int_eq(pc_worker_remove_poller(p[won]), 0);
	/* every slot of both workers can be taken again */
	for (i = 0; i < 2; i++) {
		for (k = 0; k < PC_WORKER_MAX_POLLERS; k++) {
			fill[k] = pc_worker_add_poller(pc_engine_worker(e, i), nop_poller,
						       &fill_calls);
			ck_assert_msg(fill[k], "worker %u, slot %u: %s", i, k, strerror(errno));
		}
		for (k = 0; k < PC_WORKER_MAX_POLLERS; k++)
			ck_assert_int_eq(pc_worker_remove_poller(fill[k]), 0);
	}
	pc_engine_destroy(e);
}
END_TEST

/* Worker 0's poller removes worker 1's poller while it runs a slow call. */
struct xwait {
	struct slow *victim;
	_Atomic(struct pc_poller *) vp;
	atomic_int rc;			/* 1 until the removal returned */
	atomic_int in_fn_after;		/* the victim's in_fn when the removal returned */
	atomic_ulong victim_calls_after;
};

static int xwait_poller(void *arg)
{
	struct xwait *x = arg;
	struct pc_poller *vp = atomic_load(&x->vp);

	/* remove only while the victim's call is running on the other worker */
	if (!vp || atomic_load(&x->rc) != 1 || !atomic_load(&x->victim->in_fn))
		return 0;
	atomic_store(&x->rc, pc_worker_remove_poller(vp));
	atomic_store(&x->in_fn_after, atomic_load(&x->victim->in_fn));
	atomic_store(&x->victim_calls_after, atomic_load(&x->victim->calls));
	return 1;
}

/*
 * What poller.h promises a remover on another worker: it returns once the
 * poller is not running and will not run again, so that arg may be freed.
 * (Before, it returned at once, with the call still running: in_fn 1.)
 */
START_TEST(test_remove_cross_waits)
{
	struct pc_engine *e = engine_only(2, PC_IDLE_BUSY, 0);
	struct slow v;
	struct xwait x;
	struct pc_poller *vp, *xp;
	unsigned int round;

	for (round = 0; round < 3; round++) {
		memset(&v, 0, sizeof(v));
		memset(&x, 0, sizeof(x));
		x.victim = &v;
		atomic_store(&x.rc, 1);
		vp = pc_worker_add_poller(pc_engine_worker(e, 1), slow_poller, &v);
		ck_assert_ptr_nonnull(vp);
		xp = pc_worker_add_poller(pc_engine_worker(e, 0), xwait_poller, &x);
		ck_assert_ptr_nonnull(xp);
		ck_assert_uint_ge(wait_ge(&v.calls, 10, 30000), 10);
		atomic_store(&v.slow, 1);
		atomic_store(&x.vp, vp);
		for (unsigned int i = 0; i < 300 && atomic_load(&x.rc) == 1; i++)
			usleep(100000);
		ck_assert_int_eq(atomic_load(&x.rc), 0);
		ck_assert_msg(atomic_load(&x.in_fn_after) == 0,
			      "round %u: the removal on worker 0 returned while the call ran on worker 1",
			      round);
		usleep(200000);
		ck_assert_uint_eq(atomic_load(&v.calls), atomic_load(&x.victim_calls_after));
		ck_assert_int_eq(pc_worker_remove_poller(vp), -EINVAL);
		ck_assert_int_eq(pc_worker_remove_poller(xp), 0);
	}
	pc_engine_destroy(e);
}
END_TEST

/* --- the slot limit --------------------------------------------------------------------------- */

START_TEST(test_max_pollers)
{
	struct pc_engine *e = engine_only(1, PC_IDLE_BUSY, 0);
	struct pc_worker *w = pc_engine_worker(e, 0);
	static atomic_ulong calls[PC_WORKER_MAX_POLLERS + 1];
	struct pc_poller *p[PC_WORKER_MAX_POLLERS + 1];
	unsigned long c;
	unsigned int i;

	for (i = 0; i < PC_WORKER_MAX_POLLERS; i++) {
		p[i] = pc_worker_add_poller(w, nop_poller, &calls[i]);
		ck_assert_msg(p[i], "poller %u: %s", i, strerror(errno));
	}
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller(w, nop_poller, &calls[PC_WORKER_MAX_POLLERS]));
	ck_assert_int_eq(errno, ENOSPC);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller_fd(w, nop_poller, NULL, 0));
	ck_assert_int_eq(errno, ENOSPC);
	/* all of them are called */
	for (i = 0; i < PC_WORKER_MAX_POLLERS; i++)
		ck_assert_uint_ge(wait_ge(&calls[i], 10, 30000), 10);
	ck_assert_int_eq(pc_worker_remove_poller(p[5]), 0);
	c = atomic_load(&calls[5]);
	p[PC_WORKER_MAX_POLLERS] = pc_worker_add_poller(w, nop_poller, &calls[PC_WORKER_MAX_POLLERS]);
	ck_assert_ptr_nonnull(p[PC_WORKER_MAX_POLLERS]);
	ck_assert_uint_ge(wait_ge(&calls[PC_WORKER_MAX_POLLERS], 10, 30000), 10);
	errno = 0;
	ck_assert_ptr_null(pc_worker_add_poller(w, nop_poller, NULL));
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_eq(atomic_load(&calls[5]), c);
	for (i = 0; i <= PC_WORKER_MAX_POLLERS; i++)
		if (i != 5)
			ck_assert_int_eq(pc_worker_remove_poller(p[i]), 0);
	pc_engine_destroy(e);
}
END_TEST

/* --- the storage pattern: a handler defers, the worker's poller replies -------------------------
 */

#define QCAP 4096

/* A worker's queue of deferred requests: only that worker's thread touches it. */
struct wqueue {
	struct pc_worker *w;
	struct pc_msg *q[QCAP];
	unsigned int head, tail;
	atomic_ulong replied, bad, max_depth;
	unsigned long turn;
};

static struct wqueue wq[2];

static void srv_defer(struct pc_msg *m, void *arg)
{
	struct pc_worker *self = pc_worker_self();
	struct wqueue *q;

	(void)arg;
	if (!self || pc_conn_worker(m->conn) != self || m->type != PC_MSG_REQUEST) {
		atomic_fetch_add(&srv_handler_bad, 1);
		pc_msg_release(m);
		return;
	}
	q = &wq[pc_worker_index(self)];
	if (q->tail - q->head == QCAP) {
		atomic_fetch_add(&q->bad, 1);
		pc_msg_release(m);
		return;
	}
	q->q[q->tail++ % QCAP] = m;
	if (q->tail - q->head > atomic_load(&q->max_depth))
		atomic_store(&q->max_depth, q->tail - q->head);
}

/* The "storage completions": up to 8 per turn, every other turn, checked and answered. */
static int storage_poller(void *arg)
{
	struct wqueue *q = arg;
	int done = 0;

	if (pc_worker_self() != q->w)
		atomic_fetch_add(&q->bad, 1);
	if (q->turn++ & 1)
		return 0;
	while (q->head != q->tail && done < 8) {
		struct pc_msg *m = q->q[q->head++ % QCAP];
		uint8_t *b = m->data;
		struct hdr h;
		uint32_t i;

		memcpy(&h, b, sizeof(h));
		if (h.magic != REQ_MAGIC || h.len != m->len || !m->req_id)
			atomic_fetch_add(&q->bad, 1);
		for (i = sizeof(h); i < m->len; i++) {
			if (b[i] != req_byte(h.conn, h.seq, i))
				atomic_fetch_add(&q->bad, 1);
			b[i] = rep_byte(h.conn, h.seq, i);
		}
		h.magic = REP_MAGIC;
		memcpy(b, &h, sizeof(h));
		if (pc_reply(m))
			atomic_fetch_add(&q->bad, 1);
		done++;
	}
	atomic_fetch_add(&q->replied, (unsigned long)done);
	return done;
}

START_TEST(test_storage_pattern)
{
	/* every request is checked and answered by the poller: the count is volume only */
	const uint32_t m_per_conn = PC_TEST_SAN(5000, 300);
	struct pc_engine *srv = server_start(2, PC_IDLE_HYBRID, srv_defer);
	struct pc_engine *cli;
	struct pc_poller *pp[2];
	struct pc_worker_stats st;
	unsigned long work = 0;
	uint64_t end;
	unsigned int i;

	memset(wq, 0, sizeof(wq));
	for (i = 0; i < 2; i++) {
		wq[i].w = pc_engine_worker(srv, i);
		pp[i] = pc_worker_add_poller(wq[i].w, storage_poller, &wq[i]);
		ck_assert_ptr_nonnull(pp[i]);
	}
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = client_start(1, pc_listen_port(srv));
	for (i = 0; i < NCONN; i++)
		send_requests(i, m_per_conn);
	end = pc_test_now_ms() + 120000;
	for (i = 0; i < NCONN; i++) {
		while (atomic_load(&cc[i].received) < m_per_conn && pc_test_now_ms() < end)
			usleep(1000);
		ck_assert_uint_eq(atomic_load(&cc[i].received), m_per_conn);
		ck_assert_uint_eq(atomic_load(&cc[i].bad), 0);
		ck_assert_uint_eq(atomic_load(&cc[i].handler_bad), 0);
	}
	/* nothing more arrives */
	usleep(200000);
	ck_assert_uint_eq(atomic_load(&srv_handler_bad), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(atomic_load(&cc[i].received), m_per_conn);
		/* connection i went to worker i, whose poller answered all of it */
		ck_assert_uint_eq(atomic_load(&wq[i].replied), m_per_conn);
		ck_assert_uint_eq(atomic_load(&wq[i].bad), 0);
		ck_assert_uint_gt(atomic_load(&wq[i].max_depth), 0);
		st = stats_of(srv, i);
		ck_assert_uint_eq(st.poller_work, m_per_conn);
		ck_assert_uint_eq(st.poller_errors, 0);
		ck_assert_uint_eq(st.rx_msgs, m_per_conn);
		ck_assert_uint_eq(st.tx_msgs, m_per_conn);
		work += st.poller_work;
		printf("server worker %u: %lu replied, deepest queue %lu\n", i,
		       atomic_load(&wq[i].replied), atomic_load(&wq[i].max_depth));
	}
	ck_assert_uint_eq(work, (unsigned long)NCONN * m_per_conn);
	pc_engine_print_stats(srv, stdout);
	pc_engine_destroy(cli);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pc_worker_remove_poller(pp[i]), 0);
	pc_engine_destroy(srv);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pollers");

	pc_test_require_rdma();
#define ADD(name) PC_TEST_ADD(s, name, 120)
	/* one case per test: CK_RUN_CASE=<name> runs one */
	ADD(arg_errors);
	ADD(thread_identity);
	ADD(conn_worker);
	ADD(counters_busy);
	ADD(counters_hybrid);
	ADD(fd_wakeup);
	ADD(fd_readd_asleep);
	ADD(remove_waits);
	ADD(remove_self);
	ADD(remove_cross);
	ADD(remove_cross_waits);
	ADD(max_pollers);
	ADD(storage_pattern);
	return pc_test_run(s);
}
