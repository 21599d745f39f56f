// SPDX-License-Identifier: MIT
/*
 * rdma suite: connections whose wire protocol the application owns (raw
 * peers, pc_engine_params.on_request), against a peer written on librdmacm
 * and libibverbs directly (fault_peer.c), the way an NVMe-oF host or
 * rdmacm-utils talk:
 *  - on_request sees the peer's private data byte for byte, and its answer
 *    (depth, receive size, accept data, user pointer) is what the peer and
 *    pc_conn_info() see; a reject carries the application's private data;
 *  - every one of recv_depth receives is posted before the accept: a peer
 *    that sends recv_depth messages the moment it is connected, and again
 *    the moment it has its answers, meets no RNR NAK (the device's counter);
 *  - answers out of range are refused, raw_bufs is shared by depth, and
 *    a message longer than recv_size closes only its own connection;
 *  - a handler's RDMA WRITE and the send after it go out in one doorbell,
 *    the data placed when the message arrives.
 *  - pollcore-echo, as shipped, keeps a raw client with 64 messages in
 *    flight free of RNR NAKs.
 *  - a raw peer that never posts a receive (an NVMe-oF host gone quiet,
 *    rnr_retry 7) is closed by the send-queue stall check, saying so,
 *    while another raw peer on the same worker is served throughout.
 * Run alone (is_parallel: false): the RNR counter is the device's.
 */
#include <pollcore/engine.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_env.h"
#include "fault_peer.h"
#include "pc_test.h"

#define DEPTH 64
#define RSIZE 512

enum srv_mode {
	MODE_ECHO = 0,	/* hold every message until `hold` are held; then check, release, answer */
	MODE_WRITE,	/* a message names a remote buffer: WRITE a pattern there, then say so */
	MODE_PUSH,	/* UP sends the peer one message; every message is echoed at once */
};

static struct srv {
	struct pc_engine *e;
	uint16_t port;
	enum srv_mode mode;
	/* on_request's answer, and what it saw */
	/* set before srv_start(), or (depth, size) atomics changed between connects */
	int verdict;
	atomic_uint depth, size;
	uint8_t reply[PC_ACCEPT_DATA_MAX];
	uint8_t reply_len;
	/* written by on_request before it counts the request (requests, release) */
	atomic_uint requests;
	uint8_t seen[64];
	uint8_t seen_len;
	uint32_t seen_msg_size;
	atomic_uint seen_max_depth;
	/* worker-only */
	struct pc_msg *held[DEPTH];
	unsigned int nheld, hold;
	void *mr;
	uint8_t *src;
	uint32_t lkey;
	struct pc_op op;
	/* results */
	atomic_uint ups, downs, checked, bad, writes_done, write_err;
	atomic_int last_down_err;
	char down_why[256];
	struct pc_conn_info up_info;
} srv;

static uint8_t pat(uint32_t msg, uint32_t i)
{
	return (uint8_t)(msg * 7 + i * 13 + 1);
}

static int on_request(struct pc_conn_request *req, void *arg)
{
	(void)arg;
	srv.seen_len = req->private_len < 64 ? req->private_len : 64;
	memcpy(srv.seen, req->private_data, srv.seen_len);
	atomic_store(&srv.seen_max_depth, req->max_recv_depth);
	srv.seen_msg_size = req->msg_size;
	req->recv_depth = atomic_load(&srv.depth) ? atomic_load(&srv.depth) : req->recv_depth;
	req->recv_size = atomic_load(&srv.size) ? atomic_load(&srv.size) : req->recv_size;
	req->reply = srv.reply;
	req->reply_len = srv.reply_len;
	req->user = &srv;
	atomic_fetch_add(&srv.requests, 1);
	return srv.verdict;
}

static void on_conn(struct pc_conn *c, enum pc_conn_event ev, void *arg)
{
	(void)arg;
	if (ev == PC_CONN_UP) {
		pc_conn_info(c, &srv.up_info);
		if (srv.mode == MODE_PUSH) {
			struct pc_msg *m = pc_msg_alloc(c);

			ck_assert_ptr_nonnull(m);
			memset(m->data, 0x3c, 64);
			m->len = 64;
			ck_assert_int_eq(pc_send(m), 0);
		}
		atomic_fetch_add(&srv.ups, 1);
		return;
	}
	/* the first DOWN's reason: read by the test once it sees downs (later ones would race it) */
	if (atomic_load(&srv.downs) == 0)
		snprintf(srv.down_why, sizeof(srv.down_why), "%s", pc_last_error());
	atomic_fetch_add(&srv.downs, 1);
}

static void op_done(struct pc_op *op, int status)
{
	(void)op;
	if (status)
		atomic_fetch_add(&srv.write_err, 1);
	atomic_fetch_add(&srv.writes_done, 1);
}

/* Message k of a round: RSIZE bytes of pat(k, i), its number in the first byte. */
static void echo_msg(struct pc_msg *m)
{
	uint32_t i, k;

	srv.held[srv.nheld++] = m;
	if (srv.nheld < srv.hold)
		return;
	/* all of them posted at once, and all held: now check and answer each */
	for (k = 0; k < srv.nheld; k++) {
		struct pc_msg *r = srv.held[k], *a = pc_msg_alloc(r->conn);
		const uint8_t *d = r->data;
		uint32_t n = d[0];
		bool ok = r->len == RSIZE;

		for (i = 1; ok && i < r->len; i++)
			ok = d[i] == pat(n, i);
		atomic_fetch_add(ok ? &srv.checked : &srv.bad, 1);
		if (!a) {
			atomic_fetch_add(&srv.bad, 1);
			pc_msg_release(r);
			continue;
		}
		memcpy(a->data, r->data, r->len);
		a->len = r->len;
		/* given back first: reposted before the answer leaves */
		pc_msg_release(r);
		if (pc_send(a))
			atomic_fetch_add(&srv.bad, 1);
	}
	srv.nheld = 0;
}

struct write_req {
	uint64_t addr;
	uint32_t rkey, len;
};

static void write_msg(struct pc_msg *m)
{
	struct pc_conn *c = m->conn;
	struct write_req wr;
	struct pc_msg *a;

	memcpy(&wr, m->data, sizeof(wr));
	if (!srv.mr)
		srv.mr = pc_mem_reg(c, srv.src, 4096, IBV_ACCESS_LOCAL_WRITE, &srv.lkey,
				    &(uint32_t){ 0 });
	srv.op = (struct pc_op){ .code = PC_OP_WRITE, .local = srv.src, .lkey = srv.lkey,
				 .len = wr.len, .remote_addr = wr.addr, .rkey = wr.rkey,
				 .done = op_done };
	a = pc_msg_alloc(c);
	pc_msg_release(m);
	if (!srv.mr || !a || pc_rdma(c, &srv.op)) {
		atomic_fetch_add(&srv.bad, 1);
		return;
	}
	memcpy(a->data, "done", 4);
	a->len = 4;
	if (pc_send(a))
		atomic_fetch_add(&srv.bad, 1);
}

static void on_msg(struct pc_msg *m, void *arg)
{
	(void)arg;
	if (srv.mode == MODE_ECHO)
		echo_msg(m);
	else if (srv.mode == MODE_PUSH)
		ck_assert_int_eq(pc_send(m), 0);
	else
		write_msg(m);
}

static uint32_t srv_keepalive_ms;	/* the next srv_start()'s keepalive_ms; 0: default */

static void srv_start(uint32_t raw_bufs, bool hook)
{
	const char *devs[] = { pc_test_device(), NULL };
	struct pc_engine_params p = {
		.size = sizeof(p),
		.devices = devs, .no_numa = true, .msg_size = 4096, .rx_bufs = 256 + raw_bufs,
		.raw_bufs = raw_bufs, .on_conn = on_conn, .on_msg = on_msg,
		.on_request = hook ? on_request : NULL, .keepalive_ms = srv_keepalive_ms,
	};

	srv.e = pc_engine_create(&p);
	ck_assert_msg(srv.e, "pc_engine_create: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv.e, pc_test_addr(), 0), 0);
	srv.port = pc_listen_port(srv.e);
}

static void srv_stop(void)
{
	/* before the engine lets go of the device: its PD cannot go while an MR holds it */
	pc_mem_dereg(srv.mr);
	pc_engine_destroy(srv.e);
	free(srv.src);
	memset(&srv, 0, sizeof(srv));
}

static bool wait_for(atomic_uint *v, unsigned int want, int ms)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)ms;

	while (atomic_load(v) < want && pc_test_now_ms() < end)
		usleep(1000);
	return atomic_load(v) >= want;
}

static struct fpeer_opts raw_opts(const void *blob, uint8_t len)
{
	return (struct fpeer_opts){ .priv = blob ? FPEER_BLOB : FPEER_RAW, .blob = blob,
				    .blob_len = len, .slot_size = RSIZE, .nrecv = 2 * DEPTH };
}

/* The client's view of the echoes: every byte as sent. */
static atomic_uint echo_ok, echo_bad;

static void cli_recv(struct fpeer *p, const uint8_t *d, uint32_t len)
{
	uint32_t i;
	bool ok = len == RSIZE;

	(void)p;
	for (i = 1; ok && i < len; i++)
		ok = d[i] == pat(d[0], i);
	atomic_fetch_add(ok ? &echo_ok : &echo_bad, 1);
}

/* Posts DEPTH messages at once, numbered from @first. */
static void send_round(struct fpeer *p, uint32_t first)
{
	uint8_t buf[RSIZE];
	uint32_t k, i;

	for (k = 0; k < DEPTH; k++) {
		buf[0] = (uint8_t)(first + k);
		for (i = 1; i < RSIZE; i++)
			buf[i] = pat(first + k, i);
		ck_assert_int_eq(fpeer_send(p, buf, RSIZE), 0);
	}
}

static void poll_until(struct fpeer *p, uint32_t recvs, int ms)
{
	uint64_t end = pc_test_now_ms() + (uint64_t)ms;

	while (p->recvs < recvs && pc_test_now_ms() < end)
		fpeer_poll(p, 10);
	ck_assert_msg(p->recvs >= recvs, "%u of %u answers within %d ms (server held %u)",
		      p->recvs, recvs, ms, srv.nheld);
}

START_TEST(test_answer_seen)
{
	static const char hello[] = "app-proto v1: queue 7, size 64";
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(hello, sizeof(hello));
	int ret;

	srv.depth = 48;
	srv.size = 200;
	srv.reply_len = 24;
	memset(srv.reply, 0xa5, srv.reply_len);
	srv.reply[0] = 0x01;
	srv_start(256, true);
	ret = fpeer_connect(&p, pc_test_addr(), srv.port, &o);
	ck_assert_msg(ret == 0, "connect: %s (%d)", p.why, ret);
	ck_assert(wait_for(&srv.ups, 1, 10000));
	ck_assert(wait_for(&srv.requests, 1, 10000));
	/* what the peer sent, as it sent it (rdma_cm pads it to the transport's size) */
	ck_assert_uint_ge(srv.seen_len, sizeof(hello));
	ck_assert_mem_eq(srv.seen, hello, sizeof(hello));
	ck_assert_uint_eq(srv.seen_max_depth, 256);
	ck_assert_uint_eq(srv.seen_msg_size, 4096);
	/* what the application answered, as the peer and pc_conn_info() see it */
	ck_assert_uint_ge(p.cm_data_len, 24);
	ck_assert_mem_eq(p.cm_data, srv.reply, 24);
	ck_assert(srv.up_info.raw);
	ck_assert_uint_eq(srv.up_info.recv_depth, 48);
	ck_assert_uint_eq(srv.up_info.recv_size, 200);
	ck_assert_uint_eq(srv.up_info.peer_max_msg, 0);
	/* and the request's private data, for the worker's own use once UP */
	ck_assert_uint_ge(srv.up_info.peer_data_len, sizeof(hello));
	ck_assert_mem_eq(srv.up_info.peer_data, hello, sizeof(hello));
	fpeer_destroy(&p);
	ck_assert(wait_for(&srv.downs, 1, 10000));
	srv_stop();
}
END_TEST

START_TEST(test_depth_no_rnr)
{
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	long long rnr0 = fhw_counter(pc_test_device(), "send_rnr_err");
	int ret;

	ck_assert_int_ge(rnr0, 0);
	srv.depth = DEPTH;
	srv.hold = DEPTH;
	srv_start(256, true);
	p.on_recv = cli_recv;
	ret = fpeer_connect(&p, pc_test_addr(), srv.port, &o);
	ck_assert_msg(ret == 0, "connect: %s (%d)", p.why, ret);
	/* at once: the receives were posted before the accept */
	send_round(&p, 0);
	poll_until(&p, DEPTH, 30000);
	/* again the moment the answers are in: each receive was posted before its answer */
	send_round(&p, DEPTH);
	poll_until(&p, 2 * DEPTH, 30000);
	ck_assert_int_eq(fpeer_wait_sends(&p, 10000), 0);
	ck_assert_uint_eq(p.sends_ok, 2 * DEPTH);
	ck_assert_uint_eq(p.sends_failed, 0);
	ck_assert_uint_eq(atomic_load(&srv.checked), 2 * DEPTH);
	ck_assert_uint_eq(atomic_load(&srv.bad), 0);
	ck_assert_uint_eq(atomic_load(&echo_ok), 2 * DEPTH);
	ck_assert_uint_eq(atomic_load(&echo_bad), 0);
	printf("depth_no_rnr: %u messages of %u bytes each way, send_rnr_err +%lld\n",
	       2 * DEPTH, RSIZE, fhw_counter(pc_test_device(), "send_rnr_err") - rnr0);
	ck_assert_int_eq(fhw_counter(pc_test_device(), "send_rnr_err") - rnr0, 0);
	fpeer_destroy(&p);
	srv_stop();
}
END_TEST

START_TEST(test_reject_data)
{
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	int ret;

	srv.verdict = -EPERM;
	srv.reply_len = 4;
	memcpy(srv.reply, "\x00\x00\x06\x01", 4);
	srv_start(256, true);
	ret = fpeer_connect(&p, pc_test_addr(), srv.port, &o);
	ck_assert_int_eq(ret, -ECONNREFUSED);
	ck_assert_uint_ge(p.cm_data_len, 4);
	ck_assert_mem_eq(p.cm_data, "\x00\x00\x06\x01", 4);
	ck_assert_uint_eq(atomic_load(&srv.ups), 0);
	fpeer_destroy(&p);
	srv_stop();
}
END_TEST

/* Depths share raw_bufs; an answer out of range is refused; nothing leaks. */
START_TEST(test_admission)
{
	struct fpeer p[4] = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	int ret, i;

	srv.depth = 64;
	srv_start(100, true);
	ck_assert_int_eq(fpeer_connect(&p[0], pc_test_addr(), srv.port, &o), 0);
	ck_assert_uint_eq(srv.seen_max_depth, 100);
	/* 36 left: asking 37 is refused, by the engine, without private data */
	srv.depth = 37;
	ret = fpeer_connect(&p[1], pc_test_addr(), srv.port, &o);
	ck_assert_int_eq(ret, -ECONNREFUSED);
	ck_assert_uint_eq(srv.seen_max_depth, 36);
	srv.depth = 36;
	ck_assert_int_eq(fpeer_connect(&p[2], pc_test_addr(), srv.port, &o), 0);
	/* none left: refused before on_request is asked */
	ck_assert_uint_eq(atomic_load(&srv.requests), 3);
	ret = fpeer_connect(&p[3], pc_test_addr(), srv.port, &o);
	ck_assert_int_eq(ret, -ECONNREFUSED);
	ck_assert_uint_eq(atomic_load(&srv.requests), 3);
	ck_assert(wait_for(&srv.ups, 2, 10000));
	/* the first one's 64 come back when it is gone */
	fpeer_destroy(&p[0]);
	ck_assert(wait_for(&srv.downs, 1, 10000));
	fpeer_destroy(&p[1]);
	fpeer_destroy(&p[3]);
	memset(&p[1], 0, sizeof(p[1]));
	srv.depth = 64;
	/* retired after DOWN: try until its buffers are free again */
	for (i = 0, ret = -1; ret && i < 500; i++) {
		fpeer_destroy(&p[1]);
		memset(&p[1], 0, sizeof(p[1]));
		ret = fpeer_connect(&p[1], pc_test_addr(), srv.port, &o);
		if (ret)
			usleep(10000);
	}
	ck_assert_int_eq(ret, 0);
	ck_assert_uint_eq(srv.seen_max_depth, 64);
	fpeer_destroy(&p[1]);
	fpeer_destroy(&p[2]);
	srv_stop();
}
END_TEST

/* A message longer than recv_size closes its own connection only. */
START_TEST(test_too_long)
{
	struct fpeer bad = { 0 }, good = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	uint8_t buf[RSIZE];
	uint32_t i;

	srv.depth = 8;
	srv.size = RSIZE - 1;
	srv.hold = 1;
	srv_start(256, true);
	ck_assert_int_eq(fpeer_connect(&bad, pc_test_addr(), srv.port, &o), 0);
	srv.size = RSIZE;
	good.on_recv = cli_recv;
	ck_assert_int_eq(fpeer_connect(&good, pc_test_addr(), srv.port, &o), 0);
	ck_assert(wait_for(&srv.ups, 2, 10000));
	buf[0] = 3;
	for (i = 1; i < RSIZE; i++)
		buf[i] = pat(3, i);
	ck_assert_int_eq(fpeer_send(&bad, buf, RSIZE), 0);
	ck_assert(wait_for(&srv.downs, 1, 10000));
	ck_assert_msg(strstr(srv.down_why, "too long") && strstr(srv.down_why, "511"),
		      "DOWN said: %s", srv.down_why);
	/* the other connection of the same worker goes on */
	ck_assert_int_eq(fpeer_send(&good, buf, RSIZE), 0);
	poll_until(&good, 1, 10000);
	ck_assert_uint_eq(atomic_load(&echo_ok), 1);
	ck_assert_uint_eq(atomic_load(&srv.downs), 1);
	fpeer_destroy(&bad);
	fpeer_destroy(&good);
	srv_stop();
}
END_TEST

static atomic_uint done_seen;
static uint8_t *write_dst;
static bool write_ok;

static void cli_done(struct fpeer *p, const uint8_t *d, uint32_t len)
{
	uint32_t i;

	(void)p;
	write_ok = len == 4 && !memcmp(d, "done", 4);
	/* the WRITE went before the message: its bytes are there now */
	for (i = 0; write_ok && i < 4096; i++)
		write_ok = write_dst[i] == pat(99, i);
	atomic_fetch_add(&done_seen, 1);
}

START_TEST(test_write_then_send)
{
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	struct pc_worker_stats s0, s1;
	struct write_req wr;
	uint32_t i;

	o.slot_size = 4096;
	o.nrecv = 4;
	o.remote_write = true;
	srv.mode = MODE_WRITE;
	srv.src = aligned_alloc(4096, 4096);
	for (i = 0; i < 4096; i++)
		srv.src[i] = pat(99, i);
	srv_start(256, true);
	p.on_recv = cli_done;
	ck_assert_int_eq(fpeer_connect(&p, pc_test_addr(), srv.port, &o), 0);
	ck_assert(wait_for(&srv.ups, 1, 10000));
	/* the WRITE lands in receive slot 3, which no receive uses before it */
	write_dst = p.mem + 3 * 4096;
	wr = (struct write_req){ (uintptr_t)write_dst, p.mr->rkey, 4096 };
	ck_assert_int_eq(pc_engine_stats(srv.e, 0, &s0), 0);
	ck_assert_int_eq(fpeer_send(&p, &wr, sizeof(wr)), 0);
	while (!atomic_load(&done_seen))
		fpeer_poll(&p, 10);
	ck_assert(write_ok);
	ck_assert(wait_for(&srv.writes_done, 1, 10000));
	ck_assert_uint_eq(atomic_load(&srv.write_err), 0);
	ck_assert_uint_eq(atomic_load(&srv.bad), 0);
	ck_assert_int_eq(pc_engine_stats(srv.e, 0, &s1), 0);
	/* the WRITE and the message, one chain, one doorbell */
	ck_assert_uint_eq(s1.wrs_posted - s0.wrs_posted, 2);
	ck_assert_uint_eq(s1.doorbells - s0.doorbells, 1);
	fpeer_destroy(&p);
	srv_stop();
}
END_TEST

/* Without on_request, a raw peer that fits gets the preset answer. */
START_TEST(test_preset)
{
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);

	srv_start(100, false);
	ck_assert_int_eq(fpeer_connect(&p, pc_test_addr(), srv.port, &o), 0);
	ck_assert(wait_for(&srv.ups, 1, 10000));
	ck_assert_uint_eq(srv.up_info.recv_depth, PC_RAW_DEPTH_DEFAULT);
	ck_assert_uint_eq(srv.up_info.recv_size, 4096);
	fpeer_destroy(&p);
	srv_stop();
}
END_TEST

START_TEST(test_hook_needs_bufs)
{
	struct pc_engine_params p = { .size = sizeof(p), .no_numa = true, .on_msg = on_msg,
				      .on_request = on_request };

	errno = 0;
	ck_assert_ptr_null(pc_engine_create(&p));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(pc_last_error(), "raw_bufs"));
}
END_TEST

/*
 * pollcore-echo, as shipped, against a raw client that keeps 64 messages in
 * flight (a new one for every echo): every echo byte for byte, no RNR NAK.
 * 3,000 echoes (1,000 in the sanitized builds: still the raw depth cycled
 * fifteen times over).
 */
static atomic_uint tool_ok, tool_bad;

static void tool_recv(struct fpeer *p, const uint8_t *d, uint32_t len)
{
	uint32_t i, n;
	bool ok = len == RSIZE;

	(void)p;
	memcpy(&n, d, sizeof(n));
	for (i = sizeof(n); ok && i < len; i++)
		ok = d[i] == pat(n, i);
	atomic_fetch_add(ok ? &tool_ok : &tool_bad, 1);
}

static int tool_send(struct fpeer *p, uint32_t n)
{
	uint8_t buf[RSIZE];
	uint32_t i;

	memcpy(buf, &n, sizeof(n));
	for (i = sizeof(n); i < RSIZE; i++)
		buf[i] = pat(n, i);
	return fpeer_send(p, buf, RSIZE);
}

START_TEST(test_echo_tool_window)
{
	const uint32_t total = PC_TEST_SAN(3000, 1000), window = 64;
	char bin[512], port[16];
	struct fpeer p = { 0 };
	struct fpeer_opts o = raw_opts(NULL, 0);
	long long rnr0 = fhw_counter(pc_test_device(), "send_rnr_err");
	uint64_t end;
	uint32_t sent = 0;
	pid_t pid;
	int ret = -1, st;

	snprintf(bin, sizeof(bin), "%s/tools/pollcore-echo", pc_test_env("PC_BUILD_ROOT", "."));
	snprintf(port, sizeof(port), "%u", 20000u + (unsigned int)getpid() % 20000u);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(bin, bin, "server", "--addr", pc_test_addr(), "--port", port, "--no-numa",
		      "--raw-depth", "64", (char *)NULL);
		_exit(127);
	}
	/* listening once a connect is answered */
	for (end = pc_test_now_ms() + 60000; ret && pc_test_now_ms() < end;) {
		fpeer_destroy(&p);
		memset(&p, 0, sizeof(p));
		ret = fpeer_connect(&p, pc_test_addr(), (uint16_t)atoi(port), &o);
		if (ret)
			usleep(100000);
	}
	ck_assert_msg(ret == 0, "pollcore-echo: connect: %s (%d)", p.why, ret);
	p.on_recv = tool_recv;
	end = pc_test_now_ms() + 120000;
	while (p.recvs < total && pc_test_now_ms() < end) {
		while (sent < total && sent - p.recvs < window)
			ck_assert_int_eq(tool_send(&p, sent++), 0);
		fpeer_poll(&p, 10);
	}
	printf("echo_tool_window: %u of %u echoes, %u bad, %u sends failed, send_rnr_err +%lld\n",
	       p.recvs, total, atomic_load(&tool_bad), p.sends_failed,
	       fhw_counter(pc_test_device(), "send_rnr_err") - rnr0);
	fpeer_destroy(&p);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pollcore-echo server status 0x%x", st);
	ck_assert_uint_eq(atomic_load(&tool_ok), total);
	ck_assert_uint_eq(atomic_load(&tool_bad), 0);
	ck_assert_uint_eq(p.sends_failed, 0);
	ck_assert_int_eq(fhw_counter(pc_test_device(), "send_rnr_err") - rnr0, 0);
}
END_TEST

/*
 * A raw peer that posts no receive: the server's sends to it RNR-retry
 * without end (the peer asked for rnr_retry 7). The send-queue stall check
 * closes it after 8 keepalive periods, saying why; a good raw peer on the
 * same worker has its echoes all along. The keepalive is short (250 ms,
 * 500 sanitized, as test_hostile's rnr_forever): the case waits for the
 * close, and the good peer's echoes go on until both are seen.
 */
START_TEST(test_raw_stalled_closed)
{
	enum { KA_MS = PC_TEST_SAN(250, 500), ECHOES = 200 };
	struct fpeer_opts stuck_o = raw_opts(NULL, 0), good_o = raw_opts(NULL, 0);
	uint8_t buf[RSIZE];
	struct fpeer good, stuck;
	uint64_t t0, end;
	uint32_t sent = 0;
	int ret;

	srv_keepalive_ms = KA_MS;
	srv.mode = MODE_PUSH;
	srv_start(256, false);
	srv_keepalive_ms = 0;
	stuck_o.no_recv = true;
	memset(&stuck, 0, sizeof(stuck));
	memset(&good, 0, sizeof(good));
	ret = fpeer_connect(&stuck, pc_test_addr(), srv.port, &stuck_o);
	ck_assert_msg(ret == 0, "stuck peer: %s (%d)", stuck.why, ret);
	ret = fpeer_connect(&good, pc_test_addr(), srv.port, &good_o);
	ck_assert_msg(ret == 0, "good peer: %s (%d)", good.why, ret);
	ck_assert(wait_for(&srv.ups, 2, 10000));
	t0 = pc_test_now_ms();
	/* the good peer: its push, then echoes, while the stuck one's push retries */
	memset(buf, 0x11, sizeof(buf));
	end = t0 + 8 * KA_MS + 20000;
	while ((good.recvs < 1 + ECHOES || !atomic_load(&srv.downs)) && pc_test_now_ms() < end) {
		if (sent < ECHOES && sent + 1 - (good.recvs ? good.recvs - 1 : 0) < 16) {
			ck_assert_int_eq(fpeer_send(&good, buf, RSIZE), 0);
			sent++;
		}
		fpeer_poll(&good, 5);
		fpeer_poll(&stuck, 0);
	}
	ck_assert_uint_eq(good.recvs, 1 + ECHOES);
	ck_assert_msg(atomic_load(&srv.downs) == 1, "the stuck raw connection was not closed "
		      "within %d ms (%u DOWN)", 8 * KA_MS + 20000, atomic_load(&srv.downs));
	ck_assert_msg(strstr(srv.down_why, "no send completed"), "DOWN said: %s", srv.down_why);
	printf("rawconn: the stuck raw peer closed after %llu ms: %s\n",
	       (unsigned long long)(pc_test_now_ms() - t0), srv.down_why);
	ck_assert_uint_ge(pc_test_now_ms() - t0, 4 * KA_MS);
	fpeer_destroy(&stuck);
	fpeer_destroy(&good);
	srv_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rawconn");
	TCase *tc = tcase_create("rawconn");

	pc_test_require_rdma();
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_answer_seen);
	tcase_add_test(tc, test_depth_no_rnr);
	tcase_add_test(tc, test_reject_data);
	tcase_add_test(tc, test_admission);
	tcase_add_test(tc, test_too_long);
	tcase_add_test(tc, test_write_then_send);
	tcase_add_test(tc, test_preset);
	tcase_add_test(tc, test_hook_needs_bufs);
	tcase_add_test(tc, test_echo_tool_window);
	tcase_add_test(tc, test_raw_stalled_closed);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
