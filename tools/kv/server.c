// SPDX-License-Identifier: MIT
/*
 * pollcore-kv server: handler mode, one shard per worker.
 *
 * Each worker owns a shard, an open-addressing hash table that only its
 * thread touches: no lock, no atomic. A key belongs to the shard its hash
 * names. A request runs in on_msg on the worker that received it when that
 * worker owns the key; otherwise it is handed to the owner with
 * pc_worker_post() (pollcore/poller.h), in a context carried by the
 * request's own buffer, and answered there with pc_reply(), which routes
 * the answer through the receiving worker's ring. Work posted by one
 * thread runs in order, so the requests of a connection for one key keep
 * their order through the handoff.
 *
 * The client sends each key over one connection (client.c): the order of a
 * key's requests is then the order they were made, on the wire and here,
 * also for those whose calls ended early (a deadline or a cancel).
 *
 * --stall-every K holds every Kth GET of a shard unanswered for STALL_MS
 * before answering it, so that the client's deadlines fire (its late
 * response is dropped by the client's pollcore and counted). The shard's
 * poller answers them when their time comes.
 *
 * Nothing here waits for room: pc_reply() and pc_worker_post() take every
 * message and every piece of work (their submission queues are the
 * messages' own), so the server is its key-value logic and nothing else.
 */
#include "../cli.h"
#include "kv.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <pollcore/engine.h>
#include <pollcore/poller.h>

#define STALL_MS     500u /* a stalled GET is answered after this long */
#define SHARD_SLOTS0 4096u

struct entry {
	uint64_t key;
	uint32_t ver;
	uint8_t used;	 /* the slot holds @key (a deleted key keeps its slot: a tombstone) */
	uint8_t present; /* and a value */
	uint8_t len;
	uint8_t val[KV_VALUE_MAX];
};

/* What the server keeps with a request it holds: in the request's buffer, past any request. */
struct ctx {
	struct pc_work work; /* the handoff to the owning worker */
	struct pc_msg *m;
	struct shard *to; /* the shard that owns the key */
	struct ctx *next; /* on a shard's held list */
	uint64_t t;	  /* stalled since (ms) */
};

#define CTX_OFF	 ((KV_MSG_MAX + 15) & ~15u)
#define MSG_SIZE (CTX_OFF + 16 + (uint32_t)sizeof(struct ctx))

/* One worker's shard; only that worker touches it (read by main after the engine is gone). */
struct shard {
	struct pc_worker *w;
	struct entry *tab;
	uint32_t cap;	  /* power of two */
	uint32_t used;	  /* slots used, tombstones included */
	uint32_t present; /* keys with a value */
	uint32_t stall_n; /* GETs since the last stall */
	uint32_t stall_every;
	uint64_t gets, puts, dels, bad, full, stalled, conns, handed;
	struct ctx *held, **held_tail; /* stalled GETs, oldest first */
} __attribute__((aligned(64)));

struct server {
	struct shard *shards;
	unsigned int nshards;
	uint32_t stall_every;
};

static struct ctx *ctx_of(struct pc_msg *m)
{
	return (struct ctx *)(((uintptr_t)m->data + CTX_OFF + 15) & ~(uintptr_t)15);
}

static uint64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct entry *shard_find(struct shard *s, uint64_t key, bool add)
{
	uint32_t mask = s->cap - 1, i = (uint32_t)kv_mix(key) & mask, n;

	if (!s->tab)
		return NULL; /* no PUT yet */
	for (n = 0; n <= mask; n++, i = (i + 1) & mask) {
		struct entry *e = &s->tab[i];

		if (e->used && e->key == key)
			return e;
		if (!e->used) {
			if (!add)
				return NULL;
			e->used = 1;
			e->key = key;
			e->present = 0;
			s->used++;
			return e;
		}
	}
	return NULL;
}

/*
 * Keeps the table at most half full of used slots: rehashes the present
 * keys (tombstones go) into a table where they fill at most a quarter.
 * Returns false when there is no memory for it.
 */
static bool shard_room(struct shard *s)
{
	struct entry *old = s->tab;
	uint32_t cap = s->cap ? s->cap : SHARD_SLOTS0, i, ocap = s->cap;

	if (old && 2 * (s->used + 1) <= s->cap)
		return true;
	while (4 * (s->present + 1) > cap)
		cap *= 2;
	s->tab = calloc(cap, sizeof(*s->tab));
	if (!s->tab) {
		s->tab = old;
		return old && s->used < s->cap;
	}
	s->cap = cap;
	s->used = 0;
	for (i = 0; old && i < ocap; i++)
		if (old[i].present)
			*shard_find(s, old[i].key, true) = old[i];
	free(old);
	return true;
}

/* Gives @m back to its worker, with the answer in place. */
static void reply(struct pc_msg *m)
{
	int ret = pc_reply(m);

	/* -ENOTCONN: the connection is closing and pollcore took the buffer back */
	if (ret && ret != -ENOTCONN)
		pc_msg_release(m);
}

/* Runs the (well-formed) request @m on the shard that owns its key, and answers it. */
static void serve(struct shard *s, struct pc_msg *m)
{
	struct kv_hdr h;
	struct entry *e;
	uint32_t rlen = sizeof(h);

	memcpy(&h, m->data, sizeof(h));
	switch (h.code) {
	case KV_GET:
		s->gets++;
		e = shard_find(s, h.key, false);
		if (e && e->present) {
			h.code = KV_OK;
			h.ver = e->ver;
			h.vlen = e->len;
			memcpy((uint8_t *)m->data + sizeof(h), e->val, e->len);
			rlen += e->len;
		} else {
			h.code = KV_NOTFOUND;
			h.vlen = 0;
		}
		break;
	case KV_PUT:
		s->puts++;
		e = shard_room(s) ? shard_find(s, h.key, true) : NULL;
		if (!e) {
			s->full++;
			h.code = KV_FULL;
		} else {
			s->present += !e->present;
			e->present = 1;
			e->ver = h.ver;
			e->len = (uint8_t)h.vlen;
			memcpy(e->val, (uint8_t *)m->data + sizeof(h), h.vlen);
			h.code = KV_OK;
		}
		h.vlen = 0;
		break;
	default: /* KV_DEL */
		s->dels++;
		e = shard_find(s, h.key, false);
		h.code = e && e->present ? KV_OK : KV_NOTFOUND;
		if (e && e->present) {
			e->present = 0;
			s->present--;
		}
		h.vlen = 0;
		break;
	}
	memcpy(m->data, &h, sizeof(h));
	m->len = rlen;
	reply(m);
}

/* On the owner's worker: serve @m now, or stall it (a GET, --stall-every). */
static void arrive(struct shard *s, struct pc_msg *m)
{
	struct ctx *x;

	if (pc_unlikely(s->stall_every) && ((const struct kv_hdr *)m->data)->code == KV_GET &&
	    ++s->stall_n >= s->stall_every) {
		s->stall_n = 0;
		s->stalled++;
		x = ctx_of(m);
		x->m = m;
		x->t = coarse_ms();
		x->next = NULL;
		*s->held_tail = x;
		s->held_tail = &x->next;
		return;
	}
	serve(s, m);
}

/* pc_worker_post()'s function: on the worker that owns the key. */
static void handed_over(struct pc_work *work)
{
	struct ctx *x = pc_container_of(work, struct ctx, work);

	arrive(x->to, x->m);
}

/* Each shard's poller: the stalled GETs whose time came. */
static int shard_poll(void *arg)
{
	struct shard *s = arg;
	struct ctx *x;
	uint64_t now;
	int done = 0;

	if (!s->held)
		return 0;
	now = coarse_ms();
	while ((x = s->held) && now - x->t >= STALL_MS) {
		s->held = x->next;
		if (!s->held)
			s->held_tail = &s->held;
		serve(s, x->m);
		done++;
	}
	return done;
}

static void srv_on_msg(struct pc_msg *m, void *arg)
{
	struct server *srv = arg;
	struct shard *s = pc_conn_user(m->conn), *to;
	struct kv_hdr h;
	struct ctx *x;

	if (pc_unlikely(m->type != PC_MSG_REQUEST)) {
		s->bad++;
		pc_msg_release(m);
		return;
	}
	if (m->len >= sizeof(h))
		memcpy(&h, m->data, sizeof(h));
	if (pc_unlikely(m->len < sizeof(h) || h.vlen > KV_VALUE_MAX || h.code < KV_GET ||
			h.code > KV_DEL || m->len != sizeof(h) + (h.code == KV_PUT ? h.vlen : 0))) {
		s->bad++;
		memset(&h, 0, sizeof(h));
		h.code = KV_BAD;
		memcpy(m->data, &h, sizeof(h));
		m->len = sizeof(h);
		reply(m);
		return;
	}
	to = &srv->shards[kv_mix(h.key ^ 0x5bd1e995u) % srv->nshards];
	if (to == s) {
		arrive(s, m);
		return;
	}
	/* another worker's key: hand it over (posts from one thread run in order) */
	s->handed++;
	x = ctx_of(m);
	x->work.fn = handed_over;
	x->m = m;
	x->to = to;
	pc_worker_post(to->w, &x->work);
}

static void srv_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct server *srv = arg;
	struct shard *s;

	if (ev != PC_CONN_UP)
		return;
	/* the receiving worker's shard: requests for its keys run at once */
	s = &srv->shards[pc_worker_index(pc_conn_worker(conn))];
	s->conns++;
	pc_conn_set_user(conn, s);
}

int kv_server(int argc, char **argv)
{
	static const struct option opts[] = {
	    CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_NONUMA,
	    CLI_OPT_IDLE, CLI_OPT_JSON, CLI_OPT_HELP,
	    {"stall-every", required_argument, NULL, CLI_TOOL_FIRST},
	    {0},
	};
	struct cli_common o = { .port = KV_DEFAULT_PORT, .workers = 1 };
	struct pc_engine_params p = { .size = sizeof(p) };
	struct server srv = {0};
	struct cli_json j;
	FILE *log;
	uint32_t workers;
	uint64_t keys = 0, gets = 0, puts = 0, dels = 0, bad = 0, full = 0, stalled = 0;
	struct pc_engine *e;
	sigset_t sigs;
	unsigned int i;
	int c, sig;

	while ((c = getopt_long(argc, argv, ":a:p:d:w:Njh", opts, NULL)) != -1) {
		switch (c) {
		case CLI_TOOL_FIRST:
			if (cli_u32("--stall-every", optarg, 0, UINT32_MAX, &srv.stall_every))
				return 2;
			break;
		default:
			if (cli_other_opt(&o, c, "server", argv))
				return 2;
		}
	}
	if (optind != argc)
		return cli_usage_error("server: unexpected argument '%s'", argv[optind]);
	workers = o.workers;
	log = o.json ? stderr : stdout;

	/* the workers and the control thread inherit this: signals come to sigwait() */
	cli_block_stop_signals(&sigs);

	srv.nshards = workers;
	srv.shards = calloc(workers, sizeof(*srv.shards));
	if (!srv.shards) {
		fprintf(stderr, KV_PROG " server: out of memory\n");
		return 1;
	}
	cli_engine_params(&o, &p);
	p.msg_size = MSG_SIZE; /* a request, and room for its struct ctx */
	p.tx_bufs = 64;	       /* answers travel in the requests' buffers */
	p.on_conn = srv_on_conn;
	p.on_msg = srv_on_msg;
	p.arg = &srv;
	e = cli_engine_start("server", &p);
	if (!e) {
		free(srv.shards);
		return 1;
	}
	for (i = 0; i < workers; i++) {
		struct shard *s = &srv.shards[i];

		s->w = pc_engine_worker(e, i);
		s->stall_every = srv.stall_every;
		s->held_tail = &s->held;
		/* before any connection: the poller only ever runs on the shard's worker */
		if (!s->w || !pc_worker_add_poller(s->w, shard_poll, s)) {
			fprintf(stderr, KV_PROG " server: worker %u: %s\n", i, pc_last_error());
			pc_engine_destroy(e);
			free(srv.shards);
			return 1;
		}
	}
	if (cli_listen(e, "server", &o)) {
		pc_engine_destroy(e);
		free(srv.shards);
		return 1;
	}
	fprintf(log, KV_PROG " server: listening on %s port %u (%u worker%s, a shard each)\n",
		o.addr ? o.addr : "any address", pc_listen_port(e), workers, workers > 1 ? "s" : "");
	fflush(log);

	sig = cli_wait_stop(&sigs, NULL, 0, NULL);
	if (o.json) {
		cli_json_begin(&j);
		cli_json_string(&j, "signal", strsignal(sig));
		cli_json_workers(&j, e);
		cli_json_array(&j, "shards");
	} else {
		pc_engine_print_stats(e, stdout);
	}
	pc_engine_destroy(e); /* the workers are gone: the shards are ours to read */
	for (i = 0; i < srv.nshards; i++) {
		struct shard *s = &srv.shards[i];

		if (o.json) {
			cli_json_object(&j, NULL);
			cli_json_u64(&j, "keys", s->present);
			cli_json_u64(&j, "connections", s->conns);
			cli_json_u64(&j, "get", s->gets);
			cli_json_u64(&j, "put", s->puts);
			cli_json_u64(&j, "del", s->dels);
			cli_json_u64(&j, "stalled", s->stalled);
			cli_json_u64(&j, "handed", s->handed);
			cli_json_close(&j, '}');
		} else {
			printf(KV_PROG " server: shard %u: %u keys, %" PRIu64 " connections; %" PRIu64
				       " GET, %" PRIu64 " PUT, %" PRIu64 " DEL, %" PRIu64
				       " stalled; %" PRIu64 " handed to another shard\n",
			       i, s->present, s->conns, s->gets, s->puts, s->dels, s->stalled,
			       s->handed);
		}
		keys += s->present;
		gets += s->gets;
		puts += s->puts;
		dels += s->dels;
		bad += s->bad;
		full += s->full;
		stalled += s->stalled;
		free(s->tab);
	}
	if (o.json) {
		cli_json_close(&j, ']');
		cli_json_u64(&j, "keys", keys);
		cli_json_u64(&j, "get", gets);
		cli_json_u64(&j, "put", puts);
		cli_json_u64(&j, "del", dels);
		cli_json_u64(&j, "stalled", stalled);
		cli_json_u64(&j, "malformed", bad);
		cli_json_u64(&j, "refused", full);
		cli_json_end(&j);
	} else {
		printf(KV_PROG " server: %s: %" PRIu64 " keys; %" PRIu64 " GET, %" PRIu64
			       " PUT, %" PRIu64 " DEL, %" PRIu64 " stalled; %" PRIu64
			       " malformed, %" PRIu64 " refused (full)\n",
		       strsignal(sig), keys, gets, puts, dels, stalled, bad, full);
	}
	fflush(stdout);
	free(srv.shards);
	return 0;
}
