/* SPDX-License-Identifier: MIT */
/*
 * pollcore-bench - shared between the server and option parsing (main.c)
 * and the client's modes (client.c).
 *
 * Wire protocol beside the measured traffic: control requests
 * (struct bench_ctl, PC_MSG_REQUEST, exactly sizeof(struct bench_ctl)
 * bytes, starting with BENCH_MAGIC). Measured payloads start with their
 * sequence number (its low min(8, size) bytes), which never matches the
 * magic, so the server tells them apart by length and magic alone.
 */
#ifndef BENCH_H
#define BENCH_H

#include <pollcore/engine.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../hist.h"

#define PROG		"pollcore-bench"
#define BENCH_PORT	18800
#define BENCH_MAGIC	0x48434e4542435050ull /* "PPCBENCH" */
#define BENCH_MAX_SIZE	(16u << 20)
#define BENCH_MAX_REGION (256ull << 20) /* write/read: window x size per connection */
#define BENCH_MAX_WINDOW 4096u
#define BENCH_STALL_S	30	/* no progress for this long: give up */

enum bench_mode { MODE_SEND, MODE_RPC, MODE_WRITE, MODE_READ };

enum bench_ctl_op {
	CTL_REPORT = 1, /* -> data messages and bytes the server took on this connection */
	CTL_REGION,	/* -> address and rkey of a fresh region of slots x size */
	CTL_DIGEST,	/* -> hash of that region */
	CTL_ACKS,	/* send: answer every `slots`th message with the count so far */
};

/* send mode: who produces the messages. */
enum bench_producer {
	PROD_WORKER,	/* the client's worker, on the server's acknowledgements */
	PROD_THREAD,	/* the main thread, through the submission ring */
};

struct bench_ctl {
	uint64_t magic;
	uint32_t op;
	int32_t status;	   /* reply: 0 or a negative errno */
	uint32_t mode;	   /* CTL_REGION: MODE_WRITE or MODE_READ (the access granted) */
	uint32_t size;	   /* CTL_REGION: slot size */
	uint32_t slots;	   /* CTL_REGION: slot count; CTL_ACKS: acknowledge every Nth */
	uint32_t seed;	   /* CTL_REGION, read: the server fills the region from it */
	uint64_t msgs;	   /* CTL_REPORT reply */
	uint64_t bytes;	   /* CTL_REPORT reply */
	uint64_t disorder; /* CTL_REPORT reply: messages whose sequence number was not the next */
	uint64_t addr;	   /* CTL_REGION reply */
	uint64_t digest;   /* CTL_DIGEST reply */
	uint32_t rkey;	   /* CTL_REGION reply */
	uint32_t pad;
};
static_assert(sizeof(struct bench_ctl) == 80, "control message layout");

static inline bool bench_is_ctl(const struct pc_msg *m)
{
	uint64_t magic;

	if (m->len != sizeof(struct bench_ctl) || m->type == PC_MSG_ONEWAY)
		return false;
	memcpy(&magic, m->data, sizeof(magic));
	return magic == BENCH_MAGIC;
}

/* The low min(8, len) bytes of @seq at the start of a payload. */
static inline void bench_stamp(void *data, uint32_t len, uint64_t seq)
{
	memcpy(data, &seq, len < 8 ? len : 8);
}

static inline uint64_t bench_stamp_of(const void *data, uint32_t len)
{
	uint64_t v = 0;

	memcpy(&v, data, len < 8 ? len : 8);
	return v;
}

static inline uint64_t bench_stamp_mask(uint32_t len)
{
	return len >= 8 ? UINT64_MAX : (1ull << (8 * len)) - 1;
}

/* Contents of a read-mode region: byte @off of the region seeded with @seed. */
static inline uint8_t bench_pattern(uint32_t seed, uint64_t off)
{
	uint64_t x = (off / 8 + 1) * 0x9e3779b97f4a7c15ull ^ seed;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (off % 8)));
}

void bench_pattern_fill(uint8_t *p, uint64_t len, uint32_t seed);
uint64_t bench_digest(const uint8_t *p, uint64_t len);
uint64_t bench_now_ns(void);



struct bench_opts {
	enum bench_mode mode;
	enum bench_producer producer;
	const char *addr;
	const char *devices[2];	/* --device: { name, NULL }; { NULL }: the first device */
	uint32_t port;
	uint32_t size;
	uint32_t conns;
	uint32_t workers;
	uint32_t post_batch;
	uint32_t signal_every;
	uint32_t poll_batch;
	uint32_t tx_depth;
	uint32_t rx_depth;
	uint32_t max_inline;	/* 0: the engine's default (64); PC_INLINE_NONE: none */
	uint32_t msg_size;	/* client: the engine's msg_size; 0: size (no rendezvous) */
	uint32_t window;
	uint64_t count;	 /* per connection; 0: run for duration_s */
	double duration_s;
	uint32_t undercount_every; /* server, for testing clients: leave every Kth uncounted */
	uint32_t connect_timeout_s; /* client, per connection; 0: 10 s */
	bool json;
	bool quick;
	bool no_numa;
	enum pc_idle idle;	/* --idle: PC_IDLE_BUSY unless asked */
	uint32_t grant_delay_us; /* --grant-delay-us; 0: the engine's default */
};

/* Engine parameters both sides derive from the options, for messages up to @msg_size. */
void bench_params(const struct bench_opts *o, uint32_t msg_size, struct pc_engine_params *p);

/* What a client run measured and checked. */
struct bench_result {
	double secs;
	uint64_t sent;		/* messages, requests or operations issued */
	uint64_t completed;	/* responses or operation completions (0 in send mode) */
	uint64_t received;	/* data messages the server took (send, rpc), else completed */
	uint64_t bytes_sent;
	uint64_t bytes_received;	/* the server's count (send, rpc), else completed bytes */
	uint64_t disorder;	/* out-of-order or wrong payloads, either side */
	bool verified;		/* write: digests match; read: every byte of the region */
	struct tool_hist *lat;	/* rpc: round trips; else NULL */
	char error[512];	/* set on any failure */
};

/*
 * Runs the client of mode o->mode: its own engine (handler mode), o->conns
 * connections, the traffic, then the checks. Progress goes to stderr.
 * Returns 0 when every check passed, else -1 with r->error set.
 */
int bench_client(const struct bench_opts *o, struct bench_result *r);

/*
 * Runs the server until SIGINT or SIGTERM: listens on @bind (NULL: any),
 * answers control requests, counts and checks what arrives. Returns 0, or
 * -1 when it could not start.
 */
int bench_server(const struct bench_opts *o, const char *bind, uint32_t max_size);

const char *bench_mode_name(enum bench_mode m);

#endif /* BENCH_H */
