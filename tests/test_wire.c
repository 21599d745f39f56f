// SPDX-License-Identifier: MIT
/* unit suite: the message header and rdma_cm private data (core/wire.h). */
#include "wire.h"

#include <stdint.h>

#include "pc_test.h"

static uint8_t buf[64];

/* A received message of @payload bytes, header filled by wire_hdr_fill(). */
static uint32_t make_msg(uint8_t type, uint32_t payload, uint64_t req_id)
{
	memset(buf, 0xa5, sizeof(buf));
	wire_hdr_fill((struct wire_hdr *)(void *)buf, type, payload, req_id, 0x12345);
	return WIRE_HDR_LEN + payload;
}

START_TEST(test_hdr_layout)
{
	uint64_t req_id;
	uint32_t len;
	uint16_t grant;

	/* the wire format: magic, type, grant, len, req_id at fixed offsets */
	make_msg(WIRE_RESPONSE, 40, 0x1122334455667788ull);
	memcpy(&grant, buf + 2, 2);
	memcpy(&len, buf + 4, 4);
	memcpy(&req_id, buf + 8, 8);
	ck_assert_uint_eq(buf[0], PC_WIRE_MAGIC);
	ck_assert_uint_eq(buf[1], WIRE_RESPONSE);
	ck_assert_uint_eq(grant, 0x2345);	/* the low 16 bits of the cumulative grant */
	ck_assert_uint_eq(len, 40);
	ck_assert_uint_eq(req_id, 0x1122334455667788ull);
	/* the payload after the header is untouched */
	ck_assert_uint_eq(buf[WIRE_HDR_LEN], 0xa5);
}
END_TEST

START_TEST(test_hdr_roundtrip)
{
	static const uint8_t types[] = { WIRE_ONEWAY, WIRE_REQUEST, WIRE_RESPONSE };
	struct wire_hdr h;
	unsigned int i;

	for (i = 0; i < PC_ARRAY_SIZE(types); i++) {
		uint32_t len = make_msg(types[i], 48, 1000 + i);

		memset(&h, 0, sizeof(h));
		ck_assert_int_eq(wire_hdr_parse(buf, len, &h), 0);
		ck_assert_uint_eq(h.type, types[i]);
		ck_assert_uint_eq(h.len, 48);
		ck_assert_uint_eq(h.req_id, 1000 + i);
	}
	/* an empty payload is a valid message */
	ck_assert_int_eq(wire_hdr_parse(buf, make_msg(WIRE_ONEWAY, 0, 0), &h), 0);
	ck_assert_uint_eq(h.len, 0);
}
END_TEST

START_TEST(test_hdr_short)
{
	struct wire_hdr h;
	uint32_t len;

	make_msg(WIRE_ONEWAY, 0, 0);
	for (len = 0; len < WIRE_HDR_LEN; len++)
		ck_assert_int_eq(wire_hdr_parse(buf, len, &h), -EPROTO);
	/* nothing is read from a short buffer: NULL with length 0 is safe */
	ck_assert_int_eq(wire_hdr_parse(NULL, 0, &h), -EPROTO);
}
END_TEST

START_TEST(test_hdr_invalid)
{
	struct wire_hdr h;
	uint32_t len;

	/* wrong magic */
	len = make_msg(WIRE_ONEWAY, 8, 0);
	buf[0] ^= 1;
	ck_assert_int_eq(wire_hdr_parse(buf, len, &h), -EPROTO);
	/* a type beyond WIRE_RESPONSE */
	len = make_msg(WIRE_TYPE_MAX + 1, 8, 0);
	ck_assert_int_eq(wire_hdr_parse(buf, len, &h), -EPROTO);
	len = make_msg(0xff, 8, 0);
	ck_assert_int_eq(wire_hdr_parse(buf, len, &h), -EPROTO);
	/* header length disagrees with what arrived, both ways */
	len = make_msg(WIRE_ONEWAY, 8, 0);
	ck_assert_int_eq(wire_hdr_parse(buf, len + 1, &h), -EPROTO);
	ck_assert_int_eq(wire_hdr_parse(buf, len - 1, &h), -EPROTO);
	/* a huge claimed length cannot wrap around */
	make_msg(WIRE_ONEWAY, UINT32_MAX, 0);
	ck_assert_int_eq(wire_hdr_parse(buf, WIRE_HDR_LEN - 1, &h), -EPROTO);
	ck_assert_int_eq(wire_hdr_parse(buf, WIRE_HDR_LEN, &h), -EPROTO);
	/* any grant parses: its plausibility is the receiver's check (wire_grant_expand) */
	len = make_msg(WIRE_REQUEST, 8, 7);
	buf[2] = 0xff;
	buf[3] = 0xff;
	ck_assert_int_eq(wire_hdr_parse(buf, len, &h), 0);
	ck_assert_uint_eq(h.grant, 0xffff);
}
END_TEST

/* The 16 bits a header carries, widened against the last grant seen. */
START_TEST(test_grant_expand)
{
	static const uint64_t seens[] = { 0, 1, 0xfffe, 0xffff, 0x10000, 0x123456789ull,
					  UINT64_MAX - 0x20000 };
	unsigned int i;
	uint32_t ahead;

	for (i = 0; i < PC_ARRAY_SIZE(seens); i++) {
		uint64_t seen = seens[i];

		/* every grant up to a whole window ahead comes back exactly, across wraps */
		for (ahead = 0; ahead <= WIRE_MAX_CREDITS; ahead += 1 + ahead / 7)
			ck_assert_uint_eq(wire_grant_expand(seen, (uint16_t)(seen + ahead)),
					  seen + ahead);
		ck_assert_uint_eq(wire_grant_expand(seen, (uint16_t)(seen + WIRE_MAX_CREDITS)),
				  seen + WIRE_MAX_CREDITS);
		/* an older grant (overtaken by a credit WRITE) lands more than a window ahead */
		for (ahead = 1; ahead <= WIRE_MAX_CREDITS; ahead += 1 + ahead / 7)
			ck_assert_uint_gt(wire_grant_expand(seen, (uint16_t)(seen - ahead)) - seen,
					  WIRE_MAX_CREDITS);
	}
}
END_TEST

START_TEST(test_cm_roundtrip)
{
	struct wire_cm_priv p, out;
	uint32_t len;

	wire_cm_fill(&p, 0, 64, 0xdeadbeef000ull, 0x1234, 4096);
	memset(&out, 0, sizeof(out));
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 1);
	ck_assert_uint_eq(out.magic, PC_CM_MAGIC);
	ck_assert_uint_eq(out.credits, 0);	/* pollcore grants nothing up front */
	ck_assert_uint_eq(out.window, 64);
	ck_assert_uint_eq(out.credit_addr, 0xdeadbeef000ull);
	ck_assert_uint_eq(out.credit_rkey, 0x1234);
	ck_assert_uint_eq(out.max_msg, 4096);
	/* rdma_cm pads private data: a longer buffer is fine */
	memset(buf, 0, sizeof(buf));
	memcpy(buf + 0, &p, sizeof(p));
	ck_assert_int_eq(wire_cm_parse("dev0", buf, 56, &out), 1);
	/* the largest grant allowed, up front */
	wire_cm_fill(&p, WIRE_MAX_CREDITS, WIRE_MAX_CREDITS, 8, 1, 1);
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 1);
	ck_assert_uint_eq(out.credits, WIRE_MAX_CREDITS);
	ck_assert_uint_eq(out.window, WIRE_MAX_CREDITS);
	/* the window field sits after the 24 bytes of the first layout */
	memcpy(&len, (uint8_t *)&p + 24, 4);
	ck_assert_uint_eq(len, WIRE_MAX_CREDITS);
}
END_TEST

START_TEST(test_cm_max_large)
{
	struct wire_cm_priv p, out;

	ck_assert_uint_le(sizeof(p), 56);
	wire_cm_fill(&p, 0, 64, 8, 1, 4096);
	/* filled: no rendezvous until the caller raises it */
	ck_assert_uint_eq(p.max_large, 4096);
	p.max_large = 16u << 20;
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 1);
	ck_assert_uint_eq(out.max_large, 16u << 20);
	ck_assert_uint_eq(wire_cm_max_large(&out), 16u << 20);
	/* the 28-byte layout: max_large reads as none, i.e. max_msg */
	memset(&out, 0x5a, sizeof(out));
	ck_assert_int_eq(wire_cm_parse("dev0", &p, 28, &out), 1);
	ck_assert_uint_eq(out.max_large, 0);
	ck_assert_uint_eq(wire_cm_max_large(&out), 4096);
	/* below max_msg is nonsense: read as none */
	p.max_large = 100;
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 1);
	ck_assert_uint_eq(wire_cm_max_large(&out), 4096);
	/* shorter than 28: refused */
	ck_assert_int_eq(wire_cm_parse("dev0", &p, 27, &out), -EPROTO);
}
END_TEST

/* The features word: ours says PC_CM_FEATURES; older layouts and a cut word read as none. */
START_TEST(test_cm_features)
{
	struct wire_cm_priv p, out;
	size_t len;

	wire_cm_fill(&p, 0, 64, 8, 1, 4096);
	p.max_large = 16u << 20;
	ck_assert_uint_eq(p.features, PC_CM_FEATURES);
	ck_assert(p.features & PC_CM_FEAT_ABORT);
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 1);
	ck_assert_uint_eq(out.features, PC_CM_FEATURES);
	/* the 32-byte layout (max_large, no features), and every cut of the word */
	for (len = offsetof(struct wire_cm_priv, features); len < sizeof(p); len++) {
		memset(&out, 0x5a, sizeof(out));
		ck_assert_int_eq(wire_cm_parse("dev0", &p, len, &out), 1);
		ck_assert_uint_eq(out.features, 0);
		ck_assert_uint_eq(out.max_large, 16u << 20);
	}
	/* the 28-byte layout: neither */
	memset(&out, 0x5a, sizeof(out));
	ck_assert_int_eq(wire_cm_parse("dev0", &p, 28, &out), 1);
	ck_assert_uint_eq(out.features, 0);
	ck_assert_uint_eq(out.max_large, 0);
}
END_TEST

/* WIRE_ABORT is a type of the header; above it, none. */
START_TEST(test_hdr_abort_type)
{
	uint8_t m[WIRE_HDR_LEN + 16] = { 0 };
	struct wire_hdr h;

	wire_hdr_fill((struct wire_hdr *)(void *)m, WIRE_ABORT, 16, 0, 3);
	ck_assert_int_eq(wire_hdr_parse(m, sizeof(m), &h), 0);
	ck_assert_uint_eq(h.type, WIRE_ABORT);
	wire_hdr_fill((struct wire_hdr *)(void *)m, WIRE_ABORT + 1, 16, 0, 3);
	ck_assert_int_eq(wire_hdr_parse(m, sizeof(m), &h), -EPROTO);
}
END_TEST

START_TEST(test_rndv_descriptor)
{
	struct wire_rndv d = { .inner = WIRE_REQUEST, .rkey = 0x77, .addr = 0x1000,
			       .token = 0x500000003ull, .len = 4097 }, out, bad;
	struct wire_done done = { .token = 9, .status = 0 }, dout;
	char why[128];

	ck_assert_int_eq(wire_rndv_check(&d, sizeof(d), 4096, 16u << 20, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.token, d.token);
	ck_assert_uint_eq(out.len, 4097);
	ck_assert_uint_eq(out.inner, WIRE_REQUEST);
	/* the wrong size */
	ck_assert_int_eq(wire_rndv_check(&d, sizeof(d) - 1, 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "descriptor of 31 bytes"));
	/* not above msg_size */
	bad = d;
	bad.len = 4096;
	ck_assert_int_eq(wire_rndv_check(&bad, sizeof(bad), 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "4096 bytes"));
	/* above our limit, or no rendezvous at all */
	bad.len = (16u << 20) + 1;
	ck_assert_int_eq(wire_rndv_check(&bad, sizeof(bad), 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	ck_assert_int_eq(wire_rndv_check(&d, sizeof(d), 4096, 0, &out, why, sizeof(why)), -EPROTO);
	/* an internal type inside, or an unknown one */
	bad = d;
	bad.inner = WIRE_RNDV;
	ck_assert_int_eq(wire_rndv_check(&bad, sizeof(bad), 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "type 3"));
	/* rkey 0, or a range that wraps */
	bad = d;
	bad.rkey = 0;
	ck_assert_int_eq(wire_rndv_check(&bad, sizeof(bad), 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	bad = d;
	bad.addr = UINT64_MAX - 10;
	ck_assert_int_eq(wire_rndv_check(&bad, sizeof(bad), 4096, 16u << 20, &out, why,
					 sizeof(why)), -EPROTO);
	/* DONE */
	ck_assert_int_eq(wire_done_check(&done, sizeof(done), &dout), 0);
	ck_assert_uint_eq(dout.token, 9);
	ck_assert_int_eq(wire_done_check(&done, 8, &dout), -EPROTO);
	done.status = 5;
	ck_assert_int_eq(wire_done_check(&done, sizeof(done), &dout), -EPROTO);
	done.status = -EIO;
	ck_assert_int_eq(wire_done_check(&done, sizeof(done), &dout), 0);
}
END_TEST

START_TEST(test_cm_raw_peers)
{
	struct wire_cm_priv p, out;

	memset(&out, 0x5a, sizeof(out));
	/* no private data, shorter than the magic, or someone else's: a raw peer */
	ck_assert_int_eq(wire_cm_parse("dev0", NULL, 0, &out), 0);
	ck_assert_int_eq(wire_cm_parse("dev0", NULL, 56, &out), 0);
	wire_cm_fill(&p, 0, 64, 8, 1, 4096);
	ck_assert_int_eq(wire_cm_parse("dev0", &p, 3, &out), 0);
	p.magic ^= 0x100;
	ck_assert_int_eq(wire_cm_parse("dev0", &p, sizeof(p), &out), 0);
	/* and @out is left alone */
	ck_assert_uint_eq(out.credits, 0x5a5a5a5a);
}
END_TEST

START_TEST(test_cm_invalid)
{
	static const struct {
		uint32_t credits, window, rkey, max_msg;
	} bad[] = {
		{ 0, 0, 1, 4096 },
		{ 0, WIRE_MAX_CREDITS + 1, 1, 4096 },
		{ 0, UINT32_MAX, 1, 4096 },
		{ 65, 64, 1, 4096 },
		{ UINT32_MAX, 64, 1, 4096 },
		{ 0, 64, 0, 4096 },
		{ 0, 64, 1, 0 },
	};
	struct wire_cm_priv p, out;
	unsigned int i;
	size_t len;

	for (i = 0; i < PC_ARRAY_SIZE(bad); i++) {
		wire_cm_fill(&p, bad[i].credits, bad[i].window, 8, bad[i].rkey, bad[i].max_msg);
		ck_assert_int_eq(wire_cm_parse("mlx5_7", &p, sizeof(p), &out), -EPROTO);
		/* the error names the device and the offending values */
		ck_assert_ptr_nonnull(strstr(pc_last_error(), "mlx5_7"));
		ck_assert_ptr_nonnull(strstr(pc_last_error(), "invalid"));
	}
	/* our magic but cut short (the first layout had no window): refused, not raw */
	wire_cm_fill(&p, 0, 64, 8, 1, 4096);
	for (len = 4; len < offsetof(struct wire_cm_priv, max_large); len++) {
		ck_assert_int_eq(wire_cm_parse("mlx5_7", &p, len, &out), -EPROTO);
		ck_assert_ptr_nonnull(strstr(pc_last_error(), "bytes"));
	}
}
END_TEST

START_TEST(test_cm_reject)
{
	char long_why[300], out[128];
	uint8_t padded[148] = { 0 };
	struct wire_cm_rej r;

	wire_rej_fill(&r, "rxe0 port 1 w0: no room");
	ck_assert(wire_rej_parse(&r, sizeof(r), out, sizeof(out)));
	ck_assert_str_eq(out, "rxe0 port 1 w0: no room");
	/* IB pads it to 148 bytes */
	memcpy(padded, &r, 40);
	ck_assert(wire_rej_parse(padded, sizeof(padded), out, sizeof(out)));
	ck_assert_str_eq(out, "rxe0 port 1 w0: no room");
	/* truncated to fit, always terminated; a small @out too */
	memset(long_why, 'x', sizeof(long_why) - 1);
	long_why[sizeof(long_why) - 1] = 0;
	wire_rej_fill(&r, long_why);
	ck_assert(wire_rej_parse(&r, sizeof(r), out, sizeof(out)));
	ck_assert_uint_eq(strlen(out), sizeof(r.why) - 1);
	ck_assert(wire_rej_parse(&r, sizeof(r), out, 5));
	ck_assert_str_eq(out, "xxxx");
	/* unterminated or unprintable bytes from a peer are not trusted */
	memset(&r, 0xff, sizeof(r));
	r.magic = PC_REJ_MAGIC;
	ck_assert(wire_rej_parse(&r, sizeof(r), out, sizeof(out)));
	ck_assert_uint_eq(strlen(out), sizeof(r.why));
	ck_assert_int_eq(out[0], '?');
	/* anything else is not ours */
	ck_assert(!wire_rej_parse(NULL, 0, out, sizeof(out)));
	ck_assert(!wire_rej_parse("abc", 3, out, sizeof(out)));
	r.magic = PC_CM_MAGIC;
	ck_assert(!wire_rej_parse(&r, sizeof(r), out, sizeof(out)));
}
END_TEST

/* --- packs ------------------------------------------------------------------------------- */

static uint8_t pk[512];

/* Appends a frame at @off of @pk: @type (WIRE_MORE or not), @payload bytes of @fill. */
static uint32_t pack_frame(uint32_t off, uint8_t type, uint32_t payload, uint8_t fill)
{
	wire_hdr_fill((struct wire_hdr *)(void *)(pk + off), type, payload, 0, 0x10203);
	/* a claimed length beyond the buffer is only claimed */
	memset(pk + off + WIRE_HDR_LEN, fill, PC_MIN(payload, sizeof(pk) - off - WIRE_HDR_LEN));
	return off + WIRE_HDR_LEN + payload;
}

START_TEST(test_pack_split)
{
	struct wire_hdr h[WIRE_PACK_MAX];
	uint32_t offs[WIRE_PACK_MAX], len, i;

	/* three frames: 64 and 0 bytes marked MORE, then 5 bytes ending the receive */
	len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 64, 1);
	len = pack_frame(len, WIRE_ONEWAY | WIRE_MORE, 0, 2);
	len = pack_frame(len, WIRE_ONEWAY, 5, 3);
	ck_assert_uint_eq(len, 3 * WIRE_HDR_LEN + 69);
	/* one message alone is not a pack: wire_hdr_parse() refuses it, wire_pack_split() splits it */
	ck_assert_int_eq(wire_hdr_parse(pk, len, &h[0]), -EPROTO);
	ck_assert_int_eq(wire_pack_split(pk, len, h, offs), 3);
	ck_assert_uint_eq(offs[0], 0);
	ck_assert_uint_eq(offs[1], WIRE_HDR_LEN + 64);
	ck_assert_uint_eq(offs[2], 2 * WIRE_HDR_LEN + 64);
	ck_assert_uint_eq(h[0].len, 64);
	ck_assert_uint_eq(h[1].len, 0);
	ck_assert_uint_eq(h[2].len, 5);
	for (i = 0; i < 3; i++) {
		ck_assert_uint_eq(h[i].type, WIRE_ONEWAY);	/* WIRE_MORE cleared */
		ck_assert_uint_eq(h[i].grant, 0x0203);
		ck_assert_uint_eq(offs[i] % WIRE_PACK_ALIGN, 0);
	}
	ck_assert_uint_eq(pk[offs[2] + WIRE_HDR_LEN + 4], 3);
	/* the receive cut anywhere: never accepted, never read beyond */
	for (i = 0; i < len; i++)
		ck_assert_int_eq(wire_pack_split(pk, i, h, offs), -EPROTO);
	/* bytes after the last frame */
	ck_assert_int_eq(wire_pack_split(pk, len + 1, h, offs), -EPROTO);
}
END_TEST

START_TEST(test_pack_invalid)
{
	struct wire_hdr h[WIRE_PACK_MAX];
	uint32_t offs[WIRE_PACK_MAX], len, i;

	/* a lone frame, MORE or not */
	len = pack_frame(0, WIRE_ONEWAY, 8, 0);
	ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
	len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 8, 0);
	ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
	/* a MORE payload not a multiple of 8 */
	len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 12, 0);
	len = pack_frame(len, WIRE_ONEWAY, 8, 0);
	ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
	/* requests, responses and pollcore's own types never travel packed */
	for (i = WIRE_REQUEST; i <= WIRE_TYPE_MAX; i++) {
		len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 8, 0);
		len = pack_frame(len, (uint8_t)i, 8, 0);
		ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
		len = pack_frame(0, (uint8_t)(i | WIRE_MORE), 8, 0);
		len = pack_frame(len, WIRE_ONEWAY, 8, 0);
		ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
	}
	/* a bad magic in a later frame */
	len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 8, 0);
	len = pack_frame(len, WIRE_ONEWAY, 8, 0);
	pk[WIRE_HDR_LEN + 8] ^= 1;
	ck_assert_int_eq(wire_pack_split(pk, len, h, offs), -EPROTO);
	/* a MORE frame whose length runs to the end (no room for the next header), or past it */
	len = pack_frame(0, WIRE_ONEWAY | WIRE_MORE, 32, 0);
	ck_assert_int_eq(wire_pack_split(pk, len + WIRE_HDR_LEN - 1, h, offs), -EPROTO);
	pack_frame(0, WIRE_ONEWAY | WIRE_MORE, UINT32_MAX - 7, 0);
	ck_assert_int_eq(wire_pack_split(pk, 64, h, offs), -EPROTO);
	/* WIRE_PACK_MAX frames split; one more is refused */
	for (len = 0, i = 0; i + 1 < WIRE_PACK_MAX; i++)
		len = pack_frame(len, WIRE_ONEWAY | WIRE_MORE, 8, (uint8_t)i);
	ck_assert_int_eq(wire_pack_split(pk, pack_frame(len, WIRE_ONEWAY, 8, 9), h, offs),
			 (int)WIRE_PACK_MAX);
	len = pack_frame(len, WIRE_ONEWAY | WIRE_MORE, 8, 9);
	ck_assert_int_eq(wire_pack_split(pk, pack_frame(len, WIRE_ONEWAY, 8, 10), h, offs), -EPROTO);
	/* and the peer must be told we take them */
	ck_assert(PC_CM_FEATURES & PC_CM_FEAT_PACK);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");

	tcase_add_test(tc, test_hdr_layout);
	tcase_add_test(tc, test_hdr_roundtrip);
	tcase_add_test(tc, test_hdr_short);
	tcase_add_test(tc, test_hdr_invalid);
	tcase_add_test(tc, test_grant_expand);
	tcase_add_test(tc, test_cm_roundtrip);
	tcase_add_test(tc, test_cm_raw_peers);
	tcase_add_test(tc, test_cm_max_large);
	tcase_add_test(tc, test_cm_features);
	tcase_add_test(tc, test_hdr_abort_type);
	tcase_add_test(tc, test_rndv_descriptor);
	tcase_add_test(tc, test_cm_invalid);
	tcase_add_test(tc, test_cm_reject);
	tcase_add_test(tc, test_pack_split);
	tcase_add_test(tc, test_pack_invalid);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
