// SPDX-License-Identifier: MIT
/*
 * Calls with a completion (pc_call() with done != NULL), on the worker
 * that owns the connection. Each ends exactly once, with the first of:
 *
 *   its response           -> done(response, 0)
 *   its deadline           -> done(request, -ETIMEDOUT)   (calls_expire())
 *   pc_call_cancel()       -> done(request, -ECANCELED)   (call_cancel())
 *   the connection closing -> done(request, -ENOTCONN)    (calls_close())
 *
 * The request's buffer is the call's state (struct msg's call_* fields)
 * and, when the call fails, what carries its completion to the
 * application: the worker keeps it from pc_call() until the call ends and
 * the device is done with it (its send completed, flushed, or it never
 * left the backlog): CALL_ENDED and CALL_SENT, in either order. So a
 * completion never waits for a free buffer, and the request comes back to
 * the application intact. The reqset entry of its id points to it; a call
 * that ended before its response points to CALL_LATE instead, and keeps
 * its id (its window slot) until the response comes (dropped and counted)
 * or the connection closes.
 *
 * Nothing here runs per message for calls without a completion; calls
 * without a deadline cost one branch in the send completion.
 */
#include "dp_credit.h"

#include <stdio.h>
#include <string.h>
#include "log_pvt.h"

enum {
	CALL_ENDED = 1,	/* call_status holds the outcome */
	CALL_SENT = 2,	/* the device no longer uses the request's buffer */
};

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

/* Ended and sent: the request goes back (a failed call) or to its pool (answered). */
static void call_finish(struct pc_worker *w, struct msg *m)
{
	if (m->call_status == 0) {
		m->call_done = NULL;
		dp_msg_release(w, m);
		return;
	}
	call_deliver(w, m);
}

static void call_end(struct pc_worker *w, struct conn *c, struct msg *m, int status)
{
	m->call_flags |= CALL_ENDED;
	m->call_status = status;
	if (m->call_deadline)
		c->calls_timed--;
	if (m->call_flags & CALL_SENT)
		call_finish(w, m);
}

/* dp_send(): the request of a call with a completion is in flight (its id in c->reqs). */
void call_begin(struct pc_worker *w, struct conn *c, struct msg *m)
{
	m->call_flags = 0;
	m->call_status = 0;
	if (!m->call_deadline)
		return;
	c->calls_timed++;
	if (!c->on_call_list) {
		c->on_call_list = true;
		c->calls_next = w->call_conns;
		w->call_conns = c;
	}
	if (!w->call_due || m->call_deadline < w->call_due)
		w->call_due = m->call_deadline;
}

/* The send queue (or the backlog, cancelled) gave the request's buffer back. */
void call_sent(struct pc_worker *w, struct msg *m)
{
	m->call_flags |= CALL_SENT;
	if (m->call_flags & CALL_ENDED)
		call_finish(w, m);
}

/* A call whose request reached a closed connection: it never was in flight. */
void call_refused(struct pc_worker *w, struct msg *m)
{
	m->call_flags = CALL_ENDED | CALL_SENT;
	m->call_status = -ENOTCONN;
	call_deliver(w, m);
}

/* The response to a call with a completion (@call: its reqset pointer). */
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

/* Ends the call in @e with @status; its response, if any, will be dropped. */
static void call_fail(struct pc_worker *w, struct conn *c, struct reqent *e, int status)
{
	struct msg *m = e->ptr;

	e->ptr = CALL_LATE;
	if (status != -ENOTCONN)
		c->unanswered++;
	call_end(w, c, m, status);
}

static bool call_pending(const struct reqent *e)
{
	return e->id && e->ptr && e->ptr != CALL_LATE;
}

/* pc_call_cancel() reached the worker. */
void call_cancel(struct pc_worker *w, struct conn *c, uint64_t req_id)
{
	struct reqent *e;

	if (c->state >= CONN_DRAINING)
		return;	/* calls_close() ends them */
	e = reqset_find(&c->reqs, req_id);
	if (!e || !call_pending(e))
		return;	/* answered, ended, or never a call with a completion */
	STAT_ADD(c->st->call_cancels, 1);
	call_fail(w, c, e, -ECANCELED);
}

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
 * drain_begin(): every call still waiting ends with -ENOTCONN. Before the
 * backlog is cancelled and the send queue flushed, which give the buffers
 * back (call_sent()).
 */
void calls_close(struct pc_worker *w, struct conn *c)
{
	uint32_t i;

	for (i = 0; c->reqs.n && i <= c->reqs.mask; i++)
		if (call_pending(&c->reqs.slot[i]))
			call_fail(w, c, &c->reqs.slot[i], -ENOTCONN);
	call_list_del(w, c);
	/* what is still due may come while it drains: dropped as late, nothing more */
	c->unanswered = 0;
}

/* The deadlines of @c's calls at @now; returns the earliest still to come (0: none). */
static uint64_t conn_expire(struct pc_worker *w, struct conn *c, uint64_t now)
{
	uint64_t due = 0;
	uint32_t i;

	for (i = 0; c->calls_timed && i <= c->reqs.mask; i++) {
		struct reqent *e = &c->reqs.slot[i];
		struct msg *m;

		if (!call_pending(e))
			continue;
		m = e->ptr;
		if (!m->call_deadline || (m->call_flags & CALL_ENDED))
			continue;
		if (m->call_deadline > now) {
			if (!due || m->call_deadline < due)
				due = m->call_deadline;
			continue;
		}
		STAT_ADD(c->st->call_timeouts, 1);
		call_fail(w, c, e, -ETIMEDOUT);
	}
	if (c->unanswered > w->p->max_unanswered) {
		set_error(-ETIMEDOUT,
			     "%s port %u qp 0x%x: %u calls unanswered after their deadline or cancel (max_unanswered %u); closing",
			     w->dev->name, w->dev->port, c->qpn, c->unanswered,
			     w->p->max_unanswered);
		drain_fail(w, c, -ETIMEDOUT);
	}
	return due;
}

/* Housekeeping turns, while some call has a deadline: those that passed end. */
void calls_expire(struct pc_worker *w)
{
	uint64_t now = coarse_ns(), due = 0;
	struct conn **pp = &w->call_conns;

	if (now < w->call_due)
		return;
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
	w->call_due = due;
}
