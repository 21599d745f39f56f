/* SPDX-License-Identifier: MIT */
/*
 * What two pollcore peers say to each other: the 16-byte header in front of
 * every message, and the rdma_cm private data of connect and accept. Pure
 * logic, no verbs; unit-tested on the host (tests/test_wire.c).
 *
 * Both are in host byte order: peers are assumed to share endianness.
 * Peers that send no pollcore private data ("raw" peers, e.g. rdmacm-utils)
 * get no header and no credits; wire_cm_parse() tells them apart.
 *
 * Any thread; no shared state.
 */
#ifndef PC_WIRE_H
#define PC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pollcore/common.h>

#define PC_WIRE_MAGIC 0x50u	/* "P" */
#define PC_CM_MAGIC 0x50434d32u	/* "PCM2": the header carries grants (PCM1 did not) */

/* Message types on the wire; pollcore/engine.h's enum pc_msg_type mirrors them. */
enum wire_type {
	WIRE_ONEWAY = 0,
	WIRE_REQUEST,
	WIRE_RESPONSE,
	/* internal to pollcore, never delivered (workers/rndv.c) */
	WIRE_RNDV,	/* a rendezvous descriptor: READ my buffer (struct wire_rndv) */
	WIRE_DONE,	/* the READ of a descriptor ended (struct wire_done) */
	WIRE_ABORT,	/* leave a descriptor unread if not started (struct wire_done; PC_CM_FEAT_ABORT) */
	WIRE_TYPE_MAX = WIRE_ABORT,
};

/*
 * @grant piggybacks credits on every message: the low 16 bits of the
 * sender's cumulative grant to the receiver (the same count its credit
 * word carries). The receiver widens it with wire_grant_expand().
 */
struct wire_hdr {
	uint8_t magic;		/* PC_WIRE_MAGIC */
	uint8_t type;		/* enum wire_type */
	uint16_t grant;		/* cumulative grant, mod 2^16 */
	uint32_t len;		/* payload bytes after the header */
	uint64_t req_id;
};
static_assert(sizeof(struct wire_hdr) == 16, "wire header is 16 bytes");

#define WIRE_HDR_LEN ((uint32_t)sizeof(struct wire_hdr))

/* Hot path: writes the header of a @len-byte payload. */
static pc_always_inline void wire_hdr_fill(struct wire_hdr *h, uint8_t type, uint32_t len,
					   uint64_t req_id, uint64_t grant)
{
	h->magic = PC_WIRE_MAGIC;
	h->type = type;
	h->grant = (uint16_t)grant;
	h->len = len;
	h->req_id = req_id;
}

/*
 * Hot path: the cumulative grant a header's 16 bits stand for, given the
 * last one seen. Exact while the true grant is less than 2^16 ahead of
 * @seen, which a window of at most WIRE_MAX_CREDITS guarantees (a sender
 * never spends beyond @seen, and a grant is never more than a window ahead
 * of what was spent). An older grant (a message overtaken by a credit
 * WRITE) comes out nearly 2^16 ahead: the window check rejects it.
 */
static pc_always_inline uint64_t wire_grant_expand(uint64_t seen, uint16_t grant)
{
	return seen + (uint16_t)(grant - (uint16_t)seen);
}

/*
 * Hot path: validates the @len bytes received in @buf (reading no more than
 * @len of them) and copies the header to @out.
 *
 * Return: 0, or -EPROTO when @buf is shorter than a header, has the wrong
 * magic or type, or a length that disagrees with @len.
 */
static pc_always_inline int wire_hdr_parse(const void *buf, uint32_t len, struct wire_hdr *out)
{
	if (pc_unlikely(len < WIRE_HDR_LEN))
		return -EPROTO;
	memcpy(out, buf, sizeof(*out));
	if (pc_unlikely(out->magic != PC_WIRE_MAGIC || out->len != len - WIRE_HDR_LEN ||
			out->type > WIRE_TYPE_MAX))
		return -EPROTO;
	return 0;
}

/*
 * rdma_cm private data of a pollcore peer (connect and accept). @window is
 * the most credits this side will ever have granted and not seen used: the
 * peer takes a grant that would put it further ahead for a broken one.
 * pollcore grants nothing up front (@credits 0): its worker grants every
 * credit, the first ones included, by RDMA WRITE once the connection is up,
 * within the room its SRQ has (docs/architecture.md, credits).
 */
struct wire_cm_priv {
	uint32_t magic;		/* PC_CM_MAGIC */
	uint32_t credits;	/* receive credits granted up front (<= window) */
	uint64_t credit_addr;	/* where to RDMA WRITE later grants (u64, cumulative) */
	uint32_t credit_rkey;
	uint32_t max_msg;	/* largest payload accepted */
	uint32_t window;	/* credits outstanding at most */
	/*
	 * Largest message accepted by rendezvous (> max_msg), or max_msg when
	 * none is. 0 (a peer that sends only the first 28 bytes, which the
	 * CM pads with zeros) means max_msg.
	 */
	uint32_t max_large;
	/* PC_CM_FEAT_*: what this side understands; 0 from a peer of an older layout */
	uint32_t features;
} __attribute__((packed));
static_assert(sizeof(struct wire_cm_priv) == 36, "private data layout");

/* It takes WIRE_ABORT: a sender may withdraw a descriptor it no longer wants read. */
#define PC_CM_FEAT_ABORT 1u
/* It takes packs: several one-way messages in one SEND (WIRE_MORE). */
#define PC_CM_FEAT_PACK 2u
#define PC_CM_FEATURES (PC_CM_FEAT_ABORT | PC_CM_FEAT_PACK)
static_assert(sizeof(struct wire_cm_priv) <= 56, "fits IB CM REQ private data");

/*
 * Packing (PC_CM_FEAT_PACK): one SEND may carry up to WIRE_PACK_MAX
 * one-way messages, each a frame of its own header and payload, one after
 * the other. Every frame but the last has WIRE_MORE in its type and a
 * payload of a multiple of 8 bytes, so that every frame starts 8-byte
 * aligned; the last one ends exactly where the receive does. A pack is one
 * receive and spends one credit. Every header carries the same grant.
 * Only a peer that said PC_CM_FEAT_PACK is sent one.
 */
#define WIRE_MORE 0x80u
#define WIRE_PACK_MAX 8u
#define WIRE_PACK_ALIGN 8u

/**
 * wire_pack_split - the frames of a received pack.
 * @buf: the receive's bytes.
 * @len: how many.
 * @hdrs: filled with each frame's header, WIRE_MORE cleared (WIRE_PACK_MAX entries).
 * @offs: filled with each frame's header offset in @buf (WIRE_PACK_MAX entries).
 *
 * Reads no more than @len bytes. Called when wire_hdr_parse() refused
 * @buf: a single message is not a pack.
 *
 * Pure; any thread.
 *
 * Return: the number of frames (2 to WIRE_PACK_MAX), or -EPROTO: a frame
 * that is not a one-way message, a WIRE_MORE frame whose payload is not a
 * multiple of WIRE_PACK_ALIGN or leaves no room for a header after it, a
 * last frame that does not end the receive, or more than WIRE_PACK_MAX
 * frames.
 */
int wire_pack_split(const void *buf, uint32_t len, struct wire_hdr *hdrs, uint32_t *offs);

/* A grant larger than this is nonsense (or an attack on our counters). */
#define WIRE_MAX_CREDITS (1u << 14)

/*
 * Rendezvous (workers/rndv.c): a message above the peer's max_msg goes as
 * a descriptor (type WIRE_RNDV, the header's req_id its request id) naming
 * bytes the sender bound to a memory window for this connection only; the
 * receiver RDMA-READs them and answers WIRE_DONE with the descriptor's
 * token, after which the sender invalidates the window. Both are ordinary
 * credited messages.
 *
 * A sender has at most WIRE_RNDV_MAX descriptors unanswered per
 * connection; a receiver that sees more closes the connection.
 *
 * A sender that no longer wants a descriptor read (the call it carries
 * ended: deadline, cancel) sends WIRE_ABORT with its token to a peer that
 * said PC_CM_FEAT_ABORT. A receiver that has not started that READ drops
 * the descriptor and answers WIRE_DONE with -ECANCELED; one that has
 * answers as it would have. An ABORT for a token it does not hold is
 * ignored (its DONE crossed it). Either way the sender gets its DONE and
 * invalidates the window, and only then reuses the bytes.
 */
#define WIRE_RNDV_MAX 32u

struct wire_rndv {
	uint8_t inner;		/* enum wire_type of the message: ONEWAY, REQUEST or RESPONSE */
	uint8_t pad[3];
	uint32_t rkey;		/* of the memory window over [addr, addr + len) */
	uint64_t addr;
	uint64_t token;		/* the sender's, echoed in WIRE_DONE */
	uint32_t len;		/* payload bytes */
	uint32_t pad2;
};
static_assert(sizeof(struct wire_rndv) == 32, "descriptor layout");

/* WIRE_DONE, and WIRE_ABORT (the sender's: @status 0) */
struct wire_done {
	uint64_t token;		/* the descriptor's */
	int32_t status;		/* 0: read; a negative errno otherwise (-ECANCELED: aborted, unread) */
	uint32_t pad;
};
static_assert(sizeof(struct wire_done) == 16, "done layout");

/**
 * wire_rndv_check - validates a received descriptor.
 * @buf: its payload (after the header).
 * @len: the payload's length.
 * @msg_size: the largest message we accept without rendezvous.
 * @max_large: the largest we accept with it (0: none).
 * @out: filled when valid.
 * @why: what was wrong, when not.
 * @whylen: size of @why.
 *
 * Pure; any thread.
 *
 * Return: 0, or -EPROTO (@why set): a payload that is not a descriptor,
 * an unknown inner type, a length not above @msg_size or above
 * @max_large, rkey 0, or an address range that wraps.
 */
int wire_rndv_check(const void *buf, uint32_t len, uint32_t msg_size, uint32_t max_large,
		    struct wire_rndv *out, char *why, size_t whylen);

/**
 * wire_done_check - validates a received WIRE_DONE.
 * @buf: its payload.
 * @len: its length.
 * @out: filled when valid.
 *
 * Return: 0, or -EPROTO when the payload is not a wire_done or its status
 * is positive. Whether the token is known is the caller's to check.
 */
int wire_done_check(const void *buf, uint32_t len, struct wire_done *out);

/**
 * wire_cm_fill - our private data for connect or accept.
 * @priv: filled.
 * @credits: receive credits we grant up front.
 * @window: the most credits we will have granted and not seen used.
 * @credit_addr: address of our credit word, for the peer's RDMA WRITEs.
 * @credit_rkey: its rkey.
 * @max_msg: largest payload we accept.
 *
 * max_large is set to @max_msg (no rendezvous); the caller raises it.
 * features is PC_CM_FEATURES.
 */
void wire_cm_fill(struct wire_cm_priv *priv, uint32_t credits, uint32_t window,
		  uint64_t credit_addr, uint32_t credit_rkey, uint32_t max_msg);

/* The peer's rendezvous limit from its private data: max_large, or max_msg (none). */
static inline uint32_t wire_cm_max_large(const struct wire_cm_priv *p)
{
	return p->max_large > p->max_msg ? p->max_large : p->max_msg;
}

/**
 * wire_cm_parse - what the peer said in its private data.
 * @who: names the device or connection in the error message.
 * @data: the private data (may be NULL).
 * @len: its length.
 * @out: filled for a pollcore peer.
 *
 * A peer without pollcore private data (none, or not starting with
 * PC_CM_MAGIC) is raw. A peer that claims pollcore but sends too little or
 * impossible parameters (window 0 or above WIRE_MAX_CREDITS, more credits
 * than its window, rkey 0, max_msg 0) is refused.
 *
 * Return: 1 for a pollcore peer, 0 for a raw one, or -EPROTO with
 * pc_last_error() set.
 */
int wire_cm_parse(const char *who, const void *data, size_t len, struct wire_cm_priv *out);

/*
 * rdma_cm private data of a pollcore server's reject: why, in words, for
 * the client's error (IB CM REJ carries up to 148 bytes).
 */
#define PC_REJ_MAGIC 0x50435231u	/* "PCR1" */
struct wire_cm_rej {
	uint32_t magic;		/* PC_REJ_MAGIC */
	char why[120];		/* NUL-terminated */
};
static_assert(sizeof(struct wire_cm_rej) <= 148, "fits IB CM REJ private data");

/**
 * wire_rej_fill - a reject saying @why (truncated to fit).
 * @rej: filled.
 * @why: the reason.
 */
void wire_rej_fill(struct wire_cm_rej *rej, const char *why);

/**
 * wire_rej_parse - the reason in a reject's private data.
 * @data: the private data (may be NULL).
 * @len: its length.
 * @out: the reason, NUL-terminated, printable characters only.
 * @outlen: size of @out (at least 1).
 *
 * Return: true when @data is a pollcore reject (then @out is set).
 */
bool wire_rej_parse(const void *data, size_t len, char *out, size_t outlen);

#endif /* PC_WIRE_H */
