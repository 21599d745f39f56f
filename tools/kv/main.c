// SPDX-License-Identifier: MIT
/*
 * pollcore-kv - a sharded key-value service and a verifying client, built
 * on pollcore's public API only.
 *
 *   pollcore-kv server [--addr A] [--port P] [--device NAME] [--workers N]
 *                      [--stall-every K] [--no-numa] [--idle busy|hybrid|auto] [--json]
 *   pollcore-kv client ADDR [--port P] [--device NAME] [--connections C] [--window W]
 *                           [--time S] [--timeout-ms MS] [--keys K] [--cancel-every N]
 *                           [--json] [--no-numa] [--idle busy|hybrid|auto]
 *
 * The options follow docs/tools.md (tools/cli.h).
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
		"usage: " KV_PROG " server [-a|--addr A] [-p|--port P] [-d|--device NAME] [-w|--workers N]\n"
		"                          [--stall-every K] [-N|--no-numa] [--idle busy|hybrid|auto]\n"
		"                          [-j|--json]\n"
		"       " KV_PROG " client ADDR [-p|--port P] [-d|--device NAME] [-q|--connections C]\n"
		"                          [-W|--window W] [-D|--time SECS] [--timeout-ms MS] [--keys K]\n"
		"                          [--cancel-every N] [-j|--json] [-N|--no-numa]\n"
		"                          [--idle busy|hybrid|auto]\n"
		"defaults: port %d, workers 1, idle auto, stall-every 0 (never); client: connections\n"
		"1, window 16 calls in flight per connection (at most 128), time 5 s, timeout-ms\n"
		"1000 (0: none), keys 10000, cancel-every 16 (every 16th GET is cancelled; 0: none).\n"
		"Exit: 0 done and every value checked, 1 failed, 2 bad usage.\n",
		KV_DEFAULT_PORT);
}

static const struct cli_alias aliases[] = {
	{ "--depth", "--window" },
	{ NULL },
};

uint64_t kv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	cli_init(KV_PROG, kv_usage);
	cli_aliases(argc, argv, aliases);
	if (argc < 2)
		return cli_usage_error("missing mode: server or client");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		kv_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "server"))
		return kv_server(argc - 1, argv + 1);
	if (!strcmp(argv[1], "client"))
		return kv_client(argc - 1, argv + 1);
	return cli_usage_error("unknown mode '%s' (expected server or client)", argv[1]);
}
