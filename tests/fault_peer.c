// SPDX-License-Identifier: MIT
/* Test-only: a misbehaving peer on raw librdmacm and libibverbs; see fault_peer.h. */
#include "fault_peer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NRECV 128
#define NSEND 256

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int fail(struct fpeer *p, int err, const char *what)
{
	snprintf(p->why, sizeof(p->why), "%s: %s", what, strerror(err));
	return -err;
}

/*
 * The next rdma_cm event, waiting up to @ms; a copy of its private data in
 * @pd (it dies with the ack). Return: 0, or -ETIMEDOUT.
 */
static int next_event(struct rdma_event_channel *ch, int ms, struct rdma_cm_event *out,
		      uint8_t pd[64])
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	for (;;) {
		if (rdma_get_cm_event(ch, &ev) == 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (poll(&pfd, 1, ms) <= 0)
			return -ETIMEDOUT;
	}
	*out = *ev;
	out->param.conn.private_data = NULL;
	if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
		out->param.conn.private_data_len =
			ev->param.conn.private_data_len < 64 ? ev->param.conn.private_data_len : 64;
		memcpy(pd, ev->param.conn.private_data, out->param.conn.private_data_len);
		out->param.conn.private_data = pd;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

/* Waits for @want; any other event is recorded and fails the step. */
static int expect_event(struct fpeer *p, enum rdma_cm_event_type want, int ms,
			struct rdma_cm_event *ev, uint8_t pd[64])
{
	int ret = next_event(p->ch, ms, ev, pd);

	if (ret) {
		snprintf(p->why, sizeof(p->why), "no %s within %d ms", rdma_event_str(want), ms);
		return ret;
	}
	if (ev->event == want)
		return 0;
	snprintf(p->why, sizeof(p->why), "waiting for %s, got %s (status %d)",
		 rdma_event_str(want), rdma_event_str(ev->event), ev->status);
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
		p->disconnected = true;
	return ev->event == RDMA_CM_EVENT_REJECTED ? -ECONNREFUSED : -EPROTO;
}

static int resolve(struct fpeer *p, const char *addr, uint16_t port, int ms)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	struct rdma_cm_event ev;
	uint8_t pd[64];
	char sport[8];
	int ret;

	p->ch = rdma_create_event_channel();
	if (!p->ch)
		return fail(p, errno, "rdma_create_event_channel");
	if (fcntl(p->ch->fd, F_SETFL, fcntl(p->ch->fd, F_GETFL) | O_NONBLOCK))
		return fail(p, errno, "fcntl");
	if (rdma_create_id(p->ch, &p->id, p, RDMA_PS_TCP))
		return fail(p, errno, "rdma_create_id");
	snprintf(sport, sizeof(sport), "%u", port);
	if (rdma_getaddrinfo(addr, sport, &hints, &res))
		return fail(p, errno ? errno : EADDRNOTAVAIL, "rdma_getaddrinfo");
	ret = rdma_resolve_addr(p->id, NULL, res->ai_dst_addr, 2000) ? -errno : 0;
	rdma_freeaddrinfo(res);
	if (ret)
		return fail(p, -ret, "rdma_resolve_addr");
	ret = expect_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, ms, &ev, pd);
	if (ret)
		return ret;
	if (rdma_resolve_route(p->id, 2000))
		return fail(p, errno, "rdma_resolve_route");
	return expect_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, ms, &ev, pd);
}

static int post_recv(struct fpeer *p, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->mem + (size_t)slot * p->slot_size),
		.length = p->slot_size,
		.lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(p->qp, &wr, &bad) ? -errno : 0;
}

/* PD, CQ, QP, the slots and the credit word, on the device the route resolved to. */
static int setup_qp(struct fpeer *p, uint32_t slot_size, uint32_t nrecv, bool post, int access)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = NSEND + 8, .max_recv_wr = nrecv, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	size_t len;
	uint32_t i;

	p->slot_size = slot_size;
	p->nrecv = nrecv;
	p->nsend = NSEND;
	p->pd = ibv_alloc_pd(p->id->verbs);
	if (!p->pd)
		return fail(p, errno, "ibv_alloc_pd");
	p->cq = ibv_create_cq(p->id->verbs, nrecv + NSEND + 16, NULL, NULL, 0);
	if (!p->cq)
		return fail(p, errno, "ibv_create_cq");
	attr.send_cq = attr.recv_cq = p->cq;
	if (rdma_create_qp(p->id, p->pd, &attr))
		return fail(p, errno, "rdma_create_qp");
	p->qp = p->id->qp;
	len = (size_t)(nrecv + NSEND) * slot_size;
	p->mem = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!p->mem)
		return fail(p, ENOMEM, "aligned_alloc");
	memset(p->mem, 0, len);
	p->mr = ibv_reg_mr(p->pd, p->mem, len, IBV_ACCESS_LOCAL_WRITE | access);
	if (!p->mr)
		return fail(p, errno, "ibv_reg_mr");
	p->credit_word = aligned_alloc(64, 64);
	if (!p->credit_word)
		return fail(p, ENOMEM, "aligned_alloc");
	memset((void *)p->credit_word, 0, 64);
	p->credit_mr = ibv_reg_mr(p->pd, (void *)p->credit_word, 16,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!p->credit_mr)
		return fail(p, errno, "ibv_reg_mr(credit word)");
	for (i = 0; post && i < nrecv; i++)
		if (post_recv(p, i))
			return fail(p, errno, "ibv_post_recv");
	return 0;
}

int fpeer_connect(struct fpeer *p, const char *addr, uint16_t port, const struct fpeer_opts *o)
{
	int ms = o->timeout_ms ? o->timeout_ms : 10000;
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
					 .retry_count = 7, .rnr_retry_count = 7 };
	struct wire_cm_priv priv;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct rdma_cm_event ev = { 0 };
	uint8_t pd[64];
	int ret;

	ret = resolve(p, addr, port, ms);
	if (!ret)
		ret = setup_qp(p, o->slot_size ? o->slot_size : 8256, o->nrecv ? o->nrecv : NRECV,
			       !o->no_recv, o->remote_write ? IBV_ACCESS_REMOTE_WRITE : 0);
	if (ret)
		return ret;
	if (o->priv == FPEER_POLLCORE) {
		priv = (struct wire_cm_priv){
			.magic = PC_CM_MAGIC,
			.credits = o->credits ? o->credits : 64,
			.credit_addr = (uintptr_t)p->credit_word,
			.credit_rkey = p->credit_mr->rkey,
			.max_msg = p->slot_size - WIRE_HDR_LEN,
			/* granted once, up front, never more: the window is that grant */
			.window = o->credits ? o->credits : 64,
			/* what it claims to take by rendezvous (it reads nothing, answers no DONE) */
			.max_large = o->max_large,
		};
		param.private_data = &priv;
		param.private_data_len = sizeof(priv);
	} else if (o->priv == FPEER_BLOB) {
		param.private_data = o->blob;
		param.private_data_len = o->blob_len;
	}
	if (rdma_connect(p->id, &param))
		return fail(p, errno, "rdma_connect");
	ret = expect_event(p, RDMA_CM_EVENT_ESTABLISHED, ms, &ev, pd);
	if (ev.param.conn.private_data && (ret == 0 || ev.event == RDMA_CM_EVENT_REJECTED)) {
		p->cm_data_len = ev.param.conn.private_data_len;
		memcpy(p->cm_data, ev.param.conn.private_data, p->cm_data_len);
	}
	if (ret)
		return ret;
	p->established = true;
	if (ev.param.conn.private_data_len >= sizeof(p->srv)) {
		memcpy(&p->srv, ev.param.conn.private_data, sizeof(p->srv));
		p->srv_pollcore = p->srv.magic == PC_CM_MAGIC;
	}
	if (ibv_query_qp(p->qp, &qa, IBV_QP_DEST_QPN, &qia))
		return fail(p, errno, "ibv_query_qp");
	p->srv_qpn = qa.dest_qp_num;
	return 0;
}

/* Waits until fewer than nsend sends are outstanding. */
static int fpeer_wait_one(struct fpeer *p, int ms)
{
	uint64_t end = ms_now() + (uint64_t)ms;

	while (p->sends_posted - p->sends_ok - p->sends_failed >= p->nsend) {
		if (ms_now() >= end)
			return -ETIMEDOUT;
		fpeer_poll(p, 10);
	}
	return 0;
}

int fpeer_send(struct fpeer *p, const void *buf, uint32_t len)
{
	uint32_t slot = p->nrecv + p->next_send;
	uint8_t *dst = p->mem + (size_t)slot * p->slot_size;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = len, .lkey = p->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;

	if (len > p->slot_size)
		return -EMSGSIZE;
	/* a slot is reused only once every send posted before it completed */
	if (p->sends_posted - p->sends_ok - p->sends_failed >= p->nsend &&
	    fpeer_wait_one(p, 30000))
		return -ETIMEDOUT;
	memcpy(dst, buf, len);
	if (ibv_post_send(p->qp, &wr, &bad))
		return -errno;
	p->next_send = (p->next_send + 1) % p->nsend;
	p->sends_posted++;
	return 0;
}

int fpeer_send_msg(struct fpeer *p, uint16_t magic, uint8_t type, uint32_t claimed_len,
		   uint32_t payload, uint64_t req_id)
{
	uint32_t len = WIRE_HDR_LEN + payload, i;
	uint8_t *buf = malloc(len);
	struct wire_hdr h;
	int ret;

	if (!buf)
		return -ENOMEM;
	wire_hdr_fill(&h, type, claimed_len, req_id, 0);	/* grants nothing in headers */
	h.magic = (uint8_t)magic;
	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < payload; i++)
		buf[WIRE_HDR_LEN + i] = (uint8_t)(i * 13 + 5);
	ret = fpeer_send(p, buf, len);
	free(buf);
	return ret;
}

unsigned int fpeer_poll(struct fpeer *p, int ms)
{
	uint64_t end = ms_now() + (uint64_t)(ms > 0 ? ms : 0);
	struct ibv_wc wc[32];
	unsigned int seen = 0;
	int n, i;

	do {
		n = ibv_poll_cq(p->cq, 32, wc);
		for (i = 0; i < n; i++) {
			seen++;
			if (wc[i].wr_id < p->nrecv) {
				if (wc[i].status != IBV_WC_SUCCESS)
					continue;	/* flushed: the QP is gone */
				p->recvs++;
				p->recv_bytes += wc[i].byte_len;
				if (p->on_recv)
					p->on_recv(p, p->mem + wc[i].wr_id * p->slot_size,
						   wc[i].byte_len);
				post_recv(p, (uint32_t)wc[i].wr_id);
				continue;
			}
			if (wc[i].status == IBV_WC_SUCCESS) {
				p->sends_ok++;
			} else {
				if (!p->sends_failed)
					p->first_err = wc[i].status;
				p->sends_failed++;
			}
		}
		if (n > 0)
			continue;
		if (ms_now() >= end)
			break;
		usleep(200);
	} while (!seen || n > 0);
	return seen;
}

int fpeer_wait_sends(struct fpeer *p, int ms)
{
	uint64_t end = ms_now() + (uint64_t)ms;

	while (p->sends_ok + p->sends_failed < p->sends_posted) {
		if (ms_now() >= end)
			return -ETIMEDOUT;
		fpeer_poll(p, 10);
	}
	return 0;
}

int fpeer_rdma(struct fpeer *p, bool read, uint64_t addr, uint32_t rkey, uint64_t value, int ms)
{
	uint32_t slot = p->nrecv + p->next_send, failed = p->sends_failed;
	uint8_t *dst = p->mem + (size_t)slot * p->slot_size;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = 8, .lkey = p->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1,
				  .opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE }, *bad;

	if (fpeer_wait_sends(p, ms))
		return -ETIMEDOUT;
	memcpy(dst, &value, sizeof(value));
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(p->qp, &wr, &bad))
		return -errno;
	p->next_send = (p->next_send + 1) % p->nsend;
	p->sends_posted++;
	if (fpeer_wait_sends(p, ms))
		return -ETIMEDOUT;
	return p->sends_failed == failed ? IBV_WC_SUCCESS : (int)p->first_err;
}

int fpeer_wait_event(struct fpeer *p, enum rdma_cm_event_type want, int ms)
{
	uint64_t end = ms_now() + (uint64_t)ms;
	struct rdma_cm_event ev;
	uint8_t pd[64];

	for (;;) {
		int left = (int)(end > ms_now() ? end - ms_now() : 0);

		if (next_event(p->ch, left, &ev, pd))
			return -ETIMEDOUT;
		if (ev.event == RDMA_CM_EVENT_DISCONNECTED)
			p->disconnected = true;
		if (ev.event == want)
			return 0;
	}
}

static void teardown(struct fpeer *p, bool disconnect)
{
	if (p->id && p->established && disconnect && !p->disconnected) {
		rdma_disconnect(p->id);
		fpeer_wait_event(p, RDMA_CM_EVENT_DISCONNECTED, 2000);
	}
	if (p->qp)
		rdma_destroy_qp(p->id);
	if (p->credit_mr)
		ibv_dereg_mr(p->credit_mr);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
	free((void *)p->credit_word);
	free(p->mem);
	memset(p, 0, sizeof(*p));
}

void fpeer_destroy(struct fpeer *p)
{
	teardown(p, true);
}

void fpeer_vanish(struct fpeer *p)
{
	teardown(p, false);
}

int fpeer_abandon(const char *addr, uint16_t port, enum fpeer_abandon how, int timeout_ms)
{
	struct fpeer p = { 0 };
	struct fpeer_opts o = { .priv = FPEER_POLLCORE, .slot_size = 128, .timeout_ms = timeout_ms };
	struct rdma_conn_param param = { .retry_count = 7, .rnr_retry_count = 7 };
	struct wire_cm_priv priv;
	int ret;

	if (how == FPEER_AFTER_ESTABLISHED) {
		ret = fpeer_connect(&p, addr, port, &o);
		fpeer_vanish(&p);
		return ret;
	}
	ret = resolve(&p, addr, port, timeout_ms);
	if (!ret && how == FPEER_AFTER_CONNECT) {
		ret = setup_qp(&p, 128, NRECV, true, 0);
		if (!ret) {
			priv = (struct wire_cm_priv){ .magic = PC_CM_MAGIC, .credits = 8,
						      .credit_addr = (uintptr_t)p.credit_word,
						      .credit_rkey = p.credit_mr->rkey,
						      .max_msg = 64, .window = 8 };
			param.private_data = &priv;
			param.private_data_len = sizeof(priv);
			ret = rdma_connect(p.id, &param) ? -errno : 0;
		}
	}
	fpeer_vanish(&p);
	return ret;
}
