/* SPDX-License-Identifier: MIT */
/*
 * A worker's receive-credit policy and its admission limits, as pure
 * functions of numbers: no verbs, no threads, unit-tested on the host
 * (tests/test_credit.c). docs/architecture.md ("Flow control: credits")
 * states the policy; the worker (workers/msg.c, workers/dp_credit.h) and the control
 * thread (workers/control.c) apply it.
 *
 *  - The invariant: the credits a worker has granted and not yet seen used,
 *    summed over its connections, never exceed the receive buffers posted
 *    on its SRQ. Every grant, the first one included, is checked against
 *    that room (credit_grant()).
 *  - A connection's window shrinks as connections join and grows back as
 *    they leave: credit_target() = min(window, srq_depth / connections).
 *    Within that share it has what it earned: it starts at min_window and
 *    earns one more credit per credit it uses, so an idle peer holds only
 *    its floor and newcomers find room (the worker keeps the count).
 *  - Every connection is guaranteed min_window credits: room below that
 *    floor is kept for the connections still short of it (the "floor
 *    deficit"), and a connection is admitted only when every connection
 *    can have its floor (credit_admit()).
 *  - The CQ holds a completion for every WR that can be outstanding: the
 *    SRQ, the raw peers' receive queues, one drain marker per connection
 *    and the send WRs in flight, which share what is left (cq_send_room()).
 *
 * Any thread; no shared state.
 */
#ifndef PC_CREDIT_H
#define PC_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <pollcore/common.h>


/**
 * credit_target - the window of each credited connection now.
 * @srq_depth: receive buffers the worker posts on its SRQ (its credit budget).
 * @nconns: credited connections on the worker (attached, not closing).
 * @window: the configured maximum per connection.
 *
 * Return: min(@window, @srq_depth / @nconns); @window when @nconns is 0.
 */
static inline uint32_t credit_target(uint32_t srq_depth, uint32_t nconns, uint32_t window)
{
	if (!nconns)
		return window;
	return PC_MIN(window, srq_depth / nconns);
}

/* How far @outstanding credits are below the floor @min_window (0 when not). */
static inline uint32_t credit_short(uint32_t outstanding, uint32_t min_window)
{
	return outstanding < min_window ? min_window - outstanding : 0;
}

/**
 * credit_grant - how many credits to grant one connection now.
 * @outstanding: credits it holds (granted, not yet seen used).
 * @target: its window now (credit_target()).
 * @min_window: the floor every connection is guaranteed.
 * @room: SRQ buffers posted and not promised to anyone (posted - granted).
 * @deficit: sum of credit_short() over the worker's credited connections,
 *           this one included.
 *
 * Up to its floor a connection takes whatever room there is; above it,
 * only the room the other connections' floors do not need.
 *
 * Return: the grant, never more than @room nor beyond @target.
 */
static inline uint32_t credit_grant(uint32_t outstanding, uint32_t target, uint32_t min_window,
				    uint32_t room, uint32_t deficit)
{
	uint32_t want = target > outstanding ? target - outstanding : 0;
	uint32_t own, others, g1, spare;

	/* the common case, at or above its floor (own 0): what the others' floors leave */
	if (pc_likely(outstanding >= min_window))
		return PC_MIN(want, room > deficit ? room - deficit : 0);
	own = credit_short(outstanding, min_window);
	others = deficit > own ? deficit - own : 0;
	g1 = PC_MIN(PC_MIN(want, own), room);
	spare = room - g1 > others ? room - g1 - others : 0;

	return g1 + PC_MIN(want - g1, spare);
}

/**
 * credit_used_short - how much the floor deficit grows when a credit is used.
 * @outstanding: credits the connection held before (at least 1).
 * @min_window: the floor.
 *
 * Return: credit_short(@outstanding - 1) - credit_short(@outstanding): 1 at
 * or below the floor, else 0.
 */
static inline uint32_t credit_used_short(uint32_t outstanding, uint32_t min_window)
{
	return outstanding <= min_window;
}

/**
 * credit_growth - how much a grant raises what a connection commits.
 * @outstanding: credits it holds.
 * @g: the grant.
 * @min_window: the floor.
 *
 * A credited connection commits max(outstanding, min_window) of the SRQ:
 * its credits, and the floor it is guaranteed. Only a grant above the
 * floor commits more.
 *
 * Return: max(@outstanding + @g, @min_window) - max(@outstanding, @min_window).
 */
static inline uint32_t credit_growth(uint32_t outstanding, uint32_t g, uint32_t min_window)
{
	uint32_t before = PC_MAX(outstanding, min_window);

	return outstanding + g > before ? outstanding + g - before : 0;
}

/**
 * credit_leave_keep - credits of a closing connection that stay counted.
 * @granted: its cumulative grant.
 * @published: the part of it already sent to the peer (in a header or a
 *             WRITE): the peer cannot have spent more.
 * @recv_credited: the receives of it polled so far.
 *
 * When a connection starts closing, what it was granted and has not been
 * seen using is taken back, except what the peer may already have spent:
 * receives it consumed that the worker has not polled yet. Those buffers
 * are no longer posted, but the SRQ count drops only when they are polled;
 * taking their credits back at once would over-state the room by as many.
 * So they stay counted until their receives are polled (one each) or the
 * drain ends (no more can come).
 *
 * Return: min(@published, @granted) - @recv_credited, or 0.
 */
static inline uint32_t credit_leave_keep(uint64_t granted, uint64_t published,
					 uint64_t recv_credited)
{
	uint64_t spendable = PC_MIN(granted, published);

	return spendable > recv_credited ? (uint32_t)(spendable - recv_credited) : 0;
}

/* What a worker can hold, for admission (fixed at engine creation). */
struct credit_limits {
	uint32_t srq_depth;	/* credit budget */
	uint32_t min_window;	/* floor per credited connection */
	uint32_t raw_bufs;	/* receive buffers for raw peers' own queues */
	uint32_t max_conns;	/* max_conns_per_worker */
	uint32_t cqe;		/* the worker's CQ size */
	uint32_t sq_depth;	/* send WRs one connection may have in flight */
};

/* What a worker holds now (the control thread's count: attached, not retired). */
struct credit_load {
	uint32_t conns;		/* credited and raw */
	uint32_t raw;		/* raw connections */
	uint32_t raw_taken;	/* raw_bufs their receive queues hold (their depths) */
	/*
	 * SRQ buffers committed (the worker's count, read when deciding):
	 * over its credited connections max(outstanding, min_window), plus
	 * credits closing ones keep (credit_leave_keep()), plus the floors of
	 * connections admitted and not yet attached.
	 */
	uint32_t committed;
};

enum credit_verdict {
	CREDIT_ADMIT = 0,
	CREDIT_NO_CONNS,	/* max_conns reached */
	CREDIT_NO_BUFS,		/* the floor cannot be granted to one more */
	CREDIT_NO_RAW,		/* raw peers not allowed, or their buffers taken */
	CREDIT_NO_CQ,		/* the CQ could not hold its completions */
	CREDIT_NO_FLOOR,	/* peers hold the room its floor needs (credits are not revoked) */
};

/* CQ entries reserved whatever the traffic: receives and one drain marker per connection. */
static inline uint64_t cq_reserved(const struct credit_limits *l, uint32_t conns)
{
	return (uint64_t)l->srq_depth + l->raw_bufs + conns;
}

/**
 * credit_admit - may one more connection (raw or credited) join a worker?
 * @l: the worker's limits.
 * @now: what it holds.
 * @raw_depth: 0 for a credited newcomer; for a raw one (its own receive
 *             queue, no credits), the raw_bufs its queue needs.
 *
 * Return: CREDIT_ADMIT or the first limit that refuses it.
 */
static inline enum credit_verdict credit_admit(const struct credit_limits *l,
					       const struct credit_load *now, uint32_t raw_depth)
{
	uint32_t credited = now->conns - now->raw;
	bool raw = raw_depth > 0;

	if (now->conns >= l->max_conns)
		return CREDIT_NO_CONNS;
	if (raw && (uint64_t)now->raw_taken + raw_depth > l->raw_bufs)
		return CREDIT_NO_RAW;
	if (!raw && (uint64_t)(credited + 1) * l->min_window > l->srq_depth)
		return CREDIT_NO_BUFS;
	/* its floor must be free now: granted credits are never taken back */
	if (!raw && (uint64_t)now->committed + l->min_window > l->srq_depth)
		return CREDIT_NO_FLOOR;
	/* and one connection's send queue can still be used in full */
	if (cq_reserved(l, now->conns + 1) + l->sq_depth > l->cqe)
		return CREDIT_NO_CQ;
	return CREDIT_ADMIT;
}

/**
 * cq_send_room - send WRs a worker may post now without overrunning its CQ.
 * @l: its limits.
 * @conns: connections holding a drain-marker reservation (attached, not drained).
 * @inflight: send WRs posted and not yet completed (markers excluded).
 *
 * Every posted WR can complete (a QP in error flushes all of them), so
 * the sends in flight share what the receives and markers leave.
 *
 * Return: the WRs that may still be posted (0 when none).
 */
static inline uint32_t cq_send_room(const struct credit_limits *l, uint32_t conns,
				    uint32_t inflight)
{
	uint64_t used = cq_reserved(l, conns) + inflight;

	return used < l->cqe ? (uint32_t)(l->cqe - used) : 0;
}

/**
 * cq_send_cap - the send WRs a worker's CQ has room for with none in flight.
 * @l: its limits.
 * @conns: as for cq_send_room().
 *
 * Depends only on the connection count, so the worker keeps it and
 * subtracts its sends in flight: cq_send_room(@l, @conns, n) is
 * (cap > n ? cap - n : 0).
 *
 * Return: cq_send_room(@l, @conns, 0).
 */
static inline uint32_t cq_send_cap(const struct credit_limits *l, uint32_t conns)
{
	return cq_send_room(l, conns, 0);
}

#endif /* PC_CREDIT_H */
