// SPDX-License-Identifier: MIT
/*
 * tools/blk/client_bad.c - pollcore-blk client --bad-cmds: the server's
 * answer to each kind of invalid command, checked exactly.
 *
 *  - Commands the server can judge by themselves (opcode, range, length,
 *    size, magic, reserved fields) must each get an error completion with
 *    their own status, on a connection that stays up.
 *  - A READ whose rkey is not the client's, and a WRITE whose address lies
 *    outside the client's registered buffer, make the server's RDMA
 *    transfer fail. pollcore closes a connection whose work request failed
 *    (its QP is in the error state), so the client expects either an XFER
 *    completion or the close, and then a fresh connection that works.
 *  - After every step a good WRITE and READ of one block, stamped and
 *    checked, shows that the server still serves. They use the device's
 *    last two blocks, so that a verified client on the blocks before them
 *    can run beside (the test does).
 */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct bad_case {
	const char *name;
	uint8_t opcode;
	uint64_t lba;	   /* UINT64_MAX - n means nblocks - n where marked */
	uint32_t len;
	uint32_t msg_len;  /* 0: sizeof(struct blk_cmd) */
	int field;	   /* 1: bad magic, 2: flags set, 3: rsvd2 set */
	enum blk_status want;
};

static int check_status(const char *name, int ret, const struct blk_cpl *r, uint64_t tag,
			enum blk_status want)
{
	if (ret) {
		fprintf(stderr, "FAIL %s: no completion: %s\n", name, strerror(-ret));
		return -1;
	}
	if (r->status != want || (tag && r->tag != tag)) {
		fprintf(stderr, "FAIL %s: status %u (%s), tag 0x%" PRIx64 "; expected %u (%s), tag 0x%"
				PRIx64 "\n",
			name, r->status, blk_status_str(r->status), r->tag, want,
			blk_status_str(want), tag);
		return -1;
	}
	printf("ok   %-34s -> status %u %s\n", name, r->status, blk_status_str(r->status));
	return 0;
}

/* A WRITE of one stamped block at @lba, then a READ of it into a cleared buffer, checked. */
static int good_io(struct client *cl, uint64_t lba, uint32_t gen, const char *after)
{
	struct blk_cmd c = {.magic = BLK_CMD_MAGIC, .opcode = BLK_OP_WRITE, .tag = 0x500,
			    .lba = lba, .len = cl->g.bs, .rkey = cl->rkey,
			    .addr = (uintptr_t)cl->buf};
	enum blk_stamp_err e;
	struct blk_cpl r;
	uint32_t got = 0;
	int ret;

	blk_stamp_fill(cl->buf, cl->g.bs, lba, gen);
	ret = cli_sync_cmd(cl, &c, &r);
	if (ret || r.status != BLK_S_OK)
		goto fail;
	memset(cl->buf, 0, cl->g.bs);
	c.opcode = BLK_OP_READ;
	c.tag = 0x501;
	ret = cli_sync_cmd(cl, &c, &r);
	if (ret || r.status != BLK_S_OK)
		goto fail;
	e = blk_stamp_check(cl->buf, cl->g.bs, lba, gen, &got);
	if (e != BLK_STAMP_OK) {
		fprintf(stderr, "FAIL good I/O after %s: lba %" PRIu64 " read back: %s\n", after, lba,
			blk_stamp_err_str(e));
		return -1;
	}
	printf("ok   good WRITE+READ after %-17s -> lba %" PRIu64 " generation %u read back\n",
	       after, lba, gen);
	return 0;
fail:
	fprintf(stderr, "FAIL good I/O after %s: %s\n", after,
		ret ? strerror(-ret) : blk_status_str(r.status));
	return -1;
}

/*
 * A transfer the server cannot make: the completion says XFER, or pollcore
 * closes the connection (the usual case: the failed work request leaves the
 * QP in error). Either way a new connection must work.
 */
static int bad_transfer(struct client *cl, struct pc_engine *e, const char *addr, uint16_t port,
			const char *name, const struct blk_cmd *c, uint32_t gen)
{
	struct blk_cpl r;
	int ret = cli_sync_cmd(cl, c, &r);

	if (!ret && r.status == BLK_S_XFER) {
		printf("ok   %-34s -> status %u %s, connection kept\n", name, r.status,
		       blk_status_str(r.status));
	} else if (ret == -ENOTCONN) {
		printf("ok   %-34s -> connection closed by the failed transfer (%s)\n", name,
		       cl->down_reason);
		if (cli_reconnect(cl, e, addr, port))
			return -1;
	} else {
		fprintf(stderr, "FAIL %s: %s\n", name,
			ret ? strerror(-ret) : blk_status_str(r.status));
		return -1;
	}
	return good_io(cl, cl->g.nblocks - 2, gen, name[0] == 'R' ? "bad rkey" : "bad address");
}

int cli_bad_cmds(struct client *cl, struct pc_engine *e, const char *addr, uint16_t port)
{
	const uint64_t n = cl->g.nblocks;
	const uint32_t bs = cl->g.bs;
	const struct bad_case cases[] = {
	    {"unknown opcode 0x7f", 0x7f, 0, bs, 0, 0, BLK_S_BAD_OPCODE},
	    {"opcode 0", 0, 0, bs, 0, 0, BLK_S_BAD_OPCODE},
	    {"READ at lba nblocks", BLK_OP_READ, n, bs, 0, 0, BLK_S_LBA_RANGE},
	    {"WRITE across the end", BLK_OP_WRITE, n - 1, 2 * bs, 0, 0, BLK_S_LBA_RANGE},
	    {"READ of length 0", BLK_OP_READ, 0, 0, 0, 0, BLK_S_LEN_ZERO},
	    {"WRITE of length bs+1", BLK_OP_WRITE, 0, bs + 1, 0, 0, BLK_S_LEN_MISALIGNED},
	    {"READ of length bs/2", BLK_OP_READ, 0, bs / 2, 0, 0, BLK_S_LEN_MISALIGNED},
	    {"READ of max_io+bs", BLK_OP_READ, 0, cl->g.max_io + bs, 0, 0, BLK_S_LEN_TOO_LARGE},
	    {"READ at lba 2^64-1, 2 blocks", BLK_OP_READ, UINT64_MAX, 2 * bs, 0, 0,
	     BLK_S_LBA_OVERFLOW},
	    {"WRITE at lba 2^64-2, 4 blocks", BLK_OP_WRITE, UINT64_MAX - 1, 4 * bs, 0, 0,
	     BLK_S_LBA_OVERFLOW},
	    {"message of 20 bytes", BLK_OP_READ, 0, bs, 20, 0, BLK_S_BAD_SIZE},
	    {"message of 64 bytes", BLK_OP_READ, 0, bs, 64, 0, BLK_S_BAD_SIZE},
	    {"bad magic", BLK_OP_READ, 0, bs, 0, 1, BLK_S_BAD_MAGIC},
	    {"flags set", BLK_OP_READ, 0, bs, 0, 2, BLK_S_BAD_FIELD},
	    {"reserved field set", BLK_OP_WRITE, 0, bs, 0, 3, BLK_S_BAD_FIELD},
	};
	uint8_t raw[64];
	struct blk_cpl r;
	struct blk_cmd c;
	unsigned int i, failed = 0;
	int ret;

	if (good_io(cl, n - 1, 1, "connecting"))
		return 1;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *k = &cases[i];
		uint32_t len = k->msg_len ? k->msg_len : sizeof(c);

		c = (struct blk_cmd){.magic = BLK_CMD_MAGIC, .opcode = k->opcode,
				     .tag = 0x100 + i, .lba = k->lba, .len = k->len,
				     .rkey = cl->rkey, .addr = (uintptr_t)cl->buf};
		if (k->field == 1)
			c.magic = 0xdeadbeef;
		else if (k->field == 2)
			c.flags = 0x80;
		else if (k->field == 3)
			c.rsvd2 = 1;
		memset(raw, 0xee, sizeof(raw));
		blk_cmd_encode(&c, raw);
		ret = cli_sync_raw(cl, raw, len, &r, 30);
		/* a 20-byte message still carries its tag's low 4 bytes */
		if (check_status(k->name, ret, &r, len >= 16 ? c.tag : 0, k->want))
			failed++;
		if (ret == -ENOTCONN)
			return 1; /* a validation failure must never cost the connection */
	}
	if (failed || good_io(cl, n - 1, 2, "invalid commands"))
		return 1;

	/* RDMA WRITE of a READ's data with an rkey that is not the client's */
	c = (struct blk_cmd){.magic = BLK_CMD_MAGIC, .opcode = BLK_OP_READ, .tag = 0x200,
			     .lba = 0, .len = bs, .rkey = cl->rkey ^ 0x5a5a5a00u,
			     .addr = (uintptr_t)cl->buf};
	if (bad_transfer(cl, e, addr, port, "READ with a bad rkey", &c, 3))
		return 1;
	/* RDMA READ of a WRITE's data from beyond the client's registered buffer */
	c = (struct blk_cmd){.magic = BLK_CMD_MAGIC, .opcode = BLK_OP_WRITE, .tag = 0x201,
			     .lba = 0, .len = bs, .rkey = cl->rkey,
			     .addr = (uintptr_t)cl->buf + ((size_t)cl->depth + 16) * cl->iobs};
	if (bad_transfer(cl, e, addr, port, "WRITE from a bad address", &c, 4))
		return 1;
	printf("PASS: %zu invalid commands answered with their status, 2 failed transfers "
	       "survived\n",
	       sizeof(cases) / sizeof(cases[0]));
	return 0;
}
