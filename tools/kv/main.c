// SPDX-License-Identifier: MIT
/*
 * pollcore-kv - a sharded key-value service and a verifying client, built
 * on pollcore's public API only.
 *
 *   pollcore-kv server [--addr A] [--port P] [--workers N] [--stall-every K] [--no-numa]
 *   pollcore-kv client ADDR [--port P] [--connections C] [--depth D] [--time S]
 *                           [--timeout-ms MS] [--keys K] [--cancel-every N] [--json]
 *                           [--no-numa]
 *
 * The server (server.c) runs in handler mode, one shard (a hash table) per
 * worker. The client (client.c) runs in ring mode with pc_call()
 * completions and deadlines, cancels some GETs on purpose, and checks every
 * value it reads against what it wrote.
 */
#include "kv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../cli.h"

void kv_usage(FILE *f)
{
	fprintf(f,
		"usage: " KV_PROG " server [--addr A] [--port P] [--workers N] [--stall-every K]"
		" [--no-numa]\n"
		"       " KV_PROG
		" client ADDR [--port P] [--connections C] [--depth D] [--time S]\n"
		"                          [--timeout-ms MS] [--keys K] [--cancel-every N] [--json]"
		" [--no-numa]\n"
		"defaults: port %d, workers 1, stall-every 0 (never); client: connections 1,\n"
		"depth 16 calls in flight per connection (at most 128), time 5 s, timeout-ms 1000\n"
		"(0: none), keys 10000, cancel-every 16 (every 16th GET is cancelled; 0: none)\n",
		KV_DEFAULT_PORT);
}

int kv_bad_usage(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return cli_bad_usage(KV_PROG, kv_usage, "%s", msg);
}

/* getopt_long() found an unknown option or one without its value. */
int kv_bad_option(const char *mode, const char *arg)
{
	return kv_bad_usage("%s: unknown option or missing value: '%s'", mode, arg);
}

int kv_parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end != '\0' || errno || v < min || v > max) {
		kv_bad_usage("%s: '%s' is not a number from %u to %u", opt, s, min, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

uint64_t kv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	opterr = 0; /* kv_bad_option() says it, naming the mode */
	if (argc < 2)
		return kv_bad_usage("missing mode: server or client");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		kv_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "server"))
		return kv_server(argc - 1, argv + 1);
	if (!strcmp(argv[1], "client"))
		return kv_client(argc - 1, argv + 1);
	return kv_bad_usage("unknown mode '%s' (expected server or client)", argv[1]);
}
