// SPDX-License-Identifier: MIT
/*
 * Ring throughput: one producer/one consumer (SPSC) and two producers/one
 * consumer (MPSC), bursts of 1 and 32. Prints objects/s; never fails on
 * speed (only on lost or duplicated objects). BENCH_RING_OPS overrides the
 * number of objects per producer for burst 1; bigger bursts move 16 times
 * as many so each run lasts long enough to time. PC_BENCH_SHORT (set by
 * tools/run-tests) runs a tenth of the default.
 */
#include <pollcore/ring.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define RING_CAPACITY  1024
#define MPSC_PRODUCERS 2
#define BURST_MAX      32

struct bench {
	int mpsc;
	unsigned int burst;
	unsigned long ops; /* objects per producer */
	void *ring;
};

static unsigned int enqueue(const struct bench *b, void *const *objs, unsigned int n)
{
	return b->mpsc ? pc_ring_mpsc_enqueue_burst(b->ring, objs, n)
		       : pc_ring_spsc_enqueue_burst(b->ring, objs, n);
}

static unsigned int dequeue(const struct bench *b, void **objs, unsigned int n)
{
	return b->mpsc ? pc_ring_mpsc_dequeue_burst(b->ring, objs, n)
		       : pc_ring_spsc_dequeue_burst(b->ring, objs, n);
}

static void *producer(void *arg)
{
	const struct bench *b = arg;
	void *objs[BURST_MAX];
	unsigned long sent = 0;
	unsigned int i, n;

	while (sent < b->ops) {
		n = (unsigned int)PC_MIN((unsigned long)b->burst, b->ops - sent);
		for (i = 0; i < n; i++)
			objs[i] = (void *)(uintptr_t)(sent + i + 1);
		n = enqueue(b, objs, n);
		if (n == 0)
			sched_yield(); /* two cores may host more threads than that */
		sent += n;
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(int mpsc, unsigned int burst, unsigned long ops)
{
	struct bench b = {.mpsc = mpsc, .burst = burst, .ops = ops};
	unsigned int nprod = mpsc ? MPSC_PRODUCERS : 1, i, n;
	pthread_t threads[MPSC_PRODUCERS];
	unsigned long total = ops * nprod, got = 0, sum = 0, empty = 0;
	struct pc_ring_stats st;
	void *objs[BURST_MAX];
	double t0, dt;

	b.ring = mpsc ? (void *)pc_ring_mpsc_create(RING_CAPACITY)
		      : (void *)pc_ring_spsc_create(RING_CAPACITY);
	if (!b.ring) {
		perror("ring create");
		return 1;
	}
	t0 = now();
	for (i = 0; i < nprod; i++)
		if (pthread_create(&threads[i], NULL, producer, &b)) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	while (got < total) {
		n = dequeue(&b, objs, burst);
		if (n == 0) {
			empty++;
			if (empty % 64 == 0)
				sched_yield();
			continue;
		}
		for (i = 0; i < n; i++)
			sum += (uintptr_t)objs[i];
		got += n;
	}
	dt = now() - t0;
	for (i = 0; i < nprod; i++)
		pthread_join(threads[i], NULL);
	if (mpsc)
		pc_ring_mpsc_stats(b.ring, &st);
	else
		pc_ring_spsc_stats(b.ring, &st);
	printf("%s %u producer(s) burst %2u: %10.0f objects/s  (%lu objects in %.3f s, "
	       "%lu full events, %lu empty polls)\n",
	       mpsc ? "mpsc" : "spsc", nprod, burst, (double)total / dt, total, dt, st.full, empty);
	if (mpsc)
		pc_ring_mpsc_destroy(b.ring);
	else
		pc_ring_spsc_destroy(b.ring);
	if (sum != nprod * (ops * (ops + 1) / 2)) {
		fprintf(stderr, "FAIL: objects lost or duplicated (checksum mismatch)\n");
		return 1;
	}
	return 0;
}

int main(void)
{
	const char *env = getenv("BENCH_RING_OPS");
	unsigned long ops = env ? strtoul(env, NULL, 0) : getenv("PC_BENCH_SHORT") ? 400000UL : 4000000UL;
	static const unsigned int bursts[] = {1, 32};
	int mpsc, failed = 0;
	size_t i;

	printf("ring capacity %u, %ld online CPUs\n", RING_CAPACITY, sysconf(_SC_NPROCESSORS_ONLN));
	for (mpsc = 0; mpsc <= 1; mpsc++)
		for (i = 0; i < PC_ARRAY_SIZE(bursts); i++)
			failed |= run(mpsc, bursts[i], bursts[i] > 1 ? ops * 16 : ops);
	return failed;
}
