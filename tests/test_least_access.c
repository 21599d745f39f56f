// SPDX-License-Identifier: MIT
/*
 * rdma suite: least access. Every memory region pollcore registers is
 * listed with its access flags, by wrapping the registration calls at link
 * time (-Wl,--wrap=ibv_reg_mr,... on pollcore's static libraries, linked
 * into this executable), and cross-checked against the device's own list
 * (`rdma resource show mr`), so that a registration that bypassed the
 * wrappers is seen too.
 *
 * Asserted: receive and send pools are LOCAL_WRITE or nothing; credit words
 * (16 bytes) allow LOCAL_WRITE | REMOTE_WRITE and nothing more, one per
 * connection, gone with it; each worker's large-message pool allows
 * LOCAL_WRITE | MW_BIND and nothing more (a peer reads it only through a
 * type-2 window bound for one message on its own QP: test_rndv.c), and its
 * rendezvous slots are local; nothing else is remotely accessible, which a
 * peer then tries for real (RDMA WRITE and READ on the pools with their
 * keys); nothing is left registered after the engines are destroyed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_env.h"
#include "fault_peer.h"
#include "pc_test.h"

/* --- the wrappers ------------------------------------------------------------------ */

#define MR_MAX 1024

struct mr_rec {
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	void *addr;
	size_t len;
	unsigned int access;
	const char *via;
	bool live;
};

static pthread_mutex_t mr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mr_rec mrs[MR_MAX];
static unsigned int nmrs, mr_overflow;

static struct ibv_mr *record(struct ibv_mr *mr, struct ibv_pd *pd, void *addr, size_t len,
			     unsigned int access, const char *via)
{
	if (!mr)
		return NULL;
	pthread_mutex_lock(&mr_lock);
	if (nmrs < MR_MAX)
		mrs[nmrs++] = (struct mr_rec){ mr, pd, addr, len, access, via, true };
	else
		mr_overflow++;
	pthread_mutex_unlock(&mr_lock);
	return mr;
}

struct ibv_mr *__real_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return record(__real_ibv_reg_mr(pd, addr, length, access), pd, addr, length,
		      (unsigned int)access, "ibv_reg_mr");
}

struct ibv_mr *__real_ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
				      uint64_t iova, int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
				      uint64_t iova, int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
				      uint64_t iova, int access)
{
	return record(__real_ibv_reg_mr_iova(pd, addr, length, iova, access), pd, addr, length,
		      (unsigned int)access, "ibv_reg_mr_iova");
}

struct ibv_mr *__real_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				       uint64_t iova, unsigned int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				       uint64_t iova, unsigned int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				       uint64_t iova, unsigned int access)
{
	return record(__real_ibv_reg_mr_iova2(pd, addr, length, iova, access), pd, addr, length,
		      access, "ibv_reg_mr_iova2");
}

struct ibv_mr *__real_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access);
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access);
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access)
{
	return record(__real_ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access), pd,
		      (void *)(uintptr_t)iova, length, (unsigned int)access, "ibv_reg_dmabuf_mr");
}

int __real_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	unsigned int i;

	pthread_mutex_lock(&mr_lock);
	for (i = 0; i < nmrs; i++)
		if (mrs[i].live && mrs[i].mr == mr)
			mrs[i].live = false;
	pthread_mutex_unlock(&mr_lock);
	return __real_ibv_dereg_mr(mr);
}

/* --- inventory ------------------------------------------------------------------------ */

#define REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
		IBV_ACCESS_MW_BIND)
#define CREDIT_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define CREDIT_LEN 16

static const char *access_str(unsigned int a, char *buf, size_t len)
{
	static const struct {
		unsigned int bit;
		const char *name;
	} names[] = {
		{ IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE" }, { IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE" },
		{ IBV_ACCESS_REMOTE_READ, "REMOTE_READ" }, { IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC" },
		{ IBV_ACCESS_MW_BIND, "MW_BIND" }, { IBV_ACCESS_ZERO_BASED, "ZERO_BASED" },
		{ IBV_ACCESS_ON_DEMAND, "ON_DEMAND" }, { IBV_ACCESS_HUGETLB, "HUGETLB" },
		{ IBV_ACCESS_RELAXED_ORDERING, "RELAXED_ORDERING" },
	};
	size_t n = 0, i;

	buf[0] = 0;
	for (i = 0; i < PC_ARRAY_SIZE(names); i++)
		if (a & names[i].bit) {
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", names[i].name);
			a &= ~names[i].bit;
		}
	if (a)
		snprintf(buf + n, len - n, "%s0x%x", n ? "|" : "", a);
	else if (!n)
		snprintf(buf, len, "none");
	return buf;
}

struct census {
	unsigned int live, credit, pools, large, bad;
};

/* A worker's large-message pool (workers/rndv.c): windows may be bound on it, no more. */
#define LARGE_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

/*
 * Counts the live MRs registered from @from on; with @print, lists them and
 * checks each against the rules.
 */
static void take_census(const char *when, unsigned int from, bool print, struct census *c)
{
	unsigned int i;
	char acc[128];

	memset(c, 0, sizeof(*c));
	if (print)
		printf("MRs %s:\n", when);
	pthread_mutex_lock(&mr_lock);
	for (i = from; i < nmrs; i++) {
		struct mr_rec *r = &mrs[i];

		if (!r->live)
			continue;
		c->live++;
		access_str(r->access, acc, sizeof(acc));
		if (print)
			printf("  %-16s %8zu bytes at %p lkey 0x%x rkey 0x%x access %s\n", r->via, r->len,
		       r->addr, r->mr->lkey, r->mr->rkey, acc);
		if (r->access & REMOTE) {
			if (r->len == CREDIT_LEN && r->access == CREDIT_ACCESS) {
				c->credit++;
				continue;
			}
			if (r->access == LARGE_ACCESS) {
				c->large++;
				continue;
			}
			c->bad++;
			EXPECT(!print, "%s: an MR of %zu bytes at %p is remotely accessible (%s); only "
			       "16-byte credit words may be, with LOCAL_WRITE|REMOTE_WRITE", when,
			       r->len, r->addr, acc);
			continue;
		}
		c->pools++;
		EXPECT(!print || !(r->access & ~(unsigned int)IBV_ACCESS_LOCAL_WRITE),
		       "%s: a local MR of %zu bytes has access %s (LOCAL_WRITE or nothing expected)",
		       when, r->len, acc);
	}
	pthread_mutex_unlock(&mr_lock);
	if (print)
		printf("  %u live: %u credit words, %u large pools, %u local\n", c->live, c->credit,
		       c->large, c->pools);
}

/* Whether @tid is a thread of this process now. */
static bool our_thread(long tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%ld", tid);
	return access(path, F_OK) == 0;
}

/*
 * MRs the device lists for this process (rdma resource show mr), or -1.
 * The kernel names the registering thread (the worker for its pools, the
 * control thread for credit words), all alive while their engine is.
 */
static int device_mrs(const char *device)
{
	char cmd[128], line[512];
	const char *pid;
	int n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show mr 2>/dev/null");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		pid = strstr(line, " pid ");
		if (strstr(line, device) && pid && our_thread(strtol(pid + 5, NULL, 10)))
			n++;
	}
	return pclose(f) == 0 ? n : -1;
}

/* --- the test ---------------------------------------------------------------------------- */

START_TEST(test_least_access)
{
	const unsigned int nconns = 3, workers = 2;
	struct pc_engine_params sp = { .size = sizeof(sp), .workers_per_device = workers };
	unsigned int first, srv_first, srv_last, i, k;
	struct census c;
	struct fsrv *srv;
	struct fcli *cli;
	int dev;

	flog_start();
	first = nmrs;
	srv_first = nmrs;
	srv = fsrv_start(&sp, pc_test_addr());
	srv_last = nmrs;
	cli = fcli_start(NULL);
	for (i = 0; i < nconns; i++)
		ck_assert_msg(fcli_add(cli, pc_test_addr(), srv->port, 10000) == (int)i, "connect: %s",
			      pc_last_error());
	for (i = 0; i < nconns; i++)
		EXPECT(fcli_wait_recv(cli, i, 100, 30000), "conn %u: no traffic", i);

	/*
	 * The server's and the client's workers each own three local MRs (rx
	 * and tx pools, rendezvous slots) and a large pool; each side of a
	 * connection one credit word.
	 */
	take_census("with 3 connections", first, true, &c);
	EXPECT(c.pools == 3 * (workers + 1), "%u local MRs, expected %u (rx and tx pool, "
	       "rendezvous slots per worker)", c.pools, 3 * (workers + 1));
	EXPECT(c.large == workers + 1, "%u large pools (LOCAL_WRITE|MW_BIND), expected %u, one per "
	       "worker", c.large, workers + 1);
	EXPECT(c.credit == 2 * nconns, "%u credit words for %u connections (both sides in this "
	       "process), expected %u", c.credit, nconns, 2 * nconns);
	ck_assert_uint_eq(mr_overflow, 0);
	dev = device_mrs(pc_test_device());
	printf("the device lists %d MRs of this process\n", dev);
	EXPECT(dev == (int)c.live, "the device lists %d MRs of this process, the wrappers saw %u: "
	       "a registration bypassed them", dev, c.live);

	/*
	 * A peer tries the server's pools with their keys (the rkey, and the
	 * lkey, which many providers also accept remotely when the MR allows
	 * it): every RDMA WRITE and READ must fail.
	 */
	for (i = srv_first; i < srv_last; i++) {
		struct mr_rec r = mrs[i];

		if (!r.live)
			continue;
		for (k = 0; k < 4; k++) {
			struct fpeer_opts o = { .priv = FPEER_POLLCORE, .slot_size = 256 };
			uint32_t key = k < 2 ? r.mr->rkey : r.mr->lkey;
			struct fpeer p = { 0 };
			int st;

			ck_assert_int_eq(fpeer_connect(&p, pc_test_addr(), srv->port, &o), 0);
			st = fpeer_rdma(&p, k & 1, (uintptr_t)r.addr + 64, key, 0x4141414141414141ull,
					10000);
			printf("peer: RDMA %s on a server pool (%zu bytes) with its %s 0x%x: %s\n",
			       k & 1 ? "READ" : "WRITE", r.len, k < 2 ? "rkey" : "lkey", key,
			       st >= 0 ? ibv_wc_status_str(st) : "timeout");
			EXPECT(st == IBV_WC_REM_ACCESS_ERR, "RDMA %s on a server pool with its %s 0x%x "
			       "completed with %d, expected a remote access error",
			       k & 1 ? "READ" : "WRITE", k < 2 ? "rkey" : "lkey", key, st);
			fpeer_destroy(&p);
		}
	}

	/* a closed connection takes its two credit words with it (no send may race the close) */
	fcli_stop(cli);
	EXPECT(fcli_wait_recv(cli, 2, atomic_load(&cli->g[2].sent), 30000), "conn 2: echoes missing");
	ck_assert_int_eq(pc_close(cli->g[2].conn), 0);
	for (i = 0; i < 1000 && !atomic_load(&cli->g[2].down); i++)
		usleep(10000);
	EXPECT(atomic_load(&cli->g[2].down), "pc_close: no DOWN within 10 s");
	for (i = 0; i < 500; i++) {
		take_census("after closing one connection", first, false, &c);
		if (c.credit == 2 * (nconns - 1))
			break;
		usleep(20000);
	}
	take_census("after closing one connection", first, true, &c);
	EXPECT(c.credit == 2 * (nconns - 1), "%u credit words after closing one of %u connections, "
	       "expected %u", c.credit, nconns, 2 * (nconns - 1));

	fcli_finish(cli, true);
	pc_engine_destroy(cli->e);
	fsrv_stop(srv);
	take_census("after both engines are destroyed", first, true, &c);
	EXPECT(c.live == 0, "%u MRs left registered after pc_engine_destroy()", c.live);
	fexpect_done();
}
END_TEST

int main(void)
{
	pc_test_require_rdma();
	return frun_one("least_access", test_least_access, 600);
}
