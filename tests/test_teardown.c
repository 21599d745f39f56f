// SPDX-License-Identifier: MIT
/*
 * rdma suite: connections torn down while application threads use them
 * (engine.h, "Lifetime of a connection").
 *
 * A client engine in ring mode with four attached application threads that
 * allocate, send, call, write one-sided and release in tight loops on
 * whatever connections are live, while connector threads keep up to 16
 * connections open and the main thread closes them, alternately from the
 * client (pc_close) and from the server (the peer), PC_TEARDOWN_CYCLES
 * times (default 1000; 300 in the sanitized builds, where each close is
 * several times slower and a use-after-free or a race shows in hundreds
 * as in a thousand). The application
 * follows the rule engine.h states: its connection table is guarded by a
 * lock that on_conn(DOWN) takes too, so no call naming a connection is in
 * flight once DOWN has returned; messages it still holds (allocated, not
 * yet sent) are sent or released afterwards, without the lock.
 *
 * Under ASan this caught a heap-use-after-free (a ring entry or a held
 * send buffer outliving its connection); under TSan it runs with no
 * suppression that covers a connection's lifetime (tests/tsan.supp).
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

#define SLOTS 16	/* client connections at once (closing ones included), at most */
#define TABLE (4 * SLOTS) /* the server's may lag behind: its DOWNs come later */
#define APPS 4
#define OPS 4		/* one-sided operations each app thread may have in flight */
#define MAGIC 0x7ea2d0u

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* The application's view of one side: live connections under one lock. */
struct side {
	pthread_mutex_t lock;
	struct pc_conn *conn[TABLE];
	bool closing[TABLE];
	atomic_uint up, down;
};

static struct side srv_side, cli_side;

static void side_on_conn(struct side *sd, struct pc_conn *c, enum pc_conn_event ev)
{
	unsigned int i;

	pthread_mutex_lock(&sd->lock);
	for (i = 0; i < TABLE; i++) {
		if (ev == PC_CONN_UP && !sd->conn[i]) {
			sd->conn[i] = c;
			sd->closing[i] = false;
			break;
		}
		if (ev == PC_CONN_DOWN && sd->conn[i] == c) {
			sd->conn[i] = NULL;
			break;
		}
	}
	/* UP always finds a slot (the churn connects only into free ones), DOWN its conn */
	ck_assert_uint_lt(i, TABLE);
	atomic_fetch_add(ev == PC_CONN_UP ? &sd->up : &sd->down, 1);
	pthread_mutex_unlock(&sd->lock);
}

static void srv_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	side_on_conn(&srv_side, c, ev);
}

static atomic_int cli_reserved;

static void cli_on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	side_on_conn(&cli_side, c, ev);
	if (ev == PC_CONN_DOWN)
		atomic_fetch_sub(&cli_reserved, 1);
}

/* Server: echoes in place; a message meeting a closing conn is released by pollcore. */
static void srv_on_msg(struct pc_msg *m, void *arg)
{
	int rc = m->type == PC_MSG_REQUEST ? pc_reply(m) : pc_send(m);

	(void)arg;
	ck_assert_msg(rc == 0 || rc == -ENOTCONN, "echo: %d", rc);
}

/* Closes one live connection of @sd that is not closing yet; false if none. */
static bool side_close_one(struct side *sd, uint32_t *seed)
{
	unsigned int i, k = rnd(seed) % TABLE;

	pthread_mutex_lock(&sd->lock);
	for (i = 0; i < TABLE; i++, k = (k + 1) % TABLE)
		if (sd->conn[k] && !sd->closing[k]) {
			int rc = pc_close(sd->conn[k]);

			/* the peer, or an error, may have started the close already */
			ck_assert_msg(rc == 0 || rc == -EALREADY, "pc_close: %d", rc);
			sd->closing[k] = true;
			break;
		}
	pthread_mutex_unlock(&sd->lock);
	return i < TABLE;
}

/* Connections of @sd, and how many of them are not closing. */
static unsigned int side_count(struct side *sd, unsigned int *open)
{
	unsigned int i, n = 0;

	*open = 0;
	pthread_mutex_lock(&sd->lock);
	for (i = 0; i < TABLE; i++) {
		n += sd->conn[i] != NULL;
		*open += sd->conn[i] && !sd->closing[i];
	}
	pthread_mutex_unlock(&sd->lock);
	return n;
}

/* --- application threads ------------------------------------------------------------- */

struct my_op {
	struct pc_op op;
	atomic_int busy;
};

struct app {
	pthread_t t;
	struct pc_engine *e;
	unsigned int slot;
	uint32_t seed;
	struct my_op ops[OPS];
	uint64_t sent, refused, allocs, kept_sent, kept_refused, recv, bad, ops_sub;
};

static atomic_bool stop;
static atomic_ulong ops_done, ops_twice;
static void *remote_buf, *local_buf;
static uint32_t remote_rkey, local_lkey;

static void op_done(struct pc_op *op, int status)
{
	struct my_op *o = pc_container_of(op, struct my_op, op);

	(void)status;
	if (!atomic_exchange(&o->busy, 0))
		atomic_fetch_add(&ops_twice, 1);
	atomic_fetch_add(&ops_done, 1);
}

static void fill(struct pc_msg *m, uint32_t v)
{
	uint32_t w[2] = { MAGIC, v };

	memcpy(m->data, w, sizeof(w));
	m->len = sizeof(w);
}

/*
 * One call naming a connection, under the lock, as the rule asks. Nothing
 * here waits for the worker: it may itself be waiting for this lock in
 * on_conn(DOWN). A message that must be given back later goes to @back.
 */
static void app_use(struct app *a, struct pc_conn *c, struct pc_msg **kept, struct pc_msg **back)
{
	uint32_t r = rnd(&a->seed);
	struct pc_msg *m;
	unsigned int k;
	int ret;

	if (r % 8 == 7) {
		for (k = 0; k < OPS; k++)
			if (!atomic_load(&a->ops[k].busy))
				break;
		if (k == OPS)
			return;
		a->ops[k].op = (struct pc_op){
			.code = PC_OP_WRITE, .local = (char *)local_buf + 64 * a->slot,
			.lkey = local_lkey, .len = 64,
			.remote_addr = (uintptr_t)remote_buf + 64 * a->slot, .rkey = remote_rkey,
			.done = op_done,
		};
		atomic_store(&a->ops[k].busy, 1);
		ret = pc_rdma(c, &a->ops[k].op);
		if (ret) {
			/* ENOTCONN: closing already, done() will not run */
			ck_assert_msg(ret == -ENOBUFS || ret == -ENOTCONN, "pc_rdma: %d", ret);
			atomic_store(&a->ops[k].busy, 0);
		} else {
			a->ops_sub++;
		}
		return;
	}
	m = pc_msg_alloc(c);
	if (!m) {
		ck_assert_msg(errno == ENOBUFS || errno == ENOTCONN, "alloc: %d", errno);
		return;
	}
	a->allocs++;
	fill(m, a->slot);
	if (r % 8 == 6 && !*kept) {
		/* kept past the unlock: sent or released later, maybe after DOWN */
		*kept = m;
		return;
	}
	ret = r & 1 ? pc_call(m, NULL, NULL, 0, NULL) : pc_send(m);
	if (ret == 0) {
		a->sent++;
		return;
	}
	a->refused++;
	/* -ENOTCONN released it; otherwise it is still ours */
	if (ret != -ENOTCONN) {
		ck_assert_msg(ret == -ENOBUFS || ret == -EAGAIN, "send: %d", ret);
		*back = m;
	}
}

/* Gives @m back, retrying while the ring is full; never under the lock. */
static void give_back(struct pc_msg *m)
{
	while (pc_msg_release(m) == -ENOBUFS)
		usleep(10);
}

static void *app_main(void *arg)
{
	struct app *a = arg;
	struct pc_msg *kept = NULL, *back, *msgs[16];
	unsigned int n, i;
	int ret;

	ck_assert_int_eq(pc_app_attach(a->e, a->slot), 0);
	while (!atomic_load(&stop)) {
		struct pc_conn *c;

		back = NULL;
		pthread_mutex_lock(&cli_side.lock);
		c = cli_side.conn[rnd(&a->seed) % SLOTS];	/* the client uses the first SLOTS */
		if (c)
			app_use(a, c, &kept, &back);
		pthread_mutex_unlock(&cli_side.lock);
		if (back)
			give_back(back);

		/* a held message keeps its connection: usable without the lock, after DOWN too */
		if (kept && rnd(&a->seed) % 4 == 0) {
			ret = pc_send(kept);
			if (ret == 0) {
				a->kept_sent++;
			} else {
				a->kept_refused++;
				if (ret != -ENOTCONN)
					give_back(kept);
			}
			kept = NULL;
		}
		n = pc_app_poll(a->e, msgs, 16);
		for (i = 0; i < n; i++) {
			uint32_t w[2];

			memcpy(w, msgs[i]->data, sizeof(w));
			if (msgs[i]->len != sizeof(w) || w[0] != MAGIC || w[1] >= APPS)
				a->bad++;
			give_back(msgs[i]);
		}
		a->recv += n;
	}
	if (kept)
		give_back(kept);
	/* the ops still in flight end with their connections */
	for (i = 0; i < OPS; i++)
		while (atomic_load(&a->ops[i].busy))
			usleep(1000);
	/* drain what is left for this slot */
	while ((n = pc_app_poll(a->e, msgs, 16)))
		for (i = 0; i < n; i++)
			give_back(msgs[i]);
	return NULL;
}

/* --- the churn ---------------------------------------------------------------------------- */

#define CONNECTORS 3

static atomic_bool stop_connecting;
/* cli_reserved: client conns in the table or being connected */
static atomic_uint connects;
static struct pc_engine *cli_engine;
static uint16_t srv_port;

/* Connects into free client slots, several at once: rdma_cm round trips are slow under TCG. */
static void *connector_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_connecting)) {
		if (atomic_fetch_add(&cli_reserved, 1) >= SLOTS) {
			atomic_fetch_sub(&cli_reserved, 1);
			usleep(500);
			continue;
		}
		struct pc_conn *c = pc_connect(cli_engine, pc_test_addr(), srv_port, -1, 20000,
					       NULL);

		ck_assert_msg(c, "connect %u: %s", atomic_load(&connects), pc_last_error());
		/* the table, filled by on_conn(UP) and emptied by DOWN, is what this test uses */
		pc_conn_put(c);
		atomic_fetch_add(&connects, 1);
	}
	return NULL;
}

static void wait_until(atomic_uint *v, unsigned int want, int seconds, const char *what)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;

	while (atomic_load(v) < want && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_msg(atomic_load(v) == want, "%s: %u of %u", what, atomic_load(v), want);
}

static void count_conn(struct pc_conn *c, void *arg)
{
	(void)c;
	(*(unsigned int *)arg)++;
}

static unsigned int live_conns(struct pc_engine *e)
{
	unsigned int n = 0;

	pc_engine_for_each_conn(e, count_conn, &n);
	return n;
}

START_TEST(test_churn_under_app_threads)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.on_conn = srv_on_conn, .on_msg = srv_on_msg, .no_numa = true,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp),
		.handoff = PC_HANDOFF_RING, .app_threads = APPS, .on_conn = cli_on_conn,
		.no_numa = true,
	};
	unsigned int cycles =
	    (unsigned int)atoi(pc_test_env("PC_TEARDOWN_CYCLES", PC_TEST_SAN("1000", "300")));
	unsigned int closes = 0, open, i;
	pthread_t conn_t[CONNECTORS];
	uint32_t key;
	void *rmr = NULL, *lmr = NULL;
	struct pc_worker_stats ws;
	struct pc_engine *srv, *cli;
	struct app apps[APPS];
	uint64_t t0 = pc_test_now_ms(), end, sent = 0, recv = 0, ops = 0;
	uint32_t seed = 0x9e3779b9;

	memset(&srv_side, 0, sizeof(srv_side));
	memset(&cli_side, 0, sizeof(cli_side));
	pthread_mutex_init(&srv_side.lock, NULL);
	pthread_mutex_init(&cli_side.lock, NULL);
	atomic_store(&stop, false);
	atomic_store(&stop_connecting, false);
	atomic_store(&connects, 0);
	atomic_store(&cli_reserved, 0);
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	srv_port = pc_listen_port(srv);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	cli_engine = cli;

	/* memory for the one-sided writes, registered through the first connection */
	remote_buf = aligned_alloc(4096, 4096);
	local_buf = aligned_alloc(4096, 4096);
	memset(local_buf, 0x5a, 4096);
	atomic_fetch_add(&cli_reserved, 1);
	{
		struct pc_conn *c = pc_connect(cli, pc_test_addr(), srv_port, -1, 10000, NULL);

		ck_assert_ptr_nonnull(c);
		pc_conn_put(c);
	}
	atomic_fetch_add(&connects, 1);
	wait_until(&srv_side.up, 1, 10, "server up");
	pthread_mutex_lock(&srv_side.lock);
	for (i = 0; !rmr && i < TABLE; i++)
		if (srv_side.conn[i])
			rmr = pc_mem_reg(srv_side.conn[i], remote_buf, 4096,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &key, &remote_rkey);
	pthread_mutex_unlock(&srv_side.lock);
	pthread_mutex_lock(&cli_side.lock);
	lmr = pc_mem_reg(cli_side.conn[0], local_buf, 4096, 0, &local_lkey, &key);
	pthread_mutex_unlock(&cli_side.lock);
	ck_assert(rmr && lmr);

	for (i = 0; i < APPS; i++) {
		apps[i] = (struct app){ .e = cli, .slot = i, .seed = 0x1234567u * (i + 1) };
		ck_assert_int_eq(pthread_create(&apps[i].t, NULL, app_main, &apps[i]), 0);
	}
	for (i = 0; i < CONNECTORS; i++)
		ck_assert_int_eq(pthread_create(&conn_t[i], NULL, connector_main, NULL), 0);
	while (closes < cycles) {
		/*
		 * Close one conn, from this side or the peer, while more than
		 * half of the slots are open (a closing conn keeps its slot until
		 * DOWN); else let the drains and connects catch up.
		 */
		side_count(&cli_side, &open);
		if (open > SLOTS / 2 && (closes % 2 ? side_close_one(&srv_side, &seed)
						    : side_close_one(&cli_side, &seed))) {
			if (++closes % 100 == 0)
				printf("%u closes, %u connects, %llu ms\n", closes,
				       atomic_load(&connects), (unsigned long long)(pc_test_now_ms() - t0));
			usleep(rnd(&seed) % 1000);
		} else {
			usleep(500);
		}
	}
	atomic_store(&stop_connecting, true);
	for (i = 0; i < CONNECTORS; i++)
		pthread_join(conn_t[i], NULL);
	/* close what is left, let the app threads go on until every DOWN */
	while (side_close_one(&cli_side, &seed))
		;
	wait_until(&cli_side.down, atomic_load(&connects), 60, "client DOWN");
	wait_until(&srv_side.down, atomic_load(&connects), 60, "server DOWN");
	atomic_store(&stop, true);
	for (i = 0; i < APPS; i++) {
		pthread_join(apps[i].t, NULL);
		ck_assert_uint_eq(apps[i].bad, 0);
		sent += apps[i].sent + apps[i].kept_sent;
		recv += apps[i].recv;
		ops += apps[i].ops_sub;
		printf("app %u: allocs %llu sent %llu refused %llu, kept sent %llu refused %llu, "
		       "recv %llu, ops %llu\n",
		       i, (unsigned long long)apps[i].allocs, (unsigned long long)apps[i].sent,
		       (unsigned long long)apps[i].refused, (unsigned long long)apps[i].kept_sent,
		       (unsigned long long)apps[i].kept_refused, (unsigned long long)apps[i].recv,
		       (unsigned long long)apps[i].ops_sub);
	}
	/* every operation reported exactly once; every conn retired; nothing held */
	ck_assert_uint_eq(atomic_load(&ops_done), ops);
	ck_assert_uint_eq(atomic_load(&ops_twice), 0);
	ck_assert_uint_eq(atomic_load(&cli_side.up), atomic_load(&connects));
	ck_assert_uint_eq(atomic_load(&srv_side.up), atomic_load(&connects));
	end = pc_test_now_ms() + 20000;
	while ((live_conns(cli) || live_conns(srv)) && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(live_conns(cli), 0);
	ck_assert_uint_eq(live_conns(srv), 0);
	ck_assert_int_eq(pc_engine_stats(cli, 0, &ws), 0);
	ck_assert_uint_eq(ws.rx_held, 0);
	ck_assert_uint_eq(ws.conns, 0);
	ck_assert_uint_gt(sent, 0);
	ck_assert_uint_gt(recv, 0);
	ck_assert_uint_le(recv, sent);
	printf("%u connections closed (%u connected) in %llu ms: %llu sent, %llu echoed, %llu one-sided\n",
	       closes, atomic_load(&connects), (unsigned long long)(pc_test_now_ms() - t0),
	       (unsigned long long)sent,
	       (unsigned long long)recv, (unsigned long long)ops);
	pc_engine_print_stats(cli, stdout);
	pc_engine_print_stats(srv, stdout);
	pc_mem_dereg(lmr);
	pc_mem_dereg(rmr);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	free(local_buf);
	free(remote_buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("teardown");
	TCase *tc = tcase_create("churn_under_app_threads");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 3000);
	tcase_add_test(tc, test_churn_under_app_threads);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
