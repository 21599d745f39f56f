// SPDX-License-Identifier: MIT
/*
 * Keepalive (worker thread): a peer that vanished without a disconnect
 * must not leave a connection UP forever.
 *
 * A crashed host, or a disconnect lost while a link was down, leaves the
 * QP in RTS with nothing to send: an application waiting for answers
 * waits for good. Every keepalive_ms / 2 the worker looks at its credited
 * connections; one on which nothing arrived over two looks gets a probe,
 * its credit word written again to the peer (an 8-byte RDMA WRITE, the
 * grant it already has: harmless, answered by the peer's NIC). A live peer
 * acknowledges it; a gone one does not, and after the QP's retries the
 * write completes with IBV_WC_RETRY_EXC_ERR, which closes the connection
 * like any failed completion, DOWN saying so.
 *
 * The same look watches the send queue, raw peers' too (an NVMe-oF host
 * that stops posting receives must not hold its worker's resources, or
 * the other hosts' I/O behind them, for ever). RC completes every WR, or fails
 * it, within the QP's retries; only RNR retries (rnr_retry 7) go on without
 * end, against a peer that never posts receives. A connection that had WRs
 * in flight and saw none complete for KA_SQ_STUCK_SCANS looks (16 s by
 * default) is closed with -ETIMEDOUT, saying so: a stalled send queue (a
 * peer stuck in RNR, or a provider whose requester stopped for any other
 * reason) is reported, not left UP and silent.
 *
 * The same look holds the rendezvous DONE deadline (rndv_overdue()): no
 * DONE for 8 keepalive periods (16 s by default, the same bound) while
 * descriptors wait, or one descriptor waiting 4 times that, closes the
 * connection with -ETIMEDOUT, so that a peer that takes
 * descriptors and never answers keeps no block of the shared large pool
 * for longer. With PC_KEEPALIVE_OFF the look still runs for it, at the
 * default period, while any descriptor waits for its DONE.
 *
 * No cost on the data path: the clock (coarse_ns(), no system call) is
 * read every 256 busy turns, every 64 idle ones (every one in
 * hybrid idle, whose turns can sleep); the look walks the connection table
 * (RCU read side, the worker is an online reader) for this worker's
 * connections and compares counters it keeps anyway.
 */
#include "dp_pvt.h"

#include <errno.h>

#include "log_pvt.h"

#define KA_SQ_STUCK_SCANS 16

/*
 * true: @c was closed, its send queue stalled. Unsignaled WRs after the
 * last signaled one (inline SENDs, post_pvt.h) never complete by
 * themselves: only a signaled WR in flight can say the queue stalled (the
 * keepalive probe is one).
 */
static bool ka_sq_stalled(struct pc_worker *w, struct conn *c)
{
	if (sq_inflight(&c->sq) == c->sq.unsignaled || c->sq.tail != c->ka_tail) {
		c->ka_tail = c->sq.tail;
		c->ka_stuck = 0;
		return false;
	}
	if (++c->ka_stuck < KA_SQ_STUCK_SCANS)
		return false;
	set_error(-ETIMEDOUT, "%s port %u qp 0x%x: no send completed for %llu ms with %u WRs "
		     "in flight (the peer RNR-retries without end, or the device stalled)",
		     w->dev->name, w->dev->port, c->qpn,
		     (unsigned long long)w->p->keepalive_ms * KA_SQ_STUCK_SCANS / 2,
		     sq_inflight(&c->sq));
	drain_fail(w, c, -ETIMEDOUT);
	return true;
}

/* @off: keepalive is off, only the rendezvous DONE deadline applies. */
static void ka_scan(struct pc_worker *w, uint64_t now, uint32_t period_ms, bool off)
{
	uint64_t done_limit = (uint64_t)period_ms * KA_SQ_STUCK_SCANS / 2 * 1000000;
	struct cds_lfht_node *node;
	struct cds_lfht_iter it;

	for (cds_lfht_first(w->conns, &it); (node = cds_lfht_iter_get_node(&it));
	     cds_lfht_next(w->conns, &it)) {
		struct conn *c = conn_of_node(node);

		/* c->w is set before the conn is published; other workers' conns are not ours */
		if (c->w != w || c->state != CONN_UP)
			continue;
		/* a raw peer gets no probe (no credit word), but a stalled send queue closes it too */
		if (pc_unlikely(c->raw)) {
			if (!off)
				ka_sq_stalled(w, c);
			continue;
		}
		if (c->rv.tx_head && rndv_overdue(w, c, now, done_limit))
			continue;
		if (off || ka_sq_stalled(w, c))
			continue;
		if (c->st->msgs_recv != c->ka_recv) {
			c->ka_recv = c->st->msgs_recv;
			c->ka_idle = 0;
			continue;
		}
		if (++c->ka_idle < 2)
			continue;
		c->ka_idle = 0;
		c->probe = true;
		dp_mark_dirty(w, c);
	}
}

void ka_look(struct pc_worker *w)
{
	bool off = w->p->keepalive_ms == PC_KEEPALIVE_OFF;
	uint32_t period = off ? PC_KEEPALIVE_DEFAULT_MS : w->p->keepalive_ms;
	uint64_t now;

	if (off && !rndv_unanswered(w))
		return;
	now = coarse_ns();
	if (now < w->ka_next_ns)
		return;
	w->ka_next_ns = now + (uint64_t)period * 1000000 / 2;
	ka_scan(w, now, period, off);
}
