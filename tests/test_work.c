// SPDX-License-Identifier: MIT
/*
 * rdma suite: work between the workers of an engine (pc_worker_post()).
 *  - work posted from an application thread and from another worker runs
 *    exactly once, on the worker it was posted to, also when that worker
 *    sleeps (hybrid idle);
 *  - a sharded server: a request that reaches the wrong worker is handed
 *    to the worker that owns its key, which answers it from there
 *    (pc_reply() of another worker's message). The client checks that
 *    every answer came from the owning worker.
 */
#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

enum { NW = 2 };

struct job {
	struct pc_work work;
	struct pc_worker *want;		/* where it must run */
	struct pc_worker *next;		/* then post it on to here, once */
	atomic_uint *runs;
	atomic_uint *wrong;
};

static void job_fn(struct pc_work *work)
{
	struct job *j = pc_container_of(work, struct job, work);

	if (pc_worker_self() != j->want)
		atomic_fetch_add(j->wrong, 1);
	atomic_fetch_add(j->runs, 1);
	if (j->next) {
		j->want = j->next;
		j->next = NULL;
		/* from one worker to another */
		ck_assert_int_eq(pc_worker_post(j->want, &j->work), 0);
	}
}

static struct pc_engine *engine(enum pc_idle idle, void (*on_msg)(struct pc_msg *, void *))
{
	struct pc_engine_params p = {.size = sizeof(p),
				     .workers_per_device = NW,
				     .no_numa = true,
				     .idle = idle,
				     .idle_spins = 10,
				     .on_msg = on_msg};
	struct pc_engine *e = pc_engine_create(&p);

	ck_assert_msg(e, "engine: %s", pc_last_error());
	return e;
}

static void wait_for(atomic_uint *v, unsigned int want, int seconds)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)seconds * 1000;

	while (atomic_load(v) < want && pc_test_now_ms() < end)
		usleep(1000);
}

static void quiet_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	pc_msg_release(m);
}

START_TEST(test_post_runs_on_its_worker)
{
	enum { N = 500 };
	static struct job jobs[N];
	struct pc_engine *e = engine(PC_IDLE_HYBRID, quiet_msg);
	struct pc_worker *w[NW] = { pc_engine_worker(e, 0), pc_engine_worker(e, 1) };
	struct pc_worker_stats st;
	atomic_uint runs = 0, wrong = 0;
	unsigned int i;
	int rc;

	/* the workers are asleep (hybrid, 10 empty turns): each post must wake its target */
	for (i = 0; i < NW; i++) {
		st = pc_test_wait_sleep(e, i, 1, 0);
		ck_assert_msg(st.sleeps > 0, "worker %u never slept in 30 s", i);
	}
	for (i = 0; i < N; i++) {
		jobs[i] = (struct job){ .work.fn = job_fn, .want = w[i % NW],
					.next = i % 3 ? NULL : w[(i + 1) % NW], .runs = &runs,
					.wrong = &wrong };
		while ((rc = pc_worker_post(jobs[i].want, &jobs[i].work)) == -ENOBUFS)
			usleep(100);
		ck_assert_int_eq(rc, 0);
	}
	/* each job once, and those with a next once more, on the next worker */
	wait_for(&runs, N + (N + 2) / 3, 30);
	usleep(20 * 1000);
	ck_assert_uint_eq(atomic_load(&runs), N + (N + 2) / 3);
	ck_assert_uint_eq(atomic_load(&wrong), 0);
	{
		struct pc_work bad = { 0 };

		ck_assert_int_eq(pc_worker_post(w[0], &bad), -EINVAL);
	}
	pc_engine_destroy(e);
}
END_TEST

/* --- a sharded server ------------------------------------------------------------------------- */

struct handoff {
	struct pc_work work;
	struct pc_msg *req;
};

static struct handoff handoffs[4096];
static atomic_uint handoff_next, handed;
static struct pc_engine *srv;

/* The shard of a key: the worker that owns it. */
static unsigned int shard_of(uint32_t key)
{
	return key % NW;
}

/* Answers on the owning worker: the key and the index of the worker that answered. */
static void answer_here(struct pc_msg *m)
{
	uint32_t v[2];

	memcpy(v, m->data, 4);
	v[1] = pc_worker_index(pc_worker_self());
	memcpy(m->data, v, sizeof(v));
	m->len = sizeof(v);
	ck_assert_int_eq(pc_reply(m), 0);
}

static void handoff_fn(struct pc_work *work)
{
	answer_here(pc_container_of(work, struct handoff, work)->req);
}

static void shard_on_msg(struct pc_msg *m, void *arg)
{
	unsigned int owner;
	uint32_t key;

	(void)arg;
	memcpy(&key, m->data, 4);
	owner = shard_of(key);
	if (owner == pc_worker_index(pc_worker_self())) {
		answer_here(m);
		return;
	}
	/* not ours: to the owner, which replies with our message */
	{
		struct handoff *h = &handoffs[atomic_fetch_add(&handoff_next, 1) % 4096];

		h->work.fn = handoff_fn;
		h->req = m;
		atomic_fetch_add(&handed, 1);
		ck_assert_int_eq(pc_worker_post(pc_engine_worker(srv, owner), &h->work), 0);
	}
}

static atomic_uint answers, misplaced;

static void shard_done(struct pc_msg *m, int status, void *arg)
{
	uint32_t v[2], key = (uint32_t)(uintptr_t)arg;

	ck_assert_int_eq(status, 0);
	ck_assert_uint_eq(m->len, sizeof(v));
	memcpy(v, m->data, sizeof(v));
	ck_assert_uint_eq(v[0], key);
	if (v[1] != shard_of(key))
		atomic_fetch_add(&misplaced, 1);
	pc_msg_release(m);
	atomic_fetch_add(&answers, 1);
}

START_TEST(test_sharded_server)
{
	/* keys; half belong to the other worker (the sanitized builds: the same, fewer) */
	enum { N = PC_TEST_SAN(2000, 500) };
	struct pc_engine_params cp = { .size = sizeof(cp), .no_numa = true, .handoff = PC_HANDOFF_RING };
	struct pc_engine *cli;
	struct pc_conn *c;
	struct pc_msg *msgs[16];
	uint32_t key;
	int rc;

	srv = engine(PC_IDLE_HYBRID, shard_on_msg);
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	cli = pc_engine_create(&cp);
	ck_assert_msg(cli, "client: %s", pc_last_error());
	ck_assert_int_eq(pc_app_attach(cli, 0), 0);
	c = pc_connect(cli, pc_test_addr(), pc_listen_port(srv), -1, 20000, NULL);
	ck_assert_msg(c, "connect: %s", pc_last_error());
	for (key = 0; key < N; key++) {
		uint64_t end = pc_test_now_ms() + 30000;

		for (;;) {
			struct pc_msg *m = pc_msg_alloc(c);

			if (m) {
				memcpy(m->data, &key, 4);
				m->len = 4;
				rc = pc_call(m, shard_done, (void *)(uintptr_t)key, 30000000, NULL);
				if (!rc)
					break;
				ck_assert_msg(rc == -EAGAIN || rc == -ENOBUFS, "call: %d", rc);
				ck_assert_int_eq(pc_msg_release(m), 0);
			} else {
				ck_assert_int_eq(errno, ENOBUFS);
			}
			/* completions only: no message comes back any other way */
			ck_assert_int_eq(pc_app_poll(cli, msgs, 16), 0);
			ck_assert(pc_test_now_ms() < end);
		}
		ck_assert_int_eq(pc_app_poll(cli, msgs, 16), 0);
	}
	{
		uint64_t end = pc_test_now_ms() + 60000;

		while (atomic_load(&answers) < N && pc_test_now_ms() < end)
			ck_assert_int_eq(pc_app_poll(cli, msgs, 16), 0);
	}
	ck_assert_uint_eq(atomic_load(&answers), N);
	ck_assert_uint_eq(atomic_load(&misplaced), 0);
	/* the connection lives on one worker: half the keys belong to the other */
	ck_assert_uint_eq(atomic_load(&handed), N / 2);
	pc_engine_destroy(cli);
	pc_engine_destroy(srv);
	pc_conn_put(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("work");
	TCase *tc = tcase_create("work");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_post_runs_on_its_worker);
	tcase_add_test(tc, test_sharded_server);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
