// SPDX-License-Identifier: MIT
/*
 * rdma suite: hostile peers against a pollcore server (issue 12's fault
 * campaign). Each case breaks one rule on its own connection, made with
 * librdmacm and libibverbs directly (fault_peer.c), while a well-behaved
 * pollcore client keeps a connection flowing (fault_env.c). Every case
 * asserts that only the offending connection closes, with a reason in its
 * DOWN (pc_last_error() on the worker when DOWN is delivered) and in the
 * log, that the server's application saw exactly what it should, and that
 * the good connection's messages all came back intact and in order.
 *
 * The server is small on purpose (64 receive buffers on its SRQ, a window of
 * 8 credits per peer), so that leaks of credits or buffers show within a few
 * dozen connections. It grants nothing up front: a pollcore peer may send
 * once the server's first grant reached its credit word (core/wire.h).
 * Failed expectations are collected and reported together at the end of
 * each case (EXPECT in fault_env.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_env.h"
#include "fault_peer.h"
#include "pc_test.h"

/*
 * Misbehaving peers, one after another, in the tests that loop over them; a
 * sanitized build (the suite runs again under ASan and TSan) covers the same
 * paths with fewer.
 */
#define PEERS (PC_TEST_SANITIZED ? 8 : 20)

#define SRV_RX_BUFS 64
#define SRV_RAW_BUFS 32		/* raw peers' own receive queues, when a case opts in */
#define SRV_WINDOW 8
#define SRV_MSG_SIZE 4096

static struct fsrv *srv;
static struct fcli *cli;
static unsigned int base_ups, base_downs;
static uint32_t srv_keepalive_ms;	/* the next server's keepalive_ms (0: default) */

/*
 * Starts the server (with @raw_bufs set aside for raw peers: 0 refuses
 * them) and one good connection that flows until hostile_end().
 */
static void hostile_begin_raw(uint32_t raw_bufs)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp),
		.rx_bufs = SRV_RX_BUFS + raw_bufs, .raw_bufs = raw_bufs, .window = SRV_WINDOW,
		.msg_size = SRV_MSG_SIZE, .keepalive_ms = srv_keepalive_ms,
	};
	int i;

	flog_start();
	srv = fsrv_start(&sp, pc_test_addr());
	cli = fcli_start(NULL);
	i = fcli_add(cli, pc_test_addr(), srv->port, 10000);
	ck_assert_msg(i == 0, "good connection: %s", pc_last_error());
	ck_assert_msg(fcli_wait_recv(cli, 0, 50, 30000), "good connection: no echoes");
	fsrv_counts(srv, &base_ups, &base_downs);
}

static void hostile_begin(void)
{
	hostile_begin_raw(0);
}

/*
 * Checks the good connection and that the server closed exactly @downs
 * connections besides it; stops everything and reports the expectations.
 */
static void hostile_end(unsigned int downs)
{
	unsigned int up, down, live;

	fcli_finish(cli, false);
	fsrv_counts(srv, &up, &down);
	live = fengine_conns(srv->e);
	EXPECT(down - base_downs == downs, "the server closed %u connections, expected %u",
	       down - base_downs, downs);
	EXPECT(live == atomic_load(&cli->n),
	       "the server has %u live connections, expected the %u good ones", live,
	       atomic_load(&cli->n));
	EXPECT(atomic_load(&srv->echo_errors) == 0, "server: %lu echoes failed",
	       atomic_load(&srv->echo_errors));
	pc_engine_print_stats(srv->e, stdout);
	pc_engine_destroy(cli->e);
	fsrv_stop(srv);
	fexpect_done();
}

/*
 * A pollcore-speaking hostile peer, up and granted its first credits, so
 * that it breaks only the rule its case is about; fails the test when it
 * cannot connect.
 */
static void peer_up(struct fpeer *p, uint32_t slot_size)
{
	struct fpeer_opts o = { .priv = FPEER_POLLCORE, .slot_size = slot_size };
	uint64_t end;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = fpeer_connect(p, pc_test_addr(), srv->port, &o);
	ck_assert_msg(ret == 0, "hostile peer: connect: %s (%d)", p->why, ret);
	ck_assert_msg(p->srv_pollcore, "the server sent no pollcore private data");
	/* misbehave once the server's application knows the connection (see msg_before_up) */
	ck_assert_msg(fsrv_wait_up(srv, p->srv_qpn, 10000), "no UP for server qp 0x%x",
		      p->srv_qpn);
	end = fnow_ms() + 10000;
	while (!p->credit_word[0] && fnow_ms() < end)
		usleep(1000);
	ck_assert_msg(p->credit_word[0], "server qp 0x%x granted no credit within 10 s",
		      p->srv_qpn);
}

/* True when @text contains any of the NULL-terminated @words (case-insensitive). */
static bool mentions(const char *text, const char *const *words)
{
	for (; *words; words++)
		if (strcasestr(text, *words))
			return true;
	return false;
}

static const char *join(const char *const *words)
{
	static char buf[256];
	size_t n = 0;

	buf[0] = 0;
	for (; *words; words++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s'%s'", n ? " or " : "", *words);
	return buf;
}

/*
 * The server must close server QP @qpn within @ms, with a reason naming
 * one of @why in its DOWN and in the log. @what names the offence.
 */
static bool expect_closed(struct fpeer *p, const char *what, const char *const *why, int ms,
			  unsigned int mark, struct frec *r)
{
	char qp[32], line[512];
	bool down = fsrv_wait_down(srv, p->srv_qpn, ms, r);
	bool logged;

	snprintf(qp, sizeof(qp), "qp 0x%x", p->srv_qpn);
	EXPECT(down, "%s: the server did not close %s within %d ms (its application got %u "
	       "messages from it)", what, qp, ms, r->msgs);
	if (!down)
		return false;
	printf("%s: %s DOWN, reason at DOWN: '%s'\n", what, qp, r->reason);
	EXPECT(strstr(r->reason, qp) && mentions(r->reason, why),
	       "%s: DOWN of %s gives no reason naming it and %s: pc_last_error() at DOWN was '%s'",
	       what, qp, join(why), r->reason);
	logged = false;
	for (; *why && !logged; why++)
		logged = flog_find_since(mark, line, sizeof(line), qp, *why, NULL);
	EXPECT(logged, "%s: nothing logged about %s with a reason", what, qp);
	/* the peer is told too */
	EXPECT(fpeer_wait_event(p, RDMA_CM_EVENT_DISCONNECTED, 5000) == 0 || p->disconnected,
	       "%s: the peer got no DISCONNECTED", what);
	return true;
}

/* One connection, one bad message, which must close it (and deliver nothing). */
static void one_bad_message(const char *what, uint16_t magic, uint8_t type, uint32_t claimed,
			    uint32_t payload, uint64_t req_id, const char *const *why)
{
	unsigned int mark = flog_mark();
	struct fpeer p;
	struct frec r;

	peer_up(&p, 8256);
	ck_assert_int_eq(fpeer_send_msg(&p, magic, type, claimed, payload, req_id), 0);
	fpeer_wait_sends(&p, 10000);
	if (expect_closed(&p, what, why, 10000, mark, &r))
		EXPECT(r.msgs == 0, "%s: the server's application got %u messages from it", what,
		       r.msgs);
	fpeer_destroy(&p);
}

static const char *const why_malformed[] = { "malformed", "magic", "length", "type", NULL };

START_TEST(test_bad_magic)
{
	hostile_begin();
	one_bad_message("bad magic", PC_WIRE_MAGIC ^ 0x01, WIRE_ONEWAY, 32, 32, 0, why_malformed);
	hostile_end(1);
}
END_TEST

START_TEST(test_len_mismatch)
{
	hostile_begin();
	/* the header claims more than arrived, then less */
	one_bad_message("header len 100, 32 sent", PC_WIRE_MAGIC, WIRE_ONEWAY, 100, 32, 0,
			why_malformed);
	one_bad_message("header len 4, 32 sent", PC_WIRE_MAGIC, WIRE_ONEWAY, 4, 32, 0,
			why_malformed);
	hostile_end(2);
}
END_TEST

START_TEST(test_unknown_type)
{
	hostile_begin();
	one_bad_message("unknown type", PC_WIRE_MAGIC, WIRE_TYPE_MAX + 1, 32, 32, 0, why_malformed);
	one_bad_message("type 255", PC_WIRE_MAGIC, 0xff, 0, 0, 0, why_malformed);
	hostile_end(2);
}
END_TEST

/* --- packs (core/wire.h: several one-way messages in one SEND) ------------------------ */

struct pack_blob {
	uint8_t b[512];
	uint32_t len;
};

/* Appends a frame of @type (WIRE_MORE or not) claiming @claimed bytes, with @payload of pattern. */
static void pack_add(struct pack_blob *pk, uint8_t type, uint32_t claimed, uint32_t payload,
		     uint8_t seed)
{
	struct wire_hdr h;
	uint32_t i;

	ck_assert_uint_le(pk->len + WIRE_HDR_LEN + payload, sizeof(pk->b));
	wire_hdr_fill(&h, type, claimed, 0, 0);
	memcpy(pk->b + pk->len, &h, sizeof(h));
	pk->len += WIRE_HDR_LEN;
	for (i = 0; i < payload; i++)
		pk->b[pk->len + i] = (uint8_t)(seed + i * 3);
	pk->len += payload;
}

/* One connection sends @pk, which must close it and deliver nothing of it. */
static void one_bad_pack(const char *what, const struct pack_blob *pk)
{
	unsigned int mark = flog_mark();
	struct fpeer p;
	struct frec r;

	peer_up(&p, 8256);
	ck_assert_int_eq(fpeer_send(&p, pk->b, pk->len), 0);
	fpeer_wait_sends(&p, 10000);
	if (expect_closed(&p, what, why_malformed, 10000, mark, &r))
		EXPECT(r.msgs == 0, "%s: the server's application got %u messages from it", what,
		       r.msgs);
	fpeer_destroy(&p);
}

/* The echoes a peer got back: each a whole message, its payload kept in order. */
struct echoes {
	uint8_t data[512];
	uint32_t len, n, bad;
};

static void echo_recv(struct fpeer *p, const uint8_t *data, uint32_t len)
{
	struct echoes *e = p->arg;
	struct wire_hdr h;

	if (wire_hdr_parse(data, len, &h) || h.type != WIRE_ONEWAY ||
	    e->len + h.len > sizeof(e->data)) {
		e->bad++;
		return;
	}
	memcpy(e->data + e->len, data + WIRE_HDR_LEN, h.len);
	e->len += h.len;
	e->n++;
}

/*
 * A pack from a peer that speaks the wire by hand (so the receive side is
 * tested apart from pollcore's own packing): its three messages (16, 0
 * and 5 bytes) reach the server's application one by one, in order, and
 * its echoes (each sent on from its place in the shared receive buffer)
 * come back whole; the buffer goes back once all three are done. Then
 * malformed packs, each closing its own connection and delivering nothing:
 * a WIRE_MORE frame of a length not a multiple of 8, a request inside a
 * pack, bytes after the last frame, WIRE_PACK_MAX + 1 frames.
 */
START_TEST(test_packs)
{
	static const uint32_t sizes[] = { 16, 0, 5 };
	struct pc_worker_stats st;
	struct pack_blob pk = { .len = 0 };
	struct echoes ech = { .len = 0 };
	struct fpeer p;
	struct frec r;
	uint64_t end;
	uint32_t i;

	hostile_begin();
	peer_up(&p, 8256);
	p.on_recv = echo_recv;
	p.arg = &ech;
	for (i = 0; i < PC_ARRAY_SIZE(sizes); i++)
		pack_add(&pk, (uint8_t)(WIRE_ONEWAY | (i + 1 < PC_ARRAY_SIZE(sizes) ? WIRE_MORE : 0)),
			 sizes[i], sizes[i], (uint8_t)(i * 50));
	ck_assert_int_eq(fpeer_send(&p, pk.b, pk.len), 0);
	end = fnow_ms() + 10000;
	while (ech.n + ech.bad < PC_ARRAY_SIZE(sizes) && fnow_ms() < end)
		fpeer_poll(&p, 100);
	EXPECT(ech.n == 3 && ech.bad == 0, "pack of 3: %u echoes back, %u malformed", ech.n,
	       ech.bad);
	EXPECT(ech.len == 21, "pack of 3: %u payload bytes echoed, 21 sent", ech.len);
	for (i = 0; i < ech.len && i < 21; i++) {
		uint8_t want = i < 16 ? (uint8_t)(i * 3) : (uint8_t)(100 + (i - 16) * 3);

		if (ech.data[i] != want) {
			EXPECT(false, "pack of 3: echoed byte %u is 0x%x, 0x%x sent", i, ech.data[i],
			       want);
			break;
		}
	}
	EXPECT(fsrv_rec(srv, p.srv_qpn, &r) && r.msgs == 3 && r.bytes == 21 && !r.down,
	       "pack of 3: the server's application got %u messages, %lu bytes (down %d)", r.msgs,
	       (unsigned long)r.bytes, r.down);
	/* its buffer back on the pool once the three echoes completed */
	end = fnow_ms() + 5000;
	do {
		ck_assert_int_eq(pc_engine_stats(srv->e, 0, &st), 0);
	} while (st.rx_held && fnow_ms() < end && usleep(1000) == 0);
	EXPECT(st.rx_held == 0, "pack of 3: %u receive buffers still held", st.rx_held);
	fpeer_destroy(&p);

	pk.len = 0;
	pack_add(&pk, WIRE_ONEWAY | WIRE_MORE, 12, 12, 1);
	pack_add(&pk, WIRE_ONEWAY, 8, 8, 2);
	one_bad_pack("pack: a first frame of 12 bytes", &pk);
	pk.len = 0;
	pack_add(&pk, WIRE_ONEWAY | WIRE_MORE, 8, 8, 1);
	pack_add(&pk, WIRE_REQUEST, 8, 8, 2);
	one_bad_pack("pack: a request in it", &pk);
	pk.len = 0;
	pack_add(&pk, WIRE_ONEWAY | WIRE_MORE, 8, 8, 1);
	pack_add(&pk, WIRE_ONEWAY, 8, 16, 2);
	one_bad_pack("pack: 8 bytes after its last frame", &pk);
	pk.len = 0;
	for (i = 0; i < WIRE_PACK_MAX; i++)
		pack_add(&pk, WIRE_ONEWAY | WIRE_MORE, 8, 8, (uint8_t)i);
	pack_add(&pk, WIRE_ONEWAY, 8, 8, 9);
	one_bad_pack("pack: WIRE_PACK_MAX + 1 frames", &pk);
	/* the four, and the first peer's own disconnect */
	hostile_end(5);
}
END_TEST

/* The server never called: a RESPONSE, whatever its req_id, answers nothing. */
START_TEST(test_unknown_req_id)
{
	static const char *const why[] = { "req_id", "response", NULL };
	unsigned int mark;
	struct fpeer p;
	struct frec r;

	hostile_begin();
	mark = flog_mark();
	peer_up(&p, 8256);
	ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_RESPONSE, 32, 32, 0xdead), 0);
	fpeer_wait_sends(&p, 10000);
	if (!expect_closed(&p, "RESPONSE with unknown req_id 0xdead", why, 5000, mark, &r)) {
		fsrv_rec(srv, p.srv_qpn, &r);
		EXPECT(r.responses == 0, "and the server's application was handed %u RESPONSE(s) "
		       "for requests it never made", r.responses);
	}
	fpeer_destroy(&p);
	hostile_end(1);
}
END_TEST

/*
 * Twenty peers each send one message beyond the credits they were granted
 * (the application holds their buffers, so grants stop growing). Each must
 * be closed, and the server must not lose grant room for good (defect 3:
 * drain_begin wrapped and leaked one credit per overrunning peer): once
 * they are gone, the credits the server counts outstanding are no more
 * than its live connections can hold (a window each), and a fresh
 * connection gets credits and flows.
 */
START_TEST(test_over_credits)
{
	static const char *const why[] = { "credit", NULL };
	unsigned int i, n = PEERS, closed = 0, fresh_echoes = 300, live;
	struct pc_worker_stats st;
	uint32_t recv0;
	int fresh;

	hostile_begin();
	atomic_store(&srv->hold, true);
	for (i = 0; i < n; i++) {
		unsigned int mark = flog_mark();
		struct fpeer p;
		struct frec r;
		uint32_t round, sent = 0, grant = 0;
		char what[80];

		peer_up(&p, 256);
		/*
		 * One message beyond what the server granted so far (up front, or
		 * later into our credit word); should it grant more meanwhile,
		 * once more beyond that.
		 */
		for (round = 0; round < 8; round++) {
			/* a grant that moves after this look only costs another round */
			usleep(50000);
			grant = PC_MAX(p.srv.credits, (uint32_t)p.credit_word[0]);
			while (sent <= grant) {
				ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_ONEWAY, 32, 32,
								0), 0);
				sent++;
			}
			fpeer_wait_sends(&p, 10000);
			if (fsrv_wait_down(srv, p.srv_qpn, 1000, NULL) ||
			    grant == PC_MAX(p.srv.credits, (uint32_t)p.credit_word[0]))
				break;
		}
		snprintf(what, sizeof(what), "peer %u: %u messages on %u credits", i, sent, grant);
		if (expect_closed(&p, what, why, 10000, mark, &r)) {
			closed++;
			EXPECT(r.msgs == sent - 1, "%s: its application got %u messages, expected the "
			       "%u credited ones", what, r.msgs, sent - 1);
		}
		fpeer_destroy(&p);
	}
	atomic_store(&srv->hold, false);
	fsrv_release_held(srv);
	printf("over-credit peers closed: %u of %u\n", closed, n);
	/* the first good connection still flows... */
	recv0 = atomic_load(&cli->g[0].recv);
	EXPECT(fcli_wait_recv(cli, 0, recv0 + 200, 30000),
	       "after %u over-credit peers the good connection stalled: %u echoes in 30 s", n,
	       atomic_load(&cli->g[0].recv) - recv0);
	/* ...and a fresh one gets credits */
	fresh = fcli_add(cli, pc_test_addr(), srv->port, 10000);
	EXPECT(fresh == 1, "a fresh connection after %u over-credit peers failed: %s", n,
	       pc_last_error());
	if (fresh == 1)
		EXPECT(fcli_wait_recv(cli, 1, fresh_echoes, 60000),
		       "a fresh connection after %u over-credit peers got %u of %u echoes in 60 s "
		       "(grant room leaked?)", n, atomic_load(&cli->g[1].recv), fresh_echoes);
	live = fengine_conns(srv->e);
	pc_engine_stats(srv->e, 0, &st);
	printf("after %u over-credit peers: %u live connections, credits_out %u (at most %u), "
	       "srq_outstanding %u\n", n, live, st.credits_out, live * SRV_WINDOW,
	       st.srq_outstanding);
	EXPECT(st.credits_out <= live * SRV_WINDOW, "after %u over-credit peers the server counts "
	       "%u credits outstanding, more than its %u live connections can hold (%u): grant "
	       "room leaked", n, st.credits_out, live, live * SRV_WINDOW);
	hostile_end(n);
}
END_TEST

/*
 * Private data that claims pollcore but carries nonsense (zero window, zero
 * rkey, a short blob...) is refused, and says why.
 */
START_TEST(test_priv_nonsense)
{
	static const struct {
		const char *what;
		uint32_t credits, window, rkey, max_msg;
		uint8_t len;
	} bad[] = {
		{ "zero window", 0, 0, 0x1234, 4096, 28 },
		{ "window beyond WIRE_MAX_CREDITS", 0, WIRE_MAX_CREDITS + 1, 0x1234, 4096, 28 },
		{ "credits beyond the window", 65, 64, 0x1234, 4096, 28 },
		{ "zero rkey", 0, 64, 0, 4096, 28 },
		{ "zero max_msg", 0, 64, 0x1234, 0, 28 },
		/* rdma_cm pads private data with zeros: a short blob reads as zeroed fields */
		{ "short blob (8 bytes: magic, credits)", 0, 64, 0x1234, 4096, 8 },
		{ "short blob (24 bytes: no window)", 0, 64, 0x1234, 4096, 24 },
	};
	unsigned int i, up0, up, down;

	hostile_begin();
	fsrv_counts(srv, &up0, &down);
	for (i = 0; i < PC_ARRAY_SIZE(bad); i++) {
		struct wire_cm_priv blob = {
			.magic = PC_CM_MAGIC, .credits = bad[i].credits, .credit_addr = 0x10000,
			.credit_rkey = bad[i].rkey, .max_msg = bad[i].max_msg, .window = bad[i].window,
		};
		struct fpeer_opts o = { .priv = FPEER_BLOB, .blob = &blob, .blob_len = bad[i].len,
					.slot_size = 256 };
		unsigned int mark = flog_mark();
		struct fpeer p = { 0 };
		char line[512];
		int ret;

		ret = fpeer_connect(&p, pc_test_addr(), srv->port, &o);
		EXPECT(ret == -ECONNREFUSED, "%s: connect returned %d (%s), expected a rejection",
		       bad[i].what, ret, p.why);
		line[0] = 0;
		EXPECT(flog_find_since(mark, line, sizeof(line), "refusing", "invalid", NULL),
		       "%s: the server logged no reason for refusing it", bad[i].what);
		if (ret == -ECONNREFUSED)
			printf("%s: refused; server says: %s\n", bad[i].what, line);
		fpeer_destroy(&p);
	}
	fsrv_counts(srv, &up, &down);
	EXPECT(up == up0, "%u refused peers were delivered UP", up - up0);
	hostile_end(0);
}
END_TEST

/*
 * Peers that send as soon as they are established, before the server can
 * have seen the connection come up: the server's application must never
 * see a message before the connection's UP (or it holds buffers of a
 * connection it was never told about, and gets no DOWN for it). Twenty
 * tries, to meet the race, in two kinds:
 *  - even: the peer sends at once, without waiting for a grant. The server
 *    grants only once UP, so the message is beyond its credits unless the
 *    grant won the race: either the connection closes (nothing delivered;
 *    no UP, or UP and DOWN), or the message is delivered after UP;
 *  - odd: the peer waits for the server's first grant, then sends: the
 *    message is delivered, after UP.
 * Each UP gets its DOWN.
 */
START_TEST(test_msg_before_up)
{
	unsigned int i, n = PEERS, early = 0, overrun = 0, delivered = 0, up, down;

	hostile_begin();
	for (i = 0; i < n; i++) {
		struct fpeer_opts o = { .priv = FPEER_POLLCORE, .slot_size = 256 };
		bool obedient = i & 1;
		struct fpeer p = { 0 };
		struct frec r = { 0 };
		uint64_t end;
		uint32_t qpn;

		ck_assert_int_eq(fpeer_connect(&p, pc_test_addr(), srv->port, &o), 0);
		qpn = p.srv_qpn;
		if (obedient) {
			end = fnow_ms() + 10000;
			while (!p.credit_word[0] && fnow_ms() < end)
				usleep(1000);
			ck_assert_msg(p.credit_word[0], "peer %u: no grant within 10 s", i);
		}
		ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_ONEWAY, 32, 32, 0), 0);
		fpeer_wait_sends(&p, 10000);
		/*
		 * The server closes an overrunning peer, or delivers the message.
		 * A close before UP reaches the application as nothing at all:
		 * the peer's DISCONNECTED says it happened.
		 */
		end = fnow_ms() + 10000;
		while (fnow_ms() < end && !(fsrv_rec(srv, qpn, &r) && (r.down || r.msgs)) &&
		       !p.disconnected)
			fpeer_wait_event(&p, RDMA_CM_EVENT_DISCONNECTED, 2);
		fsrv_rec(srv, qpn, &r);
		early += r.before_up != 0;
		EXPECT(r.before_up == 0, "peer %u: the server's application got %u message(s) on "
		       "qp 0x%x before its UP (%s later)", i, r.before_up, qpn,
		       r.up ? "UP came" : "no UP ever came");
		if (r.msgs) {
			delivered++;
			EXPECT(r.up && r.msgs == 1, "peer %u: %u message(s) delivered, UP %s", i,
			       r.msgs, r.up ? "seen" : "never seen");
		} else {
			overrun++;
			EXPECT(!obedient, "peer %u waited for its grant, and its message was not "
			       "delivered within 10 s", i);
			EXPECT(!r.up || r.down || fsrv_wait_down(srv, qpn, 10000, &r),
			       "peer %u: overran its credits (no message delivered) and its UP got "
			       "no DOWN", i);
			EXPECT(p.disconnected || fpeer_wait_event(&p, RDMA_CM_EVENT_DISCONNECTED,
								  5000) == 0,
			       "peer %u: overran its credits, and was not disconnected", i);
		}
		fpeer_destroy(&p);
		if (r.up)
			EXPECT(fsrv_wait_down(srv, qpn, 10000, &r), "peer %u: qp 0x%x was UP and got "
			       "no DOWN", i, qpn);
	}
	printf("peers sending at once or after their grant: %u delivered after UP, %u closed "
	       "before UP for sending without credits, %u delivered before UP\n", delivered,
	       overrun, early);
	fsrv_counts(srv, &up, &down);
	EXPECT(up - base_ups >= delivered, "%u UPs for %u connections that delivered",
	       up - base_ups, delivered);
	/* and as many DOWNs as UPs */
	hostile_end(up - base_ups);
}
END_TEST

/*
 * One-sided access to the server's credit word: with a wrong rkey, past its
 * 16 bytes, or reading it. Each fails on the peer's own QP; the server's
 * other connections carry on.
 */
START_TEST(test_credit_rkey)
{
	static const struct {
		const char *what;
		bool read;
		uint32_t rkey_xor;
		uint64_t offset;
	} cases[] = {
		{ "RDMA WRITE with a wrong rkey", false, 0x5a00, 0 },
		{ "RDMA WRITE past the credit word", false, 0, 16 },
		{ "RDMA READ of the credit word", true, 0, 0 },
	};
	unsigned int i;

	hostile_begin();
	for (i = 0; i < PC_ARRAY_SIZE(cases); i++) {
		struct fpeer p;
		struct frec r;
		uint32_t qpn;
		int st;
		bool self;

		peer_up(&p, 256);
		qpn = p.srv_qpn;
		st = fpeer_rdma(&p, cases[i].read, p.srv.credit_addr + cases[i].offset,
				p.srv.credit_rkey ^ cases[i].rkey_xor, 1, 10000);
		EXPECT(st == IBV_WC_REM_ACCESS_ERR, "%s: completed with %d (%s), expected %s",
		       cases[i].what, st, st >= 0 ? ibv_wc_status_str(st) : "timeout",
		       ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
		/*
		 * Does the server notice by itself? Reported, not required: the
		 * peer's own QP failed, and with the peer still connected a
		 * trial's server had not closed it after 30 s, even with
		 * keepalive at 250 ms. The peer's leaving closes it (below).
		 */
		self = fsrv_wait_down(srv, p.srv_qpn, 1000, &r);
		printf("%s: peer's status %s; server %s\n", cases[i].what,
		       st >= 0 ? ibv_wc_status_str(st) : "timeout",
		       self ? "closed it by itself" : "did not notice within 1 s");
		if (self)
			printf("  reason at DOWN: '%s'\n", r.reason);
		fpeer_destroy(&p);
		EXPECT(self || fsrv_wait_down(srv, qpn, 10000, &r),
		       "%s: the server kept the connection after the peer left", cases[i].what);
	}
	hostile_end(PC_ARRAY_SIZE(cases));
}
END_TEST

/* A raw peer (no private data) connects to a server that opted in (raw_bufs). */
static void raw_up(struct fpeer *p, uint32_t slot_size)
{
	struct fpeer_opts o = { .priv = FPEER_RAW, .slot_size = slot_size };
	int ret;

	memset(p, 0, sizeof(*p));
	ret = fpeer_connect(p, pc_test_addr(), srv->port, &o);
	ck_assert_msg(ret == 0, "raw peer: connect: %s (%d)", p->why, ret);
	ck_assert_msg(fsrv_wait_up(srv, p->srv_qpn, 10000), "no UP for server qp 0x%x",
		      p->srv_qpn);
}

/* By default (raw_bufs 0) a raw peer is refused, with the reason in the log. */
START_TEST(test_raw_refused)
{
	struct fpeer_opts o = { .priv = FPEER_RAW, .slot_size = 256 };
	unsigned int mark, up, down;
	struct fpeer p = { 0 };
	char line[512] = "";
	int ret;

	hostile_begin();
	mark = flog_mark();
	ret = fpeer_connect(&p, pc_test_addr(), srv->port, &o);
	EXPECT(ret == -ECONNREFUSED, "a raw peer with raw_bufs 0: connect returned %d (%s)", ret,
	       p.why);
	EXPECT(flog_find_since(mark, line, sizeof(line), "refusing", "raw", "raw_bufs", NULL),
	       "raw peer refused without a reason in the log");
	printf("raw peer refused; server says: %s\n", line);
	fpeer_destroy(&p);
	fsrv_counts(srv, &up, &down);
	EXPECT(up == base_ups, "a refused raw peer was delivered UP");
	hostile_end(0);
}
END_TEST

/* A raw peer sends more than any receive buffer holds: its connection closes, with a reason. */
START_TEST(test_raw_too_long)
{
	/* rxe says LOC_QP_OP_ERR for a receive that does not fit, mlx5 LOC_LEN_ERR */
	static const char *const why[] = { "length", "too long", "RECV", NULL };
	static uint8_t big[8192];
	struct pc_worker_stats st0, st;
	unsigned int mark;
	struct fpeer p;
	struct frec r;

	hostile_begin_raw(SRV_RAW_BUFS);
	raw_up(&p, sizeof(big));
	pc_engine_stats(srv->e, 0, &st0);
	mark = flog_mark();
	memset(big, 0x42, sizeof(big));
	ck_assert_int_eq(fpeer_send(&p, big, sizeof(big)), 0);
	fpeer_wait_sends(&p, 10000);
	EXPECT(p.sends_failed == 1, "the peer's oversized send completed without an error");
	if (p.sends_failed)
		printf("peer's send: %s\n", ibv_wc_status_str(p.first_err));
	if (expect_closed(&p, "raw send of 8192 bytes", why, 10000, mark, &r))
		EXPECT(r.msgs == 0, "the application got %u messages from it", r.msgs);
	pc_engine_stats(srv->e, 0, &st);
	EXPECT(st.wc_errors == st0.wc_errors + 1, "server wc_errors went from %llu to %llu, "
	       "expected one more", (unsigned long long)st0.wc_errors,
	       (unsigned long long)st.wc_errors);
	fpeer_destroy(&p);
	hostile_end(1);
}
END_TEST

/*
 * A raw peer floods twice the server's SRQ while the application is slow
 * (holds its messages). Credited peers rely on the SRQ: they must keep
 * flowing (issue 12, defect 1: raw peers must not exhaust it), and the raw
 * peer holds no more than its own receive queue (SRV_RAW_BUFS buffers, apart
 * from the SRQ); the rest of its flood waits in RNR retries. Afterwards every flooded
 * message is delivered, exactly once.
 */
START_TEST(test_raw_flood)
{
	const unsigned int n = 2 * SRV_RX_BUFS;
	long long rnr0 = fhw_counter(pc_test_device(), "send_rnr_err");
	struct pc_worker_stats st;
	uint8_t msg[64];
	uint32_t recv0, got;
	uint64_t t0, end;
	unsigned int i, held;
	struct fpeer p;
	struct frec r;

	hostile_begin_raw(SRV_RAW_BUFS);
	raw_up(&p, 256);
	atomic_store(&srv->hold, true);
	for (i = 0; i < n; i++) {
		memset(msg, (int)i, sizeof(msg));
		ck_assert_int_eq(fpeer_send(&p, msg, sizeof(msg)), 0);
	}
	/* the flood lands as far as the server lets it: until the held count stays put for 2 s */
	for (i = 0, held = ~0u; i < 20; i++) {
		unsigned int h = fsrv_held(srv);

		fpeer_poll(&p, 2000);
		if (h == held && h == fsrv_held(srv))
			break;
		held = h;
	}
	/* the flood stays held: 20 good echoes within 10 s, however soon they come */
	recv0 = atomic_load(&cli->g[0].recv);
	t0 = fnow_ms();
	fcli_wait_recv(cli, 0, recv0 + 20, 10000);
	got = atomic_load(&cli->g[0].recv) - recv0;
	held = fsrv_held(srv);
	pc_engine_stats(srv->e, 0, &st);
	EXPECT(got >= 20, "a raw peer's flood (%u messages, %u held by the application) starved "
	       "the credited connection: %u echoes in 10 s; server srq_outstanding %u, rx_held %u, "
	       "%s send_rnr_err +%lld", n, held, got, st.srq_outstanding, st.rx_held,
	       pc_test_device(), fhw_counter(pc_test_device(), "send_rnr_err") - rnr0);
	printf("during the flood: good echoes %u in %llu ms, held %u, srq_outstanding %u\n", got,
	       (unsigned long long)(fnow_ms() - t0), held, st.srq_outstanding);
	/* without on_request, a raw peer's queue is min(PC_RAW_DEPTH_DEFAULT, raw_bufs) deep */
	EXPECT(held >= 1 && held <= SRV_RAW_BUFS, "the raw peer's flood holds %u buffers, expected "
	       "1 to %u (its own receive queue)", held, SRV_RAW_BUFS);
	/* the application catches up: everything arrives, exactly once */
	atomic_store(&srv->hold, false);
	fsrv_release_held(srv);
	EXPECT(fpeer_wait_sends(&p, 60000) == 0, "the flood's sends did not complete in 60 s");
	EXPECT(p.sends_ok == n, "%u of the flood's %u sends succeeded", p.sends_ok, n);
	/* every send completed; the last deliveries may still be on their way */
	end = fnow_ms() + 10000;
	while (fsrv_rec(srv, p.srv_qpn, &r) && r.msgs < n && fnow_ms() < end)
		usleep(1000);
	fsrv_rec(srv, p.srv_qpn, &r);
	EXPECT(r.msgs == n, "the server's application got %u of the %u flooded messages", r.msgs, n);
	fpeer_destroy(&p);
	fsrv_wait_down(srv, r.qpn, 10000, NULL);
	hostile_end(1);
}
END_TEST

/*
 * A payload of max_msg bytes is accepted; one of max_msg + 32, which still
 * fits the rounded-up receive buffer, must be refused (defect 4): never
 * handed to the application with len > cap.
 */
START_TEST(test_over_max_msg)
{
	static const char *const why[] = { "max", "exceeds", "too long", "4128", NULL };
	unsigned int mark;
	struct fpeer p;
	struct frec r;

	hostile_begin();
	peer_up(&p, 8256);
	ck_assert_uint_eq(p.srv.max_msg, SRV_MSG_SIZE);
	/* exactly the maximum: echoed */
	ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_ONEWAY, SRV_MSG_SIZE, SRV_MSG_SIZE,
					0), 0);
	fpeer_wait_sends(&p, 10000);
	fpeer_poll(&p, 3000);
	EXPECT(p.recvs == 1 && p.recv_bytes == WIRE_HDR_LEN + SRV_MSG_SIZE,
	       "a payload of exactly max_msg: %u echoes, %llu bytes", p.recvs,
	       (unsigned long long)p.recv_bytes);
	mark = flog_mark();
	ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_ONEWAY, SRV_MSG_SIZE + 32,
					SRV_MSG_SIZE + 32, 0), 0);
	fpeer_wait_sends(&p, 10000);
	expect_closed(&p, "payload of max_msg + 32", why, 10000, mark, &r);
	fsrv_rec(srv, p.srv_qpn, &r);
	EXPECT(r.over_cap == 0, "a payload of %u bytes (max_msg %u) was handed to the application "
	       "with len > cap (%u such messages, largest %u)", SRV_MSG_SIZE + 32, SRV_MSG_SIZE,
	       r.over_cap, r.max_len);
	fpeer_destroy(&p);
	fsrv_wait_down(srv, r.qpn, 10000, NULL);
	hostile_end(1);
}
END_TEST

/*
 * A peer that grants credits it has no receives for: it posts none, so the
 * server's echo of its one message meets RNR NAKs, retried without end
 * (rnr_retry 7). Keepalive's send-queue watch closes that connection
 * (-ETIMEDOUT, saying the send queue stalled) instead of leaving it UP and
 * silent; the good connection flows on.
 */
START_TEST(test_rnr_forever)
{
	/*
	 * The test waits 8 x KA_MS for the close: what it proves is that bound,
	 * not its size. The good connection runs under the same bound, so it
	 * must complete a send within it: 2 s, 4 s sanitized (5-20x slower).
	 */
	enum { KA_MS = PC_TEST_SANITIZED ? 500 : 250 };
	static const char *const why[] = { "no send completed", NULL };
	char bound[32];
	struct fpeer_opts o = { .priv = FPEER_POLLCORE, .slot_size = 256, .no_recv = true };
	unsigned int mark;
	struct fpeer p;
	struct frec r;
	int ret;

	/* the stall closes after 8 x keepalive_ms: 2 s (4 s sanitized), not the default's 16 */
	srv_keepalive_ms = KA_MS;
	hostile_begin();
	srv_keepalive_ms = 0;
	memset(&p, 0, sizeof(p));
	ret = fpeer_connect(&p, pc_test_addr(), srv->port, &o);
	ck_assert_msg(ret == 0, "hostile peer: connect: %s (%d)", p.why, ret);
	ck_assert_msg(fsrv_wait_up(srv, p.srv_qpn, 10000), "no UP for server qp 0x%x", p.srv_qpn);
	mark = flog_mark();
	/* one message: within any first grant (the server may grant as little as 1) */
	ck_assert_int_eq(fpeer_send_msg(&p, PC_WIRE_MAGIC, WIRE_ONEWAY, 32, 32, 0), 0);
	/* 16 keepalive looks of KA_MS / 2, and room for the close */
	expect_closed(&p, "a peer that posts no receive", why, 8 * KA_MS + 14000, mark, &r);
	EXPECT(strstr(r.reason, "WRs in flight") != NULL, "DOWN's reason does not say what stalled: "
	       "'%s'", r.reason);
	snprintf(bound, sizeof(bound), "for %d ms", 8 * KA_MS);
	EXPECT(strstr(r.reason, bound) != NULL, "DOWN's reason does not give the server's "
	       "bound (8 x keepalive_ms %d: '%s'): '%s'", KA_MS, bound, r.reason);
	fpeer_destroy(&p);
	hostile_end(1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile");

	pc_test_require_rdma();
#define ADD(name) PC_TEST_ADD(s, name, 600)
	/* one case per test: CK_RUN_CASE=<name> runs one */
	ADD(bad_magic);
	ADD(len_mismatch);
	ADD(unknown_type);
	ADD(packs);
	ADD(unknown_req_id);
	ADD(msg_before_up);
	ADD(over_credits);
	ADD(priv_nonsense);
	ADD(credit_rkey);
	ADD(raw_refused);
	ADD(raw_too_long);
	ADD(raw_flood);
	ADD(over_max_msg);
	ADD(rnr_forever);
	return pc_test_run(s);
}
