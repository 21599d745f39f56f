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
#include "../cli.h"

#define PROG "pollcore-blk"

struct blk_backend;
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
	struct pc_msg *msg;	/* the request; the completion travels back in it */
	struct blk_wq *wq;	/* owning worker's state */
	uint8_t *stage;		/* staging buffer, NULL while none is held */
	uint32_t stage_idx;
	bool gone;		/* its connection is DOWN: no more calls that name it */
	struct blk_io *next;	/* free list or wait queue */
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
	uint64_t waits;		/* commands that waited for a staging buffer */
	uint64_t max_waiting;	/* the longest that wait queue was */
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
	/* the staging pool: nstage buffers of max_io bytes, registered while conns > 0 */
	uint8_t *stage_mem;
	size_t stage_len;
	uint32_t nstage;
	uint32_t *stage_free;	/* stack of free buffer indexes */
	uint32_t nstage_free;
	void *mr;
	uint32_t lkey;
	uint32_t conns;
	/* commands waiting for a staging buffer, FIFO */
	struct blk_io *wait_head, *wait_tail;
	uint32_t nwaiting;
	bool running;		/* blk_wq_run() is on the stack */
	void *be;		/* the backend's per-worker state */
	struct blk_wq_stats st;
};

/**
 * struct blk_backend - where the blocks live.
 * @name: "ram" or "uring".
 * @desc: what it opened, for the start-up line.
 * @size: bytes (a whole number of blocks).
 * @bs: block size: a command's offset is lba * bs.
 * @wq_init: set up @wq's state (main thread, before pc_listen()).
 * @wq_fini: undo wq_init (main thread, after pc_engine_destroy()).
 * @submit: start @io (READ into io->stage, WRITE from it, FLUSH); on the
 *          worker. The outcome comes through blk_io_stored(), at once or
 *          later from the backend's poller; never both, never twice.
 * @close: release everything (main thread, last).
 * @priv: the backend's own.
 */
struct blk_backend {
	const char *name;
	char desc[256];
	uint64_t size;
	uint32_t bs;
	int (*wq_init)(struct blk_backend *b, struct blk_wq *wq);
	void (*wq_fini)(struct blk_backend *b, struct blk_wq *wq);
	void (*submit)(struct blk_backend *b, struct blk_wq *wq, struct blk_io *io);
	void (*close)(struct blk_backend *b);
	void *priv;
};

/**
 * blk_io_stored - a backend finished its part of @io.
 * @io: the command.
 * @res: 0, or a negative errno.
 *
 * Worker thread of @io->wq (from submit or from the backend's poller).
 */
void blk_io_stored(struct blk_io *io, int res);

/**
 * blk_ram_open - a RAM disk of @size bytes, on NUMA node @node.
 * @b: filled.
 * @size: bytes, a multiple of @bs.
 * @bs: block size.
 * @node: NUMA os index of the workers, or -1.
 *
 * Main thread. The memory is placed (touched) before return.
 *
 * Return: 0 or a negative errno, with a message on stderr.
 */
int blk_ram_open(struct blk_backend *b, uint64_t size, uint32_t bs, int node);

/**
 * blk_uring_open - a file or block device, served through io_uring.
 * @b: filled.
 * @path: regular file or block device; must exist.
 * @bs: block size; the size used is rounded down to it.
 *
 * Opens with O_DIRECT; where the file system refuses it (EINVAL, at open
 * or at the first read) says so and uses the page cache. Main thread.
 *
 * Return: 0 or a negative errno (-ENOTSUP when built without liburing),
 * with a message on stderr.
 */
int blk_uring_open(struct blk_backend *b, const char *path, uint32_t bs);

/**
 * blk_mem_alloc - page-aligned, zeroed memory, placed on a NUMA node.
 * @len: bytes.
 * @node: NUMA os index, or -1 for any.
 *
 * Main thread, at start (server.c).
 *
 * Return: the memory, or NULL.
 */
void *blk_mem_alloc(size_t len, int node);

/**
 * blk_mem_free - free what blk_mem_alloc() gave.
 * @p: the memory, or NULL.
 * @len: its size.
 */
void blk_mem_free(void *p, size_t len);

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
