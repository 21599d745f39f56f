// SPDX-License-Identifier: MIT
/*
 * fuzz suite: libFuzzer harness for the wire parsers (core/wire.h).
 *
 * Every input is read four ways, and each is checked against an oracle
 * written from the wire format, not from the parser:
 *  - as a received message: wire_hdr_parse() accepts it exactly when it is
 *    at least a header long, has the magic, a known type and a length equal
 *    to the bytes after the header (any grant), and then copies the header
 *    verbatim;
 *  - as a received pack: wire_pack_split() (pack_as_received());
 *  - as rdma_cm private data: wire_cm_parse() says raw (0) for a blob too
 *    short to hold the magic, or another magic; refuses (-EPROTO, with a
 *    message) a pollcore blob that is short or carries impossible parameters
 *    (window 0 or above WIRE_MAX_CREDITS, credits above the window, rkey 0,
 *    max_msg 0); and otherwise (1) hands back the blob's first 28 bytes;
 *  - as field values: wire_hdr_fill() and wire_cm_fill() followed by the
 *    parsers give the same values back.
 * A property that fails aborts with a message, which libFuzzer reports as a
 * crash with the input that caused it.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/meson.build);
 * run bounded by tools/run-tests (meson test --suite fuzz).
 */
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define PROP(cond, ...)                                                        \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz_wire: property failed: %s: ", #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			abort();                                               \
		}                                                              \
	} while (0)

/* Error messages are checked, not printed: a log line per input would be all we do. */
static void quiet(enum pc_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	pc_log_set_sink(quiet, NULL);
	return 0;
}


static uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void hdr_as_received(const uint8_t *data, size_t size)
{
	/* the data path passes a CQE's byte_len: never more than 32 bits */
	uint32_t len = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	struct wire_hdr h;
	bool valid;
	int ret;

	memset(&h, 0xa5, sizeof(h));
	ret = wire_hdr_parse(data, len, &h);
	PROP(ret == 0 || ret == -EPROTO, "returned %d", ret);
	valid = len >= WIRE_HDR_LEN && data[0] == PC_WIRE_MAGIC && data[1] <= WIRE_TYPE_MAX &&
		ld32(data + 4) == len - WIRE_HDR_LEN;
	PROP(valid == (ret == 0), "%u bytes: parser says %d, the format says %s", len, ret,
	     valid ? "valid" : "invalid");
	if (ret)
		return;
	PROP(h.magic == PC_WIRE_MAGIC, "magic 0x%x", h.magic);
	PROP(h.type <= WIRE_TYPE_MAX, "type %u", h.type);
	PROP(h.len == len - WIRE_HDR_LEN, "len %u of %u bytes", h.len, len);
	PROP(memcmp(&h, data, sizeof(h)) == 0, "header not copied verbatim");
}

/*
 * As a received pack: wire_pack_split() accepts it exactly when the frames,
 * walked by the format (each header, then its payload; WIRE_MORE on all but
 * the last, with a payload of a multiple of 8), are 2 to WIRE_PACK_MAX
 * one-way messages and the last ends the receive. Accepted frames lie
 * inside the receive, back to back.
 */
static void pack_as_received(const uint8_t *data, size_t size)
{
	uint32_t len = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	struct wire_hdr h[WIRE_PACK_MAX];
	uint32_t offs[WIRE_PACK_MAX];
	uint64_t off = 0;
	int ret, want = -EPROTO, n = 0, i;

	ret = wire_pack_split(data, len, h, offs);
	for (;;) {
		uint8_t type;
		uint32_t plen;

		if (n == (int)WIRE_PACK_MAX || len - off < WIRE_HDR_LEN)
			break;
		type = data[off + 1];
		plen = ld32(data + off + 4);
		if (data[off] != PC_WIRE_MAGIC || (type & 0x7f) != WIRE_ONEWAY)
			break;
		n++;
		if (!(type & WIRE_MORE)) {
			if (n >= 2 && off + WIRE_HDR_LEN + plen == len)
				want = n;
			break;
		}
		if (plen % 8 || off + 2 * WIRE_HDR_LEN + plen > len)
			break;
		off += WIRE_HDR_LEN + plen;
	}
	PROP(ret == want, "%u bytes: split says %d, the format says %d", len, ret, want);
	for (i = 0; i < ret; i++) {
		PROP(offs[i] == (i ? offs[i - 1] + WIRE_HDR_LEN + h[i - 1].len : 0),
		     "frame %d at %u", i, offs[i]);
		PROP(h[i].type == WIRE_ONEWAY && h[i].magic == PC_WIRE_MAGIC, "frame %d type %u", i,
		     h[i].type);
		PROP((uint64_t)offs[i] + WIRE_HDR_LEN + h[i].len <= len, "frame %d past the end", i);
	}
}

static void cm_as_received(const uint8_t *data, size_t size)
{
	struct wire_cm_priv out, untouched;
	uint32_t credits, rkey, max_msg, window;
	int ret, want;

	memset(&untouched, 0x5a, sizeof(untouched));
	out = untouched;
	ret = wire_cm_parse("fuzzdev", data, size, &out);
	if (size < 4 || ld32(data) != PC_CM_MAGIC) {
		want = 0;
	} else if (size < offsetof(struct wire_cm_priv, max_large)) {
		want = -EPROTO;
	} else {
		credits = ld32(data + 4);
		rkey = ld32(data + 16);
		max_msg = ld32(data + 20);
		window = ld32(data + 24);
		want = window >= 1 && window <= WIRE_MAX_CREDITS && credits <= window && rkey &&
		       max_msg ? 1 : -EPROTO;
	}
	PROP(ret == want, "%zu bytes: parser says %d, the format says %d", size, ret, want);
	if (ret == 1) {
		/*
		 * Older layouts end after window (28 bytes) or max_large (32): a
		 * field missing or cut short reads as 0, whole fields verbatim.
		 */
		size_t whole = size >= sizeof(out) ? sizeof(out)
			       : size >= offsetof(struct wire_cm_priv, features)
				       ? offsetof(struct wire_cm_priv, features)
				       : offsetof(struct wire_cm_priv, max_large);

		PROP(memcmp(&out, data, whole) == 0, "private data not copied verbatim");
		PROP(whole > offsetof(struct wire_cm_priv, max_large) || out.max_large == 0,
		     "missing max_large read as %u", out.max_large);
		PROP(whole == sizeof(out) || out.features == 0, "missing features read as 0x%x",
		     out.features);
		PROP(out.magic == PC_CM_MAGIC, "magic 0x%x", out.magic);
		PROP(out.window >= 1 && out.window <= WIRE_MAX_CREDITS, "window %u", out.window);
		PROP(out.credits <= out.window, "credits %u over window %u", out.credits, out.window);
		PROP(out.credit_rkey != 0, "rkey 0");
		PROP(out.max_msg != 0, "max_msg 0");
		return;
	}
	/* raw or refused: @out is left alone */
	PROP(memcmp(&out, &untouched, sizeof(out)) == 0, "@out written for a result of %d", ret);
	if (ret == -EPROTO)
		PROP(strstr(pc_last_error(), "fuzzdev") && strstr(pc_last_error(), "invalid"),
		     "refusal without a reason naming the device: '%s'", pc_last_error());
}

/* Field values taken from the input, zero-padded. */
struct fields {
	uint8_t type;
	uint8_t pad;
	uint16_t grant;
	uint32_t len;
	uint64_t req_id;
	uint32_t credits;
	uint32_t rkey;
	uint64_t addr;
	uint32_t max_msg;
	uint32_t window;
};

static void roundtrip(const uint8_t *data, size_t size)
{
	static uint8_t msg[WIRE_HDR_LEN + 1024 + 1];
	struct wire_cm_priv p, out;
	struct fields f = { 0 };
	struct wire_hdr h;
	uint32_t len;
	int ret;

	memcpy(&f, data, size < sizeof(f) ? size : sizeof(f));
	f.len %= 1025;
	len = WIRE_HDR_LEN + f.len;
	memset(msg, 0xee, sizeof(msg));
	wire_hdr_fill((struct wire_hdr *)(void *)msg, f.type, f.len, f.req_id, f.grant);
	ret = wire_hdr_parse(msg, len, &h);
	PROP((ret == 0) == (f.type <= WIRE_TYPE_MAX), "filled type %u: parse says %d", f.type, ret);
	if (!ret)
		PROP(h.type == f.type && h.len == f.len && h.req_id == f.req_id && h.grant == f.grant,
		     "header came back as type %u len %u req_id %llu grant %u", h.type, h.len,
		     (unsigned long long)h.req_id, h.grant);
	/* one byte more or less than the header says is refused */
	PROP(wire_hdr_parse(msg, len + 1, &h) == -EPROTO, "len + 1 accepted");
	PROP(wire_hdr_parse(msg, len - 1, &h) == -EPROTO, "len - 1 accepted");

	wire_cm_fill(&p, f.credits, f.window, f.addr, f.rkey, f.max_msg);
	memset(&out, 0, sizeof(out));
	ret = wire_cm_parse("fuzzdev", &p, sizeof(p), &out);
	if (f.window >= 1 && f.window <= WIRE_MAX_CREDITS && f.credits <= f.window && f.rkey &&
	    f.max_msg) {
		PROP(ret == 1, "valid parameters refused: %d", ret);
		PROP(out.credits == f.credits && out.credit_addr == f.addr &&
		     out.credit_rkey == f.rkey && out.max_msg == f.max_msg &&
		     out.window == f.window, "private data came back different");
	} else {
		PROP(ret == -EPROTO,
		     "invalid parameters (credits %u window %u rkey %u max_msg %u): %d",
		     f.credits, f.window, f.rkey, f.max_msg, ret);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hdr_as_received(data, size);
	pack_as_received(data, size);
	cm_as_received(data, size);
	roundtrip(data, size);
	return 0;
}
