// SPDX-License-Identifier: MIT
/*
 * pollcore's rings against the references, in one process run: DPDK's
 * rte_ring, Concurrency Kit's ck_ring and liburcu's wfcqueue. Same modes,
 * element counts, slot count and thread pinning for every implementation.
 *
 * Modes: SPSC and MPSC (2 producers), each with the single-object calls and
 * with bursts of 8 and 32. A round runs every mode with every implementation,
 * interleaved (who goes first rotates); rounds repeat up to
 * BENCH_RING_REF_ROUNDS (default 5) while they fit in BENCH_RING_REF_BUDGET
 * seconds (default 60; at least one round). Figures are Mops/s (million
 * elements moved per second) and ratios pollcore/reference, for the best
 * run, the median run and the fastest window of WINDOW elements in any run
 * (the consumer reads the clock every WINDOW elements). On a shared machine
 * other load only ever slows a run down (each run prints the share of the
 * CPUs its threads got), so the best run is the figure and the goal is
 * judged on it; on a loaded machine few whole runs get both CPUs, and the
 * fastest windows are the steadier figure.
 *
 * Pinning: the two first CPUs of our affinity mask, A and B. SPSC: producer
 * on A, consumer on B. MPSC (3 threads: oversubscribes a 2-CPU machine):
 * producer 0 on A, producer 1 and the consumer time-sliced on B, so the two
 * producers really run at the same time and contend on the shared index.
 * Not both producers on A: rte_ring's and ck_ring's multi-producer enqueue
 * waits for earlier producers to publish in order, so a producer preempted
 * inside its enqueue makes the other spin through its whole time slice, and
 * then the roles swap: about one element per scheduler slice (measured here:
 * rte_ring, single calls, 200000 elements in 456 s). pollcore's MPSC has no
 * such wait. BENCH_RING_REF_MPSC_ONE_CPU=1 selects that layout anyway.
 * A thread yields the CPU when it waits only if it shares its CPU with
 * another thread of the run; otherwise it spins with a pause.
 *
 * The implementations and the fairness notes: bench_ring_ref.h.
 *
 * Integrity: each value carries its producer and a sequence number; the
 * consumer checks that every value is the next one expected from its
 * producer, so a lost, duplicated or reordered element fails the run (exit
 * 1). Speed never fails it.
 *
 * Time cap: a run still going after BENCH_RING_REF_RUN_CAP seconds (default
 * 3) is stopped: the producers stop sending, the consumer drains and checks
 * what they sent, and the figure counts that. It only happens on an
 * overloaded machine (a run takes well under a second otherwise), and keeps
 * the whole benchmark under 2 minutes there too; the output says so.
 *
 * Environment: BENCH_RING_REF_OPS (elements per run in single mode, default
 * 2000000; bursts move 4 times as many), BENCH_RING_REF_ROUNDS,
 * BENCH_RING_REF_BUDGET, BENCH_RING_REF_RUN_CAP,
 * BENCH_RING_REF_MPSC_ONE_CPU (see Pinning),
 * BENCH_RING_REF_MODES (comma-separated JSON keys, e.g. spsc_burst8: only
 * those modes). PC_BENCH_SHORT (set by tools/run-tests, which only needs to
 * see it run, check every element and print its figures): one round of
 * 200000 elements unless BENCH_RING_REF_OPS and BENCH_RING_REF_ROUNDS say
 * otherwise.
 */
#include "bench_ring_ref.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 15U

enum impl { PC, RTE, CK, WFCQ, NIMPL };

static const char *const impl_name[NIMPL] = {"pollcore", "rte_ring", "ck_ring", "wfcqueue"};

static const struct mode modes[] = {
    {"spsc single", "spsc_single", false, true, 1},
    {"spsc burst 8", "spsc_burst8", false, false, 8},
    {"spsc burst 32", "spsc_burst32", false, false, 32},
    {"mpsc single", "mpsc_single", true, true, 1},
    {"mpsc burst 8", "mpsc_burst8", true, false, 8},
    {"mpsc burst 32", "mpsc_burst32", true, false, 32},
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (unsigned long)ts.tv_sec * 1000000000UL + (unsigned long)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spin a little, then, if @shared, let a thread sharing our CPU run. */
static inline void backoff(unsigned int *spins, bool shared)
{
	if (shared && ++*spins % 64 == 0)
		sched_yield();
	else
		cpu_relax();
}

/* Returns the thread's CPU time at the start; see account_cpu(). */
static unsigned long wait_go(struct bench *b)
{
	unsigned int spins = 0;

	atomic_fetch_add(&b->ready, 1);
	while (!atomic_load_explicit(&b->go, memory_order_acquire))
		backoff(&spins, true);
	return thread_cpu_ns();
}

static void account_cpu(struct bench *b, unsigned long start_ns)
{
	atomic_fetch_add(&b->cpu_ns, thread_cpu_ns() - start_ns);
}

/* --- the loops, one instance per implementation (calls inlined, no pointers) ------------- */

static pc_always_inline void *producer_loop(struct producer *p,
					    unsigned int (*enq)(struct bench *, struct producer *,
								void *const *, unsigned int))
{
	struct bench *b = p->b;
	uintptr_t tag = (uintptr_t)p->id << SEQ_BITS;
	unsigned long sent = 0, full = 0;
	unsigned int burst = b->m->burst, spins = 0, i, n;
	void *objs[BURST_MAX];
	unsigned long cpu0 = wait_go(b);

	while (sent < b->ops && !atomic_load_explicit(&b->stop, memory_order_relaxed)) {
		n = (unsigned int)PC_MIN((unsigned long)burst, b->ops - sent);
		for (i = 0; i < n; i++)
			objs[i] = (void *)(tag | (sent + i + 1));
		n = enq(b, p, objs, n);
		if (pc_unlikely(n == 0)) {
			full++;
			backoff(&spins, p->shares);
			continue;
		}
		spins = 0;
		sent += n;
	}
	b->full_polls[p->id] = full;
	account_cpu(b, cpu0);
	atomic_fetch_add(&b->sent, sent);
	/* release: our enqueues and the count above happen before the consumer sees us finished */
	atomic_fetch_add_explicit(&b->finished, 1, memory_order_release);
	return NULL;
}

static pc_always_inline void *consumer_loop(struct bench *b,
					    unsigned int (*deq)(struct bench *, void **,
								unsigned int))
{
	unsigned long expect[MAX_PRODUCERS] = {0}, total = b->ops * b->nprod, got = 0, empty = 0;
	unsigned long mark = WINDOW;
	unsigned int burst = b->m->burst, spins = 0, i, n, id;
	void *objs[BURST_MAX];
	unsigned long cpu0 = wait_go(b);
	uintptr_t v;

	while (got < total) {
		n = deq(b, objs, burst);
		if (pc_unlikely(n == 0)) {
			empty++;
			/* acquire: pairs with the producers' release; what they sent is visible */
			if (atomic_load_explicit(&b->finished, memory_order_acquire) == b->nprod) {
				total = atomic_load(&b->sent); /* fewer than planned if stopped early */
				if (got >= total)
					break;
			}
			backoff(&spins, b->consumer_shares);
			continue;
		}
		spins = 0;
		for (i = 0; i < n; i++) {
			v = (uintptr_t)objs[i];
			id = (unsigned int)(v >> SEQ_BITS);
			if (pc_unlikely(id >= b->nprod || (v & SEQ_MASK) != expect[id] + 1)) {
				if (id >= b->nprod)
					snprintf(b->error, sizeof(b->error),
						 "element %lu is %#lx: no such producer", got + i,
						 (unsigned long)v);
				else
					snprintf(b->error, sizeof(b->error),
						 "element %lu is producer %u's number %lu, expected "
						 "its number %lu (lost, duplicated or reordered)",
						 got + i, id, (unsigned long)(v & SEQ_MASK),
						 expect[id] + 1);
				atomic_store(&b->stop, true);
				goto out;
			}
			expect[id]++;
		}
		got += n;
		if (pc_unlikely(got >= mark)) {
			b->marks[b->nmarks++] = now();
			mark += WINDOW;
		}
	}
out:
	b->t_end = now();
	b->got = got;
	b->empty_polls = empty;
	account_cpu(b, cpu0);
	return NULL;
}

#define DEFINE_LOOPS(im)                                                                         \
	static void *im##_producer(void *arg)                                                    \
	{                                                                                        \
		return producer_loop(arg, im##_enq);                                             \
	}                                                                                        \
	static void *im##_consumer(void *arg)                                                    \
	{                                                                                        \
		return consumer_loop(arg, im##_deq);                                             \
	}

DEFINE_LOOPS(pc)
#ifdef PC_BENCH_HAVE_WFCQ
DEFINE_LOOPS(wfcq)
#endif
#ifdef PC_BENCH_HAVE_DPDK
DEFINE_LOOPS(rte)
#endif
#ifdef PC_BENCH_HAVE_CK
DEFINE_LOOPS(ck)
#endif

struct impl_ops {
	void *(*producer)(void *);
	void *(*consumer)(void *);
	void *(*create)(struct bench *);
	unsigned int (*residue)(struct bench *); /* elements left after a run */
	void (*destroy)(struct bench *);
	const char *missing; /* why it is not built, or NULL */
};

#define OPS(im) {im##_producer, im##_consumer, im##_create, im##_residue, im##_destroy, NULL}

static const struct impl_ops impls[NIMPL] = {
    [PC] = OPS(pc),
#if defined(PC_BENCH_HAVE_DPDK)
    [RTE] = OPS(rte),
#elif defined(NOT_UNDER_TSAN)
    [RTE] = {.missing = NOT_UNDER_TSAN},
#else
    [RTE] = {.missing = "not built: meson option dpdk disabled or libdpdk-dev not found"},
#endif
#if defined(PC_BENCH_HAVE_CK)
    [CK] = OPS(ck),
#elif defined(NOT_UNDER_TSAN)
    [CK] = {.missing = NOT_UNDER_TSAN},
#else
    [CK] = {.missing = "not built: meson option ck disabled or libck-dev not found"},
#endif
#if defined(PC_BENCH_HAVE_WFCQ)
    [WFCQ] = OPS(wfcq),
#else
    [WFCQ] = {.missing = NOT_UNDER_TSAN},
#endif
};

/* --- driver ------------------------------------------------------------------------------ */

static int cpu_a = 0, cpu_b = 0;
static bool mpsc_one_cpu; /* both MPSC producers on CPU A */

/* The first two CPUs we may run on (the same one twice on a 1-CPU machine). */
static void pick_cpus(void)
{
	cpu_set_t set;
	int cpu, found = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
		if (CPU_ISSET(cpu, &set)) {
			if (found++ == 0)
				cpu_a = cpu_b = cpu;
			else
				cpu_b = cpu;
		}
}

static int start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	ret = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

struct result {
	double mops;   /* negative when elements went wrong */
	double cpu;    /* share of the CPUs the run's threads got, 0..1 */
	double window; /* Mops/s in the run's fastest WINDOW elements, 0 if too short */
	bool capped;   /* stopped at the time cap, before all its elements */
};

static unsigned long run_cap = 3; /* seconds */
static unsigned int runs_capped;

/* One run of @total elements. */
static struct result run_once(enum impl im, const struct mode *m, unsigned long total)
{
	const struct impl_ops *ops = &impls[im];
	struct bench b = {.m = m, .nprod = m->mpsc ? MAX_PRODUCERS : 1};
	struct producer prod[MAX_PRODUCERS];
	pthread_t threads[MAX_PRODUCERS + 1];
	int prod_cpu[MAX_PRODUCERS] = {cpu_a, m->mpsc && !mpsc_one_cpu ? cpu_b : cpu_a};
	unsigned int i, started = 0, spins = 0, left;
	struct result res = {-1, 0, 0, false};
	struct timespec deadline;
	double t0, wall;

	b.ops = total / b.nprod;
	b.marks = calloc(total / WINDOW + 1, sizeof(*b.marks));
	if (!b.marks) {
		fprintf(stderr, "FAIL: out of memory\n");
		exit(1);
	}
	for (i = 0; i < b.nprod; i++)
		b.consumer_shares |= prod_cpu[i] == cpu_b;
	atomic_init(&b.ready, 0);
	atomic_init(&b.go, false);
	atomic_init(&b.stop, false);
	atomic_init(&b.finished, 0);
	atomic_init(&b.sent, 0);
	atomic_init(&b.cpu_ns, 0);
	b.q = ops->create(&b);
	if (!b.q) {
		fprintf(stderr, "FAIL: %s: cannot create the queue\n", impl_name[im]);
		return res;
	}
	if (start_pinned(&threads[started++], cpu_b, ops->consumer, &b))
		goto no_thread;
	for (i = 0; i < b.nprod; i++) {
		prod[i] = (struct producer){.b = &b, .id = i, .shares = prod_cpu[i] == cpu_b};
		if (b.nprod > 1)
			prod[i].shares |= prod_cpu[0] == prod_cpu[1];
		if (start_pinned(&threads[started++], prod_cpu[i], ops->producer, &prod[i]))
			goto no_thread;
	}
	while (atomic_load(&b.ready) < started)
		backoff(&spins, true);
	t0 = now();
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)run_cap;
	/* release: the queue's initialisation is visible to the threads */
	atomic_store_explicit(&b.go, true, memory_order_release);
	/* threads[0] is the consumer: at the cap, producers stop and it drains what they sent */
	if (pthread_timedjoin_np(threads[0], NULL, &deadline) == ETIMEDOUT) {
		res.capped = true;
		atomic_store(&b.stop, true);
		pthread_join(threads[0], NULL);
	}
	for (i = 1; i < started; i++)
		pthread_join(threads[i], NULL);
	left = ops->residue(&b);
	wall = b.t_end - t0;
	if (b.error[0]) {
		fprintf(stderr, "FAIL: %s %s: %s\n", impl_name[im], m->name, b.error);
	} else if (left) {
		fprintf(stderr, "FAIL: %s %s: %u element(s) left in the queue after the run\n",
			impl_name[im], m->name, left);
	} else {
		res.mops = (double)b.got / wall / 1e6;
		res.cpu = (double)atomic_load(&b.cpu_ns) / 1e9 / wall / (cpu_a == cpu_b ? 1 : 2);
		for (i = 1; i < b.nmarks; i++)
			res.window = PC_MAX(res.window, WINDOW / (b.marks[i] - b.marks[i - 1]) / 1e6);
		printf("  %-13s %-8s %9.2f Mops/s  (%lu elements in %.3f s, cpu %3.0f%%, best "
		       "window %.2f; empty polls %lu, full polls %lu)%s\n",
		       m->name, impl_name[im], res.mops, b.got, wall, res.cpu * 100, res.window,
		       b.empty_polls, b.full_polls[0] + b.full_polls[1],
		       res.capped ? " stopped at the time cap" : "");
		runs_capped += res.capped;
	}
	ops->destroy(&b);
	free(b.marks);
	return res;

no_thread:
	fprintf(stderr, "FAIL: pthread_create failed\n");
	exit(1);
}

static unsigned long env_ulong(const char *name, unsigned long dflt, unsigned long max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return dflt;
	v = strtoul(s, &end, 0);
	if (*end || v > max || (v == 0 && dflt)) {
		fprintf(stderr, "%s=%s is invalid: expected %d..%lu\n", name, s, !!dflt, max);
		exit(2);
	}
	return v;
}

#define NMODES PC_ARRAY_SIZE(modes)

static struct result runs[NMODES][NIMPL][MAX_ROUNDS];
static unsigned int rounds_done;
static bool mode_on[NMODES];

/* BENCH_RING_REF_MODES: the modes to run, by JSON key; all when unset. */
static void select_modes(void)
{
	const char *list = getenv("BENCH_RING_REF_MODES");
	unsigned int mi;

	for (mi = 0; mi < NMODES; mi++) {
		const char *at = list ? strstr(list, modes[mi].key) : NULL;
		size_t len = strlen(modes[mi].key);

		while (at && ((at != list && at[-1] != ',') || (at[len] && at[len] != ',')))
			at = strstr(at + 1, modes[mi].key);
		mode_on[mi] = !list || !*list || at;
	}
}

static int cmp_result(const void *a, const void *b)
{
	double x = ((const struct result *)a)->mops, y = ((const struct result *)b)->mops;

	return (x > y) - (x < y);
}

/* Best and median of the rounds (runs[] sorted by speed). */
static struct result best(unsigned int mi, unsigned int im)
{
	return runs[mi][im][rounds_done - 1];
}

static struct result median(unsigned int mi, unsigned int im)
{
	return runs[mi][im][rounds_done / 2];
}

/* The fastest window of any round, as the figure. */
static struct result best_window(unsigned int mi, unsigned int im)
{
	struct result w = {.mops = 0};
	unsigned int r;

	for (r = 0; r < rounds_done; r++)
		w.mops = PC_MAX(w.mops, runs[mi][im][r].window);
	return w;
}

static void print_table(const char *title, struct result (*pick)(unsigned int, unsigned int),
			bool show_cpu)
{
	unsigned int mi, im;

	printf("\n%s\n%-14s", title, "mode");
	for (im = 0; im < NIMPL; im++)
		printf(show_cpu ? " %15s" : " %9s", impl_name[im]);
	printf("  |");
	for (im = 1; im < NIMPL; im++)
		printf(" pc/%-8.8s", impl_name[im]);
	printf("\n");
	for (mi = 0; mi < NMODES; mi++) {
		if (!mode_on[mi])
			continue;
		printf("%-14s", modes[mi].name);
		for (im = 0; im < NIMPL; im++)
			if (impls[im].missing)
				printf(show_cpu ? " %15s" : " %9s", "-");
			else if (show_cpu)
				printf(" %8.2f (%3.0f%%)", pick(mi, im).mops, pick(mi, im).cpu * 100);
			else
				printf(" %9.2f", pick(mi, im).mops);
		printf("  |");
		for (im = 1; im < NIMPL; im++)
			if (impls[im].missing || pick(mi, im).mops <= 0)
				printf(" %11s", "-");
			else
				printf(" %11.2f", pick(mi, PC).mops / pick(mi, im).mops);
		printf("\n");
	}
}

/*
 * Goal: pollcore's SPSC burst throughput >= rte_ring's, in every SPSC burst
 * mode that ran. 1 met, 0 not, -1 not measured.
 */
static int goal_met(struct result (*pick)(unsigned int, unsigned int))
{
	unsigned int mi;
	int met = -1;

	if (impls[RTE].missing)
		return -1;
	for (mi = 0; mi < NMODES; mi++)
		if (!modes[mi].mpsc && !modes[mi].single && mode_on[mi])
			met = (met != 0) && pick(mi, PC).mops >= pick(mi, RTE).mops;
	return met;
}

static const char *goal_word(int goal)
{
	return goal < 0 ? "null" : goal ? "true" : "false";
}

static const char *goal_text(int goal)
{
	return goal < 0 ? "not measured" : goal ? "met" : "NOT met";
}

static void print_json_figs(struct result (*pick)(unsigned int, unsigned int), unsigned int mi)
{
	unsigned int im;

	for (im = 0; im < NIMPL; im++)
		if (impls[im].missing)
			printf("%s\"%s\": null", im ? ", " : "", impl_name[im]);
		else
			printf("%s\"%s\": %.2f", im ? ", " : "", impl_name[im], pick(mi, im).mops);
	for (im = 1; im < NIMPL; im++)
		if (impls[im].missing || pick(mi, im).mops <= 0)
			printf(", \"ratio_%s\": null", impl_name[im]);
		else
			printf(", \"ratio_%s\": %.3f", impl_name[im],
			       pick(mi, PC).mops / pick(mi, im).mops);
}

static void print_json(void)
{
	unsigned int mi;

	printf("{\"bench\": \"ring_ref\", \"unit\": \"Mops/s\", \"rounds\": %u, \"figures\": "
	       "\"best\"",
	       rounds_done);
	for (mi = 0; mi < NMODES; mi++) {
		if (!mode_on[mi])
			continue;
		printf(", \"%s\": {", modes[mi].key);
		print_json_figs(best, mi);
		printf(", \"median\": {");
		print_json_figs(median, mi);
		printf("}, \"window\": {");
		print_json_figs(best_window, mi);
		printf("}}");
	}
	printf(", \"goal_spsc_burst_ge_rte_ring\": %s, \"goal_on_medians\": %s, "
	       "\"goal_on_windows\": %s}\n",
	       goal_word(goal_met(best)), goal_word(goal_met(median)),
	       goal_word(goal_met(best_window)));
}

int main(void)
{
	bool quick = getenv("PC_BENCH_SHORT") != NULL;
	unsigned long ops = env_ulong("BENCH_RING_REF_OPS", quick ? 200000UL : 2000000UL, SEQ_MASK / 4);
	unsigned int rounds = (unsigned int)env_ulong("BENCH_RING_REF_ROUNDS", quick ? 1 : 5, MAX_ROUNDS);
	double budget = (double)env_ulong("BENCH_RING_REF_BUDGET", 60, 86400);
	double start = now(), round_time = 0;
	unsigned int mi, im, k;
	struct result res;
	int failed = 0, goal;
	char title[80];

	setvbuf(stdout, NULL, _IOLBF, 0);
	pick_cpus();
	select_modes();
	mpsc_one_cpu = env_ulong("BENCH_RING_REF_MPSC_ONE_CPU", 0, 1);
	run_cap = env_ulong("BENCH_RING_REF_RUN_CAP", run_cap, 86400);
	printf("ring reference benchmark: %u slots per queue, up to %u rounds within %.0f s, "
	       "runs capped at %lu s, %ld online CPU(s)\n",
	       SLOTS, rounds, budget, run_cap, sysconf(_SC_NPROCESSORS_ONLN));
	printf("pinning: SPSC producer on CPU %d, consumer on CPU %d\n", cpu_a, cpu_b);
	if (mpsc_one_cpu)
		printf("pinning: MPSC producers 0 and 1 on CPU %d (time-sliced), consumer on CPU "
		       "%d; rte_ring and ck_ring may move one element per time slice\n",
		       cpu_a, cpu_b);
	else
		printf("pinning: MPSC producer 0 on CPU %d, producer 1 and consumer on CPU %d "
		       "(time-sliced: 3 threads oversubscribe 2 CPUs)\n",
		       cpu_a, cpu_b);
	if (cpu_a == cpu_b)
		printf("pinning: only one CPU available: every thread shares it\n");
	printf("elements per run: %lu single, %lu burst; ck_ring bursts are loops of single "
	       "calls\n",
	       ops, ops * 4);
	for (im = 0; im < NIMPL; im++)
		if (impls[im].missing)
			printf("missing: %s (%s)\n", impl_name[im], impls[im].missing);

	/* Whole rounds only, so that every figure has the same number of runs. */
	while (rounds_done < rounds && (rounds_done == 0 || now() - start + round_time <= budget)) {
		double t = now();

		printf("round %u\n", rounds_done + 1);
		for (mi = 0; mi < NMODES; mi++)
			for (k = 0; k < NIMPL; k++) {
				im = (k + rounds_done) % NIMPL; /* rotate who goes first */
				if (impls[im].missing || !mode_on[mi])
					continue;
				res = run_once(im, &modes[mi], modes[mi].single ? ops : ops * 4);
				runs[mi][im][rounds_done] = res;
				failed |= res.mops < 0;
			}
		rounds_done++;
		round_time = now() - t;
	}
	for (mi = 0; mi < NMODES; mi++)
		for (im = 0; im < NIMPL; im++)
			qsort(runs[mi][im], rounds_done, sizeof(struct result), cmp_result);

	printf("\n%u round(s) in %.0f s. Other load on the machine only slows a run down, so "
	       "the best run is the figure; cpu = share of the 2 CPUs that run got.\n",
	       rounds_done, now() - start);
	if (runs_capped)
		printf("%u run(s) stopped at the %lu s cap before moving all their elements: the "
		       "machine is overloaded, and their figures count what they moved.\n",
		       runs_capped, run_cap);
	print_table("Mops/s, best run (cpu share of that run)", best, true);
	print_table("Mops/s, median run", median, false);
	snprintf(title, sizeof(title), "Mops/s, fastest window of %lu elements in any run",
		 WINDOW);
	print_table(title, best_window, false);
	goal = goal_met(best);
	printf("\ngoal (pollcore SPSC burst >= rte_ring): %s on the best runs, %s on the medians, "
	       "%s on the fastest windows\n",
	       goal_text(goal), goal_text(goal_met(median)), goal_text(goal_met(best_window)));
	print_json();
	if (failed)
		fprintf(stderr, "FAIL: at least one run lost, duplicated or reordered elements\n");
	return failed;
}
