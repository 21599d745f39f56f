/* SPDX-License-Identifier: MIT */
/*
 * tools/kv/kv.h - pollcore-kv's wire format and the values its client can
 * verify.
 *
 * A request is one pc_call() of a struct kv_hdr followed by vlen bytes of
 * value (PUT only); the response is a struct kv_hdr (status instead of op)
 * followed by the value (GET of a present key only), written in place into
 * the request's buffer by pc_reply(). Both ends are the same program on the
 * same architecture: the header travels in host byte order.
 *
 * Values are derived from (key, version): a client that knows which
 * version a key should hold checks every byte of what a GET returns.
 */
#ifndef TOOLS_KV_H
#define TOOLS_KV_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define KV_PROG		"pollcore-kv"
#define KV_DEFAULT_PORT 7491
#define KV_VALUE_MAX	64u /* bytes of value, at most */

enum kv_op { KV_GET = 1, KV_PUT, KV_DEL };
enum kv_status {
	KV_OK = 0,   /* GET: found (value follows); PUT: stored; DEL: deleted */
	KV_NOTFOUND, /* GET or DEL of a key that is not there */
	KV_FULL,     /* PUT: the shard has no room for another key */
	KV_BAD,	     /* the request was malformed */
};

struct kv_hdr {
	uint8_t code; /* enum kv_op in a request, enum kv_status in a response */
	uint8_t pad[3];
	uint32_t ver; /* PUT: the version stored; GET response: the version found */
	uint64_t key;
	uint32_t vlen; /* value bytes after the header */
	uint32_t rsv;
};

#define KV_MSG_MAX (sizeof(struct kv_hdr) + KV_VALUE_MAX)

/* A 64-bit mix (splitmix64's finaliser): keys to connections, values to bytes. */
static inline uint64_t kv_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The length of version @ver of @key's value: 1 .. KV_VALUE_MAX. */
static inline uint32_t kv_vlen(uint64_t key, uint32_t ver)
{
	return 1 + (uint32_t)(kv_mix(key * 31 + ver) % KV_VALUE_MAX);
}

/* Byte @i of version @ver of @key's value. */
static inline uint8_t kv_vbyte(uint64_t key, uint32_t ver, uint32_t i)
{
	return (uint8_t)(kv_mix(key ^ ((uint64_t)ver << 32) ^ (i / 8)) >> (8 * (i % 8)));
}

static inline void kv_vfill(uint8_t *b, uint64_t key, uint32_t ver, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = kv_vbyte(key, ver, i);
}

/* Returns the offset of the first wrong byte, or @len when all are right. */
static inline uint32_t kv_vcheck(const uint8_t *b, uint64_t key, uint32_t ver, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len && b[i] == kv_vbyte(key, ver, i); i++)
		;
	return i;
}

/* main.c */
void kv_usage(FILE *f);
uint64_t kv_now_ns(void);

int kv_server(int argc, char **argv);
int kv_client(int argc, char **argv);

#endif /* TOOLS_KV_H */
