/* SPDX-License-Identifier: MIT */
/*
 * Test-only: a peer that speaks to a pollcore server with librdmacm and
 * libibverbs directly, so that it can break every rule pollcore's own client
 * keeps: malformed headers, lengths that lie, sends beyond its credits,
 * nonsense private data, RDMA WRITEs to the credit word with the wrong rkey,
 * raw floods, handshakes abandoned half-way.
 *
 * One thread per peer; nothing here is shared. The peer polls its CQ and
 * its rdma_cm channel itself (no completion channel, no threads).
 */
#ifndef PC_FAULT_PEER_H
#define PC_FAULT_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "wire.h"

struct fpeer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;		/* nrecv receive slots, then nsend send slots */
	uint8_t *mem;
	uint32_t slot_size, nrecv, nsend, next_send;
	struct ibv_mr *credit_mr;	/* the server RDMA-WRITEs its grant into [0] */
	volatile uint64_t *credit_word;
	struct wire_cm_priv srv;	/* the server's private data (srv_pollcore) */
	bool srv_pollcore;
	/* the private data of the accept (ESTABLISHED) or the reject (REJECTED), up to 64 bytes */
	uint8_t cm_data[64];
	uint8_t cm_data_len;
	/* each receive's bytes, before the slot is posted again (fpeer_poll()) */
	void (*on_recv)(struct fpeer *p, const uint8_t *data, uint32_t len);
	void *arg;
	uint32_t srv_qpn;		/* the server's QP: its DOWN is found by this */
	bool established;
	bool disconnected;		/* RDMA_CM_EVENT_DISCONNECTED seen */
	/* completions */
	uint32_t sends_posted, sends_ok, sends_failed;
	enum ibv_wc_status first_err;	/* of the first failed send or write */
	uint32_t recvs;
	uint64_t recv_bytes;
	char why[256];			/* what went wrong in a setup step */
};

/* What fpeer_connect() sends and sets up. */
struct fpeer_opts {
	enum {
		FPEER_RAW = 0,		/* no private data */
		FPEER_POLLCORE,		/* a valid pollcore blob granting @credits into our credit word */
		FPEER_BLOB,		/* @blob, @blob_len bytes, as it is */
	} priv;
	uint32_t credits;		/* FPEER_POLLCORE; 0: 64 */
	uint32_t max_large;		/* FPEER_POLLCORE: rendezvous limit claimed; 0: none */
	const void *blob;
	uint8_t blob_len;
	uint32_t slot_size;		/* bytes per send and receive slot; 0: 8256 */
	uint32_t nrecv;			/* receives posted (and reposted by fpeer_poll()); 0: 128 */
	bool no_recv;			/* post none: whatever the server sends meets RNR */
	bool remote_write;		/* the slots' MR also grants REMOTE_WRITE (p->mr->rkey) */
	int timeout_ms;			/* 0: 10000 */
};

/**
 * fpeer_connect - connect to @addr:@port as @o says.
 * @p: zeroed; filled.
 *
 * Return: 0 when established, -ECONNREFUSED when rejected, -ETIMEDOUT, or
 * another negative errno; p->why says which step failed.
 */
int fpeer_connect(struct fpeer *p, const char *addr, uint16_t port, const struct fpeer_opts *o);

/* Posts one signaled send of @len bytes copied from @buf. Return: 0 or -errno. */
int fpeer_send(struct fpeer *p, const void *buf, uint32_t len);

/*
 * Sends a message with a pollcore header: @payload bytes of pattern after a
 * header claiming @claimed_len (normally == @payload), @type, @req_id, @magic.
 */
int fpeer_send_msg(struct fpeer *p, uint16_t magic, uint8_t type, uint32_t claimed_len,
		   uint32_t payload, uint64_t req_id);

/* Polls completions for up to @ms (0: once); reposts receives. Return: completions seen. */
unsigned int fpeer_poll(struct fpeer *p, int ms);

/* Waits until every posted send completed (either way). Return: 0 or -ETIMEDOUT. */
int fpeer_wait_sends(struct fpeer *p, int ms);

/*
 * RDMA WRITEs (@read false: @value) or READs 8 bytes at @addr with @rkey and
 * waits for the completion. Return: its ibv_wc_status, or -ETIMEDOUT.
 */
int fpeer_rdma(struct fpeer *p, bool read, uint64_t addr, uint32_t rkey, uint64_t value, int ms);

/* Takes rdma_cm events for up to @ms until @want arrives. Return: 0 or -ETIMEDOUT. */
int fpeer_wait_event(struct fpeer *p, enum rdma_cm_event_type want, int ms);

/* Disconnects (if established) and frees everything; @p may be zeroed or half set up. */
void fpeer_destroy(struct fpeer *p);

/* Tears everything down without rdma_disconnect(): the peer just vanishes. */
void fpeer_vanish(struct fpeer *p);

/* How fpeer_abandon() leaves a handshake. */
enum fpeer_abandon {
	FPEER_AFTER_ROUTE = 0,	/* resolved address and route, never connects */
	FPEER_AFTER_CONNECT,	/* rdma_connect() sent, destroyed before any answer */
	FPEER_AFTER_ESTABLISHED,	/* established, then vanishes without disconnecting */
};

/* One handshake to @addr:@port abandoned as @how says. Return: 0 or -errno. */
int fpeer_abandon(const char *addr, uint16_t port, enum fpeer_abandon how, int timeout_ms);

#endif /* PC_FAULT_PEER_H */
