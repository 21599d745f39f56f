/* SPDX-License-Identifier: MIT */
/*
 * Send-queue accounting and WR-chain building: pure logic, no verbs calls,
 * unit-tested on the host (tests/test_sq.c).
 *
 * A QP's send queue has @depth slots. Every posted WR takes one until a
 * completion proves it done. Only some WRs are signaled (every Nth, and the
 * last of each chain unless the caller says it needs no completion:
 * sq_push()'s @last), and RC completes a send queue in order, so one
 * signaled completion retires every earlier WR. Each slot remembers its
 * WR's context (8-byte aligned pointer) with bit 0 = signaled.
 *
 * One slot is always kept back for the drain marker (see drain.c), so a
 * closing QP can always be given one more WR.
 *
 * Owner: one worker thread; no concurrency.
 */
#ifndef PC_SQ_H
#define PC_SQ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#include <pollcore/common.h>

struct sq {
	uint32_t depth;		/* power of two */
	uint32_t mask;
	uint32_t head;		/* next slot to fill (free-running) */
	uint32_t tail;		/* oldest slot not yet retired (free-running) */
	uint32_t signal_every;	/* >= 1 */
	uint32_t unsignaled;	/* WRs posted since the last signaled one */
	uintptr_t *slot;	/* depth entries: ctx | signaled */
};

#define SQ_SIGNALED ((uintptr_t)1)

/* Slots usable for ordinary WRs: all but the marker's. */
static inline uint32_t sq_space(const struct sq *q)
{
	return q->depth - 1 - (q->head - q->tail);
}

static inline uint32_t sq_inflight(const struct sq *q)
{
	return q->head - q->tail;
}

/*
 * Whether the WR being added must be signaled: every signal_every-th WR,
 * the last of a chain (so buffers and callbacks never wait for later
 * traffic), and any WR the caller forces (the drain marker).
 */
static pc_always_inline bool sq_want_signal(const struct sq *q, bool last, bool force)
{
	return force || last || q->unsignaled + 1 >= q->signal_every;
}

/* Records a posted WR's context; returns whether it is signaled. */
static pc_always_inline bool sq_push(struct sq *q, void *ctx, bool last, bool force)
{
	bool sig = sq_want_signal(q, last, force);

	q->slot[q->head & q->mask] = (uintptr_t)ctx | (sig ? SQ_SIGNALED : 0);
	q->head++;
	q->unsignaled = sig ? 0 : q->unsignaled + 1;
	return sig;
}

/* Undo the last @n pushes (the post of their chain failed). */
static inline void sq_unpush(struct sq *q, uint32_t n)
{
	q->head -= n;
	q->unsignaled = 0;
}

static inline void *sq_slot_ctx(uintptr_t e)
{
	return (void *)(e & ~SQ_SIGNALED);
}

/*
 * The slot a completion of @ctx belongs to, or q->head if none. On success
 * it is the first signaled slot, which must hold @ctx; with an error, the
 * first slot holding @ctx. Pointers are compared, never dereferenced: a
 * stray completion (a flush after its queue was abandoned) may name memory
 * given back long ago.
 */
static inline uint32_t sq_find(const struct sq *q, const void *ctx, bool error)
{
	uint32_t t;

	for (t = q->tail; t != q->head; t++) {
		uintptr_t e = q->slot[t & q->mask];

		if (error ? sq_slot_ctx(e) == ctx : (e & SQ_SIGNALED) != 0)
			return error || sq_slot_ctx(e) == ctx ? t : q->head;
	}
	return q->head;
}

/*
 * The common success: the oldest WR in flight is the signaled one that
 * completed (one WR per chain, or the last of the unsignaled ones before
 * it already retired). Retires it alone and returns true; false leaves
 * the queue as it was (then sq_find() and sq_retire_to()). Agrees with
 * sq_find(@q, @ctx, false): the first signaled slot is the tail.
 */
static pc_always_inline bool sq_retire_tail(struct sq *q, const void *ctx)
{
	if (q->tail == q->head || q->slot[q->tail & q->mask] != ((uintptr_t)ctx | SQ_SIGNALED))
		return false;
	q->tail++;
	return true;
}

/*
 * sq_retire_tail() behind a run of unsignaled WRs that need nothing done
 * at their completion (all named @quiet: inline SENDs whose buffers went
 * back at their post): retires them and @ctx's signaled slot after them.
 * Returns the slots retired, or 0 when @ctx's is not the first after them
 * (the queue left as it was: then sq_find() and sq_retire_to()).
 */
static pc_always_inline uint32_t sq_retire_quiet(struct sq *q, const void *quiet, const void *ctx)
{
	uint32_t t = q->tail, n;

	while (t != q->head && q->slot[t & q->mask] == (uintptr_t)quiet)
		t++;
	if (t == q->head || q->slot[t & q->mask] != ((uintptr_t)ctx | SQ_SIGNALED))
		return 0;
	n = t + 1 - q->tail;
	q->tail = t + 1;
	return n;
}

/*
 * Retire every WR up to slot @t (from sq_find()): those before it
 * completed fine, and @t itself failed if @error. @fn(arg, ctx, failed) is
 * called for each, oldest first. Returns the number retired.
 */
static inline uint32_t sq_retire_to(struct sq *q, uint32_t t, bool error,
				    void (*fn)(void *arg, void *ctx, bool failed), void *arg)
{
	uint32_t n = 0;

	while (q->tail != t) {
		fn(arg, sq_slot_ctx(q->slot[q->tail & q->mask]), false);
		q->tail++;
		n++;
	}
	fn(arg, sq_slot_ctx(q->slot[q->tail & q->mask]), error);
	q->tail++;
	return n + 1;
}

/*
 * Retire WRs for one completion of @ctx. On success every WR up to and
 * including the first signaled slot is done; with an error, the WRs before
 * the first slot holding @ctx completed fine and that one failed (each
 * flushed WR then gets its own completion). @fn(arg, ctx, failed) is called
 * for each retired slot, oldest first.
 *
 * Return: number of slots retired; 0 means the completion matched nothing
 * (a bug or a stray; the caller counts it).
 */
static inline uint32_t sq_retire(struct sq *q, const void *ctx, bool error,
				 void (*fn)(void *arg, void *ctx, bool failed), void *arg)
{
	uint32_t t = sq_find(q, ctx, error);

	return t == q->head ? 0 : sq_retire_to(q, t, error, fn, arg);
}

/*
 * A chain of send WRs built in a scratch array and posted with one
 * ibv_post_send (one doorbell). wr[i].next links to wr[i + 1].
 *
 * chain_add() sets only sg_list and the links; the caller writes every
 * other field the opcode uses (wr_id, opcode, num_sge, send_flags, and
 * wr.rdma for RDMA ops). Nothing is cleared: a provider reads no field
 * that the opcode does not use (imm_data only WITH_IMM, the wr union by
 * opcode), and clearing 128 bytes per WR cost more than the rest of it.
 */
struct wr_chain {
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	uint32_t n;
};

static pc_always_inline struct ibv_send_wr *chain_add(struct wr_chain *c)
{
	struct ibv_send_wr *wr = &c->wr[c->n];

	wr->next = NULL;
	wr->sg_list = &c->sge[c->n];
	if (c->n)
		c->wr[c->n - 1].next = wr;
	c->n++;
	return wr;
}

static inline void chain_reset(struct wr_chain *c)
{
	c->n = 0;
}

#endif /* PC_SQ_H */
