// SPDX-License-Identifier: MIT
/*
 * pollcore-echo - an echo RPC server and a checking, measuring client.
 *
 *   pollcore-echo server [--addr ADDR] [--port P] [--device NAME] [--workers N]
 *                        [--max-size S] [--no-numa] [--idle busy|hybrid|auto]
 *                        [--corrupt-every K] [--raw-depth D] [--json]
 *   pollcore-echo client ADDR [--port P] [--device NAME] [--count N] [--size S]
 *                             [--connections C] [--window W] [--workers N] [--no-numa]
 *                             [--idle busy|hybrid|auto] [--json]
 *
 * The options follow docs/tools.md (tools/cli.h). --no-numa leaves the
 * workers unpinned (client and server on one machine); with --idle auto
 * (the default) idle workers then sleep on completion events, and
 * busy-poll when pinned; --idle busy and hybrid force one or the other.
 *
 * The server runs in handler mode and echoes every message verbatim on the
 * worker that received it: a request with pc_reply(), anything else with
 * pc_send() of the same buffer. Raw peers (rdmacm-utils' rdma_client, or any
 * verbs client that sends no pollcore private data) get their bytes back
 * too, copied into a send buffer: each has a receive queue of D buffers
 * (--raw-depth, default 128; 0 refuses raw peers), 4 such peers per worker,
 * and a receive is posted again before its echo leaves, so a raw client
 * with up to D messages in flight never meets RNR.
 * SIGINT or SIGTERM stops it, prints the workers' counters and exits 0.
 * --corrupt-every K (for testing clients) flips the last byte of every Kth echo.
 *
 * The client is a closed loop on its workers: the main thread sends the
 * first request of each connection, then every response, checked byte for
 * byte, carries the next request in its own buffer, and the worker tops the
 * connection up to W requests in flight. Responses on a connection come back
 * in order (one RC QP, served by one worker), which is checked too.
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"

#define PROG	     "pollcore-echo"
#define DEFAULT_RAW_DEPTH 128u
#define DEFAULT_PORT 7471
#define MAX_MSG	     (1u << 20)
/*
 * Requests in flight per connection: at most the engine's request window
 * (pc_engine_params.window, default 64); pc_call() refuses more with -EAGAIN.
 * The server's credits bound what is on the wire either way.
 */
#define MAX_WINDOW 64u
#define STALL_S	   30 /* the client gives up after this long without a response */

enum { O_MAXSIZE = CLI_TOOL_FIRST, O_CORRUPT, O_RAWDEPTH };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " server [-a|--addr ADDR] [-p|--port P] [-d|--device NAME] [-w|--workers N]\n"
		"                            [--max-size S] [-N|--no-numa] [--idle busy|hybrid|auto]\n"
		"                            [--corrupt-every K] [--raw-depth D] [-j|--json]\n"
		"       " PROG " client ADDR [-p|--port P] [-d|--device NAME] [-n|--count N] [-s|--size S]\n"
		"                            [-q|--connections C] [-W|--window W] [-w|--workers N]\n"
		"                            [-N|--no-numa] [--idle busy|hybrid|auto] [-j|--json]\n"
		"defaults: port %d, workers 1, idle auto, max-size 4096, raw-depth %u; client: count\n"
		"10000 per connection, size 64, connections 1, window 16 (at most 64). Sizes take\n"
		"k and m suffixes. Exit: 0 done, 1 failed, 2 bad usage.\n",
		DEFAULT_PORT, DEFAULT_RAW_DEPTH);
}

#define bad_usage(...) cli_usage_error(__VA_ARGS__)
#define parse_u32 cli_u32

static const struct cli_alias aliases[] = {
	{ "--bind", "--addr" },
	{ "--busy", "--idle=busy" },
	{ "--hybrid", "--idle=hybrid" },
	{ NULL },
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Buffer counts that keep each pool near 64 MiB for large messages. */
static uint32_t bufs_for(uint32_t size, uint32_t floor)
{
	uint32_t n = (64u << 20) / size;

	n = n > 1024 ? 1024 : n;
	return n < floor ? floor : n;
}

/* --- the server ----------------------------------------------------------------------------- */

struct server {
	FILE *log;		/* stdout; stderr with --json */
	uint32_t corrupt_every;
	uint32_t raw_depth;
	char raw_tag;		/* pc_conn_user() of a raw peer's connection */
	atomic_ulong msgs;
	atomic_ulong bytes;
	atomic_ulong errors;
	atomic_uint up;
	atomic_uint down;
};

static void srv_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct server *s = arg;
	struct pc_conn_info ci;

	pc_conn_info(conn, &ci);
	if (ev == PC_CONN_UP) {
		atomic_fetch_add_explicit(&s->up, 1, memory_order_relaxed);
		fprintf(s->log, PROG " server: %s qp 0x%x: connected (%s peer) on worker %d\n", ci.device,
		       ci.qp_num, ci.raw ? "raw" : "pollcore", ci.worker);
	} else {
		atomic_fetch_add_explicit(&s->down, 1, memory_order_relaxed);
		fprintf(s->log, PROG " server: %s qp 0x%x: closed after %" PRIu64 " messages in, %" PRIu64
			    " out\n",
		       ci.device, ci.qp_num, ci.msgs_recv, ci.msgs_sent);
	}
	fflush(s->log);
}

/* Control thread: a raw peer gets its own receive queue of raw_depth buffers. */
static int srv_on_request(struct pc_conn_request *req, void *arg)
{
	struct server *s = arg;

	if (req->max_recv_depth < s->raw_depth)
		return -EBUSY;
	req->recv_depth = s->raw_depth;
	req->user = &s->raw_tag;
	return 0;
}

/*
 * A raw peer's echo leaves in a send buffer, the received one given back
 * first: its receive is posted again before the echo goes.
 */
static void srv_echo_raw(struct server *s, struct pc_msg *m)
{
	struct pc_msg *a = pc_msg_alloc(m->conn);
	int ret;

	if (pc_unlikely(!a)) {
		if (atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed) < 10)
			fprintf(stderr, PROG " server: no send buffer for a raw echo: %s\n",
				pc_last_error());
		pc_msg_release(m);
		return;
	}
	memcpy(a->data, m->data, m->len);
	a->len = m->len;
	pc_msg_release(m);
	ret = pc_send(a);
	if (pc_likely(!ret)) {
		atomic_fetch_add_explicit(&s->msgs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->bytes, a->len, memory_order_relaxed);
	} else if (atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed) < 10 &&
		   ret != -ENOTCONN) {
		fprintf(stderr, PROG " server: raw echo failed: %s\n", pc_last_error());
	}
	if (ret && ret != -ENOTCONN)
		pc_msg_release(a);
}

/* On the worker: the received buffer goes straight back, unchanged. */
static void srv_on_msg(struct pc_msg *m, void *arg)
{
	struct server *s = arg;
	uint32_t len = m->len;
	int ret;

	if (pc_unlikely(pc_conn_user(m->conn) == &s->raw_tag)) {
		srv_echo_raw(s, m);
		return;
	}
	if (pc_unlikely(s->corrupt_every) && len &&
	    atomic_load_explicit(&s->msgs, memory_order_relaxed) % s->corrupt_every ==
		s->corrupt_every - 1)
		((uint8_t *)m->data)[len - 1] ^= 0x5a;
	ret = m->type == PC_MSG_REQUEST ? pc_reply(m) : pc_send(m);
	if (pc_likely(!ret)) {
		atomic_fetch_add_explicit(&s->msgs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->bytes, len, memory_order_relaxed);
		return;
	}
	/* -ENOTCONN: the connection is closing and pollcore took the buffer back */
	if (atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed) < 10 && ret != -ENOTCONN)
		fprintf(stderr, PROG " server: echo failed: %s\n", pc_last_error());
	if (ret != -ENOTCONN)
		pc_msg_release(m);
}

static int run_server(int argc, char **argv)
{
	static const struct option opts[] = {
	    CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_NONUMA,
	    CLI_OPT_IDLE, CLI_OPT_JSON, CLI_OPT_HELP,
	    {"max-size", required_argument, NULL, O_MAXSIZE},
	    {"corrupt-every", required_argument, NULL, O_CORRUPT},
	    {"raw-depth", required_argument, NULL, O_RAWDEPTH},
	    {0},
	};
	struct cli_common o = { .port = DEFAULT_PORT, .workers = 1 };
	struct pc_engine_params p = { .size = sizeof(p) };
	uint32_t max_size = 4096, workers;
	struct server s = { .raw_depth = DEFAULT_RAW_DEPTH };
	struct pc_engine *e;
	struct cli_json j;
	sigset_t sigs;
	int c, sig;

	while ((c = getopt_long(argc, argv, ":a:p:d:w:Njh", opts, NULL)) != -1) {
		switch (c) {
		case O_MAXSIZE:
			if (cli_size32("--max-size", optarg, 1, MAX_MSG, &max_size))
				return 2;
			break;
		case O_CORRUPT:
			if (parse_u32("--corrupt-every", optarg, 1, UINT32_MAX, &s.corrupt_every))
				return 2;
			break;
		case O_RAWDEPTH:
			if (parse_u32("--raw-depth", optarg, 0, 1024, &s.raw_depth))
				return 2;
			break;
		default:
			if (cli_other_opt(&o, c, "server", argv))
				return 2;
		}
	}
	if (optind != argc)
		return bad_usage("server: unexpected argument '%s'", argv[optind]);
	workers = o.workers;
	s.log = o.json ? stderr : stdout;

	/* the workers and the control thread inherit this: signals come to sigwait() */
	cli_block_stop_signals(&sigs);

	cli_engine_params(&o, &p);
	p.msg_size = max_size;
	p.rx_bufs = bufs_for(max_size, 256);
	/* echoes travel in the received buffers; raw peers' in send buffers */
	p.tx_bufs = 64 + 4 * s.raw_depth;
	/* raw peers welcome: 4 at a time per worker, on their own queues */
	p.raw_bufs = 4 * s.raw_depth;
	p.rx_bufs += p.raw_bufs;
	p.on_request = s.raw_depth ? srv_on_request : NULL;
	p.on_conn = srv_on_conn;
	p.on_msg = srv_on_msg;
	p.arg = &s;
	e = cli_engine_start("server", &p);
	if (!e)
		return 1;
	if (cli_listen(e, "server", &o)) {
		pc_engine_destroy(e);
		return 1;
	}
	/* with --json the figures at the end are stdout's only line */
	fprintf(o.json ? stderr : stdout,
		PROG " server: listening on %s port %u (%u worker%s, messages up to %u bytes)\n",
		o.addr ? o.addr : "any address", pc_listen_port(e), workers, workers > 1 ? "s" : "",
		max_size);
	fflush(o.json ? stderr : stdout);

	sig = cli_wait_stop(&sigs, NULL, 0, NULL);
	if (o.json) {
		cli_json_begin(&j);
		cli_json_string(&j, "signal", strsignal(sig));
		cli_json_u64(&j, "messages", atomic_load(&s.msgs));
		cli_json_u64(&j, "bytes", atomic_load(&s.bytes));
		cli_json_u64(&j, "connections", atomic_load(&s.up));
		cli_json_u64(&j, "errors", atomic_load(&s.errors));
		cli_json_workers(&j, e);
		cli_json_end(&j);
	} else {
		printf(PROG " server: %s: %lu messages (%lu bytes) echoed on %u connections, "
			    "%lu errors\n",
		       strsignal(sig), atomic_load(&s.msgs), atomic_load(&s.bytes),
		       atomic_load(&s.up), atomic_load(&s.errors));
		pc_engine_print_stats(e, stdout);
	}
	fflush(stdout);
	pc_engine_destroy(e);
	return 0;
}

/* --- the client ----------------------------------------------------------------------------- */

/*
 * The payload of (connection, sequence number): 32-bit words from a mixed
 * seed, so that every byte depends on the connection, the request and the
 * offset, and a 1-byte message still tells requests apart.
 */
static inline uint32_t pat_seed(uint32_t conn, uint32_t seq)
{
	uint32_t x = conn * 0x9e3779b1u ^ (seq + 1) * 0x85ebca77u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return x;
}

static inline uint32_t pat_word(uint32_t seed, uint32_t k)
{
	uint32_t x = seed + k * 0x9e3779b9u;

	return x ^ (x >> 13);
}

static void pat_fill(uint8_t *b, uint32_t len, uint32_t conn, uint32_t seq)
{
	uint32_t seed = pat_seed(conn, seq), k, w;

	for (k = 0; k < len / 4; k++) {
		w = pat_word(seed, k);
		memcpy(b + 4 * k, &w, 4);
	}
	w = pat_word(seed, k);
	memcpy(b + 4 * k, &w, len % 4);
}

/* Returns the offset of the first wrong byte, or @len when all are right. */
static uint32_t pat_check(const uint8_t *b, uint32_t len, uint32_t conn, uint32_t seq)
{
	uint32_t seed = pat_seed(conn, seq), k, w, i;
	uint8_t want[4];

	for (k = 0; k < len / 4; k++) {
		w = pat_word(seed, k);
		if (pc_unlikely(memcmp(b + 4 * k, &w, 4)))
			break;
	}
	w = pat_word(seed, k);
	memcpy(want, &w, 4);
	for (i = 0; 4 * k + i < len && i < 4; i++)
		if (b[4 * k + i] != want[i])
			return 4 * k + i;
	return 4 * k + i < len ? 4 * k + i : len;
}

static inline uint8_t pat_byte(uint32_t conn, uint32_t seq, uint32_t off)
{
	uint32_t w = pat_word(pat_seed(conn, seq), off / 4);
	uint8_t b[4];

	memcpy(b, &w, 4);
	return b[off % 4];
}

#define ANY_REQ_ID UINT64_MAX /* the first request's id is assigned on another thread */

struct flight {
	uint64_t req_id;
	uint64_t t0;
	uint32_t seq;
};

/* One connection. Owned by its worker once the main thread has sent the first request. */
struct cconn {
	struct client *cl;
	struct pc_conn *conn;
	uint32_t id;
	uint32_t sent;
	uint32_t done;	     /* responses checked (sampled by the main thread) */
	uint32_t head, tail; /* flights in [head, tail), masked */
	uint32_t mask;
	struct flight *fl;
	uint32_t *lat_ns;
	uint64_t t_end;	      /* when the last response arrived (sampled) */
	uint64_t alloc_short; /* window top-ups refused by pc_msg_alloc (ENOBUFS) */
	bool stopped;
	char err[512];
};

struct client {
	uint32_t count, size, window, nconns;
	struct cconn *cc;
	atomic_int failed; /* set (release) after a cconn's err is written */
	atomic_uint finished;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static void cli_fail(struct cconn *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cli_fail(struct cconn *x, const char *fmt, ...)
{
	va_list ap;

	if (x->stopped)
		return;
	x->stopped = true;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	/* release: the message above is complete before the main thread looks */
	atomic_store_explicit(&x->cl->failed, 1, memory_order_release);
}

/* Sends the next request of @x in @m (fresh or a response being reused). Worker thread. */
static int cli_send_next(struct cconn *x, struct pc_msg *m)
{
	struct flight *f = &x->fl[x->tail & x->mask];
	uint64_t req_id;
	int ret;

	m->len = x->cl->size;
	pat_fill(m->data, m->len, x->id, x->sent);
	f->seq = x->sent;
	f->t0 = now_ns();
	ret = pc_call(m, NULL, NULL, 0, &req_id);
	if (pc_unlikely(ret)) {
		cli_fail(x, "connection %u: pc_call of request %u failed: %s", x->id, x->sent,
			 ret == -EAGAIN ? "request window full" : pc_last_error());
		if (ret != -ENOTCONN)
			pc_msg_release(m);
		return ret;
	}
	f->req_id = req_id;
	x->tail++;
	x->sent++;
	return 0;
}

static void cli_on_conn(struct pc_conn *conn, enum pc_conn_event ev, void *arg)
{
	struct cconn *x = pc_conn_user(conn);

	(void)arg;
	if (ev == PC_CONN_DOWN && x && __atomic_load_n(&x->done, __ATOMIC_RELAXED) < x->cl->count)
		cli_fail(x,
			 "connection %u closed after %u of %u responses (peer gone, or a "
			 "message larger than the server's --max-size?)",
			 x->id, x->done, x->cl->count);
}

/* Checks a response, records its latency and keeps the connection's window full. Worker. */
static void cli_on_msg(struct pc_msg *m, void *arg)
{
	struct cconn *x = pc_conn_user(m->conn);
	struct client *cl = arg;
	struct flight *f;
	uint64_t t = now_ns();
	uint32_t bad;

	if (pc_unlikely(x->stopped))
		goto release;
	if (pc_unlikely(m->type != PC_MSG_RESPONSE || x->head == x->tail)) {
		cli_fail(x,
			 "connection %u: unexpected %s message (%u bytes, req_id %" PRIu64
			 ") with %u requests in flight",
			 x->id, m->type == PC_MSG_RESPONSE ? "response" : "non-response", m->len,
			 m->req_id, x->tail - x->head);
		goto release;
	}
	f = &x->fl[x->head & x->mask];
	if (pc_unlikely(f->req_id != ANY_REQ_ID && m->req_id != f->req_id)) {
		cli_fail(x,
			 "connection %u: response to req_id %" PRIu64 " arrived while waiting "
			 "for req_id %" PRIu64 " (request %u): out of order",
			 x->id, m->req_id, f->req_id, f->seq);
		goto release;
	}
	if (pc_unlikely(m->len != cl->size)) {
		cli_fail(x, "connection %u request %u: response has %u bytes, sent %u", x->id,
			 f->seq, m->len, cl->size);
		goto release;
	}
	bad = pat_check(m->data, m->len, x->id, f->seq);
	if (pc_unlikely(bad != m->len)) {
		cli_fail(x, "connection %u request %u: byte %u of %u is 0x%02x, expected 0x%02x",
			 x->id, f->seq, bad, m->len, ((uint8_t *)m->data)[bad],
			 pat_byte(x->id, f->seq, bad));
		goto release;
	}
	x->lat_ns[f->seq] = t - f->t0 > UINT32_MAX ? UINT32_MAX : (uint32_t)(t - f->t0);
	x->head++;
	__atomic_store_n(&x->done, x->done + 1, __ATOMIC_RELAXED);
	if (x->done == cl->count) {
		__atomic_store_n(&x->t_end, t, __ATOMIC_RELAXED);
		atomic_fetch_add_explicit(&cl->finished, 1, memory_order_release);
	}
	if (x->sent == cl->count)
		goto release;
	/* the response's buffer carries the next request */
	if (cli_send_next(x, m))
		return;
	while (x->sent < cl->count && x->tail - x->head < cl->window) {
		struct pc_msg *n = pc_msg_alloc(m->conn);

		if (!n) {
			x->alloc_short++;
			break;
		}
		if (cli_send_next(x, n))
			return;
	}
	return;
release:
	pc_msg_release(m);
}

struct client_opts {
	struct cli_common c;
	uint32_t count, size, nconns, window;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double pct_us(const uint32_t *sorted, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n);

	if (i >= n)
		i = n - 1;
	return (double)sorted[i] / 1e3;
}

static void print_json(struct client *cl, double secs, const uint32_t *sorted, size_t n,
		       uint64_t shorts)
{
	struct cli_json j;

	cli_json_begin(&j);
	cli_json_u64(&j, "requests", n);
	cli_json_u64(&j, "connections", cl->nconns);
	cli_json_u64(&j, "size", cl->size);
	cli_json_u64(&j, "window", cl->window);
	cli_json_num(&j, "seconds", secs);
	cli_json_num(&j, "rate", secs > 0 ? (double)n / secs : 0.0);
	cli_json_num(&j, "mb_s", secs > 0 ? (double)n * cl->size / secs / 1e6 : 0.0);
	if (sorted) {
		cli_json_object(&j, "lat_us");
		cli_json_num(&j, "p50", pct_us(sorted, n, 0.5));
		cli_json_num(&j, "p99", pct_us(sorted, n, 0.99));
		cli_json_num(&j, "p999", pct_us(sorted, n, 0.999));
		cli_json_num(&j, "min", (double)sorted[0] / 1e3);
		cli_json_num(&j, "max", (double)sorted[n - 1] / 1e3);
		cli_json_close(&j, '}');
	}
	cli_json_u64(&j, "send_buffer_short", shorts);
	cli_json_string(&j, "check", "ok");
	cli_json_end(&j);
}

static void print_results(struct client *cl, uint64_t t0, bool json)
{
	size_t n = (size_t)cl->count * cl->nconns, k = 0;
	uint64_t t_end = t0;
	uint32_t *all = malloc(n * sizeof(*all));
	uint64_t shorts = 0;
	double secs;
	unsigned int i;

	for (i = 0; i < cl->nconns; i++) {
		uint64_t t = __atomic_load_n(&cl->cc[i].t_end, __ATOMIC_RELAXED);

		t_end = t > t_end ? t : t_end;
		shorts += cl->cc[i].alloc_short;
	}
	secs = (double)(t_end - t0) / 1e9;
	if (json) {
		if (all) {
			for (i = 0; i < cl->nconns; i++) {
				memcpy(all + k, cl->cc[i].lat_ns, cl->count * sizeof(*all));
				k += cl->count;
			}
			qsort(all, n, sizeof(*all), cmp_u32);
		}
		print_json(cl, secs, all, n, shorts);
		free(all);
		return;
	}
	printf("requests     %zu (%u connection%s x %u, %u bytes, window %u), every byte checked\n",
	       n, cl->nconns, cl->nconns > 1 ? "s" : "", cl->count, cl->size, cl->window);
	printf("elapsed      %.3f s\n", secs);
	printf("rate         %.0f msg/s\n", secs > 0 ? (double)n / secs : 0.0);
	printf("throughput   %.3f MB/s (payload, each way)\n",
	       secs > 0 ? (double)n * cl->size / secs / 1e6 : 0.0);
	if (all) {
		for (i = 0; i < cl->nconns; i++) {
			memcpy(all + k, cl->cc[i].lat_ns, cl->count * sizeof(*all));
			k += cl->count;
		}
		qsort(all, n, sizeof(*all), cmp_u32);
		printf(
		    "latency      p50 %.1f us  p99 %.1f us  p999 %.1f us  (min %.1f, max %.1f)\n",
		    pct_us(all, n, 0.5), pct_us(all, n, 0.99), pct_us(all, n, 0.999),
		    (double)all[0] / 1e3, (double)all[n - 1] / 1e3);
		free(all);
	} else {
		printf("latency      (no memory to sort %zu samples)\n", n);
	}
	if (shorts)
		printf("note         the window was short of send buffers %" PRIu64 " times "
		       "(pc_msg_alloc: ENOBUFS on the worker)\n",
		       shorts);
}

/* Sends the first request of every connection from this (attached) thread. */
static int kick(struct client *cl)
{
	unsigned int i;

	for (i = 0; i < cl->nconns; i++) {
		struct cconn *x = &cl->cc[i];
		struct pc_msg *m;
		int ret, tries = 0;

		while (!(m = pc_msg_alloc(x->conn))) {
			if (errno != ENOBUFS || ++tries > 10000) {
				fprintf(stderr, PROG " client: connection %u: no send buffer: %s\n",
					i, strerror(errno));
				return -1;
			}
			usleep(100);
		}
		/* the worker owns the flights once the request is submitted */
		x->fl[0].req_id = ANY_REQ_ID;
		x->fl[0].seq = 0;
		x->tail = 1;
		x->sent = 1;
		m->len = cl->size;
		pat_fill(m->data, m->len, x->id, 0);
		x->fl[0].t0 = now_ns();
		while ((ret = pc_call(m, NULL, NULL, 0, NULL)) == -ENOBUFS)
			usleep(100);
		if (ret) {
			fprintf(stderr, PROG " client: connection %u: first request failed: %s\n",
				i, pc_last_error());
			return -1;
		}
	}
	return 0;
}

static int wait_done(struct client *cl)
{
	uint64_t last_progress = now_ns(), total = 0, prev = UINT64_MAX;
	unsigned int i;

	for (;;) {
		if (atomic_load_explicit(&cl->failed, memory_order_acquire))
			break;
		if (atomic_load_explicit(&cl->finished, memory_order_acquire) == cl->nconns)
			return 0;
		if (interrupted)
			break;
		for (total = 0, i = 0; i < cl->nconns; i++)
			total += __atomic_load_n(&cl->cc[i].done, __ATOMIC_RELAXED);
		if (total != prev) {
			prev = total;
			last_progress = now_ns();
		} else if (now_ns() - last_progress > STALL_S * 1000000000ull) {
			fprintf(stderr,
				PROG " client: no response for %d s (%" PRIu64 " of %" PRIu64
				     " received); giving up\n",
				STALL_S, total, (uint64_t)cl->count * cl->nconns);
			return -1;
		}
		usleep(2000);
	}
	if (interrupted) {
		for (total = 0, i = 0; i < cl->nconns; i++)
			total += __atomic_load_n(&cl->cc[i].done, __ATOMIC_RELAXED);
		fprintf(stderr,
			PROG " client: interrupted (%s) after %" PRIu64 " of %" PRIu64
			     " responses\n",
			strsignal(interrupted), total, (uint64_t)cl->count * cl->nconns);
		return -1;
	}
	for (i = 0; i < cl->nconns; i++)
		if (cl->cc[i].err[0])
			fprintf(stderr, PROG " client: FAILED: %s\n", cl->cc[i].err);
	return -1;
}

static int client_alloc(struct client *cl)
{
	uint32_t slots = 1;
	unsigned int i;

	while (slots < cl->window)
		slots <<= 1;
	cl->cc = calloc(cl->nconns, sizeof(*cl->cc));
	if (!cl->cc)
		return -1;
	for (i = 0; i < cl->nconns; i++) {
		cl->cc[i].cl = cl;
		cl->cc[i].id = i;
		cl->cc[i].mask = slots - 1;
		cl->cc[i].fl = calloc(slots, sizeof(struct flight));
		cl->cc[i].lat_ns = calloc(cl->count, sizeof(uint32_t));
		if (!cl->cc[i].fl || !cl->cc[i].lat_ns)
			return -1;
	}
	return 0;
}

static void client_free(struct client *cl)
{
	unsigned int i;

	for (i = 0; cl->cc && i < cl->nconns; i++) {
		/* the handle pc_connect() returned: valid past pc_engine_destroy() */
		pc_conn_put(cl->cc[i].conn);
		free(cl->cc[i].fl);
		free(cl->cc[i].lat_ns);
	}
	free(cl->cc);
}

/*
 * Send buffers per worker. The main thread's slot keeps a ring of free send
 * buffers topped up from the same pool, so the pool must be large enough
 * that the worker still has a window's worth for each of its connections.
 */
static uint32_t client_tx_bufs(uint32_t per_worker_need)
{
	uint32_t tx = 1024, share;

	for (;;) {
		share = 1;
		while (share < tx / 2 + 1)
			share <<= 1;
		if (tx >= share + per_worker_need || tx >= (1u << 20))
			return tx;
		tx += 512;
	}
}

static int run_client(int argc, char **argv)
{
	static const struct option opts[] = {
	    CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_NONUMA,
	    CLI_OPT_IDLE, CLI_OPT_JSON, CLI_OPT_HELP,
	    {"count", required_argument, NULL, 'n'},
	    {"size", required_argument, NULL, 's'},
	    {"connections", required_argument, NULL, 'q'},
	    {"window", required_argument, NULL, 'W'},
	    {0},
	};
	struct client_opts o = {.c = {.port = DEFAULT_PORT, .workers = 1},
				.count = 10000,
				.size = 64,
				.nconns = 1,
				.window = 16};
	struct pc_engine_params p = { .size = sizeof(p) };
	struct client cl = {0};
	struct pc_engine *e = NULL;
	FILE *log;
	uint64_t t0;
	unsigned int i;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, ":a:p:d:w:Njhn:s:q:W:", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_u32("--count", optarg, 1, 100000000, &o.count))
				return 2;
			break;
		case 's':
			if (cli_size32("--size", optarg, 1, MAX_MSG, &o.size))
				return 2;
			break;
		case 'q':
			if (parse_u32("--connections", optarg, 1, 64, &o.nconns))
				return 2;
			break;
		case 'W':
			if (parse_u32("--window", optarg, 1, MAX_WINDOW, &o.window))
				return 2;
			break;
		default:
			if (cli_other_opt(&o.c, c, "client", argv))
				return 2;
		}
	}
	if (cli_client_addr(&o.c, argc, argv))
		return 2;
	log = o.c.json ? stderr : stdout;

	cl.count = o.count;
	cl.size = o.size;
	cl.window = o.window;
	cl.nconns = o.nconns;
	if (client_alloc(&cl)) {
		fprintf(stderr, PROG " client: out of memory for %u connections x %u requests\n",
			o.nconns, o.count);
		goto out;
	}
	cli_catch_stop(on_signal);

	cli_engine_params(&o.c, &p);
	p.msg_size = o.size;
	p.rx_bufs = bufs_for(o.size, 2 * MAX_WINDOW);
	p.tx_bufs = client_tx_bufs((o.nconns + p.workers_per_device - 1) / p.workers_per_device *
				   o.window + 16);
	p.on_conn = cli_on_conn;
	p.on_msg = cli_on_msg;
	p.arg = &cl;
	e = cli_engine_start("client", &p);
	if (!e)
		goto out;
	if (pc_app_attach(e, 0)) {
		fprintf(stderr, PROG " client: %s\n", pc_last_error());
		goto out;
	}
	for (i = 0; i < o.nconns; i++) {
		cl.cc[i].conn = cli_connect(e, &o.c, i, o.nconns, 10000, &cl.cc[i]);
		if (!cl.cc[i].conn)
			goto out;
	}
	fprintf(log, PROG " client: %u connection%s to %s port %u, %u requests of %u bytes each, "
		    "window %u, %u worker%s\n",
	       o.nconns, o.nconns > 1 ? "s" : "", o.c.addr, o.c.port, o.count, o.size, o.window,
	       p.workers_per_device, p.workers_per_device > 1 ? "s" : "");
	fflush(log);

	t0 = now_ns();
	if (kick(&cl) || wait_done(&cl))
		goto out_stats;
	print_results(&cl, t0, o.c.json);
	rc = 0;
out_stats:
	pc_engine_print_stats(e, log);
out:
	fflush(stdout);
	pc_engine_destroy(e);
	client_free(&cl);
	return rc;
}

int main(int argc, char **argv)
{
	cli_init(PROG, usage);
	cli_aliases(argc, argv, aliases);
	if (argc < 2)
		return bad_usage("missing mode: server or client");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "server"))
		return run_server(argc - 1, argv + 1);
	if (!strcmp(argv[1], "client"))
		return run_client(argc - 1, argv + 1);
	return bad_usage("unknown mode '%s' (expected server or client)", argv[1]);
}
