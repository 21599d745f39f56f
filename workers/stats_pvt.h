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

/*
 * Ticks per microsecond, times 2^32, rounded so that a deadline is never
 * short (an upper bound of the rate; see clock_calibrate()). Set by
 * stats_clock_init().
 */
extern uint64_t stats_us_mult;

/* Microseconds in ticks, for deadlines set per call: a multiplication, never short by a tick. */
static inline uint64_t stats_us_ticks(uint64_t us)
{
	return (uint64_t)(((unsigned __int128)us * stats_us_mult) >> 32) + 1;
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
	int fd;			/* holds flock(LOCK_EX) while the owner lives; -1: none */
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

/*
 * Creates /dev/shm/pollcore.<pid>[.<n>], 0600, with O_EXCL and O_NOFOLLOW,
 * and locks it (flock LOCK_EX) for the process's lifetime: the lock tells
 * readers in any PID namespace that its owner lives. A name held by one of
 * this process's engines moves on to the next <n>; a stale segment of this
 * user's (no lock held, a valid segment) is removed and its name taken; any
 * other file (another user's, a live namesake from another PID namespace,
 * not a segment) is left alone, and the segment gets an unpredictable name
 * pollcore.<pid>.<random above 1000> instead (said in the log).
 * 0 or a negative errno (seg->base stays NULL).
 */
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

/* Where a segment's owner is, as this PID namespace sees it. */
enum pid_is {
	PID_RUNS,	/* the pid runs, with the start time the segment recorded */
	PID_EXITED,	/* the owner itself, exiting or a zombie */
	PID_REUSED,	/* another process has the pid */
	PID_ABSENT,	/* no such pid here */
};

/* Shared by the writer (stats.c) and the reader (stats_read.c). */
uint64_t stats_clock_ns(clockid_t id);
int stats_name_pid(const char *name, unsigned int *engine);
int stats_open_existing(const char *name);
enum pid_is stats_pid_lookup(int pid, const uint64_t *start);
int stats_clean_fd(int fd, const char *name, unsigned int flags);
int stats_hdr_read(int fd, struct pc_stats_hdr *out, const char *name);

/* The owner of a pid's start time (/proc/<pid>/stat field 22); 0 or a negative errno. */
int stats_proc_start(int pid, uint64_t *start, char *state);

/* Most worker blocks, and connection slots in all, a segment may have (readers refuse more). */
#define STATS_MAX_WORKERS 4096u
#define STATS_MAX_SLOTS	  (1u << 24)

/*
 * Where the blocks of a segment of @nworkers workers and @conn_slots slots
 * per worker go, as the creator lays them out and as a reader demands
 * them: 0, or -E2BIG beyond the limits above.
 */
int stats_layout(uint32_t nworkers, uint32_t conn_slots, uint64_t *worker_off, uint64_t *conn_off,
		 uint64_t *size);

/*
 * The one check of a segment's header, for every reader (pc_stats_open(),
 * pc_stats_clean(), a new engine looking at a name in use; the fuzz
 * harness): @buf holds @len bytes read from the start of a file of
 * @file_size bytes. Copies the header into @out, with comm and devices
 * NUL-terminated, when magic, version, the three sizes, the counts, the
 * offsets (exactly stats_layout()'s) and the size (within the file) are
 * right, and the pid is positive. 0, -EAGAIN (being created: no magic yet,
 * or an empty file), -EPROTO (anything else; pc_last_error() says what,
 * logged at debug level only).
 */
int stats_hdr_parse(const void *buf, size_t len, uint64_t file_size, struct pc_stats_hdr *out,
		    const char *name);

/*
 * pc_stats_open() on a descriptor already open (the fuzz harness's memfd):
 * takes @fd over (closed on failure too). NULL with errno as pc_stats_open().
 */
struct pc_stats *stats_open_fd(int fd, const char *name);

/* How long a reader waits for a writer inside its seqcount section (10 ms; the fuzzer: 0). */
extern uint64_t stats_read_wait_ns;

#endif /* PC_STATS_PVT_H */
