// SPDX-License-Identifier: MIT
/*
 * unit suite, part of test_nvmf_proto: I/O command decoding and validation
 * (Read, Write, Flush, Write Zeroes, Dataset Management), data through the
 * whole cycle, backend errors, SMART counters, and a fuzz loop of random
 * capsules that must always end in a status or a close.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf_test.h"

#define DNR(st) ((uint16_t)((st) | NVME_DNR))

static struct nvmf_tgt *t;
static struct t_queue *adm, *io;
static uint8_t host[T_MDTS + 8192] __attribute__((aligned(64)));

static void setup(void)
{
	uint16_t id;

	t = t_tgt(NULL);
	adm = t_admin_ready(t, &id);
	io = t_io(t, 1, id);
}

static void teardown(void)
{
	t_queue_free(io);
	t_queue_free(adm);
	t_tgt_free(t);
}

static struct nvme_sqe rw(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb, uint32_t len)
{
	struct nvme_sqe s = t_sqe(opc, 0x100);

	s.nsid = nsid;
	s.cdw10 = (uint32_t)slba;
	s.cdw11 = (uint32_t)(slba >> 32);
	s.cdw12 = nlb - 1;
	t_keyed(&s, host, len);
	return s;
}

static uint16_t st(const struct nvme_sqe *s)
{
	return t_status(io, s, NULL);
}

START_TEST(test_read_write)
{
	struct nvme_sqe s;
	struct nvme_cqe c;

	/* write 8 blocks of namespace 1 from host memory, read them back */
	for (size_t i = 0; i < 4096; i++)
		host[i] = (uint8_t)(i * 7 + 1);
	s = rw(NVME_IO_WRITE, 1, 100, 8, 4096);
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(memcmp(t_disks[0].mem + 100 * 512, host, 4096), 0);
	memset(host, 0, 4096);
	s = rw(NVME_IO_READ, 1, 100, 8, 4096);
	ck_assert_int_eq(t_exec(io, 3, &s, NULL, 0, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.status, 0);
	ck_assert_uint_eq(c.cid, 0x100);
	ck_assert_uint_eq(c.sq_id, 1);
	ck_assert_uint_eq(host[4095], (uint8_t)(4095 * 7 + 1));
	ck_assert(io->req[3].xfer.invalidate); /* the host asked for SEND with Invalidate */

	/* in-capsule write to namespace 2 (4 KiB blocks), last block */
	memset(host, 0x5c, 4096);
	s = rw(NVME_IO_WRITE, 2, T_NS2_BLOCKS - 1, 1, 0);
	s.cdw12 |= NVME_RW_FUA;
	t_incapsule(&s, 0, 4096);
	ck_assert_int_eq(t_exec(io, 0, &s, host, 4096, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.status, 0);
	ck_assert_uint_eq(io->req[0].io.flags, NVMF_IO_FUA);
	ck_assert_uint_eq(io->req[0].io.off, (T_NS2_BLOCKS - 1) * 4096ull);
	ck_assert_uint_eq(t_disks[1].mem[T_NS2_BLOCKS * 4096u - 1], 0x5c);
	/* at an offset inside the in-capsule area */
	t_incapsule(&s, 16, 4096);
	ck_assert_int_eq(t_exec(io, 0, &s, host, 4096 + 16, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(c.status, 0);
	ck_assert_uint_eq(io->req[0].xfer.icd_off, 64 + 16);

	/* the largest transfer, MDTS */
	s = rw(NVME_IO_READ, 1, 0, T_MDTS / 512, T_MDTS);
	ck_assert_uint_eq(st(&s), 0);
}
END_TEST

START_TEST(test_rw_invalid)
{
	struct nvme_sqe s;
	uint8_t cap[64 + T_ICD + 16];

	/* LBA range */
	s = rw(NVME_IO_READ, 1, T_NS1_BLOCKS, 1, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_LBA_RANGE));
	s = rw(NVME_IO_READ, 1, T_NS1_BLOCKS - 1, 2, 1024);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_LBA_RANGE));
	s = rw(NVME_IO_WRITE, 2, UINT64_MAX, 2, 8192); /* would wrap */
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_LBA_RANGE));
	/* the SGL's length must be the transfer's */
	s = rw(NVME_IO_READ, 1, 0, 8, 4095);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	s = rw(NVME_IO_WRITE, 2, 0, 1, 8192);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	/* beyond MDTS, even with a matching SGL */
	s = rw(NVME_IO_READ, 1, 0, T_MDTS / 512 + 1, T_MDTS + 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_FIELD));
	s = rw(NVME_IO_WRITE, 2, 0, 64, 64 * 4096);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_FIELD));
	/* namespaces */
	s = rw(NVME_IO_READ, 0, 0, 1, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_NS));
	s = rw(NVME_IO_READ, 3, 0, 1, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_NS));
	s = rw(NVME_IO_WRITE, NVME_NSID_ALL, 0, 1, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_NS));
	/* directives are not enabled */
	s = rw(NVME_IO_WRITE, 1, 0, 1, 512);
	s.cdw12 |= 1u << 20;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_FIELD));

	/* in-capsule: beyond the advertised size, on a read, truncated */
	s = rw(NVME_IO_WRITE, 1, 0, 17, 0);
	t_incapsule(&s, 0, 17 * 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	t_incapsule(&s, T_ICD + 16, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_OFFSET));
	s = rw(NVME_IO_WRITE, 1, 0, 1, 0);
	t_incapsule(&s, T_ICD - 256, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	s = rw(NVME_IO_READ, 1, 0, 1, 0);
	t_incapsule(&s, 0, 512);
	memcpy(cap, &s, 64);
	ck_assert_int_eq(t_exec_raw(io, 0, cap, 64 + 512, NULL), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(nvme_cqe_sf(&io->req[0].cqe), DNR(NVME_SC_INVALID_FIELD));
	s = rw(NVME_IO_WRITE, 1, 0, 1, 0);
	t_incapsule(&s, 0, 512);
	memcpy(cap, &s, 64);
	ck_assert_int_eq(t_exec_raw(io, 0, cap, 64 + 511, NULL), NVMF_ACT_CLOSE);
}
END_TEST

START_TEST(test_sgl_types)
{
	static const uint8_t bad[] = {
		NVME_SGL_DATA << 4 | NVME_SGL_SUB_ADDRESS, /* host address, not keyed */
		NVME_SGL_BIT_BUCKET << 4,
		NVME_SGL_SEGMENT << 4,
		NVME_SGL_LAST_SEGMENT << 4 | NVME_SGL_SUB_OFFSET,
		NVME_SGL_KEYED << 4 | NVME_SGL_SUB_OFFSET,
		NVME_SGL_KEYED << 4 | 0x0a,
		NVME_SGL_TRANSPORT << 4,
		0xf0,
	};
	struct nvme_sqe s;

	for (size_t i = 0; i < sizeof(bad); i++) {
		s = rw(NVME_IO_READ, 1, 0, 1, 512);
		s.dptr.type = bad[i];
		ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_TYPE));
	}
	/* the plain keyed subtype: no invalidate */
	s = rw(NVME_IO_READ, 1, 0, 1, 512);
	nvme_sgl_set_keyed(&s.dptr, (uintptr_t)host, 512, T_KEY, NVME_SGL_SUB_ADDRESS);
	ck_assert_uint_eq(st(&s), 0);
	ck_assert(!io->req[0].xfer.invalidate);
}
END_TEST

START_TEST(test_opcodes)
{
	struct nvme_sqe s;
	uint8_t cap[64 + T_ICD + 1] = {0};

	for (unsigned op = 0; op < 256; op++) {
		if (op == NVME_IO_READ || op == NVME_IO_WRITE || op == NVME_IO_FLUSH ||
		    op == NVME_IO_WRITE_ZEROES || op == NVME_IO_DSM || op == NVME_OPC_FABRICS)
			continue;
		s = t_sqe((uint8_t)op, (uint16_t)op);
		s.nsid = 1;
		ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_OPCODE));
	}
	/* a Connect on a connected queue */
	s = t_connect_sqe(1, T_DEPTH - 1, 0);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_CMD_SEQ_ERROR));
	/* fused, PRPs */
	s = rw(NVME_IO_READ, 1, 0, 1, 512);
	s.flags |= 2;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_FIELD));
	s.flags = 0x80;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_FIELD));
	/* malformed capsules: short, longer than any receive buffer */
	memcpy(cap, &s, 64);
	ck_assert_int_eq(nvmf_queue_submit(io->q, cap, 63, &io->req[0]), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_queue_submit(io->q, cap, 0, &io->req[0]), NVMF_ACT_CLOSE);
	ck_assert_int_eq(nvmf_queue_submit(io->q, cap, sizeof(cap), &io->req[0]), NVMF_ACT_CLOSE);
}
END_TEST

START_TEST(test_flush_zeroes_dsm)
{
	struct nvme_dsm_range rg[3] = {{.nlb = 4, .slba = 10}, {.nlb = 0, .slba = 99999},
				       {.nlb = 2, .slba = T_NS1_BLOCKS - 2}};
	struct nvme_sqe s;

	s = t_sqe(NVME_IO_FLUSH, 1);
	s.nsid = 2;
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(t_disks[1].flushes, 1);
	ck_assert_int_eq(t_disks[0].flushes, 0);
	s.nsid = NVME_NSID_ALL;
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(t_disks[0].flushes, 1);
	ck_assert_int_eq(t_disks[1].flushes, 2);
	s.nsid = 3;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_INVALID_NS));
	s.nsid = 1;
	t_keyed(&s, host, 512);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));

	memset(t_disks[0].mem, 0xff, t_disks[0].size);
	s = rw(NVME_IO_WRITE_ZEROES, 1, 8, 4, 0);
	s.opcode = NVME_IO_WRITE_ZEROES;
	s.cdw12 |= NVME_RW_DEAC;
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_uint_eq(io->req[0].io.flags, NVMF_IO_DEALLOCATE);
	ck_assert_uint_eq(t_disks[0].mem[8 * 512], 0);
	ck_assert_uint_eq(t_disks[0].mem[12 * 512 - 1], 0);
	ck_assert_uint_eq(t_disks[0].mem[12 * 512], 0xff);
	s = rw(NVME_IO_WRITE_ZEROES, 1, T_NS1_BLOCKS - 1, 2, 0);
	s.opcode = NVME_IO_WRITE_ZEROES;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_LBA_RANGE));
	s = rw(NVME_IO_WRITE_ZEROES, 1, 0, 1, 512);
	s.opcode = NVME_IO_WRITE_ZEROES;
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));

	/* deallocate three ranges (one empty), through the host's memory */
	s = t_sqe(NVME_IO_DSM, 2);
	s.nsid = 1;
	s.cdw10 = 2;
	s.cdw11 = NVME_DSM_AD;
	memcpy(host, rg, sizeof(rg));
	t_keyed(&s, host, sizeof(rg));
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(t_disks[0].discards, 1);
	ck_assert_uint_eq(t_disks[0].mem[10 * 512], 0);
	ck_assert_uint_eq(t_disks[0].mem[14 * 512], 0xff);
	ck_assert_uint_eq(t_disks[0].mem[T_NS1_BLOCKS * 512 - 1], 0);
	/* in the capsule */
	t_incapsule(&s, 0, sizeof(rg));
	ck_assert_int_eq(t_exec(io, 0, &s, rg, sizeof(rg), NULL), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(io->req[0].cqe.status, 0);
	ck_assert_int_eq(t_disks[0].discards, 2);
	/* a range past the end: LBA Out of Range, nothing deallocated */
	rg[2].slba = T_NS1_BLOCKS - 1;
	memcpy(host, rg, sizeof(rg));
	t_keyed(&s, host, sizeof(rg));
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_LBA_RANGE));
	ck_assert_int_eq(t_disks[0].discards, 2);
	/* the SGL must hold NR + 1 ranges */
	t_keyed(&s, host, 32);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	/* more, up to 256 ranges, as Linux sends (4096 bytes): only the NR + 1 are fetched */
	rg[2].slba = 20;
	memcpy(host, rg, sizeof(rg));
	memset(host + sizeof(rg), 0xee, 4096 - sizeof(rg));
	t_keyed(&s, host, 4096);
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(t_disks[0].discards, 3);
	t_keyed(&s, host, 4096 + 16);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_SGL_DATA_LEN));
	/* hints only: success, nothing to do */
	s.cdw11 = NVME_DSM_IDR;
	t_keyed(&s, host, sizeof(rg));
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_int_eq(t_disks[0].discards, 3);
}
END_TEST

/* a write-protected namespace: what changes blocks is refused, the rest runs */
START_TEST(test_write_protect)
{
	struct nvme_sqe s, f = t_sqe(NVME_ADM_SET_FEATURES, 0x90);
	struct nvme_cqe c;
	uint8_t ranges[16] = {0};

	f.nsid = 1;
	f.cdw10 = NVME_FEAT_WRITE_PROTECT;
	f.cdw11 = NVME_WP_ON;
	ck_assert_uint_eq(t_status(adm, &f, NULL), 0);
	memset(host, 0x11, 4096);
	memset(t_disks[0].mem, 0x22, 4096);
	s = rw(NVME_IO_WRITE, 1, 0, 8, 4096);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_NS_WRITE_PROTECTED));
	s = rw(NVME_IO_WRITE, 1, 0, 1, 0);
	t_incapsule(&s, 0, 512);
	ck_assert_int_eq(t_exec(io, 0, &s, host, 512, &c), NVMF_ACT_COMPLETE);
	ck_assert_uint_eq(nvme_cqe_sf(&c), DNR(NVME_SC_NS_WRITE_PROTECTED));
	ck_assert_uint_eq(t_disks[0].mem[0], 0x22);
	s = rw(NVME_IO_WRITE_ZEROES, 1, 0, 8, 0);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_NS_WRITE_PROTECTED));
	ck_assert_int_eq(t_disks[0].zeroes, 0);
	s = t_sqe(NVME_IO_DSM, 0x101);
	s.nsid = 1;
	s.cdw11 = NVME_DSM_AD;
	t_keyed(&s, ranges, 16);
	ck_assert_uint_eq(st(&s), DNR(NVME_SC_NS_WRITE_PROTECTED));
	s.cdw11 = NVME_DSM_IDR; /* a hint changes nothing */
	ck_assert_uint_eq(st(&s), 0);
	s = rw(NVME_IO_READ, 1, 0, 8, 4096);
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_uint_eq(host[0], 0x22);
	s = t_sqe(NVME_IO_FLUSH, 0x102);
	s.nsid = 1;
	ck_assert_uint_eq(st(&s), 0);
	/* the other namespace writes; so does this one once unprotected */
	s = rw(NVME_IO_WRITE, 2, 0, 1, 4096);
	ck_assert_uint_eq(st(&s), 0);
	f.cdw11 = NVME_WP_NONE;
	ck_assert_uint_eq(t_status(adm, &f, NULL), 0);
	memset(host, 0x11, 4096);
	s = rw(NVME_IO_WRITE, 1, 0, 8, 4096);
	ck_assert_uint_eq(st(&s), 0);
	ck_assert_uint_eq(t_disks[0].mem[0], 0x11);
}
END_TEST

START_TEST(test_backend_errors_smart)
{
	static const struct {
		uint8_t opc;
		int err;
		uint16_t st;
	} cases[] = {
		{NVME_IO_READ, -EIO, NVME_SC_READ_ERROR},
		{NVME_IO_WRITE, -EIO, NVME_SC_WRITE_FAULT},
		{NVME_IO_WRITE, -ECOMM, NVME_SC_DATA_XFER_ERROR},
		{NVME_IO_WRITE, -ENOSPC, NVME_SC_CAP_EXCEEDED},
		{NVME_IO_READ, -ENOMEM, NVME_SC_INTERNAL},
	};
	static struct nvme_smart_log sm;
	struct nvme_sqe s;
	uint8_t cap[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = rw(cases[i].opc, 1, 0, 1, 512);
		memcpy(cap, &s, 64);
		ck_assert_int_ne(nvmf_queue_submit(io->q, cap, 64, &io->req[0]), NVMF_ACT_COMPLETE);
		ck_assert_int_eq(nvmf_req_complete(io->q, &io->req[0], cases[i].err),
				 NVMF_ACT_COMPLETE);
		/* media errors may be retried: no DNR */
		ck_assert_uint_eq(nvme_cqe_sf(&io->req[0].cqe), cases[i].st);
	}
	/* 3 reads of 4 KiB, 2 writes of 512 B */
	for (int i = 0; i < 3; i++) {
		s = rw(NVME_IO_READ, 1, 0, 8, 4096);
		ck_assert_uint_eq(st(&s), 0);
	}
	for (int i = 0; i < 2; i++) {
		s = rw(NVME_IO_WRITE, 1, 0, 1, 512);
		ck_assert_uint_eq(st(&s), 0);
	}
	s = t_sqe(NVME_ADM_GET_LOG_PAGE, 1);
	s.cdw10 = NVME_LOG_SMART | 127u << 16;
	t_keyed(&s, &sm, sizeof(sm));
	ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
	ck_assert_uint_eq(nvme_u128_low(sm.host_reads), 3);
	ck_assert_uint_eq(nvme_u128_low(sm.host_writes), 2);
	ck_assert_uint_eq(nvme_u128_low(sm.data_units_read), 1);	  /* 24 units, rounded up */
	ck_assert_uint_eq(nvme_u128_low(sm.data_units_written), 1);
	ck_assert_uint_eq(nvme_u128_low(sm.media_errors), 2);
	ck_assert_uint_eq(nvme_u128_low(sm.num_err_log_entries), 5);
}
END_TEST

/* ---- fuzz ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* a capsule that is random, but often near a valid command */
static size_t fuzz_capsule(uint8_t *cap)
{
	static const uint8_t opcodes[] = {0x00, 0x01, 0x02, 0x06, 0x08, 0x09, 0x0a, 0x0c,
					  0x18, 0x7f, 0x7f, 0x7f, 0x04, 0x80, 0xff};
	struct nvme_sqe *s = (void *)cap;
	size_t len;

	for (size_t i = 0; i < 64 + T_ICD; i += 8) {
		uint64_t r = rnd();

		memcpy(cap + i, &r, 8);
	}
	if (rnd() % 4)
		s->opcode = opcodes[rnd() % sizeof(opcodes)];
	if (rnd() % 8)
		s->flags = NVME_FLAGS_PSDT_SGL;
	if (rnd() % 4)
		s->nsid = (uint32_t)(rnd() % 4 ? 1 + rnd() % 2 : rnd() % 4);
	if (s->opcode == NVME_OPC_FABRICS && rnd() % 4)
		cap[4] = (uint8_t[]){0, 1, 4, 8}[rnd() % 4];
	if (rnd() % 2) {
		s->cdw10 &= (rnd() % 2) ? 0xff : 0xffff00ff;
		s->cdw11 &= 0xffff;
		s->cdw12 &= (rnd() % 2) ? 0x0f : 0xffff;
		s->cdw13 = 0;
	}
	if (rnd() % 2) { /* plausible: small LBAs, small counts */
		s->cdw10 %= 4096;
		s->cdw11 = (rnd() % 4) ? 0 : s->cdw11;
		s->cdw12 %= (rnd() % 2) ? 8 : 512;
	}
	/* keyed SGLs point into host memory: the transport dereferences them */
	if (rnd() % 2) {
		static const uint32_t lens[] = {0, 16, 512, 1024, 4096};
		uint32_t l = (uint32_t)(rnd() % (T_MDTS + 4096));
		uint32_t nlb = (s->cdw12 & 0xffff) + 1;

		switch (rnd() % 4) {
		case 0: l = nlb * 512; break;
		case 1: l = nlb * 4096; break;
		case 2: l = lens[rnd() % 5]; break;
		}
		nvme_sgl_set_keyed(&s->dptr, (uintptr_t)host, l, T_KEY, (rnd() % 2) ? 0 : 0xf);
	} else if (rnd() % 2) {
		nvme_sgl_set_offset(&s->dptr, rnd() % 64, (uint32_t)(rnd() % 2 ? rnd() % 1100 : 512));
	} else if ((s->dptr.type >> 4) == NVME_SGL_KEYED) {
		s->dptr.addr = (uintptr_t)host;
	}
	len = 64 + (size_t)(rnd() % 2 ? rnd() % 1200 : 0);
	if (rnd() % 64 == 0)
		len = rnd() % (64 + T_ICD + 32);
	return len;
}

/* CC.EN 0 then 1: undoes whatever random CC writes left */
static void reenable(void)
{
	struct nvme_sqe s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4, 0);

	ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
	s = t_prop(NVMF_FCT_PROP_SET, NVME_REG_CC, NVMF_PROP_SIZE_4,
		   NVME_CC_EN | NVME_CC_IOSQES_NVM << 16 | NVME_CC_IOCQES_NVM << 20);
	ck_assert_uint_eq(t_status(adm, &s, NULL), 0);
}

START_TEST(test_fuzz)
{
	static uint8_t cap[64 + T_ICD + 64];
	struct t_queue *fresh = t_queue_new(t, 0, NVME_AQ_DEPTH - 1);
	uint16_t id = nvmf_queue_cntlid(adm->q);
	const char *env = getenv("PC_NVMF_FUZZ_ITERS");
	int iters = env ? atoi(env) : 100000, closes = 0, completes = 0;

	for (int i = 0; i < iters; i++) {
		int k = (int)(rnd() % 3);
		struct t_queue *q = k == 0 ? fresh : k == 1 ? adm : io;
		size_t len = fuzz_capsule(cap);
		struct nvme_cqe c;
		enum nvmf_act a;

		if (!(i % 64))
			reenable();
		memset(&c, 0, sizeof(c));
		a = t_exec_raw(q, (int)(rnd() % T_SLOTS), cap, len, &c);
		if (a == NVMF_ACT_COMPLETE) {
			completes++;
			ck_assert_uint_eq(c.cid, ((struct nvme_sqe *)cap)->cid);
			ck_assert_uint_eq(c.status & 1, 0);
			continue;
		}
		/* a held AER keeps its slot: start that queue over, as after a close */
		if (a == NVMF_ACT_CLOSE)
			closes++;
		else
			ck_assert_int_eq(a, NVMF_ACT_HOLD);
		if (k == 0) {
			t_queue_free(fresh);
			fresh = t_queue_new(t, 0, NVME_AQ_DEPTH - 1);
			continue;
		}
		t_queue_free(io);
		if (k == 1) {
			t_queue_free(adm);
			adm = t_admin_ready(t, &id);
		} else {
			reenable();
		}
		io = t_io(t, 1, id);
	}
	t_queue_free(fresh);
	ck_assert_int_gt(completes, iters / 2);
	ck_assert_int_gt(closes, 0);
}
END_TEST

TCase *t_io_tcase(void)
{
	TCase *tc = tcase_create("io");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_read_write);
	tcase_add_test(tc, test_rw_invalid);
	tcase_add_test(tc, test_sgl_types);
	tcase_add_test(tc, test_opcodes);
	tcase_add_test(tc, test_flush_zeroes_dsm);
	tcase_add_test(tc, test_write_protect);
	tcase_add_test(tc, test_backend_errors_smart);
	tcase_add_test(tc, test_fuzz);
	tcase_set_timeout(tc, 300);
	return tc;
}
