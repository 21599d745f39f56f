/* SPDX-License-Identifier: MIT */
/*
 * Layer "protocols" (docs/architecture.md), calls: requests in flight,
 * pc_call() and its window, deadlines and cancels (calls.c). Worker
 * thread unless said otherwise. rndv_pvt.h has the other protocol.
 */
#ifndef PC_CALLS_PVT_H
#define PC_CALLS_PVT_H

#include "log_pvt.h"
#include "msg_pvt.h"

#define CALL_LATE ((void *)1)	/* a reqset pointer: ended; drop the response, count it */
void call_submit(struct pc_worker *w, struct conn *c, struct msg *m);
void call_admit(struct pc_worker *w, struct conn *c);
void call_sent(struct pc_worker *w, struct msg *m);
void call_refused(struct pc_worker *w, struct conn *c, struct msg *m);
void call_answer(struct pc_worker *w, struct conn *c, struct msg *resp, void *call);
void call_cancel_dequeued(struct pc_worker *w, struct msg *m);
void call_cancel_here(struct pc_worker *w, struct msg *m);
void calls_close(struct pc_worker *w, struct conn *c);
void calls_expire(struct pc_worker *w, uint64_t now);
struct msg *msg_by_gidx(struct pc_worker *w, uint32_t gidx);	/* any thread */
/* A message read by rendezvous, delivered as a received one is (or to its call). */
void dp_deliver_read(struct pc_worker *w, struct conn *c, struct msg *m);

/* A call of @c is over for pc_call()'s count of calls not ended (max_calls). */
static inline void call_counted_end(struct conn *c)
{
	/* relaxed: pc_call() reads a count that only grows; a stale one refuses, never overruns */
	__atomic_store_n(&c->calls_ended, c->calls_ended + 1, __ATOMIC_RELAXED);
}

/*
 * Takes @req_id out of @c's requests in flight, and counts its round trip;
 * false (error set) if it was not there. @call: its call (calls.c), or NULL.
 */
static inline bool call_response_match(struct pc_worker *w, struct conn *c, uint64_t req_id, void **call)
{
	struct reqent e;
	uint64_t now;

	if (pc_unlikely(!reqset_take(&c->reqs, req_id, &e))) {
		set_error(-EPROTO,
			     "%s port %u qp 0x%x: response to request id %llu, which awaits none; closing",
			     w->dev->name, w->dev->port, c->qpn, (unsigned long long)req_id);
		return false;
	}
	STAT_ADD(c->inflight_req, (uint32_t)-1);
	CONN_GAUGE_SET(c, inflight_req);
	now = worker_now_batch(w);
	wstats_rpc(&w->ws, now > e.val ? stats_ticks_ns(now - e.val) : 0);
	*call = e.ptr;
	/* a call without completion ends with its response (a call's ends in call_answer()) */
	if (!e.ptr)
		call_counted_end(c);
	/* a place came free in the window: a call waiting for one goes in */
	if (pc_unlikely(c->cw_head != NULL))
		call_admit(w, c);
	return true;
}


#endif /* PC_CALLS_PVT_H */
