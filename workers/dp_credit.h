/* SPDX-License-Identifier: MIT */
/*
 * The worker's side of flow control (layer "messages", docs/architecture.md;
 * worker thread only): reading the peer's grants, granting our own within the
 * policy of core/credit.h, and deciding when a grant goes by RDMA WRITE
 * rather than in the header of the next message.
 *
 * What the policy computes from the worker's connection count alone (each
 * connection's share of the SRQ, the CQ's room for sends) is kept in the
 * worker and recomputed when that count changes (credits_share_set(),
 * cq_conns_add()), not on every flush.
 */
#ifndef PC_DP_CREDIT_H
#define PC_DP_CREDIT_H

#include "post_pvt.h"

static inline void credits_publish(struct pc_worker *w)
{
	__atomic_store_n(&w->st.credits_out, w->credits_out, __ATOMIC_RELAXED);
}

/* The credited connection count changed: each one's share of the SRQ (credit_target()). */
static inline void credits_share_set(struct pc_worker *w)
{
	w->share = credit_target(w->lim.srq_depth, w->ncredited, w->p->window);
	__atomic_store_n(&w->st.window, w->share, __ATOMIC_RELAXED);
}

/* Connections holding a drain marker's CQE changed by @delta: the CQ's room for sends. */
static inline void cq_conns_add(struct pc_worker *w, int delta)
{
	w->cq_conns += (uint32_t)delta;
	w->cq_send_cap = cq_send_cap(&w->lim, w->cq_conns);
}

/* Send WRs that may be posted now without overrunning the CQ (cq_send_room()). */
static inline uint32_t cq_send_space(const struct pc_worker *w)
{
	return w->cq_send_cap > w->sq_wrs ? w->cq_send_cap - w->sq_wrs : 0;
}

/* Credits @c holds: granted and not yet seen used (0 if it overran). */
static inline uint32_t conn_outstanding(const struct conn *c)
{
	return c->granted > c->recv_credited ? (uint32_t)(c->granted - c->recv_credited) : 0;
}

/*
 * Takes a cumulative grant from the peer (its credit word or a message
 * header). Only plausible ones: never backwards, never more than a window
 * (the peer's) ahead of what we sent. Anything else is a torn read, a
 * header overtaken by a later WRITE, or a broken peer; the old value stays.
 */
static inline void credits_take(struct conn *c, uint64_t g)
{
	if (g > c->peer_grant_seen && g - c->sent_credited <= c->peer_window)
		c->peer_grant_seen = g;
}

/* Credits this side may spend now, after reading the peer's latest grant. */
static inline uint64_t credits_avail(struct conn *c)
{
	/* acquire: the NIC wrote the word; nothing else depends on it but the count */
	credits_take(c, __atomic_load_n(&c->credit_word[0], __ATOMIC_ACQUIRE));
	return c->peer_grant_seen - c->sent_credited;
}

static inline uint32_t credits_room(const struct pc_worker *w)
{
	return w->srq_outstanding > w->credits_out ? w->srq_outstanding - w->credits_out : 0;
}

/*
 * Floors reserved (core/credit.h, credit_admit()): a credited conn commits
 * max(outstanding, min_window) buffers of the SRQ, a closing one the
 * credits it keeps (credit_leave_keep()); credits_out + floor_deficit in
 * all. w->adm_taken, which the control thread also takes from when it
 * admits a conn (its floor, until the worker attaches it), counts them and
 * never exceeds srq_depth, so a conn is admitted only when its floor is
 * free, and a grant above a floor never takes a floor the control thread
 * reserved. The worker's part, w->adm_pub, is never below what it
 * commits: a grant that commits more takes first (an atomic, only then);
 * what it no longer commits goes back when a conn leaves or drains, and
 * in between once it exceeds ADM_SLACK (so a turn's receives and their
 * grants, which even out, cost no atomic).
 */
#define ADM_SLACK(w) ((w)->lim.srq_depth / 16 + 1)

static inline uint32_t credits_committed(const struct pc_worker *w)
{
	return w->credits_out + w->floor_deficit;
}

/* Takes up to @need more of the SRQ for the worker's conns; returns what it got. */
static inline uint32_t adm_take(struct pc_worker *w, uint32_t need)
{
	uint32_t cur = __atomic_load_n(&w->adm_taken, __ATOMIC_RELAXED), take;

	do {
		take = w->lim.srq_depth > cur ? PC_MIN(need, w->lim.srq_depth - cur) : 0;
		if (!take)
			return 0;
	} while (!__atomic_compare_exchange_n(&w->adm_taken, &cur, cur + take, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	w->adm_pub += take;
	return take;
}

/* Gives back what the worker's conns no longer commit, if more than @slack. */
static inline void adm_release(struct pc_worker *w, uint32_t slack)
{
	uint32_t c = credits_committed(w);

	if (w->adm_pub > c + slack) {
		__atomic_fetch_sub(&w->adm_taken, w->adm_pub - c, __ATOMIC_RELAXED);
		w->adm_pub = c;
	}
}

/*
 * A receive of @c polled while it closes, within its credits: one that
 * dp_credited_leave() kept (credit_leave_keep(): then granted -
 * recv_credited) is used, its buffer no longer posted; it leaves
 * credits_out now, with its receive. Before recv_credited counts it.
 */
static inline void credits_drain_used(struct pc_worker *w, struct conn *c)
{
	(void)c;
	w->credits_out--;
	credits_publish(w);
	adm_release(w, 0);
}

/* @c's drain ended (drain.c): no receive of it can come now; what it kept is free. */
static inline void credits_drained(struct pc_worker *w, struct conn *c)
{
	uint32_t keep = conn_outstanding(c);

	if (c->raw || !keep)
		return;
	w->credits_out -= keep;
	c->granted = c->recv_credited;
	credits_publish(w);
	adm_release(w, 0);
}

/*
 * Brings @c's credits up to its share of the SRQ (w->share) or what it has
 * earned (c->allow), whichever is less, within the room the SRQ has and
 * the floors of the others (credit_grant()). Whatever it still wants stays
 * in grant_pending: the conn is looked at again next turn.
 */
static inline void credits_grant(struct pc_worker *w, struct conn *c)
{
	uint32_t mw = w->lim.min_window;
	uint32_t o = conn_outstanding(c);
	/* credit_target() with c->window left out: allow never exceeds it (p->window) */
	uint32_t target = PC_MIN(w->share, c->allow);
	uint32_t want = target - PC_MIN(o, target);
	uint32_t g;

	/* buffers back in the pool count only once posted: post them before giving up */
	if (pc_unlikely(credits_room(w) < want) && w->srq_outstanding < w->lim.srq_depth)
		dp_refill_srq(w, false);
	g = credit_grant(o, target, mw, credits_room(w), w->floor_deficit);
	/* above its floor a grant commits more of the SRQ: never a floor reserved for another */
	if (g && o + g > mw) {
		uint32_t after = credits_committed(w) + credit_growth(o, g, mw);

		if (after > w->adm_pub) {
			uint32_t need = after - w->adm_pub;

			g -= need - adm_take(w, need);
		}
	}
	/* at or above its floor before, so after: the deficit does not move */
	if (pc_unlikely(o < mw))
		w->floor_deficit -= credit_short(o, mw) - credit_short(o + g, mw);
	c->granted += g;
	w->credits_out += g;
	/* g <= want: what it still wants below its target */
	c->grant_pending = want - g;
	/* published once per flush (dp_flush()) */
	adm_release(w, ADM_SLACK(w));
}

/*
 * PC_GRANT_DELAY_DEFAULT_US (worker_pvt.h), grant_delay_us's default: how
 * long a grant may wait for a message to carry it before it goes as an
 * RDMA WRITE of its own, while the peer still knows of half its window.
 * Nothing waits on it: a peer that falls below half gets its WRITE at once
 * (grant_due()), so it only bounds how stale a grant may get. It is long
 * beside a round trip, so request/response traffic under load still rings
 * one doorbell per message, and one-way traffic pays at most a WRITE per
 * half window (fewer when messages going back carry grants) rather than
 * one per interval: at 50 us, a 64-byte stream took a WRITE every 8
 * messages on rxe, with the peer never near a stall.
 */

/*
 * Whether the next send of @c can carry its grant (a message it will post
 * now). @avail: set to the credits it may spend, when read.
 */
static inline bool grant_rides(struct conn *c, uint32_t space, uint64_t *avail)
{
	if (!space || !c->bl_head || c->bl_head->kind != WR_MSG)
		return false;
	*avail = credits_avail(c);
	return *avail != 0;
}

/*
 * The time grant deadlines count from, in stats_ticks() (rdtsc on x86:
 * clock_gettime() is a system call where the clocksource is hpet, as in
 * the soft-RoCE VM), without a clock read per grant: while grants wait,
 * the clock as dp_grant_wait_check() last read it (at most
 * HOUSEKEEP_TURNS turns old); read afresh when none waited.
 */
static inline uint64_t grant_clock(struct pc_worker *w)
{
	if (!w->grant_wait)
		w->grant_clock = stats_ticks();
	return w->grant_clock;
}

/* Starts @c's grant's wait for a carrier, unless it waits already. */
static inline void grant_arm(struct pc_worker *w, struct conn *c)
{
	if (!c->grant_due)
		c->grant_due = grant_clock(w) + w->grant_delay;
}

/* Whether the peer knows of less than half of what it has earned: it may be about to stall. */
static inline bool grant_urgent(const struct conn *c)
{
	/* what the peer knows it may still send: the grants it has seen, less what it sent */
	uint64_t known = c->granted_published > c->recv_credited ?
			 c->granted_published - c->recv_credited : 0;

	return known * 2 < c->allow;
}

/*
 * A grant no message carries goes by WRITE at once when it is urgent
 * (grant_urgent(): one-way traffic, or an application that held its
 * peer's buffers), else once it has waited grant_delay_us.
 */
static inline bool grant_due(struct pc_worker *w, struct conn *c)
{
	if (grant_urgent(c))
		return true;
	if (!c->grant_due) {
		grant_arm(w, c);
		return false;
	}
	return grant_clock(w) >= c->grant_due;
}

/*
 * A conn whose only business is a grant waiting for a message to carry it
 * leaves the dirty list for w->grant_wait, so that the turns it waits
 * cost nothing per turn: the worker looks at the clock once every
 * HOUSEKEEP_TURNS turns (dp_grant_wait_check()) and flushes the list
 * once the earliest deadline has passed. A message sent on the conn
 * carries the grant in the meantime, and a message received marks it
 * dirty again, so a peer running low (grant_due()) gets its WRITE at once.
 * A deadline is seen at most HOUSEKEEP_TURNS turns late.
 *
 * A buffer coming back (dp_msg_release()) puts its conn here directly
 * (grant_defer()), not on the dirty list: its grant is worked out at the
 * conn's next flush, which a message sent or received brings. In
 * request/response traffic that is the next request, whose response then
 * carries it: one flush per request, not one for the response and one
 * for the grant of its buffer. Not when the grant is urgent: a peer
 * stalled for credits sends nothing that would bring the flush (an
 * application that held its buffers and now lets them go), so its conn
 * goes on the dirty list and the grant at once.
 */
static inline void grant_wait_add(struct pc_worker *w, struct conn *c)
{
	/* not armed (no room to post when it was looked at): due at once */
	uint64_t due = c->grant_due;

	if (!c->grant_waiting) {
		c->grant_waiting = true;
		c->gw_next = w->grant_wait;
		w->grant_wait = c;
	}
	if (due < w->grant_wait_due)
		w->grant_wait_due = due;
}

/* A buffer of @c (UP, credited, not on the dirty list) came back: its grant waits, unless urgent. */
static inline void grant_defer(struct pc_worker *w, struct conn *c)
{
	if (grant_urgent(c)) {
		dp_mark_dirty(w, c);
		return;
	}
	grant_arm(w, c);
	grant_wait_add(w, c);
}

/* @c leaves UP (drain_begin()): off the list before it can be freed. Once per close. */
static inline void grant_wait_del(struct pc_worker *w, struct conn *c)
{
	struct conn **pp = &w->grant_wait;

	if (!c->grant_waiting)
		return;
	while (*pp != c)
		pp = &(*pp)->gw_next;
	*pp = c->gw_next;
	c->grant_waiting = false;
	if (!w->grant_wait)
		w->grant_wait_due = UINT64_MAX;
}

/*
 * Takes a credit for a message about to be added to @c's chain; false: none
 * left (stalled). @avail: the credits known to be left, read afresh at 0
 * (a WRITE of the peer's may have brought more).
 */
static pc_always_inline bool credit_spend(struct pc_worker *w, struct conn *c, uint64_t granted,
					  uint64_t *avail)
{
	if (!*avail && !(*avail = credits_avail(c))) {
		/* counted once per episode, not per look */
		if (!c->credit_stalled) {
			PC_PROBE(credit_stall, c->qpn);
			c->credit_stalled = true;
			STAT_ADD(c->st->credit_stalls, 1);
			STAT_ADD(w->st.credit_stalls, 1);
		}
		return false;
	}
	c->credit_stalled = false;
	c->sent_credited++;
	(*avail)--;
	if (c->granted_published != granted) {
		c->granted_published = granted;
		c->grant_due = 0;
		STAT_ADD(w->st.credit_piggybacks, 1);
	}
	return true;
}

#endif /* PC_DP_CREDIT_H */
