// SPDX-License-Identifier: MIT
/*
 * unit suite: pollcore-blk's wire protocol (tools/blk/proto.c): the wire
 * layout, the parse of a received command and each validation failure's
 * exact status, and the verification stamps.
 */
#include "proto.h"

#include <stdint.h>
#include <string.h>

#include "pc_test.h"

/* 1 MiB of 4 KiB blocks, 128 KiB per command at most */
static const struct blk_geom geom = {.bs = 4096, .max_io = 128u << 10, .nblocks = 256};

static struct blk_cmd good_cmd(uint8_t op, uint64_t lba, uint32_t len)
{
	return (struct blk_cmd){.magic = BLK_CMD_MAGIC,
				.opcode = op,
				.tag = 0x1122334455667788ull,
				.lba = lba,
				.len = len,
				.rkey = 0xabcd,
				.addr = 0x7f0000001000ull};
}

/* The status the server would answer @c with, going through the wire bytes. */
static enum blk_status status_of(struct blk_cmd c)
{
	uint8_t buf[sizeof(struct blk_cmd)];
	struct blk_cmd out;
	enum blk_status s;

	blk_cmd_encode(&c, buf);
	s = blk_cmd_parse(buf, sizeof(buf), &geom, &out);
	/* the tag survives every failure, so the error completion can name it */
	ck_assert_uint_eq(out.tag, c.tag);
	return s;
}

START_TEST(test_cmd_layout)
{
	struct blk_cmd c = good_cmd(BLK_OP_WRITE, 0x0102030405060708ull, 8192), d;
	uint8_t b[sizeof(struct blk_cmd)];
	uint64_t v64;
	uint32_t v32;

	blk_cmd_encode(&c, b);
	/* little-endian, fixed offsets */
	ck_assert_uint_eq(b[0], 0x42); /* 'B' of "BLK1", the low byte first */
	ck_assert_uint_eq(b[4], BLK_OP_WRITE);
	ck_assert_uint_eq(b[16], 0x08);
	ck_assert_uint_eq(b[23], 0x01);
	memcpy(&v32, b + 24, 4);
	ck_assert_uint_eq(le32toh(v32), 8192);
	memcpy(&v64, b + 32, 8);
	ck_assert_uint_eq(le64toh(v64), 0x7f0000001000ull);
	ck_assert_int_eq(blk_cmd_decode(b, sizeof(b), &d), BLK_S_OK);
	ck_assert_int_eq(memcmp(&c, &d, sizeof(c)), 0);
}
END_TEST

START_TEST(test_good_cmds)
{
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 0, 4096)), BLK_S_OK);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, 255, 4096)), BLK_S_OK);   /* the last block */
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 224, 128u << 10)), BLK_S_OK); /* up to the end */
	/* FLUSH and IDENTIFY ignore lba and len */
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_FLUSH, UINT64_MAX, 3)), BLK_S_OK);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_IDENTIFY, 0, 0)), BLK_S_OK);
}
END_TEST

START_TEST(test_bad_opcode)
{
	ck_assert_int_eq(status_of(good_cmd(0, 0, 4096)), BLK_S_BAD_OPCODE);
	ck_assert_int_eq(status_of(good_cmd(5, 0, 4096)), BLK_S_BAD_OPCODE);
	ck_assert_int_eq(status_of(good_cmd(0xff, 0, 4096)), BLK_S_BAD_OPCODE);
}
END_TEST

START_TEST(test_lba_range)
{
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 256, 4096)), BLK_S_LBA_RANGE);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, 255, 8192)), BLK_S_LBA_RANGE);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 1ull << 40, 4096)), BLK_S_LBA_RANGE);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, UINT64_MAX - 1, 4096)), BLK_S_LBA_RANGE);
}
END_TEST

START_TEST(test_len)
{
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 0, 0)), BLK_S_LEN_ZERO);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, 0, 4097)), BLK_S_LEN_MISALIGNED);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, 0, 512)), BLK_S_LEN_MISALIGNED);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 0, (128u << 10) + 4096)),
			 BLK_S_LEN_TOO_LARGE);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 0, UINT32_MAX & ~4095u)),
			 BLK_S_LEN_TOO_LARGE);
	/* misaligned is reported before too large */
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, 0, UINT32_MAX)), BLK_S_LEN_MISALIGNED);
}
END_TEST

START_TEST(test_overflow)
{
	/* lba + 2 wraps: overflow, not merely out of range */
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_READ, UINT64_MAX, 8192)), BLK_S_LBA_OVERFLOW);
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, UINT64_MAX - 30, 128u << 10)),
			 BLK_S_LBA_OVERFLOW);
	/* lba + blocks == 2^64 - 1 exactly does not wrap */
	ck_assert_int_eq(status_of(good_cmd(BLK_OP_WRITE, UINT64_MAX - 32, 128u << 10)),
			 BLK_S_LBA_RANGE);
}
END_TEST

START_TEST(test_size_magic_fields)
{
	struct blk_cmd c = good_cmd(BLK_OP_READ, 0, 4096), out;
	uint8_t b[sizeof(struct blk_cmd) + 8] = {0};

	blk_cmd_encode(&c, b);
	ck_assert_int_eq(blk_cmd_parse(b, sizeof(struct blk_cmd) - 1, &geom, &out), BLK_S_BAD_SIZE);
	/* a short message still yields its tag for the error completion */
	ck_assert_uint_eq(out.tag, c.tag);
	ck_assert_int_eq(blk_cmd_parse(b, sizeof(struct blk_cmd) + 8, &geom, &out), BLK_S_BAD_SIZE);
	ck_assert_int_eq(blk_cmd_parse(b, 0, &geom, &out), BLK_S_BAD_SIZE);
	ck_assert_uint_eq(out.tag, 0);

	c.magic ^= 1;
	ck_assert_int_eq(status_of(c), BLK_S_BAD_MAGIC);
	c = good_cmd(BLK_OP_READ, 0, 4096);
	c.flags = 1;
	ck_assert_int_eq(status_of(c), BLK_S_BAD_FIELD);
	c = good_cmd(BLK_OP_READ, 0, 4096);
	c.rsvd2 = 1;
	ck_assert_int_eq(status_of(c), BLK_S_BAD_FIELD);
	/* reserved fields are checked before the opcode */
	c.opcode = 77;
	ck_assert_int_eq(status_of(c), BLK_S_BAD_FIELD);
}
END_TEST

START_TEST(test_cpl)
{
	struct blk_cpl c = {.magic = BLK_CPL_MAGIC,
			    .status = BLK_S_LBA_RANGE,
			    .tag = 42,
			    .bs = 4096,
			    .max_io = 1 << 17,
			    .nblocks = 1ull << 33},
		       d;
	uint8_t b[sizeof(c)];

	blk_cpl_encode(&c, b);
	ck_assert_uint_eq(b[4], BLK_S_LBA_RANGE);
	ck_assert_int_eq(blk_cpl_decode(b, sizeof(b), &d), 0);
	ck_assert_int_eq(memcmp(&c, &d, sizeof(c)), 0);
	ck_assert_int_eq(blk_cpl_decode(b, sizeof(b) - 1, &d), -EPROTO);
	b[0] ^= 1;
	ck_assert_int_eq(blk_cpl_decode(b, sizeof(b), &d), -EPROTO);
	ck_assert_str_eq(blk_status_str(BLK_S_LBA_OVERFLOW), "LBA_OVERFLOW");
	ck_assert_str_eq(blk_status_str(999), "?");
}
END_TEST

START_TEST(test_geom)
{
	struct blk_geom g = geom;

	ck_assert(blk_geom_valid(&g));
	g.bs = 3000;
	ck_assert(!blk_geom_valid(&g));
	g = geom;
	g.max_io = 4097;
	ck_assert(!blk_geom_valid(&g));
	g = geom;
	g.nblocks = 0;
	ck_assert(!blk_geom_valid(&g));
}
END_TEST

START_TEST(test_stamps)
{
	static uint8_t b[4096];
	uint32_t gen = 0;

	blk_stamp_fill(b, sizeof(b), 77, 5);
	ck_assert_int_eq(blk_stamp_check(b, sizeof(b), 77, 5, &gen), BLK_STAMP_OK);
	ck_assert_uint_eq(gen, 5);
	ck_assert_int_eq(blk_stamp_check(b, sizeof(b), 78, 5, &gen), BLK_STAMP_LBA);
	ck_assert_int_eq(blk_stamp_check(b, sizeof(b), 77, 6, &gen), BLK_STAMP_GEN);
	ck_assert_uint_eq(gen, 5);
	b[3000] ^= 0x10;
	ck_assert_int_eq(blk_stamp_check(b, sizeof(b), 77, 5, &gen), BLK_STAMP_SUM);
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(blk_stamp_check(b, sizeof(b), 77, 5, &gen), BLK_STAMP_MAGIC_BAD);
	/* different blocks and generations differ in their bodies */
	{
		static uint8_t a[512], c[512];

		blk_stamp_fill(a, sizeof(a), 1, 1);
		blk_stamp_fill(c, sizeof(c), 1, 2);
		ck_assert_int_ne(memcmp(a + 32, c + 32, sizeof(a) - 32), 0);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("blk_proto");
	TCase *tc = tcase_create("blk_proto");

	tcase_add_test(tc, test_cmd_layout);
	tcase_add_test(tc, test_good_cmds);
	tcase_add_test(tc, test_bad_opcode);
	tcase_add_test(tc, test_lba_range);
	tcase_add_test(tc, test_len);
	tcase_add_test(tc, test_overflow);
	tcase_add_test(tc, test_size_magic_fields);
	tcase_add_test(tc, test_cpl);
	tcase_add_test(tc, test_geom);
	tcase_add_test(tc, test_stamps);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
