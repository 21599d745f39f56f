// SPDX-License-Identifier: MIT
/*
 * pollcore-kv client: ring mode, one application thread, pc_call() with a
 * completion and a deadline for every request.
 *
 * The thread keeps --depth calls in flight on each of --connections
 * connections for --time seconds, then waits for every call to end. Each
 * key travels on one connection, chosen by its hash, so that its requests
 * reach the server in the order they were made, those whose calls ended
 * early included (one QP is in order; server.c keeps that order through
 * its handoffs); a key has at most one call in flight. model.c checks
 * every answer. Every --cancel-every'th GET is cancelled right after it is
 * made (pc_call_cancel()), so that calls end each way; a cancel that comes
 * after the response changes nothing.
 *
 * Every call completes exactly once, inside pc_app_poll() on this thread:
 * ops (answered) + timeouts + cancelled + errors == calls, which --json
 * prints with the rest. allocs and enobufs count pc_msg_alloc() calls and
 * those that found the slot's stock of send buffers empty (ENOBUFS).
 */
#include "kv.h"
#include "client.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "../cli.h"

/* the engine's max_calls by default (2 x the window): beyond the window, calls wait in it */
#define MAX_DEPTH (2 * PC_WINDOW_DEFAULT)

enum { O_TIMEOUT = CLI_TOOL_FIRST, O_KEYS, O_CANCEL };
#define DRAIN_S	  30u /* calls without a deadline: give up waiting after this long */

struct cconn {
	struct client *cl;
	struct pc_conn *conn;
	uint32_t *keys; /* the key indexes this connection carries */
	uint32_t nkeys, inflight;
	uint64_t rng;
	bool dead; /* closed: no more calls on it */
};

struct client {
	uint32_t nconns, depth, timeout_ms, nkeys, cancel_every;
	uint64_t salt; /* keys are salt + index: a new set each run */
	struct key_state *ks;
	struct cconn *cc;
	uint64_t calls, ops, gets, puts, dels, mismatches, errors, timeouts, cancelled;
	uint64_t cancels, cancel_fail, duplicates, refused, unexpected, allocs, enobufs;
	uint64_t eagain, inflight; /* eagain: pc_call() refused for max_calls (never, below it) */
	char first_err[256];
	atomic_uint downs;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static void note(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct client *cl, const char *fmt, ...)
{
	va_list ap;

	if (cl->first_err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(cl->first_err, sizeof(cl->first_err), fmt, ap);
	va_end(ap);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return kv_mix(*s);
}

/* The completion of every call, exactly once: inside pc_app_poll(), on this thread. */
static void kv_done(struct pc_msg *m, int status, void *arg)
{
	struct key_state *k = arg;
	struct client *cl = k->x->cl;
	uint64_t key = cl->salt + (uint64_t)(k - cl->ks);
	char why[200];

	if (!k->op) {
		cl->duplicates++;
		note(cl, "a call completed twice (status %d)", status);
	} else if (!status) {
		switch (kv_answer(k, key, m, why, sizeof(why))) {
		case KV_RIGHT:
			cl->ops++;
			break;
		case KV_REFUSED:
			cl->errors++;
			note(cl, "%s", why);
			break;
		case KV_MISMATCH:
			cl->ops++;
			cl->mismatches++;
			note(cl, "%s", why);
			break;
		}
	} else {
		cl->timeouts += status == -ETIMEDOUT;
		cl->cancelled += status == -ECANCELED;
		if (status != -ETIMEDOUT && status != -ECANCELED) {
			cl->errors++;
			note(cl, "a call ended with %s", strerror(-status));
		}
		if (!kv_unanswered(k, key, m)) {
			cl->mismatches++;
			note(cl, "a failed call gave back a request that is not the one sent");
		}
	}
	if (k->op) {
		k->op = 0;
		k->x->inflight--;
		cl->inflight--;
	}
	pc_msg_release(m);
}

/* Makes one call on @x; false when @x can take no more now. */
static bool kv_issue(struct client *cl, struct cconn *x)
{
	struct key_state *k = NULL;
	struct pc_msg *m;
	uint32_t ki = 0, i;
	uint64_t id;
	int ret;

	if (x->inflight == cl->depth || !x->nkeys || x->dead)
		return false;
	for (i = 0; i < 8; i++) {
		ki = x->keys[rnd(&x->rng) % x->nkeys];
		k = &cl->ks[ki];
		if (!k->op)
			break;
	}
	if (k->op)
		return false; /* unlucky; another turn */
	cl->allocs++;
	m = pc_msg_alloc(x->conn);
	if (!m) {
		/* ENOBUFS: the slot's stock of send buffers is empty; calls ending fill it */
		cl->enobufs += errno == ENOBUFS;
		if (errno != ENOBUFS) {
			cl->refused++;
			note(cl, "pc_msg_alloc: %s", strerror(errno));
			x->dead = true;
		}
		return false;
	}
	kv_request(k, cl->salt + ki, (uint32_t)(rnd(&x->rng) % 100), m);
	/* beyond the window the call waits in the engine, its deadline running: never refused */
	ret = pc_call(m, kv_done, k, (uint64_t)cl->timeout_ms * 1000, &id);
	if (ret) {
		cl->eagain += ret == -EAGAIN;
		cl->refused++;
		note(cl, "pc_call: %s (%s)", strerror(-ret), pc_last_error());
		x->dead = ret == -ENOTCONN;
		k->op = 0;
		if (ret != -ENOTCONN)
			pc_msg_release(m);
		return false;
	}
	cl->calls++;
	cl->inflight++;
	x->inflight++;
	cl->gets += k->op == KV_GET;
	cl->puts += k->op == KV_PUT;
	cl->dels += k->op == KV_DEL;
	if (k->op == KV_GET && cl->cancel_every && cl->gets % cl->cancel_every == 0) {
		/* on purpose: it ends -ECANCELED, or answered if the response won */
		ret = pc_call_cancel(x->conn, id);
		cl->cancels += !ret;
		cl->cancel_fail += !!ret;
	}
	return true;
}

static void cli_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct client *cl = arg;

	(void)conn;
	if (ev == PC_CONN_DOWN)
		atomic_fetch_add(&cl->downs, 1);
}

static int setup(struct client *cl)
{
	uint32_t i;

	cl->ks = calloc(cl->nkeys, sizeof(*cl->ks));
	cl->cc = calloc(cl->nconns, sizeof(*cl->cc));
	if (!cl->ks || !cl->cc)
		return -1;
	for (i = 0; i < cl->nconns; i++) {
		cl->cc[i].cl = cl;
		cl->cc[i].rng = cl->salt + i;
		cl->cc[i].keys = calloc(cl->nkeys, sizeof(uint32_t));
		if (!cl->cc[i].keys)
			return -1;
	}
	/* each key on the connection its hash picks (server.c says why) */
	for (i = 0; i < cl->nkeys; i++) {
		struct cconn *x = &cl->cc[kv_mix(cl->salt + i) % cl->nconns];

		cl->ks[i].x = x;
		x->keys[x->nkeys++] = i;
	}
	return 0;
}

static void teardown(struct client *cl)
{
	uint32_t i;

	for (i = 0; cl->cc && i < cl->nconns; i++) {
		pc_conn_put(cl->cc[i].conn); /* valid past pc_engine_destroy() */
		free(cl->cc[i].keys);
	}
	free(cl->cc);
	free(cl->ks);
}

/* Calls for @secs seconds, then waits for all to end. Returns the seconds it called. */
static double run(struct client *cl, struct pc_engine *e, double secs)
{
	uint64_t t0 = kv_now_ns(), t_end = t0 + (uint64_t)(secs * 1e9), now, t_stop = 0;
	uint64_t give_up = ((uint64_t)cl->timeout_ms + 1000) * 1000000ull;
	struct pc_msg *msgs[32];
	uint32_t i;
	int n;

	if (!cl->timeout_ms)
		give_up = DRAIN_S * 1000000000ull;
	for (;;) {
		now = kv_now_ns();
		if (!t_stop && (now >= t_end || interrupted))
			t_stop = now;
		for (i = 0; !t_stop && i < cl->nconns; i++)
			while (kv_issue(cl, &cl->cc[i]))
				;
		/* the completions run in here; any message it returns is not ours */
		n = pc_app_poll(e, msgs, 32);
		for (int j = 0; j < n; j++) {
			cl->unexpected++;
			pc_msg_release(msgs[j]);
		}
		if (t_stop && (!cl->inflight || now - t_stop > give_up))
			break;
	}
	return (double)(t_stop - t0) / 1e9;
}

static void report(struct client *cl, double secs, uint64_t late, bool json)
{
	double ratio = cl->allocs ? (double)cl->enobufs / (double)cl->allocs : 0.0;

	if (json) {
		printf("{\"connections\": %u, \"depth\": %u, \"seconds\": %.3f, \"calls\": %" PRIu64
		       ", \"ops\": %" PRIu64 ", \"ops_per_s\": %.0f, \"gets\": %" PRIu64
		       ", \"puts\": %" PRIu64 ", \"dels\": %" PRIu64 ", \"mismatches\": %" PRIu64
		       ", \"errors\": %" PRIu64 ", \"timeouts\": %" PRIu64
		       ", \"cancelled\": %" PRIu64 ", \"cancels\": %" PRIu64
		       ", \"cancel_failed\": %" PRIu64 ", \"late_responses\": %" PRIu64
		       ", \"lost\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"refused\": %" PRIu64
		       ", \"unexpected\": %" PRIu64 ", \"allocs\": %" PRIu64
		       ", \"enobufs\": %" PRIu64
		       ", \"enobufs_ratio\": %.6f, \"eagain\": %" PRIu64 "}\n",
		       cl->nconns, cl->depth, secs, cl->calls, cl->ops,
		       secs > 0 ? (double)cl->ops / secs : 0.0, cl->gets, cl->puts, cl->dels,
		       cl->mismatches, cl->errors, cl->timeouts, cl->cancelled, cl->cancels,
		       cl->cancel_fail, late, cl->inflight, cl->duplicates, cl->refused,
		       cl->unexpected, cl->allocs, cl->enobufs, ratio, cl->eagain);
		return;
	}
	printf("calls        %" PRIu64 " in %.3f s (%" PRIu64 " GET, %" PRIu64 " PUT, %" PRIu64
	       " DEL), %u connections x %u in flight\n",
	       cl->calls, secs, cl->gets, cl->puts, cl->dels, cl->nconns, cl->depth);
	printf("answered     %" PRIu64 " (%.0f/s), %" PRIu64 " mismatches\n", cl->ops,
	       secs > 0 ? (double)cl->ops / secs : 0.0, cl->mismatches);
	printf("ended        %" PRIu64 " timeouts, %" PRIu64 " cancelled (of %" PRIu64
	       " cancels), %" PRIu64 " errors, %" PRIu64 " never ended; %" PRIu64
	       " late responses dropped\n",
	       cl->timeouts, cl->cancelled, cl->cancels, cl->errors, cl->inflight, late);
	printf("send buffers %" PRIu64 " allocations, %" PRIu64 " ENOBUFS (%.3f%%)\n", cl->allocs,
	       cl->enobufs, 100.0 * ratio);
}

int kv_client(int argc, char **argv)
{
	static const struct option opts[] = {
	    CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_NONUMA, CLI_OPT_IDLE,
	    CLI_OPT_JSON, CLI_OPT_TIME, CLI_OPT_HELP,
	    {"connections", required_argument, NULL, 'q'},
	    {"window", required_argument, NULL, 'W'},
	    {"timeout-ms", required_argument, NULL, O_TIMEOUT},
	    {"keys", required_argument, NULL, O_KEYS},
	    {"cancel-every", required_argument, NULL, O_CANCEL},
	    {0},
	};
	struct cli_common o = { .port = KV_DEFAULT_PORT, .workers = 1, .time_s = 5 };
	struct client cl = {
	    .nconns = 1, .depth = 16, .timeout_ms = 1000, .nkeys = 10000, .cancel_every = 16};
	struct pc_engine_params p = { .size = sizeof(p) };
	struct pc_engine *e = NULL;
	uint64_t late = 0;
	uint32_t i;
	bool json;
	double elapsed;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, ":a:p:d:NjD:hq:W:", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			if (cli_u32("--connections", optarg, 1, 64, &cl.nconns))
				return 2;
			break;
		case 'W':
			if (cli_u32("--window", optarg, 1, MAX_DEPTH, &cl.depth))
				return 2;
			break;
		case O_TIMEOUT:
			if (cli_u32("--timeout-ms", optarg, 0, 3600000, &cl.timeout_ms))
				return 2;
			break;
		case O_KEYS:
			if (cli_u32("--keys", optarg, 1, 1u << 24, &cl.nkeys))
				return 2;
			break;
		case O_CANCEL:
			if (cli_u32("--cancel-every", optarg, 0, UINT32_MAX, &cl.cancel_every))
				return 2;
			break;
		default:
			if (cli_other_opt(&o, c, "client", argv))
				return 2;
		}
	}
	if (cli_client_addr(&o, argc, argv))
		return 2;
	if (cl.nkeys < cl.nconns * cl.depth)
		return cli_usage_error("client: --keys %u is fewer than the %u calls in flight",
				       cl.nkeys, cl.nconns * cl.depth);
	json = o.json;

	cl.salt = kv_mix(kv_now_ns() ^ ((uint64_t)getpid() << 32)) << 24;
	if (setup(&cl)) {
		fprintf(stderr, KV_PROG " client: out of memory\n");
		goto out;
	}
	cli_catch_stop(on_signal);
	cli_engine_params(&o, &p);
	p.handoff = PC_HANDOFF_RING;
	p.app_threads = 1;
	p.msg_size = KV_MSG_MAX;
	p.on_conn = cli_on_conn;
	p.arg = &cl;
	e = cli_engine_start("client", &p);
	if (!e)
		goto out;
	if (pc_app_attach(e, 0)) {
		fprintf(stderr, KV_PROG " client: %s\n", pc_last_error());
		goto out;
	}
	for (i = 0; i < cl.nconns; i++) {
		cl.cc[i].conn = cli_connect(e, &o, i, cl.nconns, 10000, &cl.cc[i]);
		if (!cl.cc[i].conn)
			goto out;
	}
	if (!json) {
		printf(KV_PROG " client: %u connection%s to %s port %u, %u calls in flight each, "
			       "%g s, deadline %u ms, %u keys\n",
		       cl.nconns, cl.nconns > 1 ? "s" : "", o.addr, o.port, cl.depth, o.time_s,
		       cl.timeout_ms, cl.nkeys);
		fflush(stdout);
	}
	elapsed = run(&cl, e, o.time_s);
	for (i = 0; i < cl.nconns; i++) {
		struct pc_conn_info ci;

		pc_conn_info(cl.cc[i].conn, &ci);
		late += ci.late_responses;
	}
	report(&cl, elapsed, late, json);
	if (cl.first_err[0])
		fprintf(stderr, KV_PROG " client: first problem: %s\n", cl.first_err);
	if (atomic_load(&cl.downs))
		fprintf(stderr, KV_PROG " client: %u connection%s closed during the run\n",
			atomic_load(&cl.downs), atomic_load(&cl.downs) > 1 ? "s" : "");
	rc = cl.ops && !cl.mismatches && !cl.errors && !cl.duplicates && !cl.inflight &&
		     !cl.refused && !cl.unexpected &&
		     cl.ops + cl.timeouts + cl.cancelled + cl.errors == cl.calls
		 ? 0
		 : 1;
	if (!json)
		pc_engine_print_stats(e, stdout);
out:
	fflush(stdout);
	pc_engine_destroy(e);
	teardown(&cl);
	return rc;
}
