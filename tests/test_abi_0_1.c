// SPDX-License-Identifier: MIT
/*
 * rdma suite: a program built for version 0.1 of the library runs against
 * this one. It calls the 0.1 entry points (pc_engine_create@POLLCORE_0.1,
 * pc_call@POLLCORE_0.1, as a program linked against 0.1 binds them) with
 * the 0.1 structures (workers/abi_0_1.h, frozen):
 *  - its engine parameters arrive whole: the window it set is the one the
 *    peer sees, its handoff mode and handler are used;
 *  - its deadline is in milliseconds: a call of 200 ms ends with
 *    -ETIMEDOUT no sooner than that (read as microseconds it would end at
 *    once), its request given back;
 *  - a call answered completes with the response, bytes checked.
 * The 0.2 entry points are exercised by every other test.
 */
#include "abi_0_1.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

/* How a program linked against 0.1 binds these two names. */
struct pc_engine *engine_create_0_1(const struct pc_engine_params_0_1 *p);
int call_0_1(struct pc_msg *msg, pc_call_fn done, void *arg, uint32_t timeout_ms,
	     uint64_t *req_id);
__asm__(".symver engine_create_0_1, pc_engine_create@POLLCORE_0.1");
__asm__(".symver call_0_1, pc_call@POLLCORE_0.1");

static atomic_bool srv_hold;
static struct pc_msg *_Atomic held;

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	if (atomic_load(&srv_hold) && !atomic_load(&held)) {
		atomic_store(&held, m);
		return;
	}
	/* the answer: the request's bytes, each plus one */
	for (uint32_t i = 0; i < m->len; i++)
		((unsigned char *)m->data)[i]++;
	ck_assert_int_eq(pc_reply(m), 0);
}

struct outcome {
	atomic_uint runs;
	atomic_int status;
	bool bytes_ok;
	uint64_t at_ms;
};

static void done(struct pc_msg *m, int status, void *arg)
{
	struct outcome *o = arg;
	unsigned char want = status ? 0x40 : 0x41;

	o->bytes_ok = m->len == 32;
	for (uint32_t i = 0; o->bytes_ok && i < m->len; i++)
		o->bytes_ok = ((unsigned char *)m->data)[i] == want;
	o->at_ms = pc_test_now_ms();
	ck_assert_int_eq(pc_msg_release(m), 0);
	atomic_store(&o->status, status);
	atomic_fetch_add(&o->runs, 1);
}

static void wait_done(struct pc_engine *cli, struct outcome *o)
{
	uint64_t end = pc_test_now_ms() + 30000;
	struct pc_msg *msgs[4];

	while (!atomic_load(&o->runs) && pc_test_now_ms() < end) {
		ck_assert_int_eq(pc_app_poll(cli, msgs, 4), 0);
		usleep(200);
	}
	ck_assert_uint_eq(atomic_load(&o->runs), 1);
}

static struct pc_msg *request(struct pc_conn *c)
{
	struct pc_msg *m = pc_msg_alloc(c);

	ck_assert_ptr_nonnull(m);
	memset(m->data, 0x40, 32);
	m->len = 32;
	return m;
}

START_TEST(test_program_of_0_1)
{
	struct pc_engine_params_0_1 sp = { .on_msg = srv_on_msg, .no_numa = true, .window = 8 };
	struct pc_engine_params_0_1 cp = { .handoff = PC_HANDOFF_RING, .no_numa = true,
					   .window = 8 };
	struct outcome late = { 0 }, answered = { 0 };
	struct pc_engine *srv, *cli;
	struct pc_conn_info in;
	struct pc_conn *c;
	uint64_t t0;

	srv = engine_create_0_1(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = engine_create_0_1(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(c, "connect: %s", pc_last_error());
	/* the server's window, as its 0.1 parameters said */
	pc_conn_info(c, &in);
	ck_assert_uint_eq(in.peer_window, 8);

	/* 200, in milliseconds */
	atomic_store(&srv_hold, true);
	t0 = pc_test_now_ms();
	ck_assert_int_eq(call_0_1(request(c), done, &late, 200, NULL), 0);
	wait_done(cli, &late);
	ck_assert_int_eq(atomic_load(&late.status), -ETIMEDOUT);
	ck_assert(late.bytes_ok);
	ck_assert_msg(late.at_ms - t0 >= 190, "a deadline of 200 ms fired after %llu ms",
		      (unsigned long long)(late.at_ms - t0));

	atomic_store(&srv_hold, false);
	ck_assert_int_eq(call_0_1(request(c), done, &answered, 10000, NULL), 0);
	wait_done(cli, &answered);
	ck_assert_int_eq(atomic_load(&answered.status), 0);
	ck_assert(answered.bytes_ok);

	pc_engine_destroy(cli);
	if (atomic_load(&held))
		pc_msg_release(atomic_load(&held));
	pc_engine_destroy(srv);
	pc_conn_put(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("abi_0_1");
	TCase *tc = tcase_create("abi_0_1");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_program_of_0_1);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
