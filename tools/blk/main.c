// SPDX-License-Identifier: MIT
/*
 * pollcore-blk - a block target and a verifying client of the NVMe-oF over
 * RDMA shape (docs/storage.md).
 *
 *   pollcore-blk server [--addr A] [--port P] (--ram SIZE | --file PATH) [--bs 4096]
 *                       [--workers N] [--staging N] [--no-numa] [--busy | --hybrid]
 *   pollcore-blk client ADDR [--port P] [--rw MODE] [--bs 4k] [--iodepth 32] [--size 64M]
 *                       [--time 10] [--verify] [--json] [--phase write|check --gen G]
 *                       [--bad-cmds] [--no-numa]
 *
 * Exit status: 0 success, 1 failure (a mismatch, an error completion, a
 * lost connection), 2 bad usage.
 */
#include "blk.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../cli.h"

void blk_usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " server [--addr A] [--port P] (--ram SIZE | --file PATH) [--bs 4096]\n"
		"                           [--workers N] [--staging N] [--no-numa]\n"
		"                           [--busy | --hybrid]\n"
		"       " PROG " client ADDR [--port P] [--rw read|write|randread|randwrite|randrw]\n"
		"                           [--bs 4k] [--iodepth 32] [--size 64M] [--time 10]\n"
		"                           [--offset 0] [--verify] [--reconnect S] [--json]\n"
		"                           [--no-numa]\n"
		"       " PROG " client ADDR --phase write|check [--gen G] [--rw ..] [--bs ..]\n"
		"                           [--size ..]  (durability: write+flush, then check)\n"
		"       " PROG " client ADDR --bad-cmds  (each invalid command's exact status)\n"
		"defaults: port %d; server: bs 4096, workers 1, staging 64 buffers of %u KiB per\n"
		"worker; client: rw randread, bs 4k, iodepth 32 (at most 64), size 64M, time 10 s\n"
		"(0: one pass over size), gen 1; --reconnect S: survive a closed connection,\n"
		"connecting again for up to S seconds\n",
		BLK_PORT, BLK_MAX_IO >> 10);
}

int blk_parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end != '\0' || errno || v < min || v > max) {
		blk_bad_usage("%s: '%s' is not a number from %u to %u", opt, s, min, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int blk_parse_size(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	return cli_parse_size(PROG, blk_usage, opt, s, min, max, out);
}

uint64_t blk_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	opterr = 0; /* the modes say what was wrong, naming the option */
	if (argc < 2)
		return blk_bad_usage("missing mode: server or client");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		blk_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "server"))
		return blk_server_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "client"))
		return blk_client_main(argc - 1, argv + 1);
	return blk_bad_usage("unknown mode '%s' (expected server or client)", argv[1]);
}
