/* SPDX-License-Identifier: MIT */
/*
 * The writing side of the stats segment (pollcore/stats.h has the layout
 * and the readers): creating and removing an engine's segment, and what a
 * worker keeps to fill its part of it. Knows nothing of workers or
 * engines; stats.c is unit-tested alone (tests/test_stats.c).
 *
 *   object / field              | worker thread | engine (create/destroy) | readers
 *   ----------------------------+---------------+-------------------------+---------
 *   struct stats_seg            | -             | all                     | -
 *   its worker block k          | worker k      | -                       | seqcount
 *   its conn slots of worker k  | worker k      | -                       | slot seqcount
 *   struct wstats               | all           | -                       | -
 */
#ifndef PC_STATS_PVT_H
#define PC_STATS_PVT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <pollcore/stats.h>

/* A worker publishes its counters this often (and before it sleeps or stops)... */
#define STATS_PUBLISH_NS (10ull * 1000 * 1000)
/* ... looking at the tick counter every this many loop turns (a power of two). */
#define STATS_PUBLISH_TURNS 256u

/*
 * The worker's clock for round trips and publish pacing: the TSC on x86
 * (rdtsc: no system call, whatever the kernel's clocksource; in a VM whose
 * clocksource is hpet, clock_gettime() is one), CLOCK_MONOTONIC nanoseconds
 * elsewhere. Ticks are converted with a ratio measured once per process
 * (stats_clock_init()); only differences are converted.
 */
static inline uint64_t stats_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* Nanoseconds per tick, times 2^32; and STATS_PUBLISH_NS in ticks. Set by stats_clock_init(). */
extern uint64_t stats_tick_mult, stats_publish_ticks;

/* Measures the tick rate against CLOCK_MONOTONIC (about 10 ms, once per process). */
void stats_clock_init(void);

static inline uint64_t stats_ticks_ns(uint64_t ticks)
{
	return (uint64_t)(((unsigned __int128)ticks * stats_tick_mult) >> 32);
}

/* The other way, for deadlines kept in ticks: a division, so at setup only. */
static inline uint64_t stats_ns_ticks(uint64_t ns)
{
	return (uint64_t)(((unsigned __int128)ns << 32) / (stats_tick_mult ? stats_tick_mult : 1));
}

/* An engine's segment, on the side that created it. */
struct stats_seg {
	char name[48];
	void *base;		/* NULL: none */
	size_t size;
	struct stats_seg *next;	/* the process's segments, removed at exit (stats.c) */
};

/* What one worker keeps for its part of the segment; the worker's thread only. */
struct wstats {
	struct pc_stats_worker *blk;	/* in the segment; NULL when there is none */
	struct pc_stats_conn *slots;	/* its connection slots */
	uint32_t *free_slots;		/* indexes of the free ones, a stack */
	uint32_t nfree;
	uint32_t tick;			/* loop turns, for STATS_PUBLISH_TURNS */
	uint64_t next_publish;		/* stats_ticks() */
	uint64_t publishes;
	/* stats_ticks() when this completion batch's first response arrived (0: not taken yet) */
	uint64_t now_batch;
	uint32_t hist_lo, hist_hi;	/* buckets changed since the last publish */
	uint64_t wc_status[PC_STATS_WC_STATUSES];
	struct pc_stats_hist rpc;
};

/* Creates /dev/shm/pollcore.<pid>[.<n>], 0600; 0 or a negative errno (seg->base stays NULL). */
int stats_seg_create(struct stats_seg *seg, unsigned int nworkers, unsigned int conn_slots,
		     const char *devices);
/* Marks it closed, unlinks and unmaps it; nothing may write it any more. */
void stats_seg_destroy(struct stats_seg *seg);

static inline struct pc_stats_hdr *stats_seg_hdr(const struct stats_seg *seg)
{
	return seg->base;
}

static inline struct pc_stats_worker *stats_seg_worker(const struct stats_seg *seg, unsigned int k)
{
	const struct pc_stats_hdr *h = seg->base;

	return h ? (struct pc_stats_worker *)((char *)seg->base + h->worker_off) + k : NULL;
}

static inline struct pc_stats_conn *stats_seg_conns(const struct stats_seg *seg, unsigned int k)
{
	const struct pc_stats_hdr *h = seg->base;

	return h ? (struct pc_stats_conn *)((char *)seg->base + h->conn_off) + (size_t)k * h->conn_slots
		 : NULL;
}

/*
 * On the worker's thread, so its block and slots are first touched there
 * (NUMA-local pages). @blk NULL: no segment, the rest still counts.
 */
int wstats_init(struct wstats *ws, struct pc_stats_worker *blk, struct pc_stats_conn *slots,
		uint32_t nslots);
void wstats_free(struct wstats *ws);

/* Copies @st and what @ws holds into the block, under its seqcount; @now: CLOCK_MONOTONIC ns. */
void wstats_publish(struct wstats *ws, const struct pc_worker_stats *st, uint64_t now);

/*
 * A free slot, filled with @id's identity and zeroed counters under the
 * slot's seqcount; NULL when none is free (or no segment).
 */
struct pc_stats_conn *wstats_slot_open(struct wstats *ws, const struct pc_stats_conn *id);
/* Frees a slot from wstats_slot_open(). */
void wstats_slot_close(struct wstats *ws, struct pc_stats_conn *slot);

/* One pc_call() round trip of @ns nanoseconds (stats_ticks_ns() of the ticks). */
static inline void wstats_rpc(struct wstats *ws, uint64_t ns)
{
	unsigned int b = pc_stats_hist_bucket(ns);

	ws->rpc.bucket[b]++;
	ws->rpc.count++;
	ws->rpc.sum_ns += ns;
	if (ns > ws->rpc.max_ns)
		ws->rpc.max_ns = ns;
	if (b < ws->hist_lo)
		ws->hist_lo = b;
	if (b > ws->hist_hi)
		ws->hist_hi = b;
}

/* A failed work completion (enum ibv_wc_status). */
static inline void wstats_wc(struct wstats *ws, unsigned int status)
{
	ws->wc_status[status < PC_STATS_WC_STATUSES ? status : PC_STATS_WC_STATUSES - 1]++;
}

/* Once per loop turn: true when it is time to publish (the ticks read every 256 turns). */
static inline bool wstats_due(struct wstats *ws)
{
	if (pc_likely(++ws->tick & (STATS_PUBLISH_TURNS - 1)))
		return false;
	return stats_ticks() >= ws->next_publish;
}

/* The owner of a pid's start time (/proc/<pid>/stat field 22); 0 or a negative errno. */
int stats_proc_start(int pid, uint64_t *start, char *state);

#endif /* PC_STATS_PVT_H */
