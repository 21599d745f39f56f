/* SPDX-License-Identifier: MIT */
/*
 * Layer "dispatch" (docs/architecture.md): complete.c (each completion to
 * where it belongs), flush.c (each dirty connection's chain, the
 * submissions), drain.c (closing one connection), keepalive.c. What the
 * worker's loop calls. Worker thread.
 */
#ifndef PC_DP_PVT_H
#define PC_DP_PVT_H

#include "rndv_pvt.h"

/* complete.c: the first @n completions of w->wc, one poll's batch */
void dp_complete(struct pc_worker *w, unsigned int n);
void dp_sq_complete(struct pc_worker *w, struct conn *c, struct wr_ctx *ctx, int err);
void dp_wr_failed(struct pc_worker *w, struct wr_ctx *ctx, int err);

/* flush.c */
void dp_flush(struct pc_worker *w);
void dp_grant_wait_check(struct pc_worker *w);
void dp_submit(struct pc_worker *w, struct wr_ctx *ctx);
int dp_send_refused(struct pc_worker *w, struct msg *m);
int dp_rdma(struct pc_worker *w, struct pc_op *op);

/*
 * Queues @m on its conn (m->ctx.conn) to be sent at this turn's flush; a
 * request enters the conn's window of ids in flight, or waits for it
 * (call_submit()). -ENOTCONN: the conn is closing, @m is released (a call
 * with a completion ends: 0, its completion says -ENOTCONN).
 */
static pc_always_inline int dp_send(struct pc_worker *w, struct msg *m)
{
	struct conn *c = m->ctx.conn;

	if (pc_unlikely(!conn_accepts(c)))
		return dp_send_refused(w, m);
	/* a block of the large pool is charged to the conn it goes out on (rndv.c) */
	if (pc_unlikely(m->pool == POOL_LARGE))
		rndv_take(w, c, m);
	if (m->pub.type == PC_MSG_REQUEST && !c->raw) {
		call_submit(w, c, m);
		return 0;
	}
	dp_backlog_add(c, &m->ctx);
	if (c->state == CONN_UP)
		dp_mark_dirty(w, c);
	return 0;
}

/* keepalive.c (worker thread) */
void ka_look(struct pc_worker *w);

/* Keepalive looks at the clock every this many busy turns, idle ones, hybrid idle ones. */
#define KA_BUSY_TURNS 256
#define KA_IDLE_TURNS 64

/* Once a turn: the clock read and the look (ka_look()) only every so many turns. */
static inline void ka_tick(struct pc_worker *w, bool idle)
{
	if (pc_likely(++w->ka_turns < (!idle ? KA_BUSY_TURNS : w->hybrid ? 1 : KA_IDLE_TURNS)))
		return;
	w->ka_turns = 0;
	ka_look(w);
}

/* drain.c (worker thread) */
void drain_begin(struct pc_worker *w, struct conn *c);
void drain_poll(struct pc_worker *w);
void drain_fail(struct pc_worker *w, struct conn *c, int err);
void drain_maybe_retire(struct pc_worker *w, struct conn *c);
void drain_retire_wait(struct pc_worker *w);

#endif /* PC_DP_PVT_H */
