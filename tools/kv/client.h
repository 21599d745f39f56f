/* SPDX-License-Identifier: MIT */
/* tools/kv/client.h - pollcore-kv client: the key-value logic (model.c) for the plumbing (client.c). */
#ifndef TOOLS_KV_CLIENT_H
#define TOOLS_KV_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pollcore/engine.h>

struct cconn;

/* What the server must hold for one key, and the call in flight on it. */
struct key_state {
	uint32_t base;	 /* version the server is known to hold; 0: absent */
	uint32_t floor;	 /* the newest version made before base was known */
	uint32_t maxver; /* the newest version made */
	uint32_t ver;	 /* the PUT in flight: its version */
	uint8_t op;	 /* the call in flight (enum kv_op); 0: none */
	bool uncertain;	 /* a PUT or DEL ended without its response since */
	bool unc_del;	 /* one of those was a DEL */
	struct cconn *x; /* the connection the key travels on */
};

enum kv_verdict { KV_RIGHT, KV_REFUSED, KV_MISMATCH };

/* Writes a request on @k into @m: r < 50 a GET, < 85 a PUT, else a DEL. */
void kv_request(struct key_state *k, uint64_t key, uint32_t r, struct pc_msg *m);
/* Checks the response @m to @k's call; on anything but KV_RIGHT, @why says what. */
enum kv_verdict kv_answer(struct key_state *k, uint64_t key, const struct pc_msg *m, char *why,
			  size_t n);
/* @k's call ended unanswered; false when @m is not the request sent. */
bool kv_unanswered(struct key_state *k, uint64_t key, const struct pc_msg *m);

#endif /* TOOLS_KV_CLIENT_H */
