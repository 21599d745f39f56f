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
 * No cost on the data path: the clock is read every 256 busy turns, every
 * 64 idle ones (every one in hybrid idle, whose turns can sleep); the look walks the connection table (RCU read side, the
 * worker is an online reader) for this worker's connections and compares
 * counters it keeps anyway.
 */
#include "worker_pvt.h"

#define KA_BUSY_TURNS 256
#define KA_IDLE_TURNS 64

static void ka_scan(struct pc_worker *w)
{
	struct cds_lfht_node *node;
	struct cds_lfht_iter it;

	for (cds_lfht_first(w->conns, &it); (node = cds_lfht_iter_get_node(&it));
	     cds_lfht_next(w->conns, &it)) {
		struct conn *c = conn_of_node(node);

		/* c->w is set before the conn is published; other workers' conns are not ours */
		if (c->w != w || c->state != CONN_UP || c->raw)
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

void ka_tick(struct pc_worker *w, bool idle)
{
	uint64_t now;

	if (w->p->keepalive_ms == PC_KEEPALIVE_OFF ||
	    ++w->ka_turns < (!idle ? KA_BUSY_TURNS : w->hybrid ? 1 : KA_IDLE_TURNS))
		return;
	w->ka_turns = 0;
	now = now_ns();
	if (now < w->ka_next_ns)
		return;
	w->ka_next_ns = now + (uint64_t)w->p->keepalive_ms * 1000000 / 2;
	ka_scan(w);
}
