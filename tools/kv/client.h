/* SPDX-License-Identifier: MIT */
/* tools/kv/client.h - pollcore-kv client's state, shared by client.c and calls.c. */
#ifndef TOOLS_KV_CLIENT_H
#define TOOLS_KV_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <pollcore/engine.h>

struct key_state {
	uint32_t base;	 /* version the server is known to hold; 0: absent */
	uint32_t floor;	 /* the newest version made before base was known */
	uint32_t maxver; /* the newest version made */
	bool busy;	 /* a call on it is in flight */
	bool uncertain;	 /* a PUT or DEL ended without its response since */
	bool unc_del;	 /* one of those was a DEL */
};

struct cconn;

struct flight {
	struct cconn *x;
	uint32_t key; /* index into the client's keys */
	uint32_t ver; /* PUT: the version written */
	uint8_t op;
	bool busy;
};

struct cconn {
	struct client *cl;
	struct pc_conn *conn;
	struct flight *fl;
	uint32_t *free_fl; /* stack of free flights */
	uint32_t nfree;
	uint32_t *keys; /* the key indexes this connection carries */
	uint32_t nkeys;
	uint64_t rng;
	bool dead; /* closed: no more calls on it */
};

struct client {
	uint32_t nconns, depth, timeout_ms, nkeys, cancel_every;
	uint64_t salt; /* keys are salt + index: a new set each run */
	struct key_state *ks;
	struct cconn *cc;
	uint64_t calls, ops, gets, puts, dels, mismatches, errors, timeouts, cancelled;
	uint64_t cancels, cancel_fail, duplicates, refused, unexpected, allocs, enobufs;
	uint64_t eagain, inflight; /* eagain: pc_call() refused for max_calls (never, below it) */
	char first_err[256];
	atomic_uint downs;
};

/* calls.c: makes one call on @x; false when @x can take no more now */
bool kv_issue(struct client *cl, struct cconn *x);

#endif /* TOOLS_KV_CLIENT_H */
