/* SPDX-License-Identifier: MIT */
/*
 * Test-only helpers shared by tests/test_*.c (not installed).
 *
 * rdma-suite tests call pc_test_require_rdma() first: with no RDMA device
 * they skip (exit 77) on a host, but fail inside the soft-RoCE VM
 * (tools/rxe-vm sets PC_IN_VM=1), where a missing device is a bug.
 *
 * The test bed (device, port, GID index, rdma_cm address) comes from the
 * environment, PC_TEST_DEVICE, PC_TEST_PORT, PC_TEST_GID_INDEX and
 * PC_TEST_ADDR, defaulting to the soft-RoCE VM's rxe0. The shell tests read
 * the same variables through tests/testbed.sh, whose defaults match these.
 */
#ifndef PC_TEST_H
#define PC_TEST_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

/* Sanitizer builds run the rdma suite again, 5-20x slower: long loops shrink. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PC_TEST_SANITIZED 1
#else
#define PC_TEST_SANITIZED 0
#endif

/*
 * PC_TEST_SAN(plain, sanitized): a count or a time-driven phase, smaller in
 * the sanitized builds where the case's claim does not need the volume (a
 * race or a memory error shows in hundreds of messages as well as in tens of
 * thousands); the plain build keeps the big figure.
 */
#define PC_TEST_SAN(plain, sanitized) (PC_TEST_SANITIZED ? (sanitized) : (plain))

#ifdef __SANITIZE_ADDRESS__
#include <dlfcn.h>
/*
 * libpciaccess, loaded by hwloc's PCI plugin when the live topology is
 * discovered, never frees its PCI name cache; the plugin is unloaded before
 * LeakSanitizer runs, so its frames would be anonymous. Keep the library
 * mapped and suppress its leaks (and only its), in every test.
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libpciaccess.so\n";
}

__attribute__((constructor)) static void pc_test_keep_libpciaccess(void)
{
	dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NODELETE);
}
#endif

/* Monotonic milliseconds, for test deadlines. */
static inline uint64_t pc_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline const char *pc_test_env(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v && *v ? v : dflt;
}

/* The RDMA device the rdma suite runs on (rxe0 in the VM). */
static inline const char *pc_test_device(void)
{
	return pc_test_env("PC_TEST_DEVICE", "rxe0");
}

static inline uint8_t pc_test_port(void)
{
	return (uint8_t)atoi(pc_test_env("PC_TEST_PORT", "1"));
}

static inline int pc_test_gid_index(void)
{
	return atoi(pc_test_env("PC_TEST_GID_INDEX", "0"));
}

/* An rdma_cm address on pc_test_device() (rxe0's GID 0 in the VM). */
static inline const char *pc_test_addr(void)
{
	return pc_test_env("PC_TEST_ADDR", "fe80::ff:fe00:1%d0");
}

/*
 * A link-local address on the test address's link that nobody answers
 * (connect timeouts): fe80::ff:fe00:99 with the test address's scope.
 */
static inline const char *pc_test_dead_addr(void)
{
	static char buf[96];
	const char *scope = strchr(pc_test_addr(), '%');

	snprintf(buf, sizeof(buf), "fe80::ff:fe00:99%s", scope ? scope : "");
	return pc_test_env("PC_TEST_DEAD_ADDR", buf);
}

static inline int pc_test_in_vm(void)
{
	const char *v = getenv("PC_IN_VM");

	return v && strcmp(v, "1") == 0;
}

/* Returns the number of RDMA devices; never returns when there are none. */
static inline int pc_test_require_rdma(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (n > 0)
		return n;
	if (pc_test_in_vm()) {
		fprintf(stderr, "FAIL: running inside the soft-RoCE VM but no RDMA device is visible\n");
		exit(1);
	}
	fprintf(stderr, "SKIP: no RDMA device here; run this suite inside tools/rxe-vm\n");
	exit(77);
}

/*
 * Runs @s. Check records every assertion that passes (its file and line) with
 * a write() to a temporary file in $TEMP, else /tmp. Inside tools/rxe-vm /tmp
 * is the host's, over 9p: each write a round trip under TCG, about 2 ms, so
 * an assertion in a loop cost more than the work it checked (65,536 checks of
 * one buffer took 128 s under ASan). There the file goes to the VM's own
 * tmpfs, /dev/shm, unless TEMP says otherwise.
 */
/*
 * One case per test, named as the test, so that CK_RUN_CASE=<name> runs
 * one: PC_TEST_ADD(s, name, timeout_s) adds test_<name> with its timeout
 * and returns its case (for a fixture).
 */
static inline TCase *pc_test_case(Suite *s, const char *name, const TTest *test, double timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, timeout_s);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
	return tc;
}
#define PC_TEST_ADD(s, name, timeout_s) pc_test_case((s), #name, test_##name, (timeout_s))

static inline int pc_test_run(Suite *s)
{
	SRunner *sr;
	int failed;

	if (pc_test_in_vm() && !getenv("TEMP"))
		setenv("TEMP", "/dev/shm", 1);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#ifdef POLLCORE_ENGINE_H
#include <unistd.h>

/* The sleeps worker @idx of @e has published so far. */
static inline uint64_t pc_test_sleeps(const struct pc_engine *e, unsigned int idx)
{
	struct pc_worker_stats st;

	ck_assert_int_eq(pc_engine_stats(e, idx, &st), 0);
	return st.sleeps;
}

/*
 * Samples worker @idx of @e until it has slept at least @sleeps times and
 * @sleep_ns in all, or 30 s pass; returns the last sample. A sleep is
 * counted when it ends (100 ms at most) and published at the next turn, so
 * a fixed wait before one sample races on a slow host (TSan under TCG).
 * Published sleeps s means the worker is at or past sleep s + 1: waiting
 * for pc_test_sleeps() + 1 gives a sample published after this call.
 */
static inline struct pc_worker_stats pc_test_wait_sleep(const struct pc_engine *e,
							unsigned int idx, uint64_t sleeps,
							uint64_t sleep_ns)
{
	uint64_t end = pc_test_now_ms() + 30000;
	struct pc_worker_stats st;

	for (;;) {
		ck_assert_int_eq(pc_engine_stats(e, idx, &st), 0);
		if ((st.sleeps >= sleeps && st.sleep_ns >= sleep_ns) || pc_test_now_ms() > end)
			return st;
		usleep(10000);
	}
}
#endif

#endif /* PC_TEST_H */
