/* SPDX-License-Identifier: MIT */
/*
 * Layer "messages" (docs/architecture.md): msg.c. A message's life and its
 * handoff to the application, in order. Worker thread, except msg_bind():
 * whoever owns the message.
 */
#ifndef PC_MSG_PVT_H
#define PC_MSG_PVT_H

#include "dp_credit.h"

struct conn *dp_conn_lookup(struct pc_worker *w, uint32_t qpn);
void dp_count_dropped(struct pc_worker *w, struct conn *c, uint32_t n);
void msg_bind(struct msg *m, struct conn *c);
void dp_credited_join(struct pc_worker *w, struct conn *c);
void dp_credited_leave(struct pc_worker *w, struct conn *c);
struct msg *dp_tx_alloc(struct pc_worker *w);
void dp_msg_release(struct pc_worker *w, struct msg *m);
void dp_msg_forget(struct msg *m);
void dp_deliver_slot(struct pc_worker *w, unsigned int slot, struct msg *m);
void dp_deliver_overflow(struct pc_worker *w);
void dp_topup_txfree(struct pc_worker *w);
void dp_rx_hold(struct conn *c, struct msg *m);
void dp_rx_release(struct pc_worker *w, struct conn *c, bool all);
void dp_deliver_early(struct pc_worker *w, struct conn *c);
void dp_drop_early(struct pc_worker *w, struct conn *c);

/*
 * The conn a completion's QP number names, NULL if none is attached here:
 * the worker's direct-mapped cache, else the table (dp_conn_lookup()).
 * Worker thread.
 */
static inline struct conn *dp_conn_of_qpn(struct pc_worker *w, uint32_t qpn)
{
	struct conn *c = w->cache[qpn & (PC_ARRAY_SIZE(w->cache) - 1)];

	if (pc_likely(c && c->qpn == qpn))
		return c;
	return dp_conn_lookup(w, qpn);
}

/* The pool a receive buffer goes back to. */
static inline struct pc_pool *rx_pool(struct pc_worker *w, const struct msg *m)
{
	return m->pool == POOL_RAW ? w->raw : w->rx;
}


/* Hands a received message to the application, in order, never dropping it. */
static inline void dp_deliver(struct pc_worker *w, const struct pc_engine_params *p, struct conn *c,
			      struct msg *m)
{
	if (p->handoff == PC_HANDOFF_HANDLER)
		p->on_msg(&m->pub, p->arg);
	else
		dp_deliver_slot(w, c->app_slot, m);
}

#endif /* PC_MSG_PVT_H */
