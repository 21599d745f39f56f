/* SPDX-License-Identifier: MIT */
/*
 * Test-only host for tests/test_nvmf_*.c: drives tools/nvmf's protocol core
 * as the transport glue will - capsules in, actions out - with host memory
 * and RAM namespaces in this process. A keyed SGL's address is a pointer
 * into the test's memory, so an "RDMA READ" is a memcpy from it.
 */
#ifndef NVMF_TEST_H
#define NVMF_TEST_H

#include <check.h>

#include "nvmf_ctrl.h"

#define T_SUBNQN  "nqn.2026-12.io.pollcore:test"
#define T_HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:host-a"
#define T_ICD	  8192
#define T_MDTS	  (128u << 10)
#define T_DEPTH	  128
#define T_NR_IOQ  4
#define T_KEY	  0x5a5a1234u
#define T_SLOTS	  160

/* namespace 1: 2048 x 512 B; namespace 2: 256 x 4096 B */
#define T_NS1_BLOCKS 2048
#define T_NS2_BLOCKS 256

struct t_disk {
	uint8_t *mem;
	size_t size;
	int flushes, zeroes, discards;
};

struct t_queue {
	struct nvmf_queue *q;
	struct nvmf_req req[T_SLOTS];
	uint8_t capsule[64 + T_ICD + 64];
};

extern struct t_disk t_disks[2];
extern int t_notified;

/* a target with the defaults above; @cfg_edit may change the config first */
struct nvmf_tgt *t_tgt(void (*cfg_edit)(struct nvmf_tgt_config *cfg));
void t_tgt_free(struct nvmf_tgt *t);

/* an SQE with PSDT = SGL and a null keyed SGL, as Linux sends */
struct nvme_sqe t_sqe(uint8_t opcode, uint16_t cid);
void t_keyed(struct nvme_sqe *s, void *host_buf, uint32_t len);
void t_incapsule(struct nvme_sqe *s, uint32_t off, uint32_t len);
struct nvme_sqe t_connect_sqe(uint16_t qid, uint16_t sqsize, uint32_t kato);
struct nvmf_connect_data t_connect_data(uint16_t cntlid, const char *subnqn, const char *hostnqn);
struct nvme_sqe t_prop(uint8_t fctype, uint32_t off, uint8_t size, uint64_t value);

/*
 * One command through its whole cycle: submit @s (with @icd_len in-capsule
 * bytes of @icd), carry out every action as a transport would, and return
 * the last action (COMPLETE, HOLD or CLOSE); *cqe gets the completion.
 * @slot picks the req.
 */
enum nvmf_act t_exec(struct t_queue *tq, int slot, const struct nvme_sqe *s, const void *icd,
		     uint32_t icd_len, struct nvme_cqe *cqe);
/* the same with a raw capsule of @len bytes */
enum nvmf_act t_exec_raw(struct t_queue *tq, int slot, const void *capsule, size_t len,
			 struct nvme_cqe *cqe);

/* status of @s: COMPLETE asserted; the CQE's status without phase */
uint16_t t_status(struct t_queue *tq, const struct nvme_sqe *s, struct nvme_cqe *cqe);

/* an admin queue of a new controller (Connect only, or also enabled) */
struct t_queue *t_admin(struct nvmf_tgt *t, const char *subnqn, uint32_t kato, uint16_t *cntlid);
struct t_queue *t_admin_ready(struct nvmf_tgt *t, uint16_t *cntlid);
/* an I/O queue of controller @cntlid, Connected (status asserted success) */
struct t_queue *t_io(struct nvmf_tgt *t, uint16_t qid, uint16_t cntlid);
struct t_queue *t_queue_new(struct nvmf_tgt *t, uint16_t qid, uint16_t hsqsize);
void t_queue_free(struct t_queue *tq);

TCase *t_io_tcase(void);
TCase *t_threads_tcase(void);

#endif /* NVMF_TEST_H */
