/* SPDX-License-Identifier: MIT */
/*
 * tools/blk/proto.h - pollcore-blk's wire protocol (docs/storage.md).
 *
 * A command travels as a pc_call() request of exactly sizeof(struct blk_cmd)
 * bytes; its completion comes back as the pc_reply() in the same buffer,
 * sizeof(struct blk_cpl) bytes. Payloads never travel in messages: the
 * server moves them with RDMA WRITE (READ commands) and RDMA READ (WRITE
 * commands) between the client's registered buffer (@addr, @rkey) and its
 * own staging buffers. Every field is little-endian; blk_cmd_encode() and
 * blk_cmd_decode() (and the cpl pair) convert, so the structs in memory are
 * always in host order.
 *
 * Nothing here touches the network or a device: the parse and validation
 * functions are pure and unit-tested on the host (tests/test_blk_proto.c).
 */
#ifndef BLK_PROTO_H
#define BLK_PROTO_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLK_PORT      4420	 /* NVMe-oF's port */
#define BLK_CMD_MAGIC 0x314b4c42u /* "BLK1" */
#define BLK_CPL_MAGIC 0x314c5043u /* "CPL1" */
#define BLK_MAX_IO    (128u << 10) /* the most bytes one command moves (NVMe's MDTS) */

enum blk_opcode {
	BLK_OP_READ = 1,     /* device -> client buffer (server: RDMA WRITE) */
	BLK_OP_WRITE = 2,    /* client buffer -> device (server: RDMA READ) */
	BLK_OP_FLUSH = 3,    /* every acknowledged write durable; lba/len/addr/rkey ignored */
	BLK_OP_IDENTIFY = 4, /* completion carries bs, max_io, nblocks; the rest ignored */
};

/*
 * Completion status. Validation checks in this order and reports the first
 * failure: BAD_SIZE, BAD_MAGIC, BAD_FIELD, BAD_OPCODE, then for READ and
 * WRITE: LEN_ZERO, LEN_MISALIGNED, LEN_TOO_LARGE, LBA_OVERFLOW, LBA_RANGE.
 */
enum blk_status {
	BLK_S_OK = 0,
	BLK_S_BAD_OPCODE = 1,	  /* not one of enum blk_opcode */
	BLK_S_LBA_RANGE = 2,	  /* lba + blocks beyond the device's end */
	BLK_S_LEN_ZERO = 3,	  /* len 0 */
	BLK_S_LEN_MISALIGNED = 4, /* len not a multiple of the block size */
	BLK_S_LEN_TOO_LARGE = 5,  /* len above max_io */
	BLK_S_LBA_OVERFLOW = 6,	  /* lba + blocks wraps around 2^64 */
	BLK_S_BAD_SIZE = 7,	  /* message is not sizeof(struct blk_cmd) bytes */
	BLK_S_BAD_MAGIC = 8,	  /* magic is not BLK_CMD_MAGIC */
	BLK_S_BAD_FIELD = 9,	  /* a reserved field or flags is not zero */
	BLK_S_XFER = 10,	  /* the RDMA transfer failed (bad address or rkey) */
	BLK_S_IO = 11,		  /* the backing store failed */
	BLK_S_BUSY = 12,	  /* no command slot on the server (cannot happen: see server.c) */
	BLK_S_MAX
};

/**
 * struct blk_cmd - a command, 48 bytes on the wire.
 * @magic: BLK_CMD_MAGIC.
 * @opcode: enum blk_opcode.
 * @flags: 0.
 * @rsvd: 0.
 * @tag: chosen by the client, echoed in the completion.
 * @lba: first block (of the server's block size).
 * @len: bytes: a non-zero multiple of the block size, at most max_io.
 * @rkey: rkey of the client's buffer (REMOTE_WRITE for READ, REMOTE_READ for WRITE).
 * @addr: address of the client's buffer.
 * @rsvd2: 0.
 */
struct blk_cmd {
	uint32_t magic;
	uint8_t opcode;
	uint8_t flags;
	uint16_t rsvd;
	uint64_t tag;
	uint64_t lba;
	uint32_t len;
	uint32_t rkey;
	uint64_t addr;
	uint64_t rsvd2;
};
static_assert(sizeof(struct blk_cmd) == 48, "blk_cmd wire layout");
static_assert(offsetof(struct blk_cmd, tag) == 8 && offsetof(struct blk_cmd, lba) == 16 &&
		  offsetof(struct blk_cmd, len) == 24 && offsetof(struct blk_cmd, addr) == 32,
	      "blk_cmd field offsets");

/**
 * struct blk_cpl - a completion, 32 bytes on the wire.
 * @magic: BLK_CPL_MAGIC.
 * @status: enum blk_status.
 * @rsvd: 0.
 * @tag: the command's tag (0 when the command was too short to carry one).
 * @bs: IDENTIFY: block size in bytes; else 0.
 * @max_io: IDENTIFY: largest len; else 0.
 * @nblocks: IDENTIFY: device size in blocks; else 0.
 */
struct blk_cpl {
	uint32_t magic;
	uint16_t status;
	uint16_t rsvd;
	uint64_t tag;
	uint32_t bs;
	uint32_t max_io;
	uint64_t nblocks;
};
static_assert(sizeof(struct blk_cpl) == 32, "blk_cpl wire layout");
static_assert(offsetof(struct blk_cpl, tag) == 8 && offsetof(struct blk_cpl, nblocks) == 24,
	      "blk_cpl field offsets");

/**
 * struct blk_geom - what the server validates commands against.
 * @bs: block size, a power of two.
 * @nblocks: device size in blocks.
 * @max_io: largest len, a multiple of @bs.
 */
struct blk_geom {
	uint32_t bs;
	uint32_t max_io;
	uint64_t nblocks;
};

/**
 * blk_cmd_encode - write @c to @buf in wire order.
 * @c: command, host order.
 * @buf: at least sizeof(struct blk_cmd) bytes.
 */
void blk_cmd_encode(const struct blk_cmd *c, void *buf);

/**
 * blk_cmd_decode - read a command from a received message.
 * @buf: message bytes.
 * @len: message length.
 * @c: filled in host order as far as @len allows (zeroed first, so a short
 *     message still yields its tag when it has one).
 *
 * Return: BLK_S_OK, BLK_S_BAD_SIZE or BLK_S_BAD_MAGIC.
 */
enum blk_status blk_cmd_decode(const void *buf, size_t len, struct blk_cmd *c);

/**
 * blk_cmd_check - validate a decoded command against a device.
 * @c: command, host order.
 * @g: the device.
 *
 * Pure: no side effects. The order of the checks is in enum blk_status.
 *
 * Return: BLK_S_OK or the first failing check's status.
 */
enum blk_status blk_cmd_check(const struct blk_cmd *c, const struct blk_geom *g);

/**
 * blk_cmd_parse - blk_cmd_decode() then blk_cmd_check().
 * @buf: message bytes.
 * @len: message length.
 * @g: the device.
 * @c: filled as by blk_cmd_decode().
 *
 * Return: BLK_S_OK or the first failing check's status.
 */
enum blk_status blk_cmd_parse(const void *buf, size_t len, const struct blk_geom *g,
			      struct blk_cmd *c);

/**
 * blk_cpl_encode - write @c to @buf in wire order.
 * @c: completion, host order.
 * @buf: at least sizeof(struct blk_cpl) bytes.
 */
void blk_cpl_encode(const struct blk_cpl *c, void *buf);

/**
 * blk_cpl_decode - read a completion.
 * @buf: message bytes.
 * @len: message length.
 * @c: filled, host order.
 *
 * Return: 0, or -EPROTO when @len or the magic is wrong.
 */
int blk_cpl_decode(const void *buf, size_t len, struct blk_cpl *c);

/**
 * blk_status_str - a status's name.
 * @s: status.
 *
 * Return: a static string, e.g. "LBA_RANGE"; "?" for unknown values.
 */
const char *blk_status_str(unsigned int s);

/**
 * blk_geom_valid - whether a geometry can be served.
 * @g: geometry.
 *
 * Return: true when bs is a power of two from 512 to 1 MiB, max_io a
 * non-zero multiple of bs, and nblocks non-zero.
 */
bool blk_geom_valid(const struct blk_geom *g);

/*
 * Verification stamps (the client's --verify): every block of @bs bytes
 * starts with a 32-byte header - magic, its LBA, a generation, a checksum
 * of the whole block - and the rest is a pattern of (lba, gen).
 */
#define BLK_STAMP_MAGIC 0x504d54534b4c4250ull /* "PBLKSTMP" */

enum blk_stamp_err {
	BLK_STAMP_OK = 0,
	BLK_STAMP_MAGIC_BAD, /* no stamp: never written, or overwritten by something else */
	BLK_STAMP_LBA,	     /* a stamp of another block: data landed in the wrong place */
	BLK_STAMP_GEN,	     /* an older or newer generation: a lost or misordered write */
	BLK_STAMP_SUM,	     /* the right header but damaged contents */
};

/**
 * blk_stamp_fill - stamp one block.
 * @buf: @bs bytes.
 * @bs: block size, a multiple of 8, at least 32.
 * @lba: the block's address.
 * @gen: generation.
 */
void blk_stamp_fill(void *buf, uint32_t bs, uint64_t lba, uint32_t gen);

/**
 * blk_stamp_check - check one block's stamp.
 * @buf: @bs bytes.
 * @bs: block size.
 * @lba: the address it was read from.
 * @gen: the generation expected.
 * @got_gen: set to the generation found (when the magic is right).
 *
 * Return: enum blk_stamp_err.
 */
enum blk_stamp_err blk_stamp_check(const void *buf, uint32_t bs, uint64_t lba, uint32_t gen,
				   uint32_t *got_gen);

/**
 * blk_stamp_err_str - a stamp check's outcome, in words.
 * @e: outcome.
 *
 * Return: a static string.
 */
const char *blk_stamp_err_str(enum blk_stamp_err e);

#endif /* BLK_PROTO_H */
