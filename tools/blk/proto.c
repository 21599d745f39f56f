// SPDX-License-Identifier: MIT
/* tools/blk/proto.c - pollcore-blk's wire structs, validation and stamps (pure). */
#include "proto.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

void blk_cmd_encode(const struct blk_cmd *c, void *buf)
{
	struct blk_cmd w = {
	    .magic = htole32(c->magic),
	    .opcode = c->opcode,
	    .flags = c->flags,
	    .rsvd = htole16(c->rsvd),
	    .tag = htole64(c->tag),
	    .lba = htole64(c->lba),
	    .len = htole32(c->len),
	    .rkey = htole32(c->rkey),
	    .addr = htole64(c->addr),
	    .rsvd2 = htole64(c->rsvd2),
	};

	memcpy(buf, &w, sizeof(w));
}

enum blk_status blk_cmd_decode(const void *buf, size_t len, struct blk_cmd *c)
{
	struct blk_cmd w;

	memset(&w, 0, sizeof(w));
	memcpy(&w, buf, len < sizeof(w) ? len : sizeof(w));
	*c = (struct blk_cmd){
	    .magic = le32toh(w.magic),
	    .opcode = w.opcode,
	    .flags = w.flags,
	    .rsvd = le16toh(w.rsvd),
	    .tag = le64toh(w.tag),
	    .lba = le64toh(w.lba),
	    .len = le32toh(w.len),
	    .rkey = le32toh(w.rkey),
	    .addr = le64toh(w.addr),
	    .rsvd2 = le64toh(w.rsvd2),
	};
	if (len != sizeof(w))
		return BLK_S_BAD_SIZE;
	if (c->magic != BLK_CMD_MAGIC)
		return BLK_S_BAD_MAGIC;
	return BLK_S_OK;
}

enum blk_status blk_cmd_check(const struct blk_cmd *c, const struct blk_geom *g)
{
	uint64_t blocks;

	if (c->magic != BLK_CMD_MAGIC)
		return BLK_S_BAD_MAGIC;
	if (c->flags || c->rsvd || c->rsvd2)
		return BLK_S_BAD_FIELD;
	switch (c->opcode) {
	case BLK_OP_READ:
	case BLK_OP_WRITE:
		break;
	case BLK_OP_FLUSH:
	case BLK_OP_IDENTIFY:
		return BLK_S_OK;
	default:
		return BLK_S_BAD_OPCODE;
	}
	if (!c->len)
		return BLK_S_LEN_ZERO;
	if (c->len & (g->bs - 1))
		return BLK_S_LEN_MISALIGNED;
	if (c->len > g->max_io)
		return BLK_S_LEN_TOO_LARGE;
	blocks = c->len / g->bs;
	if (c->lba > UINT64_MAX - blocks)
		return BLK_S_LBA_OVERFLOW;
	/* written so that nothing wraps: lba + blocks <= nblocks */
	if (c->lba > g->nblocks || blocks > g->nblocks - c->lba)
		return BLK_S_LBA_RANGE;
	return BLK_S_OK;
}

enum blk_status blk_cmd_parse(const void *buf, size_t len, const struct blk_geom *g,
			      struct blk_cmd *c)
{
	enum blk_status s = blk_cmd_decode(buf, len, c);

	return s != BLK_S_OK ? s : blk_cmd_check(c, g);
}

void blk_cpl_encode(const struct blk_cpl *c, void *buf)
{
	struct blk_cpl w = {
	    .magic = htole32(c->magic),
	    .status = htole16(c->status),
	    .rsvd = htole16(c->rsvd),
	    .tag = htole64(c->tag),
	    .bs = htole32(c->bs),
	    .max_io = htole32(c->max_io),
	    .nblocks = htole64(c->nblocks),
	};

	memcpy(buf, &w, sizeof(w));
}

int blk_cpl_decode(const void *buf, size_t len, struct blk_cpl *c)
{
	struct blk_cpl w;

	if (len != sizeof(w))
		return -EPROTO;
	memcpy(&w, buf, sizeof(w));
	*c = (struct blk_cpl){
	    .magic = le32toh(w.magic),
	    .status = le16toh(w.status),
	    .rsvd = le16toh(w.rsvd),
	    .tag = le64toh(w.tag),
	    .bs = le32toh(w.bs),
	    .max_io = le32toh(w.max_io),
	    .nblocks = le64toh(w.nblocks),
	};
	return c->magic == BLK_CPL_MAGIC ? 0 : -EPROTO;
}

const char *blk_status_str(unsigned int s)
{
	static const char *const names[BLK_S_MAX] = {
	    [BLK_S_OK] = "OK",
	    [BLK_S_BAD_OPCODE] = "BAD_OPCODE",
	    [BLK_S_LBA_RANGE] = "LBA_RANGE",
	    [BLK_S_LEN_ZERO] = "LEN_ZERO",
	    [BLK_S_LEN_MISALIGNED] = "LEN_MISALIGNED",
	    [BLK_S_LEN_TOO_LARGE] = "LEN_TOO_LARGE",
	    [BLK_S_LBA_OVERFLOW] = "LBA_OVERFLOW",
	    [BLK_S_BAD_SIZE] = "BAD_SIZE",
	    [BLK_S_BAD_MAGIC] = "BAD_MAGIC",
	    [BLK_S_BAD_FIELD] = "BAD_FIELD",
	    [BLK_S_XFER] = "XFER",
	    [BLK_S_IO] = "IO",
	    [BLK_S_BUSY] = "BUSY",
	};

	return s < BLK_S_MAX ? names[s] : "?";
}

bool blk_geom_valid(const struct blk_geom *g)
{
	return g->bs >= 512 && g->bs <= (1u << 20) && !(g->bs & (g->bs - 1)) && g->max_io &&
	       !(g->max_io % g->bs) && g->nblocks;
}

/* --- stamps ---------------------------------------------------------------------------- */

struct stamp_hdr {
	uint64_t magic;
	uint64_t lba;
	uint32_t gen;
	uint32_t rsvd;
	uint64_t sum;
};
static_assert(sizeof(struct stamp_hdr) == 32, "stamp header");

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 32);
}

/* FNV-1a over 64-bit words: the header with sum 0, then the body. */
static uint64_t stamp_sum(const uint8_t *b, uint32_t bs)
{
	uint64_t h = 0xcbf29ce484222325ull, w;
	uint32_t i;

	for (i = 0; i < bs; i += 8) {
		if (i == offsetof(struct stamp_hdr, sum))
			w = 0;
		else
			memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	return h;
}

void blk_stamp_fill(void *buf, uint32_t bs, uint64_t lba, uint32_t gen)
{
	struct stamp_hdr h = {.magic = htole64(BLK_STAMP_MAGIC),
			      .lba = htole64(lba),
			      .gen = htole32(gen)};
	uint64_t seed = mix64(lba * 0x9e3779b97f4a7c15ull ^ gen), w;
	uint8_t *b = buf;
	uint32_t i;

	memcpy(b, &h, sizeof(h));
	for (i = sizeof(h); i < bs; i += 8) {
		w = mix64(seed + i);
		memcpy(b + i, &w, 8);
	}
	h.sum = htole64(stamp_sum(b, bs));
	memcpy(b, &h, sizeof(h));
}

enum blk_stamp_err blk_stamp_check(const void *buf, uint32_t bs, uint64_t lba, uint32_t gen,
				   uint32_t *got_gen)
{
	struct stamp_hdr h;

	memcpy(&h, buf, sizeof(h));
	if (le64toh(h.magic) != BLK_STAMP_MAGIC)
		return BLK_STAMP_MAGIC_BAD;
	*got_gen = le32toh(h.gen);
	if (le64toh(h.lba) != lba)
		return BLK_STAMP_LBA;
	if (stamp_sum(buf, bs) != le64toh(h.sum))
		return BLK_STAMP_SUM;
	if (*got_gen != gen)
		return BLK_STAMP_GEN;
	return BLK_STAMP_OK;
}

const char *blk_stamp_err_str(enum blk_stamp_err e)
{
	switch (e) {
	case BLK_STAMP_OK: return "ok";
	case BLK_STAMP_MAGIC_BAD: return "no stamp";
	case BLK_STAMP_LBA: return "stamp of another LBA";
	case BLK_STAMP_GEN: return "wrong generation";
	case BLK_STAMP_SUM: return "checksum mismatch";
	}
	return "?";
}
