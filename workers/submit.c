// SPDX-License-Identifier: MIT
/*
 * The application-facing calls on messages and operations, and the
 * application slots: each routes its work to the worker that owns the
 * connection, directly when called on that worker, through the worker's
 * submission queue (core/mpscq.h: every submission carries its own node,
 * so none is ever refused) otherwise.
 */
#include "engine_pvt.h"
#include "rndv_pvt.h"
#include "abi_pvt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log_pvt.h"

/*
 * The app slots this thread is attached to, one per engine (few engines
 * per process). An engine is named by its address and its serial: one
 * created later at the same address, after the first was destroyed with
 * this thread still attached, is another engine.
 */
#define APP_BINDINGS 4
static __thread struct {
	struct pc_engine *e;
	uint64_t serial;
	int slot;
	uint32_t seq;	/* this thread's call sequence on @e (call ids) */
} app_binding[APP_BINDINGS];

static int app_binding_of(const struct pc_engine *e)
{
	unsigned int i;

	for (i = 0; i < APP_BINDINGS; i++)
		if (app_binding[i].e == e && app_binding[i].serial == e->serial)
			return (int)i;
	return -1;
}

static int app_slot(const struct pc_engine *e)
{
	int i = app_binding_of(e);

	return i < 0 ? -1 : app_binding[i].slot;
}

/* --- routing --------------------------------------------------------------------------- */

/*
 * Hands @ctx to worker @w, which is not this thread: its submission queue
 * takes every node (each submission carries its own), so this never fails.
 */
static pc_always_inline void submit(struct pc_worker *w, struct wr_ctx *ctx)
{
	mpscq_push(&w->submit, &ctx->qnode);
	worker_wake(w);
}

/*
 * Runs @ctx's action on its worker: directly on that worker, else through
 * its submission queue. A submission that names a conn nothing else keeps
 * alive (@ref: a message sent on a conn other than its own) takes a
 * reference on it, which the worker gives back when it takes the
 * submission: -ENOTCONN when that conn is closing (nothing submitted).
 */
static pc_always_inline int route(struct pc_worker *w, struct wr_ctx *ctx, bool ref)
{
	ctx->ref = 0;
	if (self_worker == w) {
		if (ctx->action == ACT_SEND)
			return dp_send(w, pc_container_of(ctx, struct msg, ctx));
		if (ctx->action == ACT_RDMA)
			return dp_rdma(w, op_of_ctx(ctx));
		dp_submit(w, ctx);
		return 0;
	}
	if (ref) {
		if (pc_unlikely(!conn_ref_app(ctx->conn)))
			return -ENOTCONN;
		ctx->ref = 1;
	}
	submit(w, ctx);
	return 0;
}

struct pc_msg *pc_msg_alloc(struct pc_conn *pconn)
{
	struct conn *c = (struct conn *)pconn;
	struct pc_worker *w = c->w;
	struct msg *m = NULL;
	void *obj;
	int slot;

	if (pc_unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING)) {
		errno = ENOTCONN;
		return NULL;
	}
	/* the buffer keeps @c alive until it is back in the pool (engine.h) */
	if (self_worker == w) {
		m = dp_tx_alloc(w);
		if (m)
			c->refs_w++;
	} else if ((slot = app_slot(c->e)) >= 0) {
		if (pc_unlikely(!conn_ref_app(c))) {
			errno = ENOTCONN;
			return NULL;
		}
		if (pc_ring_spsc_dequeue_burst(w->chans[slot].txfree, &obj, 1)) {
			m = obj;
		} else {
			conn_unref_app(c);
			/*
			 * The stock is empty: a worker asleep (hybrid idle) would not
			 * top it up before something else woke it; a busy one does
			 * within HOUSEKEEP_TURNS turns (dp_topup_txfree()).
			 */
			worker_wake(w);
		}
	} else {
		set_error(-EPERM, "pc_msg_alloc: call pc_app_attach() on this thread first");
		errno = EPERM;
		return NULL;
	}
	if (!m) {
		errno = ENOBUFS;
		return NULL;
	}
	m->pub.len = 0;
	m->pub.type = PC_MSG_ONEWAY;
	m->pub.req_id = 0;
	m->call_done = NULL;
	m->ctx.conn = c;
	m->origin = c;
	msg_bind(m, c);
	return &m->pub;
}

struct pc_msg *pc_msg_alloc_size(struct pc_conn *pconn, size_t len)
{
	struct conn *c = (struct conn *)pconn;

	/* first: a handle may outlive its worker (past pc_engine_destroy()), not read it then */
	if (pc_unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING)) {
		errno = ENOTCONN;
		return NULL;
	}
	if (pc_likely(len <= c->w->p->msg_size))
		return pc_msg_alloc(pconn);
	/* above it: rendezvous, a block of the large pool (rndv.c) */
	return rndv_msg_alloc(c, len);
}

/*
 * Whether @m may be sent on @c: 0, or -EMSGSIZE, -EXDEV, -EINVAL (the
 * message is still the caller's), pc_last_error() saying why.
 */
static pc_always_inline int msg_check(const struct conn *c, struct msg *m)
{
	const struct pc_msg *pm = &m->pub;

	if (pc_unlikely(pm->len > pm->cap))
		return set_error(-EMSGSIZE, "message of %u bytes exceeds capacity %u", pm->len,
				    pm->cap);
	if (pc_unlikely(c->w != m->w))
		return set_error(-EXDEV, "message belongs to %s, connection to %s", m->w->name,
				    c->w->name);
	/* a buffer of the large pool goes by rendezvous, or as header and payload */
	if (pc_unlikely(m->pool == POOL_LARGE))
		return rndv_submit_check(c, m);
	if (pc_unlikely(!c->raw && c->peer_max_msg && pm->len > c->peer_max_msg))
		return set_error(-EMSGSIZE, "%s qp 0x%x: message of %u bytes exceeds the peer's maximum %u",
				    c->w->dev->name, c->qpn, pm->len, c->peer_max_msg);
	/* a received buffer may be sent on: its payload offset follows the conn */
	if (pc_unlikely(pm->data != (char *)m->buf->addr + (c->raw ? 0 : WIRE_HDR_LEN)))
		return set_error(-EINVAL, "message data pointer was moved");
	return 0;
}

/* A send to a closing or closed @c: the message goes back (engine.h), untouched after. */
static pc_noinline int msg_refuse(struct msg *m)
{
	m->call_done = NULL;
	pc_msg_release(&m->pub);
	return -ENOTCONN;
}

static pc_always_inline bool conn_closing(const struct conn *c)
{
	/* closing or closed, maybe past DOWN (the message keeps @c allocated) */
	return __atomic_load_n(&c->state, __ATOMIC_RELAXED) >= CONN_DRAINING;
}

static pc_always_inline int msg_submit(struct pc_msg *pm, uint8_t type)
{
	struct msg *m = msg_of(pm);
	struct conn *c = (struct conn *)pm->conn;
	int ret = msg_check(c, m);

	if (pc_unlikely(ret))
		return ret;
	if (pc_unlikely(conn_closing(c)))
		return msg_refuse(m);
	pm->type = type;
	m->call_done = NULL;
	m->ctx.conn = c;
	m->ctx.action = ACT_SEND;
	/* a message keeps its origin alive; sent elsewhere, the submission keeps the target */
	ret = route(c->w, &m->ctx, m->origin != c);
	if (pc_unlikely(ret == -ENOTCONN && self_worker != c->w))
		return msg_refuse(m);
	return ret;
}

int pc_send(struct pc_msg *msg)
{
	return msg_submit(msg, PC_MSG_ONEWAY);
}

/*
 * Takes one of @c's max_calls places: calls accepted and not ended (the
 * worker counts those, relaxed; a stale count only refuses).
 */
static pc_always_inline bool calls_reserve(struct conn *c, uint32_t max)
{
	uint64_t made = __atomic_load_n(&c->calls_made, __ATOMIC_RELAXED);

	do {
		if (made - __atomic_load_n(&c->calls_ended, __ATOMIC_RELAXED) >= max)
			return false;
	} while (!__atomic_compare_exchange_n(&c->calls_made, &made, made + 1, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

/* A new call's id, from the calling thread's own sequence (worker_pvt.h). */
static pc_always_inline uint64_t call_new_id(struct pc_engine *e, struct pc_worker *w,
					     const struct msg *m)
{
	unsigned int i;

	if (self_worker && self_worker->p == &e->p) {
		if (pc_unlikely(!(++self_worker->call_seq & CALL_SEQ_MASK)))
			self_worker->call_seq = 1;
		return call_id_make(self_worker->call_seq, e->p.app_threads + self_worker->idx,
				    m->gidx);
	}
	(void)w;
	for (i = 0; i < APP_BINDINGS; i++) {
		if (app_binding[i].e != e || app_binding[i].serial != e->serial)
			continue;
		if (pc_unlikely(!(++app_binding[i].seq & CALL_SEQ_MASK)))
			app_binding[i].seq = 1;
		return call_id_make(app_binding[i].seq, (uint32_t)app_binding[i].slot, m->gidx);
	}
	return call_id_make(atomic_fetch_add_explicit(&e->call_seq_any, 1, memory_order_relaxed) | 1,
			    CALL_CALLER_ANY, m->gidx);
}

/* pc_call@@POLLCORE_0.2 (the deadline in microseconds); compat.c has 0.1's */
PC_API int pc_call_0_2(struct pc_msg *msg, pc_call_fn done, void *arg, uint64_t timeout_us,
		       uint64_t *req_id);
PC_SYMVER_DEFAULT(pc_call_0_2, pc_call, "POLLCORE_0.2");

int pc_call_0_2(struct pc_msg *msg, pc_call_fn done, void *arg, uint64_t timeout_us,
		uint64_t *req_id)
{
	struct conn *c = (struct conn *)msg->conn;
	struct msg *m = msg_of(msg);
	struct pc_worker *w = c->w;
	bool here = self_worker == w, ref;
	uint64_t id;
	int ret;

	if (pc_unlikely(!done && timeout_us))
		return set_error(-EINVAL, "pc_call: a deadline needs a completion");
	if (pc_unlikely(done && c->raw))
		return set_error(-EINVAL, "%s qp 0x%x: pc_call with a completion on a raw peer, "
				    "which sends no responses", c->devname, c->qpn);
	ret = msg_check(c, m);
	if (pc_unlikely(ret))
		return ret;
	if (pc_unlikely(conn_closing(c)))
		return msg_refuse(m);
	/* sent on a conn other than its own: the submission keeps that one alive */
	ref = !here && m->origin != c;
	if (pc_unlikely(ref && !conn_ref_app(c)))
		return msg_refuse(m);
	/* calls not ended: those beyond the window wait in the engine, up to max_calls */
	if (pc_unlikely(!c->raw && !calls_reserve(c, w->p->max_calls))) {
		if (ref)
			conn_unref_app(c);
		return -EAGAIN;
	}
	/* from here on nothing fails: the worker takes the call, and ends it once */
	id = call_new_id(c->e, w, m);
	msg->req_id = id;
	msg->type = PC_MSG_REQUEST;
	/* on the worker, inside a batch that had a response: that batch's clock read */
	m->t_call = here && w->ws.now_batch ? w->ws.now_batch : stats_ticks();
	m->call_done = done;
	if (done) {
		m->call_arg = arg;
		/* from now, not from the batch's clock read: a deadline never fires early */
		m->call_deadline = timeout_us ? stats_ticks() + stats_us_ticks(timeout_us) : 0;
		m->call_slot = here ? -1 : (int16_t)app_slot(c->e);
		/* release: the call's fields before a cancel that names it (pc_call_cancel()) */
		atomic_store_explicit(&m->call_live, id, memory_order_release);
	}
	m->ctx.conn = c;
	m->ctx.action = ACT_SEND;
	m->ctx.ref = ref;
	/* not msg->req_id below: once submitted, the message is the worker's */
	if (here)
		dp_send(w, m);
	else
		submit(w, &m->ctx);
	if (req_id)
		*req_id = id;
	return 0;
}

int pc_call_cancel(struct pc_conn *pconn, uint64_t req_id)
{
	struct conn *c = (struct conn *)pconn;
	struct pc_worker *w;
	uint64_t live = req_id;
	struct msg *m;

	if (conn_closing(c))
		return -ENOTCONN;	/* its calls end with -ENOTCONN anyway */
	w = c->w;
	m = req_id & CALL_CANCEL_BIT ? NULL : msg_by_gidx(w, call_id_gidx(req_id));
	/*
	 * acq_rel: the call's fields (pc_call()'s release) before the cancel;
	 * the mark before the worker's exchange that ends the call. It fails
	 * for a call that ended, was cancelled already, or never had this id.
	 */
	if (!m || !atomic_compare_exchange_strong_explicit(&m->call_live, &live,
							   req_id | CALL_CANCEL_BIT,
							   memory_order_acq_rel,
							   memory_order_relaxed))
		return 0;
	/* the buffer's own cancel_ctx: no buffer, no ring slot to run out of */
	if (self_worker == w)
		call_cancel_dequeued(w, m);
	else
		submit(w, &m->cancel_ctx);
	return 0;
}

/*
 * pc_reply()'s usual case: a request answered in its own buffer, from a
 * handler on the worker it arrived on, its conn UP. What msg_check() and
 * route() would look up is known then (a receive buffer of this worker,
 * taken on @c, which is not raw), but for the length and the data pointer.
 */
static pc_always_inline bool reply_in_place(const struct msg *m, const struct conn *c)
{
	const struct pc_msg *pm = &m->pub;

	return m->origin == c && m->pool == POOL_RX && self_worker == c->w &&
	       c->state == CONN_UP && pm->len <= pm->cap &&
	       (!c->peer_max_msg || pm->len <= c->peer_max_msg) &&
	       pm->data == (char *)m->buf->addr + WIRE_HDR_LEN;
}

int pc_reply(struct pc_msg *req)
{
	struct msg *m = msg_of(req);
	struct conn *c = (struct conn *)req->conn;

	if (pc_likely(req->type == PC_MSG_REQUEST && reply_in_place(m, c))) {
		req->type = PC_MSG_RESPONSE;
		m->call_done = NULL;
		m->ctx.conn = c;
		dp_backlog_add(c, &m->ctx);
		dp_mark_dirty(c->w, c);
		return 0;
	}
	/* a request answered in place, or a response built in a buffer of its own */
	if (req->type != PC_MSG_REQUEST && req->type != PC_MSG_RESPONSE)
		return set_error(-EINVAL, "pc_reply on a message that is neither a request nor a response");
	return msg_submit(req, PC_MSG_RESPONSE);
}

int pc_msg_release(struct pc_msg *pm)
{
	struct msg *m = msg_of(pm);

	m->ctx.action = ACT_RELEASE;
	route(m->w, &m->ctx, false);
	return 0;
}

int pc_rdma(struct pc_conn *pconn, struct pc_op *op)
{
	struct conn *c = (struct conn *)pconn;
	struct op_priv *pv = op_priv(op);

	if (!op->done || (op->code != PC_OP_WRITE && op->code != PC_OP_READ) || !op->len)
		return set_error(-EINVAL, "pc_rdma: bad operation (code %u, len %u, done %p)",
				    op->code, op->len, (void *)(uintptr_t)op->done);
	pv->ctx.kind = WR_OP;
	pv->ctx.action = ACT_RDMA;
	pv->ctx.conn = c;
	return route(c->w, &pv->ctx, true);
}

int pc_close(struct pc_conn *pconn)
{
	struct conn *c = (struct conn *)pconn;

	/* retired: its engine may be gone too; a close in flight ends the same way */
	if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == CONN_RETIRED ||
	    !conn_request_close(c, &c->e->inbox, 0, "closed by the application (pc_close)"))
		return -EALREADY;
	return 0;
}

/* --- application slots ------------------------------------------------------------------- */

int pc_app_attach(struct pc_engine *e, unsigned int idx)
{
	int expected = 0;
	unsigned int i;

	if (!e)
		return set_error(-EINVAL, "pc_app_attach: no engine");

	if (app_slot(e) >= 0)
		return set_error(-EALREADY, "this thread is already attached to slot %d",
				    app_slot(e));
	/* a free binding: never used, or of an engine destroyed while we were attached */
	for (i = 0; i < APP_BINDINGS; i++)
		if (!app_binding[i].e ||
		    !control_engine_live(app_binding[i].e, app_binding[i].serial))
			break;
	if (i == APP_BINDINGS)
		return set_error(-ENOSPC, "a thread can attach to at most %d engines",
				    APP_BINDINGS);
	if (idx >= e->p.app_threads)
		return set_error(-EINVAL, "app slot %u: the engine has %u", idx,
				    e->p.app_threads);
	/* acquire: the previous holder's slot_seq (pc_app_detach()) */
	if (!atomic_compare_exchange_strong(&e->slot_taken[idx], &expected, 1))
		return set_error(-EBUSY, "app slot %u is taken by another thread", idx);
	app_binding[i].e = e;
	app_binding[i].serial = e->serial;
	app_binding[i].slot = (int)idx;
	/* the slot's call sequence goes on where its last thread left it: ids stay unique */
	app_binding[i].seq = e->slot_seq[idx];
	return 0;
}

int pc_app_detach(struct pc_engine *e)
{
	int i;

	if (!e)
		return set_error(-EINVAL, "pc_app_detach: no engine");
	i = app_binding_of(e);

	if (i >= 0) {
		int slot = app_binding[i].slot;

		e->slot_seq[slot] = app_binding[i].seq;
		app_binding[i].e = NULL;
		app_binding[i].slot = -1;
		/* release: the slot's sequence, and our last uses of its rings, to the next thread */
		atomic_store_explicit(&e->slot_taken[slot], 0, memory_order_release);
		return 0;
	}
	return set_error(-EPERM, "pc_app_detach: this thread is not attached to the engine");
}

/*
 * Runs the call completions among @msgs[@from..@to) and closes the gaps;
 * returns how many messages are left.
 */
static unsigned int run_completions(struct pc_msg **msgs, unsigned int from, unsigned int to)
{
	unsigned int i, k = from;

	for (i = from; i < to; i++) {
		struct msg *m = msg_of(msgs[i]);
		pc_call_fn done = m->call_done;

		if (pc_likely(!done)) {
			msgs[k++] = msgs[i];
			continue;
		}
		/* the message is the application's from here: it may call again with it */
		m->call_done = NULL;
		done(msgs[i], m->call_status, m->call_arg);
	}
	return k;
}

int pc_app_poll(struct pc_engine *e, struct pc_msg **msgs, unsigned int n)
{
	unsigned int got = 0, i, k;
	int slot;

	if (pc_unlikely(!e))
		return set_error(-EINVAL, "pc_app_poll: no engine");
	slot = app_slot(e);
	if (pc_unlikely(slot < 0))
		return set_error(-EPERM, "pc_app_poll: this thread is not attached (pc_app_attach())");
	if (pc_unlikely(e->p.handoff != PC_HANDOFF_RING))
		return set_error(-EINVAL, "pc_app_poll: the engine is in handler mode");
	for (i = 0; i < e->nworkers && got < n; i++) {
		struct chan *ch = &e->workers[i].chans[slot];

		k = pc_ring_spsc_dequeue_burst(ch->to_app, (void **)msgs + got, n - got);
		got = run_completions(msgs, got, got + k);
	}
	return (int)got;
}

