// SPDX-License-Identifier: MIT
/*
 * pollcore-bench - pollcore's own benchmark, with perftest's vocabulary.
 *
 *   pollcore-bench server [--addr ADDR] [--port P] [server options]
 *   pollcore-bench client ADDR --mode send|rpc|write|read [client options]
 *
 * Modes: send (one-way message rate), rpc (round trips: rate and latency
 * percentiles), write and read (one-sided bandwidth). Server and client
 * meet over rdma_cm. The client prints a progress line a second on stderr,
 * then a table (or, with --json, one JSON object) on stdout, and exits 0
 * only when every count and check agrees (1: a mismatch or an error;
 * 2: a usage error). The options follow docs/tools.md (tools/cli.h).
 */
#include "bench.h"
#include "../cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>


static const char *const mode_names[] = { "send", "rpc", "write", "read" };

const char *bench_mode_name(enum bench_mode m)
{
	return mode_names[m];
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The clock of every figure: on x86 the TSC, as perftest's get_cycles(),
 * scaled to nanoseconds by a ratio measured once against CLOCK_MONOTONIC
 * (bench_clock_init()). clock_gettime() is a system call where the
 * clocksource is hpet (the soft-RoCE VM's): the rpc client reads the clock
 * once per request, inside the round trip it measures. Elsewhere,
 * CLOCK_MONOTONIC.
 */
#if defined(__x86_64__) || defined(__i386__)
static uint64_t tsc0, mono0, tsc_mult = 1ull << 32; /* ns per tick, times 2^32 */

static void bench_clock_init(void)
{
	uint64_t t0 = mono_ns(), c0 = __builtin_ia32_rdtsc(), t1, c1;

	do
		t1 = mono_ns();
	while (t1 - t0 < 20000000);
	c1 = __builtin_ia32_rdtsc();
	if (c1 > c0)
		tsc_mult = (uint64_t)(((unsigned __int128)(t1 - t0) << 32) / (c1 - c0));
	tsc0 = c1;
	mono0 = t1;
}

uint64_t bench_now_ns(void)
{
	uint64_t d = __builtin_ia32_rdtsc() - tsc0;

	return mono0 + (uint64_t)(((unsigned __int128)d * tsc_mult) >> 32);
}
#else
static void bench_clock_init(void)
{
}

uint64_t bench_now_ns(void)
{
	return mono_ns();
}
#endif

void bench_pattern_fill(uint8_t *p, uint64_t len, uint32_t seed)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		p[i] = bench_pattern(seed, i);
}

uint64_t bench_digest(const uint8_t *p, uint64_t len)
{
	uint64_t h = 0xcbf29ce484222325ull, w, i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

void bench_params(const struct bench_opts *o, uint32_t msg_size, struct pc_engine_params *p)
{
	uint32_t rx = (64u << 20) / msg_size;

	*p = (struct pc_engine_params){ .size = sizeof(struct pc_engine_params) };
	p->devices = o->devices[0] ? o->devices : NULL;
	p->workers_per_device = o->workers;
	p->msg_size = msg_size;
	p->rx_bufs = o->rx_depth ? o->rx_depth : PC_MIN(PC_MAX(rx, 256u), 1024u);
	p->srq_depth = p->rx_bufs;
	p->sq_depth = o->tx_depth;
	p->max_inline = o->max_inline;
	p->signal_every = o->signal_every;
	p->poll_batch = o->poll_batch;
	p->no_numa = o->no_numa;
	p->idle = o->idle;
	p->grant_delay_us = o->grant_delay_us;
}

/* --- options ------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " server [-a|--addr ADDR] [-p|--port P] [-d|--device NAME] [-w|--workers N]\n"
		"                      [--max-size S] [-W|--window W] [-t|--tx-depth D] [-r|--rx-depth D]\n"
		"                      [-Q|--signal-every N] [--poll-batch N] [--inline B] [-N|--no-numa]\n"
		"                      [--idle busy|hybrid|auto] [--grant-delay-us U]\n"
		"       " PROG " client ADDR -m|--mode send|rpc|write|read [-p|--port P]\n"
		"                      [-s|--size S] [-D|--time SECS | -n|--count N] [--quick]\n"
		"                      [-q|--connections C] [-d|--device NAME] [-w|--workers N]\n"
		"                      [-W|--window W] [-l|--post-batch B] [-Q|--signal-every N]\n"
		"                      [--poll-batch N] [-t|--tx-depth D] [-r|--rx-depth D] [--inline B]\n"
		"                      [-N|--no-numa] [-j|--json] [--producer worker|thread] [--msg-size S]\n"
		"                      [--idle busy|hybrid|auto] [--grant-delay-us U]\n"
		"defaults: port %d, size 64, time 5 s (--quick: 1 s), 1 connection, 1 worker;\n"
		"window (in flight per connection): rpc 1, send, write and read 128; the server's\n"
		"--window (its receive credits, default 64) bounds messages in flight too.\n"
		"send mode, --producer worker (default): the server acknowledges every window/4th\n"
		"message and the client's worker tops up to the window on each; --producer thread:\n"
		"the main thread submits --post-batch messages per connection at a time (default\n"
		"32) through the submission ring, and the server's credits alone bound them.\n"
		"-t: send queue depth per QP (default 256); -r: receive buffers and SRQ depth;\n"
		"-Q: signal every Nth send (default 16). -n counts per connection.\n"
		"--inline: largest send posted inline, header included (default 64; 0: none).\n"
		"--device: the RDMA device the engine opens (default: the first one); the\n"
		"address must be on it (rdma_cm routes over the device that owns it).\n"
		"--connect-timeout SECS: the client's, per connection (default 10).\n"
		"--msg-size S: the client engine's msg_size (default: 4096, or --size above\n"
		"it); send and rpc messages above it go by rendezvous (the server RDMA-READs\n"
		"them), as do those above the server's --max-size (default 4096) coming back.\n"
		"--idle: auto (default) busy-polls only when bound to a core; busy (as perftest)\n"
		"polls without pause; hybrid sleeps on the CQ's events after an idle spell (a\n"
		"one-sided server has nothing to poll, as perftest's).\n"
		"Sizes take k, m, g suffixes; --time takes ms, s, m.\n"
		"--grant-delay-us: how long earned credits wait for a message to carry them\n"
		"before their own RDMA WRITE (the engine's grant_delay_us; default 1000).\n"
		"Exit: 0 all checks passed, 1 a mismatch or an error, 2 a usage error.\n",
		BENCH_PORT);
}

#define bad_usage(...) cli_usage_error(__VA_ARGS__)
#define u32_arg cli_u32

/* Parses @s into @out within [min, max]; on failure says so, naming @opt, and returns -1. */
static int num_arg(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || v < min || v > max) {
		bad_usage("%s: '%s' is not a whole number from %" PRIu64 " to %" PRIu64, opt, s,
			  min, max);
		return -1;
	}
	*out = v;
	return 0;
}

enum {
	O_POLL = CLI_TOOL_FIRST, O_QUICK, O_MAXSIZE, O_UNDER, O_INLINE, O_PRODUCER, O_CTIMEOUT,
	O_MSGSIZE, O_GRANTDELAY,
};

static const struct cli_alias aliases[] = {
	{ "--bind", "--addr" },
	{ "--duration", "--time" },
	{ NULL },
};

static const struct option long_opts[] = {
	CLI_OPT_ADDR, CLI_OPT_PORT, CLI_OPT_DEVICE, CLI_OPT_WORKERS, CLI_OPT_IDLE, CLI_OPT_NONUMA,
	CLI_OPT_JSON, CLI_OPT_TIME, CLI_OPT_HELP,
	{ "mode", required_argument, NULL, 'm' },
	{ "size", required_argument, NULL, 's' },
	{ "count", required_argument, NULL, 'n' },
	{ "connections", required_argument, NULL, 'q' },
	{ "window", required_argument, NULL, 'W' },
	{ "post-batch", required_argument, NULL, 'l' },
	{ "signal-every", required_argument, NULL, 'Q' },
	{ "tx-depth", required_argument, NULL, 't' },
	{ "rx-depth", required_argument, NULL, 'r' },
	{ "inline", required_argument, NULL, O_INLINE },
	{ "producer", required_argument, NULL, O_PRODUCER },
	{ "grant-delay-us", required_argument, NULL, O_GRANTDELAY },
	{ "poll-batch", required_argument, NULL, O_POLL },
	{ "quick", no_argument, NULL, O_QUICK },
	{ "max-size", required_argument, NULL, O_MAXSIZE },
	{ "msg-size", required_argument, NULL, O_MSGSIZE },
	{ "undercount-every", required_argument, NULL, O_UNDER },
	{ "connect-timeout", required_argument, NULL, O_CTIMEOUT },
	{ 0 },
};

/* Options that only one side takes. */
static bool server_only(int c)
{
	return c == O_MAXSIZE || c == O_UNDER;
}

static bool client_only(int c)
{
	return (c < 128 && strchr("msDnqlj", c)) || c == O_QUICK || c == O_INLINE ||
	       c == O_PRODUCER || c == O_MSGSIZE;
}

struct parsed {
	struct bench_opts o;
	struct cli_common c;
	uint32_t max_size;
	bool seen_window, seen_batch, seen_producer;
};

static int parse_mode(const char *s, enum bench_mode *m)
{
	unsigned int i;

	for (i = 0; i < PC_ARRAY_SIZE(mode_names); i++)
		if (!strcmp(s, mode_names[i])) {
			*m = (enum bench_mode)i;
			return 0;
		}
	return bad_usage("--mode: '%s' is not send, rpc, write or read", s);
}

/* One option; returns 0, or 2 after a usage error. */
static int parse_one(int c, const char *arg, struct parsed *p)
{
	struct bench_opts *o = &p->o;
	uint64_t v;

	switch (c) {
	case 'm': return parse_mode(arg, &o->mode);
	case 's': return cli_size32("--size", arg, 1, BENCH_MAX_SIZE, &o->size) ? 2 : 0;
	case 'n':
		if (num_arg("--count", arg, 1, UINT64_MAX / BENCH_MAX_SIZE, &v))
			return 2;
		o->count = v;
		return 0;
	case 'q': return u32_arg("--connections", arg, 1, 1024, &o->conns) ? 2 : 0;
	case 'W':
		p->seen_window = true;
		return u32_arg("--window", arg, 1, BENCH_MAX_WINDOW, &o->window) ? 2 : 0;
	case 'l':
		p->seen_batch = true;
		return u32_arg("--post-batch", arg, 1, 4096, &o->post_batch) ? 2 : 0;
	case 'Q': return u32_arg("--signal-every", arg, 1, 4096, &o->signal_every) ? 2 : 0;
	case 't': return u32_arg("--tx-depth", arg, 1, 32768, &o->tx_depth) ? 2 : 0;
	case 'r': return u32_arg("--rx-depth", arg, 16, 1u << 20, &o->rx_depth) ? 2 : 0;
	case O_POLL: return u32_arg("--poll-batch", arg, 1, 4096, &o->poll_batch) ? 2 : 0;
	case O_MAXSIZE:
		return cli_size32("--max-size", arg, 1, BENCH_MAX_SIZE, &p->max_size) ? 2 : 0;
	case O_MSGSIZE:
		return cli_size32("--msg-size", arg, (uint32_t)sizeof(struct bench_ctl), BENCH_MAX_SIZE,
			       &o->msg_size) ? 2 : 0;
	case O_GRANTDELAY:
		return u32_arg("--grant-delay-us", arg, 1, 10u * 1000 * 1000, &o->grant_delay_us) ? 2 : 0;
	case O_CTIMEOUT:
		return u32_arg("--connect-timeout", arg, 1, 3600, &o->connect_timeout_s) ? 2 : 0;
	case O_UNDER:
		return u32_arg("--undercount-every", arg, 1, UINT32_MAX, &o->undercount_every) ? 2 : 0;
	case O_QUICK: o->quick = true; return 0;
	case O_PRODUCER:
		p->seen_producer = true;
		if (!strcmp(arg, "worker") || !strcmp(arg, "thread")) {
			o->producer = arg[0] == 'w' ? PROD_WORKER : PROD_THREAD;
			return 0;
		}
		return bad_usage("--producer: '%s' is not worker or thread", arg);
	case O_INLINE:
		/* perftest's -I: 0 turns inline off */
		if (u32_arg("--inline", arg, 0, 1024, &o->max_inline))
			return 2;
		if (!o->max_inline)
			o->max_inline = PC_INLINE_NONE;
		return 0;
	}
	return cli_common_opt(&p->c, c, arg) ? 2 : 0;
}

/* The shared options' values, where the rest of the tool reads them. */
static void take_common(struct parsed *p)
{
	struct bench_opts *o = &p->o;

	o->addr = p->c.addr;
	o->port = p->c.port;
	o->devices[0] = p->c.device;
	o->workers = p->c.workers;
	o->idle = p->c.idle;
	o->no_numa = p->c.no_numa;
	o->json = p->c.json;
	o->duration_s = p->c.time_s;
}

/* Cross-checks and defaults of a client's options. */
static int finish_client(struct parsed *p)
{
	struct bench_opts *o = &p->o;
	bool onesided = o->mode == MODE_WRITE || o->mode == MODE_READ;

	if (o->count && o->duration_s > 0)
		return bad_usage("--count and --time exclude each other");
	if (!o->count && !(o->duration_s > 0))
		o->duration_s = o->quick ? 1 : 5;
	bool thread = o->mode == MODE_SEND && o->producer == PROD_THREAD;

	if (o->mode != MODE_SEND && p->seen_producer)
		return bad_usage("--producer: send mode only");
	if (thread && p->seen_window)
		return bad_usage("--window: with --producer thread the server's --window (its "
				 "receive credits) bounds the messages in flight");
	if (!thread && p->seen_batch)
		return bad_usage("--post-batch: send mode with --producer thread only (otherwise "
				 "the worker chains whatever its callbacks issue in one turn)");
	if (thread)
		o->window = 0; /* the server's */
	else if (!p->seen_window)
		o->window = o->mode == MODE_RPC ? 1 : 128;
	if (!p->seen_batch)
		o->post_batch = 32;
	if (onesided && (uint64_t)o->window * o->size > BENCH_MAX_REGION)
		return bad_usage("--window x --size: %" PRIu64 " bytes per connection exceeds %llu",
				 (uint64_t)o->window * o->size, BENCH_MAX_REGION);
	if (o->mode == MODE_RPC && o->rx_depth && o->rx_depth < PC_MAX(o->window, 64u))
		return bad_usage("--rx-depth %u: rpc needs at least max(--window, 64) = %u",
				 o->rx_depth, PC_MAX(o->window, 64u));
	return 0;
}

static int parse(int argc, char **argv, bool server, struct parsed *p)
{
	int c, ret;

	*p = (struct parsed){ .o = { .mode = MODE_SEND, .size = 64, .conns = 1, .window = 64 },
			      .c = { .port = BENCH_PORT, .workers = 1, .idle = PC_IDLE_AUTO },
			      .max_size = 4096 };
	optind = 1;
	while ((c = getopt_long(argc, argv, ":a:p:d:w:NjD:m:s:n:q:W:l:Q:t:r:h", long_opts,
				NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?' || c == ':')
			return bad_usage("%s: unknown option or missing value: '%s'",
					 server ? "server" : "client", argv[optind - 1]);
		if (server ? client_only(c) : server_only(c))
			return bad_usage("%s: '%s' is a %s option", server ? "server" : "client",
					 argv[optind - (optarg ? 2 : 1)], server ? "client" : "server");
		ret = parse_one(c, optarg, p);
		if (ret)
			return ret;
	}
	take_common(p);
	if (server) {
		if (optind != argc)
			return bad_usage("server: unexpected argument '%s'", argv[optind]);
		if (p->o.rx_depth && p->o.window > p->o.rx_depth)
			return bad_usage("--window %u exceeds --rx-depth %u", p->o.window,
					 p->o.rx_depth);
		return 0;
	}
	if (cli_client_addr(&p->c, argc, argv))
		return 2;
	p->o.addr = p->c.addr;
	return finish_client(p);
}

/* --- output ---------------------------------------------------------------------------- */

static double rate_of(const struct bench_opts *o, const struct bench_result *r)
{
	uint64_t n = o->mode == MODE_SEND ? r->received : r->completed;

	return r->secs > 0 ? (double)n / r->secs : 0;
}

static void print_json(const struct bench_opts *o, const struct bench_result *r)
{
	double rate = rate_of(o, r);

	printf("{\"mode\": \"%s\", \"size\": %u, \"rendezvous\": %s, \"connections\": %u, "
	       "\"workers\": %u, \"window\": %u, \"post_batch\": %u, \"seconds\": %.6f, \"sent\": "
	       "%" PRIu64 ", \"completed\": %" PRIu64 ", \"received\": %" PRIu64
	       ", \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64
	       ", \"disorder\": %" PRIu64 ", \"verified\": %s, "
	       "\"rate\": %.1f, \"mb_s\": %.3f",
	       bench_mode_name(o->mode), o->size,
	       (o->mode == MODE_SEND || o->mode == MODE_RPC) && o->msg_size && o->size > o->msg_size
		   ? "true"
		   : "false",
	       o->conns, o->workers, o->window,
	       o->mode == MODE_SEND && o->producer == PROD_THREAD ? o->post_batch : 0, r->secs,
	       r->sent, r->completed, r->received, r->bytes_sent, r->bytes_received, r->disorder,
	       o->mode == MODE_WRITE || o->mode == MODE_READ ? (r->verified ? "true" : "false")
							     : "null",
	       rate, rate * o->size / 1e6);
	if (r->lat && r->lat->n)
		printf(", \"lat_us\": {\"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
		       "\"min\": %.3f, \"max\": %.3f}",
		       hist_quantile(r->lat, 0.5) / 1e3, hist_quantile(r->lat, 0.99) / 1e3,
		       hist_quantile(r->lat, 0.999) / 1e3, (double)r->lat->min / 1e3,
		       (double)r->lat->max / 1e3);
	printf(", \"check\": \"%s\", \"error\": ", r->error[0] ? "failed" : "ok");
	cli_json_str(r->error);
	printf("}\n");
}

static void print_table(const struct bench_opts *o, const struct bench_result *r)
{
	static const char *const unit[] = { "messages", "requests", "writes", "reads" };
	const char *u = unit[o->mode];
	bool onesided = o->mode == MODE_WRITE || o->mode == MODE_READ;
	double rate = rate_of(o, r);

	printf(PROG " %s to %s port %u: %u connection%s, %u B, %u worker%s, ",
	       bench_mode_name(o->mode), o->addr, o->port, o->conns, o->conns > 1 ? "s" : "",
	       o->size, o->workers, o->workers > 1 ? "s" : "");
	if (o->mode == MODE_SEND && o->producer == PROD_THREAD)
		printf("sent by the main thread, post batch %u\n", o->post_batch);
	else
		printf("window %u%s\n", o->window,
		       o->mode == MODE_SEND ? ", sent by the worker on acknowledgements" : "");
	printf("  %-10s %.3f s\n", "elapsed", r->secs);
	printf("  %-10s %" PRIu64 " %s\n", "sent", r->sent, u);
	if (o->mode != MODE_SEND)
		printf("  %-10s %" PRIu64 " %s\n", "completed", r->completed,
		       onesided ? "completions" : "responses");
	printf("  %-10s %" PRIu64 " %s\n", "received", r->received,
	       onesided ? "(one-sided: completions; the server's CPU sees none)"
			: "by the server (its count, asked for after the run)");
	printf("  %-10s %" PRIu64 " sent, %" PRIu64 " received\n", "bytes", r->bytes_sent,
	       r->bytes_received);
	printf("  %-10s %.0f %s/s, %.3f MB/s\n", "rate", rate, u, rate * o->size / 1e6);
	if (r->lat && r->lat->n)
		printf("  %-10s round trip p50 %.2f us, p99 %.2f us, p99.9 %.2f us "
		       "(min %.2f, max %.2f); half round trip p50 %.2f us\n",
		       "latency", hist_quantile(r->lat, 0.5) / 1e3,
		       hist_quantile(r->lat, 0.99) / 1e3, hist_quantile(r->lat, 0.999) / 1e3,
		       (double)r->lat->min / 1e3, (double)r->lat->max / 1e3,
		       hist_quantile(r->lat, 0.5) / 2e3);
	if (onesided)
		printf("  %-10s %s\n", "bytes ok",
		       r->verified ? (o->mode == MODE_WRITE
					  ? "the server's region hashes like the data written"
					  : "every byte of the region read matches the server's")
				   : "NO");
	if (r->error[0])
		printf("  %-10s FAILED: %s\n", "check", r->error);
	else
		printf("  %-10s ok: sent == received, bytes match, in order\n", "check");
}

static int run_client(int argc, char **argv)
{
	struct bench_result r = { 0 };
	struct parsed p;
	int ret = parse(argc, argv, false, &p);

	if (ret)
		return ret;
	ret = bench_client(&p.o, &r);
	if (p.o.json)
		print_json(&p.o, &r);
	else
		print_table(&p.o, &r);
	if (ret)
		fprintf(stderr, PROG ": FAILED: %s\n", r.error);
	free(r.lat);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct parsed p;
	int ret;

	cli_init(PROG, NULL);
	cli_aliases(argc, argv, aliases);
	bench_clock_init();
	if (argc < 2)
		return bad_usage("missing role: server or client");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "client"))
		return run_client(argc - 1, argv + 1);
	if (strcmp(argv[1], "server"))
		return bad_usage("unknown role '%s' (expected server or client)", argv[1]);
	ret = parse(argc - 1, argv + 1, true, &p);
	if (ret)
		return ret;
	return bench_server(&p.o, p.o.addr, p.max_size) ? 1 : 0;
}
