// SPDX-License-Identifier: MIT
/*
 * Rendezvous: messages above msg_size, up to max_msg_size, read by the
 * receiver from the sender's large-message pool through a memory window
 * bound for that one message on the connection's own QP. See rndv_pvt.h
 * for the exchange and the protection it relies on.
 *
 * The pool is set up in rndv_setup.c. Worker thread only, except
 * rndv_msg_alloc() and rndv_submit_check() (any thread), which touch
 * only the pool's allocator and the connections' tx_bytes, under its
 * spinlock, and a block no other thread sees yet.
 */
#include "rndv_pvt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

#define HDR WIRE_HDR_LEN

/* The pool's gauge; the caller holds the lock. */
static inline void used_gauge(struct pc_worker *w)
{
	__atomic_store_n(&w->st.large_used_kib, (uint32_t)(blkalloc_used_bytes(&w->rv->bd) >> 10),
			 __ATOMIC_RELAXED);
}

/* --- blocks -------------------------------------------------------------------------------- */

/*
 * What a connection's sends may hold in the pool: its fair share among the
 * worker's credited connections, and one message whatever its size (a
 * share below max_msg_size must not forbid the large messages it allows).
 * Any thread (ncredited is stored relaxed for this).
 */
static inline uint64_t tx_share(const struct pc_worker *w)
{
	return w->rv->size / PC_MAX(__atomic_load_n(&w->ncredited, __ATOMIC_RELAXED), 1u);
}

/*
 * A block of at least @len bytes, or NULL (-ENOBUFS); with @tx, charged to
 * that conn's sends, and NULL too when they hold their share already
 * (*@over set). Any thread.
 */
static struct lmsg *block_get(struct pc_worker *w, struct conn *tx, uint64_t len, bool *over)
{
	struct rndv_pool *rv = w->rv;
	struct lmsg *lm;
	uint64_t off;
	int64_t r;

	pthread_spin_lock(&rv->lock);
	if (tx && tx->rv.tx_bytes) {
		uint64_t need = blkalloc_size_of(&rv->bd, len);

		if (need && tx->rv.tx_bytes + need > tx_share(w)) {
			pthread_spin_unlock(&rv->lock);
			*over = true;
			return NULL;
		}
	}
	r = blkalloc_alloc(&rv->bd, len, &off);
	if (r > 0) {
		used_gauge(w);
		if (tx)
			tx->rv.tx_bytes += (uint64_t)r;
	}
	pthread_spin_unlock(&rv->lock);
	if (r <= 0)
		return NULL;
	lm = &rv->lm[off >> RNDV_MIN_SHIFT];
	/*
	 * A free block's state is LM_IDLE, free_pending, done_busy and
	 * rx_counted false and rv_conn NULL (lm_free()): not written here, so
	 * the worker may read them of any block (rndv_conn_close()).
	 */
	lm->size = (uint64_t)r;
	lm->tx_counted = tx != NULL;
	lm->m.call_done = NULL;
	lm->m.origin = NULL;
	return lm;
}

/*
 * Gives @lm's block back (NULL: keeps it out of the pool for good) and
 * @bytes of @tx's charge; the caller no longer touches @lm. Any thread.
 */
static void block_put(struct pc_worker *w, struct lmsg *lm, struct conn *tx, uint64_t bytes)
{
	struct rndv_pool *rv = w->rv;

	/* the lock orders our writes to @lm before the next owner's (acquire/release) */
	pthread_spin_lock(&rv->lock);
	if (lm) {
		blkalloc_free(&rv->bd, (uint64_t)lm_index(rv, lm) << RNDV_MIN_SHIFT);
		used_gauge(w);
	}
	if (tx)
		tx->rv.tx_bytes -= bytes;
	pthread_spin_unlock(&rv->lock);
}

/*
 * Its window may still be valid (its QP went to ERR before the invalidate
 * completed): a new one, so that no rkey given out before works on this
 * block again. Closing connections only.
 */
bool rndv_mw_renew(struct pc_worker *w, struct lmsg *lm)
{
	/* a window that may still be valid keeps its block out of the pool */
	if (lm->mw && ibv_dealloc_mw(lm->mw)) {
		pc_warn("%s: ibv_dealloc_mw of a rendezvous window: %s; a %llu KiB block of the "
			"large pool is retired", w->name, strerror(errno),
			(unsigned long long)(lm->size >> 10));
		return false;
	}
	lm->mw = ibv_alloc_mw(w->dev->pd, IBV_MW_TYPE_2);
	if (!lm->mw) {
		pc_warn("%s: ibv_alloc_mw(type 2): %s; a %llu KiB block of the large pool is "
			"retired", w->name, strerror(errno), (unsigned long long)(lm->size >> 10));
		return false;
	}
	lm->rkey = lm->mw->rkey;
	lm->mw_dirty = false;
	return true;
}

static void rndv_kick(struct pc_worker *w);

static void lm_free(struct pc_worker *w, struct lmsg *lm)
{
	struct rndv_pool *rv = w->rv;
	struct conn *c = lm->ref_conn;
	struct conn *tx = lm->tx_counted ? c : NULL;
	uint64_t size = lm->size;
	pc_release_fn released = NULL;
	void *arg = NULL;
	int status = 0;
	bool keep;

	if (lm->rx_counted && c)
		c->rv.rx_bytes -= lm->size;
	/* the application's buffer: its released() runs, the entry goes back to its stack */
	if (pc_unlikely(lm->zc)) {
		status = rndv_zc_status(lm);
		released = lm->zc_released;
		arg = lm->zc_arg;
		lm->zc_released = NULL;
	}
	lm->rx_counted = false;
	lm->tx_counted = false;
	lm->ref_conn = NULL;
	lm->free_pending = false;
	/* its device gone (devloss.c), the windows went with it: nothing to renew */
	if (w->released)
		lm->mw_dirty = false;
	/* a window that may still be valid keeps its block (or entry) out of use for good */
	keep = pc_unlikely(lm->mw_dirty) && !rndv_mw_renew(w, lm);
	/* untouched from here: another thread may allocate it as soon as it is free */
	lm->size = 0;
	if (pc_unlikely(lm->zc)) {
		if (!keep)
			rndv_zc_push(rv, lm);
	} else {
		block_put(w, keep ? NULL : lm, tx, size);
	}
	if (c)
		conn_put(w, c);
	/*
	 * Its QP is in ERR by now if the window was dirty (the drain ended), so
	 * the application's buffer is safe to give back even when the entry is
	 * kept out.
	 */
	if (released)
		released(arg, status);
	if (rv->wait)
		rndv_kick(w);
}

/* Back to the pool once given back and no WR uses it any more. */
static void lm_maybe_free(struct pc_worker *w, struct lmsg *lm)
{
	if (lm->free_pending && lm->state == LM_IDLE && !lm->done_busy && !lm->abort_busy)
		lm_free(w, lm);
}

/* --- the application's side ---------------------------------------------------------------- */

/* pc_msg_alloc_size() above msg_size (submit.c): a block of the large pool. Any thread. */
struct pc_msg *rndv_msg_alloc(struct conn *c, size_t len)
{
	struct pc_worker *w = c->w;
	struct rndv_pool *rv;
	struct lmsg *lm;
	bool over = false;
	uint32_t peer;

	rv = w->rv;
	peer = c->raw ? 0 : c->rv.peer_max_large;
	if (!rv || len > rv->max_large || len > peer) {
		set_error(-EMSGSIZE, "%s qp 0x%x: a message of %zu bytes exceeds %s maximum %u",
			  c->devname, c->qpn, len, !rv || len > rv->max_large ? "the engine's" :
			  "the peer's", !rv ? w->p->msg_size : len > rv->max_large ? rv->max_large
									   : peer);
		errno = EMSGSIZE;
		return NULL;
	}
	lm = block_get(w, c, len, &over);
	if (!lm) {
		if (over)
			set_error(-ENOBUFS, "%s qp 0x%x: its sends hold their share of the large pool "
				  "(%llu KiB); more once the peer answered them", c->devname, c->qpn,
				  (unsigned long long)(tx_share(w) >> 10));
		errno = ENOBUFS;
		return NULL;
	}
	/* the buffer keeps @c alive until it is back in the pool (engine.h) */
	if (self_worker == w) {
		c->refs_w++;
	} else if (!conn_ref_app(c)) {
		uint64_t size = lm->size;

		lm->size = 0;
		lm->tx_counted = false;
		block_put(w, lm, c, size);
		errno = ENOTCONN;
		return NULL;
	}
	return lm_to_send(lm, c, lm_data(rv, lm), 0,
			  (uint32_t)PC_MIN(lm->size, (uint64_t)PC_MIN(rv->max_large, peer)));
}

int rndv_submit_check(const struct conn *c, struct msg *m)
{
	struct rndv_pool *rv = m->w->rv;
	struct lmsg *lm = lm_of(m);

	if (pc_unlikely(m->pub.data != lm_data(rv, lm)))
		return set_error(-EINVAL, "message data pointer was moved");
	if (pc_unlikely(c->raw))
		return set_error(-EMSGSIZE, "%s qp 0x%x: a large-pool message to a raw peer, "
				 "which has no rendezvous", c->devname, c->qpn);
	if (pc_unlikely(m->pub.len > c->rv.peer_max_large))
		return set_error(-EMSGSIZE, "%s qp 0x%x: message of %u bytes exceeds the peer's "
				 "maximum %u", c->devname, c->qpn, m->pub.len, c->rv.peer_max_large);
	/* one that goes as an ordinary message must fit the peer's receive buffers */
	if (pc_unlikely(m->pub.len <= m->w->p->msg_size && c->peer_max_msg &&
			m->pub.len > c->peer_max_msg))
		return set_error(-EMSGSIZE, "%s qp 0x%x: message of %u bytes exceeds the peer's "
				 "maximum %u", c->devname, c->qpn, m->pub.len, c->peer_max_msg);
	return 0;
}

/* --- completions --------------------------------------------------------------------------- */

/*
 * The sender's window is done with: invalidated, or its state unknown
 * (@dirty: the invalidate failed or never ran, the descriptor's SEND
 * failed, or the conn closed). A dirty one may still let the peer READ
 * until its QP is flushed: its block waits, LM_CLOSED on the conn's tx
 * list, for the end of the drain (rndv_conn_drained()). A failed WR always
 * closes its conn (dp_complete()), so that end comes.
 */
static void tx_end(struct pc_worker *w, struct lmsg *lm, bool dirty)
{
	struct conn *c = lm->rv_conn;

	if (dirty) {
		lm->mw_dirty = true;
		/* no DONE came: the peer may have read it, or not */
		if (!lm->zc_ok)
			lm->zc_status = -ENOTCONN;
		if (!c->rv.drained) {
			lm->state = LM_CLOSED;
			if (!lm->tx_linked)
				rndv_tx_link(w, c, lm);
			return;
		}
	}
	if (lm->tx_linked)
		rndv_tx_unlink(w, c, lm);
	lm->state = LM_IDLE;
	lm->rv_conn = NULL;
	c->rv.tx_open--;
	/* a call's request: no READ can reach it now, it may go back (calls.c) */
	if (lm->m.call_done && lm->send_done) {
		call_sent(w, &lm->m);
		return;
	}
	lm_maybe_free(w, lm);
}

/*
 * The descriptor's SEND completed (or failed): before the message is
 * released or its call told. True when a call's request must wait for its
 * window to be done with (tx_end() tells the call then).
 */
bool rndv_msg_sent(struct pc_worker *w, struct msg *m, bool failed)
{
	struct lmsg *lm = lm_of(m);

	/* an application buffer sent as an ordinary message: the SEND is its outcome */
	if (pc_unlikely(lm->zc) && m->pub.len <= w->p->msg_size) {
		lm->zc_ok = !failed;
		lm->zc_status = failed ? -ENOTCONN : 0;
	}
	/* no DONE will come for it: its window may have been bound */
	if (pc_unlikely(failed) && lm->state == LM_BOUND)
		tx_end(w, lm, true);
	/* from here on tx_end() gives a call's request back, when the window is done */
	lm->send_done = true;
	return m->call_done && lm->state != LM_IDLE;
}

/*
 * @m's call ended before the peer's DONE (calls.c): ask the peer to leave
 * it unread, so that the DONE, and with it the buffer, come back soon. A
 * peer without WIRE_ABORT answers when it has read it, or the DONE
 * deadline closes the connection.
 */
void rndv_call_abort(struct pc_worker *w, struct conn *c, struct msg *m)
{
	struct lmsg *lm = lm_of(m);

	if (lm->state != LM_BOUND || lm->abort_busy || !c->rv.peer_abort || c->state != CONN_UP)
		return;
	lm->abort_busy = true;
	lm->abort_ctx.conn = c;
	rndv_q_add(c, &lm->abort_ctx);
	dp_mark_dirty(w, c);
}

/*
 * @m, a large-pool message, goes out on @c (dp_send()): the block is
 * charged to the connection it is sent on, whichever it was allocated or
 * received on, and keeps that one alive instead.
 */
void rndv_take(struct pc_worker *w, struct conn *c, struct msg *m)
{
	struct lmsg *lm = lm_of(m);
	struct conn *old = lm->ref_conn;
	uint64_t size = lm->size;

	if (old == c)
		return;
	c->refs_w++;
	lm->ref_conn = c;
	m->origin = c;
	if (!lm->zc && (lm->tx_counted || lm->rx_counted)) {
		pthread_spin_lock(&w->rv->lock);
		if (old && lm->tx_counted)
			old->rv.tx_bytes -= size;
		c->rv.tx_bytes += size;
		pthread_spin_unlock(&w->rv->lock);
		if (old && lm->rx_counted)
			old->rv.rx_bytes -= size;
		lm->rx_counted = false;
		lm->tx_counted = true;
	}
	if (old)
		conn_put(w, old);
}

static void read_done(struct pc_worker *w, struct lmsg *lm, bool failed, bool posted)
{
	struct conn *c = lm->rv_conn;
	struct msg *m = &lm->m;

	if (posted)
		c->rv.reads--;
	c->rv.rx_open--;
	lm->state = LM_IDLE;
	lm->rv_conn = NULL;
	if (failed) {
		/* the connection closes (dp_complete()): nothing delivered, the block goes back */
		lm->zc_ok = false;
		lm->zc_status = -ENOTCONN;
		lm->free_pending = true;
		lm_maybe_free(w, lm);
		/* what it held back goes on at the drain's end (rndv_conn_drained()) */
		return;
	}
	if (c->state == CONN_UP) {
		lm->done_token = lm->rd.token;
		lm->done_busy = true;
		lm->done_ctx.conn = c;
		rndv_q_add(c, &lm->done_ctx);
		/*
		 * Posted before the message is delivered: a handler that takes
		 * long on it must not hold the sender's window (and its DONE
		 * deadline) that long. Queued still if it cannot go now.
		 */
		rndv_flush_now(w, c);
		if (c->rv.q_head)
			dp_mark_dirty(w, c);
	}
	/* an application buffer was read into: released() says 0 once it is given back */
	lm->zc_ok = true;
	lm->zc_status = 0;
	m->pub.data = lm_data(w->rv, lm);
	m->pub.len = lm->rd.len;
	m->pub.cap = (uint32_t)PC_MIN(lm->size, (uint64_t)w->rv->max_large);
	m->pub.type = lm->rd.inner;
	m->pub.req_id = lm->rd_req_id;
	m->pub.user = NULL;
	m->pub.conn = (struct pc_conn *)c;
	m->ctx.conn = c;
	m->origin = c;
	STAT_ADD(w->st.rndv_recv, 1);
	dp_deliver_read(w, c, m);
	/* what came after it goes on now, in order */
	c->rv.rx_dlv++;
	if (pc_unlikely(c->rv.hold_head != NULL))
		dp_rx_release(w, c, false);
}

void rndv_sq_done(struct pc_worker *w, struct wr_ctx *ctx, bool failed)
{
	struct lmsg *lm;

	switch (ctx->kind) {
	case WR_RNDV_INV:
		tx_end(w, pc_container_of(ctx, struct lmsg, inv_ctx), failed);
		break;
	case WR_RNDV_READ:
		read_done(w, pc_container_of(ctx, struct lmsg, rd_ctx), failed, true);
		break;
	case WR_RNDV_DONE:
		lm = pc_container_of(ctx, struct lmsg, done_ctx);
		lm->done_busy = false;
		lm_maybe_free(w, lm);
		break;
	case WR_RNDV_ABORT:
		lm = pc_container_of(ctx, struct lmsg, abort_ctx);
		lm->abort_busy = false;
		lm_maybe_free(w, lm);
		break;
	default: /* WR_RNDV_BIND */
		lm = pc_container_of(ctx, struct lmsg, bind_ctx);
		/*
		 * Observed on rxe (rdma-core 44, kernel 6.1): a bind names the
		 * window by mw->rkey, which must be the key the device has now, but
		 * the provider never updates it after a bind: the window's second
		 * bind failed (IBV_WC_MW_BIND_ERR). So it is set here, once the bind
		 * is done; the next bind of this window comes only after its
		 * invalidate completed, which retires this one first. A failed bind
		 * fails the descriptor after it too; the window is renewed then.
		 */
		if (!failed)
			lm->mw->rkey = lm->rkey;
		else
			lm->mw_dirty = true;
		break;
	}
}

/* A rendezvous WR still in the backlog of a closing connection. */
void rndv_cancel(struct pc_worker *w, struct wr_ctx *ctx)
{
	if (ctx->kind == WR_RNDV_READ)
		read_done(w, pc_container_of(ctx, struct lmsg, rd_ctx), true, false);
	else
		rndv_sq_done(w, ctx, true);
}

void rndv_release(struct pc_worker *w, struct msg *m, struct conn *origin)
{
	struct lmsg *lm = lm_of(m);

	if (pc_unlikely(!lm->size || lm->free_pending)) {
		pc_err("%s: large buffer %u given back twice (pc_msg_release() or a send of a "
		       "message no longer yours); ignored", w->name, lm_index(w->rv, lm));
		return;
	}
	/* worker teardown: its connection is gone already */
	if (!origin)
		lm->ref_conn = NULL;
	lm->free_pending = true;
	lm_maybe_free(w, lm);
}

/* --- receiving ------------------------------------------------------------------------------ */

static void rndv_fail(struct pc_worker *w, struct conn *c, const char *why)
{
	set_error(-EPROTO, "%s port %u qp 0x%x: %s; closing", w->dev->name, w->dev->port, c->qpn,
		  why);
	w->up.fail(w, c, -EPROTO);
}

/* Starts reading @d into a block, if there is room and the conn is within its share. */
static bool start_read(struct pc_worker *w, struct conn *c, const struct wire_rndv *d,
		       uint64_t req_id)
{
	struct rndv_pool *rv = w->rv;
	uint64_t share = rv->size / PC_MAX(w->ncredited, 1u);
	struct lmsg *lm;

	/* the application's buffer (on_large), else the pool */
	lm = w->p->on_large ? rndv_zc_recv(w, c, d, req_id) : NULL;
	if (!lm) {
		/* one message at a time at least; more only within its share of the pool */
		if (c->rv.rx_bytes && c->rv.rx_bytes + d->len > share)
			return false;
		lm = block_get(w, NULL, d->len, NULL);
		if (!lm)
			return false;
		lm->rx_counted = true;
		c->rv.rx_bytes += lm->size;
	}
	lm->state = LM_READ;
	lm->rv_conn = c;
	lm->ref_conn = c;
	c->refs_w++;
	lm->rd = *d;
	lm->rd_req_id = req_id;
	lm->rd_ctx.conn = c;
	rndv_q_add(c, &lm->rd_ctx);
	if (c->state == CONN_UP)
		dp_mark_dirty(w, c);
	return true;
}

static void wait_gauge(struct pc_worker *w)
{
	__atomic_store_n(&w->st.large_waiting, w->rv->waiting, __ATOMIC_RELAXED);
}

/*
 * Starts the READs of @c's waiting descriptors, in order, while there is
 * room; those the sender withdrew (WIRE_ABORT) are passed over, finished
 * unread, where their turn comes.
 */
static void pend_advance(struct pc_worker *w, struct conn *c)
{
	struct rndv_pool *rv = w->rv;
	struct rndv_conn *r = &c->rv;

	while (r->pend_n) {
		uint32_t h = r->pend_head;

		if (r->pend_abort[h]) {
			r->pend_abort[h] = false;
			r->rx_open--;
			/* finished, unread: what arrived behind it goes on (dp_rx_release()) */
			r->rx_dlv++;
			if (r->hold_head)
				dp_rx_release(w, c, false);
		} else if (!start_read(w, c, &r->pend[h], r->pend_req[h])) {
			break;
		}
		r->pend_head = (h + 1) % WIRE_RNDV_MAX;
		r->pend_n--;
		rv->waiting--;
	}
}

/* Room came back: the waiting descriptors, in order per conn, conn after conn. */
static void rndv_kick(struct pc_worker *w)
{
	struct rndv_pool *rv = w->rv;
	struct conn **pp = &rv->wait, *c;

	while ((c = *pp)) {
		struct rndv_conn *r = &c->rv;

		pend_advance(w, c);
		if (!r->pend_n) {
			*pp = r->wait_next;
			r->waiting = false;
		} else {
			pp = &r->wait_next;
		}
	}
	wait_gauge(w);
}

static void wait_del(struct pc_worker *w, struct conn *c)
{
	struct conn **pp;

	for (pp = &w->rv->wait; *pp; pp = &(*pp)->rv.wait_next)
		if (*pp == c) {
			*pp = c->rv.wait_next;
			break;
		}
	c->rv.waiting = false;
}

static void desc_recv(struct pc_worker *w, struct conn *c, const void *payload, uint32_t len,
		      uint64_t req_id)
{
	struct rndv_pool *rv = w->rv;
	struct rndv_conn *r = &c->rv;
	struct wire_rndv d;
	char why[160];

	if (wire_rndv_check(payload, len, w->p->msg_size, rv ? rv->max_large : 0, &d, why,
			    sizeof(why))) {
		rndv_fail(w, c, why);
		return;
	}
	if (r->rx_open >= WIRE_RNDV_MAX) {
		snprintf(why, sizeof(why), "more than %u rendezvous descriptors unanswered",
			 WIRE_RNDV_MAX);
		rndv_fail(w, c, why);
		return;
	}
	r->rx_open++;
	r->rx_seq++;
	if (!r->pend_n && start_read(w, c, &d, req_id))
		return;
	/* no room now: in order, read as room comes back (rndv_kick()) */
	r->pend[(r->pend_head + r->pend_n) % WIRE_RNDV_MAX] = d;
	r->pend_req[(r->pend_head + r->pend_n) % WIRE_RNDV_MAX] = req_id;
	r->pend_abort[(r->pend_head + r->pend_n) % WIRE_RNDV_MAX] = false;
	r->pend_n++;
	rv->waiting++;
	if (!r->waiting) {
		r->waiting = true;
		r->wait_next = rv->wait;
		rv->wait = c;
	}
	wait_gauge(w);
}

static void done_recv(struct pc_worker *w, struct conn *c, const void *payload, uint32_t len)
{
	struct rndv_pool *rv = w->rv;
	struct wire_done dn;
	struct lmsg *lm = NULL;
	uint32_t idx;
	char why[160];

	if (wire_done_check(payload, len, &dn)) {
		snprintf(why, sizeof(why), "malformed rendezvous DONE (%u bytes)", len);
		rndv_fail(w, c, why);
		return;
	}
	idx = (uint32_t)dn.token;
	if (rv && idx < rv->nlm)
		lm = &rv->lm[idx];
	if (!lm || lm->state != LM_BOUND || lm->rv_conn != c || lm->gen != (uint32_t)(dn.token >> 32)) {
		snprintf(why, sizeof(why), "rendezvous DONE for token 0x%llx, which this connection "
			 "has not sent", (unsigned long long)dn.token);
		rndv_fail(w, c, why);
		return;
	}
	if (dn.status)
		pc_debug("%s qp 0x%x: the peer could not read rendezvous token 0x%llx: %s",
			 w->dev->name, c->qpn, (unsigned long long)dn.token, strerror(-dn.status));
	rndv_tx_unlink(w, c, lm);
	/* the DONE deadline counts from the peer's last answer (rndv_overdue()) */
	c->rv.done_ns = coarse_ns();
	lm->zc_ok = true;
	lm->zc_status = dn.status >= -4095 ? dn.status : -EIO;	/* the peer's word */
	lm->state = LM_INV;
	lm->inv_ctx.conn = c;
	rndv_q_add(c, &lm->inv_ctx);
	dp_mark_dirty(w, c);
}

/*
 * The sender withdraws a descriptor (WIRE_ABORT in @m): one still waiting
 * for room is dropped, and @m's buffer carries the DONE (-ECANCELED) back
 * at once; one whose READ started, or that this side answered already, is
 * answered as it would have been, and @m goes back.
 */
static void abort_recv(struct pc_worker *w, struct conn *c, struct msg *m, uint32_t len)
{
	struct rndv_conn *r = &c->rv;
	struct wire_done dn;
	uint32_t i, k = 0;

	if (wire_done_check(m->pub.data, len, &dn) || dn.status) {
		dp_msg_release(w, m);
		rndv_fail(w, c, "malformed rendezvous ABORT");
		return;
	}
	for (i = 0; i < r->pend_n; i++) {
		k = (r->pend_head + i) % WIRE_RNDV_MAX;
		if (r->pend[k].token == dn.token && !r->pend_abort[k])
			break;
	}
	if (i == r->pend_n || c->state != CONN_UP) {
		dp_msg_release(w, m);
		return;
	}
	r->pend_abort[k] = true;
	/* the ABORT's own buffer answers it, as a reply in place would */
	dn.status = -ECANCELED;
	memcpy(m->pub.data, &dn, sizeof(dn));
	m->pub.len = sizeof(dn);
	m->pub.type = WIRE_DONE;
	m->pub.req_id = 0;
	m->call_done = NULL;
	m->ctx.conn = c;
	dp_backlog_add(c, &m->ctx);
	dp_mark_dirty(w, c);
	/* at the head: passed over now, and what waits behind it may start */
	if (i == 0)
		pend_advance(w, c);
}

/* A received WIRE_RNDV, WIRE_DONE or WIRE_ABORT (credit counted); @m goes back here. */
void rndv_recv(struct pc_worker *w, struct conn *c, struct msg *m, const struct wire_hdr *h)
{
	char buf[sizeof(struct wire_rndv)];
	uint32_t len = PC_MIN(h->len, (uint32_t)sizeof(buf));
	uint64_t req_id = h->req_id;
	uint8_t type = h->type;

	if (type == WIRE_ABORT && c->state == CONN_UP && w->rv) {
		abort_recv(w, c, m, h->len);
		return;
	}
	memcpy(buf, (char *)m->buf->addr + HDR, len);
	len = h->len;
	dp_msg_release(w, m);
	/* closing: nothing more is read, no window is invalidated (rndv_conn_close() did) */
	if (c->state != CONN_UP && c->state != CONN_ATTACHED)
		return;
	if (type == WIRE_RNDV)
		desc_recv(w, c, buf, len, req_id);
	else if (type == WIRE_DONE)
		done_recv(w, c, buf, len);
	/* an ABORT without a pool to read into, or before UP: nothing to withdraw */
}

/*
 * @c is closing (its QP in ERR, its backlog given back): descriptors
 * waiting for room are dropped, and windows still bound for it, whose DONE
 * will not come, wait for the drain's end (LM_CLOSED), then are renewed
 * before their blocks are used again.
 */
void rndv_conn_close(struct pc_worker *w, struct conn *c)
{
	struct rndv_pool *rv = w->rv;
	struct lmsg *lm;

	if (!rv)
		return;
	if (c->rv.waiting)
		wait_del(w, c);
	rv->waiting -= c->rv.pend_n;
	c->rv.rx_open -= c->rv.pend_n;
	c->rv.pend_n = 0;
	wait_gauge(w);
	/* READs, DONEs, invalidates never posted: as if flushed */
	while (c->rv.q_head) {
		struct wr_ctx *ctx = c->rv.q_head;

		c->rv.q_head = ctx->next;
		rndv_cancel(w, ctx);
	}
	c->rv.q_tail = NULL;
	for (lm = c->rv.tx_head; lm; lm = lm->tx_next)
		if (lm->state == LM_BOUND)
			tx_end(w, lm, true);
}

/*
 * @c's drain ended: its QP is in ERR and flushed past its marker (or was
 * reset), and its receive side quiet (LAST_WQE_REACHED or the grace
 * period): no READ of the peer's reaches the pool through it any more.
 * The windows left bound are renewed and their blocks go back.
 */
void rndv_conn_drained(struct pc_worker *w, struct conn *c)
{
	struct lmsg *lm;

	if (!w->rv)
		return;
	c->rv.drained = true;
	while ((lm = c->rv.tx_head))
		tx_end(w, lm, true);
	/* messages held behind descriptors never read: on before DOWN (given back if never UP) */
	dp_rx_release(w, c, true);
}

/*
 * The DONE deadline (keepalive.c's look, every keepalive period / 2) closes
 * @c with -ETIMEDOUT when descriptors wait and the peer answered none for
 * @limit_ns (since the oldest was sent, or since its last DONE if later:
 * a receiver that is slow, its pool full, still answers now and then),
 * or when the oldest has waited RNDV_OLDEST_LIMITS x @limit_ns whatever
 * the peer answered meanwhile. Return: true if it closed @c.
 */
bool rndv_overdue(struct pc_worker *w, struct conn *c, uint64_t now, uint64_t limit_ns)
{
	struct lmsg *lm = c->rv.tx_head;
	uint64_t quiet, since;

	if (!lm || lm->state != LM_BOUND)
		return false;
	since = PC_MAX(lm->sent_ns, c->rv.done_ns);
	if (now <= since + limit_ns && now <= lm->sent_ns + RNDV_OLDEST_LIMITS * limit_ns)
		return false;
	quiet = now > since ? now - since : 0;
	set_error(-ETIMEDOUT, "%s port %u qp 0x%x: %u rendezvous descriptors unanswered, the "
		  "oldest for %llu ms, no DONE for %llu ms (limits: %llu ms without a DONE, "
		  "%llu ms for one descriptor)", w->dev->name, w->dev->port, c->qpn,
		  c->rv.tx_wait, (unsigned long long)(now - lm->sent_ns) / 1000000,
		  (unsigned long long)quiet / 1000000, (unsigned long long)limit_ns / 1000000,
		  (unsigned long long)(RNDV_OLDEST_LIMITS * limit_ns) / 1000000);
	w->up.fail(w, c, -ETIMEDOUT);
	return true;
}

const char *rndv_what(const struct wr_ctx *ctx)
{
	switch (ctx->kind) {
	case WR_RNDV_BIND: return "rendezvous memory-window BIND";
	case WR_RNDV_INV: return "rendezvous LOCAL_INV";
	case WR_RNDV_READ: return "rendezvous RDMA_READ of the peer's descriptor";
	case WR_RNDV_ABORT: return "rendezvous ABORT";
	default: return "rendezvous DONE";
	}
}
