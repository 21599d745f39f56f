// SPDX-License-Identifier: MIT
/*
 * Closing one connection without disturbing the others (worker thread).
 *
 *   UP/ATTACHED --drain_begin--> DRAINING --drain_poll--> DRAINED --held==0--> RETIRED
 *
 * drain_begin moves the QP to ERR, fails the backlog and posts a signaled
 * marker WR, which the provider flushes after every earlier send WR. The
 * drain ends when the marker's flush completion has arrived and either
 * IBV_EVENT_QP_LAST_WQE_REACHED was seen (no more SRQ receives for this QP)
 * or, since some providers never send that event (rxe doesn't), a grace
 * period has passed. Which rule ended it is logged. A marker that never
 * completes is bounded by a deadline too. Then PC_CONN_DOWN is delivered;
 * once the application has returned every buffer of the connection, the
 * control thread destroys the QP and frees the connection after an RCU
 * grace period.
 */

#include "dp_pvt.h"

#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

#define MARKER_TIMEOUT_NS (2000ull * 1000 * 1000)
#define LAST_WQE_GRACE_NS (100ull * 1000 * 1000)

static void sq_abandon(struct pc_worker *w, struct conn *c);

/* @c failed on this worker with @err; pc_last_error() says why (kept for its DOWN). */
void drain_fail(struct pc_worker *w, struct conn *c, int err)
{
	if (c->state >= CONN_DRAINING)
		return;
	if (!c->close_err)
		c->close_err = err;
	snprintf(c->close_why, sizeof(c->close_why), "%s", pc_last_error());
	if (!c->close_why[0])
		snprintf(c->close_why, sizeof(c->close_why), "%s port %u qp 0x%x: %s", w->dev->name,
			 w->dev->port, c->qpn, strerror(-err));
	drain_begin(w, c);
	conn_request_close(c, w->control, err, NULL);
}

/*
 * The control thread's reason, taken when it asked for the close (CTL_CLOSE
 * orders its ctl_* fields); drain_fail() has set the worker's own before.
 */
static void take_ctl_reason(struct pc_worker *w, struct conn *c)
{
	if (c->close_why[0])
		return;
	if (!c->close_err)
		c->close_err = c->ctl_err;
	snprintf(c->close_why, sizeof(c->close_why), "%s port %u qp 0x%x: %s", w->dev->name,
		 w->dev->port, c->qpn, c->ctl_why ? c->ctl_why :
		 c->ctl_err ? strerror(-c->ctl_err) : "closed");
}

static void backlog_cancel(struct pc_worker *w, struct conn *c)
{
	struct wr_ctx *ctx = c->bl_head;

	c->bl_head = NULL;
	c->bl_tail = &c->bl_head;
	__atomic_store_n(&c->backlog, 0, __ATOMIC_RELAXED);
	CONN_GAUGE_SET(c, backlog);
	while (ctx) {
		struct wr_ctx *next = ctx->next;

		if (ctx->kind == WR_MSG) {
			struct msg *m = pc_container_of(ctx, struct msg, ctx);

			dp_count_dropped(w, c, 1);
			/* a call's request: calls_close() ended it, this gives it back */
			if (m->call_done)
				call_sent(w, m);
			else
				dp_msg_release(w, m);
		} else if (ctx->kind == WR_OP) {
			struct pc_op *op = op_of_ctx(ctx);

			op->done(op, -ECANCELED);
		} else {
			rndv_cancel(w, ctx);
		}
		ctx = next;
	}
}

void drain_begin(struct pc_worker *w, struct conn *c)
{
	struct ibv_send_wr wr = {
		.wr_id = (uintptr_t)&c->marker_ctx,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int ret;

	if (c->state >= CONN_DRAINING)
		return;
	take_ctl_reason(w, c);
	c->was_up = c->state == CONN_UP;
	conn_set_state(c, CONN_DRAINING);
	ret = qp_to_err(w->dev, c->qp);
	if (ret)
		pc_debug("%s qp 0x%x: to ERR: %s", w->dev->name, c->qpn, pc_last_error());
	/* first: the backlog and the flushes then give the requests' buffers back */
	if (!c->raw)
		calls_close(w, c);
	backlog_cancel(w, c);
	rndv_conn_close(w, c);
	/* never UP: what arrived before goes back unseen (no DOWN will follow) */
	if (c->early_head)
		dp_drop_early(w, c);
	/* the peer can no longer use what we granted (clamped: it may have overrun) */
	if (!c->raw)
		dp_credited_leave(w, c);
	grant_wait_del(w, c);

	/* the marker has its own reserved slot (sq_space() keeps one back) */
	sq_push(&c->sq, &c->marker_ctx, true, true);
	ret = dp_post(w, c, &wr, &bad);
	if (ret) {
		pc_warn("%s qp 0x%x: cannot post the drain marker (%s); abandoning %u WRs",
			w->dev->name, c->qpn, strerror(abs(pc_neg_errno(ret))),
			sq_inflight(&c->sq) - 1);
		sq_unpush(&c->sq, 1);
		/* nothing proves they will flush: give their buffers and ops back, once safe */
		sq_abandon(w, c);
		c->marker_done = true;
	}
	c->drain_deadline_ns = coarse_ns() + MARKER_TIMEOUT_NS;
	c->drain_next = w->draining;
	w->draining = c;
}

/*
 * Retires whatever the flushes did not (the marker could not be posted, or
 * did not flush in time). Only once the device is done with them: the QP is
 * reset first, so it neither completes nor DMAs into what is given back (a
 * buffer reused at once, a pollcore-nvmf staging buffer, an application's
 * pc_rdma() memory). A reset that fails with EIO or ENODEV says the device
 * is gone (removed, disassociated): it touches no memory any more either.
 * Any other failure keeps them where they are, their buffers kept from
 * reuse, until the QP is destroyed with the engine.
 */
static void sq_abandon(struct pc_worker *w, struct conn *c)
{
	int ret = qp_to_reset(w->dev, c->qp);

	if (ret && ret != -EIO && ret != -ENODEV) {
		pc_warn("%s qp 0x%x: %u WRs never completed and the QP cannot be reset (%s): "
			"their buffers and operations are kept until it is destroyed",
			w->dev->name, c->qpn, sq_inflight(&c->sq), pc_last_error());
		return;
	}
	while (sq_inflight(&c->sq)) {
		uintptr_t e = c->sq.slot[c->sq.tail & c->sq.mask];

		dp_sq_complete(w, c, sq_slot_ctx(e), -ECANCELED);
	}
}

static bool drain_done(struct pc_worker *w, struct conn *c, uint64_t now)
{
	const char *rule;

	/* a raw peer's own receive queue flushes every buffer back first */
	if (c->rq_posted && now < c->drain_deadline_ns)
		return false;
	if (!c->marker_done) {
		if (now < c->drain_deadline_ns)
			return false;
		pc_warn("%s qp 0x%x: drain marker not flushed within %llu ms; abandoning %u WRs",
			w->dev->name, c->qpn, MARKER_TIMEOUT_NS / 1000000, sq_inflight(&c->sq));
		sq_abandon(w, c);
		rule = "marker deadline";
	} else if (atomic_load_explicit(&c->last_wqe, memory_order_acquire)) {
		rule = "IBV_EVENT_QP_LAST_WQE_REACHED";
	} else {
		if (!c->grace_end_ns)
			c->grace_end_ns = now + LAST_WQE_GRACE_NS;
		if (now < c->grace_end_ns)
			return false;
		rule = "flush marker + grace period (no LAST_WQE_REACHED from the provider)";
	}
	pc_info("%s port %u qp 0x%x: closed (%s); drain ended by %s; %llu accepted messages dropped",
		w->dev->name, w->dev->port, c->qpn, c->close_why, rule,
		(unsigned long long)c->st->msgs_dropped);
	return true;
}

void drain_poll(struct pc_worker *w)
{
	const struct pc_engine_params *p = w->p;
	struct conn **pp = &w->draining;
	/* read every turn while a conn drains: coarse_ns(), no system call */
	uint64_t now = coarse_ns();

	while (*pp) {
		struct conn *c = *pp;

		if (!drain_done(w, c, now)) {
			pp = &c->drain_next;
			continue;
		}
		*pp = c->drain_next;
		/*
		 * No READ reaches its rendezvous windows now: their blocks go
		 * back, and with them their references on @c, before DRAINED
		 * (conn_put() would retire it then, before its DOWN).
		 */
		rndv_conn_drained(w, c);
		conn_set_state(c, CONN_DRAINED);
		PC_PROBE(conn_down, c->qpn, c->close_err, c->was_up);
		/* no more completions for it: its marker's CQE is free again */
		cq_conns_add(w, -1);
		/* nor receives: the credits its leave kept are free (dp_credited_leave()) */
		credits_drained(w, c);
		if (c->rq_posted)
			pc_warn("%s qp 0x%x: %u receives never flushed; their buffers are lost",
				w->dev->name, c->qpn, c->rq_posted);
		if (c->was_up && p->on_conn) {
			/* DOWN's reason, in pc_last_error() (logged already) */
			set_errorl(PC_LOG_DEBUG, c->close_err ? c->close_err : -ECONNRESET, "%s",
				      c->close_why);
			p->on_conn((struct pc_conn *)c, PC_CONN_DOWN, p->arg);
		}
		STAT_ADD(w->st.conns, (uint32_t)-1);
		drain_maybe_retire(w, c);
	}
}

static void retire_wait_del(struct pc_worker *w, struct conn *c)
{
	struct conn **pp;

	for (pp = &w->retire_wait; *pp; pp = &(*pp)->drain_next)
		if (*pp == c) {
			*pp = c->drain_next;
			c->retire_waiting = false;
			return;
		}
}

void drain_maybe_retire(struct pc_worker *w, struct conn *c)
{
	struct conn **slot = &w->cache[c->qpn & (PC_ARRAY_SIZE(w->cache) - 1)];

	if (c->state != CONN_DRAINED)
		return;
	/* seq_cst: pairs with conn_ref_app(): it sees DRAINED, or we see its reference */
	atomic_thread_fence(memory_order_seq_cst);
	/* after DOWN, and once nothing the application holds names it (engine.h) */
	if (c->held || conn_refs(c)) {
		/*
		 * A reference an app thread took and undid (conn_ref_app()
		 * met DRAINED) comes back through no ring: look again on
		 * housekeeping turns.
		 */
		if (!c->retire_waiting) {
			c->retire_waiting = true;
			c->drain_next = w->retire_wait;
			w->retire_wait = c;
		}
		return;
	}
	if (c->retire_waiting)
		retire_wait_del(w, c);
	if (*slot == c)
		*slot = NULL;
	conn_set_state(c, CONN_RETIRED);
	worker_stats_release(w, c);
	atomic_fetch_sub(&w->nconns, 1);
	ctl_post(w->control, c, CTL_RETIRE);
}

/* Housekeeping turns: the DOWN connections that were still referenced. */
void drain_retire_wait(struct pc_worker *w)
{
	struct conn *c = w->retire_wait, *next;

	for (; c; c = next) {
		next = c->drain_next;
		drain_maybe_retire(w, c);
	}
}
