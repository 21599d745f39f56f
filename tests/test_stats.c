// SPDX-License-Identifier: MIT
/*
 * unit suite, white-box: workers/stats.c alone, on the host.
 *  - the segment: name, mode 0600 whatever the umask, header fields and
 *    offsets, a second engine's name, removal at destroy;
 *  - the seqcount: a reader copying while a writer publishes never sees a
 *    torn block, and gives up (-EAGAIN) on a writer stuck in its section;
 *  - connection slots: identity, live counters, free and reuse;
 *  - the histogram: bucket bounds and width, percentiles of known
 *    distributions, the copy of only the changed buckets;
 *  - stale segments: a SIGKILLed owner (zombie or reaped; a zombie is
 *    dead even while its lock is still held), a pid taken by
 *    another process (its lock gone; while held, a live namesake), a
 *    closed engine; cleaned on request, never while the owner runs;
 *    removed by exit(), but not by a forked child's exit(); foreign files
 *    left alone (tests/test_stat_seg.c has the hostile ones);
 *  - another user's segment (chowned; as root): refused by pc_stats_open()
 *    and pc_stats_clean() (EACCES, the error naming file and both uids),
 *    read and cleaned by root with PC_STATS_ANY_USER, which a caller that
 *    is not root may not use (EPERM); its owner reads it;
 *  - a segment with group or other permission bits: refused (EPROTO) and
 *    never removed, PC_STATS_ANY_USER or not.
 */
#include "stats_pvt.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "pc_test.h"

static bool shm_exists(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return access(path, F_OK) == 0;
}

/* --- the segment --------------------------------------------------------------------------- */

START_TEST(test_layout)
{
	struct stats_seg a, b;
	const struct pc_stats_hdr *h;
	struct pc_stats *r;
	struct stat sb;
	char path[128], want[64];
	uint64_t start;
	mode_t old = umask(0);

	ck_assert_int_eq(stats_seg_create(&a, 2, 3, "rxe0,rxe1"), 0);
	umask(old);
	snprintf(want, sizeof(want), "pollcore.%d", getpid());
	ck_assert_str_eq(a.name, want);
	snprintf(path, sizeof(path), "/dev/shm/%s", a.name);
	ck_assert_int_eq(stat(path, &sb), 0);
	/* 0600 even with umask 0: the counters are the owner's */
	ck_assert_uint_eq(sb.st_mode & 0777, 0600);
	ck_assert_uint_eq((uint64_t)sb.st_size,
			  4096 + 2 * sizeof(struct pc_stats_worker) + 6 * sizeof(struct pc_stats_conn) +
			      (4096 - 6 * sizeof(struct pc_stats_conn) % 4096) % 4096);

	r = pc_stats_open(a.name);
	ck_assert_ptr_nonnull(r);
	h = pc_stats_header(r);
	ck_assert_uint_eq(h->magic, PC_STATS_MAGIC);
	ck_assert_uint_eq(h->version, PC_STATS_VERSION);
	ck_assert_uint_eq(h->hdr_size, 4096);
	ck_assert_uint_eq(h->worker_size, sizeof(struct pc_stats_worker));
	ck_assert_uint_eq(h->conn_size, 192);
	ck_assert_uint_eq(h->nworkers, 2);
	ck_assert_uint_eq(h->conn_slots, 3);
	ck_assert_uint_eq(h->size, (uint64_t)sb.st_size);
	ck_assert_uint_eq(h->worker_off, 4096);
	ck_assert_uint_eq(h->conn_off, 4096 + 2 * sizeof(struct pc_stats_worker));
	ck_assert_int_eq(h->pid, getpid());
	ck_assert_int_eq(stats_proc_start(getpid(), &start, NULL), 0);
	ck_assert_uint_eq(h->start_time, start);
	ck_assert_str_eq(h->comm, "test_stats");
	ck_assert_str_eq(h->devices, "rxe0,rxe1");
	ck_assert_uint_eq(h->engine, 1);
	ck_assert_uint_eq(h->state, PC_STATS_STATE_LIVE);
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_LIVE);
	/* the creator's view of the blocks is where the header says */
	ck_assert_ptr_eq(stats_seg_worker(&a, 1), (char *)a.base + 4096 + sizeof(struct pc_stats_worker));
	ck_assert_ptr_eq(stats_seg_conns(&a, 1), (struct pc_stats_conn *)((char *)a.base + h->conn_off) + 3);

	/* a second engine of the process: its own name */
	ck_assert_int_eq(stats_seg_create(&b, 1, 1, "rxe0"), 0);
	snprintf(want, sizeof(want), "pollcore.%d.2", getpid());
	ck_assert_str_eq(b.name, want);
	ck_assert_uint_eq(((struct pc_stats_hdr *)b.base)->engine, 2);
	/* live segments are never cleaned */
	ck_assert_int_eq(pc_stats_clean(a.name), -EBUSY);
	ck_assert_int_eq(pc_stats_clean(b.name), -EBUSY);

	stats_seg_destroy(&b);
	stats_seg_destroy(&a);
	ck_assert(!shm_exists(a.name));
	ck_assert(!shm_exists(b.name));
	/* a reader that still has it mapped sees it closed: stale, not live */
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_CLOSED);
	pc_stats_close(r);
	ck_assert_ptr_null(pc_stats_open(a.name));
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* --- the seqcount -------------------------------------------------------------------------- */

struct race {
	struct wstats ws;
	atomic_int stop;
	uint64_t published;
};

/* Publishes blocks whose every counter word is k, for k = 1, 2, ... */
static void *writer(void *arg)
{
	struct race *r = arg;
	struct pc_worker_stats st;
	uint64_t *words = (uint64_t *)&st, k = 0;
	size_t i;

	while (!atomic_load(&r->stop)) {
		k++;
		for (i = 0; i < sizeof(st) / 8; i++)
			words[i] = k;
		for (i = 0; i < PC_STATS_WC_STATUSES; i++)
			r->ws.wc_status[i] = k;
		wstats_rpc(&r->ws, 1000 + k % 64);
		wstats_publish(&r->ws, &st, k);
	}
	r->published = k;
	return NULL;
}

START_TEST(test_seqcount_no_torn_reads)
{
	static struct race r;
	static struct pc_stats_worker copy;
	const uint64_t *words = (const uint64_t *)&copy.st;
	struct stats_seg seg;
	struct pc_stats *rd;
	uint64_t t_end = pc_test_now_ms() + 60000, reads = 0, last = 0, changes = 0;
	pthread_t t;
	size_t i;

	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(wstats_init(&r.ws, stats_seg_worker(&seg, 0), stats_seg_conns(&seg, 0), 1), 0);
	rd = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pthread_create(&t, NULL, writer, &r), 0);
	/* by count, not time: a slow host (TSan) gets fewer reads per second */
	while ((reads < 200 || changes < 20) && pc_test_now_ms() < t_end) {
		uint64_t k;

		if (pc_stats_read_worker(rd, 0, &copy))
			continue;
		reads++;
		k = copy.publish_ns;
		ck_assert_uint_eq(copy.publishes, k);
		ck_assert_uint_ge(k, last);
		changes += k != last;
		last = k;
		for (i = 0; i < sizeof(copy.st) / 8; i++)
			ck_assert_uint_eq(words[i], k);
		for (i = 0; i < PC_STATS_WC_STATUSES; i++)
			ck_assert_uint_eq(copy.wc_status[i], k);
		ck_assert_uint_eq(copy.rpc.count, k);
		ck_assert_uint_eq(copy.seq % 2, 0);
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	ck_assert_uint_ge(reads, 200);
	ck_assert_uint_ge(changes, 20);
	printf("seqcount: %llu consistent reads over %llu publishes\n", (unsigned long long)reads,
	       (unsigned long long)r.published);

	/* a writer stuck inside its section (died there): no copy, in bounded time */
	__atomic_store_n(&stats_seg_worker(&seg, 0)->seq, 7, __ATOMIC_RELEASE);
	t_end = pc_test_now_ms();
	ck_assert_int_eq(pc_stats_read_worker(rd, 0, &copy), -EAGAIN);
	ck_assert_uint_lt(pc_test_now_ms() - t_end, 1000);
	ck_assert_int_eq(pc_stats_read_worker(rd, 1, &copy), -EINVAL);
	pc_stats_close(rd);
	wstats_free(&r.ws);
	stats_seg_destroy(&seg);
}
END_TEST

/* --- connection slots ---------------------------------------------------------------------- */

START_TEST(test_conn_slots)
{
	struct pc_stats_conn id = { .state = PC_STATS_CONN_UP, .qp_num = 0x11, .worker = 1,
				    .raw = 1, .passive = 1, .peer_port = 7471, .since_ns = 42,
				    .peer = "fe80::ff:fe00:1%d0" };
	struct pc_stats_conn *s1, *s2, got;
	struct stats_seg seg;
	struct wstats ws;
	struct pc_stats *rd;
	unsigned int base = 2; /* worker 1's first slot */

	ck_assert_int_eq(stats_seg_create(&seg, 2, 2, "fake0"), 0);
	ck_assert_int_eq(wstats_init(&ws, stats_seg_worker(&seg, 1), stats_seg_conns(&seg, 1), 2), 0);
	rd = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pc_stats_read_conn(rd, base, &got), -ENOENT);
	ck_assert_int_eq(pc_stats_read_conn(rd, 4, &got), -EINVAL);

	s1 = wstats_slot_open(&ws, &id);
	ck_assert_ptr_eq(s1, stats_seg_conns(&seg, 1));
	ck_assert_int_eq(pc_stats_read_conn(rd, base, &got), 0);
	ck_assert_uint_eq(got.qp_num, 0x11);
	ck_assert_uint_eq(got.state, PC_STATS_CONN_UP);
	ck_assert_uint_eq(got.worker, 1);
	ck_assert(got.raw && got.passive);
	ck_assert_uint_eq(got.peer_port, 7471);
	ck_assert_uint_eq(got.since_ns, 42);
	ck_assert_str_eq(got.peer, "fe80::ff:fe00:1%d0");
	ck_assert_uint_eq(got.msgs_sent, 0);
	/* counters are live: what the worker counts is what a reader gets */
	__atomic_store_n(&s1->msgs_sent, 5, __ATOMIC_RELAXED);
	__atomic_store_n(&s1->bytes_recv, 640, __ATOMIC_RELAXED);
	__atomic_store_n(&s1->backlog, 3, __ATOMIC_RELAXED);
	ck_assert_int_eq(pc_stats_read_conn(rd, base, &got), 0);
	ck_assert_uint_eq(got.msgs_sent, 5);
	ck_assert_uint_eq(got.bytes_recv, 640);
	ck_assert_uint_eq(got.backlog, 3);

	id.qp_num = 0x12;
	s2 = wstats_slot_open(&ws, &id);
	ck_assert_ptr_eq(s2, s1 + 1);
	ck_assert_ptr_null(wstats_slot_open(&ws, &id)); /* all taken */
	wstats_slot_close(&ws, s1);
	ck_assert_int_eq(pc_stats_read_conn(rd, base, &got), -ENOENT);
	ck_assert_int_eq(pc_stats_read_conn(rd, base + 1, &got), 0);
	ck_assert_uint_eq(got.qp_num, 0x12);
	/* reused: another identity, counters from zero */
	id.qp_num = 0x13;
	ck_assert_ptr_eq(wstats_slot_open(&ws, &id), s1);
	ck_assert_int_eq(pc_stats_read_conn(rd, base, &got), 0);
	ck_assert_uint_eq(got.qp_num, 0x13);
	ck_assert_uint_eq(got.msgs_sent, 0);
	ck_assert_uint_eq(got.backlog, 0);
	/* the seq moved by 2 per assignment: readers notice a reuse */
	ck_assert_uint_eq(got.seq, 6);

	pc_stats_close(rd);
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}
END_TEST

/* --- the histogram ------------------------------------------------------------------------- */

START_TEST(test_hist_buckets)
{
	uint64_t v, low, width, prev_b = 0;
	unsigned int b;
	uint32_t rnd = 1;
	int i;

	for (v = 0; v < (1u << 16); v++) {
		b = pc_stats_hist_bucket(v);
		ck_assert_uint_ge(b, prev_b); /* monotone */
		ck_assert_uint_le(b, prev_b + 1); /* and no bucket skipped */
		prev_b = b;
		low = pc_stats_hist_low(b, &width);
		ck_assert(low <= v && v < low + width);
	}
	for (i = 0; i < 100000; i++) {
		rnd = rnd * 1103515245 + 12345;
		v = (((uint64_t)rnd << 13) ^ ((uint64_t)rnd >> 3)) & ((1ull << 42) - 1);
		v >>= rnd % 40;
		b = pc_stats_hist_bucket(v);
		ck_assert_uint_lt(b, PC_STATS_HIST_BUCKETS);
		low = pc_stats_hist_low(b, &width);
		ck_assert(low <= v && v < low + width);
		/* at most 1/32 of the values it holds wide */
		if (v >= 64)
			ck_assert_uint_le(width * 32, low);
	}
	/* the top: the last bucket holds everything from 2^42 ns on */
	ck_assert_uint_eq(pc_stats_hist_bucket((1ull << 42) - 1), PC_STATS_HIST_BUCKETS - 1);
	ck_assert_uint_eq(pc_stats_hist_bucket(1ull << 42), PC_STATS_HIST_BUCKETS - 1);
	ck_assert_uint_eq(pc_stats_hist_bucket(UINT64_MAX), PC_STATS_HIST_BUCKETS - 1);
	ck_assert_uint_eq(PC_STATS_HIST_BUCKETS, 1216);
}
END_TEST

static void assert_near(uint64_t got, uint64_t want, double tol);

/*
 * The worker's tick clock, converted, agrees with CLOCK_MONOTONIC; and a
 * deadline put in ticks (stats_ns_ticks(): the grant deadline) is as
 * long in nanoseconds.
 */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(test_tick_clock)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	uint64_t a0, a1, b0, b1, t0, t1, lo, hi, got;

	stats_clock_init();
	/*
	 * Each tick read is bracketed by two clock reads: however long this
	 * thread is preempted, the true interval lies in [lo, hi].
	 */
	a0 = mono_ns();
	t0 = stats_ticks();
	a1 = mono_ns();
	nanosleep(&ts, NULL);
	b0 = mono_ns();
	t1 = stats_ticks();
	b1 = mono_ns();
	lo = b0 - a1;
	hi = b1 - a0;
	got = stats_ticks_ns(t1 - t0);
	ck_assert_msg(got >= lo * 0.97 && got <= hi * 1.03, "ticks say %llu ns, the clock [%llu, %llu]",
		      (unsigned long long)got, (unsigned long long)lo, (unsigned long long)hi);
	ck_assert_msg(t1 - t0 >= stats_ns_ticks(lo) * 0.97 && t1 - t0 <= stats_ns_ticks(hi) * 1.03,
		      "%llu ticks, the clock [%llu, %llu] ticks", (unsigned long long)(t1 - t0),
		      (unsigned long long)stats_ns_ticks(lo), (unsigned long long)stats_ns_ticks(hi));
	assert_near(stats_ticks_ns(stats_publish_ticks), STATS_PUBLISH_NS, 0.03);
	assert_near(stats_ticks_ns(stats_ns_ticks(1000000)), 1000000, 0.001);
	assert_near(stats_ticks_ns(stats_ns_ticks(2000000000ull)), 2000000000ull, 0.001);
}
END_TEST

/*
 * A call's deadline, put in ticks (stats_us_ticks()), is never short of its
 * microseconds on CLOCK_MONOTONIC, and long by little. A trial counts only
 * when no read in it was delayed (preemption): then the tick clock's
 * crossing of the deadline lies in [lo, hi] after the start.
 */
START_TEST(test_deadline_ticks_never_short)
{
	static const uint64_t us[] = { 1000, 5000, 40000 };
	unsigned int i, trial, counted = 0;

	stats_clock_init();
	for (i = 0; i < sizeof(us) / sizeof(us[0]); i++) {
		for (trial = 0; trial < 50; trial++) {
			uint64_t a0, a1, c0, due, b = 0, b_prev = 0, b_end, lo, hi;

			a0 = mono_ns();
			c0 = stats_ticks();
			a1 = mono_ns();
			due = c0 + stats_us_ticks(us[i]);
			do {
				b_prev = b;
				b = mono_ns();
			} while (stats_ticks() < due);
			b_end = mono_ns();
			if (a1 - a0 > 2000 || b - b_prev > 2000 || b_end - b > 2000 || !b_prev)
				continue;
			/* the crossing came after the last read that saw it not yet due */
			lo = b_prev - a1;
			hi = b_end - a0;
			ck_assert_msg(lo >= us[i] * 1000, "a deadline of %llu us came after %llu ns",
				      (unsigned long long)us[i], (unsigned long long)lo);
			ck_assert_msg(hi <= us[i] * 1000 + us[i] * 1000 / 50 + 10000,
				      "a deadline of %llu us came after %llu ns (over 2%% + 10 us late)",
				      (unsigned long long)us[i], (unsigned long long)hi);
			counted++;
			break;
		}
	}
	ck_assert_uint_eq(counted, sizeof(us) / sizeof(us[0]));
}
END_TEST

static void assert_near(uint64_t got, uint64_t want, double tol)
{
	double err = ((double)got - (double)want) / (double)want;

	ck_assert_msg(err < tol && err > -tol, "got %llu, want %llu (within %.1f%%)",
		      (unsigned long long)got, (unsigned long long)want, tol * 100);
}

START_TEST(test_hist_percentiles)
{
	static struct wstats ws;
	static struct pc_stats_worker copy;
	struct pc_worker_stats st = { .loops = 1 };
	struct stats_seg seg;
	struct pc_stats *rd;
	uint64_t v;
	int i;

	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	ck_assert_int_eq(wstats_init(&ws, stats_seg_worker(&seg, 0), stats_seg_conns(&seg, 0), 1), 0);
	ck_assert_uint_eq(pc_stats_hist_percentile(&ws.rpc, 0.5), 0); /* empty */

	/* uniform 1 us .. 100 us */
	for (v = 1; v <= 100000; v++)
		wstats_rpc(&ws, v);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.5), 50000, 0.02);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.99), 99000, 0.02);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.999), 99900, 0.02);
	ck_assert_uint_le(pc_stats_hist_percentile(&ws.rpc, 1.0), 100000);
	ck_assert_uint_eq(ws.rpc.max_ns, 100000);
	ck_assert_uint_eq(ws.rpc.count, 100000);
	ck_assert_uint_eq(ws.rpc.sum_ns, 100000ull * 100001 / 2);

	/* the published copy gives the same answers */
	wstats_publish(&ws, &st, 1);
	rd = pc_stats_open(seg.name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pc_stats_read_worker(rd, 0, &copy), 0);
	ck_assert_uint_eq(pc_stats_hist_percentile(&copy.rpc, 0.99),
			  pc_stats_hist_percentile(&ws.rpc, 0.99));
	ck_assert_uint_eq(copy.rpc.count, 100000);

	/* a tail far from the rest: 1000 x 10 us, 2 x 5 ms; only the changed buckets are copied */
	for (i = 0; i < 1000; i++)
		wstats_rpc(&ws, 10000);
	for (i = 0; i < 2; i++)
		wstats_rpc(&ws, 5000000);
	wstats_publish(&ws, &st, 2);
	ck_assert_int_eq(pc_stats_read_worker(rd, 0, &copy), 0);
	ck_assert_int_eq(memcmp(copy.rpc.bucket, ws.rpc.bucket, sizeof(ws.rpc.bucket)), 0);
	ck_assert_uint_eq(copy.rpc.count, 101002);
	ck_assert_uint_eq(copy.rpc.max_ns, 5000000);
	assert_near(pc_stats_hist_percentile(&copy.rpc, 0.99999), 5000000, 0.02);

	/* exactly 999 fast and 1 slow: p99.9 is the slow one's bucket, p99 a fast one */
	memset(&ws.rpc, 0, sizeof(ws.rpc));
	for (i = 0; i < 999; i++)
		wstats_rpc(&ws, 8000);
	wstats_rpc(&ws, 2000000);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.99), 8000, 0.02);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.999), 8000, 0.02);
	assert_near(pc_stats_hist_percentile(&ws.rpc, 0.9995), 2000000, 0.02);

	pc_stats_close(rd);
	wstats_free(&ws);
	stats_seg_destroy(&seg);
}
END_TEST

/* --- stale segments ------------------------------------------------------------------------ */

struct found {
	char name[64];
	int n;
};

static void find_cb(const char *name, int pid, void *arg)
{
	struct found *f = arg;

	(void)pid;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->n++;
}

static char proc_state(pid_t pid)
{
	uint64_t t;
	char st = 0;

	return stats_proc_start(pid, &t, &st) ? 0 : st;
}

START_TEST(test_stale_after_sigkill)
{
	struct stats_seg seg;
	struct pc_stats *rd;
	struct found f = { .n = 0 };
	char name[48] = "";
	int fds[2], status, i;
	pid_t child;

	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		if (stats_seg_create(&seg, 1, 4, "fake0"))
			_exit(1);
		(void)!write(fds[1], seg.name, sizeof(seg.name));
		for (;;)
			pause();
	}
	ck_assert_int_eq(read(fds[0], name, sizeof(name)), sizeof(name));
	close(fds[0]);
	close(fds[1]);

	rd = pc_stats_open(name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pc_stats_header(rd)->pid, child);
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_LIVE);
	ck_assert_int_eq(pc_stats_clean(name), -EBUSY);
	ck_assert_int_eq(pc_stats_for_each(child, find_cb, &f), 1);
	ck_assert_str_eq(f.name, name);

	ck_assert_int_eq(kill(child, SIGKILL), 0);
	/* killed, not reaped yet: a zombie is no owner */
	for (i = 0; i < 5000 && proc_state(child) != 'Z'; i++)
		usleep(1000);
	ck_assert_int_eq(proc_state(child), 'Z');
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_DEAD);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* reaped: still there, and stale */
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_DEAD);
	ck_assert(shm_exists(name));
	pc_stats_close(rd);

	ck_assert_int_eq(pc_stats_clean(name), 0);
	ck_assert(!shm_exists(name));
	ck_assert_int_eq(pc_stats_clean(name), -ENOENT);
}
END_TEST

/*
 * The owner exited, yet its lock is held: by its other threads, still
 * exiting after the leader became a zombie (TSan's runtime thread made
 * this happen), or here by a child it forked with a copy of the
 * descriptor. A zombie with the recorded
 * start time is the owner itself: dead, not a namesake elsewhere.
 */
START_TEST(test_zombie_owner_lock_held)
{
	struct stats_seg seg;
	struct pc_stats *rd;
	char name[48] = "";
	int fds[2], status, i;
	pid_t child, holder = 0;

	/* the holder, orphaned when the owner dies, comes back to this process */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pid_t h;

		/*
		 * A forked child closes the library's descriptor (segs_postfork_child());
		 * a copy of it stands in for the exiting threads' file table.
		 */
		if (stats_seg_create(&seg, 1, 1, "fake0") || dup(seg.fd) < 0)
			_exit(1);
		h = fork();
		if (h == 0) {
			for (;;)
				pause();
		}
		(void)!write(fds[1], &h, sizeof(h));
		(void)!write(fds[1], seg.name, sizeof(seg.name));
		for (;;)
			pause();
	}
	ck_assert_int_eq(read(fds[0], &holder, sizeof(holder)), sizeof(holder));
	ck_assert_int_eq(read(fds[0], name, sizeof(name)), sizeof(name));
	close(fds[0]);
	close(fds[1]);
	rd = pc_stats_open(name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_LIVE);

	ck_assert_int_eq(kill(child, SIGKILL), 0);
	for (i = 0; i < 5000 && proc_state(child) != 'Z'; i++)
		usleep(1000);
	ck_assert_int_eq(proc_state(child), 'Z');
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_DEAD);
	/* stale, but never removed while a process holds the lock */
	ck_assert_int_eq(pc_stats_clean(name), -EBUSY);
	ck_assert_int_eq(waitpid(child, &status, 0), child);

	ck_assert_int_eq(kill(holder, SIGKILL), 0);
	ck_assert_int_eq(waitpid(holder, &status, 0), holder);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_DEAD);
	pc_stats_close(rd);
	ck_assert_int_eq(pc_stats_clean(name), 0);
	ck_assert(!shm_exists(name));
}
END_TEST

START_TEST(test_pid_reused)
{
	struct stats_seg seg;
	struct pc_stats_hdr *h;
	struct pc_stats *rd;
	char name[48];

	/* a segment naming this pid, with another start time, its lock held: a live namesake */
	ck_assert_int_eq(stats_seg_create(&seg, 1, 1, "fake0"), 0);
	snprintf(name, sizeof(name), "%s", seg.name);
	h = stats_seg_hdr(&seg);
	h->start_time ^= 0x5a5a;
	rd = pc_stats_open(name);
	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_ELSEWHERE);
	ck_assert_int_eq(pc_stats_clean(name), -EBUSY);
	/* its owner is gone, and its lock with it: left by an older process */
	close(seg.fd);
	seg.fd = -1;
	ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_REUSED);
	pc_stats_close(rd);

	/* a new engine of this process takes the name over */
	{
		struct stats_seg again;

		ck_assert_int_eq(stats_seg_create(&again, 1, 1, "fake1"), 0);
		ck_assert_str_eq(again.name, name);
		rd = pc_stats_open(name);
		ck_assert_ptr_nonnull(rd);
		ck_assert_str_eq(pc_stats_header(rd)->devices, "fake1");
		ck_assert_int_eq(pc_stats_owner(rd), PC_STATS_OWNER_LIVE);
		pc_stats_close(rd);
		stats_seg_destroy(&again);
	}
	/* the old one was unlinked when taken over; only its mapping is left */
	ck_assert(!shm_exists(name));
	stats_seg_destroy(&seg);
}
END_TEST

/* Creates a segment and leaves with exit(): the segment must go with it. */
static int create_and_exit(void)
{
	static struct stats_seg seg;
	char want[48];
	int status;
	pid_t grandchild;

	if (stats_seg_create(&seg, 1, 1, "fake0"))
		return 10;
	snprintf(want, sizeof(want), "pollcore.%d", getpid());
	if (strcmp(seg.name, want))
		return 11;
	/* a forked child inherits the mapping and the exit handler, not the segment */
	grandchild = fork();
	if (grandchild == 0)
		exit(0);
	if (waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status))
		return 12;
	if (!shm_exists(seg.name))
		return 13;
	return 0;
}

START_TEST(test_exit_removes)
{
	char name[48];
	int status;
	pid_t child = fork();

	ck_assert_int_ge(child, 0);
	if (child == 0)
		exit(create_and_exit());
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	snprintf(name, sizeof(name), "pollcore.%d", child);
	ck_assert(!shm_exists(name));
}
END_TEST

/* Writes @len bytes of @hdr as /dev/shm/@name. */
static void write_shm(const char *name, const void *hdr, size_t len)
{
	int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, hdr, len), (ssize_t)len);
	close(fd);
}

START_TEST(test_foreign_files)
{
	static struct pc_stats_hdr h;
	char name[64];

	/* not a pollcore segment, under a name of a live pid (ours) */
	snprintf(name, sizeof(name), "pollcore.%d.999", getpid());
	memset(&h, 0x33, sizeof(h));
	write_shm(name, &h, sizeof(h));
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EPROTO);
	/* left alone, whoever's it is */
	ck_assert_int_eq(pc_stats_clean(name), -EPROTO);
	ck_assert(shm_exists(name));
	/* another layout version */
	memset(&h, 0, sizeof(h));
	h.magic = PC_STATS_MAGIC;
	h.version = PC_STATS_VERSION + 1;
	write_shm(name, &h, sizeof(h));
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EPROTO);
	/* being created: no magic yet */
	h.magic = 0;
	write_shm(name, &h, sizeof(h));
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EAGAIN);
	shm_unlink(name);
	/* names that are not ours */
	ck_assert_int_eq(pc_stats_clean("pollcore.abc"), -EINVAL);
	ck_assert_int_eq(pc_stats_clean("pollcore.0"), -EINVAL);
	ck_assert_int_eq(pc_stats_clean("other.12"), -EINVAL);
	ck_assert_ptr_null(pc_stats_open("../etc/passwd"));
}
END_TEST

/* A stale segment (its owner SIGKILLed and reaped); its name in @name. */
static void stale_seg(char *name, size_t len)
{
	struct stats_seg seg;
	char got[48] = "";
	int fds[2], status;
	pid_t child;

	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		if (stats_seg_create(&seg, 1, 1, "fake0"))
			_exit(1);
		(void)!write(fds[1], seg.name, sizeof(seg.name));
		for (;;)
			pause();
	}
	ck_assert_int_eq(read(fds[0], got, sizeof(got)), sizeof(got));
	close(fds[0]);
	close(fds[1]);
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	snprintf(name, len, "%s", got);
}

static void shm_chown(const char *name, uid_t uid)
{
	int fd = shm_open(name, O_RDONLY | O_NOFOLLOW, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchown(fd, uid, uid), 0);
	close(fd);
}

/*
 * In a child that is @uid (not root): the result of @what on @name, as
 * 0, or the errno (open) / negative errno (clean) plus 1000 for a check
 * that went wrong.
 */
enum as_what { AS_OPEN, AS_OPEN_ANY, AS_CLEAN_ANY };

static int as_user(uid_t uid, const char *name, enum as_what what)
{
	struct pc_stats *r;
	int status, ret;
	pid_t child = fork();

	ck_assert_int_ge(child, 0);
	if (child == 0) {
		if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(200);
		switch (what) {
		case AS_OPEN:
		case AS_OPEN_ANY:
			errno = 0;
			r = what == AS_OPEN ? pc_stats_open(name)
					    : pc_stats_open_flags(name, PC_STATS_ANY_USER);
			if (r) {
				ret = pc_stats_header(r)->nworkers == 1 ? 0 : 201;
				pc_stats_close(r);
				_exit(ret);
			}
			_exit(errno > 0 && errno < 200 ? errno : 202);
		default:
			ret = pc_stats_clean_flags(name, PC_STATS_ANY_USER);
			_exit(ret <= 0 && ret > -200 ? -ret : 203);
		}
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * Another user's segment is not read or removed as if it were the
 * caller's: only by root, and only on purpose (PC_STATS_ANY_USER). Runs as
 * root (a child drops to other uids); elsewhere it cannot chown: skipped.
 */
START_TEST(test_other_users_segment)
{
	char name[48], uids[64];
	struct pc_stats *r;

	if (geteuid() != 0) {
		printf("SKIP: test_other_users_segment needs root (chown)\n");
		return;
	}
	stale_seg(name, sizeof(name));
	shm_chown(name, 65534);

	/* root, not on purpose: refused, the file named with both uids */
	errno = 0;
	ck_assert_ptr_null(pc_stats_open(name));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_msg(strstr(pc_last_error(), name), "'%s' does not name %s", pc_last_error(),
		      name);
	snprintf(uids, sizeof(uids), "owner uid 65534, you are uid 0");
	ck_assert_msg(strstr(pc_last_error(), uids), "'%s' does not say '%s'", pc_last_error(), uids);
	errno = 0;
	ck_assert_ptr_null(pc_stats_open_flags(name, 0));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_int_eq(pc_stats_clean(name), -EACCES);
	ck_assert_int_eq(pc_stats_clean_flags(name, 0), -EACCES);
	ck_assert(shm_exists(name));

	/* its owner reads it, not being root */
	ck_assert_int_eq(as_user(65534, name, AS_OPEN), 0);
	/* another user who is not root may not ask for it: EPERM, whatever the file */
	ck_assert_int_eq(as_user(65533, name, AS_OPEN_ANY), EPERM);
	ck_assert_int_eq(as_user(65533, name, AS_CLEAN_ANY), EPERM);
	/* nor read it without asking: the kernel refuses (0600), and the error names the owner */
	ck_assert_int_eq(as_user(65533, name, AS_OPEN), EACCES);
	ck_assert(shm_exists(name));

	/* root, on purpose: read, and removed once stale */
	r = pc_stats_open_flags(name, PC_STATS_ANY_USER);
	ck_assert_msg(r, "PC_STATS_ANY_USER as root: %s", pc_last_error());
	ck_assert_uint_eq(pc_stats_header(r)->nworkers, 1);
	ck_assert_str_eq(pc_stats_header(r)->devices, "fake0");
	ck_assert_int_eq(pc_stats_owner(r), PC_STATS_OWNER_DEAD);
	pc_stats_close(r);
	ck_assert_int_eq(pc_stats_clean_flags(name, PC_STATS_ANY_USER), 0);
	ck_assert(!shm_exists(name));

	/* flags this library does not know */
	errno = 0;
	ck_assert_ptr_null(pc_stats_open_flags(name, 1u << 7));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(pc_stats_clean_flags(name, 1u << 7), -EINVAL);
}
END_TEST

/* A segment others may access is not one an engine made (0600): not trusted, not removed. */
START_TEST(test_segment_mode)
{
	static const mode_t modes[] = {0640, 0604, 0620, 0602, 0700};
	char name[48];
	unsigned int i;
	int fd;

	stale_seg(name, sizeof(name));
	fd = shm_open(name, O_RDONLY | O_NOFOLLOW, 0);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		ck_assert_int_eq(fchmod(fd, modes[i]), 0);
		errno = 0;
		if (!(modes[i] & 077)) {
			/* the owner's bits are the owner's business */
			struct pc_stats *r = pc_stats_open(name);

			ck_assert_msg(r, "mode %04o: %s", modes[i], pc_last_error());
			pc_stats_close(r);
			continue;
		}
		ck_assert_msg(!pc_stats_open(name), "mode %04o: opened", modes[i]);
		ck_assert_msg(errno == EPROTO, "mode %04o: errno %d", modes[i], errno);
		ck_assert_msg(strstr(pc_last_error(), name) && strstr(pc_last_error(), "mode"),
			      "mode %04o: '%s'", modes[i], pc_last_error());
		ck_assert_ptr_null(pc_stats_open_flags(name, PC_STATS_ANY_USER));
		ck_assert_int_eq(errno, EPROTO);
		ck_assert_int_eq(pc_stats_clean(name), -EPROTO);
		ck_assert_int_eq(pc_stats_clean_flags(name, PC_STATS_ANY_USER), -EPROTO);
		ck_assert(shm_exists(name));
	}
	ck_assert_int_eq(fchmod(fd, 0600), 0);
	close(fd);
	ck_assert_int_eq(pc_stats_clean(name), 0);
	ck_assert(!shm_exists(name));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_seqcount_no_torn_reads);
	tcase_add_test(tc, test_conn_slots);
	tcase_add_test(tc, test_hist_buckets);
	tcase_add_test(tc, test_hist_percentiles);
	tcase_add_test(tc, test_tick_clock);
	tcase_add_test(tc, test_deadline_ticks_never_short);
	tcase_add_test(tc, test_stale_after_sigkill);
	tcase_add_test(tc, test_zombie_owner_lock_held);
	tcase_add_test(tc, test_pid_reused);
	tcase_add_test(tc, test_exit_removes);
	tcase_add_test(tc, test_foreign_files);
	tcase_add_test(tc, test_other_users_segment);
	tcase_add_test(tc, test_segment_mode);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
