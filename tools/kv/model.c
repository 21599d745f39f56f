// SPDX-License-Identifier: MIT
/*
 * pollcore-kv client: the key-value logic, apart from the plumbing
 * (client.c). It knows what the server must hold for each key and checks
 * every answer against it.
 *
 * A key has one call in flight at a time and travels on one connection, so
 * every PUT writes the key's next version, whose value is derived from
 * (key, version). A call that ends without its response (deadline, cancel,
 * close) leaves its PUT or DEL maybe applied, maybe not: the key is
 * uncertain until its next response, which may then show the state before
 * or after any of those calls, never an older version.
 */
#include "kv.h"
#include "client.h"

#include <inttypes.h>

void kv_request(struct key_state *k, uint64_t key, uint32_t r, struct pc_msg *m)
{
	struct kv_hdr h = {.code = r < 50 ? KV_GET : r < 85 ? KV_PUT : KV_DEL, .key = key};

	if (h.code == KV_PUT) {
		h.ver = ++k->maxver;
		h.vlen = kv_vlen(key, h.ver);
		kv_vfill((uint8_t *)m->data + sizeof(h), key, h.ver, h.vlen);
	}
	memcpy(m->data, &h, sizeof(h));
	m->len = (uint32_t)sizeof(h) + h.vlen;
	k->op = h.code;
	k->ver = h.ver;
}

enum kv_verdict kv_answer(struct key_state *k, uint64_t key, const struct pc_msg *m, char *why,
			  size_t n)
{
	uint32_t got = 0, bad;
	struct kv_hdr h;
	bool ok;

	if (m->len < sizeof(h) || (memcpy(&h, m->data, sizeof(h)), h.key != key)) {
		snprintf(why, n, "key %" PRIu64 ": a response of %u bytes for another key", key,
			 m->len);
		return KV_MISMATCH;
	}
	if (h.code == KV_FULL || h.code == KV_BAD) {
		snprintf(why, n, "key %" PRIu64 ": the server refused the request (%s)", key,
			 h.code == KV_FULL ? "shard full" : "malformed");
		return KV_REFUSED;
	}
	switch (k->op) {
	case KV_PUT:
		ok = h.code == KV_OK;
		got = k->ver;
		break;
	case KV_DEL:
		ok = k->uncertain || h.code == (k->base ? KV_OK : KV_NOTFOUND);
		ok = ok && (h.code == KV_OK || h.code == KV_NOTFOUND);
		break;
	default: /* GET */
		if (h.code == KV_NOTFOUND) {
			ok = m->len == sizeof(h) && (!k->base || (k->uncertain && k->unc_del));
			break;
		}
		got = h.ver;
		ok = h.code == KV_OK && got && got <= k->maxver &&
		     (got == k->base || (k->uncertain && got > k->floor));
		if (!ok)
			break;
		if (h.vlen != kv_vlen(key, got) || m->len != sizeof(h) + h.vlen) {
			snprintf(why, n, "key %" PRIu64 " version %u: %u bytes of value, expected %u",
				 key, got, h.vlen, kv_vlen(key, got));
			return KV_MISMATCH;
		}
		bad = kv_vcheck((const uint8_t *)m->data + sizeof(h), key, got, h.vlen);
		if (bad != h.vlen) {
			snprintf(why, n,
				 "key %" PRIu64 " version %u: value byte %u is 0x%02x, expected 0x%02x",
				 key, got, bad, ((const uint8_t *)m->data)[sizeof(h) + bad],
				 kv_vbyte(key, got, bad));
			return KV_MISMATCH;
		}
		break;
	}
	if (!ok) {
		snprintf(why, n,
			 "key %" PRIu64 ": op %u answered %u (version %u), expected version %u%s "
			 "(newest made %u)",
			 key, k->op, h.code, h.ver, k->base, k->uncertain ? " or a newer one" : "",
			 k->maxver);
		return KV_MISMATCH;
	}
	/* the answer is what the server holds now */
	k->base = got;
	k->floor = k->maxver;
	k->uncertain = k->unc_del = false;
	return KV_RIGHT;
}

bool kv_unanswered(struct key_state *k, uint64_t key, const struct pc_msg *m)
{
	struct kv_hdr h;

	if (k->op != KV_GET)
		k->uncertain = true;
	if (k->op == KV_DEL)
		k->unc_del = true;
	/* the request comes back as it was sent */
	if (m->len < sizeof(h))
		return false;
	memcpy(&h, m->data, sizeof(h));
	return h.key == key && h.code == k->op;
}
