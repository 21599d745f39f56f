/* SPDX-License-Identifier: MIT */
/*
 * tools/blk/blk.h - pollcore-blk's pieces: the server's per-worker state
 * and command slots (server.c), the backends (backend_ram.c,
 * backend_uring.c), the client (client.c) and the shared option helpers
 * (main.c). docs/storage.md describes the design.
 */
#ifndef BLK_H
#define BLK_H

#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proto.h"
#include "store.h"
#include "../cli.h"

#define PROG "pollcore-blk"

struct blk_wq;

/**
 * struct blk_io - one command on the server, from its message's arrival to
 * its completion. Preallocated per worker: as many as the worker has
 * receive buffers, since every command holds its request buffer until the
 * reply goes out in it, so they never run out.
 */
struct blk_io {
	struct pc_op op;	/* the RDMA transfer (first: container_of is a cast) */
	struct blk_cmd cmd;	/* decoded, host order */
	struct blk_bio bio;	/* the backend operation */
	struct blk_stage_waiter sw;	/* waiting for a staging buffer */
	struct pc_msg *msg;	/* the request; the completion travels back in it */
	struct blk_wq *wq;	/* owning worker's state */
	uint8_t *stage;		/* staging buffer, NULL while none is held */
	uint32_t stage_idx;
	bool gone;		/* its connection is DOWN: no more calls that name it */
	struct blk_io *next;	/* free list */
};

/**
 * struct blk_wq_stats - a worker's counters; written by its thread only,
 * read relaxed by the main thread for the exit report.
 */
struct blk_wq_stats {
	uint64_t reads, writes, flushes, identifies;
	uint64_t bytes_read, bytes_written;
	uint64_t bad_cmds;	/* error completions for invalid commands */
	uint64_t xfer_errors;	/* RDMA transfers that failed */
	uint64_t io_errors;	/* backend failures */
	uint64_t replies_lost;	/* completions the connection's close dropped */
};

/**
 * struct blk_wq - a server worker's state. Touched only on its worker's
 * thread once the engine runs (set up before pc_listen()).
 */
struct blk_wq {
	struct blk_server *srv;
	unsigned int idx;
	struct pc_worker *pw;
	/* command slots */
	struct blk_io *ios;
	struct blk_io *free_ios;
	uint32_t nios;
	/* the staging pool (store.h): buffers of max_io bytes, registered while in use */
	struct blk_stage stage;
	uint32_t conns;		/* connections UP whose attach succeeded */
	void *be;		/* the backend's per-worker state */
	struct blk_wq_stats st;
};

/**
 * blk_server_main - `pollcore-blk server ...` (server.c).
 * @argc: arguments after the program name ("server" first).
 * @argv: them.
 *
 * Return: the exit status.
 */
int blk_server_main(int argc, char **argv);

/**
 * blk_client_main - `pollcore-blk client ...` (client.c).
 * @argc: arguments after the program name ("client" first).
 * @argv: them.
 *
 * Return: the exit status.
 */
int blk_client_main(int argc, char **argv);

/**
 * blk_usage - print the usage text (main.c).
 * @f: stream.
 */
void blk_usage(FILE *f);

/* A usage error: what was wrong, then the usage, on stderr; returns 2 (tools/cli.h). */
#define blk_bad_usage(...) cli_bad_usage(PROG, blk_usage, __VA_ARGS__)

/**
 * blk_parse_u32 - a decimal number from @min to @max.
 * @opt: the option's name, for the message.
 * @s: its value.
 * @min: smallest allowed.
 * @max: largest allowed.
 * @out: the number.
 *
 * Return: 0, or -1 after blk_bad_usage() said why.
 */
int blk_parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out);

/**
 * blk_parse_size - a size: a number with an optional k, m, g or t suffix
 * (powers of 1024; "KiB" and "kb" spellings too).
 * @opt: the option's name, for the message.
 * @s: its value.
 * @min: smallest allowed, bytes.
 * @max: largest allowed, bytes.
 * @out: bytes.
 *
 * Return: 0, or -1 after blk_bad_usage() said why.
 */
int blk_parse_size(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);

/**
 * blk_now_ns - CLOCK_MONOTONIC in nanoseconds.
 *
 * Return: the time.
 */
uint64_t blk_now_ns(void);

#endif /* BLK_H */
