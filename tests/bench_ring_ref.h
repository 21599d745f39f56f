/* SPDX-License-Identifier: MIT */
/*
 * The queues under test in bench_ring_ref.c: pollcore's rings and the
 * references, each behind the same adapter, IMPL_enq/IMPL_deq (inlined into
 * the loops) and IMPL_create/IMPL_residue/IMPL_destroy. Included by
 * bench_ring_ref.c only.
 *
 * Fairness notes:
 *  - every ring has 1024 slots; rte_ring and ck_ring keep one empty (1023
 *    usable). wfcqueue is an unbounded list: each producer recycles a pool
 *    of 1024 / producers nodes, and the consumer hands them back through a
 *    per-producer counter (what a bounded user of it has to do);
 *  - ck_ring has no burst call: its bursts are loops of single calls;
 *  - wfcqueue bursts: the producer chains its nodes on a private queue and
 *    splices it in (one xchg on the shared tail); the consumer dequeues them
 *    one by one (single consumer, so the unlocked __ variants);
 *  - all four are inlined into the same loops (liburcu with _LGPL_SOURCE).
 */
#ifndef BENCH_RING_REF_H
#define BENCH_RING_REF_H

#define _LGPL_SOURCE /* wfcqueue inline, like the three rings */
#include <pollcore/ring.h>

/*
 * The references order memory with inline assembly or plain accesses that
 * rely on x86's ordering, which ThreadSanitizer cannot see: under TSan only
 * pollcore's rings run (their element checks still apply).
 */
#if defined(__SANITIZE_THREAD__)
#undef PC_BENCH_HAVE_DPDK
#undef PC_BENCH_HAVE_CK
#define NOT_UNDER_TSAN "skipped under ThreadSanitizer: it cannot see this library's barriers"
#else
#define PC_BENCH_HAVE_WFCQ
#endif

#ifdef PC_BENCH_HAVE_WFCQ
#include <urcu/wfcqueue.h>
#endif
#ifdef PC_BENCH_HAVE_DPDK
#include <rte_ring.h>
#endif
#ifdef PC_BENCH_HAVE_CK
#include <ck_ring.h>
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS         1024U
#define MAX_PRODUCERS 2U
#define BURST_MAX     32U
#define SEQ_BITS      48 /* a value is producer << SEQ_BITS | sequence number (from 1) */
#define SEQ_MASK      ((1UL << SEQ_BITS) - 1)
#define WINDOW        32768UL /* elements per timed window (32 ring laps) */

struct mode {
	const char *name; /* table label */
	const char *key;  /* JSON key */
	bool mpsc;
	bool single; /* single-object calls, else burst calls */
	unsigned int burst;
};

#ifdef PC_BENCH_HAVE_WFCQ
/* wfcqueue made bounded: per-producer node pools recycled by the consumer. */
struct wnode {
	struct cds_wfcq_node node;
	uintptr_t val;
};

struct wpool { /* producer-private */
	struct wnode *nodes;
	unsigned long mask;
	unsigned long sent;	  /* nodes enqueued so far */
	unsigned long done_cache; /* last view of the consumer's done counter */
} pc_cache_aligned;

struct wdone { /* written by the consumer, read by one producer */
	atomic_ulong n;
} pc_cache_aligned;

struct wfcq_ref {
	struct __cds_wfcq_head head pc_cache_aligned; /* consumer */
	struct cds_wfcq_tail tail pc_cache_aligned;   /* producers' xchg */
	struct wdone done[MAX_PRODUCERS];
	struct wpool pool[MAX_PRODUCERS];
	unsigned long released[MAX_PRODUCERS] pc_cache_aligned; /* consumer-private */
};
#endif

#ifdef PC_BENCH_HAVE_CK
struct ck_ref {
	struct ck_ring ring pc_cache_aligned;
	struct ck_ring_buffer buf[SLOTS] pc_cache_aligned;
};
#endif

struct bench {
	/* set before the run; written once at most (go, stop) */
	const struct mode *m;
	unsigned int nprod;
	unsigned long ops; /* elements per producer */
	void *q;	   /* the queue under test */
	bool consumer_shares; /* the consumer shares its CPU with a producer */
	atomic_bool go;
	atomic_bool stop; /* time cap reached, or the consumer found a bad value */

	/* written by the producers as they finish */
	atomic_uint ready pc_cache_aligned;
	atomic_uint finished; /* producers that have stopped sending */
	atomic_ulong sent;    /* elements those producers sent */
	atomic_ulong cpu_ns;  /* CPU time of the run's threads, summed */
	unsigned long full_polls[MAX_PRODUCERS];

	/* written by the consumer */
	double t_end pc_cache_aligned;
	unsigned long got;
	double *marks; /* consumer's clock each time it passes a multiple of WINDOW elements */
	unsigned long nmarks;
	unsigned long empty_polls;
	char error[160];
};

struct producer {
	struct bench *b;
	unsigned int id;
	bool shares; /* shares its CPU with another thread of the run */
};

/* --- pollcore ---------------------------------------------------------------------------- */

static inline unsigned int pc_enq(struct bench *b, struct producer *p, void *const *objs,
				  unsigned int n)
{
	if (b->m->mpsc)
		return b->m->single ? !pc_ring_mpsc_enqueue(b->q, objs[0])
				    : pc_ring_mpsc_enqueue_burst(b->q, objs, n);
	return b->m->single ? !pc_ring_spsc_enqueue(b->q, objs[0])
			    : pc_ring_spsc_enqueue_burst(b->q, objs, n);
}

/* pollcore has no single-object dequeue: burst of 1 in single mode. */
static inline unsigned int pc_deq(struct bench *b, void **objs, unsigned int n)
{
	return b->m->mpsc ? pc_ring_mpsc_dequeue_burst(b->q, objs, n)
			  : pc_ring_spsc_dequeue_burst(b->q, objs, n);
}

static void *pc_create(struct bench *b)
{
	return b->m->mpsc ? (void *)pc_ring_mpsc_create(SLOTS) : (void *)pc_ring_spsc_create(SLOTS);
}

static unsigned int pc_residue(struct bench *b)
{
	return b->m->mpsc ? pc_ring_mpsc_count(b->q) : pc_ring_spsc_count(b->q);
}

static void pc_destroy(struct bench *b)
{
	if (b->m->mpsc)
		pc_ring_mpsc_destroy(b->q);
	else
		pc_ring_spsc_destroy(b->q);
}

/* --- DPDK rte_ring ----------------------------------------------------------------------- */

#ifdef PC_BENCH_HAVE_DPDK
static inline unsigned int rte_enq(struct bench *b, struct producer *p, void *const *objs,
				   unsigned int n)
{
	if (b->m->mpsc)
		return b->m->single ? !rte_ring_mp_enqueue(b->q, objs[0])
				    : rte_ring_mp_enqueue_burst(b->q, objs, n, NULL);
	return b->m->single ? !rte_ring_sp_enqueue(b->q, objs[0])
			    : rte_ring_sp_enqueue_burst(b->q, objs, n, NULL);
}

static inline unsigned int rte_deq(struct bench *b, void **objs, unsigned int n)
{
	if (b->m->single)
		return !rte_ring_sc_dequeue(b->q, objs);
	return rte_ring_sc_dequeue_burst(b->q, objs, n, NULL);
}

/* rte_ring_init on our own memory: no EAL, no hugepages, no memzone. */
static void *rte_create(struct bench *b)
{
	ssize_t size = rte_ring_get_memsize(SLOTS);
	void *mem;
	int ret;

	if (size < 0 || posix_memalign(&mem, PC_CACHELINE, (size_t)size))
		return NULL;
	ret = rte_ring_init(mem, "pc_bench", SLOTS,
			    RING_F_SC_DEQ | (b->m->mpsc ? 0 : RING_F_SP_ENQ));
	if (ret) {
		fprintf(stderr, "rte_ring_init: %d\n", ret);
		free(mem);
		return NULL;
	}
	return mem;
}

static unsigned int rte_residue(struct bench *b)
{
	return rte_ring_count(b->q);
}

static void rte_destroy(struct bench *b)
{
	free(b->q);
}
#endif

/* --- Concurrency Kit ck_ring ------------------------------------------------------------- */

#ifdef PC_BENCH_HAVE_CK
static inline unsigned int ck_enq(struct bench *b, struct producer *p, void *const *objs,
				  unsigned int n)
{
	struct ck_ref *c = b->q;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!(b->m->mpsc ? ck_ring_enqueue_mpsc(&c->ring, c->buf, objs[i])
				 : ck_ring_enqueue_spsc(&c->ring, c->buf, objs[i])))
			break;
	return i;
}

static inline unsigned int ck_deq(struct bench *b, void **objs, unsigned int n)
{
	struct ck_ref *c = b->q;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!(b->m->mpsc ? ck_ring_dequeue_mpsc(&c->ring, c->buf, &objs[i])
				 : ck_ring_dequeue_spsc(&c->ring, c->buf, &objs[i])))
			break;
	return i;
}

static void *ck_create(struct bench *b)
{
	struct ck_ref *c;

	if (posix_memalign((void **)&c, PC_CACHELINE, sizeof(*c)))
		return NULL;
	ck_ring_init(&c->ring, SLOTS);
	return c;
}

static unsigned int ck_residue(struct bench *b)
{
	struct ck_ref *c = b->q;

	return ck_ring_size(&c->ring);
}

static void ck_destroy(struct bench *b)
{
	free(b->q);
}
#endif

/* --- liburcu wfcqueue -------------------------------------------------------------------- */

#ifdef PC_BENCH_HAVE_WFCQ

static inline unsigned int wfcq_enq(struct bench *b, struct producer *p, void *const *objs,
				    unsigned int n)
{
	struct wfcq_ref *w = b->q;
	struct wpool *pl = &w->pool[p->id];
	unsigned long room = pl->mask + 1 - (pl->sent - pl->done_cache);
	struct __cds_wfcq_head lhead;
	struct cds_wfcq_tail ltail;
	struct wnode *wn;
	unsigned int i;

	if (room < n) {
		/* acquire: the consumer is done with the nodes it counted */
		pl->done_cache = atomic_load_explicit(&w->done[p->id].n, memory_order_acquire);
		room = pl->mask + 1 - (pl->sent - pl->done_cache);
		if (room < n)
			n = (unsigned int)room;
	}
	if (n == 1) {
		wn = &pl->nodes[pl->sent & pl->mask];
		cds_wfcq_node_init(&wn->node);
		wn->val = (uintptr_t)objs[0];
		cds_wfcq_enqueue(&w->head, &w->tail, &wn->node);
	} else if (n) {
		__cds_wfcq_init(&lhead, &ltail);
		for (i = 0; i < n; i++) {
			wn = &pl->nodes[(pl->sent + i) & pl->mask];
			cds_wfcq_node_init(&wn->node);
			wn->val = (uintptr_t)objs[i];
			cds_wfcq_enqueue(&lhead, &ltail, &wn->node);
		}
		__cds_wfcq_splice_blocking(&w->head, &w->tail, &lhead, &ltail);
	}
	pl->sent += n;
	return n;
}

static inline unsigned int wfcq_deq(struct bench *b, void **objs, unsigned int n)
{
	struct wfcq_ref *w = b->q;
	unsigned int cnt[MAX_PRODUCERS] = {0}, i, id;
	struct cds_wfcq_node *node;
	uintptr_t v;

	for (i = 0; i < n; i++) {
		node = __cds_wfcq_dequeue_nonblocking(&w->head, &w->tail);
		if (!node || node == CDS_WFCQ_WOULDBLOCK)
			break;
		v = pc_container_of(node, struct wnode, node)->val;
		objs[i] = (void *)v;
		id = (unsigned int)(v >> SEQ_BITS);
		if (pc_likely(id < MAX_PRODUCERS))
			cnt[id]++;
	}
	for (id = 0; id < MAX_PRODUCERS; id++)
		if (cnt[id]) {
			w->released[id] += cnt[id];
			/* release: our reads of those nodes happen before their producer reuses them */
			atomic_store_explicit(&w->done[id].n, w->released[id], memory_order_release);
		}
	return i;
}

static void *wfcq_create(struct bench *b)
{
	unsigned long pool = SLOTS / b->nprod;
	struct wfcq_ref *w;
	unsigned int i;

	if (posix_memalign((void **)&w, PC_CACHELINE, sizeof(*w)))
		return NULL;
	memset(w, 0, sizeof(*w));
	__cds_wfcq_init(&w->head, &w->tail);
	for (i = 0; i < b->nprod; i++) {
		atomic_init(&w->done[i].n, 0);
		w->pool[i].mask = pool - 1;
		if (posix_memalign((void **)&w->pool[i].nodes, PC_CACHELINE,
				   pool * sizeof(struct wnode))) {
			while (i--)
				free(w->pool[i].nodes);
			free(w);
			return NULL;
		}
	}
	return w;
}

static unsigned int wfcq_residue(struct bench *b)
{
	struct wfcq_ref *w = b->q;

	return !cds_wfcq_empty(&w->head, &w->tail);
}

static void wfcq_destroy(struct bench *b)
{
	struct wfcq_ref *w = b->q;
	unsigned int i;

	for (i = 0; i < b->nprod; i++)
		free(w->pool[i].nodes);
	free(w);
}
#endif

#endif /* BENCH_RING_REF_H */
