// SPDX-License-Identifier: MIT
/*
 * rdma suite: the calls that complete the API's pairs and give back what
 * an engine runs with.
 *  - pc_engine_info(): the parameters after defaults, and the largest
 *    message the devices allow; a size below the structure's is EINVAL;
 *  - pc_engine_mem_reg(): memory registered with no connection, on every
 *    device or one by name (ENODEV for another name); pc_mem_keys() gives
 *    a connection's keys (EXDEV on a device it does not cover), and the
 *    memory serves a pc_rdma() WRITE and a pc_msg_wrap() send, bytes
 *    checked at the peer;
 *  - pc_listen_stop(): a connect is refused after it, works again after
 *    pc_listen(); EINVAL when not listening;
 *  - pc_app_detach(): another thread takes the slot and its calls' ids do
 *    not repeat the first thread's; EPERM when not attached.
 */
#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"
#include "pc_test.h"

static atomic_uint srv_ok, srv_bad;
static struct pc_conn *_Atomic srv_conn;	/* the server's side of the first connection */

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	struct pc_conn *none = NULL;

	(void)arg;
	if (ev == PC_CONN_UP && atomic_compare_exchange_strong(&srv_conn, &none, c))
		pc_conn_get(c);
}
static uint8_t *target;		/* the server's memory a client WRITEs into */
static void *target_mem;

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	if (m->type == PC_MSG_REQUEST) {
		ck_assert_int_eq(pc_reply(m), 0);
		return;
	}
	atomic_fetch_add(m->len == 100000 && pat_diff(m->data, m->len, m->len, 5) < 0 ? &srv_ok
										       : &srv_bad, 1);
	ck_assert_int_eq(pc_msg_release(m), 0);
}

static struct pc_engine *engine(bool server, enum pc_handoff mode)
{
	const char *devs[] = { pc_test_device(), NULL };
	struct pc_engine_params p = { .size = sizeof(p), .devices = devs, .no_numa = true,
				      .handoff = mode, .on_msg = server ? srv_on_msg : NULL,
				      .on_conn = server ? srv_on_conn : NULL,
				      .window = 32, .max_msg_size = 1 << 20 };
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "%s", pc_last_error());
	return e;
}

START_TEST(test_engine_info)
{
	struct pc_engine *e = engine(true, PC_HANDOFF_HANDLER);
	struct pc_engine_info in = { .size = sizeof(in) };

	ck_assert_int_eq(pc_engine_info(e, &in), 0);
	ck_assert_uint_eq(in.size, sizeof(in));
	ck_assert_uint_eq(in.workers, 1);
	ck_assert_uint_eq(in.devices, 1);
	ck_assert_uint_eq(in.msg_size, 4096);
	/* rxe has type-2 memory windows: the rendezvous limit asked for */
	ck_assert_uint_eq(in.max_msg_size, 1 << 20);
	ck_assert_uint_eq(in.window, 32);
	ck_assert_uint_eq(in.min_window, 1);
	ck_assert_uint_eq(in.max_calls, 64);
	ck_assert_uint_eq(in.max_unanswered, 32);
	ck_assert_uint_eq(in.rx_bufs, 1024);
	ck_assert_uint_eq(in.srq_depth, 1024);
	ck_assert_uint_eq(in.large_pool_size, 2 << 20);
	ck_assert_uint_eq(in.keepalive_ms, 2000);
	ck_assert_uint_eq(in.handoff, PC_HANDOFF_HANDLER);
	in.size = 8;
	ck_assert_int_eq(pc_engine_info(e, &in), -EINVAL);
	ck_assert_int_eq(pc_engine_info(NULL, &in), -EINVAL);
	pc_engine_destroy(e);
}
END_TEST

static atomic_uint op_runs;
static atomic_int op_status;

static void op_done(struct pc_op *op, int status)
{
	(void)op;
	atomic_store(&op_status, status);
	atomic_fetch_add(&op_runs, 1);
}

static atomic_uint rel_runs;

static void released(void *arg, int status)
{
	(void)arg;
	ck_assert_int_eq(status, 0);
	atomic_fetch_add(&rel_runs, 1);
}

START_TEST(test_engine_mem_reg)
{
	struct pc_engine *srv = engine(true, PC_HANDOFF_HANDLER), *cli = engine(false, PC_HANDOFF_RING);
	enum { LEN = 100000 };
	uint8_t *src = aligned_alloc(4096, 1 << 20);
	uint32_t lkey, rkey;
	struct pc_msg *m, *msgs[4];
	struct pc_conn *c;
	void *mem;
	uint64_t end;

	ck_assert_ptr_nonnull(src);
	target = aligned_alloc(4096, 4096);
	memset(target, 0, 4096);
	/* before any connection: the client's buffer on its one device, the server's target */
	mem = pc_engine_mem_reg(cli, NULL, src, 1 << 20, IBV_ACCESS_LOCAL_WRITE);
	ck_assert_msg(mem, "%s", pc_last_error());
	target_mem = pc_engine_mem_reg(srv, pc_test_device(), target, 4096,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ck_assert_msg(target_mem, "%s", pc_last_error());
	errno = 0;
	ck_assert_ptr_null(pc_engine_mem_reg(cli, "pc_test_no_such_device", src, 4096, 0));
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_null(pc_engine_mem_reg(cli, NULL, NULL, 4096, 0));
	ck_assert_int_eq(errno, EINVAL);

	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(c, "connect: %s", pc_last_error());
	ck_assert_int_eq(pc_mem_keys(mem, c, &lkey, NULL), 0);
	ck_assert_int_eq(pc_mem_keys(NULL, c, &lkey, &rkey), -EINVAL);
	ck_assert_int_eq(pc_mem_keys(src, c, &lkey, &rkey), -EINVAL);
	/* the server's registration is on the server engine's device context: not this conn's */
	ck_assert_int_eq(pc_mem_keys(target_mem, c, &lkey, &rkey), -EXDEV);

	/* a WRITE from the client's memory into the server's, each side's keys from its handle */
	{
		uint64_t t_end = pc_test_now_ms() + 10000;
		struct pc_op op = { .code = PC_OP_WRITE, .local = src, .len = 4096,
				    .remote_addr = (uintptr_t)target, .done = op_done };

		while (!atomic_load(&srv_conn) && pc_test_now_ms() < t_end)
			usleep(1000);
		ck_assert_ptr_nonnull(atomic_load(&srv_conn));
		ck_assert_int_eq(pc_mem_keys(target_mem, atomic_load(&srv_conn), NULL, &op.rkey), 0);
		ck_assert_int_eq(pc_mem_keys(mem, c, &op.lkey, NULL), 0);
		pat_fill(src, 4096, 3);
		ck_assert_int_eq(pc_rdma(c, &op), 0);
		while (!atomic_load(&op_runs) && pc_test_now_ms() < t_end)
			usleep(500);
		ck_assert_uint_eq(atomic_load(&op_runs), 1);
		ck_assert_int_eq(atomic_load(&op_status), 0);
		ck_assert_int_lt(pat_diff(target, 4096, 4096, 3), 0);
	}
	/* a wrapped send from the engine-wide registration: read by the peer, no copy */
	pat_fill(src, LEN, 5);
	m = pc_msg_wrap(c, mem, src, LEN, released, NULL);
	ck_assert_msg(m, "wrap: %s", pc_last_error());
	ck_assert_int_eq(pc_send(m), 0);
	end = pc_test_now_ms() + 30000;
	while ((atomic_load(&srv_ok) + atomic_load(&srv_bad) < 1 || !atomic_load(&rel_runs)) &&
	       pc_test_now_ms() < end) {
		ck_assert_int_ge(pc_app_poll(cli, msgs, 4), 0);
		usleep(500);
	}
	ck_assert_uint_eq(atomic_load(&srv_ok), 1);
	ck_assert_uint_eq(atomic_load(&srv_bad), 0);
	ck_assert_uint_eq(atomic_load(&rel_runs), 1);

	/* deregistered while the devices are open (a removed device waits for it) */
	pc_mem_dereg(mem);
	pc_mem_dereg(target_mem);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(c);
	pc_conn_put(atomic_exchange(&srv_conn, NULL));
	pc_mem_dereg(NULL);
	free(src);
	free(target);
}
END_TEST

START_TEST(test_listen_stop)
{
	struct pc_engine *srv = engine(true, PC_HANDOFF_HANDLER), *cli = engine(false, PC_HANDOFF_RING);
	struct pc_conn *c;
	uint16_t port;

	ck_assert_int_eq(pc_listen_stop(srv), -EINVAL);
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	port = pc_listen_port(srv);
	ck_assert_uint_ne(port, 0);
	ck_assert_int_eq(pc_listen_stop(srv), 0);
	ck_assert_uint_eq(pc_listen_port(srv), 0);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	errno = 0;
	c = pc_connect(cli, pc_test_addr(), port, -1, 5000, NULL);
	ck_assert_ptr_null(c);
	ck_assert_msg(errno == ECONNREFUSED || errno == ETIMEDOUT, "connect after stop: %s",
		      strerror(errno));
	/* and again */
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(c, "connect after listening again: %s", pc_last_error());
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(c);
}
END_TEST

/* A thread attaches to slot 0, makes calls, and gives their ids back. */
struct caller {
	struct pc_engine *e;
	struct pc_conn *c;
	uint64_t ids[8];
	atomic_uint done;
};

static void call_done(struct pc_msg *m, int status, void *arg)
{
	struct caller *k = arg;

	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_fetch_add(&k->done, 1);
}

static void *caller_main(void *arg)
{
	struct caller *k = arg;
	struct pc_msg *msgs[4];
	uint64_t end = pc_test_now_ms() + 30000;
	unsigned int i;

	ck_assert_int_eq(pc_app_attach(k->e, 0), 0);
	for (i = 0; i < 8; i++) {
		struct pc_msg *m;

		while (!(m = pc_msg_alloc(k->c)))
			usleep(100);
		m->len = 8;
		ck_assert_int_eq(pc_call(m, call_done, k, 0, &k->ids[i]), 0);
	}
	while (atomic_load(&k->done) < 8 && pc_test_now_ms() < end)
		ck_assert_int_ge(pc_app_poll(k->e, msgs, 4), 0);
	ck_assert_uint_eq(atomic_load(&k->done), 8);
	ck_assert_int_eq(pc_app_detach(k->e), 0);
	ck_assert_int_eq(pc_app_detach(k->e), -EPERM);
	return NULL;
}

START_TEST(test_app_detach)
{
	struct pc_engine *srv = engine(true, PC_HANDOFF_HANDLER), *cli = engine(false, PC_HANDOFF_RING);
	struct caller k[2];
	pthread_t t;
	unsigned int i, j;

	ck_assert_int_eq(pc_app_detach(cli), -EPERM);
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	memset(k, 0, sizeof(k));
	k[0].e = k[1].e = cli;
	k[0].c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(k[0].c, "connect: %s", pc_last_error());
	k[1].c = k[0].c;
	/* this thread lets go of slot 0; two threads take it, one after the other */
	ck_assert_int_eq(pc_app_detach(cli), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_create(&t, NULL, caller_main, &k[i]), 0);
		pthread_join(t, NULL);
	}
	for (i = 0; i < 8; i++)
		for (j = 0; j < 8; j++)
			ck_assert_msg(k[0].ids[i] != k[1].ids[j], "id 0x%llx made twice",
				      (unsigned long long)k[0].ids[i]);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(k[0].c);
}
END_TEST

/*
 * What pc_reply(), pc_call(), pc_call_cancel() and pc_worker_post() can
 * still refuse, each error once, exactly: never for lack of buffers,
 * credits or ring room (that is gone), only for a message or a call that
 * is wrong, or a connection that is closing.
 */
static void work_fn(struct pc_work *w)
{
	(void)w;
}

START_TEST(test_remaining_errors)
{
	const char *devs[] = { pc_test_device(), NULL };
	struct pc_engine_params cp = { .size = sizeof(cp), .devices = devs, .no_numa = true,
				       .handoff = PC_HANDOFF_RING, .workers_per_device = 2 };
	struct pc_engine *srv = engine(true, PC_HANDOFF_HANDLER), *cli;
	struct pc_work work = { .fn = NULL };
	struct pc_conn *a, *b;
	struct pc_msg *m;
	uint64_t id;

	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "%s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	a = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), 0, 20000, NULL);
	b = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), 1, 20000, NULL);
	ck_assert_msg(a && b, "connect: %s", pc_last_error());
	ck_assert_ptr_ne(pc_conn_worker(a), pc_conn_worker(b));

	m = pc_msg_alloc(a);
	ck_assert_ptr_nonnull(m);
	m->len = 8;
	/* a message that is neither a request nor a response */
	ck_assert_int_eq(pc_reply(m), -EINVAL);
	m->type = PC_MSG_RESPONSE;
	/* longer than its buffer */
	m->len = m->cap + 1;
	ck_assert_int_eq(pc_reply(m), -EMSGSIZE);
	ck_assert_int_eq(pc_call(m, NULL, NULL, 0, NULL), -EMSGSIZE);
	m->len = 8;
	/* the data pointer moved */
	m->data = (char *)m->data + 1;
	ck_assert_int_eq(pc_reply(m), -EINVAL);
	ck_assert_int_eq(pc_send(m), -EINVAL);
	m->data = (char *)m->data - 1;
	/* a message of worker 0 on a connection of worker 1 */
	m->conn = b;
	ck_assert_int_eq(pc_reply(m), -EXDEV);
	ck_assert_int_eq(pc_call(m, NULL, NULL, 0, NULL), -EXDEV);
	m->conn = a;
	/* a deadline needs a completion */
	ck_assert_int_eq(pc_call(m, NULL, NULL, 1000, NULL), -EINVAL);
	/* pc_worker_post() without a function */
	ck_assert_int_eq(pc_worker_post(pc_conn_worker(a), &work), -EINVAL);
	work.fn = work_fn;
	ck_assert_int_eq(pc_worker_post(pc_conn_worker(a), &work), 0);

	/* a closed connection: the message goes back, the call and its cancel say so */
	ck_assert_int_eq(pc_call(m, NULL, NULL, 0, &id), 0);
	ck_assert_int_eq(pc_close(a), 0);
	{
		uint64_t end = pc_test_now_ms() + 10000;
		struct pc_msg *got[4];

		/* until the close reached the connection: then allocations say ENOTCONN */
		while ((m = pc_msg_alloc(a)) || errno != ENOTCONN) {
			ck_assert(pc_test_now_ms() < end);
			if (m)
				ck_assert_int_eq(pc_msg_release(m), 0);
			ck_assert_int_ge(pc_app_poll(cli, got, 4), 0);
			usleep(1000);
		}
	}
	ck_assert_ptr_null(m);
	ck_assert_int_eq(errno, ENOTCONN);
	ck_assert_int_eq(pc_call_cancel(a, id), -ENOTCONN);
	m = pc_msg_alloc(b);
	ck_assert_ptr_nonnull(m);
	m->len = 8;
	m->type = PC_MSG_RESPONSE;
	m->conn = a;	/* m is worker 1's, a is worker 0's */
	ck_assert_int_eq(pc_reply(m), -EXDEV);
	m->conn = b;
	ck_assert_int_eq(pc_close(b), 0);
	{
		uint64_t end = pc_test_now_ms() + 10000;
		struct pc_msg *n;

		/* b closes; a reply on it then releases the message, and says so */
		while ((n = pc_msg_alloc(b)) && pc_test_now_ms() < end) {
			ck_assert_int_eq(pc_msg_release(n), 0);
			usleep(1000);
		}
	}
	ck_assert_int_eq(pc_reply(m), -ENOTCONN);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(a);
	pc_conn_put(b);
}
END_TEST

/*
 * A thread still attached when its engine is destroyed: the engines that
 * come after (at the same address, maybe) are others. It attaches to each
 * and allocates from its own slot, more engines in a row than a thread may
 * be attached to at once.
 */
START_TEST(test_attach_after_destroy)
{
	unsigned int i;

	for (i = 0; i < 6; i++) {
		struct pc_engine *e = engine(false, PC_HANDOFF_RING);

		ck_assert_msg(pc_app_attach(e, 0) == 0, "engine %u: %s", i, pc_last_error());
		ck_assert_int_eq(pc_app_attach(e, 0), -EALREADY);
		/* destroyed without pc_app_detach() */
		pc_engine_destroy(e);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_engine_info);
	tcase_add_test(tc, test_engine_mem_reg);
	tcase_add_test(tc, test_listen_stop);
	tcase_add_test(tc, test_app_detach);
	tcase_add_test(tc, test_remaining_errors);
	tcase_add_test(tc, test_attach_after_destroy);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
