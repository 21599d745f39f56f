/* SPDX-License-Identifier: MIT */
/*
 * tools/blk/client.h - pollcore-blk's client: shared by the workload
 * runner (client.c) and the protocol checks of --bad-cmds (client_bad.c).
 *
 * Threads: the main thread connects, registers the I/O buffer, sets up a
 * job and waits; the engine's single worker runs everything on the wire:
 * a poller (pc_worker_add_poller) that issues commands up to the queue
 * depth every turn, and the handler that takes completions. What they
 * share is handed over with release/acquire on @state and @sync_state;
 * the rest of the job is the worker's while a job runs.
 */
#ifndef BLK_CLIENT_H
#define BLK_CLIENT_H

#include "blk.h"

#include <stdatomic.h>
#include "../hist.h"

#define CLI_DATA_TAG	(1ull << 62) /* completions of the job's slots; others answer sync calls */
#define CLI_GEN_UNKNOWN UINT32_MAX   /* a unit whose last write failed: not checked */
#define CLI_MAX_DEPTH	64u	     /* pollcore's request window per connection */
#define CLI_MISM_MSGS	5


enum job_state { JOB_IDLE = 0, JOB_RUN, JOB_DONE };
enum sync_state { SYNC_IDLE = 0, SYNC_REQ, SYNC_SENT, SYNC_ANSWERED };

/**
 * struct job - what the poller issues while a job runs.
 * @rand: random units (else sequential, wrapping around).
 * @perm: random, each unit exactly once (the order of cl->perm).
 * @read_pct: share of reads, 0 to 100.
 * @verify: writes are stamped; reads are checked against cl->gen[].
 * @fixed_gen: writes carry this generation (0: a fresh one each).
 * @total: commands to issue; 0: until stopped.
 */
struct job {
	bool rand, perm, verify;
	uint32_t read_pct;
	uint32_t fixed_gen;
	uint64_t total;
};

/* A command slot: its part of the registered buffer and its flight. */
struct cslot {
	uint64_t t0;
	uint64_t unit;
	uint32_t gen;
	uint32_t seq;
	uint8_t op;
	bool busy;
};

struct client {
	/* set before the first job, then read-only */
	uint32_t iobs, depth, blks_per_io;
	uint64_t nunits;
	struct blk_geom g;
	uint8_t *buf;
	void *mr;
	uint32_t rkey;
	bool json;
	/* the worker's (the main thread touches them only while no job runs) */
	struct pc_conn *conn;
	uint32_t *gen;
	uint32_t *gen_alt; /* 0, or a write's generation that was in flight at a close */
	uint8_t *unit_busy;
	uint32_t *perm;
	struct cslot *slots;
	uint32_t *free_slots, nfree, inflight;
	uint32_t gen_next;
	uint64_t rng, issued, seq_pos;
	uint64_t base_lba;
	uint32_t *redo, nredo; /* units a counted job lost at a close: issued again first */
	uint64_t lost;	       /* commands in flight at closes (--reconnect) */
	struct job job;
	struct tool_hist lat;
	uint64_t mismatches, checked_blocks, errors;
	char mism_msg[CLI_MISM_MSGS][200];
	/* shared */
	_Atomic(struct pc_conn *) new_conn; /* main -> worker: a (re)connected handle */
	atomic_int state;		     /* enum job_state */
	atomic_bool stop;
	atomic_uint_fast64_t done_ios, done_reads, done_writes;
	atomic_int failed; /* set (release) after @err is written */
	char err[512];
	atomic_bool down; /* set (release) after @down_reason is written */
	char down_reason[256];
	/* the main thread's: --reconnect S, where to, and how often it did */
	bool reconnect; /* a close is survived (set before the first job) */
	uint32_t reconnect_s;
	unsigned int reconnects;
	struct pc_engine *e;
	const char *addr;
	uint16_t port;
	/* a single command of the main thread's (IDENTIFY, FLUSH, --bad-cmds) */
	atomic_int sync_state;
	uint8_t sync_raw[64];
	uint32_t sync_len;
	struct blk_cpl sync_cpl;
};

/**
 * cli_sync_raw - send @len bytes as one command and wait for its completion.
 * @cl: client.
 * @raw: the message; its tag must not carry CLI_DATA_TAG.
 * @len: bytes (up to 64; need not be a valid command).
 * @out: the completion.
 * @timeout_s: give up after this long.
 *
 * Main thread, while no job runs.
 *
 * Return: 0, -ENOTCONN when the connection closed first (cl->down_reason
 * says why), -ETIMEDOUT.
 */
int cli_sync_raw(struct client *cl, const void *raw, uint32_t len, struct blk_cpl *out,
		 int timeout_s);

/**
 * cli_sync_cmd - cli_sync_raw() of an encoded command.
 * @cl: client.
 * @c: command, host order.
 * @out: the completion.
 *
 * Return: as cli_sync_raw().
 */
int cli_sync_cmd(struct client *cl, const struct blk_cmd *c, struct blk_cpl *out);

/**
 * cli_reconnect - a new connection after the last one closed; the poller
 * picks it up on its next turn.
 * @cl: client.
 * @e: engine.
 * @addr: server.
 * @port: its port.
 *
 * Main thread.
 *
 * Return: 0 or -1 with a message on stderr.
 */
int cli_reconnect(struct client *cl, struct pc_engine *e, const char *addr, uint16_t port);

/**
 * cli_bad_cmds - send each kind of invalid command and check its exact
 * status, that a bad rkey costs only its connection, and that good I/O
 * works after each (client_bad.c).
 * @cl: a connected client, geometry known.
 * @e: engine (for reconnecting).
 * @addr: server.
 * @port: its port.
 *
 * Main thread.
 *
 * Return: the exit status (0: every check passed).
 */
int cli_bad_cmds(struct client *cl, struct pc_engine *e, const char *addr, uint16_t port);

#endif /* BLK_CLIENT_H */
