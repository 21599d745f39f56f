// SPDX-License-Identifier: MIT
/*
 * Requests (pc_call()), on the worker that owns the connection.
 *
 * A request the worker takes in (dp_send()) enters the connection's window
 * of ids in flight (c->reqs, at most `window`, the late ones included) or,
 * when the window is full, waits in the connection's call queue (cw_*) in
 * order, its deadline running, until a response or a dropped late one
 * frees a place. pc_call() refuses (-EAGAIN) only beyond max_calls calls
 * not ended, so an application never spins on a full window.
 *
 * A call with a completion ends exactly once, with the first of:
 *
 *   its response           -> done(response, 0)
 *   its deadline           -> done(request, -ETIMEDOUT)   (calls_expire())
 *   pc_call_cancel()       -> done(request, -ECANCELED)   (call_cancel_*())
 *   the connection closing -> done(request, -ENOTCONN)    (calls_close())
 *
 * wherever the request is then: queued for the window, in the backlog
 * (waiting for credits or send-queue room: it leaves the backlog and the
 * window at once, no response can come), or posted. The request's buffer
 * is the call's state (struct msg's call_* fields) and what carries its
 * completion when it fails: the worker keeps it until the call ended and
 * nothing uses the buffer any more (CALL_ENDED, CALL_SENT: its send
 * completed or it never left; for a large request, the peer can no longer
 * read it either, rndv.c; CALL_CANCEL_Q clear: no cancel names it on the
 * way), and gives it back intact. A call that ended before its response
 * keeps its id in the window (CALL_LATE) until the response comes
 * (dropped, counted) or the connection closes.
 *
 * Ids and cancels. A call's id is (seq << 32 | caller << 20 | gidx): the
 * caller's own sequence (an application slot's, or the worker's), the
 * caller, and the request buffer's index among the worker's messages. So
 * ids are unique in the engine, and pc_call_cancel() on any thread finds
 * the call's buffer from the id alone: it marks the buffer's call_live
 * word (a compare-and-swap against the id, so a buffer reused since is
 * never touched) and hands the buffer's own cancel_ctx to the worker. A
 * cancel needs no buffer and no ring slot: it cannot fail for lack of
 * either.
 *
 * Deadlines count in stats_ticks(): the worker looks at them every turn
 * while one is due (w->call_due), and a hybrid worker sleeps no longer
 * than until the earliest.
 */
#include "rndv_pvt.h"

#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

enum {
	CALL_ENDED = 1,		/* call_status holds the outcome */
	CALL_SENT = 2,		/* the device no longer uses the request's buffer */
	CALL_CANCEL_Q = 4,	/* its cancel_ctx is on the worker's queue, or about to be */
	CALL_WAITING = 8,	/* on the connection's call queue, not yet in the window */
};

/* --- the completion --------------------------------------------------------------------- */

/* Runs the completion carried by @m, or hands it to the caller's slot. */
static void call_deliver(struct pc_worker *w, struct msg *m)
{
	pc_call_fn done = m->call_done;

	if (m->call_slot >= 0 && w->p->handoff == PC_HANDOFF_RING) {
		/* pc_app_poll() on the calling thread runs it */
		dp_deliver_slot(w, (unsigned int)m->call_slot, m);
		return;
	}
	m->call_done = NULL;
	done(&m->pub, m->call_status, m->call_arg);
}

/* Ended, sent, no cancel on the way: the request goes back (failed) or to its pool. */
static void call_maybe_finish(struct pc_worker *w, struct msg *m)
{
	const uint8_t all = CALL_ENDED | CALL_SENT;

	if ((m->call_flags & (all | CALL_CANCEL_Q)) != all)
		return;
	m->call_flags = 0;
	if (m->call_status == 0) {
		m->call_done = NULL;
		dp_msg_release(w, m);
		return;
	}
	call_deliver(w, m);
}

static void call_end(struct pc_worker *w, struct conn *c, struct msg *m, int status)
{
	/* no cancel can name it from now on; one that did is on its way (CALL_CANCEL_Q) */
	uint64_t live = atomic_exchange_explicit(&m->call_live, 0, memory_order_acquire);

	if (live & CALL_CANCEL_BIT)
		m->call_flags |= CALL_CANCEL_Q;
	m->call_flags |= CALL_ENDED;
	m->call_status = status;
	if (m->call_deadline)
		c->calls_timed--;
	call_counted_end(c);
	call_maybe_finish(w, m);
}

/* --- the window and the queue ----------------------------------------------------------- */

static void call_timed(struct pc_worker *w, struct conn *c, struct msg *m)
{
	c->calls_timed++;
	if (!c->on_call_list) {
		c->on_call_list = true;
		c->calls_next = w->call_conns;
		w->call_conns = c;
	}
	if (!w->call_due || m->call_deadline < w->call_due)
		w->call_due = m->call_deadline;
}

/* @m's id enters the window: it goes to the backlog, to be posted. */
static void call_enter(struct pc_worker *w, struct conn *c, struct msg *m)
{
	/* never full here (the caller looked), and ids are unique in the engine */
	reqset_add_ptr(&c->reqs, m->pub.req_id, m->t_call, m->call_done ? m : NULL);
	STAT_ADD(c->inflight_req, 1);
	CONN_GAUGE_SET(c, inflight_req);
	dp_backlog_add(c, &m->ctx);
	if (c->state == CONN_UP)
		dp_mark_dirty(w, c);
}

/* dp_send(): a request of @c (not raw); it is the worker's now and ends exactly once. */
void call_submit(struct pc_worker *w, struct conn *c, struct msg *m)
{
	if (m->call_done) {
		m->call_flags = 0;
		m->call_status = 0;
		if (m->call_deadline)
			call_timed(w, c, m);
	}
	if (pc_likely(!c->cw_head && c->reqs.n < c->window)) {
		call_enter(w, c, m);
		return;
	}
	/* the window is full (late calls hold places too): in order, behind the others */
	m->call_flags |= CALL_WAITING;
	m->ctx.next = NULL;
	*(c->cw_head ? c->cw_tail : &c->cw_head) = &m->ctx;
	c->cw_tail = &m->ctx.next;
	c->cw_n++;
}

/* Places came free in @c's window: the calls waiting for one go in, in order. */
void call_admit(struct pc_worker *w, struct conn *c)
{
	while (c->cw_head && c->reqs.n < c->window && conn_accepts(c)) {
		struct msg *m = pc_container_of(c->cw_head, struct msg, ctx);

		c->cw_head = m->ctx.next;
		c->cw_n--;
		m->call_flags &= (uint8_t)~CALL_WAITING;
		call_enter(w, c, m);
	}
}

/* Takes @m off @c's call queue. */
static void cw_unlink(struct conn *c, struct msg *m)
{
	struct wr_ctx **pp = &c->cw_head, *prev = NULL;

	while (*pp != &m->ctx) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = m->ctx.next;
	if (c->cw_tail == &m->ctx.next)
		c->cw_tail = prev ? &prev->next : &c->cw_head;
	c->cw_n--;
	m->call_flags &= (uint8_t)~CALL_WAITING;
}

/* Takes @ctx out of @c's backlog if it is there (not yet posted); true if it was. */
static bool backlog_unlink(struct conn *c, struct wr_ctx *ctx)
{
	struct wr_ctx **pp, *prev = NULL;

	for (pp = &c->bl_head; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != ctx)
			continue;
		*pp = ctx->next;
		if (c->bl_tail == &ctx->next)
			c->bl_tail = prev ? &prev->next : &c->bl_head;
		STAT_ADD(c->backlog, (uint32_t)-1);
		CONN_GAUGE_SET(c, backlog);
		return true;
	}
	return false;
}

/*
 * Ends @m's call early (deadline, cancel) with @status, wherever its request
 * is. Waiting for the window or in the backlog, it never reached the wire:
 * it leaves the window too, and comes back at once. Posted, its id stays
 * as late (a response may still come) and the request comes back once the
 * device is done with it.
 */
static void call_fail(struct pc_worker *w, struct conn *c, struct msg *m, int status)
{
	struct reqent *e;

	if (m->call_flags & CALL_WAITING) {
		cw_unlink(c, m);
		m->call_flags |= CALL_SENT;
		call_end(w, c, m, status);
		return;
	}
	e = reqset_find(&c->reqs, m->pub.req_id);
	if (backlog_unlink(c, &m->ctx)) {
		reqset_take(&c->reqs, m->pub.req_id, NULL);
		STAT_ADD(c->inflight_req, (uint32_t)-1);
		CONN_GAUGE_SET(c, inflight_req);
		m->call_flags |= CALL_SENT;
		call_end(w, c, m, status);
		call_admit(w, c);
		return;
	}
	/* on the wire: a late response may come; it keeps its place until then */
	if (e)
		e->ptr = CALL_LATE;
	if (status != -ENOTCONN)
		c->unanswered++;
	/* a large request: the peer is asked to leave it unread (rndv.c) */
	if (pc_unlikely(m->pool == POOL_LARGE) && status != -ENOTCONN)
		rndv_call_abort(w, c, m);
	call_end(w, c, m, status);
}

/* The send queue (or a backlog given back) is done with the request's buffer. */
void call_sent(struct pc_worker *w, struct msg *m)
{
	m->call_flags |= CALL_SENT;
	call_maybe_finish(w, m);
}

/* A request that reached a closed connection: never in flight. */
void call_refused(struct pc_worker *w, struct conn *c, struct msg *m)
{
	atomic_store_explicit(&m->call_live, 0, memory_order_relaxed);
	if (m->call_done) {
		m->call_flags = CALL_ENDED | CALL_SENT;
		m->call_status = -ENOTCONN;
		call_counted_end(c);
		call_deliver(w, m);
		return;
	}
	call_counted_end(c);
	dp_msg_release(w, m);
}

/* The response to a call with a completion (@call: its reqset pointer, or CALL_LATE). */
void call_answer(struct pc_worker *w, struct conn *c, struct msg *resp, void *call)
{
	struct msg *req = call;

	if (call == CALL_LATE) {
		/* its completion ran already (deadline, cancel or close): dropped, counted */
		if (c->unanswered)
			c->unanswered--;
		STAT_ADD(c->st->late_responses, 1);
		dp_msg_release(w, resp);
		return;
	}
	resp->call_done = req->call_done;
	resp->call_arg = req->call_arg;
	resp->call_slot = req->call_slot;
	resp->call_status = 0;
	call_end(w, c, req, 0);
	call_deliver(w, resp);
}

/* --- cancels ---------------------------------------------------------------------------- */

/* Whether @m's call is still to end. */
static inline bool call_pending(const struct msg *m)
{
	return m->call_done && !(m->call_flags & CALL_ENDED);
}

static void cancel(struct pc_worker *w, struct msg *m)
{
	struct conn *c = m->ctx.conn;

	if (!call_pending(m) || c->state >= CONN_DRAINING)
		return;	/* answered or ended meanwhile; a closing conn's calls end with it */
	STAT_ADD(c->st->call_cancels, 1);
	call_fail(w, c, m, -ECANCELED);
}

/* A cancel_ctx off the submission queue: @m's call was asked to end. */
void call_cancel_dequeued(struct pc_worker *w, struct msg *m)
{
	m->call_flags &= (uint8_t)~CALL_CANCEL_Q;
	if (!(m->call_flags & CALL_ENDED)) {
		/* asked before it ended: the call_live exchange in call_end() has not run */
		atomic_store_explicit(&m->call_live, 0, memory_order_relaxed);
		cancel(w, m);
		return;
	}
	call_maybe_finish(w, m);
}

/* pc_call_cancel() on @m's own worker: at once. */
void call_cancel_here(struct pc_worker *w, struct msg *m)
{
	cancel(w, m);
}

/* --- closing ------------------------------------------------------------------------------ */

static void call_list_del(struct pc_worker *w, struct conn *c)
{
	struct conn **pp;

	if (!c->on_call_list)
		return;
	for (pp = &w->call_conns; *pp != c; pp = &(*pp)->calls_next)
		;
	*pp = c->calls_next;
	c->on_call_list = false;
}

/*
 * drain_begin(): every call still to end ends with -ENOTCONN, the queued
 * ones given back at once; before the backlog is cancelled and the send
 * queue flushed, which give the others' buffers back (call_sent()).
 */
void calls_close(struct pc_worker *w, struct conn *c)
{
	uint32_t i;

	while (c->cw_head) {
		struct msg *m = pc_container_of(c->cw_head, struct msg, ctx);

		c->cw_head = m->ctx.next;
		c->cw_n--;
		m->call_flags &= (uint8_t)~CALL_WAITING;
		if (m->call_done) {
			m->call_flags |= CALL_SENT;
			call_end(w, c, m, -ENOTCONN);
		} else {
			dp_count_dropped(w, c, 1);
			call_counted_end(c);
			dp_msg_release(w, m);
		}
	}
	c->cw_tail = &c->cw_head;
	for (i = 0; c->reqs.n && i <= c->reqs.mask; i++) {
		struct reqent *e = &c->reqs.slot[i];

		if (e->id && e->ptr && e->ptr != CALL_LATE) {
			struct msg *m = e->ptr;

			e->ptr = CALL_LATE;
			call_end(w, c, m, -ENOTCONN);
		}
	}
	call_list_del(w, c);
	/* what is still due may come while it drains: dropped as late, nothing more */
	c->unanswered = 0;
}

/* --- deadlines ---------------------------------------------------------------------------- */

/* Ends @m's call if its deadline passed at @now; else folds it into *@due. */
static bool expire_one(struct pc_worker *w, struct conn *c, struct msg *m, uint64_t now,
		       uint64_t *due)
{
	if (!m->call_deadline || !call_pending(m))
		return false;
	if (m->call_deadline > now) {
		if (!*due || m->call_deadline < *due)
			*due = m->call_deadline;
		return false;
	}
	STAT_ADD(c->st->call_timeouts, 1);
	call_fail(w, c, m, -ETIMEDOUT);
	return true;
}

/*
 * One pass over @c's calls at @now: those past their deadline end. Returns
 * whether any did (a completion that ran then may have ended or moved
 * others: the caller looks again); *@due gets the earliest still to come.
 */
static bool expire_pass(struct pc_worker *w, struct conn *c, uint64_t now, uint64_t *due)
{
	struct wr_ctx *ctx, *next;
	bool failed = false;
	uint32_t i;

	*due = 0;
	/* queued for the window: each taken off as it fails, so the next is read first */
	for (ctx = c->cw_head; ctx && c->calls_timed; ctx = next) {
		next = ctx->next;
		if (expire_one(w, c, pc_container_of(ctx, struct msg, ctx), now, due))
			return true;
	}
	for (i = 0; c->calls_timed && i <= c->reqs.mask; i++) {
		struct reqent *e = &c->reqs.slot[i];

		if (e->id && e->ptr && e->ptr != CALL_LATE &&
		    expire_one(w, c, e->ptr, now, due))
			failed = true;
	}
	return failed;
}

/* The deadlines of @c's calls at @now; returns the earliest still to come (0: none). */
static uint64_t conn_expire(struct pc_worker *w, struct conn *c, uint64_t now)
{
	uint64_t due = 0;

	/* until a pass ends nothing: each that does ends at least one call, so this stops */
	while (c->calls_timed && c->state < CONN_DRAINING && expire_pass(w, c, now, &due))
		;
	/* every place of the window held by a call that will never be answered */
	if (c->state < CONN_DRAINING && c->unanswered >= w->p->max_unanswered) {
		set_error(-ETIMEDOUT,
			  "%s port %u qp 0x%x: %u calls unanswered after their deadline or cancel (max_unanswered %u); closing",
			  w->dev->name, w->dev->port, c->qpn, c->unanswered, w->p->max_unanswered);
		w->up.fail(w, c, -ETIMEDOUT);
	}
	return due;
}

/* While some call has a deadline, every turn: those that passed end. */
void calls_expire(struct pc_worker *w, uint64_t now)
{
	struct conn **pp = &w->call_conns;
	uint64_t due = 0;

	/* a completion that runs in here may make a call with an earlier deadline: it lowers this */
	w->call_due = 0;
	while (*pp) {
		struct conn *c = *pp;
		uint64_t d = c->state < CONN_DRAINING ? conn_expire(w, c, now) : 0;

		/* conn_expire() may have closed it: calls_close() took it off the list then */
		if (*pp != c)
			continue;
		if (!c->calls_timed) {
			*pp = c->calls_next;
			c->on_call_list = false;
			continue;
		}
		if (d && (!due || d < due))
			due = d;
		pp = &c->calls_next;
	}
	if (due && (!w->call_due || due < w->call_due))
		w->call_due = due;
}

/* --- ids ---------------------------------------------------------------------------------- */

/*
 * The message of @w whose gidx is @gidx, or NULL: receive buffers, send
 * buffers, raw receive buffers, packed frames, then the large pool's
 * entries. Any thread: the arrays are set up before the engine runs and
 * stay until it goes.
 */
struct msg *msg_by_gidx(struct pc_worker *w, uint32_t gidx)
{
	const struct pc_engine_params *p = w->p;

	if (gidx < p->rx_bufs)
		return &w->rx_msgs[gidx];
	gidx -= p->rx_bufs;
	if (gidx < p->tx_bufs)
		return &w->tx_msgs[gidx];
	gidx -= p->tx_bufs;
	if (gidx < p->raw_bufs)
		return &w->raw_msgs[gidx];
	gidx -= p->raw_bufs;
	if (gidx < w->npack)
		return &w->pack_msgs[gidx];
	gidx -= w->npack;
	return w->rv && gidx < w->rv->nlm ? &w->rv->lm[gidx].m : NULL;
}

/*
 * A message read by rendezvous (rndv.c), bound to @c: counted and handed
 * over as a received one is, or to its call. Only once UP (READs are
 * posted only then).
 */
void dp_deliver_read(struct pc_worker *w, struct conn *c, struct msg *m)
{
	void *call = NULL;

	STAT_ADD(c->st->msgs_recv, 1);
	STAT_ADD(c->st->bytes_recv, m->pub.len);
	STAT_ADD(w->st.rx_msgs, 1);
	if (m->pub.type == PC_MSG_RESPONSE && !call_response_match(w, c, m->pub.req_id, &call)) {
		dp_msg_release(w, m);
		w->up.fail(w, c, -EPROTO);
		return;
	}
	if (call)
		call_answer(w, c, m, call);
	else
		dp_deliver(w, w->p, c, m);
}
