// SPDX-License-Identifier: MIT
/*
 * interop suite: pollcore-nvmf (argv[1]) against a hostile NVMe-oF host
 * written here on librdmacm and libibverbs (fault_peer.c), which sends the
 * capsules the kernel's host never would:
 *  - commands before Connect: Command Sequence Error;
 *  - a Connect whose QID is not the one of the rdma_cm request: Connect
 *    Invalid Parameters, pointing at the QID (IPO 42);
 *  - bad admin and I/O opcodes: Invalid Opcode; an LBA range past the end:
 *    LBA Out of Range; a transfer beyond MDTS: Invalid Field; all with DNR;
 *  - a capsule longer than the in-capsule size advertised: its own
 *    connection closes, and the controller's other queue still answers;
 *  - another host's controller: a queue Connect naming it from another
 *    host NQN is refused, and the good host's queue and blocks (read back
 *    through a keyed SGL) are untouched by the hostile host's campaign;
 *  - a transfer that fails (a Read to a bad rkey, a Write from an address
 *    outside the host's memory) closes only its own queue: the controller's
 *    admin queue and another host's queue go on;
 *  - a host that goes silent after asking for a 1 s keep-alive timeout:
 *    its controller expires and its queue is closed (the target says so).
 * Every check names the exact status. Runs inside tools/rxe-vm.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_peer.h"
#include "nvmf_test.h"
#include "pc_test.h"

#define PORT	 4430
#define ICD	 4096
#define NS_BYTES (1u << 20) /* 2048 blocks of 512 */
#define QDEPTH	 32

static const char *nvmf_bin;
static char logpath[] = "/tmp/nvmf_hostile.XXXXXX";
static pid_t tgt_pid;

/* The host's side: the last CQE received. */
struct host {
	struct fpeer p;
	struct nvme_cqe last;
	const char *hostnqn;	/* its Connect's; T_HOSTNQN unless set after host_connect() */
};

static void on_cqe(struct fpeer *p, const uint8_t *d, uint32_t len)
{
	struct host *h = (struct host *)p;

	ck_assert_uint_eq(len, sizeof(struct nvme_cqe));
	memcpy(&h->last, d, sizeof(h->last));
}

/* Connects queue @qid (depth QDEPTH) with NVMe/RDMA private data. */
static void host_connect(struct host *h, uint16_t qid)
{
	struct nvmf_rdma_cm_req req = {.recfmt = 0, .qid = qid, .hrqsize = QDEPTH,
				       .hsqsize = QDEPTH - 1};
	struct fpeer_opts o = {.priv = FPEER_BLOB, .blob = &req, .blob_len = sizeof(req),
			       .slot_size = 64 + ICD + 64, .nrecv = QDEPTH};
	int ret;

	memset(h, 0, sizeof(*h));
	h->p.on_recv = on_cqe;
	h->hostnqn = T_HOSTNQN;
	o.remote_write = true; /* reads land in a receive slot, past its CQE (good_read()) */
	ret = fpeer_connect(&h->p, pc_test_addr(), PORT, &o);
	ck_assert_msg(ret == 0, "connect queue %u: %s (%d)", qid, h->p.why, ret);
}

/* Sends @len bytes of capsule and waits for its CQE. Return: 0, or -ENOTCONN / -ETIMEDOUT. */
static int host_cmd(struct host *h, const void *capsule, uint32_t len)
{
	uint32_t before = h->p.recvs;
	uint64_t end = pc_test_now_ms() + 20000;

	ck_assert_int_eq(fpeer_send(&h->p, capsule, len), 0);
	while (h->p.recvs == before && pc_test_now_ms() < end) {
		fpeer_poll(&h->p, 10);
		if (h->p.disconnected || h->p.sends_failed)
			return -ENOTCONN;
		if (fpeer_wait_event(&h->p, RDMA_CM_EVENT_DISCONNECTED, 0) == 0) {
			h->p.disconnected = true;
			return -ENOTCONN;
		}
	}
	return h->p.recvs > before ? 0 : -ETIMEDOUT;
}

/* The status (with DNR) of the SQE @s with @icd_len bytes of in-capsule @icd. */
static uint16_t status_of(struct host *h, const struct nvme_sqe *s, const void *icd,
			  uint32_t icd_len)
{
	uint8_t cap[64 + ICD];

	memcpy(cap, s, sizeof(*s));
	if (icd_len)
		memcpy(cap + 64, icd, icd_len);
	ck_assert_int_eq(host_cmd(h, cap, 64 + icd_len), 0);
	ck_assert_uint_eq(h->last.cid, s->cid);
	return nvme_cqe_sf(&h->last);
}

/* Fabrics Connect of queue @qid; returns the status, *cntlid from the CQE. */
static uint16_t connect_cmd(struct host *h, uint16_t qid, uint16_t cntlid, uint32_t kato,
			    uint16_t *out)
{
	struct nvmf_connect_data d = t_connect_data(cntlid, T_SUBNQN, h->hostnqn);
	struct nvme_sqe s = t_connect_sqe(qid, QDEPTH - 1, kato);
	uint16_t st;

	t_incapsule(&s, 0, sizeof(d));
	st = status_of(h, &s, &d, sizeof(d));
	if (out)
		*out = (uint16_t)h->last.result;
	return st;
}

/* An admin queue of a new, enabled controller, for @hostnqn (NULL: T_HOSTNQN). */
static uint16_t admin_ready_as(struct host *h, uint32_t kato, const char *hostnqn)
{
	struct nvme_sqe s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4,
				   NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20);
	uint16_t cntlid = 0;

	host_connect(h, 0);
	if (hostnqn)
		h->hostnqn = hostnqn;
	ck_assert_uint_eq(connect_cmd(h, 0, NVME_CNTLID_DYNAMIC, kato, &cntlid), NVME_SC_SUCCESS);
	ck_assert_uint_ne(cntlid, 0);
	ck_assert_uint_eq(status_of(h, &s, NULL, 0), NVME_SC_SUCCESS);
	return cntlid;
}

static uint16_t admin_ready(struct host *h, uint32_t kato)
{
	return admin_ready_as(h, kato, NULL);
}

static struct nvme_sqe rw_sqe(uint8_t opc, uint16_t cid, uint64_t slba, uint32_t nlb)
{
	struct nvme_sqe s = t_sqe(opc, cid);

	s.nsid = 1;
	s.cdw10 = (uint32_t)slba;
	s.cdw11 = (uint32_t)(slba >> 32);
	s.cdw12 = nlb - 1;
	return s;
}

START_TEST(test_before_connect)
{
	struct host h;
	struct nvme_sqe s = t_sqe(NVME_ADM_IDENTIFY, 7);

	host_connect(&h, 0);
	s.cdw10 = 1; /* controller */
	ck_assert_uint_eq(status_of(&h, &s, NULL, 0), NVME_SC_CMD_SEQ_ERROR | NVME_DNR);
	s = rw_sqe(NVME_IO_READ, 8, 0, 1);
	ck_assert_uint_eq(status_of(&h, &s, NULL, 0), NVME_SC_CMD_SEQ_ERROR | NVME_DNR);
	/* the queue survives: a Connect now works */
	ck_assert_uint_eq(connect_cmd(&h, 0, NVME_CNTLID_DYNAMIC, 0, NULL), NVME_SC_SUCCESS);
	fpeer_destroy(&h.p);
}
END_TEST

START_TEST(test_connect_wrong_qid)
{
	struct host h;

	host_connect(&h, 0);
	ck_assert_uint_eq(connect_cmd(&h, 1, NVME_CNTLID_DYNAMIC, 0, NULL),
			  NVME_SC_CONNECT_INVALID | NVME_DNR);
	ck_assert_uint_eq(h.last.result & 0xffffffffu, 42); /* IATTR 0 (SQE), IPO 42: QID */
	fpeer_destroy(&h.p);
}
END_TEST

START_TEST(test_bad_commands)
{
	struct host adm, io;
	struct nvme_sqe s;
	uint16_t cntlid = admin_ready(&adm, 0);
	static uint8_t data[ICD];

	s = t_sqe(0xc1, 3);
	ck_assert_uint_eq(status_of(&adm, &s, NULL, 0), NVME_SC_INVALID_OPCODE | NVME_DNR);
	host_connect(&io, 1);
	ck_assert_uint_eq(connect_cmd(&io, 1, cntlid, 0, NULL), NVME_SC_SUCCESS);
	s = rw_sqe(0x7e, 4, 0, 1);
	ck_assert_uint_eq(status_of(&io, &s, NULL, 0), NVME_SC_INVALID_OPCODE | NVME_DNR);
	s = rw_sqe(NVME_IO_READ, 5, NS_BYTES / 512, 1);
	ck_assert_uint_eq(status_of(&io, &s, NULL, 0), NVME_SC_LBA_RANGE | NVME_DNR);
	s = rw_sqe(NVME_IO_WRITE, 6, NS_BYTES / 512 - 1, 2);
	ck_assert_uint_eq(status_of(&io, &s, NULL, 0), NVME_SC_LBA_RANGE | NVME_DNR);
	s = rw_sqe(NVME_IO_READ, 7, 0, 512); /* 256 KiB > MDTS (128 KiB) */
	ck_assert_uint_eq(status_of(&io, &s, NULL, 0), NVME_SC_INVALID_FIELD | NVME_DNR);
	/* and good ones still work: a write in the capsule, a flush */
	memset(data, 0x5a, sizeof(data));
	s = rw_sqe(NVME_IO_WRITE, 8, 16, ICD / 512);
	t_incapsule(&s, 0, ICD);
	ck_assert_uint_eq(status_of(&io, &s, data, ICD), NVME_SC_SUCCESS);
	s = rw_sqe(NVME_IO_FLUSH, 9, 0, 1);
	s.cdw10 = s.cdw11 = s.cdw12 = 0;
	ck_assert_uint_eq(status_of(&io, &s, NULL, 0), NVME_SC_SUCCESS);
	fpeer_destroy(&io.p);
	fpeer_destroy(&adm.p);
}
END_TEST

START_TEST(test_capsule_too_long)
{
	struct host adm, io;
	uint16_t cntlid = admin_ready(&adm, 0);
	static uint8_t cap[64 + ICD + 16];
	struct nvme_sqe s = rw_sqe(NVME_IO_WRITE, 1, 0, (ICD + 512) / 512);

	host_connect(&io, 1);
	ck_assert_uint_eq(connect_cmd(&io, 1, cntlid, 0, NULL), NVME_SC_SUCCESS);
	/* 16 bytes more than the receive the target advertised (64 + in-capsule) */
	t_incapsule(&s, 0, ICD + 16);
	memcpy(cap, &s, sizeof(s));
	ck_assert_int_eq(host_cmd(&io, cap, sizeof(cap)), -ENOTCONN);
	/* only that queue: the admin queue of the same controller still answers */
	s = t_sqe(NVME_ADM_KEEP_ALIVE, 2);
	ck_assert_uint_eq(status_of(&adm, &s, NULL, 0), NVME_SC_SUCCESS);
	fpeer_destroy(&io.p);
	fpeer_destroy(&adm.p);
}
END_TEST

/*
 * A Read of @nlb blocks at @slba into receive slot 0 of @h, past the 64
 * bytes where CQEs land (slots are 64 + ICD + 64 bytes): a keyed SGL on
 * the slots' MR, which host_connect() opened to REMOTE_WRITE. Return: the
 * status; the bytes are at *@out.
 */
static uint16_t good_read(struct host *h, uint16_t cid, uint64_t slba, uint32_t nlb,
			  const uint8_t **out)
{
	struct nvme_sqe s = rw_sqe(NVME_IO_READ, cid, slba, nlb);
	uint8_t *dst = h->p.mem + 64;

	memset(dst, 0, (size_t)nlb * 512);
	nvme_sgl_set_keyed(&s.dptr, (uint64_t)(uintptr_t)dst, nlb * 512, h->p.mr->rkey,
			   NVME_SGL_SUB_ADDRESS);
	*out = dst;
	return status_of(h, &s, NULL, 0);
}

/*
 * The good host: an admin queue and an I/O queue of a controller of its
 * own (another host NQN than the hostile host's), which writes @data (ICD
 * bytes, a pattern of @mul) in the capsule at @slba. Return: its cntlid.
 */
static uint16_t good_host(struct host *adm, struct host *io, uint8_t *data, unsigned int mul,
			  uint64_t slba)
{
	static const char good_nqn[] = "nqn.2014-08.org.nvmexpress:uuid:host-good";
	uint16_t gid = admin_ready_as(adm, 0, good_nqn);
	struct nvme_sqe s;

	host_connect(io, 1);
	io->hostnqn = good_nqn;
	ck_assert_uint_eq(connect_cmd(io, 1, gid, 0, NULL), NVME_SC_SUCCESS);
	for (unsigned int i = 0; i < ICD; i++)
		data[i] = (uint8_t)(i * mul + 1);
	s = rw_sqe(NVME_IO_WRITE, 1, slba, ICD / 512);
	t_incapsule(&s, 0, ICD);
	ck_assert_uint_eq(status_of(io, &s, data, ICD), NVME_SC_SUCCESS);
	return gid;
}

/*
 * Another host's controller, queues and data are not the hostile host's to
 * touch: an I/O queue Connect naming the good host's controller from
 * another host NQN is refused (Connect Invalid Parameters at the cntlid),
 * and the hostile host's bad commands and over-long capsule leave the good
 * host's queue serving and its blocks as it wrote them.
 */
START_TEST(test_other_host_unaffected)
{
	struct host gadm, gio, hadm, hio, hsteal;
	static uint8_t data[ICD], cap[64 + ICD + 16];
	const uint8_t *got;
	uint16_t gid, hid;
	struct nvme_sqe s;

	gid = good_host(&gadm, &gio, data, 7, 64);
	ck_assert_uint_eq(good_read(&gio, 2, 64, ICD / 512, &got), NVME_SC_SUCCESS);
	ck_assert_int_eq(memcmp(got, data, ICD), 0);

	/* the hostile host: its own controller, then a queue on the good one's */
	hid = admin_ready(&hadm, 0);
	ck_assert_uint_ne(hid, gid);
	host_connect(&hsteal, 1);
	ck_assert_uint_eq(connect_cmd(&hsteal, 1, gid, 0, NULL), NVME_SC_CONNECT_INVALID | NVME_DNR);
	ck_assert_uint_eq(hsteal.last.result & 0xffffffffu,
			  NVMF_IPO_DATA(offsetof(struct nvmf_connect_data, cntlid)));
	fpeer_destroy(&hsteal.p);
	host_connect(&hio, 1);
	ck_assert_uint_eq(connect_cmd(&hio, 1, hid, 0, NULL), NVME_SC_SUCCESS);
	s = rw_sqe(NVME_IO_WRITE, 3, NS_BYTES / 512 - 1, 2);
	ck_assert_uint_eq(status_of(&hio, &s, NULL, 0), NVME_SC_LBA_RANGE | NVME_DNR);
	s = rw_sqe(NVME_IO_READ, 4, 64, 512); /* beyond MDTS */
	ck_assert_uint_eq(status_of(&hio, &s, NULL, 0), NVME_SC_INVALID_FIELD | NVME_DNR);
	s = rw_sqe(NVME_IO_WRITE, 5, 64, (ICD + 512) / 512);
	t_incapsule(&s, 0, ICD + 16);
	memcpy(cap, &s, sizeof(s));
	ck_assert_int_eq(host_cmd(&hio, cap, sizeof(cap)), -ENOTCONN);

	/* the good host's queue still serves, and its blocks are as it wrote them */
	ck_assert_uint_eq(good_read(&gio, 6, 64, ICD / 512, &got), NVME_SC_SUCCESS);
	ck_assert_int_eq(memcmp(got, data, ICD), 0);
	s = t_sqe(NVME_ADM_KEEP_ALIVE, 7);
	ck_assert_uint_eq(status_of(&gadm, &s, NULL, 0), NVME_SC_SUCCESS);
	fpeer_destroy(&hio.p);
	fpeer_destroy(&hadm.p);
	fpeer_destroy(&gio.p);
	fpeer_destroy(&gadm.p);
}
END_TEST

static bool log_has(const char *what);

/*
 * A transfer that fails costs only its queue: a Read whose keyed SGL names
 * a bad rkey (the target's RDMA WRITE meets a remote access error) and a
 * Write whose keyed SGL names an address outside the host's registered
 * memory (the RDMA READ fails) each close their own queue; the same
 * controller's admin queue still answers, and another host's queue still
 * serves its blocks as it wrote them.
 */
START_TEST(test_bad_transfer)
{
	struct host gadm, gio, hadm, hio;
	static uint8_t data[ICD];
	const uint8_t *got;
	uint16_t hid;
	struct nvme_sqe s;

	good_host(&gadm, &gio, data, 5, 128);
	hid = admin_ready(&hadm, 0);
	for (unsigned int bad = 0; bad < 2; bad++) {
		/*
		 * a queue ID of its own each time: the closed queue's ID is free
		 * again only once the target has taken its close, which the host
		 * seeing DISCONNECTED does not wait for
		 */
		uint16_t qid = (uint16_t)(1 + bad);

		host_connect(&hio, qid);
		ck_assert_uint_eq(connect_cmd(&hio, qid, hid, 0, NULL), NVME_SC_SUCCESS);
		if (bad == 0) { /* a Read into a bad rkey */
			s = rw_sqe(NVME_IO_READ, 2, 128, 1);
			nvme_sgl_set_keyed(&s.dptr, (uint64_t)(uintptr_t)(hio.p.mem + 64), 512,
					   hio.p.mr->rkey ^ 0x5a5a00u, NVME_SGL_SUB_ADDRESS);
		} else { /* a Write from past the end of the host's memory */
			s = rw_sqe(NVME_IO_WRITE, 3, 256, 8);
			nvme_sgl_set_keyed(&s.dptr,
					   (uint64_t)(uintptr_t)hio.p.mem + hio.p.mr->length + 65536,
					   4096, hio.p.mr->rkey, NVME_SGL_SUB_ADDRESS);
		}
		ck_assert_int_eq(host_cmd(&hio, &s, sizeof(s)), -ENOTCONN);
		fpeer_destroy(&hio.p);
		/* only that queue: the admin queue of the same controller still answers */
		s = t_sqe(NVME_ADM_KEEP_ALIVE, 4);
		ck_assert_uint_eq(status_of(&hadm, &s, NULL, 0), NVME_SC_SUCCESS);
		/* and the other host's queue still serves what it wrote */
		ck_assert_uint_eq(good_read(&gio, 5, 128, ICD / 512, &got), NVME_SC_SUCCESS);
		ck_assert_int_eq(memcmp(got, data, ICD), 0);
	}
	/* the target says which transfer failed, and why */
	ck_assert(log_has("RDMA_WRITE failed: remote access error"));
	ck_assert(log_has("RDMA_READ failed: remote access error"));
	fpeer_destroy(&hadm.p);
	fpeer_destroy(&gio.p);
	fpeer_destroy(&gadm.p);
}
END_TEST

/* Whether the target's log has @what yet. */
static bool log_has(const char *what)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(logpath, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

START_TEST(test_keepalive_expiry)
{
	struct host h;
	uint16_t cntlid = admin_ready(&h, 1000); /* KATO 1 s, then silence */
	uint64_t t0 = pc_test_now_ms();
	char want[64];
	int ret;

	ret = fpeer_wait_event(&h.p, RDMA_CM_EVENT_DISCONNECTED, 15000);
	ck_assert_msg(ret == 0, "controller %u: still connected 15 s after going silent", cntlid);
	printf("keepalive_expiry: controller %u closed %llu ms after its last command (KATO 1000)\n",
	       cntlid, (unsigned long long)(pc_test_now_ms() - t0));
	/* KATO + KAS at least; the clock ticks once a second */
	ck_assert_uint_ge(pc_test_now_ms() - t0, 1000);
	snprintf(want, sizeof(want), "controller %u: keep-alive timeout expired", cntlid);
	ck_assert_msg(log_has(want), "the target's log has no '%s'", want);
	fpeer_destroy(&h.p);
}
END_TEST

static void target_start(void)
{
	char ram[16], port[8];
	int fd = mkstemp(logpath);
	uint64_t end;

	if (fd < 0) { /* no ck_assert here: Check is not running a test yet */
		perror("mkstemp");
		exit(1);
	}
	snprintf(ram, sizeof(ram), "%u", NS_BYTES);
	snprintf(port, sizeof(port), "%u", PORT);
	tgt_pid = fork();
	if (tgt_pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execl(nvmf_bin, nvmf_bin, "--addr", pc_test_addr(), "--port", port, "--nqn",
		      T_SUBNQN, "--ram", ram, "--in-capsule", "4096", "--no-numa", (char *)NULL);
		_exit(127);
	}
	close(fd);
	end = pc_test_now_ms() + 120000;
	while (!log_has("pollcore-nvmf: listening") && pc_test_now_ms() < end)
		usleep(100000);
	if (!log_has("pollcore-nvmf: listening")) {
		fprintf(stderr, "pollcore-nvmf did not start\n");
		kill(tgt_pid, SIGKILL);
		exit(1);
	}
}

/* SIGTERM: exit 0. */
static int target_stop(void)
{
	int status = 0;
	char cmd[64];

	kill(tgt_pid, SIGTERM);
	waitpid(tgt_pid, &status, 0);
	snprintf(cmd, sizeof(cmd), "cat %s", logpath);
	if (system(cmd) < 0)
		perror("cat");
	unlink(logpath);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	Suite *s = suite_create("nvmf_hostile");
	TCase *tc = tcase_create("hostile");
	SRunner *sr;
	int failed, stopped;

	if (argc < 2) {
		fprintf(stderr, "usage: test_nvmf_hostile path/to/pollcore-nvmf\n");
		return 2;
	}
	nvmf_bin = argv[1];
	pc_test_require_rdma();
	target_start();
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_before_connect);
	tcase_add_test(tc, test_connect_wrong_qid);
	tcase_add_test(tc, test_bad_commands);
	tcase_add_test(tc, test_capsule_too_long);
	tcase_add_test(tc, test_other_host_unaffected);
	tcase_add_test(tc, test_bad_transfer);
	tcase_add_test(tc, test_keepalive_expiry);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	stopped = target_stop();
	if (stopped)
		fprintf(stderr, "pollcore-nvmf did not exit 0 after SIGTERM\n");
	return failed || stopped ? 1 : 0;
}
