// SPDX-License-Identifier: MIT
/*
 * unit suite, part of test_nvmf_proto: the protocol core's threading
 * contract. I/O queues on worker threads (each queue its own thread's)
 * read, write, fail and reconnect while the admin queue's thread reads
 * SMART and error logs, takes asynchronous events and drives keep-alive;
 * then every counter must add up. Run under ThreadSanitizer to check the
 * locking (the sanitizer builds of this suite do).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf_test.h"

#define WORKERS 3
#define ROUNDS	3000

struct worker {
	pthread_t tid;
	struct nvmf_tgt *t;
	uint16_t cntlid, qid;
	uint64_t reads, writes, errors;
	uint8_t host[4096], staging[4096];
	uint8_t capsule[64 + 1024];
	struct nvmf_req req;
};

static atomic_int running;

/* an I/O queue Connect with the data in the capsule: no drive() (not thread-safe) */
static struct nvmf_queue *connect_io(struct worker *w)
{
	struct nvmf_queue *q = nvmf_queue_create(w->t, w->qid, T_DEPTH - 1);
	struct nvmf_connect_data d = t_connect_data(w->cntlid, T_SUBNQN, T_HOSTNQN);
	struct nvme_sqe s = t_connect_sqe(w->qid, T_DEPTH - 1, 0);

	ck_assert_ptr_nonnull(q);
	t_incapsule(&s, 0, sizeof(d));
	memcpy(w->capsule, &s, 64);
	memcpy(w->capsule + 64, &d, sizeof(d));
	ck_assert_int_eq(nvmf_queue_submit(q, w->capsule, sizeof(w->capsule), &w->req),
			 NVMF_ACT_FETCH);
	ck_assert(w->req.xfer.in_capsule);
	ck_assert_int_eq(nvmf_req_data(q, &w->req, w->capsule + w->req.xfer.icd_off, 1024),
			 NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(w->req.cqe.status, 0);
	return q;
}

static void io(struct worker *w, struct nvmf_queue *q, uint8_t opc, uint64_t slba)
{
	struct t_disk *d = &t_disks[0];
	struct nvme_sqe s = t_sqe(opc, (uint16_t)slba);
	enum nvmf_act a;

	s.nsid = 1;
	s.cdw10 = (uint32_t)slba;
	t_keyed(&s, w->host, 512);
	memcpy(w->capsule, &s, 64);
	a = nvmf_queue_submit(q, w->capsule, 64, &w->req);
	if (a == NVMF_ACT_COMPLETE) { /* LBA Out of Range */
		ck_assert_uint_eq(nvme_cqe_sf(&w->req.cqe), NVME_SC_LBA_RANGE | NVME_DNR);
		w->errors++;
		return;
	}
	if (opc == NVME_IO_WRITE) {
		ck_assert_int_eq(a, NVMF_ACT_WRITE);
		memcpy(w->staging, w->host, 512); /* "RDMA READ" */
		memcpy(d->mem + w->req.io.off, w->staging, 512);
		w->writes++;
	} else {
		ck_assert_int_eq(a, NVMF_ACT_READ);
		memcpy(w->staging, d->mem + w->req.io.off, 512);
		w->reads++;
	}
	ck_assert_int_eq(nvmf_req_complete(q, &w->req, 0), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(w->req.cqe.status, 0);
	if (opc == NVME_IO_READ)
		ck_assert_int_eq(memcmp(w->staging, w->host, 512), 0); /* our block, our bytes */
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct nvmf_queue *q = connect_io(w);

	for (int i = 0; i < ROUNDS; i++) {
		/* each worker owns blocks qid * 256 .. + 255 */
		uint64_t lba = w->qid * 256u + (uint64_t)(i % 256);

		memset(w->host, (uint8_t)(i + w->qid), 512);
		io(w, q, NVME_IO_WRITE, lba);
		io(w, q, NVME_IO_READ, lba);
		if (i % 100 == 99)
			io(w, q, NVME_IO_READ, T_NS1_BLOCKS + (uint64_t)i); /* an error */
		if (i % 1000 == 999) { /* reconnect: the cntlid table under contention */
			nvmf_queue_destroy(q);
			q = connect_io(w);
		}
	}
	nvmf_queue_destroy(q);
	atomic_fetch_sub(&running, 1);
	return NULL;
}

START_TEST(test_threads)
{
	struct nvmf_tgt *t = t_tgt(NULL);
	uint16_t id;
	struct t_queue *adm = t_admin_ready(t, &id);
	static struct worker w[WORKERS];
	static struct nvme_smart_log sm;
	static uint8_t errlog[1024];
	struct nvme_sqe s;
	uint64_t reads = 0, writes = 0, errors = 0, now = 0;
	uint16_t exp[4];
	int events = 0, aer_slot = 1;

	s = t_sqe(NVME_ADM_SET_FEATURES, 1);
	s.cdw10 = NVME_FEAT_ASYNC_EVENT;
	s.cdw11 = NVME_AEC_NS_ATTR;
	ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
	s = t_sqe(NVME_ADM_ASYNC_EVENT, 2);
	ck_assert_int_eq(t_exec(adm, aer_slot, &s, NULL, 0, NULL), NVMF_ACT_HOLD);

	atomic_store(&running, WORKERS);
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){.t = t, .cntlid = id, .qid = (uint16_t)(i + 1)};
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	/* the admin queue's thread, meanwhile */
	while (atomic_load(&running)) {
		struct nvmf_req *r;

		s = t_sqe(NVME_ADM_GET_LOG_PAGE, 3);
		s.cdw10 = NVME_LOG_SMART | 127u << 16;
		t_keyed(&s, &sm, sizeof(sm));
		ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
		s.cdw10 = NVME_LOG_ERROR | 255u << 16;
		t_keyed(&s, errlog, sizeof(errlog));
		ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
		s = t_sqe(NVME_ADM_KEEP_ALIVE, 4);
		ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
		ck_assert_int_eq(nvmf_tgt_keepalive(t, now += 100, exp, 4), 0);
		/* an event, its AER, the log that unmasks it, a new AER */
		ck_assert_int_eq(nvmf_tgt_ns_changed(t, 1), 0);
		while ((r = nvmf_queue_poll_event(adm->q))) {
			ck_assert_uint_eq(r->cqe.result, 0x040002);
			events++;
			s = t_sqe(NVME_ADM_GET_LOG_PAGE, 5);
			s.cdw10 = NVME_LOG_CHANGED_NS | 1023u << 16;
			t_keyed(&s, errlog, 0); /* a bad length first: an error too */
			ck_assert_uint_eq(t_status(adm, &s, NULL), NVME_SC_SGL_DATA_LEN | NVME_DNR);
			s.cdw10 = NVME_LOG_CHANGED_NS | 255u << 16;
			t_keyed(&s, errlog, 1024);
			ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
			aer_slot = 3 - aer_slot;
			s = t_sqe(NVME_ADM_ASYNC_EVENT, 2);
			ck_assert_int_eq(t_exec(adm, aer_slot, &s, NULL, 0, NULL), NVMF_ACT_HOLD);
		}
	}
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(w[i].tid, NULL);
		reads += w[i].reads;
		writes += w[i].writes;
		errors += w[i].errors;
	}
	ck_assert_int_gt(events, 0);
	s = t_sqe(NVME_ADM_GET_LOG_PAGE, 6);
	s.cdw10 = NVME_LOG_SMART | 127u << 16;
	t_keyed(&s, &sm, sizeof(sm));
	ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
	ck_assert_uint_eq(reads, (uint64_t)WORKERS * ROUNDS);
	ck_assert_uint_eq(nvme_u128_low(sm.host_reads), reads);
	ck_assert_uint_eq(nvme_u128_low(sm.host_writes), writes);
	/* the workers' errors and the admin thread's own */
	ck_assert_uint_eq(nvme_u128_low(sm.num_err_log_entries), errors + (uint64_t)events);
	t_queue_free(adm);
	t_tgt_free(t);
}
END_TEST

TCase *t_threads_tcase(void)
{
	TCase *tc = tcase_create("threads");

	tcase_add_test(tc, test_threads);
	tcase_set_timeout(tc, 300);
	return tc;
}
