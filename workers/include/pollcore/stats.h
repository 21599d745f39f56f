/* SPDX-License-Identifier: MIT */
/*
 * pollcore/stats.h - live statistics from outside the process: the layout
 * of the shared-memory segment every engine publishes, and the calls that
 * find, read and clean such segments (pollcore-stat uses nothing else).
 *
 * Each engine creates /dev/shm/pollcore.<pid> (a second engine of the same
 * process pollcore.<pid>.2, and so on), mode 0600: only its owner's user
 * (and root) can read it. It is created with O_EXCL and O_NOFOLLOW, and its
 * owner holds flock(LOCK_EX) on it while it lives: a process of any PID
 * namespace sharing /dev/shm can tell a live segment from a stale one. A
 * name taken by anything else (another user's file, a live namesake: a
 * process with the same pid in another PID namespace) is left alone, and
 * the engine takes pollcore.<pid>.<n> with a random n above 1000 instead.
 * It is removed by pc_engine_destroy() and when the process exits normally
 * (exit(), return from main); a process killed by a signal leaves it
 * behind, which readers detect (pc_stats_owner()) and pc_stats_clean()
 * removes.
 *
 * Whose a segment is: a reader takes only its own user's (the file's owner
 * is its effective uid), unless it is root and asks for any user's on
 * purpose (PC_STATS_ANY_USER); and never a file that group or others may
 * access, which an engine does not make. Another user's segment is not
 * read, and not removed, by default, root included.
 *
 * Readers trust nothing in a segment: its owner (root reading another
 * user's, or anyone with the owner's rights) may change
 * or truncate it at any time. They never map it; they read it (pread())
 * into private memory: the header once, at open, checked whole (magic,
 * version, sizes, counts, every offset against the file's size) and kept,
 * with its strings terminated; each worker block and connection slot when
 * asked for, at the offsets of that copy. A segment truncated meanwhile
 * gives -EPROTO, never SIGBUS.
 *
 * Layout (version PC_STATS_VERSION; all offsets from the start):
 *
 *   struct pc_stats_hdr                       one page
 *   struct pc_stats_worker  x nworkers        worker_size each, page-aligned
 *   struct pc_stats_conn    x nworkers * conn_slots   conn_size each; worker
 *                                             k owns slots [k * conn_slots,
 *                                             (k + 1) * conn_slots)
 *
 * Who writes what, and how a reader gets a consistent view:
 *
 *   part            | written by                   | reader
 *   ----------------+------------------------------+-------------------------
 *   header          | creator, before magic is set | acquire magic, then plain
 *   worker block    | its worker: a copy of its    | seqcount (pc_stats_read_worker)
 *                   | counters every ~10 ms, under |
 *                   | its seqcount                 |
 *   connection slot | the owning worker: counters  | slot seqcount guards the
 *                   | live (relaxed, one writer),  | identity; counters are
 *                   | identity under the slot's    | single relaxed values
 *                   | seqcount at attach/retire    | (pc_stats_read_conn)
 *
 * A worker publishes its counters rather than writing them here directly:
 * a seqcount around the writes of a whole loop turn would leave readers no
 * window to read in. The copy costs the worker a TSC read every 256 turns
 * and, every 10 ms, a clock read and a few hundred stores.
 *
 * The layout is versioned: a reader accepts a segment only when magic,
 * version and the three structure sizes all match its own.
 */
#ifndef POLLCORE_STATS_H
#define POLLCORE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <pollcore/common.h>
#include <pollcore/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PC_STATS_MAGIC	 0x706f6c6c636f7265ULL	/* "pollcore" */
#define PC_STATS_VERSION 5		/* 5: rendezvous counters, large pool; 4: pc_worker_stats.busy_poll; 3: the owner holds flock */
#define PC_STATS_PREFIX	 "pollcore."		/* /dev/shm/pollcore.<pid>[.<n>] */

/* Work-completion statuses counted one by one (enum ibv_wc_status; later ones in the last). */
#define PC_STATS_WC_STATUSES 32

/*
 * Latency histogram: log-linear like HdrHistogram, in nanoseconds. Values
 * below 2^PC_STATS_HIST_SUB_BITS have a bucket each; above, every power of
 * two is split in 2^(PC_STATS_HIST_SUB_BITS - 1) buckets, so a bucket is at
 * most 1/32 of its values wide (a percentile is within about 1.6% of the
 * truth). Values from 2^42 ns (73 min) on share the last bucket.
 */
#define PC_STATS_HIST_SUB_BITS 6
#define PC_STATS_HIST_OCTAVES  36
#define PC_STATS_HIST_BUCKETS \
	((1u << PC_STATS_HIST_SUB_BITS) + PC_STATS_HIST_OCTAVES * (1u << (PC_STATS_HIST_SUB_BITS - 1)))

/* The owner's state, as stored in the header. */
enum pc_stats_state {
	PC_STATS_STATE_LIVE = 1,	/* the engine runs */
	PC_STATS_STATE_CLOSED,		/* pc_engine_destroy() ran; unlinked, or about to be */
};

/**
 * struct pc_stats_hdr - the first page of a segment.
 * @magic: PC_STATS_MAGIC, stored last (release) once the rest is written.
 * @version: PC_STATS_VERSION.
 * @hdr_size: sizeof(struct pc_stats_hdr).
 * @worker_size: sizeof(struct pc_stats_worker).
 * @conn_size: sizeof(struct pc_stats_conn).
 * @nworkers: worker blocks.
 * @conn_slots: connection slots per worker (max_conns_per_worker).
 * @size: bytes of the whole segment.
 * @worker_off: offset of worker block 0.
 * @conn_off: offset of connection slot 0.
 * @pid: the owner.
 * @state: enum pc_stats_state (atomic).
 * @start_time: the owner's start time, field 22 of /proc/<pid>/stat (clock
 *              ticks after boot): a pid reused by another process has
 *              another one.
 * @created_ns: CLOCK_REALTIME at creation.
 * @comm: the owner's /proc/<pid>/comm.
 * @devices: the engine's devices, comma-separated.
 * @engine: 1 for the process's first engine, 2 for pollcore.<pid>.2, ...
 */
struct pc_stats_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;
	uint32_t worker_size;
	uint32_t conn_size;
	uint32_t nworkers;
	uint32_t conn_slots;
	uint64_t size;
	uint64_t worker_off;
	uint64_t conn_off;
	int32_t pid;
	uint32_t state;
	uint64_t start_time;
	uint64_t created_ns;
	char comm[16];
	char devices[128];
	uint32_t engine;
	uint8_t reserved[4096 - 228];
};

/**
 * struct pc_stats_hist - a latency histogram (see PC_STATS_HIST_BUCKETS).
 * @count: samples.
 * @sum_ns: their sum.
 * @max_ns: the largest.
 * @bucket: samples per bucket (pc_stats_hist_bucket()).
 */
struct pc_stats_hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t bucket[PC_STATS_HIST_BUCKETS];
};

/**
 * struct pc_stats_worker - one worker's published counters.
 * @seq: seqcount: odd while the worker writes the block.
 * @publishes: how many times it was written.
 * @publish_ns: CLOCK_MONOTONIC when last written (rates; a worker that
 *              stopped publishing is stuck or gone).
 * @st: what pc_engine_stats() gives, at that time.
 * @wc_status: failed work completions by enum ibv_wc_status, flushes
 *             (IBV_WC_WR_FLUSH_ERR) included; [0] (success) stays 0.
 * @rpc: round trips of pc_call(): from the call to the response's
 *       arrival on the worker, for every response matched.
 */
struct pc_stats_worker {
	uint32_t seq;
	uint32_t pad;
	uint64_t publishes;
	uint64_t publish_ns;
	uint64_t pad2[5];
	struct pc_worker_stats st;
	uint64_t wc_status[PC_STATS_WC_STATUSES];
	struct pc_stats_hist rpc;
} __attribute__((aligned(4096)));

/* States of a connection slot (mirrors the connection's life). */
enum pc_stats_conn_state {
	PC_STATS_CONN_FREE = 0,
	PC_STATS_CONN_ATTACHED,		/* on its worker, not established yet */
	PC_STATS_CONN_UP,
	PC_STATS_CONN_DRAINING,		/* closing */
	PC_STATS_CONN_DOWN,		/* DOWN delivered; buffers still held by the app */
};

/**
 * struct pc_stats_conn - one connection's counters, live.
 * @seq: the slot's seqcount: odd while the worker (re)assigns it.
 * @state: enum pc_stats_conn_state.
 * @qp_num: its QP.
 * @worker: owning worker.
 * @raw: the peer speaks no pollcore protocol.
 * @passive: accepted (1) or connected (0).
 * @peer_port: the peer's port.
 * @peer: the peer's address (numeric).
 * @since_ns: CLOCK_MONOTONIC when attached.
 * @msgs_sent: as pc_conn_info(), and the rest below.
 * @rnr_errors: sends failed with IBV_WC_RNR_RETRY_EXC_ERR.
 * @retry_errors: sends failed with IBV_WC_RETRY_EXC_ERR.
 */
struct pc_stats_conn {
	/* identity: written under @seq at attach */
	uint32_t seq;
	uint32_t state;
	uint32_t qp_num;
	uint16_t worker;
	uint8_t raw;
	uint8_t passive;
	uint16_t peer_port;
	uint16_t pad;
	uint32_t pad2;
	uint64_t since_ns;
	char peer[32];
	/* what changes per message, one cache line; one writer, relaxed */
	uint64_t msgs_sent;
	uint64_t msgs_recv;
	uint64_t bytes_sent;
	uint64_t bytes_recv;
	uint32_t backlog;
	uint32_t inflight_req;
	uint32_t held;
	uint32_t pad3;
	uint64_t credit_stalls;
	uint64_t sq_stalls;
	/* rarer */
	uint64_t msgs_dropped;
	uint64_t rnr_errors;
	uint64_t retry_errors;
	uint64_t call_timeouts;
	uint64_t call_cancels;
	uint64_t late_responses;
	uint64_t pad4[2];
};

static_assert(sizeof(struct pc_stats_hdr) == 4096, "the header is one page");
static_assert(__builtin_offsetof(struct pc_stats_hdr, size) == 32 &&
	      __builtin_offsetof(struct pc_stats_hdr, pid) == 56 &&
	      __builtin_offsetof(struct pc_stats_hdr, start_time) == 64 &&
	      __builtin_offsetof(struct pc_stats_hdr, engine) == 224,
	      "header fields at their documented offsets (no padding)");
static_assert(sizeof(struct pc_stats_conn) == 3 * PC_CACHELINE, "a slot is three cache lines");
static_assert(__builtin_offsetof(struct pc_stats_conn, msgs_sent) == PC_CACHELINE &&
	      __builtin_offsetof(struct pc_stats_conn, msgs_dropped) == 2 * PC_CACHELINE,
	      "a slot's per-message counters fill its second cache line");
static_assert(__builtin_offsetof(struct pc_stats_worker, seq) == 0 &&
	      __builtin_offsetof(struct pc_stats_conn, seq) == 0,
	      "blocks and slots start with their seqcount");
static_assert(__builtin_offsetof(struct pc_stats_worker, st) == PC_CACHELINE,
	      "the seqcount has a cache line of its own");
static_assert(sizeof(struct pc_stats_worker) % 4096 == 0,
	      "worker blocks are whole pages (each worker touches its own first)");
static_assert(sizeof(struct pc_worker_stats) % 8 == 0, "pc_worker_stats packs into u64s");

/**
 * pc_stats_hist_bucket - the bucket of a value.
 * @v: nanoseconds.
 *
 * Return: 0 .. PC_STATS_HIST_BUCKETS - 1.
 */
static inline unsigned int pc_stats_hist_bucket(uint64_t v)
{
	const unsigned int sub = PC_STATS_HIST_SUB_BITS, half = 1u << (sub - 1);
	unsigned int shift;

	if (v < (1u << sub))
		return (unsigned int)v;
	shift = 64 - (unsigned int)__builtin_clzll(v) - sub;	/* >= 1 */
	if (shift > PC_STATS_HIST_OCTAVES)
		return PC_STATS_HIST_BUCKETS - 1;
	return (1u << sub) + (shift - 1) * half + (unsigned int)(v >> shift) - half;
}

/**
 * pc_stats_hist_low - the smallest value of a bucket.
 * @b: bucket.
 * @width: filled with how many values it holds.
 *
 * Return: nanoseconds.
 */
static inline uint64_t pc_stats_hist_low(unsigned int b, uint64_t *width)
{
	const unsigned int sub = PC_STATS_HIST_SUB_BITS, half = 1u << (sub - 1);
	unsigned int shift;

	if (b < (1u << sub)) {
		*width = 1;
		return b;
	}
	shift = (b - (1u << sub)) / half + 1;
	*width = 1ull << shift;
	return (uint64_t)(half + (b - (1u << sub)) % half) << shift;
}

/**
 * pc_stats_hist_percentile - a percentile of a histogram.
 * @h: histogram (e.g. a snapshot's rpc, or the difference of two).
 * @p: 0 < p <= 1, e.g. 0.999.
 *
 * Any thread; pure.
 *
 * Return: the middle of the bucket holding the ceil(p * count)-th smallest
 * sample, at most @h->max_ns; 0 for an empty histogram.
 */
PC_API uint64_t pc_stats_hist_percentile(const struct pc_stats_hist *h, double p);

/* Whether a segment's owner still runs (pc_stats_owner()). */
enum pc_stats_owner {
	PC_STATS_OWNER_LIVE = 0,	/* same pid, same start time */
	PC_STATS_OWNER_DEAD,		/* exited (a zombie too), or no such process: stale */
	PC_STATS_OWNER_REUSED,		/* another process has the pid now: stale */
	PC_STATS_OWNER_CLOSED,		/* the engine was destroyed: stale */
	PC_STATS_OWNER_ELSEWHERE,	/* not that pid here, but its owner lives (holds the
					   lock): a namesake from another PID namespace */
};

struct pc_stats;

/**
 * pc_stats_open - open a segment of the caller's user for reading.
 * @name: its name in /dev/shm, e.g. "pollcore.1234".
 *
 * Any thread. Takes the file only when its owner is the caller's
 * effective uid (root's own included, not another user's) and group and
 * others have no permission bit on it. Reads the header into private
 * memory and checks it whole (stats.h, above); the segment is never
 * mapped, and keeps one descriptor.
 *
 * Return: the segment, or NULL with errno set: EINVAL (an empty @name, or
 * one with a '/'), ENOENT (none), EACCES (another user's; pc_last_error()
 * names the file, its owner's uid and the caller's), EAGAIN (being
 * created), EPROTO (not a pollcore segment, or not one to trust: not a
 * regular file, a symbolic link, a mode that lets group or others in,
 * another layout version, counts or offsets that do not hold;
 * pc_last_error() says which), ENOMEM; another errno of shm_open() or
 * pread(), passed on.
 */
PC_API struct pc_stats *pc_stats_open(const char *name);

/* pc_stats_open_flags(), pc_stats_clean_flags(): also another user's segment (root only) */
#define PC_STATS_ANY_USER (1u << 0)

/**
 * pc_stats_open_flags - pc_stats_open(), with flags.
 * @name: as for pc_stats_open().
 * @flags: 0 (pc_stats_open() itself), or PC_STATS_ANY_USER: whoever owns
 *         the segment; only for a caller whose effective uid is 0.
 *
 * Another user's segment is then read like the caller's own: checked
 * whole, trusted in nothing. The mode check stays.
 *
 * Return: as pc_stats_open(): the segment, or NULL with errno set:
 * EINVAL (a bad @name, or an unknown flag), EPERM (PC_STATS_ANY_USER from
 * a caller that is not root, whatever the segment), ENOENT, EACCES
 * (another user's, without PC_STATS_ANY_USER), EAGAIN, EPROTO, ENOMEM;
 * another errno of shm_open() or pread(), passed on.
 */
PC_API struct pc_stats *pc_stats_open_flags(const char *name, unsigned int flags);

/**
 * pc_stats_close - close a segment.
 * @s: from pc_stats_open(), or NULL.
 */
PC_API void pc_stats_close(struct pc_stats *s);

/**
 * pc_stats_header - the segment's header.
 * @s: open segment.
 *
 * Return: the header as read and checked at open: a private copy, whose
 * counts and offsets are the ones every read uses, with comm and devices
 * NUL-terminated. Its state is as at open: pc_stats_owner() reads it anew.
 */
PC_API const struct pc_stats_hdr *pc_stats_header(const struct pc_stats *s);

/**
 * pc_stats_owner - whether the process that created @s still runs.
 * @s: open segment.
 *
 * Reads the state anew, and compares the pid's start time in
 * /proc/<pid>/stat with the header's, so a pid taken by another process is
 * not mistaken for the owner; when they differ, a lock still held says
 * the owner lives in another PID namespace.
 *
 * Return: enum pc_stats_owner.
 */
PC_API enum pc_stats_owner pc_stats_owner(const struct pc_stats *s);

/**
 * pc_stats_read_worker - a consistent copy of one worker's block.
 * @s: open segment.
 * @idx: worker, below the header's nworkers.
 * @out: filled.
 *
 * Retries while the worker is writing it (a few microseconds at most),
 * for up to about 10 ms. @out->st.name comes NUL-terminated.
 *
 * Return: 0, -EINVAL (no such worker in the header read at open), -EAGAIN
 * (no consistent copy in time: the owner died while writing it, or is
 * stopped), -EPROTO (the file is shorter than its header said: truncated).
 */
PC_API int pc_stats_read_worker(const struct pc_stats *s, unsigned int idx,
				struct pc_stats_worker *out);

/**
 * pc_stats_read_conn - one connection slot.
 * @s: open segment.
 * @slot: below nworkers * conn_slots.
 * @out: filled; its identity consistent, each counter an exact value read
 *       while the connection runs; @out->peer NUL-terminated.
 *
 * Return: 0, -ENOENT (free slot), -EINVAL (no such slot), -EAGAIN (being
 * reassigned; try again), -EPROTO (truncated, as pc_stats_read_worker()).
 */
PC_API int pc_stats_read_conn(const struct pc_stats *s, unsigned int slot,
			      struct pc_stats_conn *out);

/**
 * pc_stats_for_each - visit the segments in /dev/shm.
 * @pid: only this process's, or 0 for all.
 * @fn: called with each name (e.g. "pollcore.1234.2") and its pid.
 * @arg: for @fn.
 *
 * Any thread. Live and stale segments alike: open them to tell.
 *
 * Return: the number visited, or the negative errno of opendir() when
 * /dev/shm cannot be read: -ENOENT (none), -EACCES, or another.
 */
PC_API int pc_stats_for_each(int pid, void (*fn)(const char *name, int pid, void *arg), void *arg);

/**
 * pc_stats_clean - remove a segment whose owner is gone.
 * @name: as for pc_stats_open().
 *
 * Removes only a complete segment of this layout version whose lock no
 * process holds and whose pid here is not its owner (or that is closed),
 * and only the caller's own (root's too: another user's only through
 * pc_stats_clean_flags()), with no permission bit for group or others.
 * It holds the lock while it unlinks, and unlinks only the file it
 * checked.
 *
 * Any thread.
 *
 * Return: 0 (removed), -EBUSY (its owner runs, here or in another PID
 * namespace: never removed), or another negative errno, the file left
 * alone: -EINVAL (@name is not a pollcore segment name), -ENOENT (no such
 * segment, or replaced meanwhile), -EACCES (another user's; pc_last_error()
 * says whose), -EPROTO (not a pollcore segment, or not one to trust: not a
 * regular file, a symbolic link, a mode that lets group or others in,
 * another layout), -EAGAIN (half created), -ENOMEM; another errno of
 * shm_open(), flock() or shm_unlink(), passed on.
 */
PC_API int pc_stats_clean(const char *name);

/**
 * pc_stats_clean_flags - pc_stats_clean(), with flags.
 * @name: as for pc_stats_clean().
 * @flags: 0 (pc_stats_clean() itself), or PC_STATS_ANY_USER: remove a
 *         stale segment whoever owns it; only for a caller whose
 *         effective uid is 0.
 *
 * Return: as pc_stats_clean(): 0 (removed), -EBUSY (its owner runs), or
 * another negative errno, the file left alone: -EINVAL (not a segment
 * name, or an unknown flag), -EPERM (PC_STATS_ANY_USER from a caller that
 * is not root), -ENOENT, -EACCES (another user's, without
 * PC_STATS_ANY_USER), -EPROTO, -EAGAIN, -ENOMEM; another errno of
 * shm_open(), flock() or shm_unlink(), passed on.
 */
PC_API int pc_stats_clean_flags(const char *name, unsigned int flags);

/**
 * pc_stats_segment - the name of an engine's segment.
 * @e: engine.
 *
 * Return: e.g. "pollcore.1234", or NULL when the engine has none (it
 * could not be created; the engine runs without, said in the log).
 */
PC_API const char *pc_stats_segment(const struct pc_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* POLLCORE_STATS_H */
