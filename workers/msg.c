// SPDX-License-Identifier: MIT
/*
 * Messages and their delivery (layer "messages", docs/architecture.md):
 * a message's life (send buffers taken, any buffer given back, a receive
 * buffer's credit owed again), the handoff to the application in order
 * (rings, overflow, held behind a rendezvous descriptor, before UP), the
 * application slots' stock of send buffers, and a credited connection
 * joining and leaving the SRQ's share. Worker thread.
 *
 * Below the protocols (calls.c, rndv*.c) and the completion dispatch
 * (complete.c), which call it; it calls nothing above it but through the
 * worker's callbacks (struct worker_up): a large-pool buffer goes back to
 * the rendezvous pool, a drained connection may retire.
 */
#include "msg_pvt.h"

#include "log_pvt.h"

#define HDR WIRE_HDR_LEN

/* --- connections by QP number ----------------------------------------------- */

/* dp_conn_of_qpn() when the cache missed */
struct conn *dp_conn_lookup(struct pc_worker *w, uint32_t qpn)
{
	struct conn **slot = &w->cache[qpn & (PC_ARRAY_SIZE(w->cache) - 1)];
	struct conn *c;

	/* RCU read side: the worker is an online qsbr reader between quiescent states */
	c = conn_lookup(w->conns, qpn);
	if (!c || c->w != w)
		return NULL;
	if (c->state == CONN_ATTACHING)
		w->up.apply_ctl(w); /* its ATTACH is queued: apply it now */
	if (c->state == CONN_ATTACHING || c->state == CONN_RETIRED)
		return NULL;
	*slot = c;
	return c;
}

/* --- messages ------------------------------------------------------------------ */

/* --- messages ------------------------------------------------------------------ */

/* Sends that were accepted (0 returned) and will not be delivered: counted, never silent. */
void dp_count_dropped(struct pc_worker *w, struct conn *c, uint32_t n)
{
	STAT_ADD(c->st->msgs_dropped, n);
	STAT_ADD(w->st.msgs_dropped, n);
}

void msg_bind(struct msg *m, struct conn *c)
{
	m->pub.conn = (struct pc_conn *)c;
	m->pub.data = (char *)m->buf->addr + (c->raw ? 0 : HDR);
	/* what a receive may hold: its SGE is exactly this long (plus the header) */
	m->pub.cap = c->w->p->msg_size;
}

void dp_credited_join(struct pc_worker *w, struct conn *c)
{
	c->allow = w->p->min_window;
	/* relaxed store: pc_msg_alloc_size() reads it on app threads (rndv.c's share) */
	__atomic_store_n(&w->ncredited, w->ncredited + 1, __ATOMIC_RELAXED);
	w->floor_deficit += w->p->min_window;
	/* the control thread reserved that floor in adm_taken when it admitted @c */
	w->adm_pub += w->p->min_window;
	credits_share_set(w);
}

/*
 * A credited conn closing (its QP in ERR): the peer can spend no more. What
 * it was granted and never told of is taken back now; what it was told of
 * and the worker has not seen used stays counted (credit_leave_keep()):
 * the peer may have spent it on receives still in the CQ, whose buffers
 * are no longer posted though srq_outstanding counts them until polled.
 * Each goes with its receive (credits_drain_used()), the rest when the
 * drain ends (credits_drained()). Taking all back at once over-stated the
 * room by those receives: grants for buffers not posted, RNR NAKs.
 */
void dp_credited_leave(struct pc_worker *w, struct conn *c)
{
	uint32_t o = conn_outstanding(c);
	uint32_t keep = credit_leave_keep(c->granted, c->granted_published, c->recv_credited);

	/* granted - recv_credited is what it keeps from now on (0 if it overran) */
	c->granted = c->recv_credited + keep;
	w->credits_out -= o - keep;
	w->floor_deficit -= credit_short(o, w->p->min_window);
	__atomic_store_n(&w->ncredited, w->ncredited - 1, __ATOMIC_RELAXED);
	c->grant_pending = 0;
	credits_publish(w);
	credits_share_set(w);
	adm_release(w, 0);
}

/*
 * @m, a message of a received pack (@c its origin), given back: the
 * receive whose buffer goes back now that its last message did, or NULL.
 * The first message (the receive's own) may go before the others or after.
 */
static pc_noinline struct msg *pack_release(struct pc_worker *w, struct msg *m, struct conn *c)
{
	struct msg *r = m;

	if (m->pool == POOL_PACK) {
		r = m->pack_of;
		if (pc_unlikely(!r)) {
			pc_err("%s: packed message %u given back twice (pc_msg_release() or a send of "
			       "a message no longer yours); ignored", w->name, m->gidx);
			return NULL;
		}
		m->pack_of = NULL;
		m->ctx.next = w->pack_free;
		w->pack_free = &m->ctx;
		r->pack_live--;
	} else {
		if (pc_unlikely(r->pack_gone)) {
			pc_err("%s: receive buffer %u given back twice (pc_msg_release() or a send of a "
			       "message no longer yours); ignored", w->name, r->buf->index);
			r->origin = c;
			return NULL;
		}
		r->pack_gone = 1;
		/* dp_msg_release() took it: the buffer still counts on its conn */
		r->origin = c;
	}
	if (r->pack_live || !r->pack_gone)
		return NULL;
	r->pack_gone = 0;
	return r;
}

/*
 * Engine teardown: @m's conn is gone, and so is the conn its buffer counts
 * on (a packed message's receive's, which goes back with the last of them).
 */
void dp_msg_forget(struct msg *m)
{
	m->origin = NULL;
	if (m->pool == POOL_PACK && m->pack_of)
		m->pack_of->origin = NULL;
}

struct msg *dp_tx_alloc(struct pc_worker *w)
{
	struct pc_buf *b = pc_pool_get(w->tx);
	struct msg *m;

	if (pc_unlikely(!b))
		return NULL;
	m = &w->tx_msgs[b->index];
	m->pub.len = 0;
	m->pub.type = PC_MSG_ONEWAY;
	m->pub.req_id = 0;
	m->pub.user = NULL;
	m->pub.conn = NULL;
	m->origin = NULL;
	return m;
}

void dp_msg_release(struct pc_worker *w, struct msg *m)
{
	struct conn *c = m->origin;

	m->origin = NULL;
	if (m->pool == POOL_TX) {
		if (pc_unlikely(pc_pool_put(w->tx, m->buf))) {
			/* nobody to return it to: an application that gave a message back twice */
			pc_err("%s: send buffer %u given back twice (pc_msg_release() or a send of a "
			       "message no longer yours); ignored", w->name, m->buf->index);
			return;
		}
		if (c)
			conn_put(w, c);
		return;
	}
	if (pc_unlikely(m->pool == POOL_LARGE)) {
		w->up.release_large(w, m, c);
		return;
	}
	/* a pack's buffer goes back with the last of its messages */
	if (pc_unlikely(m->pool == POOL_PACK || m->pack_live)) {
		m = pack_release(w, m, c);
		if (!m)
			return;
		c = m->origin;
		m->origin = NULL;
	}
	if (pc_unlikely(pc_pool_put(rx_pool(w, m), m->buf))) {
		pc_err("%s: receive buffer %u given back twice (pc_msg_release() or a send of a "
		       "message no longer yours); ignored", w->name, m->buf->index);
		return;
	}
	if (!c)
		return;
	STAT_ADD(c->held, (uint32_t)-1);
	CONN_GAUGE_SET(c, held);
	STAT_ADD(w->st.rx_held, (uint32_t)-1);
	if (pc_likely(c->state == CONN_UP && !c->raw)) {
		/* granted again at the conn's next flush, or by its deadline (grant_defer()) */
		c->grant_pending++;
		if (!c->dirty)
			grant_defer(w, c);
	} else if (c->state <= CONN_UP) {
		/* granted again (raw: its receive queue topped up) at the next flush once UP */
		if (!c->raw)
			c->grant_pending++;
		dp_mark_dirty(w, c);
	} else if (c->state == CONN_DRAINED) {
		w->up.retire(w, c);
	}
}

/* Ring mode: hands @m to application slot @slot, in order, never dropping it. */
void dp_deliver_slot(struct pc_worker *w, unsigned int slot, struct msg *m)
{
	struct chan *ch = &w->chans[slot];

	if (pc_likely(!ch->ovf_head) && pc_ring_spsc_enqueue(ch->to_app, &m->pub) == 0)
		return;
	/* the application is behind: keep it here, in order, and say so */
	m->ctx.next = NULL;
	if (!ch->ovf_head)
		w->ovf_chans++;
	*ch->ovf_tail = &m->ctx;
	ch->ovf_tail = &m->ctx.next;
	ch->ovf++;
	PC_PROBE(handoff_full, slot, ch->ovf);
	STAT_ADD(w->st.handoff_full, 1);
}


void dp_deliver_overflow(struct pc_worker *w)
{
	unsigned int i;

	/* the common case, every application keeping up, is not called (worker_turn()) */
	for (i = 0; w->ovf_chans && i < w->nchans; i++) {
		struct chan *ch = &w->chans[i];

		while (ch->ovf_head) {
			struct msg *m = pc_container_of(ch->ovf_head, struct msg, ctx);
			/* read first: once in the ring, @m is the application's (a release links it elsewhere) */
			struct wr_ctx *next = m->ctx.next;

			if (pc_ring_spsc_enqueue(ch->to_app, &m->pub))
				break;
			ch->ovf_head = next;
			if (!ch->ovf_head) {
				ch->ovf_tail = &ch->ovf_head;
				w->ovf_chans--;
			}
			ch->ovf--;
		}
	}
}

/*
 * Tops up one slot's stock (@ch) to its share, in bursts; returns false when
 * the pool ran out first. A slot is written only once TOPUP_MIN of its
 * share are missing, so that one that sends little is not touched each look.
 */
#define TOPUP_MIN 8u

static bool topup_slot(struct pc_worker *w, struct chan *ch)
{
	void *objs[64];
	unsigned int n, k, put, want, have;

	have = pc_ring_spsc_count(ch->txfree);
	want = ch->tx_share > have ? ch->tx_share - have : 0;
	if (pc_likely(want < PC_MAX(PC_MIN(TOPUP_MIN, ch->tx_share / 2), 1u)))
		return true;
	while (want) {
		unsigned int burst = PC_MIN(want, (unsigned int)PC_ARRAY_SIZE(objs));

		for (n = 0; n < burst; n++) {
			struct msg *m = dp_tx_alloc(w);

			if (!m)
				break;
			objs[n] = m;
		}
		put = n ? pc_ring_spsc_enqueue_burst(ch->txfree, objs, n) : 0;
		for (k = put; k < n; k++)
			dp_msg_release(w, objs[k]);
		if (n < burst)
			return false; /* the pool ran out */
		if (put < n)
			return true; /* the ring is full */
		want -= put;
	}
	return true;
}

/*
 * Keeps each application slot stocked with send buffers, up to its share
 * (half the pool split over the slots: the worker keeps the rest), every
 * HOUSEKEEP_TURNS turns: each slot gets back what it took since the last
 * look, all of it, as soon as TOPUP_MIN are missing.
 *
 * The stock must cover what the application may take before the worker
 * looks again, and that is a burst: every call in flight can complete in
 * one of the worker's runs (a batch of completions, or a worker that lost
 * its core for a while), and each completion may make the application
 * call again at once. A stock refilled only once below half its share, 64
 * buffers per look at one slot in turn (as it was), met such bursts empty
 * with most of the pool free: 83% of pc_msg_alloc() calls failed with
 * ENOBUFS at 8 connections x 32 calls in flight, 97% at x 64 (pollcore-kv,
 * soft-RoCE VM). Refilled to the share at each look, the stock covers as
 * many calls in flight as the share holds. Reading a slot's count reads
 * its consumer's cache line: one line per slot every HOUSEKEEP_TURNS turns.
 * When the pool runs short, the slots take turns being served first.
 */
void dp_topup_txfree(struct pc_worker *w)
{
	unsigned int i, n = w->nchans, first = w->topup_next;

	if (pc_unlikely(!n))
		return;
	w->topup_next = first + 1 == n ? 0 : first + 1;
	for (i = 0; i < n; i++) {
		unsigned int k = first + i < n ? first + i : first + i - n;

		if (!topup_slot(w, &w->chans[k]))
			return; /* the pool is empty: nothing for the others either */
	}
}

/* --- held and early messages ---------------------------------------------------- */

/*
 * Keeps @m, which arrived after a rendezvous descriptor not yet read, until
 * that one is delivered (dp_rx_release()): per connection, messages come
 * in order. Call completions are not held: they are no part of that order.
 */
void dp_rx_hold(struct conn *c, struct msg *m)
{
	m->ctx.next = NULL;
	if (!c->rv.hold_head)
		c->rv.hold_tail = &c->rv.hold_head;
	*c->rv.hold_tail = &m->ctx;
	c->rv.hold_tail = &m->ctx.next;
}

/*
 * A descriptor of @c's was finished (its message delivered, or its READ
 * failed): the messages that came after it and before the next go on, in
 * order. @all: the drain ended, every one goes (given back if @c was never
 * UP).
 */
void dp_rx_release(struct pc_worker *w, struct conn *c, bool all)
{
	struct wr_ctx *ctx;

	if (all)
		c->rv.rx_dlv = c->rv.rx_seq;
	while ((ctx = c->rv.hold_head)) {
		struct msg *m = pc_container_of(ctx, struct msg, ctx);

		if ((int32_t)(c->rv.rx_dlv - m->rx_after) < 0)
			break;
		c->rv.hold_head = ctx->next;
		if (c->state >= CONN_DRAINING && !c->was_up)
			dp_msg_release(w, m);
		else
			dp_deliver(w, w->p, c, m);
	}
}

/* After on_conn(UP): the messages that arrived before it, in order. */
void dp_deliver_early(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *ctx = c->early_head;

	c->early_head = NULL;
	while (ctx) {
		struct wr_ctx *next = ctx->next;
		struct msg *m = pc_container_of(ctx, struct msg, ctx);

		/* one that came after a descriptor waits for it as it would have after UP */
		if (pc_unlikely(m->rx_after != c->rv.rx_dlv))
			dp_rx_hold(c, m);
		else
			dp_deliver(w, w->p, c, m);
		ctx = next;
	}
}

/* A conn that never came up: its early messages go back, never seen. */
void dp_drop_early(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *ctx = c->early_head;

	c->early_head = NULL;
	while (ctx) {
		struct wr_ctx *next = ctx->next;

		dp_msg_release(w, pc_container_of(ctx, struct msg, ctx));
		ctx = next;
	}
}
