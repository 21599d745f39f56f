// SPDX-License-Identifier: MIT
/*
 * rdma suite: packs, several one-way messages in one SEND (core/wire.h),
 * between two pollcore engines on the soft-RoCE device.
 *
 * The client's worker sends bursts of messages of many sizes (aligned ones
 * that can be followed, others that end a pack, sizes that fill a receive
 * buffer to its last byte); the server's application, on a ring, checks
 * every one's bytes and order, echoes every fourth (sent on from its place
 * in the shared receive buffer), gives others back at once, and keeps
 * others to give back in a scrambled order, so that a shared buffer's
 * messages go back in every order. Asserted: every message arrives once,
 * intact and in order; every echo comes back; fewer work requests than
 * messages on the client (packing happened); every receive buffer back on
 * the server; nothing dropped. With no_pack on the server, the same flow
 * packs nothing, both ways.
 */
#include <pollcore/engine.h>
#include <pollcore/poller.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pc_test.h"

#define N_MSGS PC_TEST_SAN(4000u, 800u)	/* a multiple of 20: every kept message goes back */
#define BURST 24u
#define KEEP 5u
#define MSG_SIZE 4096u

/*
 * Sizes in turn: aligned ones of several lengths, unaligned ones (29, 13)
 * that end their pack, the largest, and 4064 + 16 (with their headers,
 * exactly one receive buffer).
 */
static const uint32_t sizes[] = { 16, 64, 24, 40, 29, 200, 1000, 56, 4064, 16, 13, MSG_SIZE, 8 * 17 };

/* Payload: seq (4 bytes), then bytes derived from seq and position. */
static uint32_t size_of(uint32_t seq)
{
	return sizes[seq % PC_ARRAY_SIZE(sizes)];
}

static void fill(uint8_t *b, uint32_t len, uint32_t seq)
{
	uint32_t i;

	memcpy(b, &seq, sizeof(seq));
	for (i = sizeof(seq); i < len; i++)
		b[i] = (uint8_t)(seq * 31 + i);
}

/* The message's seq when its bytes are exactly fill()'s for it, else UINT32_MAX. */
static uint32_t check(const struct pc_msg *m)
{
	const uint8_t *b = m->data;
	uint32_t seq, i;

	if (m->len < sizeof(seq))
		return UINT32_MAX;
	memcpy(&seq, b, sizeof(seq));
	if (m->len != size_of(seq))
		return UINT32_MAX;
	for (i = sizeof(seq); i < m->len; i++)
		if (b[i] != (uint8_t)(seq * 31 + i))
			return UINT32_MAX;
	return seq;
}

/* --- the client: its worker sends the bursts, its handler checks the echoes ------------- */

static struct {
	struct pc_work work;
	struct pc_conn *conn;
	uint32_t sent;			/* the client's worker only */
	atomic_uint send_errors;
	atomic_uint echoes, echo_bad;
	uint32_t echo_next;		/* the client's worker only */
} cli;

static void burst(struct pc_work *work)
{
	unsigned int i;

	(void)work;
	for (i = 0; i < BURST && cli.sent < N_MSGS; i++) {
		struct pc_msg *m = pc_msg_alloc(cli.conn);

		if (!m)
			break;	/* ENOBUFS: the next turn */
		m->len = size_of(cli.sent);
		fill(m->data, m->len, cli.sent);
		if (pc_send(m))
			atomic_fetch_add(&cli.send_errors, 1);
		cli.sent++;
	}
	if (cli.sent < N_MSGS && pc_worker_post(pc_conn_worker(cli.conn), &cli.work))
		atomic_fetch_add(&cli.send_errors, 1);
}

static void cli_on_msg(struct pc_msg *m, void *arg)
{
	uint32_t seq = check(m);

	(void)arg;
	if (seq != cli.echo_next)
		atomic_fetch_add(&cli.echo_bad, 1);
	cli.echo_next = seq + 4;
	atomic_fetch_add(&cli.echoes, 1);
	pc_msg_release(m);
}

/* --- the server's application: on a ring, on this thread ---------------------------------- */

struct srv_app {
	struct pc_msg *kept[KEEP];
	unsigned int nkept;
	uint32_t next, bad;
};

static void srv_take(struct srv_app *a, struct pc_msg *m)
{
	/* a scrambled order: the pack's first message neither first nor last */
	static const unsigned int order[KEEP] = { 3, 1, 4, 0, 2 };
	uint32_t seq = check(m);
	unsigned int i;

	if (seq != a->next)
		a->bad++;
	a->next = seq + 1;
	switch (seq % 4) {
	case 0:	/* on to the client from where it lies */
		ck_assert_int_eq(pc_send(m), 0);
		break;
	case 1:
		a->kept[a->nkept++] = m;
		if (a->nkept == KEEP) {
			for (i = 0; i < KEEP; i++)
				ck_assert_int_eq(pc_msg_release(a->kept[order[i]]), 0);
			a->nkept = 0;
		}
		break;
	default:
		ck_assert_int_eq(pc_msg_release(m), 0);
	}
}

static void run(bool no_pack)
{
	struct pc_engine_params sp = {
		.size = sizeof(sp), .handoff = PC_HANDOFF_RING, .app_threads = 1,
		.msg_size = MSG_SIZE, .no_numa = true, .no_pack = no_pack,
	};
	struct pc_engine_params cp = {
		.size = sizeof(cp), .msg_size = MSG_SIZE, .on_msg = cli_on_msg, .no_numa = true,
	};
	struct pc_worker_stats cs, ss;
	struct srv_app app = { .nkept = 0 };
	struct pc_engine *srv, *cli_e;
	struct pc_msg *msgs[64];
	uint32_t got = 0;
	uint64_t end;

	memset(&cli, 0, sizeof(cli));
	srv = pc_engine_create(&sp);
	ck_assert_msg(srv, "server: %s", pc_last_error());
	ck_assert_int_eq(pc_listen(srv, pc_test_addr(), 0), 0);
	ck_assert_int_eq(pc_app_attach(srv, 0), 0);
	cli_e = pc_engine_create(&cp);
	ck_assert_msg(cli_e, "client: %s", pc_last_error());
	cli.conn = pc_connect(cli_e, pc_test_addr(), pc_listen_port(srv), -1, 10000, NULL);
	ck_assert_msg(cli.conn, "connect: %s", pc_last_error());
	cli.work.fn = burst;
	ck_assert_int_eq(pc_worker_post(pc_conn_worker(cli.conn), &cli.work), 0);

	end = pc_test_now_ms() + 120000;
	while (got < N_MSGS && pc_test_now_ms() < end) {
		unsigned int n = pc_app_poll(srv, msgs, PC_ARRAY_SIZE(msgs)), i;

		for (i = 0; i < n; i++)
			srv_take(&app, msgs[i]);
		got += n;
		if (!n)
			usleep(100);
	}
	ck_assert_msg(got == N_MSGS, "the server got %u of %u messages", got, N_MSGS);
	ck_assert_msg(app.bad == 0, "%u messages out of order or corrupted", app.bad);
	ck_assert_uint_eq(app.nkept, 0);
	while (atomic_load(&cli.echoes) < N_MSGS / 4 && pc_test_now_ms() < end)
		usleep(1000);
	ck_assert_uint_eq(atomic_load(&cli.echoes), N_MSGS / 4);
	ck_assert_uint_eq(atomic_load(&cli.echo_bad), 0);
	ck_assert_uint_eq(atomic_load(&cli.send_errors), 0);

	ck_assert_int_eq(pc_engine_stats(cli_e, 0, &cs), 0);
	printf("%s: client %lu messages in %lu work requests (%lu doorbells), server echoed %u\n",
	       no_pack ? "no_pack" : "packs", (unsigned long)cs.tx_msgs,
	       (unsigned long)cs.wrs_posted, (unsigned long)cs.doorbells, N_MSGS / 4);
	ck_assert_uint_eq(cs.tx_msgs, N_MSGS);
	ck_assert_uint_eq(cs.msgs_dropped, 0);
	if (no_pack)
		ck_assert_uint_ge(cs.wrs_posted, cs.tx_msgs);
	else
		ck_assert_msg(cs.wrs_posted * 2 < cs.tx_msgs,
			      "%lu work requests for %lu messages: packing did not happen",
			      (unsigned long)cs.wrs_posted, (unsigned long)cs.tx_msgs);
	/* every receive buffer back once the echoes completed; nothing dropped */
	end = pc_test_now_ms() + 10000;
	do {
		ck_assert_int_eq(pc_engine_stats(srv, 0, &ss), 0);
	} while (ss.rx_held && pc_test_now_ms() < end && usleep(1000) == 0);
	ck_assert_uint_eq(ss.rx_held, 0);
	ck_assert_uint_eq(ss.rx_msgs, N_MSGS);
	ck_assert_uint_eq(ss.tx_msgs, N_MSGS / 4);
	ck_assert_uint_eq(ss.msgs_dropped, 0);
	ck_assert_uint_eq(ss.wc_errors, 0);
	ck_assert_uint_eq(ss.stray_completions, 0);
	if (no_pack)	/* the server packs its echoes for nobody either */
		ck_assert_uint_ge(ss.wrs_posted, ss.tx_msgs);
	pc_conn_put(cli.conn);
	pc_engine_destroy(cli_e);
	pc_engine_destroy(srv);
}

START_TEST(test_burst)
{
	run(false);
}
END_TEST

START_TEST(test_no_pack)
{
	run(true);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pack");

	pc_test_require_rdma();
#define ADD(name) PC_TEST_ADD(s, name, 600)
	ADD(burst);
	ADD(no_pack);
	return pc_test_run(s);
}
